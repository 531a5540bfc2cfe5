//! What a model's servers look like in each state, as one table of numbers.
//!
//! Every incident kind is a [`StateParams`] value: multipliers and ranges applied to the healthy
//! workload. The simulator reads nothing else, so a new kind (prefix-cache misses, a workload
//! shift, ...) is a new row here plus, at most, a new field with a healthy default.

use serde::{Deserialize, Serialize};

/// Which story a scenario tells about its incident model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IncidentKind {
    /// No change at all.
    Healthy,
    /// Traffic grows linearly through the baseline and the window, within capacity.
    Ramp,
    /// More requests than the servers can batch: queueing, no preemption.
    LoadExceedsCapacity,
    /// Prefill got slower (longer prompts to compute, a slower kernel): TTFT up, queue fine.
    SlowPrefill,
    /// Decode steps got slower: inter-token latency up, queue and TTFT fine.
    SlowDecode,
    /// Overload plus slower steps: queue, TTFT and ITL all up, no preemption.
    SevereSaturation,
    /// The KV cache is full and running requests are preempted.
    KvCachePressure,
    /// The API server answers a share of requests with 5xx; latency is unchanged.
    HttpErrors,
}

impl IncidentKind {
    pub const ALL: [IncidentKind; 8] = [
        IncidentKind::Healthy,
        IncidentKind::Ramp,
        IncidentKind::LoadExceedsCapacity,
        IncidentKind::SlowPrefill,
        IncidentKind::SlowDecode,
        IncidentKind::SevereSaturation,
        IncidentKind::KvCachePressure,
        IncidentKind::HttpErrors,
    ];

    /// The name used in scenario files, e.g. `kv-cache-pressure`.
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentKind::Healthy => "healthy",
            IncidentKind::Ramp => "ramp",
            IncidentKind::LoadExceedsCapacity => "load-exceeds-capacity",
            IncidentKind::SlowPrefill => "slow-prefill",
            IncidentKind::SlowDecode => "slow-decode",
            IncidentKind::SevereSaturation => "severe-saturation",
            IncidentKind::KvCachePressure => "kv-cache-pressure",
            IncidentKind::HttpErrors => "http-errors",
        }
    }

    /// The state's parameters: the row of the table.
    pub fn params(self) -> StateParams {
        let h = StateParams::HEALTHY;
        match self {
            IncidentKind::Healthy => h,
            IncidentKind::Ramp => StateParams { onset: Onset::BaselineStart, arrivals_at_end: 1.8, ..h },
            IncidentKind::LoadExceedsCapacity => StateParams {
                arrivals: 2.5,
                arrivals_at_end: 2.5,
                queue_median_s: 1.5,
                queue_sigma: 0.5,
                itl: 1.05,
                running_at_cap: true,
                waiting: (15.0, 40.0),
                kv_usage: (0.7, 0.85),
                ..h
            },
            IncidentKind::SlowPrefill => StateParams { prefill: 6.0, ..h },
            // Clients with a fixed concurrency send fewer requests when each one streams slower,
            // which is why generation throughput falls instead of the queue growing.
            IncidentKind::SlowDecode => StateParams { arrivals: 0.75, arrivals_at_end: 0.75, itl: 2.5, ..h },
            IncidentKind::SevereSaturation => StateParams {
                arrivals: 2.0,
                arrivals_at_end: 2.0,
                queue_median_s: 2.5,
                queue_sigma: 0.5,
                itl: 2.4,
                running_at_cap: true,
                waiting: (25.0, 60.0),
                kv_usage: (0.78, 0.84),
                ..h
            },
            IncidentKind::KvCachePressure => StateParams {
                queue_median_s: 0.8,
                queue_sigma: 0.6,
                // preempted requests recompute their prompt
                prefill: 1.5,
                itl: 1.3,
                waiting: (5.0, 20.0),
                kv_usage: (0.955, 1.0),
                preemptions_per_s: (0.8, 2.5),
                ..h
            },
            IncidentKind::HttpErrors => StateParams { http_5xx_share: 0.11, ..h },
        }
    }
}

impl std::fmt::Display for IncidentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a state replaces the healthy one on the incident model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Onset {
    /// At the start of the diagnosed window (a change the diagnosis should see against the baseline).
    WindowStart,
    /// At the start of the baseline (a trend that runs through both windows).
    BaselineStart,
}

/// One state of a model's servers. Multipliers apply to the healthy workload
/// ([`Workload::DEFAULT`]); ranges are `(low, high)` and gauges wander inside them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateParams {
    pub onset: Onset,
    /// Arrival-rate multiplier at the onset.
    pub arrivals: f64,
    /// Arrival-rate multiplier at the window's end; linear in between (equal to `arrivals` for a step).
    pub arrivals_at_end: f64,
    /// Median time a request waits before it is scheduled, seconds (lognormal).
    pub queue_median_s: f64,
    pub queue_sigma: f64,
    /// Prefill-time multiplier.
    pub prefill: f64,
    /// Inter-token-latency multiplier.
    pub itl: f64,
    /// Whether the batch is full (`num_requests_running` at the replica's cap).
    pub running_at_cap: bool,
    /// Range of `num_requests_waiting`.
    pub waiting: (f64, f64),
    /// Range of KV-cache usage, 0..1.
    pub kv_usage: (f64, f64),
    /// Range a replica's preemption rate (per second) is drawn from.
    pub preemptions_per_s: (f64, f64),
    /// Share of HTTP requests answered 5xx (they never reach the engine).
    pub http_5xx_share: f64,
    /// Share of engine requests the client aborts.
    pub abort_share: f64,
    /// Share of prompt tokens served from the prefix cache.
    pub prefix_hit_ratio: f64,
}

