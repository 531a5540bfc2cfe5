//! Fuzzing the rule language: the condition parser (`rules::expr::parse`), its evaluator over hostile
//! numbers, and the rule-file loader (`rules::load::load_str`). Seeds are the built-in rule pack;
//! inputs are arbitrary text and damaged copies of the seeds. The property is always the same: an
//! error that says where, never a panic.

#[path = "fuzz_support/mod.rs"]
mod support;

use proptest::prelude::*;
use vllm_diag::rules::expr::{self, Facts};
use vllm_diag::rules::load::load_str;
use vllm_diag::rules::RuleSet;

use support::{config, edit_strategy, files, mutate, read, Edit};

/// The built-in rule files, as seeds (read once).
fn rule_files() -> &'static [(String, String)] {
    static SEEDS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(load_rule_files)
}

fn load_rule_files() -> Vec<(String, String)> {
    let v: Vec<(String, String)> =
        files("rules", ".toml").into_iter().map(|p| (p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), read(&p))).collect();
    assert!(v.len() >= 3, "the built-in rule pack is missing");
    v
}

/// Every condition of the built-in rules, as seeds (read once).
fn conditions() -> &'static [String] {
    static SEEDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(load_conditions)
}

fn load_conditions() -> Vec<String> {
    let mut out = Vec::new();
    for (_, text) in rule_files().iter() {
        let Ok(doc) = text.parse::<toml::Table>() else { continue };
        for rule in doc.get("rule").and_then(|r| r.as_array()).into_iter().flatten() {
            for c in rule.get("when").and_then(|w| w.as_array()).into_iter().flatten() {
                if let Some(s) = c.as_str() {
                    out.push(s.to_string());
                }
            }
        }
    }
    out.extend(["a > 1", "not (x >= 2x baseline)", "ttft_p95 > $ttft_p95_high or queue_p95 <= 300ms", "x < 90% and y != 0.5"].map(String::from));
    out
}

/// Facts whose numbers are chosen by the fuzzer: NaN, infinities, zero, negative, huge.
struct Hostile(Vec<f64>);

impl Hostile {
    fn pick(&self, name: &str, salt: usize) -> Option<f64> {
        let h = name.bytes().fold(salt, |a, b| a.wrapping_mul(31).wrapping_add(usize::from(b)));
        if self.0.is_empty() || h % 7 == 0 {
            None
        } else {
            Some(self.0[h % self.0.len()])
        }
    }
}

impl Facts for Hostile {
    fn value(&self, signal: &str) -> Result<f64, String> {
        self.pick(signal, 1).ok_or_else(|| "missing".to_string())
    }
    fn baseline(&self, signal: &str) -> Result<f64, String> {
        self.pick(signal, 2).ok_or_else(|| "missing".to_string())
    }
    fn threshold(&self, name: &str) -> Option<f64> {
        self.pick(name, 3)
    }
    fn absent(&self, signal: &str) -> bool {
        self.pick(signal, 4).is_none()
    }
}

fn hostile_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(f64::MAX),
        any::<f64>(),
        -10.0f64..10.0,
    ]
}

fn check_condition(src: &str, numbers: &[f64]) {
    match expr::parse(src) {
        Ok(e) => {
            let (_truth, score) = expr::eval(&e, &Hostile(numbers.to_vec()));
            // A score is a strength of evidence; it may be anything but must not be NaN from a
            // comparison that held on finite numbers alone. Only the absence of a panic is required.
            let _ = score;
        }
        Err(err) => {
            assert!(err.offset <= src.chars().count() + 1, "offset {} beyond {src:?}", err.offset);
            assert!(!err.message.is_empty());
        }
    }
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn arbitrary_text_is_a_condition_or_an_error_never_a_panic(src in "\\PC{0,80}", numbers in prop::collection::vec(hostile_number(), 0..6)) {
        check_condition(&src, &numbers);
    }

    #[test]
    fn condition_shaped_text_never_panics(
        src in r"(not |\(|\)| and | or |[a-z_]{1,8}|\$[a-z_]{1,6}| [<>=!]=? | [0-9.]{1,6}(ms|s|m|%|x baseline)?|baseline|1e999| ){0,14}",
        numbers in prop::collection::vec(hostile_number(), 0..6),
    ) {
        check_condition(&src, &numbers);
    }

    #[test]
    fn damaged_built_in_conditions_never_panic(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit_strategy(), 1..5),
        numbers in prop::collection::vec(hostile_number(), 0..6),
    ) {
        let seed = pick.get(conditions());
        check_condition(&mutate(seed, &edits), &numbers);
    }

    #[test]
    fn damaged_rule_files_load_or_fail_naming_the_file(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit_strategy(), 1..6),
    ) {
        let (name, text) = pick.get(rule_files());
        let damaged = mutate(text, &edits);
        let mut set = RuleSet::default();
        if let Err(e) = load_str(&mut set, name, &damaged) {
            prop_assert!(e.to_string().contains(name.as_str()), "{}", e);
        }
    }

    #[test]
    fn arbitrary_toml_shaped_text_never_panics(src in r#"(\[\[rule\]\]\n|\[thresholds\]\n|\[\[signal\]\]\n|[a-z_]{1,8} = ("[^"\n]{0,12}"|[0-9.]{1,4}|\[("[^"\n]{0,20}",? ?){0,3}\]|true)\n){0,12}"#) {
        let mut set = RuleSet::default();
        let _ = load_str(&mut set, "fuzz.toml", &src);
    }
}

#[test]
fn every_prefix_of_every_built_in_rule_file_loads_or_fails_cleanly() {
    for (name, text) in rule_files().iter() {
        let cuts: Vec<usize> = (0..text.len()).step_by(53).filter(|i| text.is_char_boundary(*i)).collect();
        for cut in cuts {
            let mut set = RuleSet::default();
            if let Err(e) = load_str(&mut set, name, &text[..cut]) {
                assert!(e.to_string().contains(name.as_str()), "{e}");
            }
        }
    }
    let _ = mutate("", &[Edit::Truncate(3)]);
}
