//! The vLLM metric names the built-in signals read, against the families a vLLM release defines:
//! `fixtures/vllm-metrics/v0.33.0.txt`, listed from the 0.33.0 wheel's sources. Every family a
//! signal reads must be there under one of the names the signal lists, unless it is one vLLM 0.33
//! does not export at all, named below with what the rules do without it.

use std::collections::BTreeSet;

use vllm_diag::signals::required_series;

/// Families the signals read that vLLM 0.33.0 does not define, and why reading them stays useful.
const ABSENT_IN_0_33: &[(&str, &str)] = &[
    ("vllm:prompt_tokens_recomputed_total", "not in 0.32 nor 0.33 either: recompute-thrashing judges preemptions per finished request alone"),
    ("vllm:num_dropped", "exported by some builds only; requests-rejected reads vllm:admission_rejections_total"),
    ("vllm:num_preemptions_by_reason_total", "proposed in vllm-project/vllm #58037, not in 0.33.0's wheel: priority-preemption is not evaluated without it"),
];

fn families_0_33() -> BTreeSet<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/vllm-metrics/v0.33.0.txt");
    let text = std::fs::read_to_string(path).expect("the 0.33.0 family list");
    text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(|l| l.split_whitespace().next()).map(String::from).collect()
}

/// The family a stored series name belongs to: `x_bucket`, `x_sum`, `x_count` -> `x` (a histogram
/// whose own name ends in `_total`, such as `vllm:iteration_tokens_total`, keeps it), `x_total` -> `x`.
fn family_candidates(series: &str) -> Vec<String> {
    let mut out = vec![series.to_string()];
    for suffix in ["_bucket", "_sum", "_count", "_total"] {
        if let Some(stem) = series.strip_suffix(suffix) {
            out.push(stem.to_string());
        }
    }
    out
}

#[test]
fn every_vllm_family_the_signals_read_is_defined_by_vllm_0_33_under_one_of_its_names_or_is_known_to_be_absent() {
    let defined = families_0_33();
    assert!(defined.len() > 80 && defined.contains("vllm:kv_cache_usage_perc"), "the fixture lists {} families", defined.len());
    let rules = vllm_diag::rules::load::load_builtin().expect("built-in rules");
    let mut missing = Vec::new();
    let mut read = 0;
    for (id, def) in &rules.signals {
        for alternatives in required_series(&def.kind) {
            let vllm: Vec<&String> = alternatives.iter().filter(|n| n.starts_with("vllm:")).collect();
            if vllm.is_empty() {
                continue;
            }
            read += 1;
            let found = vllm.iter().any(|n| family_candidates(n).iter().any(|f| defined.contains(f)));
            let known = vllm.iter().any(|n| ABSENT_IN_0_33.iter().any(|(a, _)| a == n));
            if !found && !known {
                missing.push(format!("{id}: {}", alternatives.join(" / ")));
            }
        }
    }
    assert!(read > 40, "only {read} vLLM families read");
    assert!(missing.is_empty(), "families vLLM 0.33.0 does not define under any listed name (renamed? add the new name first):\n{}", missing.join("\n"));
}

#[test]
fn the_families_known_to_be_absent_are_really_absent_from_0_33_and_still_read() {
    let defined = families_0_33();
    let rules = vllm_diag::rules::load::load_builtin().expect("built-in rules");
    let read: BTreeSet<String> = rules.signals.values().flat_map(|d| required_series(&d.kind)).flatten().collect();
    for (name, why) in ABSENT_IN_0_33 {
        assert!(!family_candidates(name).iter().any(|f| defined.contains(f)), "{name} is defined by 0.33 after all ({why})");
        assert!(read.contains(*name), "{name} is no longer read: drop it from the list");
    }
}

#[test]
fn names_vllm_0_33_removed_are_still_read_for_older_engines_after_the_current_name() {
    let defined = families_0_33();
    let rules = vllm_diag::rules::load::load_builtin().expect("built-in rules");
    // Renamed families: the current name first, the old one still listed.
    for (new, old) in [
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        ("vllm:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket"),
        ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    ] {
        assert!(family_candidates(new).iter().any(|f| defined.contains(f)), "{new} is not in 0.33");
        assert!(!family_candidates(old).iter().any(|f| defined.contains(f)), "{old} is in 0.33");
        let listed = rules.signals.values().flat_map(|d| required_series(&d.kind)).any(|alts| {
            let (i, j) = (alts.iter().position(|n| n == new), alts.iter().position(|n| n == old));
            matches!((i, j), (Some(i), Some(j)) if i < j)
        });
        assert!(listed, "no signal reads {new} before {old}");
    }
}

/// The router families a signal reads are vllm-router 0.1.17's: those of its PD mode in
/// fixtures/router-metrics/vllm-router-0.1.17-pd.txt (captured in front of stub workers), the
/// others in the router lab's samples (fixtures/real-engine-router/samples.om.gz: its phases ran
/// round robin and cache_aware).
#[test]
fn every_router_family_the_signals_read_is_on_a_real_router_page() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut defined = BTreeSet::new();
    let mut lab = String::new();
    let gz = std::fs::File::open(root.join("fixtures/real-engine-router/samples.om.gz")).expect("the router lab's samples");
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut lab).expect("gzip");
    let pd = std::fs::read_to_string(root.join("fixtures/router-metrics/vllm-router-0.1.17-pd.txt")).expect("the PD page");
    for text in [pd, lab] {
        defined.extend(text.lines().filter(|l| l.starts_with("vllm_router_")).filter_map(|l| l.split(['{', ' ']).next()).map(String::from));
    }
    assert!(defined.contains("vllm_router_pd_prefill_requests_total") && defined.contains("vllm_router_cb_state"), "{defined:?}");
    let rules = vllm_diag::rules::load::load_builtin().expect("built-in rules");
    let mut missing = Vec::new();
    for (id, def) in &rules.signals {
        for alternatives in required_series(&def.kind) {
            for name in alternatives.iter().filter(|n| n.starts_with("vllm_router_")) {
                if !defined.contains(name) {
                    missing.push(format!("{id}: {name}"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "router families on no real router page:\n{}", missing.join("\n"));
}