impl StateParams {
    pub const HEALTHY: StateParams = StateParams {
        onset: Onset::WindowStart,
        arrivals: 1.0,
        arrivals_at_end: 1.0,
        queue_median_s: 0.015,
        queue_sigma: 1.2,
        prefill: 1.0,
        itl: 1.0,
        running_at_cap: false,
        waiting: (0.0, 0.6),
        kv_usage: (0.3, 0.6),
        preemptions_per_s: (0.0, 0.0),
        http_5xx_share: 0.001,
        abort_share: 0.004,
        prefix_hit_ratio: 0.5,
    };
}

/// The healthy request mix every model serves; states scale it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// Median prompt length, tokens (lognormal).
    pub prompt_median: f64,
    pub prompt_sigma: f64,
    /// Median output length the client would accept, tokens (lognormal, cut at `max_tokens`).
    pub output_median: f64,
    pub output_sigma: f64,
    /// Prefill seconds per prompt token.
    pub prefill_per_token_s: f64,
    /// Noise on a request's prefill time (lognormal sigma).
    pub prefill_sigma: f64,
    /// Median inter-token latency, seconds.
    pub itl_median_s: f64,
    /// Spread of a request's mean ITL, and of tokens within a request (lognormal sigmas).
    pub itl_request_sigma: f64,
    pub itl_token_sigma: f64,
    /// Median time from prefill done to the first token leaving the server, seconds.
    pub first_step_s: f64,
    /// `max_tokens` values clients send, with weights.
    pub max_tokens: [(u32, u32); 4],
    /// Share of requests with `n = 2`.
    pub n2_share: f64,
    /// Share of HTTP requests rejected with 4xx (bad input) before reaching the engine.
    pub http_4xx_share: f64,
    /// Largest prefill chunk in one engine step, tokens.
    pub max_batched_tokens: f64,
}

impl Workload {
    pub const DEFAULT: Workload = Workload {
        prompt_median: 600.0,
        prompt_sigma: 0.7,
        output_median: 180.0,
        output_sigma: 0.7,
        prefill_per_token_s: 0.0002,
        prefill_sigma: 0.3,
        itl_median_s: 0.035,
        itl_request_sigma: 0.12,
        itl_token_sigma: 0.15,
        first_step_s: 0.01,
        max_tokens: [(256, 2), (512, 3), (1024, 3), (2048, 2)],
        n2_share: 0.01,
        http_4xx_share: 0.003,
        max_batched_tokens: 8192.0,
    };

    /// Expected seconds a request occupies a batch slot when healthy (prefill plus decode).
    pub fn mean_service_s(&self) -> f64 {
        let ln_mean = |median: f64, sigma: f64| median * (sigma * sigma / 2.0).exp();
        let prefill = ln_mean(self.prompt_median, self.prompt_sigma)
            * self.prefill_per_token_s
            * (self.prefill_sigma * self.prefill_sigma / 2.0).exp();
        let decode = ln_mean(self.output_median, self.output_sigma) * self.itl_median_s;
        prefill + self.first_step_s + decode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name() {
        for kind in IncidentKind::ALL {
            let toml_text = format!("k = \"{}\"", kind.as_str());
            #[derive(Deserialize)]
            struct K {
                k: IncidentKind,
            }
            let parsed: K = toml::from_str(&toml_text).expect("kind parses");
            assert_eq!(parsed.k, kind);
        }
    }

    #[test]
    fn every_state_keeps_its_ranges_ordered_and_shares_valid() {
        for kind in IncidentKind::ALL {
            let p = kind.params();
            for (lo, hi) in [p.waiting, p.kv_usage, p.preemptions_per_s] {
                assert!(lo <= hi, "{kind}: range ({lo}, {hi})");
            }
            assert!(p.kv_usage.1 <= 1.0, "{kind}");
            for share in [p.http_5xx_share, p.abort_share, p.prefix_hit_ratio] {
                assert!((0.0..=1.0).contains(&share), "{kind}");
            }
            assert!(p.arrivals > 0.0 && p.arrivals_at_end > 0.0, "{kind}");
        }
    }

    #[test]
    fn only_the_ramp_starts_before_the_window() {
        for kind in IncidentKind::ALL {
            let expected = if kind == IncidentKind::Ramp { Onset::BaselineStart } else { Onset::WindowStart };
            assert_eq!(kind.params().onset, expected, "{kind}");
        }
    }
}
