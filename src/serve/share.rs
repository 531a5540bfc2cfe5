//! Diagnoses shared between groups: during an alert storm many groups fire for the same scope at
//! once (one model's alerts under several alert names), each with a window that ends when it is
//! diagnosed. Their windows differ by the seconds the queue took, so their diagnoses would read the
//! same data again and again. A group whose scope (the selector its alerts give) and window length
//! match a diagnosis that started at most `--share-within` ago, or that is still running, gets
//! that diagnosis: the same report, delivered with the window it was made over, not a second run.
//!
//! Only diagnoses that gave a report are shared. A failed one (the backend unreachable, a timeout)
//! is not handed on: each group waiting for it runs its own, so its failure is its own and says
//! what happened to it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::deliver::Diagnosis;

/// What makes two diagnoses the same: the selector's PromQL and the window's length.
type Key = (String, Duration);

/// How a diagnosis stands: `None` while it runs, then `Some(None)` when it failed and
/// `Some(Some(d))` when it gave a report.
type State = Option<Option<Diagnosis>>;

/// A diagnosis that started at `end` (its window's end).
struct Slot {
    end: DateTime<Utc>,
    state: watch::Receiver<State>,
}

/// The diagnoses that can still be shared.
pub struct Shared {
    within: Duration,
    slots: Mutex<BTreeMap<Key, Slot>>,
}

/// Where a group's diagnosis comes from.
pub enum Source {
    /// The group makes the diagnosis, over the window ending at `end`, and hands it on with
    /// [`Maker::finish`].
    Make(Maker),
    /// Another group's diagnosis, still running or done: await it with [`Waiter::wait`].
    Wait(Waiter),
}

pub struct Maker {
    pub end: DateTime<Utc>,
    /// `None` when nothing is shared.
    state: Option<watch::Sender<State>>,
}

pub struct Waiter {
    pub end: DateTime<Utc>,
    state: watch::Receiver<State>,
}

impl Shared {
    /// `within` zero: nothing is shared, every group runs its own diagnosis.
    pub fn new(within: Duration) -> Shared {
        Shared { within, slots: Mutex::new(BTreeMap::new()) }
    }

    /// The diagnosis for `selector` over `window` ending `now`: one to make, or one to wait for.
    pub fn claim(&self, selector: &str, window: Duration, now: DateTime<Utc>) -> Source {
        if self.within.is_zero() {
            return Source::Make(Maker { end: now, state: None });
        }
        let within = chrono::Duration::from_std(self.within).unwrap_or(chrono::Duration::MAX);
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        // Slots too old to share are dropped, and failed ones (or ones whose maker stopped), so
        // that the next group tries again.
        slots.retain(|_, s| {
            let running = s.state.has_changed().is_ok();
            now - s.end <= within
                && match &*s.state.borrow() {
                    Some(made) => made.is_some(),
                    None => running,
                }
        });
        let key = (selector.to_string(), window);
        if let Some(s) = slots.get(&key) {
            return Source::Wait(Waiter { end: s.end, state: s.state.clone() });
        }
        let (tx, rx) = watch::channel(None);
        slots.insert(key, Slot { end: now, state: rx });
        Source::Make(Maker { end: now, state: Some(tx) })
    }
}

impl Maker {
    /// Hands the diagnosis on to the groups waiting for it (a failure as `None`: they run their
    /// own). A maker dropped before it finishes (its task stopped) counts as failed.
    pub fn finish(self, made: Option<&Diagnosis>) {
        if let Some(tx) = &self.state {
            tx.send_replace(Some(made.cloned()));
        }
    }
}

impl Waiter {
    /// The shared diagnosis once it is made, or `None` when it failed.
    pub async fn wait(mut self) -> Option<Diagnosis> {
        match self.state.wait_for(Option::is_some).await {
            Ok(state) => state.clone().flatten(),
            // The maker stopped without a word.
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    #[test]
    fn the_same_scope_and_window_within_the_interval_is_shared_and_nothing_else() {
        let shared = Shared::new(Duration::from_secs(60));
        let w = Duration::from_secs(1800);
        let Source::Make(first) = shared.claim("{model_name=\"a\"}", w, at(0)) else { panic!("the first group makes its diagnosis") };
        assert!(matches!(shared.claim("{model_name=\"a\"}", w, at(30)), Source::Wait(ref x) if x.end == at(0)), "same scope and window, 30 s later");
        assert!(matches!(shared.claim("{model_name=\"b\"}", w, at(30)), Source::Make(_)), "another scope");
        assert!(matches!(shared.claim("{model_name=\"a\"}", Duration::from_secs(3600), at(30)), Source::Make(_)), "another window");
        first.finish(None);
        assert!(matches!(shared.claim("{model_name=\"a\"}", w, at(40)), Source::Make(_)), "a failed diagnosis is not handed on");
        assert!(matches!(shared.claim("{model_name=\"a\"}", w, at(101)), Source::Make(_)), "older than the interval");
        let off = Shared::new(Duration::ZERO);
        assert!(matches!(off.claim("x", w, at(0)), Source::Make(_)) && matches!(off.claim("x", w, at(1)), Source::Make(_)), "--share-within 0s shares nothing");
    }

    #[test]
    fn a_maker_dropped_before_it_finished_lets_its_waiters_run_their_own() {
        let shared = Shared::new(Duration::from_secs(60));
        let w = Duration::from_secs(1800);
        let Source::Make(first) = shared.claim("s", w, at(0)) else { panic!() };
        let Source::Wait(waiter) = shared.claim("s", w, at(1)) else { panic!() };
        drop(first);
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        assert!(rt.block_on(waiter.wait()).is_none());
    }

    #[test]
    fn a_group_that_comes_after_the_diagnosis_ended_gets_its_report() {
        let shared = Shared::new(Duration::from_secs(60));
        let w = Duration::from_secs(1800);
        let Source::Make(first) = shared.claim("s", w, at(0)) else { panic!() };
        let Source::Wait(early) = shared.claim("s", w, at(1)) else { panic!() };
        let made = Diagnosis { report: crate::render::fixtures::clean_report(), exit_code: 1 };
        first.finish(Some(&made));
        let Source::Wait(late) = shared.claim("s", w, at(20)) else { panic!("a finished diagnosis is still shared") };
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        for w in [early, late] {
            assert_eq!(w.end, at(0));
            assert_eq!(rt.block_on(w.wait()).map(|d| d.exit_code), Some(1));
        }
    }
}
