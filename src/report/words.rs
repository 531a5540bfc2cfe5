//! The findings' facts that reach people as sentences, worded here once from their types (the JSON
//! keeps each sentence in its `text` field): the change a finding followed, why one replica
//! differs from its peers, a replica's cold start, two trends that moved together and the time by
//! hop. A finding's steps are worded beside their types, in `steps.rs`.

use chrono::{DateTime, Utc};

use super::card::{Card, CardFacts, ConfigFit, Doubt, Footprint, RuledOut, SeqsFromConfig, SeqsMeasured, SizedOn, Sureness, SurenessRead, HEADROOM};
use super::{
    Binding, BindingState, ColdStart, Confidence, Correlation, Event, HopSplit, LimitKind, PrecededBy, Recommendation, ReplicaCause, ReplicaCauseKind,
    Replicas, Unread, WontHelp, KV_CEILING, PREFILL_FILLED, STALL_TOKENS,
};
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

impl ReplicaCauseKind {
    /// The title of a finding about one replica once its cause is known; the hardware cause keeps
    /// the rule's own.
    pub fn title(self) -> Option<&'static str> {
        match self {
            ReplicaCauseKind::Load => Some("One replica runs a larger batch than its peers (load, not a bad replica)"),
            ReplicaCauseKind::Config => Some("One replica is held by a lower max_num_seqs than its peers"),
            ReplicaCauseKind::Hardware => None,
        }
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

impl Correlation {
    /// With its `text` worded from its fields; `rule` is the finding it is evidence for, `meaning`
    /// what the pair's moving together means (the pack's `[[correlation]]`).
    pub fn worded(mut self, rule: &str, meaning: &str) -> Correlation {
        self.text = self.words(rule, meaning);
        self
    }

