//! `rules export --backtest`: when the exported alerts would have fired over past data.
//!
//! Each alert's expression is asked as range queries (a day at a time, [`chunks`]), evaluated
//! every `step` as Prometheus' rule manager evaluates it every `evaluation_interval`. A point in the answer is an evaluation at
//! which the expression returned that series; this module turns those points into what the rule
//! manager would have done with them ([`episodes`]): a series that appears is pending, fires once
//! it has been returned at every evaluation for `for:`, and resolves at the first evaluation that
//! does not return it (a pending series that misses one evaluation starts over).
//!
//! Everything here is plain functions over the answers; the queries are sent by the program
//! (`app::rules`). One more query says where the range holds vLLM data at all ([`coverage_query`]),
//! so that "never fired" over a range with no data is said as such, not as quiet.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use crate::prom::{escape::escape_label_value, Labels, Selector};
use crate::report::Severity;
use crate::source::Series;

/// Prometheus refuses a range query that would return more points than this per series.
pub const MAX_POINTS: u64 = 11_000;

/// The range and cadence of a backtest.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The first evaluation (a multiple of `step`, so that two runs over the same data agree).
    pub start: DateTime<Utc>,
    /// The range's end (`--at`); the last evaluation is the last multiple of `step` before it.
    pub end: DateTime<Utc>,
    /// Time between two evaluations, whole seconds.
    pub step: Duration,
    /// The alerts' `for:`.
    pub hold: Duration,
    /// What the plan changed from what was asked (a step raised to stay under [`MAX_POINTS`]).
    pub notes: Vec<String>,
}

/// The plan for `range` before `end`, evaluated every `step` (at least 1s, raised so that a
/// series has at most [`MAX_POINTS`] points), with alerts held for `hold`.
pub fn plan(end: DateTime<Utc>, range: Duration, step: Duration, hold: Duration) -> Plan {
    let mut notes = Vec::new();
    let asked = step.as_secs().max(1);
    let needed = range.as_secs().div_ceil(MAX_POINTS);
    let step_s = asked.max(needed);
    if step_s > asked {
        notes.push(format!(
            "evaluated every {} instead of every {}: a range query over {} may return at most {MAX_POINTS} points per series",
            humantime::format_duration(Duration::from_secs(step_s)),
            humantime::format_duration(Duration::from_secs(asked)),
            humantime::format_duration(range)
        ));
    }
    let step_i = step_s as i64;
    let first = end.timestamp() - range.as_secs() as i64;
    let start_s = first.div_euclid(step_i) * step_i + if first.rem_euclid(step_i) == 0 { 0 } else { step_i };
    let end_s = end.timestamp().div_euclid(step_i) * step_i;
    Plan {
        start: Utc.timestamp_opt(start_s.min(end_s), 0).single().unwrap_or(end),
        end: Utc.timestamp_opt(end_s, 0).single().unwrap_or(end),
        step: Duration::from_secs(step_s),
        hold,
        notes,
    }
}

impl Plan {
    /// How many evaluations the range holds.
    pub fn evaluations(&self) -> u64 {
        ((self.end - self.start).num_seconds().max(0) as u64) / self.step.as_secs().max(1) + 1
    }
}

/// How long one range query of a backtest covers at most.
pub const CHUNK: Duration = Duration::from_secs(86_400);

/// The plan's evaluations cut into pieces of at most [`CHUNK`], as (first, last) evaluation: each
/// piece starts one step after the last one ended, on the plan's step grid.
pub fn chunks(plan: &Plan) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let step = plan.step.as_secs().max(1) as i64;
    let per = (CHUNK.as_secs() as i64 / step).max(1);
    let total = plan.evaluations() as i64;
    let at = |i: i64| plan.start + chrono::Duration::seconds(i * step);
    (0..total).step_by(per as usize).map(|first| (at(first), at((first + per).min(total) - 1))).collect()
}

