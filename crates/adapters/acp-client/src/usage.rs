//! Tokens and cost an agent reports, wherever it reports them. In order of trust:
//! the prompt's answer (`usage`, an unstable part of the schema), gemini's
//! `_meta.quota.token_count` on that answer, and `usage_update` notifications (codex):
//! `used` is the tokens in the agent's context at the end of the turn — what its last
//! model call read, a lower bound of the turn's input — and `cost`, when given in USD,
//! is the session's cumulative cost, so the prompt's cost is its growth since the
//! session was loaded (the replay's last `usage_update` is the baseline).

use agent_client_protocol::v1::schema::{PromptResponse, UsageUpdate};
use agentplane_engine::ports::external::ExternalUsage;
use serde_json::Value;

/// What `usage_update`s said so far in one prompt's session.
#[derive(Debug, Default)]
pub(crate) struct UsageSeen {
    /// The cumulative USD cost the session had before this prompt (from the replay).
    baseline_usd: Option<f64>,
    /// The latest context size reported during the prompt.
    used: Option<u64>,
    /// The latest cumulative USD cost reported during the prompt.
    usd: Option<f64>,
}

impl UsageSeen {
    /// Notes one `usage_update`; `replaying`: it came while `session/load` replayed
    /// the session's history, so it describes earlier prompts.
    pub(crate) fn note(&mut self, update: &UsageUpdate, replaying: bool) {
        let usd = update
            .cost
            .as_ref()
            .filter(|c| c.currency.eq_ignore_ascii_case("USD"))
            .map(|c| c.amount)
            .filter(|a| a.is_finite() && *a >= 0.0);
        if replaying {
            if usd.is_some() {
                self.baseline_usd = usd;
            }
            return;
        }
        self.used = Some(update.used);
        if usd.is_some() {
            self.usd = usd;
        }
    }

    /// The prompt's usage, from its answer and what was noted; `None` when the agent
    /// reported nothing.
    pub(crate) fn of_prompt(&self, response: &PromptResponse) -> Option<ExternalUsage> {
        let cost_usd_micros = self.usd.map(|usd| {
            let spent = (usd - self.baseline_usd.unwrap_or(0.0)).max(0.0);
            (spent * 1_000_000.0).round() as u64
        });
        let tokens = response
            .usage
            .as_ref()
            .map(|u| (u.input_tokens, u.output_tokens, "prompt"))
            .or_else(|| quota_tokens(response).map(|(i, o)| (i, o, "quota")))
            .or_else(|| self.used.map(|used| (used, 0, "usage_update")));
        match tokens {
            Some((input_tokens, output_tokens, source)) => Some(ExternalUsage {
                input_tokens,
                output_tokens,
                cost_usd_micros,
                source,
            }),
            None => cost_usd_micros.map(|micros| ExternalUsage {
                cost_usd_micros: Some(micros),
                source: "usage_update",
                ..ExternalUsage::default()
            }),
        }
    }
}

/// gemini's `_meta.quota.token_count.{input_tokens, output_tokens}`; all zero is no
/// report (gemini sends zeros for commands that called no model).
fn quota_tokens(response: &PromptResponse) -> Option<(u64, u64)> {
    let count = response.meta.as_ref()?.get("quota")?.get("token_count")?;
    let field = |name: &str| count.get(name).and_then(Value::as_u64);
    let (input, output) = (field("input_tokens"), field("output_tokens"));
    if input.is_none() && output.is_none() {
        return None;
    }
    let (input, output) = (input.unwrap_or(0), output.unwrap_or(0));
    (input + output > 0).then_some((input, output))
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{Cost, StopReason};
    use serde_json::json;

    use super::*;

    fn answer(meta: Value) -> PromptResponse {
        let mut response = PromptResponse::new(StopReason::EndTurn);
        response.meta = meta.as_object().cloned();
        response
    }

    #[test]
    fn gemini_quota_metadata_is_usage() {
        let seen = UsageSeen::default();
        let usage = seen
            .of_prompt(&answer(json!({"quota": {"token_count": {"input_tokens": 90, "output_tokens": 12}, "model_usage": []}})))
            .expect("usage");
        assert_eq!(
            (usage.input_tokens, usage.output_tokens, usage.source),
            (90, 12, "quota")
        );
        assert!(
            seen.of_prompt(&answer(
                json!({"quota": {"token_count": {"input_tokens": 0, "output_tokens": 0}}})
            ))
            .is_none()
        );
    }

    #[test]
    fn usage_updates_count_from_the_replayed_baseline() {
        let mut seen = UsageSeen::default();
        seen.note(
            &UsageUpdate::new(900, 200_000).cost(Cost::new(0.25, "USD")),
            true,
        );
        seen.note(
            &UsageUpdate::new(1_200, 200_000).cost(Cost::new(0.30, "USD")),
            false,
        );
        seen.note(
            &UsageUpdate::new(1_500, 200_000).cost(Cost::new(0.35, "USD")),
            false,
        );
        let usage = seen.of_prompt(&answer(json!({}))).expect("usage");
        assert_eq!(usage.input_tokens, 1_500);
        assert_eq!(usage.source, "usage_update");
        assert_eq!(usage.cost_usd_micros, Some(100_000));
    }
}
