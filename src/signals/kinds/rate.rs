//! `rate`: a counter's per-second rate, summed over the scope.

use super::*;

/// Per-second rate of a counter (names with `_total`), summed over the scope.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub counter: Vec<String>,
    #[serde(default)]
    pub r#match: String,
    #[serde(default)]
    pub attribute_via: Vec<String>,
    #[serde(default = "default_join")]
    pub join_on: Vec<String>,
    /// The count over the range (the rate times the range's seconds) instead of the rate per
    /// second: how many requests a share is taken over.
    #[serde(default)]
    pub total: bool,
}

impl Kind for Rate {
    fn validate(&self) -> Result<(), String> {
        check_match(&self.r#match, "match")?;
        nonempty(&self.counter, "counter")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        with_anchor(vec![self.counter.clone()], &self.attribute_via)
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let extra = matchers(&self.r#match)?;
        let anchor = (!self.attribute_via.is_empty()).then(|| resolved.names[1].as_str());
        let (value, read) = summed(rate_read(&resolved.names[0], &extra, anchor, &self.join_on, ctx), ctx);
        if self.total {
            return Ok(plain(format!("{value} * {}", ctx.range.as_secs().max(1))));
        }
        Ok(SignalQueries { sums: vec![(value.clone(), read)], ..plain(value) })
    }

    fn when_empty(&self) -> WhenEmpty {
        // Attributed through a join, a rate can be empty because the join matched nothing.
        if self.attribute_via.is_empty() {
            WhenEmpty::Unread
        } else {
            WhenEmpty::MayBe
        }
    }

    fn replica_breakdown(&self) -> bool {
        self.attribute_via.is_empty()
    }
}
