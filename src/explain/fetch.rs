//! Stage: fetch. The only code of the pipeline that talks to the source: it sends requests
//! concurrently, decodes the answers, and turns the deadline into per-request timeouts.
//!
//! What the later stages read and what is sent are not always the same requests: a signal's window
//! and baseline are one range query cut into two instants, several sums are taken from one shared
//! read, a trend's baseline and window are one range query cut in two. A [`ReadPlan`] says, for
//! each request the stages read (a *want*), the ways it can be answered, best first: a request to
//! send and how its answer is cut. [`read`] sends every want's first way, and the next way of those
//! a recording does not hold (one made by an earlier build, which asked them in another form), in
//! as many rounds as that takes; [`ReadPlan::answers`] then cuts the answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::source::{decode, decode_folded, Data, Fold, Request, Response, Sample, Source, SourceError};

/// What one request got.
pub type Answer = Result<Response, SourceError>;

/// Answers keyed by request.
pub type Answers = BTreeMap<Request, Answer>;

/// How some answers are read (see [`crate::explain::plan`]): a query in `summed` is decoded summed by
/// its labels ([`crate::source::decode_summed`]), one in `maxed` likewise with `max by`. The query
/// given with them answers the same with the server summing: it is asked in its place where a recording lacks the first (one made before these
/// reads), and where the server refuses the first or its answer cannot be read (too large for a
/// proxy or for the answer cap, a limit of the backend), so one query's size never costs a signal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// query -> (the labels its answer is summed by, the query an earlier build asked instead)
    pub summed: BTreeMap<String, (Vec<String>, String)>,
    /// The same for answers read as `max by` of them.
    pub maxed: BTreeMap<String, (Vec<String>, String)>,
}

impl Reading {
    /// Read `query`'s answers folded by `by` with `fold`, `earlier` asked in its place where they
    /// cannot be read. False, and nothing changed, where `query` is read another way already: how a
    /// query is read holds for every request of it.
    pub fn fold_in(&mut self, query: &str, by: &[String], fold: Fold, earlier: &str) -> bool {
        let (mine, other) = match fold {
            Fold::Sum => (&mut self.summed, &self.maxed),
            Fold::Max => (&mut self.maxed, &self.summed),
        };
        match (other.contains_key(query), mine.get(query)) {
            (true, _) => false,
            (false, Some((b, _))) => b == by,
            (false, None) => {
                mine.insert(query.to_string(), (by.to_vec(), earlier.to_string()));
                true
            }
        }
    }

    /// How `query`'s answer is folded, if it is: by which labels, how, and the query asked instead.
    pub fn folded(&self, query: &str) -> Option<(&[String], Fold, &str)> {
        let sum = self.summed.get(query).map(|(by, earlier)| (by.as_slice(), Fold::Sum, earlier.as_str()));
        sum.or_else(|| self.maxed.get(query).map(|(by, earlier)| (by.as_slice(), Fold::Max, earlier.as_str())))
    }
}

/// Send every request concurrently (at most `concurrency` at once) and decode the answers. Requests
/// still unanswered at the deadline get a timeout error.
pub async fn run_queries(source: &Arc<dyn Source>, requests: Vec<Request>, concurrency: usize, deadline: Duration) -> Answers {
    run_reads(source, requests, concurrency, deadline, &Arc::new(Reading::default())).await
}

