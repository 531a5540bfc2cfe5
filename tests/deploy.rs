//! What deploy/ ships, checked: the Kubernetes manifests validate against the Kubernetes API's
//! schemas (PyPI `kubernetes-validate`, strict: an unknown field is an error), name the image
//! scripts/image.sh builds, and give the binary arguments it accepts; the Alertmanager
//! configuration passes `amtool check-config` and points at the Service.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn manifests() -> Vec<PathBuf> {
    let dir = root().join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "deploy/kubernetes holds the serve manifests and the check Job: {files:?}");
    files
}

/// The validator scripts/kubernetes-validate-venv.sh installs (scripts/test.sh runs it), or
/// $VLLM_DIAG_KUBERNETES_VALIDATE.
fn validator() -> PathBuf {
    let path = std::env::var_os("VLLM_DIAG_KUBERNETES_VALIDATE").map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("VLLM_DIAG_TEST_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/vllm-diag-test"));
        cache.join("kubernetes-validate-venv/bin/kubernetes-validate")
    });
    assert!(
        path.exists(),
        "{} is missing: run scripts/kubernetes-validate-venv.sh (scripts/test.sh does), which installs PyPI kubernetes-validate, or set $VLLM_DIAG_KUBERNETES_VALIDATE",
        path.display()
    );
    path
}

fn validate(files: &[PathBuf]) -> (bool, String) {
    let out = Command::new(validator()).arg("--strict").args(files).output().expect("run kubernetes-validate");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_manifests_validate_against_the_kubernetes_api_schemas() {
    let files = manifests();
    let (ok, log) = validate(&files);
    assert!(ok, "kubernetes-validate --strict refused the manifests:\n{log}");
    for kind in ["secret/vllm-diag", "deployment/vllm-diag", "service/vllm-diag", "job/vllm-diag-check"] {
        assert!(log.contains(&format!("passed for resource {kind} ")), "{kind} not validated:\n{log}");
    }

    // The validator can fail: a misspelt field and a wrong type are refused.
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = std::fs::read_to_string(root().join("deploy/kubernetes/serve.yaml")).expect("serve.yaml");
    for (from, to) in [("  replicas: 1\n", "  replica: 1\n"), ("periodSeconds: 10", "periodSeconds: often")] {
        assert!(serve.contains(from), "serve.yaml no longer has {from:?}: update this test");
        let broken = common::run::write_file(dir.path(), "broken.yaml", &serve.replacen(from, to, 1));
        let (ok, log) = validate(&[broken]);
        assert!(!ok, "kubernetes-validate accepted {to:?}:\n{log}");
    }
}

/// Every `image:` value in the manifests.
fn images(text: &str) -> Vec<String> {
    text.lines().filter_map(|l| l.trim().strip_prefix("image:")).map(|v| v.trim().to_string()).collect()
}

/// The items of each container's `args:` list (one `- item` a line), in order.
fn args_lists(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "args:" {
            continue;
        }
        let mut args = Vec::new();
        while let Some(next) = lines.peek() {
            let t = next.trim();
            if t.starts_with('#') {
                lines.next();
                continue;
            }
            let Some(item) = t.strip_prefix("- ") else { break };
            // A plain scalar as it is; a quoted one without its quotes (none here holds escapes).
            let item = item.trim();
            let unquoted = ['\'', '"'].iter().find_map(|q| item.strip_prefix(*q).and_then(|i| i.strip_suffix(*q)));
            args.push(unquoted.unwrap_or(item).to_string());
            lines.next();
        }
        out.push(args);
    }
    out
}

#[test]
fn the_manifests_name_the_image_scripts_image_sh_builds_and_arguments_the_binary_accepts() {
    let out = Command::new(root().join("scripts/image.sh")).arg("--print-tag").output().expect("scripts/image.sh --print-tag");
    let tag = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(tag, format!("localhost/vllm-diag:{}", env!("CARGO_PKG_VERSION")));
    let mut seen = 0;
    for file in manifests() {
        let text = std::fs::read_to_string(&file).expect("manifest");
        for image in images(&text) {
            assert_eq!(image, tag, "{}: the image scripts/image.sh builds", file.display());
            seen += 1;
        }
        for args in args_lists(&text) {
            // Parsed by the binary itself: a usage error would be clap's ("Usage:"); what remains
            // is about the files and servers only the cluster has (exit 2 or 3, never a panic).
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let run = common::run::run(&args, &[]);
            assert!(!run.stderr.contains("Usage:") && !run.stderr.contains("unexpected argument"), "{}: {args:?}\n{}", file.display(), run.stderr);
            assert!(matches!(run.code, 2 | 3), "{}: {args:?} exited {}\n{}", file.display(), run.code, run.stderr);
            assert!(run.stderr.contains("/secrets/") || run.code == 3, "{}: {args:?}: {}", file.display(), run.stderr);
        }
    }
    assert_eq!(seen, 2, "the Deployment and the Job each name the image");
}

#[test]
fn the_alertmanager_configuration_passes_amtool_and_routes_to_the_service() {
    let config = root().join("deploy/alertmanager/alertmanager.yml");
    let out = Command::new("amtool")
        .arg("check-config")
        .arg(&config)
        .output()
        .unwrap_or_else(|e| panic!("cannot run amtool: {e}. Run scripts/test.sh, which installs it (Debian package prometheus-alertmanager)"));
    assert!(out.status.success(), "amtool check-config:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&config).expect("alertmanager.yml");
    let serve = std::fs::read_to_string(root().join("deploy/kubernetes/serve.yaml")).expect("serve.yaml");
    assert!(text.contains("url: http://vllm-diag.monitoring.svc:9095/alertmanager"), "the receiver posts to the Service's port and serve's path");
    assert!(serve.contains("port: 9095") && serve.contains("name: vllm-diag\n  namespace: monitoring"), "the Service the receiver names");
}
