//! `spread`: how uneven a counter's rate is across replicas.

use super::*;

/// How uneven a counter's rate is across replicas: the busiest replica over the mean of all
/// (with `least`, the least served one over the mean: a replica that gets nothing reads 0).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    pub counter: Vec<String>,
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
    #[serde(default)]
    pub least: bool,
}

impl Kind for Spread {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.counter, "counter")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![self.counter.clone()]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let by = ctx.group_by.join(", ");
        let replica_label = replica(&self.replica_label, ctx)?;
        let mut read = rate_read(&resolved.names[0], &[], None, &[], ctx);
        read.by.push(replica_label);
        let (per, read) = summed(read, ctx);
        let (pick, how) = if self.least { ("min", Combine::Least) } else { ("max", Combine::Spread) };
        Ok(SignalQueries { sums: vec![(per.clone(), read)], ..with_parts(format!("{pick} by ({by}) ({per}) / avg by ({by}) ({per})"), how, vec![per]) })
    }
}