/// An error for the report: whole when short; else its start and its end (where the server's
/// reason usually is), the query in between left out.
pub fn shorten(error: &str) -> String {
    let chars: Vec<char> = error.chars().collect();
    if chars.len() <= 400 {
        return error.to_string();
    }
    let head: String = chars[..120].iter().collect();
    let tail: String = chars[chars.len() - 240..].iter().collect();
    format!("{head} ... {tail}")
}

/// The query that says at which evaluations the selected replicas exported vLLM data at all:
/// `vllm:num_requests_running`, which every vLLM version exports under that name.
pub fn coverage_query(selector: &Selector) -> String {
    format!("count({})", selector.series("vllm:num_requests_running", &[]))
}

/// One stretch during which an alert's expression returned a series and that lasted for `for:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// The series' labels (the alert's scope).
    pub labels: Labels,
    /// The first evaluation that returned it (the alert's `activeAt`).
    pub active_since: DateTime<Utc>,
    /// The first evaluation at which it had been returned for `for:`.
    pub firing_since: DateTime<Utc>,
    /// The first evaluation that no longer returned it; `None`: still firing at the range's end.
    pub resolved: Option<DateTime<Utc>>,
}

impl Episode {
    /// How long it fired, up to the range's end when it had not resolved.
    pub fn firing_for(&self, plan: &Plan) -> Duration {
        let until = self.resolved.unwrap_or(plan.end);
        (until - self.firing_since).to_std().unwrap_or_default()
    }
}

/// What the rule manager would have done with `series`, the answer to one alert's range query over
/// `plan`: the episodes that fired, in order of their start. A stretch shorter than `for:` was
/// only pending and is not one.
pub fn episodes(series: &[Series], plan: &Plan) -> Vec<Episode> {
    let step = plan.step.as_secs_f64().max(1.0);
    let hold = plan.hold.as_secs_f64();
    let at = |t: f64| Utc.timestamp_opt(t.round() as i64, 0).single().unwrap_or(plan.end);
    let last_eval = plan.end.timestamp() as f64;
    let mut out = Vec::new();
    for s in series {
        let mut times: Vec<f64> = s.points.iter().filter(|(_, v)| !v.is_nan()).map(|(t, _)| *t).collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        let mut i = 0;
        while i < times.len() {
            // A run of evaluations one step apart: the series stayed active throughout.
            let mut j = i;
            while j + 1 < times.len() && times[j + 1] - times[j] <= step * 1.5 {
                j += 1;
            }
            let (first, last) = (times[i], times[j]);
            // The first evaluation at least `for:` after it became active.
            let fire = first + (hold / step).ceil() * step;
            if fire <= last + step * 0.01 {
                let next = last + step;
                out.push(Episode {
                    labels: s.labels.clone(),
                    active_since: at(first),
                    firing_since: at(fire),
                    resolved: (next <= last_eval + step * 0.01).then(|| at(next)),
                });
            }
            i = j + 1;
        }
    }
    out.sort_by(|a, b| a.firing_since.cmp(&b.firing_since).then_with(|| a.labels.iter().cmp(b.labels.iter())));
    out
}

/// Where the range held vLLM data: the first and last evaluation with any, and at how many.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Coverage {
    pub first: Option<DateTime<Utc>>,
    pub last: Option<DateTime<Utc>>,
    /// Evaluations with data.
    pub with_data: u64,
}

/// The coverage, from the answer to [`coverage_query`].
pub fn coverage(series: &[Series]) -> Coverage {
    let mut times: Vec<i64> = series.iter().flat_map(|s| s.points.iter().filter(|(_, v)| *v > 0.0).map(|(t, _)| t.round() as i64)).collect();
    times.sort_unstable();
    times.dedup();
    let at = |t: &i64| Utc.timestamp_opt(*t, 0).single();
    Coverage { first: times.first().and_then(at), last: times.last().and_then(at), with_data: times.len() as u64 }
}

/// One alert's backtest.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertResult {
    /// The diagnosis rule's id.
    pub rule: String,
    /// The alert name.
    pub alert: String,
    pub severity: Severity,
    /// The expression asked.
    pub expr: String,
    /// The episodes, or why the query got no answer.
    pub outcome: Result<Vec<Episode>, String>,
}

