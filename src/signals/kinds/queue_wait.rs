//! `queue_wait`: the mean time a request waits, by Little's law.

use super::*;

/// The mean time a request waits, by Little's law: requests waiting (a gauge, averaged over the
/// window and summed over the scope) divided by requests completed per second (a counter). It
/// stands in for queue-time histograms where only gauges and counters are kept.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueWait {
    pub gauge: Vec<String>,
    pub counter: Vec<String>,
}

impl Kind for QueueWait {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.gauge, "gauge")?;
        nonempty(&self.counter, "counter")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![self.gauge.clone(), self.counter.clone()]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
        let waiting = format!("sum by ({by}) (avg_over_time({}[{r}]))", ctx.selector.series(&resolved.names[0], &[]));
        let (done, done_read) = summed(rate_read(&resolved.names[1], &[], None, &[], ctx), ctx);
        Ok(SignalQueries { sums: vec![(done.clone(), done_read)], ..with_parts(format!("{waiting} / {done}"), Combine::Divide, vec![waiting, done]) })
    }
}
