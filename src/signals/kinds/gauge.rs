//! `gauge`: a gauge reduced over time, then across the scope's series.

use super::*;

/// A gauge reduced over time (`max`, `avg`, `min`, `last`) then across the scope's series.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gauge {
    pub gauge: Vec<String>,
    pub over_time: OverTime,
    pub across: Across,
    #[serde(default)]
    pub r#match: String,
    #[serde(default)]
    pub attribute_via: Vec<String>,
    #[serde(default = "default_join")]
    pub join_on: Vec<String>,
    /// Tie series to their scope through the anchor's series in the window or as long before
    /// it, not only in the window: a target that stopped serving before the window and has
    /// failed its scrapes since (`up` 0, no vLLM series left) is still its model's.
    #[serde(default)]
    pub attribute_before: bool,
    /// Another gauge taken off this one per scope where it exists (nothing where it does not):
    /// the requests of `num_requests_waiting` that `num_requests_waiting_by_reason` says were
    /// deferred for something other than capacity. Named as declared (its `vllm_` spelling is
    /// not tried) and not required: a fleet without it reads the gauge whole.
    #[serde(default)]
    pub less: Option<GaugeRef>,
    /// The gauge is a bitmask (DCGM's clocks-event reasons): each sample reads 1 where any of
    /// these bits is set and 0 where none is, before `over_time` (so `avg` is the share of the
    /// window with one of them set, `max` whether any sample had one). Read through a subquery
    /// at the trend step: a maximum of raw bitmasks would lose bits (0x100 hides 0x8).
    #[serde(default)]
    pub bits: Vec<u32>,
    /// Another gauge of the same exporter (the same labels) that this one is divided by, series
    /// by series, before reducing across the scope: power draw over its limit.
    #[serde(default)]
    pub over: Option<String>,
    /// Each series multiplied by this before reducing across the scope (a counter of
    /// microseconds read as a share of time: 0.000001).
    #[serde(default)]
    pub scale: Option<f64>,
}

/// One gauge and the series of it to read (`Gauge::less`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaugeRef {
    pub gauge: String,
    #[serde(default)]
    pub r#match: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverTime {
    Max,
    Avg,
    Min,
    Last,
    /// A counter's per-second rate, series by series (DCGM's violation counters: microseconds
    /// spent throttled per second), before reducing across the scope.
    Rate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Across {
    Max,
    Sum,
    Avg,
    Min,
}

