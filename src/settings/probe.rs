//! `vllm-diag probe`'s own settings, typed, each with its origin: the request shape and the limits
//! (checked against the probe's ceilings here, so an error names the flag). Where the engines'
//! metrics are read (Prometheus, its connection, the selector) is the shared [`super::Settings`].

use std::time::Duration;

use super::Setting;
use crate::error::Failure;
use crate::probe::{Api, Limits, Shape, StreamMode, CEILINGS};

/// How the probe's result is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// The URL to probe, as given.
    pub url: String,
    pub model: Setting<Option<String>>,
    pub api: Setting<Api>,
    pub stream: Setting<StreamMode>,
    pub prompt_words: Setting<usize>,
    pub max_tokens: Setting<u32>,
    pub ignore_eos: Setting<bool>,
    pub requests: Setting<usize>,
    pub rate: Setting<f64>,
    pub concurrency: Setting<usize>,
    pub max_duration: Setting<Duration>,
    pub timeout: Setting<Duration>,
    /// How long to wait after the last request before reading the engines (their last scrape).
    pub settle: Setting<Duration>,
    pub dry_run: bool,
    pub format: ProbeFormat,
    pub quiet: bool,
}

/// `--probe URL` on explain and check: the probe's settings, and the credential for the probed
/// server (the command's own credential flags are the Prometheus').
#[derive(Debug, Clone)]
pub struct JoinProbe {
    pub probe: ProbeSettings,
    pub bearer_token_file: Option<std::path::PathBuf>,
}

impl ProbeSettings {
    pub fn shape(&self) -> Shape {
        Shape { api: *self.api, stream: *self.stream, prompt_words: *self.prompt_words, max_tokens: *self.max_tokens, ignore_eos: *self.ignore_eos }
    }

    /// The limits, each within its ceiling ([`CEILINGS`]); an error names the flag and the ceiling.
    pub fn limits(&self) -> Result<Limits, Failure> {
        let over = |place: String, value: String, ceiling: String| {
            Failure::Usage(format!(
                "{place} {value} is over the probe's ceiling of {ceiling}: a probe measures what users get, it does not load the fleet; ask for less"
            ))
        };
        let c = CEILINGS;
        if *self.requests > c.requests {
            return Err(over(self.requests.origin.place("--requests", "requests"), self.requests.to_string(), c.requests.to_string()));
        }
        if !(self.rate.is_finite() && *self.rate > 0.0) {
            return Err(Failure::Usage(format!("{} must be a number of requests per second above 0", self.rate.origin.place("--rate", "rate"))));
        }
        if *self.rate > c.rate_per_second {
            return Err(over(self.rate.origin.place("--rate", "rate"), self.rate.to_string(), format!("{}/s", c.rate_per_second)));
        }
        if *self.concurrency > c.concurrency {
            return Err(over(self.concurrency.origin.place("--concurrency", "concurrency"), self.concurrency.to_string(), c.concurrency.to_string()));
        }
        let secs = |d: Duration| format!("{}s", d.as_secs_f64());
        if *self.max_duration > c.max_duration {
            return Err(over(self.max_duration.origin.place("--max-duration", "max_duration"), secs(*self.max_duration), secs(c.max_duration)));
        }
        if *self.timeout > c.request_timeout {
            return Err(over(self.timeout.origin.place("--timeout", "timeout"), secs(*self.timeout), secs(c.request_timeout)));
        }
        Ok(Limits {
            requests: *self.requests,
            rate_per_second: *self.rate,
            concurrency: *self.concurrency,
            max_duration: *self.max_duration,
            request_timeout: *self.timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::DEFAULTS;

    fn settings() -> ProbeSettings {
        let d = DEFAULTS;
        ProbeSettings {
            url: "http://h:8000".into(),
            model: Setting::default_value(None),
            api: Setting::default_value(Api::Completions),
            stream: Setting::default_value(StreamMode::Both),
            prompt_words: Setting::default_value(64),
            max_tokens: Setting::default_value(32),
            ignore_eos: Setting::default_value(true),
            requests: Setting::default_value(d.requests),
            rate: Setting::default_value(d.rate_per_second),
            concurrency: Setting::default_value(d.concurrency),
            max_duration: Setting::default_value(d.max_duration),
            timeout: Setting::default_value(d.request_timeout),
            settle: Setting::default_value(Duration::from_secs(30)),
            dry_run: false,
            format: ProbeFormat::Text,
            quiet: false,
        }
    }

    #[test]
    fn the_limits_are_the_settings_within_their_ceilings_and_an_error_names_the_flag() {
        assert_eq!(settings().limits().unwrap(), DEFAULTS);
        let mut s = settings();
        s.requests = Setting::flag(201, "--requests");
        let e = s.limits().unwrap_err().to_string();
        assert!(e.starts_with("--requests 201 is over the probe's ceiling of 200"), "{e}");
        let mut s = settings();
        s.rate = Setting::flag(0.0, "--rate");
        assert!(s.limits().unwrap_err().to_string().contains("--rate must be"));
        let mut s = settings();
        s.rate = Setting::flag(21.0, "--rate");
        assert!(s.limits().unwrap_err().to_string().contains("ceiling of 20/s"));
        let mut s = settings();
        s.concurrency = Setting::flag(33, "--concurrency");
        assert!(s.limits().is_err());
        let mut s = settings();
        s.max_duration = Setting::flag(Duration::from_secs(601), "--max-duration");
        assert!(s.limits().unwrap_err().to_string().contains("--max-duration 601s"));
    }
}
