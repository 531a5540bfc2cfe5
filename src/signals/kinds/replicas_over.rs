//! `replicas_over`: replicas whose gauge exceeded a level in the window.

use super::*;

/// Replicas whose gauge exceeded `above` at some point in the window: how many, and a lone one
/// is named. With `attribute_via`, for exporters without the grouping label (DCGM).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicasOver {
    pub gauge: Vec<String>,
    pub above: f64,
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
    #[serde(default)]
    pub attribute_via: Vec<String>,
    #[serde(default = "default_join")]
    pub join_on: Vec<String>,
    /// As a gauge's `bits`: the bitmask's samples read 1 where one of these bits is set.
    #[serde(default)]
    pub bits: Vec<u32>,
    /// Labels of the gauge's own series that the finding also names (a GPU's `UUID` and
    /// `Hostname`), where the series carry them.
    #[serde(default)]
    pub name_by: Vec<String>,
}

impl Kind for ReplicasOver {
    fn validate(&self) -> Result<(), String> {
        super::gauge::single_bits(&self.bits)?;
        nonempty(&self.gauge, "gauge")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        with_anchor(vec![self.gauge.clone()], &self.attribute_via)
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let replica_label = &replica(&self.replica_label, ctx)?;
        if let Some(bad) = self.name_by.iter().find(|l| !crate::prom::is_label_name(l)) {
            return Err(format!("name_by {bad:?} is not a label name"));
        }
        let value = self.query(replica_label, resolved, ctx);
        Ok(SignalQueries { value, per_replica: Some((replica_label.clone(), Reduction::Count)), ..plain(String::new()) })
    }
}

impl ReplicasOver {
    /// Replicas whose gauge went over `above` in the window, one series each. An attributed gauge
    /// (an exporter's, without the model label) is joined to the scope through the anchor gauge;
    /// the anchor's `instance` then replaces the exporter's own, so the finding can name the vLLM
    /// server as well as the pod.
    fn query(&self, replica_label: &str, resolved: &Resolved, ctx: &QueryContext) -> String {
        let by = ctx.group_by.join(", ");
        let r = promql_duration(ctx.range);
        let sel = &ctx.selector;
        let above = self.above;
        let peak = |series: String| {
            if self.bits.is_empty() {
                format!("max_over_time({series}[{r}])")
            } else {
                format!("max_over_time(({})[{r}:{}s])", bits_set(&series, &self.bits), subquery_step(ctx))
            }
        };
        let named: String = self.name_by.iter().filter(|l| *l != replica_label && !ctx.group_by.contains(l)).map(|l| format!(", {l}")).collect();
        if self.attribute_via.is_empty() {
            format!("max by ({by}, {replica_label}{named}) ({}) > {above}", peak(sel.series(&resolved.names[0], &[])))
        } else {
            let own = sel.without(&ctx.group_by);
            let mut carry = ctx.group_by.clone();
            if replica_label != "instance" {
                carry.push("instance".into());
            }
            let (j, left, anchor_by) = join_labels(&self.join_on, &carry);
            format!(
                "max by ({by}, {replica_label}{}{named}) ({} * on ({j}) group_left ({left}) group by ({anchor_by}) (last_over_time({}[{r}]))) > {above}",
                if replica_label == "instance" { "" } else { ", instance" },
                peak(own.series(&resolved.names[0], &[])),
                sel.series(&resolved.names[1], &[])
            )
        }
    }
}
