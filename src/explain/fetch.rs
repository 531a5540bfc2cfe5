//! Stage: fetch. The only code of the pipeline that talks to the source: it sends requests
//! concurrently, decodes the answers, and turns the deadline into per-request timeouts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::source::{decode, decode_summed, Request, Response, Source, SourceError};

/// Answers keyed by request.
pub type Answers = BTreeMap<Request, Result<Response, SourceError>>;

/// How some answers are read (see [`crate::explain::plan`]): a query in `summed` is decoded summed by
/// its labels ([`decode_summed`]). The query given with them answers the same with the server
/// summing: it is asked in its place where a recording lacks the first (one made before these
/// reads), and where the server refuses the first or its answer cannot be read (too large for a
/// proxy or for the answer cap, a limit of the backend), so one query's size never costs a signal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// query -> (the labels its answer is summed by, the query an earlier build asked instead)
    pub summed: BTreeMap<String, (Vec<String>, String)>,
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
            let summed = req.query().and_then(|q| reading.summed.get(q));
            let first = match source.send(&req).await {
                Ok(ex) => match summed {
                    Some((by, _)) => decode_summed(&url, &req, &ex, by),
                    None => decode(&url, &req, &ex),
                },
                Err(e) => Err(e),
            };
            // Where the unaggregated read failed for a reason other than time or reach, the
            // server's sum answers the same: a recording made before these reads holds it, and a
            // server or proxy that refused the read, or whose answer was too large, may still give
            // it. Not recorded either, the request stays unrecorded (looked for in other forms).
            let res = match (first, summed.and_then(|(_, earlier)| req.with_query(earlier))) {
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

/// What is left of a run's deadline (never zero, so a late request still gets its timeout answer).
pub fn remaining(deadline: Duration, started: std::time::Instant) -> Duration {
    deadline.saturating_sub(started.elapsed()).max(Duration::from_millis(1))
}
