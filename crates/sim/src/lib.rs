//! Generated vLLM fleets, so integration tests can run the diagnosis against a real Prometheus.
//!
//! Hand-written fixtures drift from what servers emit and never have the noise that makes a
//! threshold flaky. A scenario file instead names a fleet (models, replicas, request rates), a
//! timeline (warm-up, baseline, window), at most one incident on one model and any number of
//! change events (restarts, configuration changes, rollouts, scaling; see `events.rs`); the generator
//! simulates every replica interval by interval with vLLM's real metric names, labels and
//! histogram buckets, and writes OpenMetrics that `promtool tsdb create-blocks-from openmetrics`
//! backfills. The same seed always gives the same bytes.
//!
//! Each incident kind lives in its own module under `incidents/` (its needs and the numbers of its
//! state, [`IncidentKind::params`], in the terms `state.rs` defines); the simulation (`sim.rs`)
//! knows nothing about kinds, and `openmetrics.rs` only formats. The scenario's types are in
//! `spec.rs`, and reading a scenario file into them in `parse.rs`.
//!
//! # The scenario file
//!
//! ```toml
//! name = "kv-cache-pressure"        # must equal the file's stem in fixtures/scenarios/
//! description = "what happens"      # optional
//! seed = 7                          # optional (0); the same seed gives the same bytes
//! start = "2026-01-15T08:00:00Z"    # RFC 3339 time of the first sample
//! interval = "30s"                  # scrape interval, at least 1s
//! warmup = "20m"                    # optional (0s): healthy lead-in before the baseline
//! baseline = "30m"                  # the baseline window, right before ...
//! window = "30m"                    # ... the diagnosed window, which ends at the last sample
//! metrics = "v1"                    # optional: "v1" (default), "v0", or "v1-otel" (V1 with `vllm_` for `vllm:`)
//! histograms = false                # optional (true): false keeps only gauges and counters
//! drop = ["vllm:request_success"]   # optional: families (as vLLM names them, without _total) the
//!                                   #   collector does not keep
//! counts_aborts = false             # optional (true): false is a vLLM that counts a stream its client
//!                                   #   closed as nothing (0.32: no finished_reason="abort", no
//!                                   #   finished-request histograms, HTTP 200); its first token is
//!                                   #   still in TTFT and its tokens in the token counters
//!
//! [[model]]                         # one or more
//! name = "meta-llama/Llama-3.1-8B-Instruct"   # the model_name label
//! replicas = 3                      # 1..=64 servers; instance "<model-slug>-<i>:8000", a pod each
//! rate = 2.0                        # healthy requests per second per replica (0 < rate <= 500)
//! max_model_len = 32768             # optional (32768): last bound of the token histograms
//! max_num_seqs = 64                 # optional (64): running requests never exceed it
//! max_num_seqs_per_replica = [8, 32] # optional: one cap per replica instead (a replica deployed
//!                                   #   with another --max-num-seqs than its peers)
//! weights = [3, 1, 1]               # optional (even): share of the model's arrivals per replica
//! spec_decode = true                # optional (false): V1 speculative-decoding counters
//! kv_connector = "nixl"             # optional (none): NIXL transfer metrics (V1), or "lmcache": external prefix-cache lookups and hits (V1)
//! dcgm = true                       # optional (false): an NVIDIA DCGM exporter per replica's GPU
//! gpu = "h200"                      # optional: the DCGM series replay a real H200's samples
//!                                   #   (fixtures/real-gpu/; implies dcgm): idle, decode-shaped or
//!                                   #   compute-bound at the power cap as the state's work asks
//! preemption_detail = true          # optional (false): vllm:num_preemptions_by_reason{reason} and
//!                                   #   the per-request histogram vllm:request_num_preemptions (V1)
//! waiting_by_reason = true          # optional (false): vllm:num_requests_waiting_by_reason{reason},
//!                                   #   capacity and deferred, as newer vLLM splits its queue (V1)
//! dp_ranks = 2                      # optional (1): data-parallel ranks per server (V1): the running,
//!                                   #   waiting and KV gauges per `engine`, the rest on engine 0
//! router = "vllm-router"           # optional: vLLM's router in front of the model (its own target,
//!                                   #   families read from vllm-router 0.1.17, see router.rs)
//!                                   # "vllm-router-pd": the same router in prefill/decode mode
//!                                   #   (the first half of the replicas prefill, the rest decode)
//! router_policy = "consistent_hash" # optional (round_robin): the router's --policy (a label)
//! custom_buckets = { time_to_first_token = [1, 5, 60] }  # optional: vLLM's --custom-histogram-buckets
//!                                   #   (families time_to_first_token, inter_token_latency and
//!                                   #   request_latency: queue, prefill, decode, E2E), ascending bounds
//!
//! [incident]                        # optional: at most one
//! kind = "kv-cache-pressure"        # see IncidentKind (every pathology and its "-near" miss)
//! model = "meta-llama/Llama-3.1-8B-Instruct"
//! replica = 1                       # replica index, for kinds about one replica (default 0)
//! onset = "-60m"                    # optional: start this long before the window's end
//!
//! [[event]]                         # optional, any number
//! kind = "config-change"            # restart | config-change | rollout | replica-added | replica-removed
//! model = "meta-llama/Llama-3.1-8B-Instruct"
//! at = "12m"                        # before the window's end: when the first chosen replica goes down
//! replicas = [0, 2]                 # optional (all of the model's)
//! down = "90s"                      # restart/config-change/rollout (2 intervals; "0s": no failed scrape)
//! num_gpu_blocks = 900              # config-change only (required there): the new KV-cache size
//! image = "vllm/vllm-openai:v0.9.1" # rollout only (optional): the new pods' image
//! stagger = "60s"                   # rollout only (1 interval): one replica after the other
//! warm_up = "4m"                    # restart/config-change/rollout (0s): the new process is slow this long
//! warm_up_slowdown = 3.0            # ... and this many times slower when it first answers (3; falls to 1)
//!
//! [expect]                          # what the diagnosis must conclude; the generator ignores it
//! first = "kv-cache-pressure"       # the rule ranked first ...
//! model = "meta-llama/Llama-3.1-8B-Instruct"  # ... for this model_name ...
//! replica = "llama-3-1-8b-instruct-1:8000"    # ... naming this instance (optional)
//! absent = ["recompute-thrashing"]  # rules that must not fire for any scope
//! healthy = false                   # true: no warning or critical finding at all
//! caused_by = "config-change"       # the first finding is tied to an event of this kind
//! no_cause = false                  # true: no finding is tied to any event
//! cold_start = false                # true: the first finding is a replica's cold start (info)
//! replica_cause = "config"          # why the named replica differs: load, config or hardware
//! binding = "max-num-seqs"          # the limit the report's `binding` names for `model`
//! grew = "input-processing"         # the hop the report's time by hop names as grown for `model`
//! ```
//!
//! Every vLLM series carries `job="vllm"`, `instance`, `pod`, `namespace="inference"` and
//! `model_name` (and `engine="0"` in V1); `up` and `http_requests_total` carry the target labels
//! only. DCGM series carry `job="dcgm"`, `instance="<node>:9400"`, `gpu`, `UUID`, `device`,
//! `modelName`, `Hostname` and the replica's `pod`, `namespace` and `container="vllm"`, never
//! `model_name`. Every vLLM target also exports `process_start_time_seconds` (its target labels);
//! kube-state-metrics series exist only in scenarios with a rollout.

