//! A model server's answer in the OpenAI format: the first byte sets the size of each
//! read, the rest is the body, read as an SSE stream and as a whole answer.
#![no_main]

use agentplane_providers::fuzzing::{Wire, answer, stream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((piece, body)) = data.split_first() else {
        return;
    };
    stream(Wire::OpenAi, body, usize::from(*piece));
    answer(Wire::OpenAi, body);
});
