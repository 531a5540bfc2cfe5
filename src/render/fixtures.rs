//! Hand-built reports shared by every renderer's snapshot tests.

use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};

use crate::report::*;

fn t(h: u32, m: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 15, h, m, 0).single().expect("valid fixed timestamp")
}

/// `r` with `n` changes no rule explains on Qwen (the first a TTFT rise).
pub(crate) fn with_unexplained(mut r: Report, n: usize) -> Report {
    let start = r.window.start;
    r.unexplained = (0..n)
        .map(|i| Unexplained {
            signal: if i == 0 { "ttft_p95".into() } else { format!("signal_{i}") },
            title: if i == 0 { "P95 time to first token".into() } else { format!("Signal {i}") },
            unit: "seconds".into(),
            scope: model(QWEN),
            direction: "up".into(),
            value: Some(1.9),
            baseline: Some(0.8),
            ratio: Some(2.375),
            robust_z: Some(31.0),
            onset: start + chrono::Duration::minutes(12),
            from_start: false,
            duration_seconds: 1080,
            ongoing: true,
            query: "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[3m])))".into(),
            metric: "vllm:time_to_first_token_seconds_bucket".into(),
            spare: false,
            series: Trend { step_seconds: 60, range_seconds: 180, query: String::new(), baseline: vec![], window: vec![] },
        })
        .collect();
    r
}

pub(crate) fn model(name: &str) -> Scope {
    BTreeMap::from([("model_name".to_string(), name.to_string())])
}

const LLAMA: &str = "llama-3.1-70b-instruct";
pub(crate) const QWEN: &str = "qwen2.5-coder-32b";

fn base(findings: Vec<Finding>, healthy: Vec<Checked>, not_evaluated: Vec<NotEvaluated>) -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        window: TimeRange { start: t(9, 0), end: t(9, 30) },
        baseline: TimeRange { start: t(8, 30), end: t(9, 0) },
        source: SourceInfo {
            kind: crate::report::SourceKind::Prometheus,
            url: "http://prometheus.monitoring:9090".to_string(),
            selector: r#"namespace="inference-prod""#.to_string(),
        },
        metrics: MetricsInfo {
            generation: "v1".to_string(),
            scopes: vec![model(LLAMA), model(QWEN)],
            names_used: BTreeMap::from([
                ("kv_cache_usage".to_string(), "vllm:kv_cache_usage_perc".to_string()),
                ("ttft_p95".to_string(), "vllm:time_to_first_token_seconds".to_string()),
            ]),
            labels: BTreeMap::from([("instance".to_string(), 5), ("model_name".to_string(), 2), ("namespace".to_string(), 1), ("pod".to_string(), 5)]),
            replica_label: "instance".to_string(),
        },
        findings,
        healthy,
        not_evaluated,
        disabled: vec![],
        warnings: vec![],
        caveats: vec![],
        stats: RunStats { queries: 38, rules_evaluated: 12 },
        coverage: crate::report::Coverage { rules: 8, evaluated: 6, stood_in: 0, core_not_evaluated: vec![], unread_targets: vec![] },
        events: vec![],
        deploy: None,
        binding: Vec::new(),
        unexplained: Vec::new(),
        hops: Vec::new(),
        profile: Some("chat".to_string()),
        notes: Vec::new(),
        readings: Vec::new(),
        probe: None,
    }
}

