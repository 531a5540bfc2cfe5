//! Time by hop: where the time users wait went, per scope, from the means the signals already read
//! (no query of its own, so nothing here grows with the fleet).
//!
//! A request goes through a router or gateway (where one is seen), the API server's input
//! processing, the engine's queue, the KV transfer from a prefill instance (NIXL, where exported),
//! prefill and decode. Each hop is a mean per request from `_sum` over `_count` (exact whatever the
//! buckets), in the window and in the baseline:
//!
//! - `router`: a router's own time before the engine answered, less what the engine accounts for
//!   before it answers (vllm-router: `router_duration_mean` less `input_processing_mean`); or a
//!   gateway's time to first token less the engine's (`gateway_ttft_mean` less `ttft_mean`);
//! - `input-processing`: `input_processing_mean` (TTFT less queue and prefill);
//! - `engine-queue`: `queue_mean`, less `kv_transfer_mean` where NIXL exports it (vLLM records a
//!   disaggregated request scheduled once its KV has arrived: the transfer is in its queue time);
//! - `kv-transfer`: `kv_transfer_mean`; `prefill`: `prefill_mean`; `decode`: `decode_mean`.
//!
//! A hop grew when its mean rose at least [`GREW_FLOOR_S`] and at least [`GREW_RATIO`] times its
//! baseline; the one that rose most is named. A hop whose metrics are not in the data for a scope
//! is listed as not seen, with what it would need. docs/hops.md says what each hop reads.

use std::collections::BTreeSet;

use crate::report::{Hop, HopSplit, HopValues, Scope};
use crate::rules::eval::SignalTable;

/// Seconds as the text says them, floating-point dust (a remainder of `1e-12` s) read as 0.
pub fn seconds(v: f64) -> String {
    crate::units::format_seconds(if v.abs() < 5e-7 { 0.0 } else { v })
}

/// The signals this stage reads (plan.rs asks for those the pack defines, whatever the rules read).
pub const SIGNALS: &[&str] = &[
    "ttft_mean",
    "queue_mean",
    "prefill_mean",
    "input_processing_mean",
    "kv_transfer_mean",
    "decode_mean",
    "router_duration_mean",
    "router_over_e2e",
    "gateway_ttft_mean",
];

/// Where the router's time per request is within this factor of the engines' whole request
/// (`router_over_e2e`), the clients are taken not to stream: the router timed each request until
/// its whole answer, and its own wait is what lies beyond the engines' end-to-end time. The same
/// band as router-saturated's (rules/router.toml).
pub const WHOLE_ANSWER_BAND: (f64, f64) = (0.85, 1.15);

/// The smallest rise of a hop's mean worth naming: a tenth of a second, a fifth of a chat
/// first-token target of 500 ms. Healthy means wander by a few milliseconds between windows.
pub const GREW_FLOOR_S: f64 = 0.1;
/// ... and the factor it must also rise by (a decode of 8 s that gains 0.2 s did not grow).
pub const GREW_RATIO: f64 = 1.5;

/// The hops of a request's path, in order, with the phrase that says where time went.
const ORDER: [(&str, &str); 6] = [
    ("router", "at the router"),
    ("input-processing", "before the engine (input processing)"),
    ("engine-queue", "in the engine's queue"),
    ("kv-transfer", "in the KV transfer"),
    ("prefill", "in prefill"),
    ("decode", "in decode"),
];

/// One signal's window and baseline value for a scope, finite values only, to the nanosecond: a
/// remainder of means is exact only to floating-point dust (`6.8e-13` s against `6.8e-13` s plus
/// an ulp from another server's summing order), which says nothing about a request's time.
fn read(table: &SignalTable, signal: &str, scope: &Scope) -> (Option<f64>, Option<f64>) {
    let Some(v) = table.get(signal) else { return (None, None) };
    let finite = |x: Option<&f64>| x.copied().filter(|x| x.is_finite()).map(|x| (x * 1e9).round() / 1e9);
    (finite(v.window.values.get(scope)), finite(v.baseline.values.get(scope)))
}

/// `a - b`, clamped at 0, where both exist.
fn less(a: (Option<f64>, Option<f64>), b: (Option<f64>, Option<f64>)) -> (Option<f64>, Option<f64>) {
    let one = |x: Option<f64>, y: Option<f64>| Some((x? - y.unwrap_or(0.0)).max(0.0));
    (one(a.0, b.0), one(a.1, b.1))
}

