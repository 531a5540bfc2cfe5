//! `GET /metrics`: what the service has done, in the Prometheus text exposition format (0.0.4).
//!
//! Counters of notifications (by outcome), diagnosis runs, failed runs and deliveries (by target
//! and result), and a histogram of run durations. Series are written with the prom module's
//! writer, which escapes label values as the format says.
//!
//! And the findings themselves, so that Prometheus can scrape them and alert on them: the latest
//! diagnosis of every firing alert group as `vllm_diag_finding{rule,severity,<scope labels>} 1`
//! and `vllm_diag_not_evaluated{rule,<scope labels>} 1`, until the group resolves (or is diagnosed
//! again, which replaces its series).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::prom::openmetrics::series;
use crate::prom::{escape::escape_help, format_go_float};
use crate::report::{Report, Scope};

/// The upper bounds of the run duration histogram, in seconds.
const BUCKETS: [f64; 9] = [0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0];

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The service's counters. Shared by the request handlers and the workers.
#[derive(Debug, Default)]
pub struct Metrics {
    runs: AtomicU64,
    failures: AtomicU64,
    /// Groups answered with another group's diagnosis (serve's `--share-within`).
    shared: AtomicU64,
    /// Deliveries made and not yet ended (waiting for their group's previous one, or being sent).
    pending: AtomicU64,
    durations: Mutex<Histogram>,
    /// By (target, result).
    deliveries: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// By outcome (`accepted`, `duplicate`, `resolved`, `queue_full`, `unauthorized`, ...).
    notifications: Mutex<BTreeMap<&'static str, u64>>,
    /// The latest diagnosis of each firing group, by group key.
    findings: Mutex<BTreeMap<String, Shown>>,
}

/// What one diagnosis puts on the page: its findings' and its not-evaluated rules' label sets, and
/// when it ran.
#[derive(Debug, Default)]
struct Shown {
    findings: Vec<Vec<(String, String)>>,
    not_evaluated: Vec<Vec<(String, String)>>,
    at: f64,
}