mod events;
mod incidents;
mod openmetrics;
mod parse;
pub mod real_gpu;
mod router;
mod sim;
mod spec;
mod state;

pub use events::{EventKind, EventSpec, TrueEvent, DEFAULT_IMAGE, FIRST_GENERATION, TRUE_KINDS};
pub use incidents::IncidentKind;
pub use sim::GeneratedSeries;
pub use spec::{
    Expectation, IncidentSpec, KvConnector, MetricsGeneration, ModelSpec, RealGpu, ReplicaInfo, RouterKind, ScenarioError, ScenarioSpec, BINDING_LIMITS,
    CUSTOM_BUCKET_FAMILIES, HOPS, REPLICA_CAUSES, ROUTER_POLICIES,
};
pub use state::{GpuParams, Level, Needs, Onset, Running, Scope, SleepState, StateParams, Workload};

/// Every series the scenario's fleet exports, sorted by name then labels.
pub fn generate_series(spec: &ScenarioSpec) -> Vec<GeneratedSeries> {
    simulate_kept(spec).into_series()
}

/// The simulation, less what the scenario's collector does not keep (histograms, with
/// `histograms = false`; the families `drop` names).
fn simulate_kept(spec: &ScenarioSpec) -> sim::Generated {
    let mut generated = sim::simulate(spec);
    if !spec.histograms {
        generated.families.retain(|f| f.kind != sim::Kind::Histogram);
    }
    generated.families.retain(|f| !spec.drop.contains(&f.name));
    generated
}

/// Write the scenario as OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`:
/// every sample timestamped, each family's samples together, `# EOF` at the end.
pub fn generate_openmetrics(spec: &ScenarioSpec, out: &mut impl std::io::Write) -> std::io::Result<()> {
    generate_into(spec, out)
}

/// [`generate_openmetrics`] behind one concrete writer, so that the formatting is compiled here,
/// optimised (Cargo.toml optimises this crate even in the debug build the tests run), and not in
/// each unoptimised test binary that names its own writer type. The buffer makes the writes
/// through `dyn Write` few and large.
fn generate_into(spec: &ScenarioSpec, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use std::io::Write;
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, out);
    openmetrics::write(&simulate_kept(spec), &mut buffered)?;
    buffered.flush()
}

#[cfg(test)]
mod tests;
