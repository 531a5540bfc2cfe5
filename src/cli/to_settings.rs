//! The command line's values into typed settings, once: each value with its origin (the flag
//! typed, the environment variable clap read, or the default), for [`crate::settings::build`] to
//! merge with the environment and the configuration file.

use super::Given;
use super::*;
use crate::settings::{self, Origin, Setting, Settings};

impl Cli {
    /// How to find the configuration file.
    pub fn lookup(&self) -> settings::Lookup {
        settings::Lookup { explicit: self.config.clone(), disabled: self.no_config }
    }
}

impl JoinProbeArgs {
    /// The probe to join the diagnosis, when `--probe` was given.
    pub fn into_settings(self, given: &Given) -> Option<settings::probe::JoinProbe> {
        use crate::probe::{Api, StreamMode, DEFAULTS};
        let url = self.probe?;
        let set = |id: &str, flag: &'static str| given.origin(id, flag, None);
        let probe = settings::probe::ProbeSettings {
            url,
            model: opt(self.probe_model, "--probe-model"),
            api: Setting::new(
                match self.probe_api {
                    ProbeApi::Completions => Api::Completions,
                    ProbeApi::Chat => Api::Chat,
                },
                set("probe_api", "--probe-api"),
            ),
            stream: Setting::new(
                match self.probe_stream {
                    ProbeStream::Always => StreamMode::Always,
                    ProbeStream::Never => StreamMode::Never,
                    ProbeStream::Both => StreamMode::Both,
                },
                set("probe_stream", "--probe-stream"),
            ),
            prompt_words: Setting::default_value(64),
            max_tokens: Setting::new(self.probe_max_tokens, set("probe_max_tokens", "--probe-max-tokens")),
            ignore_eos: Setting::default_value(true),
            requests: Setting::new(self.probe_requests as usize, set("probe_requests", "--probe-requests")),
            rate: Setting::new(self.probe_rate, set("probe_rate", "--probe-rate")),
            concurrency: Setting::new(self.probe_concurrency as usize, set("probe_concurrency", "--probe-concurrency")),
            max_duration: Setting::default_value(DEFAULTS.max_duration),
            timeout: Setting::default_value(DEFAULTS.request_timeout),
            settle: Setting::new(self.probe_settle, set("probe_settle", "--probe-settle")),
            dry_run: false,
            format: settings::probe::ProbeFormat::Text,
            quiet: false,
        };
        Some(settings::probe::JoinProbe { probe, bearer_token_file: self.probe_bearer_token_file })
    }
}

impl ProbeArgs {
    /// The probe's settings, and the shared ones (where the engines are read, and the connection
    /// flags, which the app sends to the probed URL only).
    pub fn into_settings(self) -> (Settings, settings::probe::ProbeSettings) {
        use crate::probe::{Api, StreamMode};
        let g = &self.given;
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        let mut shared = Settings::default();
        shared.source.prometheus = match self.prometheus {
            Some(url) => Setting::new(url, g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL))),
            None => Setting::default_value(settings::DEFAULT_PROMETHEUS.to_string()),
        };
        shared.scope.selector = opt(self.selector, "--selector");
        shared.limits.query_timeout = Setting::new(self.query_timeout, set("query_timeout", "--query-timeout"));
        shared.connection = self.connection.into_settings(g);
        let probe = settings::probe::ProbeSettings {
            url: self.url,
            model: opt(self.model, "--model"),
            api: Setting::new(
                match self.api {
                    ProbeApi::Completions => Api::Completions,
                    ProbeApi::Chat => Api::Chat,
                },
                set("api", "--api"),
            ),
            stream: Setting::new(
                match self.stream {
                    ProbeStream::Always => StreamMode::Always,
                    ProbeStream::Never => StreamMode::Never,
                    ProbeStream::Both => StreamMode::Both,
                },
                set("stream", "--stream"),
            ),
            prompt_words: Setting::new(self.prompt_words as usize, set("prompt_words", "--prompt-words")),
            max_tokens: Setting::new(self.max_tokens, set("max_tokens", "--max-tokens")),
            ignore_eos: Setting::new(!self.no_ignore_eos, set("no_ignore_eos", "--no-ignore-eos")),
            requests: Setting::new(self.requests as usize, set("requests", "--requests")),
            rate: Setting::new(self.rate, set("rate", "--rate")),
            concurrency: Setting::new(self.concurrency as usize, set("concurrency", "--concurrency")),
            max_duration: Setting::new(self.max_duration, set("max_duration", "--max-duration")),
            timeout: Setting::new(self.timeout, set("timeout", "--timeout")),
            settle: Setting::new(self.settle, set("settle", "--settle")),
            dry_run: self.dry_run,
            format: match self.format {
                ProbeFormatArg::Text => settings::probe::ProbeFormat::Text,
                ProbeFormatArg::Json => settings::probe::ProbeFormat::Json,
            },
            quiet: self.quiet,
        };
        (shared, probe)
    }
}