/// A whole backtest.
#[derive(Debug, Clone, PartialEq)]
pub struct Backtest {
    pub plan: Plan,
    /// The range asked (`--backtest`), before alignment.
    pub range: Duration,
    /// The API asked, credentials never included.
    pub source: String,
    /// `None`: the coverage query failed (its reason).
    pub coverage: Result<Coverage, String>,
    pub alerts: Vec<AlertResult>,
    /// The labels the alerts are grouped by: Alertmanager's group_by, one notification group per
    /// scope (`rules export --format alertmanager`).
    pub group_by: Vec<String>,
    /// What each alert mutes in its scope while it fires (the inhibit rules of that format).
    pub inhibitions: Vec<super::export::Inhibit>,
}

/// One page: the notification group Alertmanager, set up as `rules export --format alertmanager`
/// says, sends for one incident: the episodes of one scope that overlap, merged.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The group_by labels of the scope.
    pub scope: Labels,
    pub start: DateTime<Utc>,
    /// `None`: still firing at the range's end.
    pub end: Option<DateTime<Utc>>,
    /// The rules whose alerts the page carries, the cause first (worst severity, then earliest).
    pub paged: Vec<String>,
    /// The rules whose alerts an inhibit rule muted: a rule in `paged` absorbs them.
    pub muted: Vec<String>,
}

/// The pages the alerts would have sent: their episodes grouped by scope and merged where they
/// overlap (an incident), each alert muted when, as it began firing, an alert whose rule absorbs
/// it was firing in the same scope.
pub fn pages(b: &Backtest) -> Vec<Page> {
    let scope_of = |l: &Labels| -> Labels {
        let mut s = Labels::new();
        for (k, v) in l.iter().filter(|(k, _)| b.group_by.contains(k)) {
            s.insert(k.clone(), v.clone());
        }
        s
    };
    // (scope, start, end, rule, severity), by scope then start.
    type Ep<'a> = (Labels, DateTime<Utc>, Option<DateTime<Utc>>, &'a str, Severity);
    let mut eps: Vec<Ep> = Vec::new();
    for a in &b.alerts {
        for e in a.outcome.as_deref().unwrap_or_default() {
            eps.push((scope_of(&e.labels), e.firing_since, e.resolved, a.rule.as_str(), a.severity));
        }
    }
    eps.sort_by(|x, y| scope(&x.0).cmp(&scope(&y.0)).then(x.1.cmp(&y.1)));
    let overlaps = |end: Option<DateTime<Utc>>, start: DateTime<Utc>| end.is_none_or(|e| e >= start);
    // (scope, end so far (None: still firing), episodes)
    let mut incidents: Vec<(Labels, Option<DateTime<Utc>>, Vec<&Ep>)> = Vec::new();
    for e in &eps {
        if let Some((sc, end, members)) = incidents.last_mut() {
            if *sc == e.0 && overlaps(*end, e.1) {
                *end = match (*end, e.2) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                members.push(e);
                continue;
            }
        }
        incidents.push((e.0.clone(), e.2, vec![e]));
    }
    let absorbs = |a: &str, x: &str| b.inhibitions.iter().any(|i| i.source == a && i.targets.iter().any(|t| t == x));
    incidents
        .into_iter()
        .map(|(sc, end, i)| {
            let muted_at = |x: &Ep| i.iter().any(|y| absorbs(y.3, x.3) && y.1 <= x.1 && overlaps(y.2, x.1));
            let mut paged: Vec<(&str, Severity, DateTime<Utc>)> = Vec::new();
            let mut muted: Vec<String> = Vec::new();
            for x in &i {
                if muted_at(x) {
                    if !muted.iter().any(|m| m == x.3) {
                        muted.push(x.3.to_string());
                    }
                } else if !paged.iter().any(|p| p.0 == x.3) {
                    paged.push((x.3, x.4, x.1));
                }
            }
            muted.retain(|m| !paged.iter().any(|p| p.0 == m));
            paged.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(b.0)));
            Page { scope: sc, start: i[0].1, end, paged: paged.into_iter().map(|p| p.0.to_string()).collect(), muted }
        })
        .collect()
}

