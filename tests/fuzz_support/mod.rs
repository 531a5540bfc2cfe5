//! What the fuzz tests share: a fixed, bounded case count (so CI runs them in a known time), a seed
//! corpus made of real inputs from the repository, and a mutator that damages them the way
//! truncation, bit rot, hand edits and hostile servers do.
//!
//! These are property tests with proptest, not cargo-fuzz: cargo-fuzz needs a nightly toolchain and
//! this project builds with stable only. Proptest gives the same guarantee for what matters here
//! (no input makes the code panic) with shrinking to a minimal failing input, and runs inside
//! `cargo test`. Set `VLLM_DIAG_FUZZ_CASES` for a longer local run.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::Config;

/// Cases per property: the default keeps the whole fuzz suite to seconds in CI.
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("VLLM_DIAG_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_cases);
    Config { cases, max_shrink_iters: 2000, ..Config::default() }
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file below `dir` (relative to the repository) whose name ends with `ext`, sorted.
pub fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.to_string_lossy().ends_with(ext)).collect())
        .unwrap_or_default();
    out.sort();
    out
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("corpus file {}: {e}", p.display()))
}

/// One edit to a text.
#[derive(Debug, Clone)]
pub enum Edit {
    /// Cut everything from here on.
    Truncate(usize),
    /// Remove up to n characters here.
    Delete(usize, usize),
    /// Insert this text here.
    Insert(usize, String),
    /// Replace the character here.
    Replace(usize, char),
    /// Repeat the slice here n times (duplicated lines, runaway nesting).
    Repeat(usize, usize, u8),
}

/// Characters that matter to the grammars under test, and some that should never be there.
const SPECIAL: &[&str] = &[
    "\"",
    "'",
    "`",
    "\\",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ",",
    ":",
    "=",
    "!",
    "~",
    "<",
    ">",
    "#",
    "\n",
    "\r\n",
    "\t",
    " ",
    "\0",
    "\u{7f}",
    "\u{feff}",
    "é",
    "😀",
    "NaN",
    "+Inf",
    "-Inf",
    "1e309",
    "-0",
    "0x1p3",
    "null",
    "true",
    "{}",
    "[]",
    "\"status\":",
    "\"data\":",
    "and",
    "or",
    "not",
    "baseline",
    "2x",
    "$",
    "%",
    "ms",
    "# EOF",
    "# TYPE",
    "# HELP",
];

pub fn edit_strategy() -> impl Strategy<Value = Edit> {
    let pos = any::<usize>();
    prop_oneof![
        pos.prop_map(Edit::Truncate),
        (pos, 1usize..40).prop_map(|(p, n)| Edit::Delete(p, n)),
        (pos, prop::sample::select(SPECIAL)).prop_map(|(p, s)| Edit::Insert(p, s.to_string())),
        (pos, "\\PC{1,8}").prop_map(|(p, s)| Edit::Insert(p, s)),
        (pos, any::<char>()).prop_map(|(p, c)| Edit::Replace(p, c)),
        (pos, 1usize..20, 2u8..20).prop_map(|(p, n, k)| Edit::Repeat(p, n, k)),
    ]
}

/// Apply edits; positions are taken modulo the text's length and moved to character boundaries.
pub fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut s = text.to_string();
    let at = |s: &str, p: usize| -> usize {
        if s.is_empty() {
            return 0;
        }
        let mut i = p % (s.len() + 1);
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let end_of = |s: &str, i: usize, n: usize| -> usize { s[i..].char_indices().nth(n).map_or(s.len(), |(k, _)| i + k) };
    for e in edits {
        match e {
            Edit::Truncate(p) => {
                let i = at(&s, *p);
                s.truncate(i);
            }
            Edit::Delete(p, n) => {
                let i = at(&s, *p);
                let j = end_of(&s, i, *n);
                s.replace_range(i..j, "");
            }
            Edit::Insert(p, t) => {
                let i = at(&s, *p);
                s.insert_str(i, t);
            }
            Edit::Replace(p, c) => {
                let i = at(&s, *p);
                let j = end_of(&s, i, 1);
                s.replace_range(i..j, &c.to_string());
            }
            Edit::Repeat(p, n, k) => {
                let i = at(&s, *p);
                let j = end_of(&s, i, *n);
                let piece = s[i..j].to_string();
                s.insert_str(j, &piece.repeat(usize::from(*k)));
            }
        }
        if s.len() > 1 << 20 {
            s.truncate(at(&s, 1 << 20));
        }
    }
    s
}
