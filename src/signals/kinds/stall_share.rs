//! `stall_share`: the worst replica's share of the window stalled while holding requests.

use super::*;

/// The share of the window during which a replica held requests (running or waiting) while its
/// counter (generated tokens) rose by less than `below` per second: a stalled engine. The worst
/// replica's share. A target down has no series, so its steps do not count.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StallShare {
    pub counter: Vec<String>,
    pub running: Vec<String>,
    pub waiting: Vec<String>,
    #[serde(default = "default_stall_below")]
    pub below: f64,
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
}

/// Generated tokens per second under which an engine holding requests counts as stalled: what
/// `throughput-stall` calls stalled (`stall_tokens_per_second`).
fn default_stall_below() -> f64 {
    1.0
}

impl Kind for StallShare {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.counter, "counter")?;
        nonempty(&self.running, "running")?;
        nonempty(&self.waiting, "waiting")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![self.counter.clone(), self.running.clone(), self.waiting.clone()]
    }

    /// The worst replica's share of the window holding requests (running or waiting) while
    /// generating fewer than `below` tokens per second, at the trends' step.
    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let replica_label = &replica(&self.replica_label, ctx)?;
        let below = self.below;
        let by = ctx.group_by.join(", ");
        let r = promql_duration(ctx.range);
        let sel = &ctx.selector;
        let step = subquery_step(ctx);
        let inner = (step * 2).max(60);
        let per = if ctx.group_by.iter().any(|l| l == replica_label) { by.clone() } else { format!("{by}, {replica_label}") };
        let gauge = |n: &str| format!("sum by ({per}) (max_over_time({}[{step}s]))", sel.series(n, &[]));
        Ok(plain(format!(
            "max by ({by}) (avg_over_time(((sum by ({per}) (rate({}[{inner}s])) < bool {below}) * ({} + {} >= bool 1))[{r}:{step}s]))",
            sel.series(&resolved.names[0], &[]),
            gauge(&resolved.names[1]),
            gauge(&resolved.names[2])
        )))
    }
}
