//! A probe's measurements summed up: requests by outcome, and the distributions of time to the
//! first token, time between tokens and end-to-end time over the requests that succeeded.

use std::collections::BTreeMap;

use crate::report::probe::Measured;
pub use crate::report::probe::{Spread, Summary};

pub fn summarize(requests: &[Measured]) -> Summary {
    let ok: Vec<&Measured> = requests.iter().filter(|m| m.outcome.is_ok()).collect();
    let mut by_outcome = BTreeMap::new();
    for m in requests {
        *by_outcome.entry(m.outcome.key()).or_insert(0) += 1;
    }
    Summary {
        sent: requests.len(),
        ok: ok.len(),
        failed: requests.len() - ok.len(),
        by_outcome,
        ttft: Spread::of(ok.iter().filter_map(|m| m.ttft_seconds)),
        between_tokens: Spread::of(ok.iter().flat_map(|m| m.gaps.iter().copied())),
        e2e: Spread::of(ok.iter().map(|m| m.e2e_seconds)),
        failed_e2e: Spread::of(requests.iter().filter(|m| !m.outcome.is_ok()).map(|m| m.e2e_seconds)),
        tokens: ok.iter().filter_map(|m| m.tokens).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{Outcome, TimeoutLimit};

    fn m(i: usize, outcome: Outcome, ttft: Option<f64>, e2e: f64, gaps: &[f64]) -> Measured {
        Measured {
            index: i,
            stream: ttft.is_some(),
            started: chrono::DateTime::from_timestamp(0, 0).unwrap(),
            outcome,
            headers_seconds: Some(0.01),
            ttft_seconds: ttft,
            e2e_seconds: e2e,
            tokens: Some(4),
            gaps: gaps.to_vec(),
        }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let s = Spread::of((1..=20).map(f64::from)).unwrap();
        assert_eq!((s.count, s.p50, s.p95, s.max, s.mean), (20, 10.0, 19.0, 20.0, 10.5));
        let one = Spread::of([0.3]).unwrap();
        assert_eq!((one.p50, one.p95), (0.3, 0.3));
        assert_eq!(Spread::of([f64::NAN]), None);
    }

    #[test]
    fn failures_are_counted_by_kind_and_kept_out_of_the_latencies() {
        let reqs = [
            m(0, Outcome::Ok, Some(0.2), 1.0, &[0.05, 0.07]),
            m(1, Outcome::Ok, None, 2.0, &[]),
            m(2, Outcome::Http { status: 408, message: "Request Timeout".into() }, None, 0.5, &[]),
            m(3, Outcome::Timeout { limit: TimeoutLimit::ProbeDuration }, Some(0.1), 9.0, &[0.5]),
        ];
        let s = summarize(&reqs);
        assert_eq!((s.sent, s.ok, s.failed, s.tokens), (4, 2, 2, 8));
        assert_eq!(s.by_outcome.get("http_408"), Some(&1));
        assert_eq!(s.by_outcome.get("cut_by_duration"), Some(&1));
        assert_eq!(s.ttft.unwrap().count, 1);
        assert_eq!(s.between_tokens.unwrap().count, 2);
        assert_eq!(s.e2e.unwrap().max, 2.0);
        assert_eq!(s.failed_e2e.unwrap().max, 9.0);
    }
}
