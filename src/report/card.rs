//! The facts behind an advice card and a lever ruled out: what each was sized or decided from, with
//! its numbers. `recommend` decides them; `words.rs` turns them into a [`Recommendation`] or a
//! [`WontHelp`] (the JSON's sentences) in one place.
//!
//! [`Recommendation`]: super::Recommendation
//! [`WontHelp`]: super::WontHelp

use serde::{Deserialize, Serialize};

/// Share of the KV cache a card plans to fill, leaving room for bursts and long tails.
pub const HEADROOM: f64 = 0.9;

/// The replicas a finding's cards are sized from, when they are not all of the model's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SizedOn {
    /// By the replica label.
    pub replicas: Vec<String>,
    /// How many replicas the model has.
    pub of: usize,
    /// Requests waiting on each of them (the median over the window's steps, averaged).
    pub waiting: f64,
}

/// A card: what it was sized from, and how sure the data is of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    pub facts: CardFacts,
    pub confidence: Sureness,
}

/// The numbers behind one card, by kind of card.
#[derive(Debug, Clone, PartialEq)]
pub enum CardFacts {
    /// max_num_seqs sized to what the KV cache holds: measured from the running batch, from the
    /// cache configuration, or both (`value` is the smaller where they are both read).
    SeqsForKv { measured: Option<SeqsMeasured>, config: Option<SeqsFromConfig>, value: f64 },
    /// Chunked prefill with a step budget of one decode token per running sequence plus a prompt.
    ChunkedPrefill { running: f64, prompt: f64, raw: f64, budget: u64 },
    /// A KV cache large enough for every request in flight.
    KvBlocks {
        sized_on: Option<SizedOn>,
        running: f64,
        waiting: f64,
        /// Blocks per sequence the size rests on: the larger of `footprint`'s two.
        per_seq: f64,
        blocks: f64,
        needed: f64,
        footprint: Footprint,
    },
    /// Enough replicas for the requests in flight at what one replica held at its limit.
    Replicas { sized_on: Option<Vec<String>>, running: f64, waiting: f64, per_replica: f64, raw: f64, now: f64, to: f64 },
    /// A higher max_num_seqs where the cap bound with KV room, from the running plateau.
    MoreSeqs { per_replica: f64, fill: f64, plateau: f64, kv_peak: f64, fit: f64, config: Option<ConfigFit>, to: f64 },
    /// A smaller step budget where prefill shares the steps with decode.
    StepBudget { itl_factor: f64, prompt_factor: f64, kv_peak: f64, running: f64, raw: f64, budget: u64, step_tokens: Option<f64> },
    /// One replica's sequence cap aligned with its peers'.
    Align { replica: String, cap: f64, waiting: f64, peers: f64, peers_capped: bool },
}

/// max_num_seqs from the running batch and the share of the cache it used.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqsMeasured {
    pub sized_on: Option<SizedOn>,
    pub running: f64,
    pub kv_used: f64,
    pub seqs: f64,
}

/// max_num_seqs from vllm:cache_config_info and the mean request length.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqsFromConfig {
    pub blocks: f64,
    pub block_size: f64,
    pub prompt: f64,
    pub output: f64,
    pub per_seq: f64,
    pub seqs: f64,
}

/// What the cache configuration fits at full length, beside a plateau-sized max_num_seqs.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFit {
    pub blocks: f64,
    pub per_seq: f64,
    pub fits: f64,
}

/// A sequence's KV footprint, as measured and, where the lengths were read, at full length.
#[derive(Debug, Clone, PartialEq)]
pub struct Footprint {
    pub measured: f64,
    pub used: f64,
    pub blocks: f64,
    pub running: f64,
    /// Blocks at full length, with the lengths and block size it came from, where larger than
    /// the measured footprint.
    pub full: Option<FullLength>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FullLength {
    pub blocks: f64,
    pub prompt: f64,
    pub output: f64,
    pub block_size: f64,
}

/// How sure the data is of a card: the read that decided its level, over the whole window and
/// over its last minutes, and a doubt that lowered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sureness {
    pub level: ConfidenceLevel,
    pub read: SurenessRead,
    pub doubt: Option<Doubt>,
}