/// Every scope's split, for the scopes with a mean time to first token in the window.
pub fn split(table: &SignalTable) -> Vec<HopSplit> {
    let scopes: BTreeSet<&Scope> = table.get("ttft_mean").map(|v| v.window.values.keys().collect()).unwrap_or_default();
    scopes.into_iter().filter(|s| !s.is_empty()).filter_map(|s| split_one(table, s)).collect()
}

fn split_one(table: &SignalTable, scope: &Scope) -> Option<HopSplit> {
    let ttft = read(table, "ttft_mean", scope);
    ttft.0?;
    let input = read(table, "input_processing_mean", scope);
    let hop = |name: &str, v: (Option<f64>, Option<f64>), from: &str| Hop { hop: name.to_string(), window: v.0, baseline: v.1, seen: v.0.is_some(), from: from.to_string() };
    let router = {
        let vllm_router = read(table, "router_duration_mean", scope);
        let gateway = read(table, "gateway_ttft_mean", scope);
        if vllm_router.0.is_some() {
            // Per side: whole answers (the ratio in the band) less the engines' end-to-end mean
            // (the router's mean over the ratio), else less the engine's input processing.
            let over = read(table, "router_over_e2e", scope);
            let whole = |r: Option<f64>, o: Option<f64>| o.filter(|o| *o >= WHOLE_ANSWER_BAND.0 && *o <= WHOLE_ANSWER_BAND.1 && *o > 0.0).and_then(|o| Some(r? / o));
            let engine_part = (whole(vllm_router.0, over.0).or(input.0), whole(vllm_router.1, over.1).or(input.1));
            let from = if whole(vllm_router.0, over.0).is_some() || whole(vllm_router.1, over.1).is_some() {
                "router_duration_mean less input_processing_mean (streams), or less the engines' end-to-end mean where router_over_e2e is within 15% of 1 (whole answers)"
            } else {
                "router_duration_mean less input_processing_mean"
            };
            hop("router", less(vllm_router, engine_part), from)
        } else if gateway.0.is_some() {
            hop("router", less(gateway, ttft), "gateway_ttft_mean less ttft_mean")
        } else {
            hop("router", (None, None), "a router's or gateway's own duration (vllm_router_generate_duration_seconds, a gateway's time to first token)")
        }
    };
    // A disaggregated request waits for its KV in the decode instance's queue: vLLM records it
    // scheduled once the transfer is done, so its queue time holds the transfer's.
    let queue = read(table, "queue_mean", scope);
    let transfer = read(table, "kv_transfer_mean", scope);
    let mut hops = vec![router, hop("input-processing", input, "input_processing_mean")];
    if transfer.0.is_some() {
        hops.push(hop("engine-queue", less(queue, transfer), "queue_mean less kv_transfer_mean"));
        hops.push(hop("kv-transfer", transfer, "kv_transfer_mean"));
    } else {
        hops.push(hop("engine-queue", queue, "queue_mean"));
        hops.push(hop("kv-transfer", (None, None), "vllm:nixl_xfer_time_seconds (NIXL only: without disaggregated prefill there is no transfer; another connector's stays in the queue time)"));
    }
    hops.push(hop("prefill", read(table, "prefill_mean", scope), "prefill_mean"));
    hops.push(hop("decode", read(table, "decode_mean", scope), "decode_mean"));
    let router_w = hops[0].window.unwrap_or(0.0);
    let first_token = HopValues { window: ttft.0.map(|t| t + router_w), baseline: ttft.1.map(|t| t + hops[0].baseline.unwrap_or(0.0)) };
    let grew = grown(&hops).into_iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(h, _)| h.to_string());
    let text = sentence(&hops, &first_token, grew.as_deref());
    Some(HopSplit { scope: scope.clone(), first_token, hops, grew, text })
}

/// The hops that grew past the bar, with their rise in seconds.
fn grown(hops: &[Hop]) -> Vec<(&str, f64)> {
    hops.iter()
        .filter_map(|h| {
            let (w, b) = (h.window?, h.baseline?);
            let rise = w - b;
            (h.seen && rise >= GREW_FLOOR_S && (b <= 0.0 || w >= GREW_RATIO * b)).then_some((h.hop.as_str(), rise))
        })
        .collect()
}

