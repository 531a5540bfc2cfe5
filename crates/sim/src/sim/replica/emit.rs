//! The samples a replica writes into its [`Trace`] for an interval: its vLLM series in output
//! order, then its DCGM exporter's.

use super::{Replica, FB_RESERVED_MIB, FB_TOTAL_MIB, HTTP_STATUSES, PREEMPTION_REASONS, REASONS_V0, REASONS_V1};
use crate::sim::families::Fam;
use crate::sim::hist::HIST_FAMS;
use crate::sim::trace::Trace;
use crate::state::SleepState;
use crate::KvConnector;

const ADMISSION_REASON: &str = "max_num_queued_reqs";

impl Replica<'_> {
    pub(crate) fn emit(&self, t: &mut Trace) {
        let v1 = self.generation.is_v1();
        let l = &self.labels;
        t.begin_step();
        t.absent = !self.present;
        t.scalar(Fam::Up, &self.target, &[], if self.scraped { 1.0 } else { 0.0 });
        t.absent = !self.present || !self.scraped;
        t.scalar(Fam::CacheConfig, &self.config, &[], 1.0);
        t.scalar(Fam::ProcessStart, &self.target, &[], self.process_start);
        t.scalar(Fam::ProcessMemory, &self.target, &[], self.rss_now());
        let ranks = if v1 { self.model.dp_ranks.max(1) } else { 1 };
        if ranks == 1 {
            t.scalar(Fam::Running, l, &[], self.running);
            t.scalar(Fam::Waiting, l, &[], self.waiting + self.deferred + self.rank_extra);
            t.scalar(Fam::KvUsage, l, &[], self.kv);
        } else {
            // Data parallelism: the server's requests split between its ranks (the first ones take
            // what does not divide), the last rank holding `rank_extra` more; each rank's cache as
            // full as the server's.
            let split = |total: f64, k: u32| {
                let (n, total) = (f64::from(ranks), total.max(0.0).round());
                (total / n).floor() + if f64::from(k) < total % n { 1.0 } else { 0.0 }
            };
            let engines: Vec<String> = (0..ranks).map(|k| k.to_string()).collect();
            for k in 0..ranks {
                t.scalar(Fam::Running, l, &[("engine", &engines[k as usize])], split(self.running, k));
            }
            for k in 0..ranks {
                let extra = if k == ranks - 1 { self.rank_extra } else { 0.0 };
                t.scalar(Fam::Waiting, l, &[("engine", &engines[k as usize])], split(self.waiting + self.deferred, k) + extra);
            }
            for k in 0..ranks {
                t.scalar(Fam::KvUsage, l, &[("engine", &engines[k as usize])], self.kv);
            }
        }
        if v1 {
            for s in SleepState::ALL {
                t.scalar(Fam::SleepState, l, &[("sleep_state", s.as_str())], if s == self.sleep { 1.0 } else { 0.0 });
            }
        }
        t.scalar(Fam::PromptTokens, l, &[], self.prompt_tokens);
        t.scalar(Fam::GenerationTokens, l, &[], self.generation_tokens);
        t.scalar(Fam::Preemptions, l, &[], self.preemptions);
        if v1 && self.model.preemption_detail {
            for (r, v) in PREEMPTION_REASONS.iter().zip(self.preempt_reasons) {
                t.scalar(Fam::PreemptionsByReason, l, &[("reason", r)], v);
            }
        }
        let reasons = if v1 { REASONS_V1 } else { REASONS_V0 };
        for (i, r) in reasons.iter().enumerate() {
            t.scalar(Fam::RequestSuccess, l, &[("finished_reason", r)], self.success[i]);
        }
        if v1 {
            t.scalar(Fam::PrefixQueries, l, &[], self.prefix_queries);
            t.scalar(Fam::PrefixHits, l, &[], self.prefix_hits);
            t.scalar(Fam::Recomputed, l, &[], self.recomputed);
            t.scalar(Fam::AdmissionRejections, &self.frontend, &[("reason", ADMISSION_REASON)], self.rejections);
            if self.model.spec_decode {
                t.scalar(Fam::SpecDrafts, l, &[], self.spec[0]);
                t.scalar(Fam::SpecDraftTokens, l, &[], self.spec[1]);
                t.scalar(Fam::SpecAccepted, l, &[], self.spec[2]);
            }
            if self.model.kv_connector == Some(KvConnector::Nixl) {
                t.scalar(Fam::NixlFailed, l, &[], self.nixl_failed);
            }
            if self.model.kv_connector == Some(KvConnector::Lmcache) {
                t.scalar(Fam::ExternalPrefixQueries, l, &[], self.external_queries);
                t.scalar(Fam::ExternalPrefixHits, l, &[], self.external_hits);
            }
            if self.model.waiting_by_reason {
                t.scalar(Fam::WaitingByReason, l, &[("reason", "capacity")], self.waiting);
                t.scalar(Fam::WaitingByReason, l, &[("reason", "deferred")], self.deferred);
            }
            for (i, s) in HTTP_STATUSES.iter().enumerate() {
                t.scalar(Fam::HttpRequests, &self.target, &[("handler", "/v1/chat/completions"), ("method", "POST"), ("status", s)], self.http[i]);
            }
        }
        for (i, fam) in HIST_FAMS.iter().enumerate() {
            if matches!(fam, Fam::NixlXfer | Fam::NixlBytes) && self.model.kv_connector != Some(KvConnector::Nixl) {
                continue;
            }
            if *fam == Fam::ReqPreemptions && !(v1 && self.model.preemption_detail) {
                continue;
            }
            t.hist(*fam, l, &self.hists[i]);
        }
        // The GPU exporter is its own target and keeps answering while the replica exists.
        t.absent = !self.present;
        if self.model.dcgm {
            let d = &self.dcgm;
            let g = self.gpu;
            let fb_used = if self.sleep == SleepState::Awake { g.fb_used } else { (g.fb_used * 0.015).round() };
            t.scalar(Fam::Up, &self.dcgm_target, &[], 1.0);
            t.scalar(Fam::GpuUtil, d, &[], g.util);
            t.scalar(Fam::SmClock, d, &[], g.sm_clock);
            t.scalar(Fam::GpuTemp, d, &[], g.temp);
            t.scalar(Fam::Power, d, &[], g.power);
            // Current exporters publish the reasons as DCGM_FI_DEV_CLOCKS_EVENT_REASONS (the rule
            // tests cover the older DCGM_FI_DEV_CLOCK_THROTTLE_REASONS).
            t.scalar(Fam::ClocksEventReasons, d, &[], g.throttle);
            t.scalar(Fam::Xid, d, &[], g.xid);
            t.scalar(Fam::FbUsed, d, &[], fb_used);
            t.scalar(Fam::FbFree, d, &[], FB_TOTAL_MIB - FB_RESERVED_MIB - fb_used);
            if self.model.gpu.is_some() {
                t.scalar(Fam::PowerViolation, d, &[], g.power_violation_us);
                t.scalar(Fam::ThermalViolation, d, &[], g.thermal_violation_us);
                t.scalar(Fam::PowerLimit, d, &[], g.power_limit);
                t.scalar(Fam::PowerLimitDefault, d, &[], crate::real_gpu::H200_POWER_LIMIT_W);
                t.scalar(Fam::MemClock, d, &[], g.mem_clock);
            }
        }
        t.end_step();
    }
}