/// The read behind a card's confidence; `whole` and `recent` are `None` where not read.
#[derive(Debug, Clone, PartialEq)]
pub enum SurenessRead {
    /// Share of time preempting (0..1).
    Preempting { whole: Option<f64>, recent: Option<f64> },
    /// Requests waiting on average.
    Waiting { whole: Option<f64>, recent: Option<f64> },
    /// P95 inter-token latency over its baseline; both `None` where the baseline was not read.
    ItlRise { whole: Option<f64>, recent: Option<f64> },
    /// The sequence cap binds on this replica and not on its peers.
    BindsOnlyOn { replica: String },
}

/// Why a card is one level less sure than its window alone would make it.
#[derive(Debug, Clone, PartialEq)]
pub enum Doubt {
    /// The measured and configured sizes differ by half or more.
    SizesDiffer { measured: f64, configured: f64 },
    /// A sequence at full length needs far more blocks than measured.
    FullLength { full: f64, measured: f64 },
}

/// A lever the evidence rules out, with the readings that rule it out.
#[derive(Debug, Clone, PartialEq)]
pub enum RuledOut {
    /// More KV memory: the cache never passed `room`.
    KvMemory { peak: f64, room: f64 },
    /// A lower max_num_seqs: the cap did not bind (by the binding, or by the running batch's
    /// average `fill` of its peak where the binding was not read) and the KV cache had room.
    LowerSeqs { kv_peak: f64, fill: Option<f64> },
    /// A quantised KV cache: requests waited while the cache had room.
    QuantisedKv { waiting: f64, kv_peak: f64 },
}

impl RuledOut {
    /// The engine flags of the lever, as its steps name them (`--max-num-seqs`).
    pub fn flags(&self) -> &'static [&'static str] {
        match self {
            RuledOut::KvMemory { .. } => &["--gpu-memory-utilization", "--kv-cache-memory-bytes"],
            RuledOut::LowerSeqs { .. } => &["--max-num-seqs"],
            RuledOut::QuantisedKv { .. } => &["--kv-cache-dtype fp8"],
        }
    }
}

/// An experiment card: a setting that is the lever, from what to what, computed from the window
/// with its arithmetic, its trade-off and how far the window's last minutes bear it out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// The engine setting, e.g. `max_num_seqs`.
    pub setting: String,
    pub value: String,
    /// How the value was computed, with the numbers used.
    pub arithmetic: String,
    pub caveat: String,
    /// The command-line flag (or `replicas`), e.g. `--max-num-seqs`.
    #[serde(default)]
    pub flag: String,
    /// Its current value as the data shows it, or `unknown` (vLLM does not export every setting).
    #[serde(default)]
    pub from: String,
    /// The value to try (`value`, with its unit where it has one).
    #[serde(default)]
    pub to: String,
    /// What the change costs, in one line.
    #[serde(default)]
    pub tradeoff: String,
    #[serde(default)]
    pub confidence: Confidence,
}

/// Whether the whole window and its last minutes agree on what the card is sized from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confidence {
    /// `high` (both agree), `medium` (only one of them could be read or showed it, the last minutes
    /// being the one that did), `low` (the whole window showed it, its last minutes no longer did).
    pub level: ConfidenceLevel,
    /// The reads behind the level, e.g. `preemptions in 96.8% of the window and 100% of its last 5 min`.
    pub basis: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfidenceLevel {
    High,
    #[default]
    Medium,
    Low,
}

impl ConfidenceLevel {
    pub fn as_str(&self) -> &'static str {
        match self {
            ConfidenceLevel::High => "high",
            ConfidenceLevel::Medium => "medium",
            ConfidenceLevel::Low => "low",
        }
    }
}

/// A lever the evidence rules out, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WontHelp {
    /// What would not help, e.g. `more KV memory`.
    pub lever: String,
    /// The flag it would be, e.g. `--gpu-memory-utilization`.
    pub flag: String,
    /// The reading that rules it out, with its numbers.
    pub why: String,
    /// The readings it was worded from (absent in a report read back from JSON).
    #[serde(skip)]
    pub ruled: Option<RuledOut>,
}

/// Equal when they read the same: a report read back from JSON has the words, not the readings.
impl PartialEq for WontHelp {
    fn eq(&self, other: &WontHelp) -> bool {
        (&self.lever, &self.flag, &self.why) == (&other.lever, &other.flag, &other.why)
    }
}
