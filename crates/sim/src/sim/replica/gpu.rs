//! DCGM's view of a replica's GPU for an interval: readings drawn from the state's ranges, or a
//! real GPU's recorded samples replayed.

use rand::Rng;

use super::Replica;
use crate::sim::draw::in_range;
use crate::state::{SleepState, StateParams};

impl Replica<'_> {
    /// DCGM's view of the GPU for the interval.
    pub(super) fn update_gpu(&mut self, st: &StateParams, secs: f64) {
        let g = st.gpu;
        if self.model.gpu.is_some() {
            return self.replay_gpu(st, secs);
        }
        self.gpu.util = in_range(g.util, self.noise[3]).round();
        self.gpu.sm_clock = (in_range(g.sm_clock_mhz, self.noise[4]) / 15.0).round() * 15.0;
        self.gpu.temp = in_range(g.temp_c, self.noise[5]).round();
        self.gpu.power = (in_range(g.power_w, self.noise[6]) * 1000.0).round() / 1000.0;
        self.gpu.throttle = f64::from(g.throttle_reasons);
        self.gpu.xid = f64::from(g.xid);
    }

    /// A real GPU's reading for the interval: one recorded sample from the pool the state's work
    /// puts it in (idle when it serves nothing, compute-bound at the power cap for `compute_share`
    /// of the scrapes, decode-shaped otherwise), then what the state lays over it: a lowered power
    /// limit (the draw held at it, the cap set, the clock cut in proportion), fault reasons (their
    /// bits, the state's clock and temperature), an XID. The violation counters grow by the
    /// interval's share spent capped or throttled.
    fn replay_gpu(&mut self, st: &StateParams, secs: f64) {
        use crate::real_gpu::{pools, Pool, REASON_SW_POWER_CAP};
        let g = st.gpu;
        let idle = !st.serving || g.util.1 <= 0.0 || self.sleep != SleepState::Awake;
        let capped_share = if idle { 0.0 } else { g.compute_share.clamp(0.0, 1.0) };
        let pool = if idle {
            Pool::Idle
        } else if self.rng.gen::<f64>() < capped_share {
            Pool::Compute
        } else {
            Pool::Decode
        };
        let samples = &pools()[pool as usize];
        let s = samples[self.rng.gen_range(0..samples.len())];
        let mut reasons = s.clocks_event_reasons;
        let (mut clock, mut power, mut temp) = (s.sm_clock_mhz, s.power_w, s.temp_c);
        let mut capped = capped_share;
        if power > g.power_limit_w {
            clock = (clock * g.power_limit_w / power / 15.0).round() * 15.0;
            power = g.power_limit_w - self.rng.gen_range(0.0..4.0);
            reasons |= REASON_SW_POWER_CAP;
            capped = if idle { 0.0 } else { 1.0 };
        }
        let faults = g.throttle_reasons & !REASON_SW_POWER_CAP;
        if faults != 0 {
            reasons |= faults;
            clock = (in_range(g.sm_clock_mhz, self.noise[4]) / 15.0).round() * 15.0;
            self.gpu.thermal_violation_us += (secs * 1e6).round();
        }
        if g.temp_c != crate::GpuParams::HEALTHY.temp_c {
            temp = in_range(g.temp_c, self.noise[5]).round();
        }
        self.gpu.util = if g.util.1 <= 0.0 { 0.0 } else { s.gpu_util_pct };
        self.gpu.sm_clock = clock;
        self.gpu.mem_clock = s.mem_clock_mhz;
        self.gpu.temp = temp;
        self.gpu.power = (power * 1000.0).round() / 1000.0;
        self.gpu.throttle = f64::from(reasons);
        self.gpu.xid = f64::from(g.xid);
        self.gpu.power_limit = g.power_limit_w;
        self.gpu.power_violation_us += (capped * secs * 1e6).round();
    }
}
