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
        let s = self.reads(resolved, ctx)?;
        let (by, r, below) = (ctx.group_by.join(", "), promql_duration(ctx.range), self.below);
        Ok(plain(format!("max by ({by}) (avg_over_time((({} < bool {below}) * ({} + {} >= bool 1))[{r}:{}s]))", s.generation, s.running, s.waiting, s.step)))
    }
}

/// The three per-replica reads a stall share is taken from at every step of its subquery, as its
/// query writes them: explain reads the first two anyway (which limit binds reads them per replica
/// at the same step), and computes the share from the three (src/explain/binding.rs).
#[derive(Debug, Clone, PartialEq)]
pub struct StallReads {
    /// `sum by (G, R) (rate(counter[2 steps]))`.
    pub generation: String,
    /// `sum by (G, R) (max_over_time(running[step]))`, and the same of `waiting`.
    pub running: String,
    pub waiting: String,
    /// The three without `sum by`, in that order, each series as it is, and the labels they are
    /// summed by (G, R): read so and summed as the answers are read, they cost the server less.
    pub each: [String; 3],
    pub by: Vec<String>,
    pub below: f64,
    /// The subquery's step, seconds; its range is the query context's.
    pub step: u64,
}

impl StallShare {
    /// The reads [`Kind::queries`] combines (see [`StallReads`]).
    pub fn reads(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<StallReads, String> {
        let replica_label = &replica(&self.replica_label, ctx)?;
        let sel = &ctx.selector;
        let step = subquery_step(ctx);
        let inner = (step * 2).max(60);
        let labels: Vec<String> = ctx.group_by.iter().cloned().chain((!ctx.group_by.contains(replica_label)).then(|| replica_label.clone())).collect();
        let per = labels.join(", ");
        let gauge = |n: &str| format!("max_over_time({}[{step}s])", sel.series(n, &[]));
        let each = [format!("rate({}[{inner}s])", sel.series(&resolved.names[0], &[])), gauge(&resolved.names[1]), gauge(&resolved.names[2])];
        let summed = |q: &String| format!("sum by ({per}) ({q})");
        Ok(StallReads { generation: summed(&each[0]), running: summed(&each[1]), waiting: summed(&each[2]), each, by: labels, below: self.below, step })
    }
}
