//! The release archive and the crate, checked without a release build: scripts/release.sh packs
//! the binary this test build made (the release build it makes by default takes minutes; the
//! layout does not depend on the profile), and `cargo package` lists what the crate would hold.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// This test build's binary without its debug sections (`strip --strip-debug`, binutils): half
/// the size, so packing and unpacking it takes seconds; the layout checked does not depend on it.
fn packable_binary(dir: &Path) -> PathBuf {
    let out = dir.join("vllm-diag");
    let status = Command::new("strip").args(["--strip-debug", "-o"]).arg(&out).arg(env!("CARGO_BIN_EXE_vllm-diag")).status().expect("run strip (binutils)");
    assert!(status.success(), "strip --strip-debug failed");
    out
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}\n{}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_release_archive_holds_the_binary_pages_completions_licence_and_readme_with_a_checksum() {
    let out = tempfile::tempdir().expect("temp dir");
    let bin_dir = tempfile::tempdir().expect("temp dir");
    let binary = packable_binary(bin_dir.path());
    let archive = ok(Command::new(root().join("scripts/release.sh")).arg("--binary").arg(&binary).arg("--out").arg(out.path()));
    let name = format!("vllm-diag-{}-x86_64-unknown-linux-gnu", env!("CARGO_PKG_VERSION"));
    assert_eq!(archive.trim(), out.path().join(format!("{name}.tar.gz")).display().to_string());

    // The checksum file checks, and fails once the archive changes.
    ok(Command::new("sha256sum").args(["-c", &format!("{name}.tar.gz.sha256")]).current_dir(out.path()));
    let listing = ok(Command::new("tar").args(["-tzf", archive.trim()]));
    let files: Vec<&str> = listing.lines().collect();
    for f in [
        "vllm-diag",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "GLIBC.txt",
        "man/man1/vllm-diag.1",
        "man/man1/vllm-diag-explain.1",
        "man/man1/vllm-diag-rules-export.1",
        "completions/vllm-diag.bash",
        "completions/_vllm-diag",
        "completions/vllm-diag.fish",
    ] {
        assert!(files.contains(&format!("{name}/{f}").as_str()), "{f} missing from the archive: {files:?}");
    }

    ok(Command::new("tar").args(["-xzf", archive.trim(), "-C"]).arg(out.path()));
    let dir = out.path().join(&name);
    let version = ok(Command::new(dir.join("vllm-diag")).arg("--version"));
    assert_eq!(version.trim(), format!("vllm-diag {}", env!("CARGO_PKG_VERSION")));
    let glibc = std::fs::read_to_string(dir.join("GLIBC.txt")).expect("GLIBC.txt");
    assert!(glibc.contains("dynamically linked against glibc") && glibc.contains("GLIBC_2."), "{glibc}");
    let fish = std::fs::read_to_string(dir.join("completions/vllm-diag.fish")).expect("fish completions");
    assert!(fish.contains("kv-cache-pressure"), "the completions know the rules");
    // The archive is reproducible: packed again, the same bytes.
    let again = tempfile::tempdir().expect("temp dir");
    ok(Command::new(root().join("scripts/release.sh")).arg("--binary").arg(&binary).arg("--out").arg(again.path()));
    let sum = |d: &Path| std::fs::read_to_string(d.join(format!("{name}.tar.gz.sha256"))).expect("checksum");
    assert_eq!(sum(out.path()), sum(again.path()));

    std::fs::write(archive.trim(), b"changed").expect("overwrite");
    let out = Command::new("sha256sum").args(["-c", &format!("{name}.tar.gz.sha256")]).current_dir(out.path()).output().expect("sha256sum");
    assert!(!out.status.success(), "the checksum catches a changed archive");
}

#[test]
fn the_crate_package_holds_the_rule_pack_and_nothing_the_tests_use() {
    let listing = ok(Command::new(env!("CARGO")).args(["package", "--locked", "--list", "--allow-dirty", "-p", "vllm-diag"]).current_dir(root()));
    let files: Vec<&str> = listing.lines().collect();
    // Every rule file the binary compiles in (src/rules/load/builtin.rs names them).
    let builtin = std::fs::read_to_string(root().join("src/rules/load/builtin.rs")).expect("builtin.rs");
    // Each entry is `("rules/NAME.toml", include_str!(...))`: the name as the package holds it.
    let compiled: Vec<&str> =
        builtin.lines().filter_map(|l| l.trim().strip_prefix("(\"")).filter_map(|r| r.split('"').next()).filter(|n| n.starts_with("rules/")).collect();
    assert!(compiled.len() >= 10, "{compiled:?}");
    for f in compiled.iter().chain(&["src/main.rs", "src/lib.rs", "Cargo.toml", "Cargo.lock", "README.md", "LICENSE"]) {
        assert!(files.contains(f), "{f} is not in the package: {files:?}");
    }
    for f in &files {
        assert!(!f.starts_with("fixtures/") && !f.starts_with("tests/") && !f.starts_with("crates/") && !f.starts_with("benches/"), "{f} is in the package");
    }
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    for key in ["description = ", "license = ", "readme = ", "keywords = ", "categories = ", "rust-version = "] {
        assert!(manifest.contains(key), "Cargo.toml has no {key}");
    }
}
