//! Which model a turn uses: the configured one if the server offers it, otherwise the best
//! chat model it does offer (ADR-004: first run works with whatever the user has pulled).
//!
//! Pure functions over a listing the `ChatModel` port already fetched; nothing here talks
//! to a server. Whether the chosen model can call tools is learned from the server's
//! answer (`ModelError::NoToolSupport`), not guessed here.

use std::cmp::Ordering;

use crate::ports::{ModelError, ModelInfo};

/// Ollama adds this tag to a name given without one, so `llama3.1` and `llama3.1:latest`
/// name the same model.
const IMPLICIT_TAG: &str = ":latest";

/// Substrings of ids or families that mark a model which cannot chat.
const NON_CHAT_SUBSTRINGS: [&str; 8] = [
    "embed",
    "bert",
    "minilm",
    "rerank",
    "whisper",
    "moderation",
    "dall-e",
    "nomic-embed",
];

/// Non-chat markers too short to match inside other words: they count only as a whole
/// `-`/`:`/`_`/`/`-separated segment (`multilingual-e5-large`, `bge-m3`, `tts-1`).
const NON_CHAT_SEGMENTS: [&str; 3] = ["e5", "bge", "tts"];

/// A parameter count in billions, from a server's `parameter_size` (`"8.0B"`, `"135M"`) or
/// from a model id (`"llama3.1:8b"`, `"SmolLM2-135M-Instruct"`, `"mixtral:8x7b"` → 56).
///
/// The number must stand alone: not glued to a letter or a preceding number (`qwen2.5`,
/// `v1.5` are versions), and its unit (`B`, `M`, `T`, any case) must end the word (`8bit`
/// is not a size). `K` is not a unit here: in ids it is a context length (`32k`). The first
/// such size in the string wins. Decimals are read whole: `"8.0B"` is 8, never 80.
pub fn parse_parameter_size(s: &str) -> Option<f64> {
    let bytes = s.as_bytes();
    (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit())
        .filter(|&i| i == 0 || !glued(bytes[i - 1]) && bytes[i - 1] != b'.')
        .find_map(|i| size_at(bytes, i))
}

/// The size written at `start`: `N[.N][xN[.N]]` then a unit, then the end of the word.
fn size_at(bytes: &[u8], start: usize) -> Option<f64> {
    let (first, mut at) = number_at(bytes, start)?;
    let mut billions = first;
    if matches!(bytes.get(at), Some(b'x' | b'X')) {
        let (experts, after) = number_at(bytes, at + 1)?;
        billions *= experts;
        at = after;
    }
    let scale = match bytes.get(at)? {
        b'b' | b'B' => 1.0,
        b'm' | b'M' => 1e-3,
        b't' | b'T' => 1e3,
        _ => return None,
    };
    if bytes.get(at + 1).copied().is_some_and(glued) {
        return None;
    }
    let billions = billions * scale;
    (billions.is_finite() && billions > 0.0).then_some(billions)
}

/// Whether a byte continues a word: a letter, a digit, or part of a non-ASCII character.
fn glued(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || !byte.is_ascii()
}

/// A decimal number at `start` and the index just past it.
fn number_at(bytes: &[u8], start: usize) -> Option<(f64, usize)> {
    let digits_end = |from: usize| {
        (from..bytes.len())
            .find(|&i| !bytes[i].is_ascii_digit())
            .unwrap_or(bytes.len())
    };
    let mut end = digits_end(start);
    if end == start {
        return None;
    }
    if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
        end = digits_end(end + 1);
    }
    // Only ASCII digits and a dot lie in start..end.
    let text = std::str::from_utf8(&bytes[start..end]).ok()?;
    Some((text.parse().ok()?, end))
}

/// Whether a model can chat: embedding, reranking, speech and image models are listed by
/// the same endpoint but fail or answer nonsense to a chat call, so they are never chosen
/// by default.
pub fn is_chat_model(info: &ModelInfo) -> bool {
    std::iter::once(&info.id)
        .chain(&info.families)
        .all(|name| !names_non_chat(&name.to_ascii_lowercase()))
}

fn names_non_chat(name: &str) -> bool {
    NON_CHAT_SUBSTRINGS
        .iter()
        .any(|marker| name.contains(marker))
        || name
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '.')
            .any(|segment| NON_CHAT_SEGMENTS.contains(&segment))
}