/// Two findings on different models, one with also-consistent rules and a low-confidence
/// quantile; healthy pairs, not-evaluated pairs and a data-source warning.
pub(crate) fn sample_report() -> Report {
    let kv = Finding {
        rule: "kv-cache-exhausted".to_string(),
        title: "KV cache exhausted: requests are being preempted".to_string(),
        severity: Severity::Critical,
        score: 3.7,
        scope: model(LLAMA),
        summary: "The KV cache stayed nearly full and the scheduler evicted running requests to make \
                  room, so requests are recomputed and latency climbs."
            .to_string(),
        evidence: vec![
            Evidence {
                signal: "kv_cache_usage".to_string(),
                title: "KV cache usage (max)".to_string(),
                unit: "ratio".to_string(),
                value: Some(0.991),
                baseline: Some(0.62),
                threshold: "> 95%".into(),
                passed: true,
                query: r#"max by (model_name) (max_over_time(vllm:kv_cache_usage_perc{namespace="inference-prod"}[30m]))"#.to_string(),
                metric: "vllm:kv_cache_usage_perc".to_string(),
                low_confidence: false,
                observations: None,
                limits: vec![],
                series: None,
                value_bound: None,
                baseline_bound: None,
                same_bucket: false,
            },
            Evidence {
                signal: "preemption_rate".to_string(),
                title: "Preemptions".to_string(),
                unit: "per_second".to_string(),
                value: Some(4.2),
                baseline: Some(0.0),
                threshold: "> 0.1/s".into(),
                passed: true,
                query: r#"sum by (model_name) (rate(vllm:num_preemptions_total{namespace="inference-prod"}[30m]))"#.to_string(),
                metric: "vllm:num_preemptions_total".to_string(),
                low_confidence: false,
                observations: None,
                limits: vec![],
                series: None,
                value_bound: None,
                baseline_bound: None,
                same_bucket: false,
            },
        ],
        steps: rule_steps(&[
            "Lower --max-num-seqs or --max-num-batched-tokens so fewer requests share the cache.",
            "Raise --gpu-memory-utilization (e.g. 0.90 -> 0.95) if the GPU has headroom.",
            "Add replicas or move long-context traffic to a separate deployment.",
        ]),
        references: vec!["https://docs.vllm.ai/en/latest/configuration/optimization.html".to_string()],
        recommendations: vec![Recommendation {
            setting: "max_num_seqs".to_string(),
            value: "37".to_string(),
            arithmetic: "40 running sequences per replica used 96% of the KV cache on average: 40 x 90% headroom / 96% = 37 sequences per replica".to_string(),
            caveat: "a starting point for a load test".to_string(),
            flag: "--max-num-seqs".to_string(),
            from: "unknown".to_string(),
            to: "37".to_string(),
            tradeoff: "fewer sequences at once: no preemptions, but each replica admits less".to_string(),
            confidence: crate::report::Confidence {
                level: crate::report::ConfidenceLevel::High,
                basis: "share of time preempting: 90% over the window and 100% over its last 5 min".to_string(),
            },
        }],
        wont_help: vec![],
        replicas: Some(Replicas {
            label: "instance".to_string(),
            affected: vec!["10.0.0.1:8000".to_string(), "10.0.0.2:8000".to_string()],
            total: 3,
            signal: "kv_usage_max".to_string(),
            limit: ">= 90%".to_string(),
            not_evaluated: None,
        }),
        stood_in: None,
        recent: None,
        onset: Some(Utc.with_ymd_and_hms(2026, 1, 15, 9, 3, 0).unwrap()),
        onset_signal: Some("kv_cache_usage".to_string()),
        ended: None,
        preceded_by: None,
        cold_start: None,
        replica_cause: None,
        gpu_reasons: Vec::new(),
        correlations: Vec::new(),
        also_consistent: vec![
            AlsoConsistent {
                rule: "queue-backlog".to_string(),
                title: "Requests are waiting in the queue".to_string(),
                severity: Severity::Warning,
                score: 1.9,
            },
            AlsoConsistent { rule: "ttft-regression".to_string(), title: "Time to first token regressed".to_string(), severity: Severity::Info, score: 1.2 },
        ],
        raised_from: None,
    };
    let ttft = Finding {
        rule: "ttft-regression".to_string(),
        title: "Time to first token regressed".to_string(),
        severity: Severity::Warning,
        score: 2.1,
        scope: model(QWEN),
        summary: "Users wait much longer for the first token than in the baseline, while the queue \
                  stayed short, which points at prefill rather than admission."
            .to_string(),
        evidence: vec![
            Evidence {
                signal: "ttft_p95".to_string(),
                title: "P95 time to first token".to_string(),
                unit: "seconds".to_string(),
                value: Some(4.12),
                baseline: Some(0.82),
                threshold: "> 2x baseline or > 3s".into(),
                passed: true,
                query: r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{namespace="inference-prod"}[30m])))"#
                    .to_string(),
                metric: "vllm:time_to_first_token_seconds".to_string(),
                low_confidence: true,
                observations: Some(14.0),
                limits: vec![],
                series: None,
                value_bound: None,
                baseline_bound: None,
                same_bucket: false,
            },
            Evidence {
                signal: "queue_time_p95".to_string(),
                title: "P95 time in queue".to_string(),
                unit: "seconds".to_string(),
                value: Some(0.031),
                baseline: Some(0.024),
                threshold: "< 0.5s".into(),
                passed: true,
                query: r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:request_queue_time_seconds_bucket{namespace="inference-prod"}[30m])))"#
                    .to_string(),
                metric: "vllm:request_queue_time_seconds".to_string(),
                low_confidence: false,
                observations: Some(412.0),
                limits: vec![],
                series: None,
                value_bound: None,
                baseline_bound: None,
                same_bucket: false,
            },
            Evidence {
                signal: "prefix_cache_hit_ratio".to_string(),
                title: "Prefix cache hit ratio".to_string(),
                unit: "ratio".to_string(),
                value: None,
                baseline: Some(0.41),
                threshold: "< 50% of baseline".into(),
                passed: false,
                query: r#"sum by (model_name) (rate(vllm:prefix_cache_hits_total{namespace="inference-prod"}[30m])) / sum by (model_name) (rate(vllm:prefix_cache_queries_total{namespace="inference-prod"}[30m]))"#
                    .to_string(),
                metric: "vllm:prefix_cache_hits_total".to_string(),
                low_confidence: false,
                observations: None,
                limits: vec![],
                series: None,
                value_bound: None,
                baseline_bound: None,
                same_bucket: false,
            },
        ],
        steps: rule_steps(&[
            "Compare prompt lengths with the baseline: longer prompts mean longer prefill.",
            "Enable chunked prefill (--enable-chunked-prefill) so long prompts do not stall others.",
        ]),
        references: vec![],
        recommendations: vec![],
        wont_help: vec![crate::report::WontHelp::from(crate::report::card::RuledOut::KvMemory { peak: 0.41, room: 0.6 })],
        replicas: None,
        stood_in: None,
        recent: None,
        // Already past its baseline when the window began.
        onset: None,
        onset_signal: Some("ttft_p95".to_string()),
        ended: None,
        preceded_by: None,
        cold_start: None,
        replica_cause: None,
        gpu_reasons: Vec::new(),
        correlations: Vec::new(),
        also_consistent: vec![],
        raised_from: None,
    };
    let healthy = vec![
        Checked { rule: "error-rate".to_string(), scope: model(LLAMA) },
        Checked { rule: "error-rate".to_string(), scope: model(QWEN) },
        Checked { rule: "queue-backlog".to_string(), scope: model(QWEN) },
        Checked { rule: "throughput-drop".to_string(), scope: model(LLAMA) },
        Checked { rule: "throughput-drop".to_string(), scope: model(QWEN) },
    ];
    let not_evaluated = vec![
        NotEvaluated {
            rule: "spec-decode-acceptance-drop".to_string(),
            scope: model(QWEN),
            reason: "no series for vllm:spec_decode_num_draft_tokens_total in the window".into(),
        },
        NotEvaluated { rule: "kv-cache-exhausted".to_string(), scope: model(QWEN), reason: "timed out".into() },
    ];
    let mut r = base(vec![kv, ttft], healthy, not_evaluated);
    // The KV-cache signal carries its course and its threshold, as live runs give them:
    // steady in the baseline, climbing to the ceiling in the window, with a scrape gap.
    let (b0, w0) = (r.baseline.start.timestamp() as f64, r.window.start.timestamp() as f64);
    let kv_usage = &mut r.findings[0].evidence[0];
    kv_usage.limits = vec![Limit { label: "> 95%".to_string(), value: 0.95, side: crate::report::LimitSide::Above }];
    kv_usage.series = Some(Trend {
        step_seconds: 60,
        range_seconds: 180,
        query: r#"max by (model_name) (max_over_time(vllm:kv_cache_usage_perc{namespace="inference-prod"}[180s]))"#.to_string(),
        baseline: (0..=30).map(|i| (b0 + 60.0 * i as f64, 0.60 + 0.02 * ((i % 5) as f64 - 2.0).abs() / 2.0)).collect(),
        window: (0..=30).filter(|i| !(18..21).contains(i)).map(|i| (w0 + 60.0 * i as f64, (0.62 + 0.03 * i as f64).min(0.991))).collect(),
    });
    r.warnings = vec!["partial response: store 10.0.3.7:10901 unavailable".to_string(), "partial response: store 10.0.3.7:10901 unavailable".to_string()];
    r
}

