//! Entry points for the fuzz targets in `fuzz/` (not an API): each runs one parser of a
//! model server's answer on raw bytes, the way the adapters run it on a response body.
//! Results are dropped; a fuzz target only looks for panics.

use crate::openai_compatible::{MAX_RESPONSE_BYTES, listing};
use crate::sse::SseDecoder;
use crate::{anthropic, openai_compatible};

/// Which provider's stream format the events are read as.
#[derive(Clone, Copy, Debug)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

/// A streamed body, delivered in reads of `piece` bytes (at least 1), through the SSE
/// decoder and the provider's stream assembly, as `read_stream` does.
pub fn stream(wire: Wire, body: &[u8], piece: usize) {
    let mut decoder = SseDecoder::new(MAX_RESPONSE_BYTES);
    let mut events = Vec::new();
    for chunk in body.chunks(piece.max(1)) {
        match decoder.feed(chunk) {
            Ok(more) => events.extend(more),
            Err(_) => return,
        }
    }
    match decoder.finish() {
        Ok(last) => events.extend(last),
        Err(_) => return,
    }
    match wire {
        Wire::OpenAi => {
            let mut assembly = openai_compatible::wire::StreamAssembly::new("m");
            for event in &events {
                if assembly.apply(event).is_err() || assembly.is_done() {
                    break;
                }
            }
            let _ = assembly.finish();
        }
        Wire::Anthropic => {
            let mut assembly = anthropic::wire::StreamAssembly::new("m");
            for event in &events {
                if assembly.apply(event).is_err() || assembly.is_done() {
                    break;
                }
            }
            let _ = assembly.finish();
        }
    }
}

/// A whole (non-streamed) answer body, and the same bytes as a model list.
pub fn answer(wire: Wire, body: &[u8]) {
    match wire {
        Wire::OpenAi => {
            let _ = openai_compatible::wire::parse_completion(body, "m");
        }
        Wire::Anthropic => {
            let _ = anthropic::wire::parse_message(body, "m");
        }
    }
    let _ = listing::parse_model_list(body);
}
