//! The findings' facts that reach people as sentences, worded here once from their types (the JSON
//! keeps each sentence in its `text` field): the change a finding followed, why one replica
//! differs from its peers, a replica's cold start, two trends that moved together and the time by
//! hop. A finding's steps are worded beside their types, in `steps.rs`.

use chrono::{DateTime, Utc};

use super::{ColdStart, Correlation, Event, HopSplit, LimitKind, PrecededBy, ReplicaCause, ReplicaCauseKind, KV_CEILING, PREFILL_FILLED, STALL_TOKENS};
use crate::units::sig;

impl PrecededBy {
    /// A finding's tie to the change it followed, worded here once: `began 2 min after a
    /// configuration change at 09:01:00 UTC: ...`, or for a problem there from the window's start
    /// (`from_start`, the window's start), `was there from the window's start at 09:00:00 UTC, 2 min
    /// after ...`.
    pub fn new(event: Event, lead_seconds: i64, from_start: Option<DateTime<Utc>>) -> PrecededBy {
        let clock = |t: &DateTime<Utc>| t.format("%H:%M:%S UTC").to_string();
        let lead = match lead_seconds {
            l if l < 60 => "right after".to_string(),
            l if l < 3600 => format!("{} min after", (l + 30) / 60),
            l => format!("{} h {} min after", l / 3600, (l % 3600 + 30) / 60),
        };
        let after = format!("{lead} {} at {}: {}", event.kind.phrase(), clock(&event.time), event.detail);
        let text = match from_start {
            None => format!("began {after}"),
            Some(start) => format!("was there from the window's start at {}, {after}", clock(&start)),
        };
        PrecededBy { event, lead_seconds, text }
    }
}

impl ReplicaCause {
    /// `load: a runs 25 requests at once against 8.5 on its peers (median), ...`, from its fields.
    pub fn words(&self) -> String {
        let (replica, running, peers) = (&self.replica, self.running.unwrap_or_default(), self.peers_running.unwrap_or_default());
        match self.kind {
            ReplicaCauseKind::Load => format!(
                "load: {replica} runs {} requests at once against {} on its peers (median), and its P95 ITL is {:.1}x theirs: it decodes a larger batch, not a faulty one",
                sig(running),
                sig(peers),
                self.itl_factor.unwrap_or_default()
            ),
            ReplicaCauseKind::Config => {
                let cap = self.value.unwrap_or_default();
                format!(
                    "config: {} {} on {replica}, {}{} on its peers: its running batch is held at {} with {} waiting while its peers run more",
                    self.setting.as_deref().unwrap_or("max_num_seqs"),
                    sig(cap),
                    if self.peers_capped { "" } else { "at least " },
                    sig(self.peers_value.unwrap_or_default()),
                    sig(cap),
                    sig(self.waiting.unwrap_or_default())
                )
            }
            ReplicaCauseKind::Hardware => format!(
                "hardware: neither its load ({} running against {} on its peers) nor a limit of its own explains it: the replica itself (its GPU or node) is the suspect",
                sig(running),
                sig(peers)
            ),
        }
    }
}

/// `09:01:00 UTC`.
fn clock(t: &DateTime<Utc>) -> String {
    t.format("%H:%M:%S UTC").to_string()
}

/// `45 s`, `4 min`.
fn minutes(seconds: i64) -> String {
    if seconds < 90 {
        format!("{seconds} s")
    } else {
        format!("{} min", (seconds + 30) / 60)
    }
}

impl ColdStart {
    /// A cold start: slow no longer than a warm-up may last. Past it, a regression tied to the start.
    pub fn is_cold(&self) -> bool {
        self.warm_up_seconds <= self.limit_seconds
    }

    /// With its `text` worded from its fields.
    pub fn worded(mut self) -> ColdStart {
        self.text = self.words();
        self
    }

    /// `cold start: b (re)started at 09:01:00 UTC and was slow for its first 4 min (TTFT up to 3.1x
    /// its peers), then as fast as its peers`, or still under way, or not a cold start.
    pub fn words(&self) -> String {
        let (pt, pi) = (self.peak_ttft_ratio, self.peak_itl_ratio);
        let against = if self.against_peers { "its peers" } else { "its own level before" };
        let how = match (pt >= self.slow_factor, pi >= self.slow_factor) {
            (true, true) => format!("TTFT up to {pt:.1}x and ITL up to {pi:.1}x {against}"),
            (true, false) => format!("TTFT up to {pt:.1}x {against}"),
            _ => format!("ITL up to {pi:.1}x {against}"),
        };
        let (replica, started, took, limit) = (&self.replica, clock(&self.started), minutes(self.warm_up_seconds), minutes(self.limit_seconds));
        match (self.is_cold(), self.warm) {
            (true, Some(_)) => format!(
                "cold start: {replica} (re)started at {started} and was slow for its first {took} ({how}), then as fast as {}",
                if self.against_peers { "its peers" } else { "before" }
            ),
            (true, None) => format!(
                "cold start under way: {replica} (re)started at {started} and was still slow at the window's end, {took} later ({how}); past {limit} it would be a regression"
            ),
            (false, _) => format!(
                "not a cold start: {replica} (re)started at {started} and stayed slow for {took} or more ({how}), longer than a warm-up ({limit})"
            ),
        }
    }

    /// A finding's summary once this cold start explains it.
    pub fn not_a_regression(&self, summary: &str) -> String {
        format!("{summary} Not a regression: {}.", self.text)
    }
}

