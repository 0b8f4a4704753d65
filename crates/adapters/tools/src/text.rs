//! Bytes to text for the model: binary sniffing, and cutting at a byte cap without
//! splitting a UTF-8 character. Shared by every ensemble so that "binary" and
//! "truncated" mean the same thing in every tool's output.
//!
//! Nothing here reads files or sockets; callers hand in bytes they already bounded.

/// How many leading bytes decide whether content is binary.
pub(crate) const SNIFF_BYTES: usize = 8192;

/// Whether content looks binary: a NUL byte in its first [`SNIFF_BYTES`] bytes, the
/// same rule git and grep use. Text in UTF-16 therefore counts as binary.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

/// The largest `end <= cap` such that `bytes[..end]` does not end inside a UTF-8
/// character (when `cap` falls inside one, the whole character is dropped).
pub(crate) fn char_boundary(bytes: &[u8], cap: usize) -> usize {
    if cap >= bytes.len() {
        return bytes.len();
    }
    let mut end = cap;
    // A continuation byte (10xxxxxx) at `end` means a character started before it.
    // Characters are at most 4 bytes, so invalid data cannot make this loop long.
    let mut steps = 0;
    while end > 0 && steps < 3 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
        steps += 1;
    }
    end
}

/// At most `cap` bytes of `bytes` as text (invalid UTF-8 replaced), and whether
/// anything was cut.
pub(crate) fn prefix(bytes: &[u8], cap: usize) -> (String, bool) {
    let end = char_boundary(bytes, cap);
    (
        String::from_utf8_lossy(&bytes[..end]).into_owned(),
        end < bytes.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_never_splits_a_character() {
        let text = "aé€😀".as_bytes(); // 1 + 2 + 3 + 4 bytes
        assert_eq!(char_boundary(text, 0), 0);
        assert_eq!(char_boundary(text, 1), 1);
        assert_eq!(char_boundary(text, 2), 1);
        assert_eq!(char_boundary(text, 3), 3);
        assert_eq!(char_boundary(text, 5), 3);
        assert_eq!(char_boundary(text, 6), 6);
        assert_eq!(char_boundary(text, 9), 6);
        assert_eq!(char_boundary(text, 10), 10);
        assert_eq!(char_boundary(text, 100), 10);
        assert_eq!(prefix(text, 5), ("aé".to_string(), true));
        assert_eq!(prefix(text, 10), ("aé€😀".to_string(), false));
    }

    #[test]
    fn nul_in_the_head_means_binary() {
        assert!(looks_binary(b"PK\x03\x04\x00"));
        assert!(!looks_binary("plain text, ünïcode".as_bytes()));
        let mut late = vec![b'a'; SNIFF_BYTES];
        late.push(0);
        assert!(!looks_binary(&late));
    }
}