/// The model to use: `wanted` when offered (also across Ollama's implicit `:latest` tag,
/// returned as the server spells it), else the largest chat model on offer, since the
/// largest is the likeliest to follow instructions and call tools well. Models of unknown
/// size rank after sized ones; ties go to the smaller id, so the choice is deterministic.
/// An empty `wanted` just picks the best. `NoModel` lists every offered id so the user
/// can pick one.
pub fn choose_model(wanted: &str, offered: &[ModelInfo]) -> Result<String, ModelError> {
    if !wanted.is_empty() {
        let wanted_name = without_implicit_tag(wanted);
        if let Some(info) = offered.iter().find(|info| info.id == wanted).or_else(|| {
            offered
                .iter()
                .find(|info| without_implicit_tag(&info.id) == wanted_name)
        }) {
            return Ok(info.id.clone());
        }
    }
    offered
        .iter()
        .filter(|info| is_chat_model(info))
        .map(|info| (info, size_of(info)))
        .min_by(|(a, a_size), (b, b_size)| rank(a_size, b_size).then_with(|| a.id.cmp(&b.id)))
        .map(|(info, _)| info.id.clone())
        .ok_or_else(|| ModelError::NoModel {
            reason: if wanted.is_empty() {
                "the server offers no chat model".to_owned()
            } else {
                format!("`{wanted}` is not offered and neither is any other chat model")
            },
            available: offered.iter().map(|info| info.id.clone()).collect(),
        })
}

fn without_implicit_tag(id: &str) -> &str {
    id.strip_suffix(IMPLICIT_TAG).unwrap_or(id)
}

fn size_of(info: &ModelInfo) -> Option<f64> {
    info.parameter_size
        .as_deref()
        .and_then(parse_parameter_size)
        .or_else(|| parse_parameter_size(&info.id))
}

