//! The documentation keeps its promises about itself:
//!
//! - README.md stays a README: at most 400 lines, and it still holds the two newcomer commands.
//! - Every relative link in README.md, BENCHMARKS.md, CHANGELOG.md and docs/*.md points to a file
//!   that exists, and a `#fragment` to a heading of that file; every fenced block is closed.
//! - Every command a page tells users to run is one the project has: each line of a ```sh block,
//!   the `run:` lines of ```yaml blocks and the `$ ` lines of transcripts.
//!   - A `vllm-diag ...` or `cargo run -- ...` line is parsed by the binary's own argument parser
//!     (`vllm_diag::cli::Cli`): an invented flag, a missing value or a bad duration fails here.
//!   - The lines that need no server (`--replay` of a file that exists, `rules`, `config show`,
//!     `completions`, `man`) are also run, and must exit 0 or 1 and print something. The others (a
//!     live Prometheus, a scrape target, `serve`) are parsed only: running them here would need
//!     the servers they name.
//!   - A script a page runs must exist and know every flag the page gives it; `cargo test --test
//!     NAME` and `cargo run --example NAME` name files that exist; a repository path an argument
//!     names (`fixtures/...`, `rules/...`) exists.
//!
//! The systemd unit and the Kubernetes manifest in docs/serve.md are not read: they are
//! configuration, not commands typed by a user.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

#[path = "common/pack.rs"]
mod pack;

const README_MAX_LINES: usize = 400;

/// Pages another branch writes, linked from here before they land. Once the file exists, its
/// entry must go (the test says so), so this list cannot hide a broken link for long.
const WRITTEN_ELSEWHERE: &[&str] = &[];

