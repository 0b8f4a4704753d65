//! What a turn remembers of its thread: the compaction summary, the most recent turns
//! and the new input, within a character budget.
//!
//! Built only from stored data, so it is the same after a restart. Trimming is
//! deterministic and always in this order (seed 003 ADR-011): drop the oldest recent
//! turns, then shrink the summary, and shrink the input only as a last resort.

use agentplane_core::ChatMessage;

/// The size of a turn's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// Characters of summary, past turns and input together.
    pub max_chars: usize,
    /// Past turns considered before trimming.
    pub recent_turns: usize,
}

impl Default for ContextBudget {
    fn default() -> Self {
        Self {
            max_chars: 24_000,
            recent_turns: 8,
        }
    }
}

/// A finished turn as context: what was asked and what came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastTurn {
    pub input: String,
    pub answer: String,
}

/// The messages before the input, and the input as it will be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub history: Vec<ChatMessage>,
    pub input: String,
}

const SUMMARY_PREFIX: &str = "Summary of the conversation so far:\n";
const CUT_MARK: &str = " […]";

/// Builds the context of a new turn.
pub fn build(
    summary: Option<&str>,
    past: &[PastTurn],
    input: &str,
    budget: ContextBudget,
) -> Context {
    let chars = |s: &str| s.chars().count();
    let skip = past.len().saturating_sub(budget.recent_turns);
    let mut turns: Vec<&PastTurn> = past[skip..].iter().collect();
    let mut summary = summary.filter(|s| !s.trim().is_empty()).map(str::to_owned);
    let mut input = input.to_owned();

    let turns_size = |turns: &[&PastTurn]| -> usize {
        turns
            .iter()
            .map(|t| chars(&t.input) + chars(&t.answer))
            .sum()
    };
    let total = |summary: &Option<String>, turns: &[&PastTurn], input: &str| {
        summary.as_deref().map(chars).unwrap_or(0) + turns_size(turns) + chars(input)
    };

    while total(&summary, &turns, &input) > budget.max_chars && !turns.is_empty() {
        turns.remove(0);
    }
    if let Some(text) = &summary {
        let over = total(&summary, &turns, &input).saturating_sub(budget.max_chars);
        if over > 0 {
            let keep = chars(text).saturating_sub(over + chars(CUT_MARK));
            summary = (keep > 0).then(|| cut(text, keep));
        }
    }
    let over = total(&summary, &turns, &input).saturating_sub(budget.max_chars);
    if over > 0 {
        let keep = chars(&input).saturating_sub(over + chars(CUT_MARK)).max(1);
        input = cut(&input, keep);
    }

    let mut history = Vec::with_capacity(turns.len() * 2 + 1);
    if let Some(text) = summary {
        history.push(ChatMessage::system(format!("{SUMMARY_PREFIX}{text}")));
    }
    for turn in turns {
        history.push(ChatMessage::user(turn.input.clone()));
        history.push(ChatMessage::assistant(
            Some(turn.answer.clone()),
            Vec::new(),
        ));
    }
    Context { history, input }
}

/// The first `keep` characters and a mark saying something was cut.
fn cut(text: &str, keep: usize) -> String {
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(CUT_MARK);
    out
}

/// A turn's result as text for later context.
pub fn answer_text(result: &serde_json::Value) -> String {
    match result {
        serde_json::Value::Null => String::new(),
        serde_json::Value::Object(map) if map.len() == 1 && map.contains_key("text") => {
            map["text"].as_str().unwrap_or_default().to_owned()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: usize, size: usize) -> PastTurn {
        PastTurn {
            input: format!("q{i}"),
            answer: "a".repeat(size),
        }
    }

    #[test]
    fn within_budget_everything_is_kept_in_order() {
        let past = [turn(1, 10), turn(2, 10)];
        let ctx = build(Some("earlier"), &past, "now", ContextBudget::default());
        assert_eq!(ctx.history.len(), 5);
        assert!(
            ctx.history[0]
                .content
                .as_deref()
                .unwrap_or_default()
                .ends_with("earlier")
        );
        assert_eq!(ctx.history[1].content.as_deref(), Some("q1"));
        assert_eq!(ctx.input, "now");
    }

    #[test]
    fn only_the_most_recent_turns_are_considered() {
        let past: Vec<_> = (0..20).map(|i| turn(i, 1)).collect();
        let budget = ContextBudget {
            max_chars: 10_000,
            recent_turns: 3,
        };
        let ctx = build(None, &past, "x", budget);
        assert_eq!(ctx.history.len(), 6);
        assert_eq!(ctx.history[0].content.as_deref(), Some("q17"));
    }

    #[test]
    fn oldest_turns_go_first_then_the_summary_then_the_input() {
        let past = [turn(1, 100), turn(2, 100)];
        let budget = ContextBudget {
            max_chars: 150,
            recent_turns: 8,
        };
        let ctx = build(Some(&"s".repeat(40)), &past, "input", budget);
        // q1 dropped; q2 (102) + summary (40) + input (5) = 147 fits.
        assert_eq!(ctx.history.len(), 3);
        assert_eq!(ctx.history[1].content.as_deref(), Some("q2"));
        assert_eq!(ctx.input, "input");

        // Both turns must go before the summary shrinks; then the input stays whole.
        let budget = ContextBudget {
            max_chars: 30,
            recent_turns: 8,
        };
        let ctx = build(Some(&"s".repeat(40)), &past, "input", budget);
        assert_eq!(ctx.history.len(), 1, "only the summary is left");
        let summary = ctx.history[0].content.clone().unwrap_or_default();
        assert!(summary.ends_with(CUT_MARK), "summary shrunk: {summary}");
        assert_eq!(ctx.input, "input");

        let budget = ContextBudget {
            max_chars: 50,
            recent_turns: 8,
        };
        let ctx = build(Some("summary"), &past, &"i".repeat(100), budget);
        assert!(
            ctx.history.is_empty(),
            "turns and summary gone: {:?}",
            ctx.history
        );
        assert!(ctx.input.chars().count() <= 50, "{}", ctx.input.len());
        assert!(ctx.input.ends_with(CUT_MARK));
    }

    #[test]
    fn text_answers_read_as_text_and_results_as_json() {
        assert_eq!(answer_text(&serde_json::json!({"text": "hi"})), "hi");
        assert_eq!(
            answer_text(&serde_json::json!({"summary": "s"})),
            "{\"summary\":\"s\"}"
        );
        assert_eq!(answer_text(&serde_json::Value::Null), "");
    }
}
