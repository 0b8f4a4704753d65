//! The agent's stdio as lines for the SDK's `Lines` transport: a bounded reader (an
//! agent can never make us buffer an endless line) and a writer that ends each message
//! with a newline.
//!
//! Nothing here parses JSON; malformed lines are the SDK's to refuse.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::{Sink, Stream};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest line accepted from an agent; longer ones are skipped whole.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Lines read from `reader`, each without its newline. A line over `max` bytes is
/// dropped (counted in `skipped`) and reading goes on after its end; invalid UTF-8 is
/// replaced, so the SDK sees it as a malformed message rather than an I/O error.
pub fn bounded_lines<R>(
    reader: R,
    max: usize,
    skipped: Arc<AtomicU64>,
) -> impl Stream<Item = io::Result<String>> + Send + 'static
where
    R: AsyncRead + Send + Unpin + 'static,
{
    futures_util::stream::unfold(BufReader::new(reader), move |mut reader| {
        let skipped = skipped.clone();
        async move {
            let mut line: Vec<u8> = Vec::new();
            let mut oversized = false;
            loop {
                let buffer = match reader.fill_buf().await {
                    Ok(buffer) => buffer,
                    Err(e) => return Some((Err(e), reader)),
                };
                if buffer.is_empty() {
                    // End of output: a last unterminated line still counts.
                    if line.is_empty() || oversized {
                        return None;
                    }
                    let text = String::from_utf8_lossy(&line).into_owned();
                    return Some((Ok(text), reader));
                }
                let (chunk, found) = match buffer.iter().position(|b| *b == b'\n') {
                    Some(at) => (&buffer[..at], Some(at)),
                    None => (buffer, None),
                };
                if !oversized {
                    if line.len() + chunk.len() > max {
                        oversized = true;
                        line = Vec::new();
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                let used = found.map_or(chunk.len(), |at| at + 1);
                reader.consume(used);
                if found.is_some() {
                    if oversized {
                        skipped.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            max,
                            "an ACP agent sent a line over the limit; it was skipped"
                        );
                        oversized = false;
                        continue;
                    }
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    let text = String::from_utf8_lossy(&line).into_owned();
                    return Some((Ok(text), reader));
                }
            }
        }
    })
}

/// A sink writing each message as one line to `writer`.
pub fn line_sink<W>(writer: W) -> impl Sink<String, Error = io::Error> + Send + 'static
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    futures_util::sink::unfold(writer, |mut writer, line: String| async move {
        writer.write_all(line.as_bytes()).await?;
        writer.write_all(b"\n").await?;
        writer.flush().await?;
        Ok::<_, io::Error>(writer)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn oversized_lines_are_skipped_and_reading_goes_on() {
        let input = format!("{}\nshort\n{}\nlast", "x".repeat(100), "y".repeat(50));
        let skipped = Arc::new(AtomicU64::new(0));
        let lines: Vec<String> = bounded_lines(
            std::io::Cursor::new(input.into_bytes()),
            60,
            skipped.clone(),
        )
        .map(|l| l.expect("line"))
        .collect()
        .await;
        assert_eq!(
            lines,
            vec!["short".to_owned(), "y".repeat(50), "last".to_owned()]
        );
        assert_eq!(skipped.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn invalid_utf8_becomes_replacement_characters_not_an_error() {
        let skipped = Arc::new(AtomicU64::new(0));
        let lines: Vec<io::Result<String>> =
            bounded_lines(std::io::Cursor::new(vec![0xff, 0xfe, b'\n']), 60, skipped)
                .collect()
                .await;
        assert_eq!(lines.len(), 1);
        assert!(lines[0].as_ref().is_ok_and(|l| l.contains('\u{fffd}')));
    }
}
