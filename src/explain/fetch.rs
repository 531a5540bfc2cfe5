//! Stage: fetch. The only code of the pipeline that talks to the source: it sends requests
//! concurrently, decodes the answers, and turns the deadline into per-request timeouts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::source::{decode, Request, Response, Source, SourceError};

/// Answers keyed by request.
pub type Answers = BTreeMap<Request, Result<Response, SourceError>>;

/// Send every request concurrently (at most `concurrency` at once) and decode the answers. Requests
/// still unanswered at the deadline get a timeout error.
pub async fn run_queries(source: &Arc<dyn Source>, mut requests: Vec<Request>, concurrency: usize, deadline: Duration) -> Answers {
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
        async move {
            let res = match source.send(&req).await {
                Ok(ex) => decode(&url, &req, &ex),
                Err(e) => Err(e),
            };
            (req, res)
        }
    }))
    .buffer_unordered(concurrency.max(1));
    while let Ok(Some((req, res))) = tokio::time::timeout_at(end, stream.next()).await {
        answers.insert(req, res);
    }
    for req in pending {
        answers.entry(req).or_insert_with(|| Err(SourceError::Timeout { url: url.clone(), after: deadline }));
    }
    answers
}

/// What is left of a run's deadline (never zero, so a late request still gets its timeout answer).
pub fn remaining(deadline: Duration, started: std::time::Instant) -> Duration {
    deadline.saturating_sub(started.elapsed()).max(Duration::from_millis(1))
}