    /// `KV-cache usage and P95 TTFT moved together: KV pressure is raising TTFT (r = 0.93 over 40
    /// points)`, and where the finding reads only the effect, why that puts its cause in doubt.
    pub fn words(&self, rule: &str, meaning: &str) -> String {
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

/// `12%`, from a share (0..1).
fn pct(v: f64) -> String {
    format!("{}%", sig(v * 100.0))
}

/// `on 127.0.0.1:8000 (1 of 2 replicas, the one the finding is about): `, or nothing where a card
/// is sized from every replica.
fn on(sized_on: Option<&SizedOn>) -> String {
    match sized_on {
        Some(s) if s.replicas.len() == 1 => format!("on {} (1 of {} replicas, the one the finding is about): ", s.replicas[0], s.of),
        Some(s) => format!("on {} ({} of {} replicas, the ones the finding is about): ", s.replicas.join(", "), s.replicas.len(), s.of),
        None => String::new(),
    }
}

const WITH_CHUNKED: &str = "(with --enable-chunked-prefill)";

impl From<Card> for Recommendation {
    /// A card worded from its facts: the arithmetic with every number used, the flag from what
    /// the data shows to the value computed, the trade-off, the caveat and the confidence's basis.
    fn from(card: Card) -> Recommendation {
        let confidence = Confidence { level: card.confidence.level, basis: card.confidence.words() };
        let unknown = || "unknown".to_string();
        let worded = match card.facts {
            CardFacts::SeqsForKv { measured, config, value } => make(
                "max_num_seqs",
                format!("{}", value as u64),
                seqs_for_kv(measured.as_ref(), config.as_ref()),
                "a starting point for a load test: long-tail requests need more blocks than the average",
                "--max-num-seqs",
                // vLLM does not export the cap; a batch squeezed by the KV cache runs below it.
                unknown(),
                format!("{}", value as u64),
                "fewer sequences at once: no preemptions, but each replica admits less and the queue takes the rest",
            ),
            CardFacts::ChunkedPrefill { running, prompt, raw, budget } => make(
                "enable_chunked_prefill=true, max_num_batched_tokens",
                format!("{budget}"),
                format!(
                    "{} running sequences per replica (one decode token each) + {} tokens of an average prompt = {} tokens per step, rounded up to a power of two within 512..8192 = {budget}",
                    sig(running),
                    sig(prompt),
                    sig(raw)
                ),
                "smaller budgets favour inter-token latency, larger ones throughput; load-test both directions",
                "--max-num-batched-tokens",
                unknown(),
                format!("{budget} {WITH_CHUNKED}"),
                "prompts are prefilled in chunks between decode steps: first tokens come sooner under long decodes, long prompts take more steps",
            ),
            CardFacts::KvBlocks { sized_on, running, waiting, per_seq, blocks, needed, footprint } => make(
                "KV cache (blocks per replica)",
                sig(needed),
                format!(
                    "{}({} running + {} waiting requests per replica) x {} blocks per sequence / {} headroom = {} blocks, {}x the {} blocks now; {}",
                    on(sized_on.as_ref()),
                    sig(running),
                    sig(waiting),
                    sig(per_seq),
                    pct(HEADROOM),
                    sig(needed),
                    sig(needed / blocks),
                    sig(blocks),
                    footprint.words()
                ),
                "the blocks grow with the memory given to the KV cache, not with gpu_memory_utilization as a whole: the weights and activations stay; check peak memory",
                &RuledOut::KvMemory { peak: 0.0, room: 0.0 }.flags().join(" / "),
                format!("{} blocks", sig(blocks)),
                format!("{} blocks ({}x)", sig(needed), sig(needed / blocks)),
                "memory for the KV cache is taken from activations and CUDA graphs, or bought with larger GPUs; an fp8 KV cache doubles the blocks at some accuracy risk",
            ),
            CardFacts::StepBudget { itl_factor, prompt_factor, kv_peak, running, raw, budget, step_tokens } => make(
                "max_num_batched_tokens",
                format!("{budget}"),
                format!(
                    "P95 inter-token latency {}x the baseline while prompt tokens per second rose {}x and the KV cache had room (peak {}): prefill shares the steps; {} running sequences per replica (one decode token each) + a 512-token prefill chunk = {} tokens per step, rounded up to a power of two within 512..8192 = {budget}{}",
                    sig(itl_factor),
                    sig(prompt_factor),
                    pct(kv_peak),
                    sig(running),
                    sig(raw),
                    step_tokens.map(|b| format!("; steps averaged {} tokens", sig(b))).unwrap_or_default()
                ),
                "the current budget is not exported: compare with the engine's flags before changing it",
                "--max-num-batched-tokens",
                unknown(),
                format!("{budget} {WITH_CHUNKED}"),
                "smaller prefill chunks per step: steadier inter-token latency, later first tokens for long prompts",
            ),
            CardFacts::Replicas { sized_on, running, waiting, per_replica, raw, now, to } => replicas_card(sized_on, running, waiting, per_replica, raw, now, to),
            CardFacts::MoreSeqs { per_replica, fill, plateau, kv_peak, fit, config, to } => more_seqs_card(per_replica, fill, plateau, kv_peak, fit, config, to),
            CardFacts::Align { replica, cap, waiting, peers, peers_capped } => align_card(&replica, cap, waiting, peers, peers_capped),
        };
        Recommendation { confidence, ..worded }
    }
}

/// A card's words before its confidence: the setting, the value, the arithmetic and the rest.
// One argument per field of a card's words, in the order the card reads.
#[allow(clippy::too_many_arguments)]
fn make(setting: &str, value: String, arithmetic: String, caveat: &str, flag: &str, from: String, to: String, tradeoff: &str) -> Recommendation {
    Recommendation {
        setting: setting.into(),
        value,
        arithmetic,
        caveat: caveat.into(),
        flag: flag.into(),
        from,
        to,
        tradeoff: tradeoff.into(),
        confidence: Confidence::default(),
    }
}

fn replicas_card(sized_on: Option<Vec<String>>, running: f64, waiting: f64, per_replica: f64, raw: f64, now: f64, to: f64) -> Recommendation {
    let offered = running + waiting;
    let which = sized_on.map(|r| format!(" ({})", r.join(", "))).unwrap_or_default();
    make(
            "replicas",
            sig(to),
            format!(
                "offered load: {} running + {} waiting = {} requests in flight over the model's replicas; one replica held {} at its limit{which}: {} / ({} x {} headroom) = {} -> {} replicas",
                sig(running),
                sig(waiting),
                sig(offered),
                sig(per_replica),
                sig(offered),
                sig(per_replica),
                pct(HEADROOM),
                sig(raw),
                sig(to)
            ),
            "requests in flight stand for offered load at today's latency (Little's law); a queue still growing at the window's end means more",
            "replicas",
            sig(now),
            sig(to),
            "cost grows with the replicas; the queue goes, but each request is no faster than the baseline's",
        )
}

fn more_seqs_card(per_replica: f64, fill: f64, plateau: f64, kv_peak: f64, fit: f64, config: Option<ConfigFit>, to: f64) -> Recommendation {
    let cross = config
        .map(|c| {
            let smaller = if c.fits < fit { ", the smaller" } else { "" };
            format!(
                "; vllm:cache_config_info: {} blocks x {} / {} blocks per full-length sequence = {}{smaller}",
                sig(c.blocks),
                pct(HEADROOM),
                sig(c.per_seq),
                sig(c.fits)
            )
        })
        .unwrap_or_default();
    make(
            "max_num_seqs",
            sig(to),
            format!(
                "running requests averaged {} per replica, {} of their peak: pinned at about {} (the cap); at that plateau KV-cache usage peaked at {}: {} x {} headroom / {} = {} sequences per replica{cross}",
                sig(per_replica),
                pct(fill),
                sig(plateau),
                pct(kv_peak),
                sig(plateau),
                pct(HEADROOM),
                pct(kv_peak),
                sig(fit)
            ),
            "a starting point for a load test: watch preemptions and inter-token latency as the batch grows",
            "--max-num-seqs",
            format!("{} (the running plateau)", sig(plateau)),
            sig(to),
            "a larger batch: more throughput per replica, each decode step slower (inter-token latency up)",
        )
}

fn align_card(replica: &str, cap: f64, waiting: f64, peers: f64, peers_capped: bool) -> Recommendation {
    let to = sig(peers.round());
    let arithmetic = if peers_capped {
        format!(
            "{replica}'s running batch held at {} with {} waiting; its peers' held at {}: the same flag, as on its peers",
            sig(cap),
            sig(waiting),
            sig(peers)
        )
    } else {
        format!(
                "{replica}'s running batch held at {} with {} waiting; its peers ran {} at once without meeting a cap, so theirs is at least {}: use the peers' configured value",
                sig(cap),
                sig(waiting),
                sig(peers),
                sig(peers)
            )
    };
    make(
        "max_num_seqs",
        to.clone(),
        arithmetic,
        "vLLM does not export max_num_seqs: both values are the running batch's observed plateaus; check the deployments' --max-num-seqs",
        "--max-num-seqs",
        sig(cap),
        if peers_capped { to } else { format!("{to} or more (the peers' value)") },
        "more requests decode at once on that replica: its queue empties, its ITL rises toward its peers'",
    )
}

/// The arithmetic of a KV-sized max_num_seqs: the measured footprint cross-checked with the cache
/// configuration, or the configuration where more would seem to fit than full-length sequences do.
fn seqs_for_kv(measured: Option<&SeqsMeasured>, config: Option<&SeqsFromConfig>) -> String {
    let ct = |c: &SeqsFromConfig| {
        format!(
            "{} GPU blocks x {} headroom / ceil(({} prompt + {} output tokens) / {} tokens per block = {} blocks per sequence) = {} sequences per replica",
            sig(c.blocks),
            pct(HEADROOM),
            sig(c.prompt),
            sig(c.output),
            sig(c.block_size),
            sig(c.per_seq),
            sig(c.seqs)
        )
    };
    let mt = |m: &SeqsMeasured| {
        format!(
            "{}{} running sequences per replica used {} of the KV cache on average: {} x {} headroom / {} = {} sequences per replica",
            on(m.sized_on.as_ref()),
            sig(m.running),
            pct(m.kv_used),
            sig(m.running),
            pct(HEADROOM),
            pct(m.kv_used),
            sig(m.seqs)
        )
    };
    match (measured, config) {
        (Some(m), Some(c)) if c.seqs < m.seqs => format!(
            "{}. Measured, more would seem to fit ({} sequences per replica), but sequences are measured part-way through their outputs: {} of them at full length would not fit in {} of the cache",
            ct(c),
            sig(m.seqs),
            sig(m.seqs),
            pct(HEADROOM)
        ),
        (Some(m), Some(c)) => {
            let note = if c.seqs > m.seqs * 1.5 {
                "; the gap means real sequences are much longer than the average request (long tails, n > 1, or blocks not freed)"
            } else {
                ""
            };
            format!("{}. Cross-check from vllm:cache_config_info: {}{note}", mt(m), ct(c))
        }
        (Some(m), None) => mt(m),
        (None, Some(c)) => ct(c),
        (None, None) => String::new(),
    }
}

impl Footprint {
    /// `89.8 blocks each as measured (96.7% of 1578 blocks over 17 running sequences)`, or the
    /// full-length footprint where it is larger.
    fn words(&self) -> String {
        match &self.full {
            Some(f) => format!(
                "{} blocks each at full length (ceil(({} prompt + {} output tokens) / {} tokens per block)), more than the {} measured ({} of {} blocks over {} running)",
                sig(f.blocks),
                sig(f.prompt),
                sig(f.output),
                sig(f.block_size),
                sig(self.measured),
                pct(self.used),
                sig(self.blocks),
                sig(self.running)
            ),
            None => format!(
                "{} blocks each as measured ({} of {} blocks over {} running sequences)",
                sig(self.measured),
                pct(self.used),
                sig(self.blocks),
                sig(self.running)
            ),
        }
    }
}

impl Sureness {
    /// `share of time preempting: 96.8% over the window and 100% over its last 5 min`, and the doubt
    /// that lowered the level after a semicolon.
    pub fn words(&self) -> String {
        let both = |what: &str, w: Option<String>, r: Option<String>| match (w, r) {
            (Some(w), Some(r)) => format!("{what}: {w} over the window and {r} over its last 5 min"),
            (Some(w), None) => format!("{what}: {w} over the window; its last 5 min were not read"),
            (None, Some(r)) => format!("{what}: {r} over the window's last 5 min; the whole window was not read"),
            (None, None) => format!("{what}: not read"),
        };
        let times = |x: f64| format!("{}x", sig(x));
        let basis = match &self.read {
            SurenessRead::Preempting { whole, recent } => both("share of time preempting", whole.map(pct), recent.map(pct)),
            SurenessRead::Waiting { whole, recent } => both("requests waiting on average", whole.map(sig), recent.map(sig)),
            SurenessRead::ItlRise { whole, recent } => both("P95 inter-token latency against the baseline", whole.map(times), recent.map(times)),
            SurenessRead::BindsOnlyOn { replica } => format!("max_num_seqs binds on {replica} and not on its peers"),
        };
        match &self.doubt {
            None => basis,
            Some(Doubt::SizesDiffer { measured, configured }) => format!(
                "{basis}; measured ({}) and configured ({}) sizes differ by {}x",
                sig(*measured),
                sig(*configured),
                sig(measured.max(*configured) / measured.min(*configured).max(1.0))
            ),
            Some(Doubt::FullLength { full, measured }) => {
                format!("{basis}; a sequence needs {} blocks at full length against {} measured", sig(*full), sig(*measured))
            }
        }
    }
}

impl From<RuledOut> for WontHelp {
    /// A lever ruled out, worded from the readings that rule it out.
    fn from(ruled: RuledOut) -> WontHelp {
        let (lever, why) = match &ruled {
            RuledOut::KvMemory { peak, room } => ("more KV memory", format!("KV-cache usage peaked at {}, never past {}", pct(*peak), pct(*room))),
            RuledOut::LowerSeqs { kv_peak, fill: None } => {
                ("a lower max_num_seqs", format!("the sequence cap did not bind, and the KV cache had room (peak {})", pct(*kv_peak)))
            }
            RuledOut::LowerSeqs { kv_peak, fill: Some(fill) } => (
                "a lower max_num_seqs",
                format!(
                    "the sequence cap did not bind: running requests averaged {} of their peak, and the KV cache had room (peak {})",
                    pct(*fill),
                    pct(*kv_peak)
                ),
            ),
            RuledOut::QuantisedKv { waiting, kv_peak } => (
                "a quantised KV cache",
                format!("{} requests waited on average while KV-cache usage peaked at {}: they were not waiting for KV blocks", sig(*waiting), pct(*kv_peak)),
            ),
        };
        WontHelp { lever: lever.into(), flag: ruled.flags().join(" / "), why, ruled: Some(ruled) }
    }
}

impl Replicas {
    /// A breakdown that could not be made: no replica named affected, and why, in words.
    pub fn unread(label: &str, signal: &str, why: Unread) -> Replicas {
        let why = match why {
            Unread::NotAVector => "the per-replica answer was not a vector".to_string(),
            Unread::Failed(reason) => format!("the per-replica answer could not be read: {reason}"),
            Unread::NotAnswered => "the per-replica query was not answered".to_string(),
        };
        Replicas { label: label.to_string(), affected: Vec::new(), total: 0, signal: signal.to_string(), limit: String::new(), not_evaluated: Some(why) }
    }
}

impl Binding {
    /// "Bound by max_num_seqs for 82% of the window; a typical step: 32 of 32 running, KV at 41%,
    /// 45 waiting" (the medians over the steps it held).
    pub fn text(&self) -> String {
        binding_words(self.limit, self.share, self.typical.as_ref())
    }
}

/// The binding in words, from its limit, share and typical step (see [`Binding::text`]).
pub(super) fn binding_words(limit: LimitKind, share: f64, typical: Option<&BindingState>) -> String {
    use LimitKind as L;
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let n = |x: f64| if (x - x.round()).abs() < 0.05 { format!("{}", x.round()) } else { format!("{x:.1}") };
    let share = pct(share);
    let head = match limit {
        L::MaxNumSeqs => format!("Bound by max_num_seqs for {share} of the window"),
        L::KvCache => format!("Bound by the KV cache for {share} of the window"),
        L::MaxNumBatchedTokens => format!("Bound by max_num_batched_tokens for {share} of the window: engine steps at the token budget"),
        L::Deferred => format!("Requests deferred (waiting, not for capacity) for {share} of the window"),
        L::Stalled => format!("Stalled for {share} of the window"),
        L::None => return "No limit bound: no request waited in the window".to_string(),
    };
    let Some(t) = typical else { return head };
    let kv = t.kv_usage.map(|k| format!("KV at {}", pct(k)));
    let running = match t.running_cap {
        Some(cap) => format!("{} of {} running", n(t.running), n(cap)),
        None => format!("{} running", n(t.running)),
    };
    let waiting = Some(format!("{} waiting", n(t.waiting)));
    let parts = match limit {
        // The batch's plateau under KV pressure is the cache's doing, not a cap: the count alone.
        L::KvCache => vec![kv, Some(format!("{} running", n(t.running))), waiting],
        L::Stalled => vec![Some(running), waiting, Some("no tokens generated".to_string())],
        _ => vec![Some(running), kv, waiting],
    };
    format!("{head}; a typical step: {}", parts.into_iter().flatten().collect::<Vec<_>>().join(", "))
}
