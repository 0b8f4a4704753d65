//! A Server-Sent Events decoder: bytes in, the `data` of complete events out.
//!
//! Follows the event-stream grammar as servers actually write it: `data:` with or
//! without a space, LF, CRLF or lone CR line ends (a CR at the end of one read and its
//! LF at the start of the next are one line end), comment lines (`: keepalive`),
//! several events per read and events split across reads. Other fields (`event:`,
//! `id:`, `retry:`) are ignored. What one event may buffer is bounded. This module
//! knows nothing of OpenAI's chunk format; that is `openai_compatible/wire.rs`.

/// Decodes one response body. Feed every read in order, then call `finish`.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous read ended with CR: a LF starting the next read ends nothing.
    skip_lf: bool,
    limit: usize,
}

impl SseDecoder {
    /// A decoder refusing events (and lines) longer than `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            skip_lf: false,
            limit,
        }
    }

    /// Takes one read of the body; returns the data of every event it completed.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<String>, String> {
        let mut events = Vec::new();
        if self.skip_lf {
            self.skip_lf = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(end) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.push_line_bytes(&bytes[..end])?;
            let crlf = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if crlf {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    None => self.skip_lf = true,
                    Some(_) => {}
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.end_line(&line)? {
                events.push(event);
            }
        }
        self.push_line_bytes(bytes)?;
        Ok(events)
    }

    /// The body ended: the data of an event left without its blank line, if any.
    /// Servers that omit the final blank line are common enough to accept.
    pub(crate) fn finish(&mut self) -> Result<Option<String>, String> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty()
            && let Some(event) = self.end_line(&line)?
        {
            return Ok(Some(event));
        }
        self.dispatch()
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        if self.line.len() + self.data.len() + bytes.len() > self.limit {
            return Err(format!(
                "a stream event is larger than {} bytes",
                self.limit
            ));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, line: &[u8]) -> Result<Option<String>, String> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Result<Option<String>, String> {
        if !self.has_data {
            return Ok(None);
        }
        self.has_data = false;
        let data = std::mem::take(&mut self.data);
        String::from_utf8(data)
            .map(Some)
            .map_err(|_| "a stream event is not valid UTF-8".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(body: &[u8], piece: usize) -> Vec<String> {
        let mut decoder = SseDecoder::new(1024);
        let mut events = Vec::new();
        for chunk in body.chunks(piece) {
            events.extend(decoder.feed(chunk).expect("feed"));
        }
        events.extend(decoder.finish().expect("finish"));
        events
    }

    #[test]
    fn every_split_of_a_mixed_body_gives_the_same_events() {
        let body = b": keepalive\r\n\r\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\n\nevent: x\nid: 3\ndata: one\ndata: two\r\rdata: [DONE]\n\n";
        let expected = vec!["{\"a\":1}", "{\"b\":2}", "one\ntwo", "[DONE]"];
        for piece in 1..=body.len() {
            assert_eq!(
                decode_in_pieces(body, piece),
                expected,
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn a_last_event_without_blank_line_is_kept() {
        assert_eq!(
            decode_in_pieces(b"data: x\n\ndata: tail", 4),
            vec!["x", "tail"]
        );
        assert_eq!(decode_in_pieces(b"data: tail\n", 100), vec!["tail"]);
        assert!(decode_in_pieces(b": only a comment", 3).is_empty());
    }

    #[test]
    fn data_with_only_one_space_removed() {
        assert_eq!(decode_in_pieces(b"data:  two\n\n", 100), vec![" two"]);
        assert_eq!(decode_in_pieces(b"data\n\n", 100), vec![""]);
    }

    #[test]
    fn oversized_events_and_lines_are_refused() {
        let mut decoder = SseDecoder::new(16);
        let err = decoder
            .feed(b"data: 0123456789abcdefghij\n\n")
            .expect_err("too long");
        assert!(err.contains("16 bytes"), "{err}");

        let mut decoder = SseDecoder::new(16);
        assert!(decoder.feed(b"data: 01234567").is_ok());
        assert!(decoder.feed(b"89abcdef").is_err());

        let mut decoder = SseDecoder::new(16);
        assert!(decoder.feed(b"data: 0123456\n").is_ok());
        assert!(decoder.feed(b"data: 0123456\n").is_err());
    }

    #[test]
    fn invalid_utf8_is_an_error_not_a_panic() {
        let mut decoder = SseDecoder::new(64);
        assert!(decoder.feed(b"data: \xff\xfe\n\n").is_err());
    }
}