/// Commands a page may tell users to run that are not the project's own: only their existence as
/// tools is assumed, nothing is checked about their arguments.
const OTHER_TOOLS: &[&str] = &["promtool", "git", "cd", "rustup", "podman", "kubectl", "sha256sum", "tar"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, BENCHMARKS.md, CHANGELOG.md and every docs/*.md, as paths relative to the root.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = ["README.md", "BENCHMARKS.md", "CHANGELOG.md"].iter().map(PathBuf::from).collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// Whether a line opens a fenced block (when outside one) or closes it (when inside: only a bare
/// fence closes, as in CommonMark; "```text" inside a block is text).
fn is_fence(line: &str, inside: bool) -> bool {
    let t = line.trim();
    if inside {
        t.len() >= 3 && t.chars().all(|c| c == '`')
    } else {
        t.starts_with("```")
    }
}

/// The lines outside fenced code blocks, with their line numbers (1-based).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if is_fence(line, fenced) {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The fenced blocks of these languages: (line number of the block's first line, its lines).
fn blocks<'a>(text: &'a str, langs: &[&str]) -> Vec<(usize, Vec<&'a str>)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, Vec<&str>)> = None;
    let mut in_other = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if is_fence(line, current.is_some() || in_other) {
            let info = t.trim_start_matches('`');
            if let Some(block) = current.take() {
                out.push(block);
            } else if in_other {
                in_other = false;
            } else if langs.contains(&info.trim()) {
                current = Some((i + 2, Vec::new()));
            } else {
                in_other = true;
            }
            continue;
        }
        if let Some((_, lines)) = current.as_mut() {
            lines.push(line);
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a page's headings give, repeated headings numbered as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(rest) = line.strip_prefix('#') else { continue };
        let heading = rest.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of Markdown links `[text](target)` in a page's prose: (line, target).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn the_readme_is_short_and_keeps_the_two_newcomer_commands() {
    let readme = read(Path::new("README.md"));
    let lines = readme.lines().count();
    assert!(lines <= README_MAX_LINES, "README.md has {lines} lines; at most {README_MAX_LINES}: move the detail to docs/");
    let commands: Vec<String> = page_commands(&readme).into_iter().map(|c| c.text).collect();
    for wanted in ["cargo run --release -- explain --replay fixtures/incidents/kv-cache-pressure.json", "./scripts/test.sh"] {
        assert!(commands.iter().any(|c| c == wanted), "README.md no longer tells a newcomer to run `{wanted}`; found {commands:#?}");
    }
    // One example each of the commands people use.
    for wanted in ["vllm-diag explain ", "vllm-diag check ", "vllm-diag serve ", "vllm-diag rules ", "--scrape ", "--record ", "--replay ", "--watch "] {
        assert!(commands.iter().any(|c| c.contains(wanted)), "README.md has no example with `{wanted}`; found {commands:#?}");
    }
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == "exec ./scripts/test.sh"), ".ci/run must run exactly the README's test command");
}

/// The README shows what the newcomer's first command prints, as it prints it: the block under
/// "What it prints" is the replay's output, piped (so wrapped at 100 columns, without colour).
#[test]
fn the_readmes_sample_output_is_what_the_replay_prints() {
    let readme = read(Path::new("README.md"));
    let section = readme.split("## What it prints").nth(1).expect("README.md has a \"What it prints\" section");
    let block: Vec<&str> = section.lines().skip_while(|l| l.trim() != "```text").skip(1).take_while(|l| l.trim() != "```").collect();
    assert!(block.len() > 3, "no ```text block under \"What it prints\"");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vllm-diag"))
        .args(["explain", "--replay", "fixtures/incidents/kv-cache-pressure.json", "--no-config"])
        .current_dir(root())
        .env_remove("NO_COLOR")
        .output()
        .expect("run vllm-diag");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    let printed: Vec<&str> = printed.trim_end().lines().collect();
    // The same words, but for the pack's counts: a rule added to the pack does not make the README
    // wrong (tests/common/pack.rs).
    let words = |lines: &[&str]| pack::normalise(&lines.join("\n")).split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        words(&block),
        words(&printed),
        "README.md's sample output differs from what the replay prints now: paste the new output\n{}",
        printed.join("\n")
    );
}

#[test]
fn every_relative_link_points_to_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let mut inside = false;
        for line in text.lines() {
            if is_fence(line, inside) {
                inside = !inside;
            }
        }
        if inside {
            broken.push(format!("{}: a fenced block is never closed", page.display()));
        }
        let dir = page.parent().unwrap_or(Path::new(""));
        for (line, target) in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() { page.clone() } else { normalize(&dir.join(path)) };
            let here = format!("{}:{line}: ({target})", page.display());
            let name = file.to_string_lossy().replace('\\', "/");
            if WRITTEN_ELSEWHERE.contains(&name.as_str()) && !root().join(&file).exists() {
                continue;
            }
            if !root().join(&file).exists() {
                broken.push(format!("{here}: no file {}", file.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                if file.extension().is_none_or(|x| x != "md") {
                    broken.push(format!("{here}: a #fragment on a file that is not Markdown"));
                } else if !anchors(&read(&file)).contains(fragment) {
                    broken.push(format!("{here}: {} has no heading #{fragment}", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 20, "only {checked} relative links found: is the link reader still reading the pages?");
    for elsewhere in WRITTEN_ELSEWHERE {
        assert!(!root().join(elsewhere).exists(), "{elsewhere} exists now: remove it from WRITTEN_ELSEWHERE in tests/docs.rs so its links are checked");
    }
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[test]
fn the_slug_of_a_heading_is_githubs() {
    assert_eq!(slug("Watching an incident: `--watch`"), "watching-an-incident---watch");
    assert_eq!(slug("Configuration file: `vllm-diag.toml`"), "configuration-file-vllm-diagtoml");
    assert_eq!(slug("JSON output (schema_version 1)"), "json-output-schema_version-1");
}

/// One command line a page tells users to run.
#[derive(Debug, Clone)]
struct Doc {
    page: String,
    line: usize,
    /// The line as written, continuation lines joined, without its comment.
    text: String,
    words: Vec<String>,
}

/// A shell line split into words the way sh would, for what the pages write: quotes, backslashes,
/// comments. Splitting stops at the first operator (`>`, `|`, `&&`, `;`): what follows is the
/// shell's business, not the command's arguments.
fn shell_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err(format!("unclosed ' in {line}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => word.push(chars.next().unwrap()),
                        Some(ch) => word.push(ch),
                        None => return Err(format!("unclosed \" in {line}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(ch) = chars.next() {
                    word.push(ch);
                }
            }
            '#' if !in_word => break,
            '>' | '|' | ';' | '&' | '<' => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The commands of one page's ```sh blocks (and the `run:` lines of its ```yaml blocks).
fn page_commands(text: &str) -> Vec<Doc> {
    let mut out = Vec::new();
    for (start, lines) in blocks(text, &["sh", "bash", "shell"]) {
        let mut i = 0;
        while i < lines.len() {
            let first = i;
            let mut joined = String::new();
            loop {
                let l = lines[i];
                i += 1;
                match l.trim_end().strip_suffix('\\') {
                    Some(head) if i < lines.len() => {
                        joined.push_str(head);
                        joined.push(' ');
                    }
                    _ => {
                        joined.push_str(l);
                        break;
                    }
                }
            }
            if joined.trim().is_empty() || joined.trim_start().starts_with('#') {
                continue;
            }
            out.push(doc_line(start + first, &joined));
        }
    }
    // Transcripts: the `$ ` lines of ```text and ```console blocks are commands too.
    for (start, lines) in blocks(text, &["text", "console", ""]) {
        for (k, l) in lines.iter().enumerate() {
            if let Some(cmd) = l.strip_prefix("$ ") {
                out.push(doc_line(start + k, cmd));
            }
        }
    }
    for (start, lines) in blocks(text, &["yaml", "yml"]) {
        for (k, l) in lines.iter().enumerate() {
            if let Some(cmd) = l.trim_start().trim_start_matches("- ").strip_prefix("run: ") {
                out.push(doc_line(start + k, cmd));
            }
        }
    }
    out
}

fn doc_line(line: usize, text: &str) -> Doc {
    let words = shell_words(text).unwrap_or_else(|e| panic!("line {line}: {e}"));
    let words: Vec<String> = words.into_iter().skip_while(|w| is_assignment(w)).collect();
    let shown = match text.find(" #") {
        // A ` #` outside single quotes starts the comment.
        Some(at) if text[..at].matches('\'').count().is_multiple_of(2) => &text[..at],
        _ => text,
    };
    let text = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    Doc { page: String::new(), line, text, words }
}

/// `NAME=value` before a command: an environment variable for it.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
}

fn all_commands() -> Vec<Doc> {
    let mut out = Vec::new();
    for page in pages() {
        for mut doc in page_commands(&read(&page)) {
            doc.page = page.display().to_string();
            out.push(doc);
        }
    }
    out
}

/// What a command line is, once read.
enum Kind {
    /// Arguments for the vllm-diag binary (from `vllm-diag ARGS` or `cargo run [--release] -- ARGS`).
    VllmDiag(Vec<String>),
    /// Checked without running: nothing more to do.
    Checked,
}

/// Checks what can be checked without the binary; returns the vllm-diag arguments if any.
fn classify(doc: &Doc) -> Result<Kind, String> {
    let Some(program) = doc.words.first() else { return Err("empty command".into()) };
    let args = &doc.words[1..];
    check_repo_paths(args)?;
    match program.as_str() {
        "vllm-diag" => Ok(Kind::VllmDiag(args.to_vec())),
        "cargo" => classify_cargo(args),
        p if p.starts_with("./scripts/") || p.starts_with("scripts/") => {
            let script = root().join(p.trim_start_matches("./"));
            let body = std::fs::read_to_string(&script).map_err(|e| format!("{p}: {e}"))?;
            use std::os::unix::fs::PermissionsExt;
            if std::fs::metadata(&script).unwrap().permissions().mode() & 0o111 == 0 {
                return Err(format!("{p} is not executable"));
            }
            for flag in args.iter().filter(|a| a.starts_with("--")) {
                if !body.contains(flag.as_str()) {
                    return Err(format!("{p} does not know {flag}"));
                }
            }
            Ok(Kind::Checked)
        }
        p if OTHER_TOOLS.contains(&p) => Ok(Kind::Checked),
        p => Err(format!("`{p}`: a command this test does not know; teach tests/docs.rs how to check it")),
    }
}

/// Whether Cargo.toml builds the test target only with the `servers` feature.
fn needs_servers(test: &str) -> bool {
    let manifest: toml::Value = toml::from_str(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    let targets = manifest.get("test").and_then(|t| t.as_array()).cloned().unwrap_or_default();
    targets.iter().any(|t| {
        t.get("name").and_then(|n| n.as_str()) == Some(test)
            && t.get("required-features").and_then(|f| f.as_array()).is_some_and(|f| f.iter().any(|x| x.as_str() == Some("servers")))
    })
}

fn classify_cargo(args: &[String]) -> Result<Kind, String> {
    let (own, rest) = match args.iter().position(|a| a == "--") {
        Some(at) => (&args[..at], Some(&args[at + 1..])),
        None => (args, None),
    };
    let value = |flag: &str| own.iter().position(|a| a == flag).and_then(|i| own.get(i + 1)).cloned();
    match own.first().map(String::as_str) {
        Some("run") => {
            if let Some(example) = value("--example") {
                let file = root().join("examples").join(format!("{example}.rs"));
                return if file.exists() { Ok(Kind::Checked) } else { Err(format!("no example {}", file.display())) };
            }
            Ok(Kind::VllmDiag(rest.map(<[String]>::to_vec).unwrap_or_default()))
        }
        Some("test") => {
            if let Some(test) = value("--test") {
                let file = root().join("tests").join(format!("{test}.rs"));
                if !file.exists() {
                    return Err(format!("no test target {}", file.display()));
                }
                let featured = own.windows(2).any(|w| w[0] == "--features" && w[1].split(',').any(|f| f == "servers"));
                if needs_servers(&test) && !featured {
                    return Err(format!("cargo test --test {test}: the target starts servers and is built only with --features servers (Cargo.toml)"));
                }
            }
            Ok(Kind::Checked)
        }
        Some("build") => Ok(Kind::Checked),
        Some("install") => match (value("--path"), value("--git")) {
            (Some(path), _) if root().join(&path).join("Cargo.toml").exists() => Ok(Kind::Checked),
            // From a remote repository: this test cannot fetch it; the package it names must be ours.
            (None, _) if own.iter().any(|a| a == "--git") && args.last().is_some_and(|p| p == env!("CARGO_PKG_NAME")) => Ok(Kind::Checked),
            (path, git) => Err(format!("cargo install --path {path:?} --git {git:?}: no Cargo.toml there, or not this package")),
        },
        Some("bench") => {
            let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
            match value("--bench") {
                Some(b) if manifest.contains(&format!("name = \"{b}\"")) => Ok(Kind::Checked),
                other => Err(format!("cargo bench --bench {other:?}: no such bench target")),
            }
        }
        other => Err(format!("cargo {other:?}: a cargo command this test does not know")),
    }
}

/// Arguments that name a file of this repository (`fixtures/...`, `rules/...`, `scripts/...`,
/// `examples/...`) must name one that exists; a `*` in the last part must match something.
fn check_repo_paths(args: &[String]) -> Result<(), String> {
    for arg in args {
        let path = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
        if ["fixtures/", "rules/", "scripts/", "examples/", "docs/"].iter().any(|p| path.starts_with(p)) && expand(path).is_empty() {
            return Err(format!("{path}: no such file in the repository"));
        }
    }
    Ok(())
}

/// A repository path with at most one `*` in its last part, expanded as the shell would (sorted);
/// empty when nothing matches.
fn expand(path: &str) -> Vec<String> {
    let Some((dir, pattern)) = path.rsplit_once('/').filter(|(_, last)| last.contains('*')) else {
        return if root().join(path).exists() { vec![path.to_string()] } else { Vec::new() };
    };
    let (head, tail) = pattern.split_once('*').unwrap();
    let mut out: Vec<String> = std::fs::read_dir(root().join(dir))
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(head) && n.ends_with(tail) && n.len() >= head.len() + tail.len())
                .map(|n| format!("{dir}/{n}"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Whether a parsed vllm-diag command line can run here with no server: it reads only files of
/// this repository. Parsing has already succeeded.
fn offline(args: &[String]) -> bool {
    let sub: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).take(2).collect();
    let reads_files_only = match sub.as_slice() {
        // A backtest asks a server.
        ["rules", "export"] if args.iter().any(|a| a == "--backtest") => false,
        ["rules", ..] | ["completions", ..] | ["man", ..] | ["config", "show"] => true,
        ["explain", ..] | ["check", ..] => args.iter().any(|a| a == "--replay"),
        // A dry run prints what it would send and sends nothing.
        ["probe", ..] | ["loadtest", ..] => args.iter().any(|a| a == "--dry-run"),
        _ => false,
    };
    // Every file it names must be here (an example's `my-rules/` or `incident.json` is not).
    let names_missing_file = args.iter().any(|a| {
        let file_like = a.contains('/') || [".json", ".toml", ".om", ".yml"].iter().any(|x| a.ends_with(x));
        !a.starts_with('-') && file_like && !a.contains("://") && !a.contains('=') && expand(a).is_empty()
    });
    reads_files_only && !names_missing_file
}

#[test]
fn every_documented_command_is_one_the_project_has() {
    let docs = all_commands();
    let mut failures = Vec::new();
    let (mut parsed, mut ran) = (Vec::new(), Vec::new());
    for doc in &docs {
        let here = format!("{}:{}: `{}`", doc.page, doc.line, doc.text);
        let args = match classify(doc) {
            Ok(Kind::VllmDiag(args)) => args,
            Ok(Kind::Checked) => continue,
            Err(e) => {
                failures.push(format!("{here}: {e}"));
                continue;
            }
        };
        let argv = std::iter::once("vllm-diag".to_string()).chain(args.iter().cloned());
        if let Err(e) = vllm_diag::cli::Cli::command().try_get_matches_from(argv) {
            // `--version` and `--help` end parsing by printing; that is what they are for.
            if matches!(e.kind(), clap::error::ErrorKind::DisplayVersion | clap::error::ErrorKind::DisplayHelp) {
                continue;
            }
            failures.push(format!("{here}: the CLI refuses it:\n{e}"));
            continue;
        }
        if !offline(&args) {
            parsed.push(here);
            continue;
        }
        let expanded: Vec<String> = args.iter().flat_map(|a| if a.contains('*') { expand(a) } else { vec![a.clone()] }).collect();
        let config_home = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vllm-diag"))
            .args(&expanded)
            .current_dir(root())
            .env("NO_COLOR", "1")
            .env("XDG_CONFIG_HOME", config_home.path())
            .env("HOME", config_home.path())
            .env_remove("VLLM_DIAG_PROMETHEUS_URL")
            .env_remove("VLLM_DIAG_BEARER_TOKEN")
            .env_remove("VLLM_DIAG_BASIC_AUTH_PASSWORD")
            .env_remove("GITHUB_STEP_SUMMARY")
            .output()
            .unwrap();
        let code = out.status.code().unwrap_or(-1);
        if code != 0 && code != 1 {
            failures.push(format!("{here}: exit {code}\n{}", String::from_utf8_lossy(&out.stderr)));
        } else if out.stdout.is_empty() {
            failures.push(format!("{here}: printed nothing"));
        }
        ran.push(here);
    }
    assert!(failures.is_empty(), "documented commands that do not work:\n\n{}", failures.join("\n\n"));
    // Not vacuous: the pages hold commands of both kinds, and the offline ones really ran.
    assert!(ran.len() >= 10, "only {} documented commands ran: {ran:#?}", ran.len());
    assert!(parsed.len() >= 10, "only {} documented commands were parsed: {parsed:#?}", parsed.len());
    println!("ran:\n  {}\nparsed only (they need a server):\n  {}", ran.join("\n  "), parsed.join("\n  "));
}

#[test]
fn the_command_reader_catches_what_it_is_meant_to() {
    let line = |text: &str| Doc { page: "t".into(), ..doc_line(1, text) };
    assert_eq!(
        line("VLLM_DIAG_X=1 vllm-diag explain --selector 'namespace=\"prod\"' > out.json  # a comment").words,
        ["vllm-diag", "explain", "--selector", "namespace=\"prod\""]
    );
    // A flag the CLI does not have, and a value it refuses, fail the parse.
    for bad in ["vllm-diag explain --no-such-flag", "vllm-diag explain --window 30M", "vllm-diag rules shw x"] {
        let Ok(Kind::VllmDiag(args)) = classify(&line(bad)) else { panic!("{bad}: not read as vllm-diag") };
        let argv = std::iter::once("vllm-diag".to_string()).chain(args);
        assert!(vllm_diag::cli::Cli::command().try_get_matches_from(argv).is_err(), "{bad} parsed");
    }
    // A script flag the script does not know, a missing test target or fixture, an unknown tool.
    for bad in [
        "scripts/bench.sh --no-such-flag",
        "cargo test --test no_such_test",
        "cargo test --test fixtures",
        "vllm-diag explain --replay fixtures/incidents/none.json",
        "make install",
    ] {
        assert!(classify(&line(bad)).is_err(), "{bad} passed");
    }
    assert!(offline(&["rules".into(), "test".into(), "rules/tests/*.toml".into()]));
    assert!(!offline(&["rules".into(), "test".into(), "--rules".into(), "my-rules/".into()]));
    assert!(!offline(&["explain".into(), "--prometheus".into(), "http://prometheus:9090".into()]));
    assert!(!offline(&["explain".into(), "--replay".into(), "incident.json".into()]));
}

/// docs/rules.md's table of the built-in rules is the pack's, generated from the rule files: every
/// rule in it, each as `rules::doc::markdown_table` writes it (VLLM_DIAG_UPDATE_DOCS=1 writes it).
#[test]
fn the_rules_table_is_generated_from_the_rule_files() {
    let set = vllm_diag::rules::load_builtin().expect("the built-in rules load");
    let table = vllm_diag::rules::doc::markdown_table(&set);
    assert_eq!(table.lines().count(), set.rules.len() + 2, "{table}");
    for r in &set.rules {
        assert!(table.contains(&format!("| `{}` | {} | ", r.id, r.severity.as_str())), "{} missing from the generated table", r.id);
        let row = table.lines().find(|l| l.starts_with(&format!("| `{}` |", r.id))).unwrap_or_default();
        assert!(row.contains("| when") || row.contains("| where ") || row.contains("| on "), "{}: no condition in {row}", r.id);
    }
    let path = root().join("docs/rules.md");
    let page = read(&path);
    let (open, close) = ("<!-- rules table -->\n", "<!-- end of rules table -->");
    let start = page.find(open).expect("docs/rules.md marks where its rules table starts") + open.len();
    let end = page[start..].find(close).expect("and where it ends") + start;
    if std::env::var_os("VLLM_DIAG_UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{}{table}{}", &page[..start], &page[end..])).expect("docs/rules.md is writable");
        return;
    }
    assert_eq!(
        &page[start..end],
        table,
        "docs/rules.md's rules table is not the pack's: VLLM_DIAG_UPDATE_DOCS=1 cargo test --features servers --test docs rewrites it"
    );
}