/// Better first: larger known sizes, then unknown sizes.
fn rank(a: &Option<f64>, b: &Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => b.total_cmp(a),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str) -> ModelInfo {
        ModelInfo {
            id: id.to_owned(),
            ..ModelInfo::default()
        }
    }

    fn sized(id: &str, size: &str) -> ModelInfo {
        ModelInfo {
            parameter_size: Some(size.to_owned()),
            ..model(id)
        }
    }

    fn assert_size(s: &str, billions: f64) {
        let got = parse_parameter_size(s).unwrap_or_else(|| panic!("no size in {s:?}"));
        assert!((got - billions).abs() < 1e-9, "{s:?}: {got} != {billions}");
    }

    #[test]
    fn parameter_size_strings_as_servers_write_them() {
        assert_size("8.0B", 8.0); // seed 000's bug: read as 80 once.
        assert_size("135M", 0.135);
        assert_size("134.52M", 0.13452);
        assert_size("1.5b", 1.5);
        assert_size("70B", 70.0);
        assert_size("8x7B", 56.0);
        assert_size("1.8T", 1800.0);
    }

    #[test]
    fn parameter_size_from_ids() {
        assert_size("llama3.1:8b", 8.0);
        assert_size("qwen2.5:14b-instruct-q4", 14.0);
        assert_size("SmolLM2-135M-Instruct", 0.135);
        assert_size("mixtral:8x22b", 176.0);
        assert_size("Qwen2.5-0.5B-Instruct", 0.5);
        assert_size("meta-llama/Llama-3.2-1B-Instruct", 1.0);
        assert_size("gpt-oss-120b", 120.0);
        assert_size("mistral-7b-32k", 7.0);
        assert_size("deepseek-r1:1.5b", 1.5);
    }

    #[test]
    fn versions_quantizations_and_garbage_are_not_sizes() {
        for s in [
            "",
            "llama3.1",
            "qwen2.5:latest",
            "v1.5",
            "nomic-embed-text:v1.5",
            "bge-m3",
            "q4_K_M",
            "8bit",
            "32k",
            "B",
            "8.",
            "0B",
            "gpt-4o",
            "x8b",
            "é8b",
            "8é",
        ] {
            assert_eq!(parse_parameter_size(s), None, "{s:?}");
        }
        // A number too long for f64 is rejected, not infinite.
        assert_eq!(parse_parameter_size(&format!("{}B", "9".repeat(400))), None);
        // Multi-byte characters around a size do not confuse the scan.
        assert_size("modèle-7b-ünï", 7.0);
    }

    #[test]
    fn embedding_speech_and_rerank_models_are_not_chat_models() {
        for id in [
            "nomic-embed-text:latest",
            "mxbai-embed-large",
            "text-embedding-3-small",
            "all-minilm:22m",
            "bge-m3",
            "multilingual-e5-large",
            "whisper-1",
            "tts-1-hd",
            "jina-reranker-v2",
            "BERT-base",
        ] {
            assert!(!is_chat_model(&model(id)), "{id}");
        }
        let by_family = ModelInfo {
            families: vec!["nomic-bert".to_owned()],
            ..model("some-model")
        };
        assert!(!is_chat_model(&by_family));
        for id in [
            "llama3.1:8b",
            "qwen2.5:14b",
            "gpt-4o",
            "mistral",
            "SmolLM2-135M-Instruct",
        ] {
            assert!(is_chat_model(&model(id)), "{id}");
        }
    }

    #[test]
    fn the_wanted_model_is_chosen_when_offered_across_latest_tags() {
        let offered = [
            sized("big:70b", "70B"),
            model("llama3.1:latest"),
            model("qwen2.5"),
        ];
        assert_eq!(choose_model("big:70b", &offered).unwrap(), "big:70b");
        assert_eq!(
            choose_model("llama3.1", &offered).unwrap(),
            "llama3.1:latest"
        );
        assert_eq!(choose_model("qwen2.5:latest", &offered).unwrap(), "qwen2.5");
        // Explicitly wanted wins even over the chat filter: the user asked for it.
        let offered = [model("nomic-embed-text"), model("llama3.1:8b")];
        assert_eq!(
            choose_model("nomic-embed-text", &offered).unwrap(),
            "nomic-embed-text"
        );
    }

    #[test]
    fn otherwise_the_largest_chat_model_wins_and_8_0b_is_not_80b() {
        let offered = [
            sized("eight", "8.0B"),
            sized("fourteen", "14B"),
            model("mystery"),
            sized("embed-huge", "100B"),
            model("qwen2.5:32b"),
        ];
        assert_eq!(choose_model("missing:1b", &offered).unwrap(), "qwen2.5:32b");
        assert_eq!(choose_model("", &offered[..3]).unwrap(), "fourteen");
        // 8.0B against 12B: 12 wins only if 8.0 is read as 8, not 80.
        let offered = [sized("a", "8.0B"), sized("b", "12B")];
        assert_eq!(choose_model("", &offered).unwrap(), "b");
    }

    #[test]
    fn parameter_size_beats_the_id_and_unknown_sizes_rank_last() {
        let offered = [
            sized("tiny:70b", "135M"),
            model("llama3.1:8b"),
            model("aaa-unknown"),
        ];
        assert_eq!(choose_model("", &offered).unwrap(), "llama3.1:8b");
        let offered = [model("zeta"), model("alpha"), sized("mu", "garbled")];
        assert_eq!(choose_model("", &offered).unwrap(), "alpha");
    }

    #[test]
    fn ties_go_to_the_smaller_id_whatever_the_order() {
        let forward = [sized("b", "7B"), sized("a", "7.0B"), sized("c", "7B")];
        let mut backward = forward.clone();
        backward.reverse();
        assert_eq!(choose_model("", &forward).unwrap(), "a");
        assert_eq!(choose_model("", &backward).unwrap(), "a");
    }

    #[test]
    fn no_chat_model_is_an_error_listing_every_offered_id() {
        let offered = [model("nomic-embed-text"), model("bge-m3")];
        let err = choose_model("llama3.1", &offered).unwrap_err();
        let ModelError::NoModel { reason, available } = &err else {
            panic!("expected NoModel, got {err:?}");
        };
        assert!(reason.contains("llama3.1"), "{reason}");
        assert_eq!(available, &["nomic-embed-text", "bge-m3"]);
        assert!(err.to_string().contains("nomic-embed-text, bge-m3"));

        let err = choose_model("", &[]).unwrap_err();
        assert!(matches!(err, ModelError::NoModel { ref available, .. } if available.is_empty()));
        assert!(err.to_string().contains("offers: nothing"), "{err}");
    }
}
