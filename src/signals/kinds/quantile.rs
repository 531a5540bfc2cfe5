//! `quantile`: `histogram_quantile(q, ...)` over a histogram family.

use super::*;

/// `histogram_quantile(q, ...)` over a histogram family (name without `_bucket`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantile {
    pub quantile: f64,
    pub histogram: Vec<String>,
    #[serde(default = "default_min_observations")]
    pub min_observations: f64,
}

fn default_min_observations() -> f64 {
    20.0
}

impl Kind for Quantile {
    fn validate(&self) -> Result<(), String> {
        let Quantile { quantile, histogram, .. } = self;
        if !(0.0..=1.0).contains(quantile) {
            return Err(format!("quantile {quantile} must be between 0 and 1"));
        }
        nonempty(histogram, "histogram")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![hist(&self.histogram, "_bucket")]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let fam = family_of(&resolved.names[0]);
        let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
        Ok(SignalQueries {
            value: format!("histogram_quantile({}, {})", self.quantile, bucket_rates_query(resolved, ctx)),
            count: Some(format!("sum by ({by}) (increase({}[{r}]))", ctx.selector.series(&format!("{fam}_count"), &[]))),
            ..plain(String::new())
        })
    }

    fn histogram_use(&self) -> Option<HistogramUse> {
        Some(HistogramUse::Quantile(self.quantile))
    }

    fn bucket_series(&self) -> Vec<String> {
        bucket_spellings(&self.histogram)
    }

    fn min_observations(&self) -> Option<f64> {
        Some(self.min_observations)
    }

    fn when_empty(&self) -> WhenEmpty {
        WhenEmpty::UnreadWithoutCounts
    }

    fn replica_breakdown(&self) -> bool {
        true
    }
}