/// [`run_queries`], reading the answers as `reading` says.
pub async fn run_reads(source: &Arc<dyn Source>, mut requests: Vec<Request>, concurrency: usize, deadline: Duration, reading: &Arc<Reading>) -> Answers {
    // Heaviest first: a round lasts until its last answer, so the long ones should not start last.
    requests.sort_by_key(|r| match r {
        Request::Instant { query, .. } | Request::Range { query, .. } => crate::signals::weight_rank(query),
        Request::LabelValues { .. } => 3,
    });
    let url = source.url();
    let end = tokio::time::Instant::now() + deadline;
    let mut answers = Answers::new();
    let pending: BTreeSet<Request> = requests.iter().cloned().collect();
    let mut stream = futures::stream::iter(requests.into_iter().map(|req| {
        let source = Arc::clone(source);
        let url = url.clone();
        let reading = Arc::clone(reading);
        async move {
            let summed = req.query().and_then(|q| reading.folded(q));
            let first = match source.send(&req).await {
                Ok(ex) => match summed {
                    Some((by, fold, _)) => decode_folded(&url, &req, &ex, by, fold),
                    None => decode(&url, &req, &ex),
                },
                Err(e) => Err(e),
            };
            // Where the unaggregated read failed for a reason other than time or reach, the
            // server's sum answers the same: a recording made before these reads holds it, and a
            // server or proxy that refused the read, or whose answer was too large, may still give
            // it. Not recorded either, the request stays unrecorded (looked for in other forms).
            let res = match (first, summed.and_then(|(_, _, earlier)| req.with_query(earlier))) {
                (Err(e), Some(old)) if !matches!(e, SourceError::Timeout { .. } | SourceError::Unreachable { .. }) => {
                    match source.send(&old).await.and_then(|ex| decode(&url, &old, &ex)) {
                        Ok(answer) => Ok(answer),
                        Err(other) if matches!(e, SourceError::NotRecorded { .. }) && !matches!(other, SourceError::NotRecorded { .. }) => Err(other),
                        Err(_) => Err(e),
                    }
                }
                (res, _) => res,
            };
            (req, res)
        }
    }))
    .buffer_unordered(concurrency.max(1));
    while let Ok(Some((req, res))) = tokio::time::timeout_at(end, stream.next()).await {
        answers.insert(req, res);
    }
    for req in pending {
        if let std::collections::btree_map::Entry::Vacant(slot) = answers.entry(req) {
            let timeout = SourceError::Timeout { url: url.clone(), after: deadline };
            source.gave_up(slot.key(), &timeout);
            slot.insert(Err(timeout));
        }
    }
    answers
}

/// How the stages' requests are answered (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct ReadPlan {
    /// Each request a stage reads, and its ways, best first.
    pub wants: BTreeMap<Request, Vec<Way>>,
    /// How some of the requests sent are decoded.
    pub reading: Reading,
}

/// One way to answer a want: send `ask`; cut its (range) answer at the instant `at` when given;
/// then apply `then` when given. A way that combines several answers into one ([`Way::combined`])
/// sends `also` as well.
#[derive(Debug, Clone)]
pub struct Way {
    pub ask: Request,
    /// A range answer's points at one instant (unix milliseconds), as the instant query's vector: a
    /// series without a point there is absent, as in an instant query.
    pub at: Option<i64>,
    pub then: Option<Cut>,
    /// The other requests a [`Cut::Combined`] reads, after `ask`.
    pub also: Vec<Request>,
}

impl Way {
    /// The answer to `ask` as it is.
    pub fn whole(ask: Request) -> Way {
        Way { ask, at: None, then: None, also: Vec::new() }
    }

    /// The range answer to `ask` at the instant `at` (unix milliseconds).
    pub fn at(ask: Request, at: i64) -> Way {
        Way { ask, at: Some(at), then: None, also: Vec::new() }
    }

    /// The answer to `ask` (at the instant `at`, when given), then `cut`.
    pub fn then(ask: Request, at: Option<i64>, cut: Cut) -> Way {
        Way { ask, at, then: Some(cut), also: Vec::new() }
    }

    /// The answers to `asks` (at least one) made into one by `how`, which reads them in that order.
    pub fn combined(asks: Vec<Request>, how: std::sync::Arc<dyn Combine>) -> Option<Way> {
        let mut asks = asks.into_iter();
        let ask = asks.next()?;
        Some(Way { ask, at: None, then: Some(Cut::Combined(how)), also: asks.collect() })
    }

    /// Every request the way sends: `ask`, then `also`.
    pub fn requests(&self) -> impl Iterator<Item = &Request> {
        std::iter::once(&self.ask).chain(&self.also)
    }
}

/// Several answers made into the answer of one want (see [`Way::combined`]): the reads another
/// query's result is computed from by vllm-diag, as that query would compute it.
pub trait Combine: std::fmt::Debug + Send + Sync {
    /// The want's answer from the answers to the way's requests, in their order.
    fn combine(&self, answers: &[&Response]) -> Response;
}

