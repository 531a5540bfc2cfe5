//! The command line, and nothing else, in two steps as ripgrep's low and high arguments: the clap
//! definitions (`args.rs`, `probe_args.rs`, `rules_args.rs`: every command and flag, its help, its value parser), and their conversion
//! into typed [`Settings`](crate::settings::Settings) (`to_settings.rs`: each value a flag, an
//! environment variable clap reads, or clap's default, with that origin), which [`crate::settings`]
//! merges with the configuration file. Here: parsing, which remembers which values were typed
//! ([`Given`]), and shell completion. Clap types go no further.

mod args;
mod loadtest_args;
mod probe_args;
mod rules_args;
mod to_settings;

pub use args::*;
pub use loadtest_args::*;
pub use probe_args::*;
pub use rules_args::*;

use crate::settings::Origin;

/// Parse the process's arguments like `Cli::parse`, also remembering which values the command line
/// or the environment gave (as opposed to clap's defaults), so that a configuration file fills in
/// only the rest.
pub fn parse() -> Cli {
    parse_from(std::env::args_os())
}

/// Whether the process's arguments name a command that reads the rule pack (explain, check,
/// serve, mcp, rules), looked at before they are parsed so that the pack can be read meanwhile
/// ([`crate::rules::preload`]). A wrong guess costs a millisecond either way, never a behaviour.
pub fn reads_rules<I: IntoIterator<Item = std::ffi::OsString>>(argv: I) -> bool {
    argv.into_iter().skip(1).any(|a| matches!(a.to_str(), Some("explain" | "check" | "serve" | "mcp" | "rules")))
}

/// [`parse`] over given arguments; exits with clap's message on a usage error, like `Cli::parse_from`.
pub fn parse_from<I, T>(argv: I) -> Cli
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches_from(argv);
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let sub = |name: &str| matches.subcommand_matches(name);
    let given = |m: Option<&clap::ArgMatches>| m.map(Given::from_matches).unwrap_or_default();
    match &mut cli.command {
        Command::Explain(a) => a.explain.given = given(sub("explain")),
        Command::Probe(a) => a.given = given(sub("probe")),
        Command::Loadtest(a) => a.given = given(sub("loadtest")),
        Command::Check(a) => a.explain.given = given(sub("check")),
        Command::Serve(a) => a.explain.given = given(sub("serve")),
        Command::Mcp(a) => a.explain.given = given(sub("mcp")),
        Command::Rules(RulesCommand::Export(a)) => a.given = given(sub("rules").and_then(|m| m.subcommand_matches("export"))),
        Command::Config(ConfigCommand::Show(a)) => a.given = given(sub("config").and_then(|m| m.subcommand_matches("show"))),
        _ => {}
    }
    cli
}

/// The command line as shell completion sees it: [`Cli`]'s, with the values only the rule pack
/// knows offered as completions: rule and signal ids for `rules show`, profile names for every
/// `--profile`.
/// Only `vllm-diag completions` uses it; parsing never does (a `--rules` directory may add more).
fn completion_command(rule_ids: &[String], profiles: &[String]) -> clap::Command {
    use clap::builder::PossibleValuesParser;
    // clap keeps possible values as &'static str; this command is built once, for one script.
    let leak = |v: &[String]| -> Vec<&'static str> { v.iter().map(|s| &*s.clone().leak()).collect() };
    let profiles = leak(profiles);
    let rule_ids = leak(rule_ids);
    let profile = move |c: clap::Command| {
        let values = profiles.clone();
        c.mut_arg("profile", move |a| a.value_parser(PossibleValuesParser::new(values)))
    };
    let mut cmd = <Cli as clap::CommandFactory>::command();
    for sub in ["explain", "check", "serve", "mcp"] {
        cmd = cmd.mut_subcommand(sub, profile.clone());
    }
    cmd.mut_subcommand("config", |c| c.mut_subcommand("show", profile.clone())).mut_subcommand("rules", |c| {
        c.mut_subcommand("export", profile.clone()).mut_subcommand("show", |s| s.mut_arg("id", |a| a.value_parser(PossibleValuesParser::new(rule_ids))))
    })
}

/// `vllm-diag completions SHELL`: the script, from [`completion_command`]. clap_complete's fish
/// script completes options' values but not positional ones, so the ids `rules show` takes are
/// added to it here; its bash script needs one name mended (below).
pub fn completion_script(shell: clap_complete::Shell, rule_ids: &[String], profiles: &[String]) -> String {
    let mut cmd = completion_command(rule_ids, profiles);
    let mut buf: Vec<u8> = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vllm-diag", &mut buf);
    let mut script = String::from_utf8_lossy(&buf).into_owned();
    if shell == clap_complete::Shell::Bash {
        // clap_complete 4.6 names a subcommand's case `vllm__subcmd__diag__subcmd__explain` but
        // builds the word it matches as `vllm__diag__subcmd__explain` (the '-' in our name is
        // escaped twice over), so no subcommand's options or values completed. tests/edges.rs asks
        // bash itself.
        script = script.replace("vllm__subcmd__diag", "vllm__diag");
    }
    if shell == clap_complete::Shell::Fish {
        script.push_str(&format!(
            "complete -c vllm-diag -n \"__fish_vllm_diag_using_subcommand rules; and __fish_seen_subcommand_from show\" -f -a \"{}\"\n",
            rule_ids.join(" ")
        ));
    }
    script
}