impl Kind for Gauge {
    fn validate(&self) -> Result<(), String> {
        let Gauge { gauge, r#match, attribute_via, less, bits, over, scale, .. } = self;
        if let Some(l) = less {
            if l.gauge.trim().is_empty() || !attribute_via.is_empty() {
                return Err("`less` names one gauge, and is not combined with `attribute_via`".into());
            }
            check_match(&l.r#match, "less.match")?;
        }
        if !bits.is_empty() && (over.is_some() || less.is_some()) {
            return Err("`bits` reads a bitmask, and is not combined with `over` or `less`".into());
        }
        if let Some(k) = scale.filter(|k| !k.is_finite() || *k <= 0.0) {
            return Err(format!("scale {k} must be a number above 0"));
        }
        if over.as_ref().is_some_and(|o| o.trim().is_empty() || less.is_some()) {
            return Err("`over` names one gauge, and is not combined with `less`".into());
        }
        single_bits(bits)?;
        check_match(r#match, "match")?;
        nonempty(gauge, "gauge")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        let mut v = vec![self.gauge.clone()];
        v.extend(self.over.iter().map(|o| vec![o.clone()]));
        with_anchor(v, &self.attribute_via)
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        Ok(plain(self.query(resolved, ctx)?))
    }

    fn replica_breakdown(&self) -> bool {
        true
    }
}

impl Gauge {
    /// Each series reduced over the window (its bits decoded, divided by another gauge, scaled),
    /// then across the scope, joined to it through an anchor gauge where the series lack the
    /// grouping labels (exporters: DCGM).
    fn query(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
        let Gauge { over_time, across, r#match, attribute_via, join_on, attribute_before, less, bits, over, scale, .. } = self;
        let by = ctx.group_by.join(", ");
        let r = promql_duration(ctx.range);
        let sel = &ctx.selector;
        let extra = matchers(r#match)?;
        let (ot, ac) = (over_time_fn(*over_time), across_fn(*across));
        let over_name = over.as_ref().map(|_| resolved.names[1].as_str());
        if attribute_via.is_empty() {
            let whole = format!(
                "{ac} by ({by}) ({})",
                scaled(reduced_gauge(ot, &sel.series(&resolved.names[0], &extra), bits, over_name.map(|o| sel.series(o, &extra)), ctx), *scale)
            );
            match less {
                None => Ok(whole),
                // Where the other gauge has no series for a scope, `or` takes 0 off.
                Some(l) => {
                    let part = format!("{ac} by ({by}) ({ot}({}[{r}]))", sel.series(&l.gauge, &matchers(&l.r#match)?));
                    Ok(format!("{whole} - ({part} or {whole} * 0)"))
                }
            }
        } else {
            let own = sel.without(&ctx.group_by);
            let (j, left, anchor_by) = join_labels(join_on, &ctx.group_by);
            let anchor_range = if *attribute_before { promql_duration(ctx.range * 2) } else { r.clone() };
            let anchor = resolved.names.last().map(String::as_str).unwrap_or_default();
            Ok(format!(
                "{ac} by ({by}) ({} * on ({j}) group_left ({left}) group by ({anchor_by}) (last_over_time({}[{anchor_range}])))",
                scaled(reduced_gauge(ot, &own.series(&resolved.names[0], &extra), bits, over_name.map(|o| own.series(o, &extra)), ctx), *scale),
                sel.series(anchor, &[])
            ))
        }
    }
}

/// A plain gauge signal in parts (see [`Gauge::parts`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GaugeParts {
    /// Each series reduced over the range, unaggregated: `over_time(series[range])`.
    pub each: String,
    pub across: Across,
    /// The other gauge (`less`), each series reduced over the range the same way, where declared.
    pub less: Option<String>,
}

impl Gauge {
    /// The signal as vllm-diag can compute it from its series reduced over time, where it is a
    /// plain reduction: `across by (G) (each)`, less `across by (G) (less)` where that has the
    /// scope (`whole - (part or whole * 0)`, as [`Gauge::query`] writes it). None for a gauge joined
    /// through an anchor, read by its bits, divided by another or scaled.
    pub fn parts(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<Option<GaugeParts>, String> {
        if !self.attribute_via.is_empty() || !self.bits.is_empty() || self.over.is_some() || self.scale.is_some() {
            return Ok(None);
        }
        let (r, ot, sel) = (promql_duration(ctx.range), over_time_fn(self.over_time), &ctx.selector);
        let each = format!("{ot}({}[{r}])", sel.series(&resolved.names[0], &matchers(&self.r#match)?));
        let less = match &self.less {
            Some(l) => Some(format!("{ot}({}[{r}])", sel.series(&l.gauge, &matchers(&l.r#match)?))),
            None => None,
        };
        Ok(Some(GaugeParts { each, across: self.across, less }))
    }
}

/// A gauge's series reduced over time (`each` of [`GaugeParts`]) reduced across `by`.
pub fn across_query(each: &str, across: Across, by: &[String]) -> String {
    format!("{} by ({}) ({each})", across_fn(across), by.join(", "))
}

/// `bits` may list only single bits (powers of two), for a gauge and for `replicas_over`.
pub(super) fn single_bits(bits: &[u32]) -> Result<(), String> {
    match bits.iter().find(|b| !b.is_power_of_two()) {
        Some(bad) => Err(format!("bits: {bad} is not a single bit (a power of two: 1, 2, 4, 8, ...)")),
        None => Ok(()),
    }
}

fn over_time_fn(o: OverTime) -> &'static str {
    match o {
        OverTime::Max => "max_over_time",
        OverTime::Avg => "avg_over_time",
        OverTime::Min => "min_over_time",
        OverTime::Last => "last_over_time",
        OverTime::Rate => "rate",
    }
}

fn across_fn(a: Across) -> &'static str {
    match a {
        Across::Max => "max",
        Across::Sum => "sum",
        Across::Avg => "avg",
        Across::Min => "min",
    }
}

/// One gauge's series reduced over the window, series by series: `over_time(series[range])`; a
/// bitmask's bits first (through a subquery at the trends' step), or divided by another gauge of
/// the same labels (`over`).
fn reduced_gauge(ot: &str, series: &str, bits: &[u32], over: Option<String>, ctx: &QueryContext) -> String {
    let r = promql_duration(ctx.range);
    let own = if bits.is_empty() { format!("{ot}({series}[{r}])") } else { format!("{ot}(({})[{r}:{}s])", bits_set(series, bits), subquery_step(ctx)) };
    match over {
        None => own,
        Some(o) => format!("({own} / {ot}({o}[{r}]))"),
    }
}

/// A reduced series multiplied by `scale`, where there is one.
fn scaled(reduced: String, scale: Option<f64>) -> String {
    match scale {
        None => reduced,
        Some(k) => format!("({reduced} * {k})"),
    }
}
