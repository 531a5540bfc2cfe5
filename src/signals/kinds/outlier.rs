//! `outlier`: one replica (or data-parallel rank) against its peers.

use super::*;

/// One replica against its peers: the worst replica's value over the median of the others (or,
/// with `measure = "gap"`, minus it: how far apart they are in the signal's own unit). The
/// replica is named in the finding. Over a histogram, a replica with fewer than
/// `min_observations` in the window has no quantile worth comparing and is left out.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outlier {
    #[serde(default)]
    pub histogram: Vec<String>,
    #[serde(default)]
    pub gauge: Vec<String>,
    #[serde(default = "default_quantile")]
    pub quantile: f64,
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
    #[serde(default)]
    pub measure: OutlierMeasure,
    #[serde(default = "default_replica_observations")]
    pub min_observations: u32,
    /// Compare the data-parallel ranks (`engine`) inside each replica instead of the replicas:
    /// the worst rank against the median of its replica's other ranks, the replica where that
    /// is largest named with its rank. Gauges only.
    #[serde(default)]
    pub ranks: bool,
}

/// What an outlier signal says of the worst replica against the median of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutlierMeasure {
    /// How many times the median it is (a factor).
    #[default]
    Ratio,
    /// How far above the median it is, in the signal's unit: a ratio of two near-empty gauges or
    /// of two fast latencies is large while the difference means nothing.
    Gap,
}

fn default_quantile() -> f64 {
    0.95
}

/// A P95 from fewer than 20 observations is one of the few slowest requests, not a quantile.
fn default_replica_observations() -> u32 {
    20
}

impl Kind for Outlier {
    fn validate(&self) -> Result<(), String> {
        let Outlier { histogram, gauge, quantile, .. } = self;
        if histogram.is_empty() == gauge.is_empty() {
            return Err("an outlier signal names either `histogram` or `gauge`".into());
        }
        if !(0.0..=1.0).contains(quantile) {
            return Err(format!("quantile {quantile} must be between 0 and 1"));
        }
        Ok(())
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        if self.histogram.is_empty() {
            vec![self.gauge.clone()]
        } else {
            vec![hist(&self.histogram, "_bucket")]
        }
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let Outlier { histogram, quantile, measure, min_observations, ranks, .. } = self;
        let replica_label = &replica(&self.replica_label, ctx)?;
        if *ranks {
            if !histogram.is_empty() {
                return Err("ranks are compared on gauges only".into());
            }
            return Ok(rank_outlier(*measure, replica_label, resolved, ctx));
        }
        let min_observations = if histogram.is_empty() { 0 } else { *min_observations };
        Ok(replica_outlier(!histogram.is_empty(), *quantile, *measure, min_observations, replica_label, resolved, ctx))
    }

    fn histogram_use(&self) -> Option<HistogramUse> {
        (!self.histogram.is_empty()).then_some(HistogramUse::ReplicaQuantile(self.quantile))
    }
}

/// The operator of a measure: worst over (or minus) the median.
fn operator(measure: OutlierMeasure) -> &'static str {
    match measure {
        OutlierMeasure::Ratio => "/",
        OutlierMeasure::Gap => "-",
    }
}

/// The worst replica over (or minus) the median of the others. In PromQL the per-replica expression
/// is evaluated three times; explain fetches it once and reduces it (Reduction::Outlier).
fn replica_outlier(
    histogram: bool,
    quantile: f64,
    measure: OutlierMeasure,
    min_observations: u32,
    replica_label: &str,
    resolved: &Resolved,
    ctx: &QueryContext,
) -> SignalQueries {
    let (by, r, sel) = (ctx.group_by.join(", "), promql_duration(ctx.range), &ctx.selector);
    let per = if histogram {
        let fam = family_of(&resolved.names[0]);
        format!("histogram_quantile({quantile}, sum by (le, {by}, {replica_label}) (rate({}[{r}])))", sel.series(&format!("{fam}_bucket"), &[]))
    } else {
        format!("max by ({by}, {replica_label}) (avg_over_time({}[{r}]))", sel.series(&resolved.names[0], &[]))
    };
    let top = format!("topk by ({by}) (1, {per})");
    let op = operator(measure);
    let reading = OutlierReading { measure, min_observations, range_seconds: ctx.range.as_secs(), ranks: false };
    SignalQueries {
        value: format!("{top} {op} on ({by}) group_left quantile by ({by}) (0.5, {per} unless on ({by}, {replica_label}) {top})"),
        fetch: Some(per),
        per_replica: Some((replica_label.to_string(), Reduction::Outlier(reading))),
        ..plain(String::new())
    }
}

/// A gauge's data-parallel ranks compared inside each replica: per (scope, replica), the worst rank
/// over (or minus) the median of the replica's other ranks; the scope's value is the largest of
/// those. explain fetches the per-rank expression once and reduces it itself.
fn rank_outlier(measure: OutlierMeasure, replica_label: &str, resolved: &Resolved, ctx: &QueryContext) -> SignalQueries {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let per = format!("max by ({by}, {replica_label}, {RANK_LABEL}) (avg_over_time({}[{r}]))", ctx.selector.series(&resolved.names[0], &[]));
    let top = format!("topk by ({by}, {replica_label}) (1, {per})");
    let op = operator(measure);
    let reading = OutlierReading { measure, min_observations: 0, range_seconds: ctx.range.as_secs(), ranks: true };
    SignalQueries {
        value: format!(
            "max by ({by}) ({top} {op} on ({by}, {replica_label}) group_left quantile by ({by}, {replica_label}) (0.5, {per} unless on ({by}, {replica_label}, {RANK_LABEL}) {top}))"
        ),
        fetch: Some(per),
        per_replica: Some((replica_label.to_string(), Reduction::Outlier(reading))),
        ..plain(String::new())
    }
}
