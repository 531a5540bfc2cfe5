//! `vllm-diag loadtest`'s own settings, typed, each with its origin: the request shape, the mode,
//! the bounds (checked against the load test's ceilings here, so that an error names the flag),
//! the profile whose limits judge the steps, and the outputs. Where the engines' metrics are read
//! is the shared [`super::Settings`], as for `probe`.

use std::path::PathBuf;
use std::time::Duration;

use super::probe::ProbeFormat;
use super::Setting;
use crate::error::Failure;
use crate::loadtest::plan::CEILINGS;
use crate::loadtest::{Bounds, LoadMode};
use crate::probe::{Api, Shape, StreamMode};

#[derive(Debug, Clone)]
pub struct LoadtestSettings {
    pub url: String,
    pub model: Setting<Option<String>>,
    pub api: Setting<Api>,
    pub prompt_words: Setting<usize>,
    pub max_tokens: Setting<u32>,
    pub ignore_eos: Setting<bool>,
    pub mode: Setting<LoadMode>,
    /// The first step's load (requests in flight, or a second).
    pub start: Setting<f64>,
    pub max_concurrency: Setting<usize>,
    pub max_rate: Setting<f64>,
    pub max_duration: Setting<Duration>,
    pub max_requests: Setting<usize>,
    pub step: Setting<Duration>,
    pub timeout: Setting<Duration>,
    /// After each step, how long to wait before reading the engines (their last scrape).
    pub settle: Setting<Duration>,
    /// Where the derived profile goes, and its name.
    pub profile_out: Option<PathBuf>,
    pub profile_name: String,
    pub margin: Setting<f64>,
    pub dry_run: bool,
    /// Where the HTML page goes, besides the result on stdout.
    pub html: Option<PathBuf>,
    /// A saved result to write again instead of running a load test.
    pub from: Option<PathBuf>,
    pub format: ProbeFormat,
    pub quiet: bool,
}

impl LoadtestSettings {
    /// Every request streamed: the time to the first token is what a step is judged on.
    pub fn shape(&self) -> Shape {
        Shape { api: *self.api, stream: StreamMode::Always, prompt_words: *self.prompt_words, max_tokens: *self.max_tokens, ignore_eos: *self.ignore_eos }
    }

    /// The bounds, each within its ceiling ([`CEILINGS`]); an error names the flag and the ceiling.
    pub fn bounds(&self) -> Result<Bounds, Failure> {
        let c = CEILINGS;
        let over = |place: String, value: String, ceiling: String| {
            Failure::Usage(format!("{place} {value} is over the load test's ceiling of {ceiling}: ask for less, or run several load tests"))
        };
        let secs = |d: Duration| format!("{}s", d.as_secs_f64());
        if *self.max_concurrency > c.max_concurrency {
            return Err(over(
                self.max_concurrency.origin.place("--max-concurrency", "max_concurrency"),
                self.max_concurrency.to_string(),
                c.max_concurrency.to_string(),
            ));
        }
        if !(self.max_rate.is_finite() && *self.max_rate > 0.0) {
            return Err(Failure::Usage(format!("{} must be a number of requests per second above 0", self.max_rate.origin.place("--max-rate", "max_rate"))));
        }
        if *self.max_rate > c.max_rate {
            return Err(over(self.max_rate.origin.place("--max-rate", "max_rate"), self.max_rate.to_string(), format!("{}/s", c.max_rate)));
        }
        if *self.max_requests > c.max_requests {
            return Err(over(self.max_requests.origin.place("--max-requests", "max_requests"), self.max_requests.to_string(), c.max_requests.to_string()));
        }
        for (s, flag, ceiling) in
            [(&self.max_duration, "--max-duration", c.max_duration), (&self.step, "--step", c.step), (&self.timeout, "--timeout", c.request_timeout)]
        {
            if **s > ceiling {
                return Err(over(s.origin.place(flag, flag.trim_start_matches("--")), secs(**s), secs(ceiling)));
            }
        }
        if *self.step > *self.max_duration {
            return Err(Failure::Usage(format!(
                "--step {} is longer than --max-duration {}: not one step would fit",
                secs(*self.step),
                secs(*self.max_duration)
            )));
        }
        let top = match *self.mode {
            LoadMode::Concurrency => *self.max_concurrency as f64,
            LoadMode::Rate => *self.max_rate,
        };
        if !(self.start.is_finite() && *self.start > 0.0 && *self.start <= top) {
            return Err(Failure::Usage(format!(
                "{} {} must be above 0 and at most the load bound ({})",
                self.start.origin.place("--start", "start"),
                *self.start,
                crate::units::sig(top)
            )));
        }
        if *self.mode == LoadMode::Concurrency && self.start.fract() != 0.0 {
            return Err(Failure::Usage(format!("--start {} must be a whole number of requests in flight with --mode concurrency", *self.start)));
        }
        if !(self.margin.is_finite() && (0.0..=10.0).contains(&*self.margin)) {
            return Err(Failure::Usage(format!("--margin {} must be a share between 0 and 10 (0.5: half again)", *self.margin)));
        }
        Ok(Bounds {
            max_concurrency: *self.max_concurrency,
            max_rate: *self.max_rate,
            max_duration: *self.max_duration,
            max_requests: *self.max_requests,
            step: *self.step,
            request_timeout: *self.timeout,
        })
    }
}

