//! `GET /metrics`: what the service has done, in the Prometheus text exposition format (0.0.4).
//!
//! Counters of notifications (by outcome), diagnosis runs, failed runs and deliveries (by target
//! and result), and a histogram of run durations. Series are written with the prom module's
//! writer, which escapes label values as the format says.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::prom::openmetrics::series;
use crate::prom::{escape::escape_help, format_go_float};

/// The upper bounds of the run duration histogram, in seconds.
const BUCKETS: [f64; 9] = [0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0];

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The service's counters. Shared by the request handlers and the workers.
#[derive(Debug, Default)]
pub struct Metrics {
    runs: AtomicU64,
    failures: AtomicU64,
    /// Deliveries made and not yet ended (waiting for their group's previous one, or being sent).
    pending: AtomicU64,
    durations: Mutex<Histogram>,
    /// By (target, result).
    deliveries: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// By outcome (`accepted`, `duplicate`, `resolved`, `queue_full`, `unauthorized`, ...).
    notifications: Mutex<BTreeMap<&'static str, u64>>,
}

#[derive(Debug, Default)]
struct Histogram {
    /// Observations at or under each bound of [`BUCKETS`].
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Metrics {
    /// Counters for the delivery targets in use start at 0, so a rate over them exists from the start.
    pub fn new(targets: &[&'static str]) -> Metrics {
        let m = Metrics::default();
        if let Ok(mut d) = m.deliveries.lock() {
            for t in targets {
                d.insert((t, "ok"), 0);
                d.insert((t, "failed"), 0);
            }
        }
        m
    }

    /// One diagnosis run ended, after `took`; `failed` when it gave no report.
    pub fn run(&self, took: Duration, failed: bool) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut h) = self.durations.lock() {
            let secs = took.as_secs_f64();
            for (count, bound) in h.counts.iter_mut().zip(BUCKETS) {
                if secs <= bound {
                    *count += 1;
                }
            }
            h.sum += secs;
            h.count += 1;
        }
    }

    /// One delivery to `target` ended (after its retries).
    pub fn delivery(&self, target: &'static str, ok: bool) {
        if let Ok(mut d) = self.deliveries.lock() {
            *d.entry((target, if ok { "ok" } else { "failed" })).or_default() += 1;
        }
    }

    /// A delivery was handed to the outbox; [`Metrics::delivery`] ends it.
    pub fn delivery_queued(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    /// A delivery handed to the outbox ended (every target tried).
    pub fn delivery_ended(&self) {
        let _ = self.pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(1)));
    }

    /// One notification was answered with `outcome`.
    pub fn notification(&self, outcome: &'static str) {
        if let Ok(mut n) = self.notifications.lock() {
            *n.entry(outcome).or_default() += 1;
        }
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| {
            out.push_str(&format!("# HELP {name} {}\n# TYPE {name} {kind}\n", escape_help(help, false)));
            for (s, v) in samples {
                out.push_str(&format!("{s} {}\n", format_go_float(v)));
            }
        };
        let notifications: Vec<(String, f64)> = self
            .notifications
            .lock()
            .map(|n| n.iter().map(|(o, c)| (series("vllm_diag_serve_notifications_total", [("outcome", *o)]), *c as f64)).collect())
            .unwrap_or_default();
        family("vllm_diag_serve_notifications_total", "counter", "Alertmanager notifications received, by how they were answered.", notifications);
        let runs = self.runs.load(Ordering::Relaxed) as f64;
        family("vllm_diag_serve_runs_total", "counter", "Diagnoses run for firing alert groups.", vec![("vllm_diag_serve_runs_total".into(), runs)]);
        let failures = self.failures.load(Ordering::Relaxed) as f64;
        family(
            "vllm_diag_serve_failures_total",
            "counter",
            "Diagnoses that gave no report (data source unreachable, no data, bad settings).",
            vec![("vllm_diag_serve_failures_total".into(), failures)],
        );
        let name = "vllm_diag_serve_run_duration_seconds";
        let mut hist = Vec::new();
        if let Ok(h) = self.durations.lock() {
            for (count, bound) in h.counts.iter().zip(BUCKETS) {
                hist.push((series(&format!("{name}_bucket"), [("le", format_go_float(bound).as_str())]), *count as f64));
            }
            hist.push((series(&format!("{name}_bucket"), [("le", "+Inf")]), h.count as f64));
            hist.push((format!("{name}_sum"), h.sum));
            hist.push((format!("{name}_count"), h.count as f64));
        }
        family(name, "histogram", "How long a diagnosis run took, in seconds.", hist);
        let deliveries: Vec<(String, f64)> = self
            .deliveries
            .lock()
            .map(|d| {
                d.iter()
                    .map(|((t, r), c)| (series("vllm_diag_serve_deliveries_total", [("target", *t), ("result", *r)]), *c as f64))
                    .collect()
            })
            .unwrap_or_default();
        family("vllm_diag_serve_deliveries_total", "counter", "Deliveries of a diagnosis or a follow-up, by target and result (after retries).", deliveries);
        let pending = self.pending.load(Ordering::Relaxed) as f64;
        family(
            "vllm_diag_serve_deliveries_pending",
            "gauge",
            "Diagnoses and follow-ups made and not yet delivered (a slow receiver makes them wait).",
            vec![("vllm_diag_serve_deliveries_pending".into(), pending)],
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_parses_and_counts_what_happened() {
        let m = Metrics::new(&["webhook"]);
        m.run(Duration::from_millis(1500), false);
        m.run(Duration::from_secs(200), true);
        m.delivery("webhook", true);
        m.notification("accepted");
        m.delivery_queued();
        m.delivery_queued();
        m.delivery_ended();
        let text = m.render();
        let families = crate::prom::exposition::parse(&text, crate::prom::exposition::Format::Text);
        assert!(families.is_ok(), "{families:?}\n{text}");
        assert!(text.contains("vllm_diag_serve_runs_total 2\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_failures_total 1\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_run_duration_seconds_bucket{le=\"1\"} 0\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_run_duration_seconds_bucket{le=\"2.5\"} 1\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_run_duration_seconds_bucket{le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_run_duration_seconds_sum 201.5\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_deliveries_total{target=\"webhook\",result=\"ok\"} 1\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_deliveries_total{target=\"webhook\",result=\"failed\"} 0\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_notifications_total{outcome=\"accepted\"} 1\n"), "{text}");
        assert!(text.contains("vllm_diag_serve_deliveries_pending 1\n"), "{text}");
    }
}
