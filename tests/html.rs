//! The HTML report in a real browser: a replayed incident rendered by headless Chromium, which
//! must log no console errors, must have built an SVG chart for every evidence signal with a trend
//! (thresholds drawn), and must produce a screenshot of the requested size.
//!
//! Chromium is the Debian package `chromium`; scripts/test.sh installs it. When it is missing the
//! test fails and says how to install it: a skipped browser test looks exactly like a passing one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const WIDTH: u32 = 412;
const HEIGHT: u32 = 1400;

fn fixture(name: &str) -> String {
    format!("{}/fixtures/incidents/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new(name).arg("--version").stdin(Stdio::null()).output() {
            if out.status.success() {
                return PathBuf::from(name);
            }
        }
    }
    panic!("headless Chromium is not installed: run scripts/test.sh, which installs the Debian package `chromium`");
}

/// Run Chromium headless with a fresh profile and nothing that reaches the network on its own.
fn headless(profile: &Path, args: &[String]) -> Output {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .stdin(Stdio::null());
    cmd.output().unwrap_or_else(|e| panic!("cannot run chromium: {e}"))
}

/// The HTML of a replayed incident, written to `dir/report.html`.
fn report_page(dir: &Path, incident: &str) -> PathBuf {
    let out = assert_cmd::Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--replay", &fixture(incident), "--format", "html"])
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let page = dir.join("report.html");
    std::fs::write(&page, &out.stdout).unwrap();
    page
}

/// Console messages Chromium logged at error level (`CONSOLE(...)` lines of level ERROR, or any
/// uncaught error), ignoring Chromium's own start-up noise about its sandbox, D-Bus and GPU.
fn console_errors(stderr: &str) -> Vec<String> {
    // The page has no scripts, so any console message at all (Chromium logs them as `CONSOLE`
    // lines, whatever their level) means something went wrong: a blocked load, a parse error.
    stderr.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught") || l.contains("Refused to")).map(str::to_string).collect()
}

#[test]
fn the_console_error_check_catches_a_page_that_logs_an_error() {
    // The control for the test below: the same detection on a page known to be broken.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.html");
    std::fs::write(&page, "<!DOCTYPE html><html><body><p>x</p><script>console.error('boom'); undefinedFunction();</script></body></html>").unwrap();
    let out = headless(&dir.path().join("profile"), &["--dump-dom".to_string(), format!("file://{}", page.display())]);
    let errors = console_errors(&String::from_utf8_lossy(&out.stderr));
    assert!(errors.iter().any(|l| l.contains("boom")), "console.error not detected: {errors:#?}");
}

#[test]
fn the_html_report_renders_in_chromium_with_its_charts_and_no_console_errors() {
    let dir = tempfile::tempdir().unwrap();
    let page = report_page(dir.path(), "kv-cache-pressure");
    let url = format!("file://{}", page.display());

    // The DOM after rendering: the charts exist in the page the browser built, not only in the text.
    let dom = headless(&dir.path().join("profile-dom"), &["--dump-dom".to_string(), url.clone()]);
    let stderr = String::from_utf8_lossy(&dom.stderr);
    assert!(dom.status.success(), "chromium --dump-dom failed: {stderr}");
    let html = String::from_utf8_lossy(&dom.stdout);
    let errors = console_errors(&stderr);
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    let charts = html.matches("<svg class=\"chart\"").count();
    let source = std::fs::read_to_string(&page).unwrap();
    let expected = source.matches("<svg class=\"chart\"").count();
    assert!(expected >= 5, "the kv-cache-pressure incident has trends for its evidence: {expected} charts");
    assert_eq!(charts, expected, "every chart survives parsing into the DOM");
    assert!(html.contains("<polyline"), "charts have lines");
    assert!(html.contains("class=\"limit\""), "thresholds are drawn");
    assert!(html.contains("#1 CRITICAL"));
    assert!(!html.contains("<script"), "no scripts");

    // A screenshot at a phone's width.
    let shot = dir.path().join("report.png");
    let out = headless(&dir.path().join("profile-shot"), &[format!("--screenshot={}", shot.display()), format!("--window-size={WIDTH},{HEIGHT}"), url]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium --screenshot failed: {stderr}");
    assert!(console_errors(&stderr).is_empty(), "console errors: {stderr}");
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}\n{stderr}", shot.display()));
    let (w, h) = png_size(&png);
    assert_eq!((w, h), (WIDTH, HEIGHT), "screenshot size");
    assert!(png.len() > 10_000, "a screenshot of a rendered page is not tiny: {} bytes", png.len());
    if let Some(keep) = std::env::var_os("VLLM_DIAG_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// Width and height from a PNG's IHDR chunk, checking the signature.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR", "not a PNG");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

/// The load test's page, from the real CPU engine's recorded sweep (fixtures/real-engine-loadtest),
/// in the browser: its charts built, the profile's limits drawn, the knee marked, no console error.
#[test]
fn the_load_test_page_renders_its_curve_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let saved = format!("{}/fixtures/real-engine-loadtest/loadtest.json", env!("CARGO_MANIFEST_DIR"));
    let page = dir.path().join("loadtest.html");
    let out = assert_cmd::Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["--no-config", "loadtest", "--from", &saved, "--html", page.to_str().unwrap()])
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("LOADTEST ") && text.contains("KNEE at 4 in flight"), "the text result still goes to stdout: {text}");
    let url = format!("file://{}", page.display());
    let dom = headless(&dir.path().join("profile-dom"), &["--dump-dom".to_string(), url.clone()]);
    let stderr = String::from_utf8_lossy(&dom.stderr);
    assert!(dom.status.success(), "chromium --dump-dom failed: {stderr}");
    assert!(console_errors(&stderr).is_empty(), "console errors: {stderr}");
    let html = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 4, "time to the first token, between tokens, throughput, the engines");
    assert_eq!(html.matches("class=\"limit\"").count(), 2, "the lab profile's two limits");
    assert!(html.contains("knee at 4 in flight") && html.contains("broke at 5 in flight"), "the knee and the first bad load marked");
    assert_eq!(html.matches("<circle").count(), 6 * 7, "a point for each of the 6 steps on each of the 7 lines");
    assert!(html.contains("KNEE at 4 in flight"), "the verdict in the text's words");
    let shot = dir.path().join("loadtest.png");
    let out = headless(&dir.path().join("profile-shot"), &[format!("--screenshot={}", shot.display()), format!("--window-size={WIDTH},{HEIGHT}"), url]);
    assert!(out.status.success(), "chromium --screenshot failed: {}", String::from_utf8_lossy(&out.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(png_size(&png), (WIDTH, HEIGHT));
}
