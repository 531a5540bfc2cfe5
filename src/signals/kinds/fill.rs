//! `fill`: how close a gauge stays to its own peak.

use super::*;

/// How close a gauge stays to its own peak: mean over the window divided by the maximum, per
/// replica, averaged (1.0 = pinned at its ceiling the whole time).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fill {
    pub gauge: Vec<String>,
}

impl Kind for Fill {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.gauge, "gauge")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![self.gauge.clone()]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
        let m = ctx.selector.series(&resolved.names[0], &[]);
        Ok(plain(format!("avg by ({by}) (avg_over_time({m}[{r}]) / max_over_time({m}[{r}]))")))
    }

    fn replica_breakdown(&self) -> bool {
        true
    }
}