impl LoadtestArgs {
    /// The load test's settings, and the shared ones (as `probe`'s: where the engines are read,
    /// the connection flags for the loaded URL, the rules and profile).
    pub fn into_settings(self) -> (Settings, settings::loadtest::LoadtestSettings) {
        use crate::loadtest::LoadMode;
        use crate::probe::Api;
        let g = &self.given;
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        let mut shared = Settings::default();
        shared.source.prometheus = match self.prometheus {
            Some(url) => Setting::new(url, g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL))),
            None => Setting::default_value(settings::DEFAULT_PROMETHEUS.to_string()),
        };
        shared.scope.selector = opt(self.selector, "--selector");
        shared.limits.query_timeout = Setting::new(self.query_timeout, set("query_timeout", "--query-timeout"));
        shared.connection = self.connection.into_settings(g);
        shared.rules.dir = opt(self.rules, "--rules");
        shared.rules.profile = opt(self.profile, "--profile");
        let lt = settings::loadtest::LoadtestSettings {
            url: self.url.unwrap_or_default(),
            model: opt(self.model, "--model"),
            api: Setting::new(
                match self.api {
                    ProbeApi::Completions => Api::Completions,
                    ProbeApi::Chat => Api::Chat,
                },
                set("api", "--api"),
            ),
            prompt_words: Setting::new(self.prompt_words as usize, set("prompt_words", "--prompt-words")),
            max_tokens: Setting::new(self.max_tokens, set("max_tokens", "--max-tokens")),
            ignore_eos: Setting::new(!self.no_ignore_eos, set("no_ignore_eos", "--no-ignore-eos")),
            mode: Setting::new(
                match self.mode {
                    LoadModeArg::Concurrency => LoadMode::Concurrency,
                    LoadModeArg::Rate => LoadMode::Rate,
                },
                set("mode", "--mode"),
            ),
            start: Setting::new(self.start, set("start", "--start")),
            max_concurrency: Setting::new(self.max_concurrency as usize, set("max_concurrency", "--max-concurrency")),
            max_rate: Setting::new(self.max_rate, set("max_rate", "--max-rate")),
            max_duration: Setting::new(self.max_duration, set("max_duration", "--max-duration")),
            max_requests: Setting::new(self.max_requests as usize, set("max_requests", "--max-requests")),
            step: Setting::new(self.step, set("step", "--step")),
            timeout: Setting::new(self.timeout, set("timeout", "--timeout")),
            settle: Setting::new(self.settle, set("settle", "--settle")),
            profile_out: self.profile_out,
            profile_name: self.profile_name,
            margin: Setting::new(self.margin, set("margin", "--margin")),
            dry_run: self.dry_run,
            html: self.html,
            from: self.from,
            format: match self.format {
                ProbeFormatArg::Text => settings::probe::ProbeFormat::Text,
                ProbeFormatArg::Json => settings::probe::ProbeFormat::Json,
            },
            quiet: self.quiet,
        };
        (shared, lt)
    }
}

/// An optional flag's value: given on the command line, or nobody's.
fn opt<T>(value: Option<T>, flag: &'static str) -> Setting<Option<T>> {
    match value {
        Some(v) => Setting::flag(Some(v), flag),
        None => Setting::default_value(None),
    }
}

impl RulesArgs {
    /// The settings the rules commands take from the command line: the rules directory, and the
    /// profile (`rules export --profile`); the configuration file fills in the rest.
    pub fn into_settings(self, profile: Option<String>) -> Settings {
        Settings {
            rules: settings::RuleSettings { dir: opt(self.rules, "--rules"), profile: opt(profile, "--profile"), ..settings::RuleSettings::default() },
            ..Settings::default()
        }
    }
}

impl ExportArgs {
    /// The settings `rules export` takes from its flags: the rules directory, the profile and the
    /// scope (selector, grouping, replica label); the configuration file fills in what they leave,
    /// then the defaults (model_name, instance).
    pub fn settings(&mut self) -> Settings {
        let given_or = |v: Option<String>, flag: &'static str, default: &str| match v {
            Some(v) => Setting::flag(v, flag),
            None => Setting::default_value(default.to_string()),
        };
        let mut s = RulesArgs { rules: self.rules.rules.take() }.into_settings(self.profile.take());
        s.scope.selector = opt(self.selector.take(), "--selector");
        s.scope.group_by = given_or(self.group_by.take(), "--group-by", "model_name");
        s.scope.replica_label = given_or(self.replica_label.take(), "--replica-label", "instance");
        if self.backtest.backtest.is_some() {
            let g = &self.given;
            let b = &mut self.backtest;
            let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
            s.source.prometheus = Setting::new(std::mem::take(&mut b.prometheus), g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL)));
            s.scope.at = opt(b.at.take(), "--at");
            s.limits.timeout = Setting::new(b.timeout, set("timeout", "--timeout"));
            s.limits.query_timeout = Setting::new(b.query_timeout, set("query_timeout", "--query-timeout"));
            s.connection = b.connection.clone().into_settings(g);
        }
        s
    }

    /// The flags typed that only a backtest reads, when there is no --backtest: they would be
    /// ignored, so the command stops and says so.
    pub fn backtest_flags_without_backtest(&self) -> Vec<String> {
        if self.backtest.backtest.is_some() {
            return Vec::new();
        }
        const ONLY: &[&str] = &[
            "prometheus",
            "bearer_token_file",
            "basic_auth_user",
            "basic_auth_password_file",
            "headers",
            "tenant",
            "ca_file",
            "cert_file",
            "key_file",
            "insecure_skip_verify",
            "debug",
        ];
        ONLY.iter()
            .filter(|id| self.given.flags.contains(**id))
            .map(|id| format!("--{}", if *id == "headers" { "header".to_string() } else { id.replace('_', "-") }))
            .collect()
    }
}