fn event(h: u32, m: u32, s: u32, kind: EventKind, scope: Scope, detail: &str) -> Event {
    Event {
        time: Utc.with_ymd_and_hms(2026, 1, 15, h, m, s).single().expect("valid fixed timestamp"),
        kind,
        scope,
        detail: detail.to_string(),
        replicas: vec![],
        of: None,
        until: None,
        before: BTreeMap::new(),
        after: BTreeMap::new(),
    }
}

/// The sample report with what changed around it: a target going down and coming back and a
/// rollout tied to no model in the baseline; a restart wave and a configuration change on the
/// KV-cache finding's model just before its onset (the change it began after), and a restart
/// of the other model later in the window.
pub(crate) fn sample_report_with_events() -> Report {
    let mut r = sample_report();
    let mut down = event(8, 44, 0, EventKind::TargetDown, model(LLAMA), "1 of 3 replicas stopped answering scrapes");
    down.replicas = vec!["10.0.0.3:8000".to_string()];
    down.of = Some(3);
    let mut up = event(8, 46, 30, EventKind::TargetUp, model(LLAMA), "1 of 3 replicas answering scrapes again");
    up.replicas = down.replicas.clone();
    up.of = Some(3);
    let rollout = event(8, 58, 0, EventKind::Rollout, Scope::new(), "Deployment inference-prod/vllm-llama generation 7 -> 8");
    let mut restart = event(9, 0, 30, EventKind::Restart, model(LLAMA), "2 of 3 replicas restarted");
    restart.replicas = vec!["10.0.0.1:8000".to_string(), "10.0.0.2:8000".to_string()];
    restart.of = Some(3);
    restart.until = Some(t(9, 1));
    let mut config = event(9, 1, 0, EventKind::ConfigChange, model(LLAMA), "num_gpu_blocks 2000 -> 900 on 2 of 3 replicas");
    config.replicas = restart.replicas.clone();
    config.of = Some(3);
    config.before = BTreeMap::from([("num_gpu_blocks".to_string(), "2000".to_string())]);
    config.after = BTreeMap::from([("num_gpu_blocks".to_string(), "900".to_string())]);
    let qwen_restart = event(9, 12, 0, EventKind::Restart, model(QWEN), "1 of 2 replicas restarted");
    r.events = vec![config.clone(), down, up, rollout, qwen_restart, restart];
    r.events.sort_by_key(|e| e.time);
    let kv = &mut r.findings[0];
    kv.preceded_by = Some(PrecededBy {
        event: config.clone(),
        lead_seconds: 120,
        text: "began 2 min after a configuration change at 09:01:00 UTC: num_gpu_blocks 2000 -> 900 on 2 of 3 replicas".to_string(),
    });
    // The step explain puts first for a finding that began after a configuration change.
    kv.steps.insert(0, crate::report::Step::Change { event: config.clone() });
    r
}

/// Everything evaluated and nothing matched.
pub(crate) fn clean_report() -> Report {
    let healthy = ["error-rate", "kv-cache-exhausted", "ttft-regression"]
        .iter()
        .flat_map(|rule| [LLAMA, QWEN].map(|m| Checked { rule: rule.to_string(), scope: model(m) }))
        .collect();
    base(vec![], healthy, vec![])
}

/// The data source answered nothing usable: every pair is not evaluated.
pub(crate) fn nothing_evaluated_report() -> Report {
    let not_evaluated = ["error-rate", "kv-cache-exhausted"]
        .iter()
        .map(|rule| NotEvaluated { rule: rule.to_string(), scope: Scope::new(), reason: "data source unreachable".into() })
        .collect();
    let mut r = base(vec![], vec![], not_evaluated);
    r.metrics = MetricsInfo { generation: "unknown".to_string(), ..MetricsInfo::default() };
    r.warnings = vec!["no vLLM metrics found for selector {namespace=\"inference-prod\"}".to_string()];
    r
}

/// A finding's steps as its rule file would give them, none answered.
pub fn rule_steps(asks: &[&str]) -> crate::report::Steps {
    asks.iter().map(|a| crate::report::Step::ask(*a)).collect::<Vec<_>>().into()
}
