//! Log output with secrets redacted: a `MakeWriter` wrapper that holds each log event's
//! bytes until the event is written whole, then passes them through the process-wide
//! redactor (`agentplane_core::secret::redact`) on their way to the real writer.
//!
//! tracing's formatter writes one event through one writer and then drops it, so a
//! secret split across several `write` calls of one line is still caught. The redactor
//! is looked up per line: secrets installed after logging started (the runtime loads
//! them later) are redacted from then on. What must not live here: choosing what to
//! log, and knowing any secret.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// Wraps a `MakeWriter` so every log line it writes is redacted.
pub struct Redacted<M> {
    inner: M,
}

impl<M> Redacted<M> {
    /// Redacts everything written through `inner`.
    pub fn new(inner: M) -> Self {
        Self { inner }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Redacted<M> {
    type Writer = RedactingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter {
            inner: self.inner.make_writer(),
            pending: Vec::new(),
        }
    }
}

/// One event's writer: buffers until flushed or dropped, then writes the redacted text.
pub struct RedactingWriter<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    fn emit(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.pending);
        let text = String::from_utf8_lossy(&bytes);
        match agentplane_core::secret::redact(&text) {
            std::borrow::Cow::Borrowed(_) => self.inner.write_all(&bytes)?,
            std::borrow::Cow::Owned(redacted) => self.inner.write_all(redacted.as_bytes())?,
        }
        self.inner.flush()
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        // A log line that cannot be written has nowhere to report that either.
        let _ = self.emit();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use agentplane_core::secret::{Redactor, install};

    use super::*;

    /// A `MakeWriter` collecting everything in memory.
    #[derive(Clone, Default)]
    struct Collect(Arc<Mutex<Vec<u8>>>);

    impl Write for Collect {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Collect {
        type Writer = Collect;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[test]
    fn log_lines_are_redacted_even_when_written_in_pieces() {
        install(Redactor::new([("api_token", "tok-LOG-91xz")]).expect("redactor"));
        let out = Collect::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(Redacted::new(out.clone()))
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(header = "Bearer tok-LOG-91xz", "calling with tok-LOG-91xz");
        });
        // Pieces of one event: the value spans two writes.
        let made = Redacted::new(out.clone());
        let mut writer = made.make_writer();
        writer.write_all(b"split tok-LOG").expect("write");
        writer.write_all(b"-91xz end\n").expect("write");
        drop(writer);

        let text = String::from_utf8(out.0.lock().expect("lock").clone()).expect("utf-8");
        assert!(!text.contains("tok-LOG-91xz"), "{text}");
        assert!(text.contains("calling with [REDACTED:api_token]"), "{text}");
        assert!(text.contains("Bearer [REDACTED:api_token]"), "{text}");
        assert!(text.contains("split [REDACTED:api_token] end"), "{text}");
    }
}