/// A profile name a rules file can hold as `[profile.NAME]` without quoting.
pub fn valid_profile_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::plan::DEFAULTS;

    fn settings() -> LoadtestSettings {
        let d = DEFAULTS;
        LoadtestSettings {
            url: "http://h:8000".into(),
            model: Setting::default_value(None),
            api: Setting::default_value(Api::Completions),
            prompt_words: Setting::default_value(64),
            max_tokens: Setting::default_value(64),
            ignore_eos: Setting::default_value(true),
            mode: Setting::default_value(LoadMode::Concurrency),
            start: Setting::default_value(1.0),
            max_concurrency: Setting::default_value(d.max_concurrency),
            max_rate: Setting::default_value(d.max_rate),
            max_duration: Setting::default_value(d.max_duration),
            max_requests: Setting::default_value(d.max_requests),
            step: Setting::default_value(d.step),
            timeout: Setting::default_value(d.request_timeout),
            settle: Setting::default_value(Duration::from_secs(15)),
            profile_out: None,
            profile_name: "measured".into(),
            margin: Setting::default_value(0.5),
            dry_run: false,
            html: None,
            from: None,
            format: ProbeFormat::Text,
            quiet: false,
        }
    }

    #[test]
    fn the_bounds_are_the_settings_within_their_ceilings_and_an_error_names_the_flag() {
        assert_eq!(settings().bounds().unwrap(), DEFAULTS);
        let mut s = settings();
        s.max_concurrency = Setting::flag(5000, "--max-concurrency");
        assert!(s.bounds().unwrap_err().to_string().starts_with("--max-concurrency 5000 is over the load test's ceiling of 1024"));
        let mut s = settings();
        s.max_duration = Setting::flag(Duration::from_secs(5 * 3600), "--max-duration");
        assert!(s.bounds().unwrap_err().to_string().contains("--max-duration 18000s"));
        let mut s = settings();
        s.step = Setting::flag(Duration::from_secs(3600), "--step");
        assert!(s.bounds().unwrap_err().to_string().contains("--step 3600s is over"));
        let mut s = settings();
        s.start = Setting::flag(100.0, "--start");
        assert!(s.bounds().unwrap_err().to_string().contains("--start 100 must be"));
        let mut s = settings();
        s.start = Setting::flag(1.5, "--start");
        assert!(s.bounds().unwrap_err().to_string().contains("whole number"));
        assert!(valid_profile_name("measured-2026_12") && !valid_profile_name("a b") && !valid_profile_name(""));
    }
}
