//! `[telemetry]`: where traces go. Nothing is exported unless an endpoint is given here
//! or in the standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! variables (the file wins over the variables).
//!
//! ```toml
//! [telemetry]
//! otlp_endpoint = "http://127.0.0.1:4318"   # a base URL: spans go to its /v1/traces
//! capture_content = false                   # messages, arguments and results on spans
//! ```
//!
//! `capture_content` defaults to the standard `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
//! variable, else off; what is captured passes the secret redactor first.
//!
//! `OTEL_SERVICE_NAME` (default `agentplane`) and `OTEL_RESOURCE_ATTRIBUTES` name the
//! service as usual.

use serde::Deserialize;

use super::SettingError;
use super::llm::check_base_url;

/// `[telemetry]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTelemetry {
    otlp_endpoint: Option<String>,
    capture_content: Option<bool>,
}

/// Where traces go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Telemetry {
    /// The OTLP base URL of the file, without a trailing `/`.
    pub otlp_endpoint: Option<String>,
    /// Whether message and argument contents go on spans; `None`: as the variable says.
    pub capture_content: Option<bool>,
}

impl FileTelemetry {
    /// Checks the section.
    pub fn resolve(self) -> Result<Telemetry, SettingError> {
        let otlp_endpoint = match self.otlp_endpoint {
            None => None,
            Some(url) => {
                check_base_url(&url).map_err(|m| ("otlp_endpoint".to_owned(), m))?;
                Some(url.trim_end_matches('/').to_owned())
            }
        };
        Ok(Telemetry {
            otlp_endpoint,
            capture_content: self.capture_content,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_a_base_url() {
        let ok: FileTelemetry =
            toml::from_str("otlp_endpoint = \"http://127.0.0.1:4318/\"").expect("toml");
        assert_eq!(
            ok.resolve().expect("valid").otlp_endpoint.as_deref(),
            Some("http://127.0.0.1:4318")
        );
        for bad in ["ftp://x", "not a url", ""] {
            let file: FileTelemetry =
                toml::from_str(&format!("otlp_endpoint = {bad:?}")).expect("toml");
            assert_eq!(file.resolve().expect_err(bad).0, "otlp_endpoint");
        }
        assert!(toml::from_str::<FileTelemetry>("other = 1").is_err());
    }
}
