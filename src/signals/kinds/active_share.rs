//! `active_share`: the share of the window during which a counter was increasing.

use super::*;

/// The share of the window during which a counter was increasing (0..1): "sustained" preemptions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActiveShare {
    pub counter: Vec<String>,
}

impl Kind for ActiveShare {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.counter, "counter")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![self.counter.clone()]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
        let step = subquery_step(ctx);
        let inner = (step * 2).max(120);
        Ok(plain(format!("avg_over_time((sum by ({by}) (rate({}[{inner}s])) > bool 0)[{r}:{step}s])", ctx.selector.series(&resolved.names[0], &[]))))
    }

    fn replica_breakdown(&self) -> bool {
        true
    }
}