/// The pairs of signals whose trends are compared, cause first, with what their moving together
/// means.
pub const PAIRS: &[(&str, &str, &str)] = &[
    ("kv_usage_avg", "ttft_p95", "KV-cache usage and P95 TTFT moved together: KV pressure is raising TTFT"),
    ("waiting_avg", "ttft_p95", "waiting requests and P95 TTFT moved together: queueing is raising TTFT"),
    ("prompt_tokens_rate", "itl_p95", "prompt throughput and P95 ITL moved together: prefills interleaved with decode are slowing it"),
];

impl Correlation {
    /// With its `text` worded from its fields; `rule` is the finding it is evidence for.
    pub fn worded(mut self, rule: &str) -> Correlation {
        self.text = self.words(rule);
        self
    }

    /// `KV-cache usage and P95 TTFT moved together: KV pressure is raising TTFT (r = 0.93 over 40
    /// points)`, and where the finding reads only the effect, why that puts its cause in doubt.
    pub fn words(&self, rule: &str) -> String {
        let meaning = PAIRS.iter().find(|(c, e, _)| *c == self.cause && *e == self.effect).map_or("two trends moved together", |(_, _, m)| m);
        let (r, n) = (self.coefficient, self.points);
        if self.supports {
            format!("{meaning} (r = {r:.2} over {n} points)")
        } else {
            format!("{meaning} (r = {r:.2} over {n} points): a reason to doubt that {rule} is the cause")
        }
    }
}

/// Seconds as the text says them, floating-point dust (a remainder of `1e-12` s) read as 0.
pub fn hop_seconds(v: f64) -> String {
    crate::units::format_seconds(if v.abs() < 5e-7 { 0.0 } else { v })
}

fn signed(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", hop_seconds(v))
    } else {
        format!("-{}", hop_seconds(-v))
    }
}

/// Where time went, by hop id.
fn where_(hop: &str) -> &'static str {
    match hop {
        "router" => "at the router",
        "input-processing" => "before the engine (input processing)",
        "engine-queue" => "in the engine's queue",
        "kv-transfer" => "in the KV transfer",
        "prefill" => "in prefill",
        "decode" => "in decode",
        _ => "elsewhere",
    }
}

impl HopSplit {
    /// With its `text` worded from its fields.
    pub fn worded(mut self) -> HopSplit {
        self.text = self.words();
        self
    }

    /// `first token +1.9 s (200 ms -> 2.1 s): +1.7 s at the router, engine hops unchanged; not seen:
    /// KV transfer`.
    pub fn words(&self) -> String {
        let ft = match (self.first_token.window, self.first_token.baseline) {
            (Some(w), Some(b)) => format!("first token {} ({} -> {})", signed(w - b), hop_seconds(b), hop_seconds(w)),
            (Some(w), None) => format!("first token {} (no baseline)", hop_seconds(w)),
            _ => "first token not measured".to_string(),
        };
        let grown: Vec<(&str, f64)> = self.hops.iter().filter_map(|h| Some((h.hop.as_str(), h.grew_by()?))).collect();
        let mut text = match self.grew.as_deref() {
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
        let unseen: Vec<&str> = self.hops.iter().filter(|h| !h.seen && h.hop != "kv-transfer").map(|h| h.hop.as_str()).collect();
        if !unseen.is_empty() {
            text.push_str(&format!("; not seen: {}", unseen.join(", ")));
        }
        text
    }
}

/// How a binding limit was recognised: `max_num_seqs inferred as 8: the running batch's observed
/// plateau, held with requests waiting and KV headroom`. `running_cap` and `token_budget` are the
/// plateaus read, `by_reason` whether the waiting-by-reason gauge was there.
pub fn limit_basis(limit: LimitKind, running_cap: Option<f64>, token_budget: Option<f64>, by_reason: bool) -> String {
    match limit {
        LimitKind::KvCache => format!("KV-cache usage at or above {:.0}% (vllm:kv_cache_usage_perc) with requests waiting, or preemptions (vllm:num_preemptions_total)", KV_CEILING * 100.0),
        LimitKind::MaxNumSeqs => match running_cap {
            Some(cap) => format!("max_num_seqs inferred as {cap}: the running batch's observed plateau, held with requests waiting and KV headroom"),
            None => "the running batch's observed plateau".to_string(),
        },
        LimitKind::MaxNumBatchedTokens => match token_budget {
            Some(b) => format!(
                "max_num_batched_tokens inferred as about {b:.0} tokens per engine step: the plateau of vllm:iteration_tokens_total's mean per step (sum over count), held with requests waiting while prompt tokens filled at least {:.0}% of each step",
                PREFILL_FILLED * 100.0
            ),
            None => "engine steps at the token budget".to_string(),
        },
        LimitKind::Deferred if by_reason => "requests waiting with reason=\"deferred\" (vllm:num_requests_waiting_by_reason), or waiting while every cap had room".to_string(),
        LimitKind::Deferred => "requests waiting while running, KV cache and token budget all had room (no waiting-by-reason gauge to say why)".to_string(),
        LimitKind::Stalled => format!("requests running or waiting while fewer than {STALL_TOKENS} generated tokens per second came out (vllm:generation_tokens_total)"),
        LimitKind::None => "no request waited".to_string(),
    }
}

/// A rule judged healthy on `scopes` while its caveat's condition held there, with the caveat's
/// text from the rule file.
pub fn caveat_words(rule: &str, scopes: &[String], caveat: &str) -> String {
    format!("{rule} was judged healthy for {}, but {caveat}", scopes.join(", "))
}
