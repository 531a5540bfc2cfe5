//! The CI integrations, run here as a runner would run them: ci/vllm-diag-ci.sh (what action.yml's
//! two steps run, and what the GitLab template carries) installs a release archive made by
//! scripts/release.sh from this test build's binary, served by a real HTTP server on 127.0.0.1,
//! then checks a deploy against a real Prometheus holding an incident that ends now. The exit
//! codes, the annotations, the step summary, the outputs and the GitLab artifacts are checked.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, incident_now};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A directory served over HTTP by Python's http.server, as a release host: `v<VERSION>/` holds the
/// archive and its checksum, `vbad<VERSION>`... see [`Releases::start`].
struct Releases {
    url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Releases {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Releases {
    /// `v<VERSION>/` with the archive scripts/release.sh packs, and `v9.9.9/` with the same archive
    /// renamed but its checksum file left naming another archive's sum (a tampered download).
    fn start() -> Releases {
        let dir = tempfile::tempdir().expect("temp dir");
        let good = dir.path().join(format!("v{VERSION}"));
        let binary = packable_binary(dir.path());
        let out = Command::new(root().join("scripts/release.sh")).arg("--binary").arg(&binary).arg("--out").arg(&good).output().expect("release.sh");
        assert!(out.status.success(), "{}", text(&out));
        let bad = dir.path().join("v9.9.9");
        std::fs::create_dir_all(&bad).unwrap();
        let name = |v: &str| format!("vllm-diag-{v}-x86_64-unknown-linux-gnu.tar.gz");
        std::fs::copy(good.join(name(VERSION)), bad.join(name("9.9.9"))).unwrap();
        std::fs::write(bad.join(format!("{}.sha256", name("9.9.9"))), format!("{}  {}\n", "0".repeat(64), name("9.9.9"))).unwrap();

        let port = free_port();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string(), "--directory"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(60), "http.server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Releases { url, child, _dir: dir }
    }
}

/// This test build's binary without its debug sections (`strip --strip-debug`, binutils): half
/// the size, so packing and unpacking it takes seconds; the layout checked does not depend on it.
fn packable_binary(dir: &Path) -> PathBuf {
    let out = dir.join("vllm-diag");
    let status = Command::new("strip").args(["--strip-debug", "-o"]).arg(&out).arg(env!("CARGO_BIN_EXE_vllm-diag")).status().expect("run strip (binutils)");
    assert!(status.success(), "strip --strip-debug failed");
    out
}

fn text(out: &Output) -> String {
    format!("exit {:?}\nstdout:\n{}\nstderr:\n{}", out.status.code(), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A runner's environment: nothing of this machine's CI or connection variables, then `env`.
fn runner(program: &Path, args: &[&str], cwd: &Path, env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(program).args(args).current_dir(cwd);
    for var in ["GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITLAB_CI", "VLLM_DIAG_PROMETHEUS_URL", "VLLM_DIAG_BEARER_TOKEN"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null()).output().expect("run bash")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[test]
fn the_github_action_installs_the_release_and_fails_the_step_with_annotations_a_summary_and_outputs() {
    let releases = Releases::start();
    let prom = incident_now();
    let work = tempfile::tempdir().expect("temp dir");
    let file = |n: &str| -> PathBuf {
        let p = work.path().join(n);
        std::fs::write(&p, "").unwrap();
        p
    };
    let (path, output, summary) = (file("github_path"), file("github_output"), file("step_summary"));
    let temp = work.path().join("runner-temp");
    std::fs::create_dir_all(&temp).unwrap();
    let script = root().join("ci/vllm-diag-ci.sh");
    let env = |prometheus: &str, version: &str| -> Vec<(&'static str, String)> {
        vec![
            ("GITHUB_ACTIONS", "true".into()),
            ("GITHUB_PATH", path.display().to_string()),
            ("GITHUB_OUTPUT", output.display().to_string()),
            ("GITHUB_STEP_SUMMARY", summary.display().to_string()),
            ("RUNNER_TEMP", temp.display().to_string()),
            ("VLLM_DIAG_VERSION", version.into()),
            ("VLLM_DIAG_RELEASES", releases.url.clone()),
            ("VLLM_DIAG_PROMETHEUS_URL", prometheus.into()),
            ("VLLM_DIAG_SINCE", "30m".into()),
            ("VLLM_DIAG_SELECTOR", "model_name=~\".+\"".into()),
            ("VLLM_DIAG_ARGS", "--timeout 60s".into()),
        ]
    };

    // action.yml runs exactly these two steps, with these variables.
    let action = read(&root().join("action.yml"));
    for step in ["bash \"$GITHUB_ACTION_PATH/ci/vllm-diag-ci.sh\" install", "bash \"$GITHUB_ACTION_PATH/ci/vllm-diag-ci.sh\" check"] {
        assert!(action.contains(step), "action.yml runs {step}");
    }
    for (var, _) in env(&prom.url, VERSION).iter().filter(|(v, _)| v.starts_with("VLLM_DIAG_")) {
        assert!(action.contains(&format!("{var}: ${{{{ inputs.")), "action.yml sets {var} from an input");
    }

    // A tampered download is not installed.
    let out = runner(&script, &["install"], work.path(), &env(&prom.url, "9.9.9"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not match its SHA-256"), "{}", text(&out));
    assert!(read(&path).is_empty());

    let out = runner(&script, &["install"], work.path(), &env(&prom.url, VERSION));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let installed = temp.join(format!("vllm-diag/vllm-diag-{VERSION}-x86_64-unknown-linux-gnu"));
    assert_eq!(read(&path).trim(), installed.display().to_string(), "the binary's folder is added to the PATH of later steps");

    let out = runner(&script, &["check"], work.path(), &env(&prom.url, VERSION));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "a critical finding fails the step: {}", text(&out));
    assert!(stdout.starts_with("FAIL: "), "{}", text(&out));
    assert!(stdout.lines().any(|l| l.starts_with("::error title=") && l.contains("kv-cache-pressure")), "an annotation per finding: {stdout}");
    let outputs = read(&output);
    assert!(outputs.contains("verdict=FAIL\n") && outputs.contains("exit-code=1\n"), "{outputs}");
    let report = outputs.lines().find_map(|l| l.strip_prefix("report=")).expect("the report output");
    let json: serde_json::Value = serde_json::from_str(&read(Path::new(report))).expect("the report is JSON");
    assert_eq!(json["findings"][0]["rule"], "kv-cache-pressure");
    let summary_text = read(&summary);
    assert!(summary_text.contains("FAIL") && summary_text.contains("kv-cache-pressure"), "the step summary: {summary_text}");
    assert!(!summary_text.contains("::error"), "annotations are not in the summary");

    // No backend: NOT EVALUATED, exit 3, never a pass.
    std::fs::write(&output, "").unwrap();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let out = runner(&script, &["check"], work.path(), &env(&dead, VERSION));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(read(&output).contains("verdict=NOT EVALUATED\n") && read(&output).contains("exit-code=3\n"), "{}", read(&output));

    // Missing inputs are usage errors that say which.
    let out = runner(&script, &["check"], work.path(), &env(&prom.url, VERSION).into_iter().filter(|(k, _)| *k != "VLLM_DIAG_SINCE").collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("VLLM_DIAG_SINCE"), "{}", text(&out));
}

/// The script of the GitLab template's job: its `- |` block, as GitLab runs it.
fn gitlab_script() -> String {
    let template = read(&root().join("ci/gitlab/vllm-diag.gitlab-ci.yml"));
    let mut lines = template.lines().skip_while(|l| l.trim() != "- |").skip(1);
    let mut out = String::new();
    for l in lines.by_ref() {
        if !l.is_empty() && !l.starts_with("      ") {
            break;
        }
        out.push_str(l.get(6..).unwrap_or(""));
        out.push('\n');
    }
    out
}

#[test]
fn the_gitlab_template_carries_the_same_script_and_leaves_a_junit_report_and_markdown() {
    let script = gitlab_script();
    let file = read(&root().join("ci/vllm-diag-ci.sh"));
    assert!(script.contains(&file), "ci/gitlab/vllm-diag.gitlab-ci.yml must carry ci/vllm-diag-ci.sh as it is (indented six spaces)");

    let releases = Releases::start();
    let prom = incident_now();
    let work = tempfile::tempdir().expect("temp dir");
    let job = common::run::write_file(work.path(), "job.sh", &script);
    let install = work.path().join("install");
    let env = vec![
        ("GITLAB_CI", "true".to_string()),
        ("VLLM_DIAG_VERSION", VERSION.to_string()),
        ("VLLM_DIAG_RELEASES", releases.url.clone()),
        ("VLLM_DIAG_PROMETHEUS_URL", prom.url.clone()),
        ("VLLM_DIAG_SINCE", "30m".to_string()),
        ("VLLM_DIAG_INSTALL_DIR", install.display().to_string()),
        ("VLLM_DIAG_ARGS", "--timeout 60s".to_string()),
    ];
    let out = runner(&job, &[], work.path(), &env);
    assert_eq!(out.status.code(), Some(1), "the job fails on a critical finding: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("installed vllm-diag") && stdout.contains("FAIL: "), "{}", text(&out));
    assert!(!stdout.contains("::error"), "no GitHub annotations on GitLab");
    let junit = read(&work.path().join("vllm-diag.xml"));
    assert!(junit.contains("<testsuite") && junit.contains("kv-cache-pressure") && junit.contains("<failure"), "{junit}");
    let markdown = read(&work.path().join("vllm-diag.md"));
    assert!(markdown.contains("kv-cache-pressure"), "{markdown}");
}
