//! `slope`: how fast a gauge climbs, per hour.

use super::*;

/// How fast a gauge climbs, per hour (linear regression over the window), averaged over replicas.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slope {
    pub gauge: Vec<String>,
    #[serde(default)]
    pub r#match: String,
}

impl Kind for Slope {
    fn validate(&self) -> Result<(), String> {
        check_match(&self.r#match, "match")?;
        nonempty(&self.gauge, "gauge")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![self.gauge.clone()]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
        let extra = matchers(&self.r#match)?;
        Ok(plain(format!("avg by ({by}) (deriv({}[{r}])) * 3600", ctx.selector.series(&resolved.names[0], &extra))))
    }

    fn replica_breakdown(&self) -> bool {
        true
    }
}
