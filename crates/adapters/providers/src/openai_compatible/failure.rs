//! How a failed call becomes a `ModelError`, and whether it is worth another attempt.
//!
//! The one place that reads HTTP statuses, error bodies and transport errors. Every
//! text that leaves here has had the API key removed and is bounded in length, so an
//! error message can be shown or logged as is.

use agentplane_engine::ports::ModelError;
use reqwest::StatusCode;

/// The longest server text quoted in an error message, in characters.
const QUOTE_LIMIT: usize = 1000;

/// Phrases with which servers refuse `tools` for a model: Ollama ("does not support
/// tools"), vLLM without a tool parser, llama.cpp without `--jinja`, and others.
const NO_TOOL_SUPPORT: &[&str] = &[
    "does not support tools",
    "does not support tool",
    "tools is not supported",
    "tools are not supported",
    "tool use is not supported",
    "tool calling is not supported",
    "tool calls are not supported",
    "function calling is not supported",
    "does not support function calling",
    "enable-auto-tool-choice",
    "tools param requires --jinja",
];

/// A failed attempt: the error to report, and whether another attempt may succeed.
#[derive(Debug)]
pub(crate) struct Failure {
    pub error: ModelError,
    pub retryable: bool,
}

impl Failure {
    /// A failure that another attempt would repeat.
    pub(crate) fn fatal(error: ModelError) -> Self {
        Self {
            error,
            retryable: false,
        }
    }

    /// A failure another attempt may not see (overload, restart, reset).
    pub(crate) fn transient(error: ModelError) -> Self {
        Self {
            error,
            retryable: true,
        }
    }
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        Self::fatal(error)
    }
}

/// Whether a server's message says the model cannot take `tools`.
pub(crate) fn says_no_tool_support(message: &str) -> bool {
    let lower = message.to_lowercase();
    NO_TOOL_SUPPORT.iter().any(|phrase| lower.contains(phrase))
}

/// `text` cut to a length worth reading in an error message.
pub(crate) fn shorten(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(QUOTE_LIMIT) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
        None => text.to_owned(),
    }
}

/// Removes every occurrence of the API key (servers echo keys in 401 bodies).
pub(crate) fn redact(text: &str, api_key: Option<&str>) -> String {
    match api_key {
        Some(key) if !key.is_empty() => text.replace(key, "[redacted]"),
        _ => text.to_owned(),
    }
}

/// The failure of an answer with a non-success status and this body.
pub(crate) fn from_status(
    status: StatusCode,
    body: &str,
    model: &str,
    api_key: Option<&str>,
) -> Failure {
    if (status.is_client_error() || status.is_server_error()) && says_no_tool_support(body) {
        return Failure::fatal(ModelError::NoToolSupport {
            model: model.to_owned(),
        });
    }
    let body = shorten(&redact(body, api_key));
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Failure::transient(ModelError::RateLimited { body });
    }
    let error = ModelError::Upstream {
        status: status.as_u16(),
        body,
    };
    if status.is_server_error() {
        Failure::transient(error)
    } else {
        Failure::fatal(error)
    }
}

/// What a transport error says, without its URL and with every cause, e.g.
/// `error sending request: client error (Connect): tcp connect error: Connection refused`.
pub(crate) fn transport_detail(error: reqwest::Error, api_key: Option<&str>) -> String {
    let error = error.without_url();
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !detail.contains(&text) {
            detail.push_str(": ");
            detail.push_str(&text);
        }
        source = cause.source();
    }
    shorten(&redact(&detail, api_key))
}

/// The failure of a request that got no answer: refused, reset or timed out connecting.
/// All are worth another attempt; a server that stays away is `Unreachable`.
pub(crate) fn from_send(error: reqwest::Error, url: &str, api_key: Option<&str>) -> Failure {
    if error.is_builder() {
        return Failure::fatal(ModelError::Unreachable {
            url: url.to_owned(),
            detail: transport_detail(error, api_key),
        });
    }
    let detail = if error.is_connect() && error.is_timeout() {
        format!(
            "connecting timed out ({})",
            transport_detail(error, api_key)
        )
    } else {
        transport_detail(error, api_key)
    };
    Failure::transient(ModelError::Unreachable {
        url: url.to_owned(),
        detail,
    })
}

/// `url` without user name and password, for messages.
pub(crate) fn display_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string().trim_end_matches('/').to_owned()
        }
        // Not a URL: still drop anything that looks like `user:pass@`.
        Err(_) => match (url.find("://"), url.rfind('@')) {
            (Some(scheme_end), Some(at)) if at > scheme_end => {
                format!("{}{}", &url[..scheme_end + 3], &url[at + 1..])
            }
            _ => url.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_tool_support_is_recognised_in_known_phrasings() {
        for message in [
            r#"{"error":{"message":"registry.ollama.ai/library/gemma:2b does not support tools"}}"#,
            "Tools is not supported for this model",
            r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"}"#,
            "tools param requires --jinja flag",
        ] {
            assert!(says_no_tool_support(message), "{message}");
        }
        assert!(!says_no_tool_support("model not found"));
    }

    #[test]
    fn statuses_map_to_errors_and_retryability() {
        let cases = [
            (429, true, "RateLimited"),
            (500, true, "Upstream"),
            (503, true, "Upstream"),
            (400, false, "Upstream"),
            (401, false, "Upstream"),
            (404, false, "Upstream"),
        ];
        for (status, retryable, kind) in cases {
            let status = StatusCode::from_u16(status).expect("status");
            let failure = from_status(status, "boom", "m", None);
            assert_eq!(failure.retryable, retryable, "{status}");
            assert!(format!("{:?}", failure.error).starts_with(kind), "{status}");
        }
        let failure = from_status(StatusCode::NOT_FOUND, "does not support tools", "m", None);
        assert!(!failure.retryable);
        assert_eq!(
            failure.error,
            ModelError::NoToolSupport {
                model: "m".to_owned()
            }
        );
    }

    #[test]
    fn bodies_are_redacted_and_bounded() {
        let body = format!("bad key sk-secret-123 {}", "x".repeat(5000));
        let failure = from_status(StatusCode::UNAUTHORIZED, &body, "m", Some("sk-secret-123"));
        let message = failure.error.to_string();
        assert!(!message.contains("sk-secret-123"));
        assert!(message.contains("[redacted]"));
        assert!(message.len() < 1200, "{}", message.len());
        let cut = shorten("é".repeat(2000).as_str());
        assert!(cut.starts_with(&"é".repeat(QUOTE_LIMIT)));
        assert!(cut.chars().count() < 1100, "{cut}");
    }

    #[test]
    fn display_url_drops_credentials() {
        assert_eq!(display_url("http://u:p@host:1/v1"), "http://host:1/v1");
        assert_eq!(
            display_url("http://127.0.0.1:8/v1/"),
            "http://127.0.0.1:8/v1"
        );
        assert_eq!(display_url("ht!tp://u:p@host"), "ht!tp://host");
    }
}
