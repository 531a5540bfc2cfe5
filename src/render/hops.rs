//! The time by hop (`report.hops`, docs/hops.md) as text: one line per model whose wait grew in
//! one hop for the compact format, and the whole split, hop by hop, for `-v`. Self-contained so
//! the formats that show it call one function each.

use super::one_line;
use super::ScopeStyle;
use crate::explain::hops::seconds;
use crate::report::{HopSplit, Report};

/// One scope's split, worded.
#[derive(Debug, Clone, PartialEq)]
pub struct HopView {
    /// `Qwen2.5-7B-Instruct: first token +1.9 s (200 ms -> 2.1 s): +1.7 s at the router, engine
    /// hops unchanged`, only where a hop grew.
    pub grew: Option<String>,
    /// `router 1.8 s (10 ms) · input processing 10 ms (10 ms) · ... · decode 8 s (7.9 s); not
    /// seen: kv-transfer`: every hop, the window's mean and the baseline's in brackets.
    pub split: String,
    /// The report's sentence for this scope, without the scope.
    pub sentence: String,
    /// Where a hop grew, that hop and how much: `engine queue +559 ms (99 ms -> 658 ms)`, for the
    /// answer's few lines (the whole sentence is in -v and the JSON).
    pub brief: Option<String>,
    pub scope: String,
}

pub(crate) fn views(report: &Report, scopes: &ScopeStyle) -> Vec<HopView> {
    report.hops.iter().map(|h| view(h, scopes)).collect()
}

fn view(h: &HopSplit, scopes: &ScopeStyle) -> HopView {
    let scope = scopes.compact(&h.scope);
    let text = one_line(&h.text);
    let seen: Vec<String> = h
        .hops
        .iter()
        .filter(|x| x.seen)
        .map(|x| {
            let b = x.baseline.map_or_else(|| "no baseline".to_string(), seconds);
            format!("{} {} ({b})", x.hop.replace('-', " "), x.window.map_or_else(|| "-".to_string(), seconds))
        })
        .collect();
    let unseen: Vec<String> = h.hops.iter().filter(|x| !x.seen).map(|x| x.hop.clone()).collect();
    let mut split = format!("{scope}: {}", seen.join(" · "));
    if !unseen.is_empty() {
        split.push_str(&format!("; not seen: {}", unseen.join(", ")));
    }
    let brief = h.grew.as_ref().and_then(|g| h.hops.iter().find(|x| &x.hop == g)).and_then(|x| {
        let (w, b) = (x.window?, x.baseline?);
        Some(format!("{} +{} ({} -> {})", x.hop.replace('-', " "), seconds(w - b), seconds(b), seconds(w)))
    });
    HopView { grew: h.grew.is_some().then(|| format!("{scope}: {text}")), split: one_line(&split), sentence: text, scope, brief }
}

/// The compact format's block: a heading and one line per scope where a hop grew; nothing when none did.
pub fn compact_lines(hops: &[HopView]) -> Vec<String> {
    let grew: Vec<&String> = hops.iter().filter_map(|h| h.grew.as_ref()).collect();
    if grew.is_empty() {
        return Vec::new();
    }
    let mut out = vec!["Time by hop (mean per request):".to_string()];
    out.extend(grew.into_iter().cloned());
    out
}

/// `-v`'s block: the heading, then every scope's whole split with its sentence.
pub fn table_lines(hops: &[HopView]) -> Option<(String, Vec<(String, String)>)> {
    if hops.is_empty() {
        return None;
    }
    let head = "Time by hop (mean per request, the baseline's in brackets):".to_string();
    Some((head, hops.iter().map(|h| (h.split.clone(), h.sentence.clone())).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Hop, HopValues};

    fn split(model: &str, grew: Option<&str>) -> HopSplit {
        let hop = |name: &str, w: Option<f64>, b: Option<f64>| Hop { hop: name.into(), window: w, baseline: b, seen: w.is_some(), from: String::new() };
        HopSplit {
            scope: [("model_name".to_string(), model.to_string())].into_iter().collect(),
            first_token: HopValues { window: Some(2.1), baseline: Some(0.2) },
            hops: vec![hop("router", Some(1.8), Some(0.01)), hop("engine-queue", Some(0.05), None), hop("kv-transfer", None, None)],
            grew: grew.map(str::to_string),
            text: "first token +1.9 s (200 ms -> 2.1 s): +1.79 s at the router, engine hops unchanged".into(),
        }
    }

    #[test]
    fn the_compact_block_lists_only_the_scopes_where_a_hop_grew_and_the_verbose_one_every_scope() {
        let mut report = crate::render::fixtures::sample_report();
        report.hops = vec![split("org/a", Some("router")), split("org/b", None)];
        let all = views(&report, &ScopeStyle::for_report(&report));
        let compact = compact_lines(&all);
        assert_eq!(compact.len(), 2, "{compact:?}");
        let a = ScopeStyle::for_report(&report).compact(&report.hops[0].scope);
        assert_eq!(compact[1], format!("{a}: {}", report.hops[0].text));
        let (_, scopes) = table_lines(&all).expect("a block");
        assert_eq!(scopes.len(), 2);
        assert!(scopes[0].0.contains("router 1.8 s (10 ms) · engine queue 50 ms (no baseline); not seen: kv-transfer"), "{:?}", scopes[0]);
        assert_eq!(all[0].brief.as_deref(), Some("router +1.79 s (10 ms -> 1.8 s)"));
        assert_eq!(all[1].brief, None);
        report.hops = vec![split("org/b", None)];
        assert!(compact_lines(&views(&report, &ScopeStyle::for_report(&report))).is_empty());
        report.hops.clear();
        assert!(table_lines(&views(&report, &ScopeStyle::for_report(&report))).is_none());
    }
}