impl Backtest {
    /// Whether the backtest says anything: the range held vLLM data and every alert was evaluated.
    pub fn complete(&self) -> bool {
        matches!(&self.coverage, Ok(c) if c.with_data > 0) && self.alerts.iter().all(|a| a.outcome.is_ok())
    }
}

fn utc(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// `45s`, `22m`, `3h05m`, `7d`, `2d4h`: a duration as PromQL writes one, to the minute.
fn short(d: Duration) -> String {
    let s = d.as_secs();
    let (days, h, m) = (s / 86400, (s % 86400) / 3600, (s % 3600) / 60);
    match (days, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, 0) => format!("{h}h"),
        (0, h, m) => format!("{h}h{m:02}m"),
        (d, 0, 0) => format!("{d}d"),
        (d, h, _) => format!("{d}d{h}h"),
    }
}

fn scope(labels: &Labels) -> String {
    if labels.is_empty() {
        return "(no labels)".into();
    }
    labels.iter().filter(|(k, _)| k.as_str() != "__name__").map(|(k, v)| format!("{k}=\"{}\"", escape_label_value(v))).collect::<Vec<_>>().join(",")
}

/// The report for people: the range, where it held data, then each alert that fired (worst
/// severity first) with its episodes, the ones that never fired in one line, and the ones that
/// could not be evaluated with their reason.
pub fn to_text(b: &Backtest) -> String {
    use std::fmt::Write;
    let p = &b.plan;
    let mut out = String::new();
    let fired: Vec<&AlertResult> = b.alerts.iter().filter(|a| matches!(&a.outcome, Ok(e) if !e.is_empty())).collect();
    let quiet: Vec<&AlertResult> = b.alerts.iter().filter(|a| matches!(&a.outcome, Ok(e) if e.is_empty())).collect();
    let failed: Vec<&AlertResult> = b.alerts.iter().filter(|a| a.outcome.is_err()).collect();
    let no_data = !matches!(&b.coverage, Ok(c) if c.with_data > 0);
    let headline = if no_data {
        "NOT EVALUATED: the range holds no vLLM data, so no alert could fire; this is not a quiet week".to_string()
    } else if !failed.is_empty() {
        format!("INCOMPLETE: {} of {} alerts could not be evaluated (below); {} fired", failed.len(), b.alerts.len(), fired.len())
    } else if fired.is_empty() {
        format!("No alert would have fired: {} alerts over {}", b.alerts.len(), short(b.range))
    } else {
        let episodes: usize = fired.iter().map(|a| a.outcome.as_ref().map_or(0, Vec::len)).sum();
        format!(
            "{} of {} alerts would have fired, {episodes} time{} in all, over {}",
            fired.len(),
            b.alerts.len(),
            if episodes == 1 { "" } else { "s" },
            short(b.range)
        )
    };
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out, "Range: {} to {}, evaluated every {}, for: {}; source {}", utc(&p.start), utc(&p.end), short(p.step), short(p.hold), b.source);
    match &b.coverage {
        Ok(c) => match (c.first, c.last) {
            (Some(first), Some(last)) => {
                let share = c.with_data as f64 / p.evaluations().max(1) as f64 * 100.0;
                let _ = writeln!(out, "vLLM data: {} to {} ({share:.0}% of the evaluations)", utc(&first), utc(&last));
            }
            _ => {
                let _ = writeln!(out, "vLLM data: none in the range (vllm:num_requests_running matched no series)");
            }
        },
        Err(e) => {
            let _ = writeln!(out, "vLLM data: unknown ({e})");
        }
    }
    for n in &p.notes {
        let _ = writeln!(out, "Note: {n}");
    }
    let pages = pages(b);
    if !pages.is_empty() {
        let muted: usize = pages.iter().map(|p| p.muted.len()).sum();
        let _ = writeln!(
            out,
            "\nPages: {} (one per incident: Alertmanager grouping by {} with the inhibit rules of `rules export --format alertmanager`); {muted} alert{} muted",
            pages.len(),
            b.group_by.join(", "),
            if muted == 1 { "" } else { "s" }
        );
        for pg in &pages {
            let end = pg.end.map_or("still firing".to_string(), |e| e.format("%H:%M UTC").to_string());
            let muted = if pg.muted.is_empty() { String::new() } else { format!("; muted: {}", pg.muted.join(", ")) };
            let _ = writeln!(out, "  {} - {end}  {}: {}{muted}", pg.start.format("%Y-%m-%d %H:%M"), scope(&pg.scope), pg.paged.join(", "));
        }
    }
    let mut fired = fired;
    fired.sort_by_key(|a| std::cmp::Reverse(a.severity));
    for a in &fired {
        let episodes = a.outcome.as_ref().map(Vec::as_slice).unwrap_or_default();
        let total: Duration = episodes.iter().map(|e| e.firing_for(p)).sum();
        let _ = writeln!(
            out,
            "\n{} ({}, rule {}): fired {} time{}, {} in all",
            a.alert,
            a.severity.as_str(),
            a.rule,
            episodes.len(),
            if episodes.len() == 1 { "" } else { "s" },
            short(total)
        );
        for e in episodes {
            // The end as a time of day when it is the same day, else in full.
            let end = e.resolved.unwrap_or(p.end);
            let end_text =
                if end.date_naive() == e.firing_since.date_naive() { end.format("%H:%M").to_string() } else { end.format("%Y-%m-%d %H:%M").to_string() };
            let how_long = match e.resolved {
                Some(_) => short(e.firing_for(p)),
                None => format!("{}, still firing at the range's end", short(e.firing_for(p))),
            };
            let _ = writeln!(out, "  {} - {end_text} UTC ({how_long})  {}", e.firing_since.format("%Y-%m-%d %H:%M"), scope(&e.labels));
        }
    }
    if !quiet.is_empty() {
        let names: Vec<&str> = quiet.iter().map(|a| a.alert.as_str()).collect();
        let _ = writeln!(out, "\nNever fired ({}): {}", quiet.len(), names.join(", "));
    }
    if !failed.is_empty() {
        let _ = writeln!(out, "\nNot evaluated ({}):", failed.len());
        for a in &failed {
            let _ = writeln!(out, "  {}: {}", a.alert, a.outcome.as_ref().err().map_or("", String::as_str));
        }
    }
    out
}

