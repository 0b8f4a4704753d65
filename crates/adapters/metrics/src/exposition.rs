//! The registry as Prometheus' text exposition format (version 0.0.4).
//!
//! `prometheus-client` writes OpenMetrics text, which differs from the Prometheus
//! format in three ways that matter to scrapers and to `promtool check metrics`: a
//! counter's `# HELP` and `# TYPE` name the family without `_total` while its samples
//! carry it, metadata may include `# UNIT`, and the text ends with `# EOF`. Prometheus'
//! own parser then sees an untyped `…_total` metric without help, which promtool
//! rejects. So the OpenMetrics text is rewritten line by line: counter metadata gets
//! the samples' name, `# UNIT` and `# EOF` go. Samples pass unchanged.

use prometheus_client::encoding::text::encode_registry;
use prometheus_client::registry::Registry;

/// The registry in the Prometheus text format.
pub(crate) fn encode(registry: &Registry) -> String {
    let mut openmetrics = String::new();
    // Writing to a String cannot fail, and no metric here has a fallible encoder;
    // were one to fail, the families written before it are still a valid document.
    let _ = encode_registry(&mut openmetrics, registry);
    to_prometheus_text(&openmetrics)
}

/// Rewrites OpenMetrics text (as `prometheus-client` writes it: `# HELP`, then
/// `# TYPE`, then samples, per family) into the Prometheus text format.
fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len() + 256);
    // A `# HELP` line waits for its `# TYPE`, which says whether its name changes.
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line.starts_with("# HELP ") {
            if let Some(previous) = help.replace(line) {
                push_line(&mut out, previous);
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let counter = rest.strip_suffix(" counter");
            if let Some(held) = help.take() {
                match (counter, held.strip_prefix("# HELP ")) {
                    (Some(name), Some(text)) => {
                        let text = text.strip_prefix(name).unwrap_or(text);
                        out.push_str("# HELP ");
                        out.push_str(name);
                        out.push_str("_total");
                        out.push_str(text);
                        out.push('\n');
                    }
                    _ => push_line(&mut out, held),
                }
            }
            match counter {
                Some(name) => {
                    out.push_str("# TYPE ");
                    out.push_str(name);
                    out.push_str("_total counter\n");
                }
                None => push_line(&mut out, line),
            }
            continue;
        }
        if let Some(held) = help.take() {
            push_line(&mut out, held);
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        push_line(&mut out, line);
    }
    if let Some(held) = help {
        push_line(&mut out, held);
    }
    out
}

fn push_line(out: &mut String, line: &str) {
    out.push_str(line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_metadata_takes_the_samples_name() {
        let openmetrics = "# HELP jobs Jobs done.\n\
                           # TYPE jobs counter\n\
                           jobs_total{kind=\"a\"} 3\n\
                           # HELP queue Waiting.\n\
                           # TYPE queue gauge\n\
                           queue 2\n\
                           # HELP wait_seconds Wait.\n\
                           # TYPE wait_seconds histogram\n\
                           # UNIT wait_seconds seconds\n\
                           wait_seconds_sum 1.5\n\
                           wait_seconds_count 1\n\
                           wait_seconds_bucket{le=\"+Inf\"} 1\n\
                           # EOF\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP jobs_total Jobs done.\n\
             # TYPE jobs_total counter\n\
             jobs_total{kind=\"a\"} 3\n\
             # HELP queue Waiting.\n\
             # TYPE queue gauge\n\
             queue 2\n\
             # HELP wait_seconds Wait.\n\
             # TYPE wait_seconds histogram\n\
             wait_seconds_sum 1.5\n\
             wait_seconds_count 1\n\
             wait_seconds_bucket{le=\"+Inf\"} 1\n"
        );
    }

    #[test]
    fn a_family_without_samples_keeps_its_metadata() {
        let openmetrics = "# HELP jobs Jobs done.\n# TYPE jobs counter\n\
                           # HELP idle Idle.\n# TYPE idle gauge\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP jobs_total Jobs done.\n# TYPE jobs_total counter\n\
             # HELP idle Idle.\n# TYPE idle gauge\n"
        );
    }
}