fn signed(v: f64) -> String {
    if v >= 0.0 { format!("+{}", seconds(v)) } else { format!("-{}", seconds(-v)) }
}

fn where_(hop: &str) -> &'static str {
    ORDER.iter().find(|(h, _)| *h == hop).map_or("elsewhere", |(_, w)| w)
}

/// `first token +1.9 s (200 ms -> 2.1 s): +1.7 s at the router, engine hops unchanged; not seen:
/// KV transfer`.
fn sentence(hops: &[Hop], first_token: &HopValues, grew: Option<&str>) -> String {
    let ft = match (first_token.window, first_token.baseline) {
        (Some(w), Some(b)) => format!("first token {} ({} -> {})", signed(w - b), seconds(b), seconds(w)),
        (Some(w), None) => format!("first token {} (no baseline)", seconds(w)),
        _ => "first token not measured".to_string(),
    };
    let grown = grown(hops);
    let mut text = match grew {
        None => format!("no hop grew: {ft}"),
        Some(top) => {
            let rise = grown.iter().find(|(h, _)| *h == top).map_or(0.0, |(_, r)| *r);
            let mut s = format!("{ft}: {} {}", signed(rise), where_(top));
            let others: Vec<String> = grown.iter().filter(|(h, _)| *h != top).map(|(h, r)| format!("{} {}", signed(*r), where_(h))).collect();
            if !others.is_empty() {
                s.push_str(&format!(", also {}", others.join(", ")));
            } else if top == "router" {
                s.push_str(", engine hops unchanged");
            } else {
                s.push_str(", other hops unchanged");
            }
            s
        }
    };
    let unseen: Vec<&str> = hops.iter().filter(|h| !h.seen && h.hop != "kv-transfer").map(|h| h.hop.as_str()).collect();
    if !unseen.is_empty() {
        text.push_str(&format!("; not seen: {}", unseen.join(", ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::eval::{Availability, SignalValues, WindowValues};

    fn scope(m: &str) -> Scope {
        [("model_name".to_string(), m.to_string())].into_iter().collect()
    }

    fn table(rows: &[(&str, f64, f64)]) -> SignalTable {
        let mut t = SignalTable::new();
        for (signal, w, b) in rows {
            let values = |v: f64| WindowValues { values: [(scope("m"), v)].into_iter().collect(), ..WindowValues::unavailable(Availability::Ok) };
            t.insert(signal.to_string(), SignalValues { window: values(*w), baseline: values(*b) });
        }
        t
    }

    const ENGINE: [(&str, f64, f64); 5] = [("ttft_mean", 0.21, 0.2), ("queue_mean", 0.05, 0.05), ("prefill_mean", 0.15, 0.14), ("input_processing_mean", 0.01, 0.01), ("decode_mean", 8.0, 7.9)];

    #[test]
    fn a_router_wait_that_grew_in_front_of_unchanged_engines_is_named_with_the_engines_unchanged() {
        let mut rows = ENGINE.to_vec();
        rows.push(("router_duration_mean", 1.81, 0.02));
        let s = &split(&table(&rows))[0];
        assert_eq!(s.grew.as_deref(), Some("router"));
        let router = &s.hops[0];
        assert!(router.seen && (router.window.unwrap() - 1.8).abs() < 1e-9 && (router.baseline.unwrap() - 0.01).abs() < 1e-9, "{router:?}");
        assert!((s.first_token.window.unwrap() - 2.01).abs() < 1e-9);
        assert!(s.text.contains("+1.79 s at the router, engine hops unchanged"), "{}", s.text);
        assert!(!s.text.contains("not seen"), "{}", s.text);
    }

    #[test]
    fn a_router_that_came_to_time_whole_answers_did_not_wait_longer() {
        // The router lab's blind run across the clients' switch to unstreamed requests: the
        // router's mean 79 ms -> 245 ms, 1.02 times the engines' whole request in the window.
        let mut rows = ENGINE.to_vec();
        rows.push(("router_duration_mean", 0.245, 0.079));
        rows.push(("router_over_e2e", 1.02, 0.3));
        let s = &split(&table(&rows))[0];
        assert_eq!(s.grew, None, "{}", s.text);
        let router = &s.hops[0];
        assert!((router.window.unwrap() - (0.245 - 0.245 / 1.02)).abs() < 1e-6, "{router:?}");
        assert!((router.baseline.unwrap() - 0.069).abs() < 1e-9, "{router:?}");
        assert!(router.from.contains("whole answers"), "{router:?}");
        // Past the band the router's time is its own again (the router-cpu phase: 3.2 times).
        let mut rows = ENGINE.to_vec();
        rows.push(("router_duration_mean", 1.06, 0.007));
        rows.push(("router_over_e2e", 3.2, 0.02));
        let s = &split(&table(&rows))[0];
        assert_eq!(s.grew.as_deref(), Some("router"));
        assert!((s.hops[0].window.unwrap() - 1.05).abs() < 1e-9);
    }

    #[test]
    fn without_router_metrics_the_router_is_not_seen_and_a_transfer_that_grew_is_named() {
        // The transfer is in the queue time (vLLM schedules the request once its KV came): the
        // queue hop is what is left of it.
        let mut rows = ENGINE.to_vec();
        rows[1] = ("queue_mean", 0.33, 0.059);
        rows.push(("kv_transfer_mean", 0.28, 0.009));
        let s = &split(&table(&rows))[0];
        assert_eq!(s.grew.as_deref(), Some("kv-transfer"));
        assert!(!s.hops[0].seen && s.hops[0].window.is_none());
        let queue = &s.hops[2];
        assert_eq!(queue.hop, "engine-queue");
        assert!((queue.window.unwrap() - 0.05).abs() < 1e-9 && (queue.baseline.unwrap() - 0.05).abs() < 1e-9, "{queue:?}");
        assert!(s.text.contains("in the KV transfer, other hops unchanged; not seen: router"), "{}", s.text);
    }

    #[test]
    fn a_small_or_proportionally_small_rise_is_no_growth_and_missing_hops_are_not_seen() {
        // Decode 8 s -> 8.5 s: half a second, but 1.06x. Queue 10 ms -> 60 ms: 6x, but 50 ms.
        let rows = [("ttft_mean", 0.25, 0.2), ("queue_mean", 0.06, 0.01), ("decode_mean", 8.5, 8.0)];
        let s = &split(&table(&rows))[0];
        assert_eq!(s.grew, None);
        assert!(s.text.starts_with("no hop grew: first token +50 ms"), "{}", s.text);
        let unseen: Vec<&str> = s.hops.iter().filter(|h| !h.seen).map(|h| h.hop.as_str()).collect();
        assert_eq!(unseen, ["router", "input-processing", "kv-transfer", "prefill"]);
    }

    #[test]
    fn two_hops_that_grew_name_the_larger_and_the_other_beside_it() {
        let mut rows = ENGINE.to_vec();
        rows[1] = ("queue_mean", 0.6, 0.05);
        rows[2] = ("prefill_mean", 1.5, 0.14);
        let s = &split(&table(&rows))[0];
        assert_eq!(s.grew.as_deref(), Some("prefill"));
        assert!(s.text.contains("in prefill, also +550 ms in the engine's queue"), "{}", s.text);
    }

    #[test]
    fn means_are_read_to_the_nanosecond_so_a_remainders_floating_point_dust_is_zero() {
        let rows = [("ttft_mean", 0.2, 0.2), ("input_processing_mean", 6.818295927857321e-13, 6.818434705735399e-13), ("queue_mean", 0.024802501085341, 0.02)];
        let s = &split(&table(&rows))[0];
        assert_eq!((s.hops[1].window, s.hops[1].baseline), (Some(0.0), Some(0.0)));
        assert_eq!(s.hops[2].window, Some(0.024802501));
    }

    #[test]
    fn no_first_token_mean_no_split_and_non_finite_values_are_no_values() {
        assert!(split(&table(&[("queue_mean", 0.1, 0.1)])).is_empty());
        let s = &split(&table(&[("ttft_mean", 0.2, f64::NAN), ("prefill_mean", f64::INFINITY, 0.1)]))[0];
        assert!(s.first_token.baseline.is_none() && !s.hops[4].seen && s.grew.is_none(), "{s:?}");
    }
}