/// How an answer becomes another, after a [`Way`]'s cut at an instant.
#[derive(Debug, Clone)]
pub enum Cut {
    /// A range answer's points between two instants (unix milliseconds, both included), as the
    /// range query over that span would give them when its steps fall on the answer's (see
    /// `follow_up::joined`); series left without a point are dropped.
    Span(i64, i64),
    /// A vector's samples that `filter` selects, summed by `by` (see [`sum_by`]).
    Sum { filter: Vec<crate::prom::CompiledMatcher>, by: Vec<String> },
    /// Every answer of the way's requests made into one (see [`Combine`]).
    Combined(std::sync::Arc<dyn Combine>),
}

impl ReadPlan {
    /// A plan of requests each answered by itself.
    pub fn whole(requests: impl IntoIterator<Item = Request>) -> ReadPlan {
        ReadPlan { wants: requests.into_iter().map(|r| (r.clone(), vec![Way::whole(r)])).collect(), reading: Reading::default() }
    }

    /// Add the wants of `other` (a want already here keeps its ways).
    pub fn extend(&mut self, other: ReadPlan) {
        for (want, ways) in other.wants {
            self.wants.entry(want).or_insert(ways);
        }
        for (q, r) in other.reading.summed {
            self.reading.summed.entry(q).or_insert(r);
        }
        for (q, r) in other.reading.maxed {
            self.reading.maxed.entry(q).or_insert(r);
        }
    }

    /// The requests to send first: every want's first way.
    pub fn asks(&self) -> Vec<Request> {
        let asks: BTreeSet<&Request> = self.wants.values().filter_map(|ways| ways.first()).flat_map(Way::requests).collect();
        asks.into_iter().cloned().collect()
    }

    /// The requests to send next, given the answers so far: for each want whose ways so far were
    /// not recorded, its next way's, unless asked already.
    pub fn more(&self, asked: &Answers) -> Vec<Request> {
        let mut next = BTreeSet::new();
        for ways in self.wants.values() {
            for way in ways {
                // A way one of whose requests was not recorded cannot answer: the next one.
                if way.requests().any(|r| matches!(asked.get(r), Some(Err(SourceError::NotRecorded { .. })))) {
                    continue;
                }
                next.extend(way.requests().filter(|r| !asked.contains_key(*r)).cloned());
                break;
            }
        }
        next.into_iter().collect()
    }

    /// Every want's answer from the answers to the requests sent: by its first way whose answer
    /// is not "not recorded" (an answer, or an error, which is the want's error). When none was
    /// recorded, the want gets its first way's error. A want none of whose ways was asked is left
    /// out. The answers asked are consumed: a large range answer's labels are shared by the
    /// instants cut from it instead of copied, and sums read those instants without copying them.
    pub fn answers(&self, mut asked: Answers) -> Answers {
        let not_recorded = |a: &Result<Response, SourceError>| matches!(a, Err(SourceError::NotRecorded { .. }));
        // The way each want is answered by.
        let mut chosen: Vec<(&Request, &Way)> = Vec::new();
        // Wants answered here already: combined, or failed.
        let mut direct: Answers = Answers::new();
        for (want, ways) in &self.wants {
            let usable = |w: &&Way| w.requests().all(|r| asked.get(r).is_some_and(|a| !not_recorded(a)));
            match ways.iter().find(usable) {
                Some(way) => match &way.then {
                    // Combined from several answers, read in place (before any answer is
                    // consumed): the first error among them is the want's.
                    Some(Cut::Combined(how)) => {
                        let got: Result<Vec<&Response>, &SourceError> = way.requests().map(|r| asked[r].as_ref()).collect();
                        direct.insert(want.clone(), got.map(|all| how.combine(&all)).map_err(Clone::clone));
                    }
                    _ => chosen.push((want, way)),
                },
                None => {
                    if let Some(first) = ways.first().and_then(|w| w.requests().filter_map(|r| asked.get(r)).find(|a| a.is_err())) {
                        direct.insert(want.clone(), first.clone());
                    }
                }
            }
        }
        // Each asked answer cut at its instants once, for every want cut from it; an answer only
        // cut so is consumed (its series' labels move into the instants' samples, shared by them).
        let mut instants: BTreeMap<&Request, BTreeSet<i64>> = BTreeMap::new();
        // How many wants take each answer as it is (not cut at an instant).
        let mut uses: BTreeMap<&Request, usize> = BTreeMap::new();
        for (_, way) in &chosen {
            match way.at {
                Some(t) => {
                    instants.entry(&way.ask).or_default().insert(t);
                }
                None => *uses.entry(&way.ask).or_default() += 1,
            }
        }
        // (answer, how many wants still read it): the last one takes it, the others a copy (a sum
        // only reads it).
        let mut at: BTreeMap<(&Request, i64), (Answer, usize)> = BTreeMap::new();
        for (ask, times) in &instants {
            let answer = match uses.contains_key(*ask) {
                false => asked.remove(*ask),
                true => asked.get(*ask).cloned(),
            };
            let Some(answer) = answer else { continue };
            let times: Vec<i64> = times.iter().copied().collect();
            for (t, cut) in times.iter().zip(cut_at(ask, answer, &times)) {
                at.insert((*ask, *t), (cut, 0));
            }
        }
        for (_, way) in &chosen {
            if let Some(entry) = way.at.and_then(|t| at.get_mut(&(&way.ask, t))) {
                entry.1 += 1;
            }
        }
        let mut out = direct;
        for (want, way) in chosen {
            let mut then = way.then.as_ref();
            let mut answer = match way.at {
                Some(t) => {
                    let key = (&way.ask, t);
                    let taken = match (then, at.get_mut(&key)) {
                        // A sum reads the instants without taking them.
                        (Some(Cut::Sum { filter, by }), Some((cut, n))) => {
                            then = None;
                            *n -= 1;
                            Some(sum(&way.ask, cut, filter, by))
                        }
                        (_, Some((cut, n))) if *n > 1 => {
                            *n -= 1;
                            Some(cut.clone())
                        }
                        _ => at.remove(&key).map(|(a, _)| a),
                    };
                    if at.get(&key).is_some_and(|(_, n)| *n == 0) {
                        at.remove(&key);
                    }
                    taken
                }
                // The last want taking this answer as it is takes it; the others get a copy.
                None => match uses.get_mut(&way.ask) {
                    Some(n) if *n > 1 => {
                        *n -= 1;
                        asked.get(&way.ask).cloned()
                    }
                    _ => asked.remove(&way.ask),
                },
            };
            if let Some(cut) = then {
                answer = answer.map(|a| a.and_then(|a| apply(cut, &way.ask, a)));
            }
            if let Some(answer) = answer {
                out.insert(want.clone(), answer);
            }
        }
        out
    }
}