/// `rule` (and `severity`) then the scope's labels; a scope label that would clash with those is
/// written as `scope_<name>`.
fn labels(rule: &str, severity: Option<&str>, scope: &Scope) -> Vec<(String, String)> {
    let mut out = vec![("rule".to_string(), rule.to_string())];
    if let Some(s) = severity {
        out.push(("severity".to_string(), s.to_string()));
    }
    for (k, v) in scope {
        let name = if k == "rule" || k == "severity" { format!("scope_{k}") } else { k.clone() };
        if crate::prom::is_label_name(&name) {
            out.push((name, v.clone()));
        }
    }
    out
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

    /// A group was answered with the diagnosis of another group of the same scope and window.
    pub fn shared(&self) {
        self.shared.fetch_add(1, Ordering::Relaxed);
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

    /// The diagnosis of group `group` (run at `at`, seconds since the epoch) is now `report`'s.
    pub fn diagnosed(&self, group: &str, report: &Report, at: f64) {
        let shown = Shown {
            findings: report.findings.iter().map(|f| labels(&f.rule, Some(f.severity.as_str()), &f.scope)).collect(),
            not_evaluated: report.not_evaluated.iter().map(|n| labels(&n.rule, None, &n.scope)).collect(),
            at,
        };
        if let Ok(mut m) = self.findings.lock() {
            m.insert(group.to_string(), shown);
        }
    }

    /// Group `group` resolved: its findings leave the page.
    pub fn resolved(&self, group: &str) {
        if let Ok(mut m) = self.findings.lock() {
            m.remove(group);
        }
    }

    /// One notification was answered with `outcome`.
    pub fn notification(&self, outcome: &'static str) {
        if let Ok(mut n) = self.notifications.lock() {
            *n.entry(outcome).or_default() += 1;
        }
    }

    /// The page of `explain --watch --metrics-listen`: the watch's runs and failed runs, and the
    /// latest run's findings (kept under the one group `watch`).
    pub fn render_watch(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| write_family(&mut out, name, kind, help, samples);
        let runs = self.runs.load(Ordering::Relaxed) as f64;
        family("vllm_diag_watch_runs_total", "counter", "Diagnoses the watch has run.", vec![("vllm_diag_watch_runs_total".into(), runs)]);
        let failures = self.failures.load(Ordering::Relaxed) as f64;
        family(
            "vllm_diag_watch_failures_total",
            "counter",
            "Watch runs that gave no report (data source unreachable, no data); the finding series are gone until a run succeeds.",
            vec![("vllm_diag_watch_failures_total".into(), failures)],
        );
        self.findings_families(&mut family, "The latest watch run");
        out
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| write_family(&mut out, name, kind, help, samples);
        let notifications: Vec<(String, f64)> = self
            .notifications
            .lock()
            .map(|n| n.iter().map(|(o, c)| (series("vllm_diag_serve_notifications_total", [("outcome", *o)]), *c as f64)).collect())
            .unwrap_or_default();
        family("vllm_diag_serve_notifications_total", "counter", "Alertmanager notifications received, by how they were answered.", notifications);
        let runs = self.runs.load(Ordering::Relaxed) as f64;
        family("vllm_diag_serve_runs_total", "counter", "Diagnoses run for firing alert groups.", vec![("vllm_diag_serve_runs_total".into(), runs)]);
        let shared = self.shared.load(Ordering::Relaxed) as f64;
        family(
            "vllm_diag_serve_shared_total",
            "counter",
            "Firing groups answered with the diagnosis of another group of the same scope and window (--share-within), not a run of their own.",
            vec![("vllm_diag_serve_shared_total".into(), shared)],
        );
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
            .map(|d| d.iter().map(|((t, r), c)| (series("vllm_diag_serve_deliveries_total", [("target", *t), ("result", *r)]), *c as f64)).collect())
            .unwrap_or_default();
        family("vllm_diag_serve_deliveries_total", "counter", "Deliveries of a diagnosis or a follow-up, by target and result (after retries).", deliveries);
        let pending = self.pending.load(Ordering::Relaxed) as f64;
        family(
            "vllm_diag_serve_deliveries_pending",
            "gauge",
            "Diagnoses and follow-ups made and not yet delivered (a slow receiver makes them wait).",
            vec![("vllm_diag_serve_deliveries_pending".into(), pending)],
        );
        self.findings_families(&mut family, "The latest diagnosis of a firing alert group");
        let groups = self.findings.lock().map(|m| m.len() as f64).unwrap_or_default();
        family(
            "vllm_diag_diagnosed_groups",
            "gauge",
            "Firing alert groups whose latest diagnosis the finding series show.",
            vec![("vllm_diag_diagnosed_groups".into(), groups)],
        );
        out
    }

    /// `vllm_diag_finding`, `vllm_diag_not_evaluated` and the latest run's time, each series once
    /// however many groups show it; `whose` starts their help text.
    fn findings_families(&self, family: &mut impl FnMut(&str, &str, &str, Vec<(String, f64)>), whose: &str) {
        let (mut findings, mut not_evaluated, mut last) = (Vec::new(), Vec::new(), None::<f64>);
        if let Ok(m) = self.findings.lock() {
            let set = |rows: &mut Vec<(String, f64)>, name: &str, of: &dyn Fn(&Shown) -> &Vec<Vec<(String, String)>>| {
                let mut seen = std::collections::BTreeSet::new();
                for shown in m.values() {
                    for l in of(shown) {
                        let s = series(name, l.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                        if seen.insert(s.clone()) {
                            rows.push((s, 1.0));
                        }
                    }
                }
            };
            set(&mut findings, "vllm_diag_finding", &|s| &s.findings);
            set(&mut not_evaluated, "vllm_diag_not_evaluated", &|s| &s.not_evaluated);
            last = m.values().map(|s| s.at).reduce(f64::max);
        }
        family(
            "vllm_diag_finding",
            "gauge",
            &format!("A finding of {}, 1 per rule, severity and scope; gone once it resolves or a run fails.", whose.to_lowercase()),
            findings,
        );
        family(
            "vllm_diag_not_evaluated",
            "gauge",
            &format!("A rule {} could not evaluate for a scope (its metrics missing, no data, a timeout): 1 per rule and scope.", whose.to_lowercase()),
            not_evaluated,
        );
        if let Some(at) = last {
            family(
                "vllm_diag_last_diagnosis_timestamp_seconds",
                "gauge",
                "When the latest diagnosis shown by the finding series ran, in seconds since the epoch.",
                vec![("vllm_diag_last_diagnosis_timestamp_seconds".into(), at)],
            );
        }
    }
}

/// One metric family: its HELP and TYPE lines, then its samples.
fn write_family(out: &mut String, name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>) {
    out.push_str(&format!("# HELP {name} {}\n# TYPE {name} {kind}\n", escape_help(help, false)));
    for (s, v) in samples {
        out.push_str(&format!("{s} {}\n", format_go_float(v)));
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
        assert!(text.contains("vllm_diag_diagnosed_groups 0\n"), "{text}");
    }

    #[test]
    fn findings_show_per_rule_severity_and_scope_until_their_group_resolves() {
        let m = Metrics::new(&[]);
        let report = crate::render::fixtures::sample_report();
        assert!(!report.findings.is_empty() && !report.not_evaluated.is_empty(), "the sample has both");
        m.diagnosed("{}:{alertname=\"X\"}", &report, 1_768_467_000.0);
        m.diagnosed("{}:{alertname=\"Y\"}", &report, 1_768_467_060.0);
        let text = m.render();
        let families = crate::prom::exposition::parse(&text, crate::prom::exposition::Format::Text);
        assert!(families.is_ok(), "{families:?}\n{text}");
        let first = &report.findings[0];
        let want =
            format!("vllm_diag_finding{{rule=\"{}\",severity=\"{}\",model_name=\"{}\"}} 1\n", first.rule, first.severity.as_str(), first.scope["model_name"]);
        assert_eq!(text.matches(&want).count(), 1, "one series for the two groups with the same finding\n{text}");
        assert!(text.contains("vllm_diag_not_evaluated{rule=\""), "{text}");
        assert!(text.contains("vllm_diag_diagnosed_groups 2\n"), "{text}");
        assert!(text.contains("vllm_diag_last_diagnosis_timestamp_seconds 1768467060\n"), "{text}");
        m.resolved("{}:{alertname=\"X\"}");
        assert!(m.render().contains(&want));
        m.resolved("{}:{alertname=\"Y\"}");
        let text = m.render();
        assert!(!text.contains("vllm_diag_finding{") && text.contains("vllm_diag_diagnosed_groups 0\n"), "{text}");
    }
}
