//! `give_ups`: requests the clients gave up on that the engine counted nowhere, estimated.

use super::*;

/// Requests the clients gave up on that the engine counted nowhere, estimated: requests that got
/// their first token (`started`, a histogram's `_count`: TTFT) less requests that finished
/// (`finished`, a counter), less the most that could still be under way at the window's end
/// (`running`, a gauge: its highest level in the window, summed over the scope), per second and
/// never below 0. vLLM V1 records a request's TTFT when its first token leaves the engine, and
/// a stream the client closes ends as no finished request at all in some versions (no
/// `finished_reason="abort"`, HTTP 200). With `share`, that rate over itself plus the finished
/// rate: the share of requests given up.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GiveUps {
    pub started: Vec<String>,
    pub finished: Vec<String>,
    pub running: Vec<String>,
    #[serde(default)]
    pub share: bool,
}

impl Kind for GiveUps {
    fn validate(&self) -> Result<(), String> {
        nonempty(&self.started, "started")?;
        nonempty(&self.finished, "finished")?;
        nonempty(&self.running, "running")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![hist(&self.started, "_count"), self.finished.clone(), self.running.clone()]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let (by, r, sel) = (ctx.group_by.join(", "), promql_duration(ctx.range), &ctx.selector);
        let rate = |name: &String| format!("sum by ({by}) (rate({}[{r}]))", sel.series(name, &[]));
        let (started, finished) = (rate(&resolved.names[0]), rate(&resolved.names[1]));
        let under_way = format!("sum by ({by}) (max_over_time({}[{r}])) / {}", sel.series(&resolved.names[2], &[]), ctx.range.as_secs().max(1));
        let gave_up = format!("clamp_min({started} - {finished} - {under_way}, 0)");
        let value = if self.share { format!("{gave_up} / ({gave_up} + {finished})") } else { gave_up };
        // explain reads the three once each and combines them itself (Combine::GiveUps): the
        // rates are sums other signals read too (finished requests by reason and replica), where
        // they are written as such a sum would be.
        let sums = [&started, &finished]
            .into_iter()
            .zip(&resolved.names)
            .map(|(q, name)| (q.clone(), rate_read(name, &[], None, &[], ctx)))
            .filter(|(q, read)| read.promql(sel, &ctx.group_by) == *q)
            .collect();
        Ok(SignalQueries { sums, ..with_parts(value, Combine::GiveUps { share: self.share }, vec![started, finished, under_way]) })
    }
}