impl FailOn {
    /// Whether changes no rule explains fail the run: at `unexplained` and below it.
    pub fn fails_unexplained(self) -> bool {
        matches!(self, FailOn::Info | FailOn::Unexplained)
    }
}

impl From<FailOn> for Option<crate::report::Severity> {
    fn from(f: FailOn) -> Option<crate::report::Severity> {
        use crate::report::Severity;
        match f {
            FailOn::Never => None,
            FailOn::Info => Some(Severity::Info),
            FailOn::Unexplained | FailOn::Warning => Some(Severity::Warning),
            FailOn::Critical => Some(Severity::Critical),
        }
    }
}

impl ExplainArgs {
    /// The typed settings this command line gives, each value with its origin (a flag, an
    /// environment variable clap reads, or clap's default), for [`crate::settings::build`] to merge
    /// with the environment and the configuration file.
    pub fn into_settings(self) -> Settings {
        let g = &self.given;
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        // An optional value: its flag when given, else unset (the default).
        let connection = self.connection.into_settings(g);
        let scrape_origin = if self.scrape.is_empty() { Origin::Default } else { Origin::Flag("--scrape") };
        Settings {
            file: settings::FileInfo::default(),
            source: settings::SourceSettings {
                prometheus: Setting::new(self.prometheus, g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL))),
                replay: opt(self.replay, "--replay"),
                record: opt(self.record, "--record"),
                scrape: Setting::new(self.scrape, scrape_origin),
                interval: opt(self.interval, "--interval"),
                baseline_from: opt(self.baseline_from, "--baseline-from"),
                save_samples: opt(self.save_samples, "--save-samples"),
            },
            connection,
            scope: settings::Scope {
                window: opt(self.window, "--window"),
                at: opt(self.at, "--at"),
                baseline: opt(self.baseline, "--baseline"),
                selector: opt(self.selector, "--selector"),
                group_by: Setting::new(self.group_by, set("group_by", "--group-by")),
                replica_label: Setting::new(self.replica_label, set("replica_label", "--replica-label")),
            },
            rules: settings::RuleSettings { dir: opt(self.rules, "--rules"), profile: opt(self.profile, "--profile"), ..settings::RuleSettings::default() },
            limits: settings::Limits {
                timeout: Setting::new(self.timeout, set("timeout", "--timeout")),
                query_timeout: Setting::new(self.query_timeout, set("query_timeout", "--query-timeout")),
                concurrency: Setting::new(self.concurrency, set("concurrency", "--concurrency")),
            },
            output: settings::Output {
                // -v is the text format at full length: the table.
                format: match (self.verbose, self.format) {
                    (true, crate::render::Format::Text) => Setting::flag(crate::render::Format::Table, "--verbose"),
                    (_, format) => Setting::new(format, set("format", "--format")),
                },
                fail_on: Setting::new(self.fail_on.into(), set("fail_on", "--fail-on")),
                fail_on_unexplained: Setting::new(self.fail_on.fails_unexplained(), set("fail_on", "--fail-on")),
                quiet: Setting::new(self.quiet, set("quiet", "--quiet")),
                watch: opt(self.watch, "--watch"),
                metrics_listen: opt(self.metrics_listen, "--metrics-listen"),
                annotations: opt(self.annotations.map(|Annotations::Github| settings::Annotations::Github), "--annotations"),
                links: Setting::default(),
            },
        }
    }
}

impl ConnectionArgs {
    /// The connection settings this command line gives; `g` tells which values it typed.
    fn into_settings(self, g: &Given) -> settings::Connection {
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        settings::Connection {
            headers: self.headers.into_iter().map(|h| Setting::flag(crate::source::prometheus::Secret::new(h), "--header")).collect(),
            tenant: opt(self.tenant, "--tenant"),
            ca_file: opt(self.ca_file, "--ca-file"),
            cert_file: opt(self.cert_file, "--cert-file"),
            key_file: opt(self.key_file, "--key-file"),
            insecure_skip_verify: Setting::new(self.insecure_skip_verify, set("insecure_skip_verify", "--insecure-skip-verify")),
            bearer_token_file: opt(self.bearer_token_file, "--bearer-token-file"),
            bearer_token: Setting::default_value(None),
            basic_auth_user: opt(self.basic_auth_user, "--basic-auth-user"),
            basic_auth_password_file: opt(self.basic_auth_password_file, "--basic-auth-password-file"),
            basic_auth_password: Setting::default_value(None),
            withheld: None,
            debug: Setting::new(self.debug, set("debug", "--debug")),
        }
    }
}