/// Send what `plan` asks, and the next ways of what is not recorded, within `deadline` of
/// `started`; returns every want's answer and how many requests were answered (a replay leaves out those its recording does not hold).
pub async fn read(source: &Arc<dyn Source>, plan: &ReadPlan, concurrency: usize, deadline: Duration, started: std::time::Instant) -> (Answers, usize) {
    let reading = Arc::new(plan.reading.clone());
    let mut asked = Answers::new();
    let mut next = plan.asks();
    let mut sent = 0;
    while !next.is_empty() {
        let got = run_reads(source, next, concurrency, remaining(deadline, started), &reading).await;
        // A request a recording does not hold was not a query of the run recorded: a replay counts
        // what that run asked.
        sent += got.values().filter(|a| !matches!(a, Err(SourceError::NotRecorded { .. }))).count();
        asked.extend(got);
        next = plan.more(&asked);
    }
    (plan.answers(asked), sent)
}

/// The answers that could not be read at all: damaged (a body that does not decode, an answer of
/// the wrong shape) or missing from a recording. What needed them is not evaluated; these are
/// also said as a warning, so a damaged recording or a proxy that mangles answers is never read as
/// a shorter, quieter diagnosis. (A timeout, a refusal or an unreachable server is the source's
/// state, said where it leaves a signal not evaluated.)
pub fn unreadable(answers: &Answers) -> Vec<(&Request, &SourceError)> {
    answers
        .iter()
        .filter_map(|(r, a)| a.as_ref().err().map(|e| (r, e)))
        .filter(|(_, e)| matches!(e, SourceError::Decode { .. } | SourceError::NotRecorded { .. } | SourceError::Other { .. }))
        .collect()
}

/// One warning naming the unreadable answers (the first three, then how many more).
pub fn unreadable_warning(found: &[(&Request, &SourceError)]) -> Option<String> {
    const NAMED: usize = 3;
    if found.is_empty() {
        return None;
    }
    let named: Vec<String> = found.iter().take(NAMED).map(|(r, e)| format!("{} ({})", r.describe(), e.short_reason())).collect();
    let more = found.len().saturating_sub(NAMED);
    Some(format!(
        "{} could not be read, so what needed {} is not evaluated: {}{}",
        if found.len() == 1 { "1 answer".to_string() } else { format!("{} answers", found.len()) },
        if found.len() == 1 { "it" } else { "them" },
        named.join("; "),
        if more > 0 { format!("; and {more} more") } else { String::new() }
    ))
}