/// The report as JSON (docs/rules.md, "Backtesting the alerts").
pub fn to_json(b: &Backtest) -> serde_json::Value {
    use serde_json::json;
    let p = &b.plan;
    let ts = |t: &DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let alerts: Vec<serde_json::Value> = b
        .alerts
        .iter()
        .map(|a| {
            let mut v = json!({ "alert": a.alert, "rule": a.rule, "severity": a.severity.as_str(), "expr": a.expr });
            match &a.outcome {
                Ok(episodes) => {
                    v["status"] = json!(if episodes.is_empty() { "quiet" } else { "fired" });
                    v["fired"] = json!(episodes.len());
                    v["firing_seconds"] = json!(episodes.iter().map(|e| e.firing_for(p).as_secs()).sum::<u64>());
                    v["episodes"] = episodes
                        .iter()
                        .map(|e| {
                            json!({
                                "labels": e.labels,
                                "active_since": ts(&e.active_since),
                                "firing_since": ts(&e.firing_since),
                                "resolved": e.resolved.as_ref().map(ts),
                                "firing_seconds": e.firing_for(p).as_secs(),
                            })
                        })
                        .collect();
                }
                Err(reason) => {
                    v["status"] = json!("not_evaluated");
                    v["reason"] = json!(reason);
                }
            }
            v
        })
        .collect();
    let coverage = match &b.coverage {
        Ok(c) => json!({ "first": c.first.as_ref().map(ts), "last": c.last.as_ref().map(ts), "evaluations_with_data": c.with_data }),
        Err(e) => json!({ "error": e }),
    };
    json!({
        "backtest": {
            "start": ts(&p.start),
            "end": ts(&p.end),
            "range_seconds": b.range.as_secs(),
            "step_seconds": p.step.as_secs(),
            "for_seconds": p.hold.as_secs(),
            "evaluations": p.evaluations(),
            "notes": p.notes,
        },
        "source": b.source,
        "data": coverage,
        "complete": b.complete(),
        "alerts": alerts,
        "group_by": b.group_by,
        "pages": pages(b)
            .iter()
            .map(|pg| json!({ "scope": pg.scope, "start": ts(&pg.start), "end": pg.end.as_ref().map(ts), "paged": pg.paged, "muted": pg.muted }))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).unwrap()
    }

    fn series(model: &str, times: &[i64]) -> Series {
        let mut labels = Labels::new();
        labels.insert("model_name".into(), model.into());
        Series { labels, points: times.iter().map(|t| (*t as f64, 1.0)).collect() }
    }

    fn plan60(hold: u64) -> Plan {
        plan(t(6000), Duration::from_secs(6000), Duration::from_secs(60), Duration::from_secs(hold))
    }

    #[test]
    fn the_plan_aligns_to_the_step_and_raises_it_to_stay_under_the_point_limit() {
        let p = plan(t(1_000_030), Duration::from_secs(3600), Duration::from_secs(60), Duration::ZERO);
        assert_eq!(p.end, t(1_000_020));
        assert_eq!(p.start, t(996_480));
        assert!(p.notes.is_empty());
        assert_eq!(p.evaluations(), 60);
        // Fourteen days at one minute would be 20,160 points.
        let p = plan(t(2_000_000), Duration::from_secs(14 * 86400), Duration::from_secs(60), Duration::ZERO);
        assert_eq!(p.step, Duration::from_secs(110));
        assert!(p.evaluations() <= MAX_POINTS + 1, "{}", p.evaluations());
        assert!(p.notes[0].contains("11000 points"), "{:?}", p.notes);
    }

    #[test]
    fn a_week_is_asked_a_day_at_a_time_on_one_grid() {
        let p = plan(t(1_000_020), Duration::from_secs(7 * 86400), Duration::from_secs(60), Duration::ZERO);
        let c = chunks(&p);
        assert_eq!(c.len(), 8, "{c:?}");
        assert_eq!(c[0].0, p.start);
        assert_eq!(c[c.len() - 1].1, p.end);
        for pair in c.windows(2) {
            assert_eq!(pair[1].0 - pair[0].1, chrono::Duration::seconds(60), "{pair:?}");
        }
        let short = plan(t(1_000_020), Duration::from_secs(3600), Duration::from_secs(60), Duration::ZERO);
        assert_eq!(chunks(&short), vec![(short.start, short.end)]);
    }

    #[test]
    fn a_long_error_keeps_its_start_and_its_end() {
        let long = format!("http://x rejected the query: {} cannot exceed 30000", "q".repeat(1000));
        let s = shorten(&long);
        assert!(s.len() < 400 && s.starts_with("http://x rejected") && s.ends_with("cannot exceed 30000"), "{s}");
        assert_eq!(shorten("short"), "short");
    }

    #[test]
    fn a_series_fires_after_for_and_resolves_at_the_first_evaluation_without_it() {
        let p = plan60(300);
        // Active from 600 to 1500 (16 evaluations): pending 600-840, firing from 900, resolved at 1560.
        let e = episodes(&[series("a", &(10..=25).map(|i| i * 60).collect::<Vec<_>>())], &p);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].active_since, e[0].firing_since, e[0].resolved), (t(600), t(900), Some(t(1560))));
        assert_eq!(e[0].firing_for(&p), Duration::from_secs(660));
    }

    #[test]
    fn a_stretch_shorter_than_for_is_only_pending_and_a_gap_starts_over() {
        let p = plan60(300);
        // 4 evaluations (3 minutes): pending only. Then a gap, then 6 evaluations: fires once at +5m.
        let mut times: Vec<i64> = (10..=13).map(|i| i * 60).collect();
        times.extend((20..=25).map(|i| i * 60));
        let e = episodes(&[series("a", &times)], &p);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].firing_since, t(1500));
        assert_eq!(e[0].resolved, Some(t(1560)));
    }

    #[test]
    fn two_stretches_are_two_episodes_and_one_running_at_the_end_is_still_firing() {
        let p = plan60(0);
        let mut times: Vec<i64> = (10..=12).map(|i| i * 60).collect();
        times.extend((95..=100).map(|i| i * 60));
        let e = episodes(&[series("a", &times), series("b", &[3000])], &p);
        assert_eq!(e.len(), 3, "{e:?}");
        assert_eq!(e[0].resolved, Some(t(780)));
        assert_eq!(e[1].labels.get("model_name").map(String::as_str), Some("b"));
        assert_eq!((e[2].firing_since, e[2].resolved), (t(5700), None));
        assert_eq!(e[2].firing_for(&p), Duration::from_secs(300));
    }

    #[test]
    fn an_incident_pages_once_with_its_cause_and_mutes_what_the_cause_absorbs() {
        let ep = |model: &str, from: i64, to: Option<i64>| {
            let mut labels = Labels::new();
            labels.insert("model_name".into(), model.into());
            labels.insert("instance".into(), "i-0".into());
            Episode { labels, active_since: t(from), firing_since: t(from), resolved: to.map(t) }
        };
        let alert =
            |rule: &str, severity, eps: Vec<Episode>| AlertResult { rule: rule.into(), alert: rule.into(), severity, expr: "x".into(), outcome: Ok(eps) };
        let b = Backtest {
            plan: plan60(300),
            range: Duration::from_secs(6000),
            source: "http://x".into(),
            coverage: Ok(coverage(&[])),
            alerts: vec![
                // The cause and what it absorbs, on model a; slo-burn on b alone; on a again, later,
                // an absorbed alert that began before its cause: it pages.
                alert("slo-burn", Severity::Critical, vec![ep("a", 600, Some(1800)), ep("b", 600, Some(900)), ep("a", 4000, None)]),
                alert("kv-cache-pressure", Severity::Critical, vec![ep("a", 540, Some(1800)), ep("a", 4060, None)]),
                alert("load-exceeds-capacity", Severity::Warning, vec![ep("a", 540, Some(1700))]),
            ],
            group_by: vec!["model_name".into()],
            inhibitions: vec![super::super::export::Inhibit {
                source: "kv-cache-pressure".into(),
                targets: vec!["load-exceeds-capacity".into(), "slo-burn".into()],
            }],
        };
        let pages = pages(&b);
        let summary: Vec<(String, Vec<String>, Vec<String>)> =
            pages.iter().map(|p| (p.scope.get("model_name").cloned().unwrap_or_default(), p.paged.clone(), p.muted.clone())).collect();
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            summary,
            vec![
                ("a".into(), v(&["kv-cache-pressure"]), v(&["load-exceeds-capacity", "slo-burn"])),
                ("a".into(), v(&["slo-burn", "kv-cache-pressure"]), v(&[])),
                ("b".into(), v(&["slo-burn"]), v(&[])),
            ]
        );
        assert_eq!((pages[0].start, pages[0].end), (t(540), Some(t(1800))));
        assert_eq!(pages[1].end, None);
        assert!(to_text(&b).contains("Pages: 3 (one per incident"), "{}", to_text(&b));
        assert_eq!(to_json(&b)["pages"][0]["paged"][0], "kv-cache-pressure");
    }

    #[test]
    fn no_data_is_not_quiet() {
        let p = plan60(300);
        let b = Backtest {
            plan: p,
            range: Duration::from_secs(6000),
            source: "http://x".into(),
            coverage: Ok(coverage(&[])),
            alerts: vec![AlertResult { rule: "r".into(), alert: "VllmDiagR".into(), severity: Severity::Warning, expr: "x".into(), outcome: Ok(vec![]) }],
            group_by: vec!["model_name".into()],
            inhibitions: Vec::new(),
        };
        assert!(!b.complete());
        assert!(to_text(&b).starts_with("NOT EVALUATED"));
        assert_eq!(to_json(&b)["complete"], false);
    }
}
