//! A [`Source`] that answers by local evaluation over series held in memory (see [`crate::local`]).
//!
//! It is what `--scrape` and `rules test` diagnose with: the same requests, the same JSON envelopes
//! and the same decoder as a Prometheus server, so record and replay work unchanged.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Exchange, Request, Source, SourceError};
use crate::local::Store;
use crate::report::SourceInfo;

pub struct LocalSource {
    store: Arc<Store>,
    info: SourceInfo,
}

impl LocalSource {
    /// `kind` and `url` describe where the series came from, for the report header (e.g. `scrape` and
    /// the endpoints, or `rules-test` and the test file).
    pub fn new(store: Arc<Store>, kind: &str, url: &str) -> LocalSource {
        LocalSource {
            store,
            info: SourceInfo { kind: kind.to_string(), url: url.to_string(), selector: String::new() },
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Answer synchronously (evaluation is CPU work over memory; nothing to wait for).
    pub fn answer(&self, req: &Request) -> Exchange {
        crate::local::answer(&self.store, req)
    }
}

impl Source for LocalSource {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
        Box::pin(async move { Ok(self.answer(req)) })
    }

    fn info(&self) -> SourceInfo {
        self.info.clone()
    }
}
