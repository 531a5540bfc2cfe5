//! A spinner on stderr while queries run, so a slow Prometheus does not look like a hung command.
//!
//! Progress is watched from the outside: [`attach`] wraps the data source in one that counts
//! requests going out and answers coming back, and the explain pipeline never knows. That keeps
//! the library free of terminal concerns and makes the counts exact (they are the real requests,
//! not an estimate). The caller decides whether to show anything: only when stderr is a terminal
//! and `--quiet` was not given, never for `check` (CI logs are not terminals, and a spinner's
//! carriage returns make a mess of them). When disabled, the source is passed through untouched.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::SourceInfo;
use crate::source::{Exchange, Request, Source, SourceError};

/// The visible half: finish it when the queries are done (it clears its line).
pub struct Spinner {
    bar: Option<ProgressBar>,
}

impl Spinner {
    /// A spinner that shows nothing.
    pub fn hidden() -> Self {
        Spinner { bar: None }
    }

    /// Remove the spinner's line from the terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Wrap `source` so its traffic drives a spinner on stderr; with `enabled` false, return it as is.
pub fn attach(source: Arc<dyn Source>, enabled: bool) -> (Arc<dyn Source>, Spinner) {
    if !enabled {
        return (source, Spinner::hidden());
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").unwrap_or_else(|_| ProgressStyle::default_spinner()));
    bar.set_message(format!("querying {}", crate::prom::strip_credentials(&source.url())));
    bar.enable_steady_tick(Duration::from_millis(120));
    let counting = Counting { inner: source, bar: bar.clone(), counts: Arc::new(Counts::default()) };
    (Arc::new(counting), Spinner { bar: Some(bar) })
}

#[derive(Default)]
struct Counts {
    sent: AtomicUsize,
    answered: AtomicUsize,
}

impl Counts {
    /// `12 answered, 3 in flight`.
    fn describe(&self) -> String {
        let sent = self.sent.load(Ordering::Relaxed);
        let answered = self.answered.load(Ordering::Relaxed);
        format!("{answered} answered, {} in flight", sent.saturating_sub(answered))
    }
}

struct Counting {
    inner: Arc<dyn Source>,
    bar: ProgressBar,
    counts: Arc<Counts>,
}

impl Counting {
    fn update(&self) {
        let url = crate::prom::strip_credentials(&self.inner.url());
        self.bar.set_message(format!("querying {url}: {}", self.counts.describe()));
    }
}

impl Source for Counting {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
        Box::pin(async move {
            self.counts.sent.fetch_add(1, Ordering::Relaxed);
            self.update();
            let result = self.inner.send(req).await;
            self.counts.answered.fetch_add(1, Ordering::Relaxed);
            self.update();
            result
        })
    }

    fn info(&self) -> SourceInfo {
        self.inner.info()
    }

    fn url(&self) -> String {
        self.inner.url()
    }

    fn gave_up(&self, req: &Request, error: &SourceError) {
        self.inner.gave_up(req, error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;

    impl Source for Fixed {
        fn send<'a>(&'a self, _req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
            Box::pin(async { Ok(Exchange { http_status: 200, content_type: "application/json".into(), body: "{}".into() }) })
        }
        fn info(&self) -> SourceInfo {
            SourceInfo { kind: crate::report::SourceKind::Prometheus, url: "http://fixed".into(), selector: String::new() }
        }
    }

    #[test]
    fn a_disabled_spinner_passes_the_source_through_untouched() {
        let source: Arc<dyn Source> = Arc::new(Fixed);
        let (wrapped, spinner) = attach(Arc::clone(&source), false);
        assert!(Arc::ptr_eq(&source, &wrapped));
        assert!(spinner.bar.is_none());
    }

    #[test]
    fn the_counting_source_answers_exactly_like_the_source_and_counts_every_request() {
        let bar = ProgressBar::hidden();
        let counting = Counting { inner: Arc::new(Fixed), bar, counts: Arc::new(Counts::default()) };
        let req = Request::Instant { query: "up".into(), time: chrono::DateTime::UNIX_EPOCH };
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        for _ in 0..3 {
            let got = rt.block_on(counting.send(&req)).expect("answer");
            assert_eq!(got.body, "{}");
        }
        assert_eq!(counting.counts.describe(), "3 answered, 0 in flight");
        assert_eq!(counting.info().url, "http://fixed");
    }
}