/// A range answer cut at each of `times` (unix milliseconds); a failed one fails every cut.
fn cut_at(ask: &Request, answer: Result<Response, SourceError>, times: &[i64]) -> Vec<Result<Response, SourceError>> {
    match answer {
        Ok(Response { data: Data::Matrix(series), warnings, infos }) => {
            let mut out: Vec<Vec<Sample>> = vec![Vec::new(); times.len()];
            for s in series {
                let labels = Arc::new(s.labels);
                for (i, t) in times.iter().enumerate() {
                    if let Some((pt, v)) = s.points.iter().find(|(pt, _)| ((pt * 1000.0).round() as i64) == *t) {
                        out[i].push(Sample { labels: labels.clone(), t: *pt, v: *v });
                    }
                }
            }
            out.into_iter().map(|data| Ok(Response { data: Data::Vector(data), warnings: warnings.clone(), infos: infos.clone() })).collect()
        }
        Ok(_) => times
            .iter()
            .map(|_| Err(SourceError::Other { detail: format!("{}: the range query was answered with something other than a matrix", ask.describe()) }))
            .collect(),
        Err(e) => times.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// `cut` applied to an answer to `ask`.
fn apply(cut: &Cut, ask: &Request, answer: Response) -> Result<Response, SourceError> {
    match cut {
        Cut::Span(from, to) => {
            let mut answer = answer;
            if let Data::Matrix(series) = &mut answer.data {
                for s in series.iter_mut() {
                    s.points.retain(|(t, _)| (*from..=*to).contains(&((t * 1000.0).round() as i64)));
                }
                series.retain(|s| !s.points.is_empty());
            }
            Ok(answer)
        }
        Cut::Sum { filter, by } => sum(ask, &Ok(answer), filter, by),
        Cut::Combined(how) => Ok(how.combine(&[&answer])),
    }
}

/// [`Cut::Sum`] of an answer to `ask` (a failed one fails the sum).
fn sum(ask: &Request, answer: &Result<Response, SourceError>, filter: &[crate::prom::CompiledMatcher], by: &[String]) -> Result<Response, SourceError> {
    match answer {
        Ok(Response { data: Data::Vector(samples), warnings, infos }) => {
            Ok(Response { data: Data::Vector(sum_by(samples, filter, by)), warnings: warnings.clone(), infos: infos.clone() })
        }
        Ok(_) => Err(SourceError::Other { detail: format!("{}: answered with something other than a vector", ask.describe()) }),
        Err(e) => Err(e.clone()),
    }
}

/// The samples `filter` selects, summed by the labels `by`: a series without a grouping label is
/// summed into the group without it, as PromQL does. The sums come out in the same order every run
/// (a spread adds them up).
pub fn sum_by(samples: &[Sample], filter: &[crate::prom::CompiledMatcher], by: &[String]) -> Vec<Sample> {
    let mut sums: BTreeMap<Vec<Option<&str>>, (f64, f64)> = BTreeMap::new();
    for s in samples {
        if !filter.iter().all(|m| m.matches(s.labels.get(&m.matcher.name).map(String::as_str))) {
            continue;
        }
        let key: Vec<Option<&str>> = by.iter().map(|l| s.labels.get(l).map(String::as_str).filter(|v| !v.is_empty())).collect();
        let e = sums.entry(key).or_insert((s.t, 0.0));
        e.1 += s.v;
    }
    sums.into_iter()
        .map(|(key, (t, v))| {
            let labels: crate::prom::Labels = by.iter().zip(key).filter_map(|(l, v)| Some((l.clone(), v?.to_string()))).collect();
            Sample { labels: Arc::new(labels), t, v }
        })
        .collect()
}

/// What is left of a run's deadline (never zero, so a late request still gets its timeout answer).
pub fn remaining(deadline: Duration, started: std::time::Instant) -> Duration {
    deadline.saturating_sub(started.elapsed()).max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Series;
    use chrono::{TimeZone, Utc};

    fn labels(pairs: &[(&str, &str)]) -> crate::prom::Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn not_recorded() -> Result<Response, SourceError> {
        Err(SourceError::NotRecorded { file: "old.json".into(), request: String::new() })
    }

    #[test]
    fn instants_cut_from_one_range_answer_share_its_labels_and_sums_are_taken_from_them() {
        let (t1, t2) = (Utc.with_ymd_and_hms(2026, 1, 15, 8, 30, 0).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 0, 0).unwrap());
        let instant = |q: &str, t| Request::Instant { query: q.into(), time: t };
        let range = Request::Range { query: "q".into(), start: t1, end: t2, step_seconds: 1800 };
        let ms = |t: chrono::DateTime<Utc>| t.timestamp_millis();
        let sum = Cut::Sum { filter: vec![crate::prom::Matcher::eq("status", "5xx").compile().unwrap()], by: vec!["model_name".into()] };
        let mut plan = ReadPlan::default();
        for t in [t1, t2] {
            plan.wants.insert(instant("q", t), vec![Way::at(range.clone(), ms(t)), Way::whole(instant("q", t))]);
        }
        plan.wants.insert(instant("errors", t2), vec![Way::then(range.clone(), Some(ms(t2)), sum.clone()), Way::then(instant("q", t2), None, sum)]);
        // A sum ordered after the instant it is read from.
        let ok = Cut::Sum { filter: vec![crate::prom::Matcher::eq("status", "2xx").compile().unwrap()], by: vec!["model_name".into()] };
        plan.wants.insert(instant("z-ok", t2), vec![Way::then(range.clone(), Some(ms(t2)), ok)]);
        assert_eq!(plan.asks(), vec![range.clone()]);

        let series = vec![
            Series {
                labels: labels(&[("model_name", "m"), ("status", "5xx"), ("instance", "a")]),
                points: vec![(t1.timestamp() as f64, 1.0), (t2.timestamp() as f64, 2.0)],
            },
            Series { labels: labels(&[("model_name", "m"), ("status", "5xx"), ("instance", "b")]), points: vec![(t2.timestamp() as f64, 3.0)] },
            Series { labels: labels(&[("model_name", "m"), ("status", "2xx"), ("instance", "a")]), points: vec![(t2.timestamp() as f64, 7.0)] },
        ];
        let mut asked = Answers::new();
        asked.insert(range.clone(), Ok(Response { data: Data::Matrix(series), warnings: vec!["partial".into()], infos: vec![] }));
        assert!(plan.more(&asked).is_empty());
        let answers = plan.answers(asked);
        let vector = |r: &Request| match answers.get(r) {
            Some(Ok(Response { data: Data::Vector(v), warnings, .. })) => {
                assert_eq!(warnings, &vec!["partial".to_string()], "the warnings go with every cut");
                v.clone()
            }
            other => panic!("{other:?}"),
        };
        let (first, second) = (vector(&instant("q", t1)), vector(&instant("q", t2)));
        assert_eq!(first.iter().map(|s| s.v).collect::<Vec<_>>(), vec![1.0], "a series without a point at an instant is absent from it");
        assert_eq!(second.iter().map(|s| s.v).collect::<Vec<_>>(), vec![2.0, 3.0, 7.0]);
        assert!(Arc::ptr_eq(&first[0].labels, &second[0].labels), "one series' labels are held once");
        let errors = vector(&instant("errors", t2));
        assert_eq!((errors.len(), errors[0].v, errors[0].labels.get("model_name").map(String::as_str)), (1, 5.0, Some("m")));
        assert_eq!(vector(&instant("z-ok", t2)).iter().map(|s| s.v).collect::<Vec<_>>(), vec![7.0]);

        // Not recorded: each want's next way, once; a range answered with something else fails
        // every instant cut from it.
        let mut old = Answers::new();
        old.insert(range.clone(), not_recorded());
        assert_eq!(plan.more(&old), vec![instant("q", t1), instant("q", t2)]);
        let mut odd = Answers::new();
        odd.insert(range, Ok(Response { data: Data::Scalar(1.0), warnings: vec![], infos: vec![] }));
        let answers = plan.answers(odd);
        assert_eq!(answers.len(), 4);
        assert!(answers.values().all(|a| matches!(a, Err(SourceError::Other { detail }) if detail.contains("other than a matrix"))), "{answers:?}");
    }
}
