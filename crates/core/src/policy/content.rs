//! `content`: guardrails on what passes through: detectors (`crate::content`) on chosen
//! surfaces, and what happens on a finding: `redact` (the text passes with each finding
//! replaced by `[REDACTED:<detector>]`), `deny` (the request or call is refused) or
//! `flag` (an event and a metric only). Findings name the detector and the place, never
//! the text found.

use serde::{Deserialize, Deserializer};

use crate::content::{Detector, Detectors};

/// Where a content policy looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    /// A turn's input, before the turn starts.
    TurnInput,
    /// What the model answers in a turn, streamed and whole.
    ModelOutput,
    /// A tool call's arguments (every string value), before it runs.
    ToolArguments,
    /// A tool's output, before the model or the log sees it.
    ToolResults,
    /// The messages of a gateway request, before they go upstream.
    GatewayRequest,
    /// A gateway answer, streamed and whole, before the client sees it.
    GatewayAnswer,
}

impl Surface {
    /// Every surface, the default of a policy that names none.
    pub const ALL: [Surface; 6] = [
        Surface::TurnInput,
        Surface::ModelOutput,
        Surface::ToolArguments,
        Surface::ToolResults,
        Surface::GatewayRequest,
        Surface::GatewayAnswer,
    ];

    /// The name used in files and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::TurnInput => "turn_input",
            Surface::ModelOutput => "model_output",
            Surface::ToolArguments => "tool_arguments",
            Surface::ToolResults => "tool_results",
            Surface::GatewayRequest => "gateway_request",
            Surface::GatewayAnswer => "gateway_answer",
        }
    }
}

/// What a finding does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentAction {
    /// The text passes with each finding replaced.
    Redact,
    /// The request, call or answer is refused.
    Deny,
    /// Recorded (an event, a metric), nothing changed.
    Flag,
}

impl ContentAction {
    /// The name used in files and events.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentAction::Redact => "redact",
            ContentAction::Deny => "deny",
            ContentAction::Flag => "flag",
        }
    }
}

/// A content policy's rule.
#[derive(Debug, Clone)]
pub struct ContentRule {
    /// The compiled detectors.
    pub detectors: Detectors,
    /// Their names as written, for listings and equality.
    pub names: Vec<String>,
    pub surfaces: Vec<Surface>,
    pub action: ContentAction,
}

impl PartialEq for ContentRule {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names && self.surfaces == other.surfaces && self.action == other.action
    }
}
impl Eq for ContentRule {}

impl ContentRule {
    /// Whether it looks at `surface`.
    pub fn watches(&self, surface: Surface) -> bool {
        self.surfaces.contains(&surface)
    }
}

/// One detector as written: a built-in's name, or `{name, regex, max_len}`.
pub(crate) struct DetectorSpec(pub(crate) Detector);

impl<'de> Deserialize<'de> for DetectorSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Name(String),
            Custom {
                name: String,
                regex: String,
                #[serde(default)]
                max_len: Option<usize>,
            },
        }
        let built_ins = "secret, email, phone, card, iban";
        match Written::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(format!(
                "a detector is one of {built_ins}, or {{name, regex, max_len}}"
            ))
        })? {
            Written::Name(name) => Detector::parse(&name).map(DetectorSpec).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown detector `{name}`: one of {built_ins}, or {{name, regex, max_len}}"
                ))
            }),
            Written::Custom {
                name,
                regex,
                max_len,
            } => Detector::custom(&name, &regex, max_len)
                .map(DetectorSpec)
                .map_err(serde::de::Error::custom),
        }
    }
}
