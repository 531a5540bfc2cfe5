//! `remainder`: one histogram's mean less the means of others.

use super::*;

/// The mean of one histogram less the means of others, each `_sum` over `_count`: what of a
/// duration the others do not account for (TTFT less queue time less prefill time is input
/// processing and the API server). Each of `minus` is one family's list of alternatives.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remainder {
    pub histogram: Vec<String>,
    pub minus: Vec<Vec<String>>,
}

impl Kind for Remainder {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.histogram, "histogram")?;
        if self.minus.is_empty() {
            return Err("`minus` needs at least one histogram to subtract".into());
        }
        self.minus.iter().try_for_each(|m| nonempty(m, "minus"))
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        std::iter::once(&self.histogram).chain(&self.minus).map(|h| hist(h, "_sum")).collect()
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        // Each mean is the query of the signal that is that mean (ttft_mean, queue_mean, ...):
        // explain reads each once and subtracts them itself (Combine::Less).
        let means = resolved.names.iter().map(|n| mean_query(n, ctx)).collect();
        Ok(with_parts(mean_less_means(&resolved.names, ctx), Combine::Less, means))
    }

    fn replica_breakdown(&self) -> bool {
        true
    }
}
