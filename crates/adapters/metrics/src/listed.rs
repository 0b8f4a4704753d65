//! Families that are listed from the first scrape on, before they have a series.
//!
//! `prometheus-client` leaves a family without series out of the text entirely (its
//! `EncodeMetric::is_empty`), so on a fresh process a dashboard's `absent()` check or an
//! alert on `rate(…)` cannot tell "nothing happened yet" from "this metric does not
//! exist". Registering a family inside [`Listed`] keeps its `# HELP` and `# TYPE`
//! lines in every scrape; its samples appear with its first series. No zero series
//! is invented: a label set nobody has seen is not a sample anyone observed.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;

/// A metric whose metadata is always encoded, even with no series.
#[derive(Debug)]
pub(crate) struct Listed<M>(pub(crate) M);

impl<M: EncodeMetric> EncodeMetric for Listed<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    /// Never empty: the descriptor is written whatever the family holds.
    fn is_empty(&self) -> bool {
        false
    }
}
