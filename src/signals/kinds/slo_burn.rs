//! `slo_burn`: the error-budget burn rate of a latency objective, read from histogram buckets.

use crate::prom::{MatchOp, Matcher};

use super::*;

/// Error-budget burn rate of a latency objective: the share of observations above `target` (read
/// from the histogram bucket at the target, or interpolated between the two around it when the
/// bounds found in the data have none there) divided by the budget `1 - objective`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloBurn {
    pub histogram: Vec<String>,
    /// A quantity (`500ms`) or a named threshold (`$ttft_target`).
    pub target: String,
    /// A fraction (`0.99`, `99%`) or a named threshold.
    pub objective: String,
}

impl Kind for SloBurn {
    fn validate(&self) -> Result<(), String> {
        for (what, v) in [("target", &self.target), ("objective", &self.objective)] {
            if !v.trim().starts_with('$') {
                crate::units::parse_quantity(v).map_err(|e| format!("{what}: {e}"))?;
            }
        }
        nonempty(&self.histogram, "histogram")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![hist(&self.histogram, "_bucket")]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        Ok(plain(self.query(resolved, ctx)?))
    }

    fn histogram_use(&self) -> Option<HistogramUse> {
        Some(HistogramUse::Burn)
    }

    fn bucket_series(&self) -> Vec<String> {
        bucket_spellings(&self.histogram)
    }

    fn bucket_note(&self, resolved: &Resolved, ctx: &QueryContext) -> Option<String> {
        let t = quantity(&self.target, &ctx.thresholds).ok()?;
        let series = resolved.names.first()?;
        let bounds = ctx.buckets.get(series)?;
        let fam = family_of(series);
        let s = crate::units::format_seconds;
        match bucket_at(bounds, t).ok()? {
            AtTarget::Exact(_) => None,
            AtTarget::Between(lo, hi) => Some(format!(
                "{fam} has no bucket at the SLO target {}: burn rates interpolate between its {} and {} buckets (an estimate; a bucket at the target makes them exact: {CUSTOM_BUCKETS_HINT})",
                s(t),
                s(lo.value),
                s(hi.value)
            )),
        }
    }

    fn burn_from_buckets(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<Option<BurnFromBuckets>, String> {
        let t = quantity(&self.target, &ctx.thresholds)?;
        let o = quantity(&self.objective, &ctx.thresholds)?;
        if !(0.0..1.0).contains(&o) {
            return Err(format!("objective {o} must be between 0 and 1"));
        }
        // The numbers as the query writes them, read back: the same weights and budget.
        let num = |text: String| text.parse::<f64>().map_err(|e| format!("{text}: {e}"));
        let budget = num(crate::units::sig(1.0 - o))?;
        let good = match ctx.buckets.get(resolved.names.first().ok_or("no histogram")?) {
            None => vec![(le_forms(t), 1.0)],
            Some(bounds) => match bucket_at(bounds, t)? {
                AtTarget::Exact(b) => vec![(b.written.clone(), 1.0)],
                AtTarget::Between(lo, hi) => {
                    let f = (t - lo.value) / (hi.value - lo.value);
                    vec![(lo.written.clone(), num(weight(1.0 - f))?), (hi.written.clone(), num(weight(f))?)]
                }
            },
        };
        Ok(Some(BurnFromBuckets { good, budget }))
    }

    fn threshold_fields(&self) -> Vec<ThresholdField<'_>> {
        vec![
            ThresholdField { text: &self.target, what: "latency target", unit: "seconds" },
            ThresholdField { text: &self.objective, what: "objective", unit: "ratio" },
        ]
    }
}

impl SloBurn {
    /// The burn rate of an SLO "`objective` of requests under `target`": the share of
    /// observations over the target (the buckets at or under it over the `+Inf` bucket), as a
    /// multiple of the error budget. A target between two bucket bounds is interpolated linearly
    /// between them.
    fn query(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
        let by = ctx.group_by.join(", ");
        let r = promql_duration(ctx.range);
        let sel = &ctx.selector;
        let t = quantity(&self.target, &ctx.thresholds)?;
        let o = quantity(&self.objective, &ctx.thresholds)?;
        if !(0.0..1.0).contains(&o) {
            return Err(format!("objective {o} must be between 0 and 1"));
        }
        let fam = family_of(&resolved.names[0]);
        let bucket = format!("{fam}_bucket");
        let budget = crate::units::sig(1.0 - o);
        let at = |b: &Bound| {
            let le = match b.written.as_slice() {
                [one] => Matcher { name: "le".into(), op: MatchOp::Eq, value: one.clone() },
                many => Matcher {
                    name: "le".into(),
                    op: MatchOp::Re,
                    value: many.iter().map(|w| crate::prom::escape_regex_literal(w)).collect::<Vec<_>>().join("|"),
                },
            };
            format!("sum by ({by}) (rate({}[{r}]))", sel.series(&bucket, &[le]))
        };
        // The rate of observations at or under the target.
        let good = match ctx.buckets.get(&resolved.names[0]) {
            None => format!("sum by ({by}) (rate({}[{r}]))", sel.series(&bucket, &[Matcher { name: "le".into(), op: MatchOp::Re, value: le_regex(t) }])),
            Some(bounds) => match bucket_at(bounds, t).map_err(|e| format!("{fam}: {e}"))? {
                AtTarget::Exact(b) => at(b),
                AtTarget::Between(lo, hi) => {
                    let f = (t - lo.value) / (hi.value - lo.value);
                    format!("({} * {} + {} * {})", at(lo), weight(1.0 - f), at(hi), weight(f))
                }
            },
        };
        // Every observation is in the +Inf bucket: the total is read from the same family as the
        // good share (as the quantiles' observation counts are), so one family is all a burn rate
        // needs.
        let all = Matcher { name: "le".into(), op: MatchOp::Eq, value: "+Inf".into() };
        Ok(format!("(1 - {good} / sum by ({by}) (rate({}[{r}]))) / {budget}", sel.series(&bucket, &[all])))
    }
}
