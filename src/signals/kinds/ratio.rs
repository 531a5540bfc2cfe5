//! `ratio`: the rate of one counter over another's, optionally per a gauge's level.

use super::*;

/// Rate of one counter over another (a share: 5xx over all, aborted over finished). With `per`,
/// that ratio divided by a gauge averaged over time, engine by engine (replica and `engine`
/// label) where the gauge stayed at `per_at_least` or more throughout (below it, no value: a
/// gauge sampled at 0, 1 or 2 measures no level; a range across a change of load mixes two),
/// then averaged over the scope: generated tokens per engine step per running request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ratio {
    pub numerator: CounterRef,
    pub denominator: CounterRef,
    #[serde(default)]
    pub per: Vec<String>,
    #[serde(default)]
    pub per_at_least: f64,
    /// For counters that lack the grouping label (http_requests_total, DCGM): a vLLM gauge whose
    /// series map the `join_on` labels to the grouping label.
    #[serde(default)]
    pub attribute_via: Vec<String>,
    #[serde(default = "default_join")]
    pub join_on: Vec<String>,
}

/// One counter (its alternatives) and the series of it to read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterRef {
    pub counter: Vec<String>,
    #[serde(default)]
    pub r#match: String,
}

impl Kind for Ratio {
    fn validate(&self) -> Result<(), String> {
        let Ratio { numerator, denominator, attribute_via, per, per_at_least, .. } = self;
        if !per_at_least.is_finite() || *per_at_least < 0.0 {
            return Err(format!("per_at_least {per_at_least} must be a number of at least 0"));
        }
        if !per.is_empty() && !attribute_via.is_empty() {
            return Err("`per` is not combined with `attribute_via`".into());
        }
        check_match(&numerator.r#match, "numerator match")?;
        check_match(&denominator.r#match, "denominator match")?;
        nonempty(&numerator.counter, "numerator.counter")?;
        nonempty(&denominator.counter, "denominator.counter")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        let mut v = vec![self.numerator.counter.clone()];
        if self.denominator.counter != self.numerator.counter {
            v.push(self.denominator.counter.clone());
        }
        if !self.per.is_empty() {
            v.push(self.per.clone());
        }
        with_anchor(v, &self.attribute_via)
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let Ratio { numerator, denominator, attribute_via, join_on, .. } = self;
        if !self.per.is_empty() {
            return Ok(plain(self.per_gauge_query(resolved, ctx)?));
        }
        let num_extra = matchers(&numerator.r#match)?;
        let den_extra = matchers(&denominator.r#match)?;
        let num_name = &resolved.names[0];
        let den_name = if denominator.counter != numerator.counter { &resolved.names[1] } else { num_name };
        let anchor = (!attribute_via.is_empty()).then(|| resolved.names.last().map(String::as_str)).flatten();
        let (num, num_read) = summed(rate_read(num_name, &num_extra, anchor, join_on, ctx), ctx);
        let (den, den_read) = summed(rate_read(den_name, &den_extra, anchor, join_on, ctx), ctx);
        // A share with no matching events is 0, not "no data": fall back to 0 x the denominator.
        // explain reads the two rates once each (other shares and signals read the same
        // denominator) and divides them itself (Combine::Share).
        Ok(SignalQueries {
            sums: vec![(num.clone(), num_read), (den.clone(), den_read)],
            ..with_parts(format!("({num} or {den} * 0) / {den}"), Combine::Share, vec![num, den])
        })
    }

    fn replica_breakdown(&self) -> bool {
        self.attribute_via.is_empty()
    }
}

impl Ratio {
    /// A ratio per a gauge's level (`per`), engine by engine (the replica and vLLM's
    /// data-parallel `engine` label): a busy replica's steps beside an idle one's would otherwise
    /// read as a batch twice the average. Only where the gauge stayed at `per_at_least` or more
    /// throughout the range: a range across a change of load (a busy stretch ending) weighs the
    /// steps and the gauge's time differently. Then averaged over the scope's engines: one series
    /// per scope, one expression read whole (no anchor: the loader refuses one).
    fn per_gauge_query(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
        let Ratio { numerator, denominator, per_at_least: at_least, .. } = self;
        let (by, r, sel) = (ctx.group_by.join(", "), promql_duration(ctx.range), &ctx.selector);
        let (num_name, gauge) = (&resolved.names[0], resolved.names.last().ok_or("no gauge")?);
        let den_name = if denominator.counter != numerator.counter { &resolved.names[1] } else { num_name };
        let replica = ctx.replica_label.as_str();
        if !crate::prom::is_label_name(replica) {
            return Err(format!("replica label {replica:?} is not a label name"));
        }
        let mut each: Vec<&str> = ctx.group_by.iter().map(String::as_str).collect();
        for l in [replica, "engine"] {
            if !each.contains(&l) {
                each.push(l);
            }
        }
        let each = each.join(", ");
        Ok(format!(
            "avg by ({by}) (sum by ({each}) (rate({}[{r}])) / sum by ({each}) (rate({}[{r}])) / (sum by ({each}) (avg_over_time({g}[{r}])) and (sum by ({each}) (min_over_time({g}[{r}])) >= {at_least})))",
            sel.series(num_name, &matchers(&numerator.r#match)?),
            sel.series(den_name, &matchers(&denominator.r#match)?),
            g = sel.series(gauge, &[])
        ))
    }
}