/// Which of a command's values the command line or the environment gave, as opposed to clap's
/// defaults (only those may be replaced by the file). Filled by [`parse_from`].
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub(super) flags: std::collections::BTreeSet<String>,
    env: std::collections::BTreeSet<String>,
}

impl Given {
    /// Record every argument whose value came from the command line or the environment.
    fn from_matches(m: &clap::ArgMatches) -> Given {
        let mut g = Given::default();
        for id in m.ids() {
            match m.value_source(id.as_str()) {
                Some(clap::parser::ValueSource::CommandLine) => {
                    g.flags.insert(id.as_str().to_string());
                }
                Some(clap::parser::ValueSource::EnvVariable) => {
                    g.env.insert(id.as_str().to_string());
                }
                _ => {}
            }
        }
        g
    }

    /// Where the value of the argument with clap id `id` (typed as `flag`, read from `env`) came from.
    pub(super) fn origin(&self, id: &str, flag: &'static str, env: Option<&'static str>) -> Origin {
        match env {
            _ if self.flags.contains(id) => Origin::Flag(flag),
            Some(var) if self.env.contains(id) => Origin::Env(var),
            _ => Origin::Default,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::{Parser, ValueEnum};

    use super::args::parse_duration;
    use super::*;
    use crate::settings::{Setting, Settings};

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn the_commands_that_read_the_rule_pack_are_told_from_the_others_before_parsing() {
        let reads = |args: &[&str]| reads_rules(std::iter::once("vllm-diag").chain(args.iter().copied()).map(std::ffi::OsString::from));
        assert!(reads(&["explain", "--window", "30m"]));
        assert!(reads(&["--no-config", "check", "--since", "1h"]));
        assert!(reads(&["rules", "list"]));
        assert!(reads(&["serve"]));
        assert!(reads(&["mcp", "--transport", "http"]));
        assert!(!reads(&["--version"]));
        assert!(!reads(&["completions", "bash"]));
        assert!(!reads(&["config", "show"]));
        // The program's own name is not an argument, even when it is spelled like a command.
        assert!(!reads_rules(["explain", "--help"].map(std::ffi::OsString::from).into_iter().take(1)));
    }

    #[test]
    fn durations_must_be_positive_and_human() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert!(parse_duration("0s").unwrap_err().contains("longer than zero"));
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("soon").is_err());
        // Beyond what Prometheus takes as a timeout or a range (and any window with data).
        assert!(parse_duration("100y").is_ok());
        assert!(parse_duration("99999999999d").unwrap_err().contains("at most 100 years"));
        assert!(parse_duration("30M").unwrap_err().contains("months"));
    }

    fn explain_settings(argv: &[&str]) -> Settings {
        let mut full = vec!["vllm-diag", "explain"];
        full.extend_from_slice(argv);
        match parse_from(full).command {
            Command::Explain(a) => a.explain.into_settings(),
            other => panic!("not explain: {other:?}"),
        }
    }

    #[test]
    fn given_flags_are_told_apart_from_defaults() {
        let s = explain_settings(&["--group-by", "model_name", "--format", "json", "--header", "X-A: 1"]);
        assert_eq!(s.scope.group_by, Setting::flag("model_name".to_string(), "--group-by"));
        assert_eq!(s.scope.replica_label, Setting::default_value("instance".to_string()));
        assert_eq!(s.output.format, Setting::flag(crate::render::Format::Json, "--format"));
        assert_eq!(s.connection.headers[0].origin, Origin::Flag("--header"));
        assert_eq!(s.scope.window, Setting::default_value(None));
        assert!(!s.source.prometheus.origin.is_flag());
        assert_eq!(*s.output.fail_on, None);
    }

    #[test]
    fn verbose_turns_the_default_text_into_the_full_table_and_leaves_other_formats_alone() {
        use crate::render::Format;
        assert_eq!(explain_settings(&[]).output.format, Setting::default_value(Format::Text));
        assert_eq!(explain_settings(&["-v"]).output.format, Setting::flag(Format::Table, "--verbose"));
        assert_eq!(explain_settings(&["--verbose", "--format", "text"]).output.format, Setting::flag(Format::Table, "--verbose"));
        assert_eq!(explain_settings(&["-v", "--format", "markdown"]).output.format, Setting::flag(Format::Markdown, "--format"));
        assert_eq!(explain_settings(&["--format", "table"]).output.format, Setting::flag(Format::Table, "--format"));
        match parse_from(["vllm-diag", "check", "--since", "20m", "-v"]).command {
            Command::Check(a) => assert_eq!(*a.explain.into_settings().output.format, Format::Table),
            other => panic!("not check: {other:?}"),
        }
    }

    #[test]
    fn check_fails_on_warnings_by_default() {
        match parse_from(["vllm-diag", "check", "--since", "20m"]).command {
            Command::Check(a) => assert_eq!(a.explain.into_settings().output.fail_on, Setting::default_value(Some(crate::report::Severity::Warning))),
            other => panic!("not check: {other:?}"),
        }
    }

    #[test]
    fn every_output_format_has_a_flag_value() {
        use crate::render::Format;
        for f in Format::ALL {
            let name = f.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
            assert_eq!(name, f.name());
            assert_eq!(
                Cli::try_parse_from(["vllm-diag", "explain", "--format", f.name()])
                    .map(|c| matches!(c.command, Command::Explain(a) if a.explain.format == *f))
                    .ok(),
                Some(true)
            );
        }
    }
}
