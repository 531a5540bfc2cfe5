//! `vanished`: replicas that reported during the window but no longer at its end.

use super::*;

/// Replicas (series of a gauge) that reported during the window but no longer at its end: the
/// value is how many, and a lone one is named in the finding.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vanished {
    pub gauge: Vec<String>,
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
}

impl Kind for Vanished {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.gauge, "gauge")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![self.gauge.clone()]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let replica_label = &replica(&self.replica_label, ctx)?;
        let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
        let m = ctx.selector.series(&resolved.names[0], &[]);
        let value = format!("group by ({by}, {replica_label}) (last_over_time({m}[{r}])) unless group by ({by}, {replica_label}) (last_over_time({m}[5m]))");
        Ok(SignalQueries { value, per_replica: Some((replica_label.clone(), Reduction::Count)), ..plain(String::new()) })
    }
}
