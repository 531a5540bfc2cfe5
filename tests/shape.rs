//! The crate's shape, checked: the layer order written in `src/lib.rs` ([`vllm_diag::LAYERS`]) holds
//! for every `crate::` path in the sources, no function of the product is longer than about 150
//! lines, and nothing in src, tests, scripts, benches, crates or .ci names a path outside the
//! repository (a fresh clone is the whole project). All read the source text, so they need nothing
//! but the tree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest function allowed outside tests, in lines (the issue's "about 150").
const MAX_FN_LINES: usize = 150;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comment lines and trailing `// ...` comments (a `//` inside a string
/// such as a URL stays: it follows no whitespace).
fn code(text: &str) -> String {
    text.lines().map(|l| if l.trim_start().starts_with("//") { "" } else { l.split(" // ").next().unwrap_or("") }).collect::<Vec<_>>().join("\n")
}

/// The top-level modules a source text names through `crate::`, including grouped imports
/// (`use crate::{a::x, b}`).
fn crate_refs(text: &str) -> Vec<String> {
    let text = code(text);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `vllm_diag_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Up to the matching brace; each item's first segment is a module.
            let (mut depth, mut end) = (1, group.len());
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = j;
                    break;
                }
            }
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain(std::iter::once(',')) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let first: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                        if !first.is_empty() && first != "self" {
                            out.push(first);
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The top-level module a file under `src/` belongs to (`src/explain/plan.rs` -> `explain`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// Every path that breaks the order: (file, module used, why).
fn violations(layers: &[&str], files: &[(String, String, String)]) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = layers.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let mut out = Vec::new();
    for (file, module, text) in files {
        let Some(&mine) = rank.get(module.as_str()) else {
            out.push(format!("{file}: module `{module}` is not in LAYERS (src/lib.rs): place it in the layer order"));
            continue;
        };
        for used in crate_refs(text) {
            match rank.get(used.as_str()) {
                Some(&theirs) if theirs > mine => {
                    out.push(format!("{file}: `{module}` uses `crate::{used}`, which stands above it in LAYERS: move the shared piece down, or pass it in"))
                }
                _ => {}
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn sources() -> (PathBuf, Vec<(String, String, String)>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files = paths
        .iter()
        .filter_map(|p| {
            let module = module_of(&src, p)?;
            Some((p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string(), module, std::fs::read_to_string(p).unwrap()))
        })
        .collect();
    (src, files)
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let (_, files) = sources();
    let v = violations(vllm_diag::LAYERS, &files);
    assert!(v.is_empty(), "the layer order in src/lib.rs is broken:\n{}", v.join("\n"));
}

#[test]
fn every_top_level_module_is_placed_in_the_layer_order() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let declared: Vec<String> = lib.lines().filter_map(|l| l.trim().strip_prefix("pub mod ").map(|m| m.trim_end_matches(';').to_string())).collect();
    let mut placed: Vec<String> = vllm_diag::LAYERS.iter().map(|s| s.to_string()).collect();
    let mut declared_sorted = declared.clone();
    declared_sorted.sort();
    placed.sort();
    assert_eq!(declared_sorted, placed, "src/lib.rs declares these modules; LAYERS must list exactly them");
}

#[test]
fn the_check_catches_an_upward_import_a_grouped_one_and_an_unplaced_module() {
    let layers = ["low", "mid", "high"];
    let f = |file: &str, module: &str, text: &str| (file.to_string(), module.to_string(), text.to_string());
    let files = vec![
        f("src/low.rs", "low", "use crate::mid::Thing;\n"),
        f("src/mid.rs", "mid", "use crate::{low::x, high::{a, b}};\n// crate::high in a comment is fine\n"),
        f("src/high.rs", "high", "use crate::low;\nfn f() { crate::mid::g(); }\n"),
        f("src/new.rs", "new", "use crate::low;\n"),
    ];
    let v = violations(&layers, &files);
    assert_eq!(v.len(), 3, "{v:#?}");
    assert!(v[0].contains("src/low.rs") && v[0].contains("crate::mid"), "{v:#?}");
    assert!(v[1].contains("src/mid.rs") && v[1].contains("crate::high"), "{v:#?}");
    assert!(v[2].contains("`new` is not in LAYERS"), "{v:#?}");
}

/// Functions longer than `max` lines outside `#[cfg(test)]` modules: (file:line, name, lines).
fn long_functions(file: &str, text: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        if l.starts_with("#[cfg(test)]") && lines.get(i + 1).is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{')) {
            break; // inline test modules sit at the end of a file (a `mod x;` declared for tests is a file of its own)
        }
        let head = l.trim_start_matches("pub(crate) ").trim_start_matches("pub(super) ").trim_start_matches("pub ").trim_start_matches("async ");
        if let Some(rest) = head.strip_prefix("fn ") {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let (mut depth, mut opened, mut j) = (0i32, false, i);
            while j < lines.len() {
                let code = code(lines[j]);
                let code = strip_literals(&code);
                for c in code.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                    break;
                }
                j += 1;
            }
            let n = j - i + 1;
            if n > max {
                out.push(format!("{file}:{} fn {name} is {n} lines", i + 1));
            }
        }
        i += 1;
    }
    out
}

/// A line with its string and char literals emptied, so braces inside them do not count.
fn strip_literals(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '\'' if chars.clone().nth(1) == Some('\'') || chars.peek() == Some(&'\\') => {
                // A char literal ('{' or '\n'); a lifetime ('a) has no closing quote next.
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                }
                out.push_str("' '");
            }
            _ => out.push(c),
        }
    }
    out
}

/// The files that are test modules of their own: a `mod x;` under `#[cfg(test)]` in its parent
/// (`src/render/mod.rs` declaring `fixtures` -> `src/render/fixtures.rs`).
fn test_module_files(files: &[(String, String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (file, _, text) in files {
        let lines: Vec<&str> = text.lines().collect();
        for w in lines.windows(2) {
            if w[0].trim() != "#[cfg(test)]" {
                continue;
            }
            let decl = w[1].trim().trim_start_matches("pub(crate) ").trim_start_matches("pub(super) ").trim_start_matches("pub ");
            let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) else { continue };
            let dir = match file.rsplit_once('/') {
                Some((dir, "mod.rs" | "lib.rs")) => dir.to_string(),
                _ => file.trim_end_matches(".rs").to_string(),
            };
            out.push(format!("{dir}/{name}.rs"));
        }
    }
    out
}

#[test]
fn no_function_of_the_product_is_longer_than_about_150_lines() {
    let (_, files) = sources();
    let tests = test_module_files(&files);
    let long: Vec<String> =
        files.iter().filter(|(file, _, _)| !tests.contains(file)).flat_map(|(file, _, text)| long_functions(file, text, MAX_FN_LINES)).collect();
    assert!(long.is_empty(), "split these into named steps:\n{}", long.join("\n"));
}

#[test]
fn the_length_check_counts_a_long_function_and_skips_tests() {
    let body = "    let x = '{';\n".repeat(10);
    let text = format!(
        "fn short() {{\n{body}}}\n\npub async fn long() {{\n{}}}\n#[cfg(test)]\nmod tests {{\n    fn in_tests() {{\n{}    }}\n}}\n",
        body.repeat(3),
        body.repeat(9)
    );
    let long = long_functions("x.rs", &text, 20);
    assert_eq!(long, vec!["x.rs:14 fn long is 32 lines".to_string()]);
}

// ---- The repository is the whole project ----

/// The folders whose files may reach nothing outside the repository: the issue's six, and the
/// example and the rule pack, which the tests build and read as well.
const SELF_CONTAINED: &[&str] = &["src", "tests", "scripts", "benches", "crates", ".ci", "examples", "rules"];

/// Paths outside the repository that are not ours to judge: (file, path as written, why it is fine).
const ALLOWED_UP_PATHS: &[(&str, &str, &str)] =
    &[("tests/config.rs", concat!("..", "/team-ca.pem"), "written into a config file in the test's temporary directory, and resolved against that file")];

/// The folder of real captures that used to sit beside the checkout, by name: written in two
/// pieces so that this file does not name it itself.
const OLD_CAPTURES: &str = concat!("shared", "/real-metrics");
/// Cargo's variable for a crate's folder, and the call that leaves a folder, also in pieces (the
/// examples below go up with them).
const MANIFEST_DIR: &str = concat!("CARGO_", "MANIFEST_DIR");
const PARENT: &str = concat!(".parent", "()");

/// Every file under `dir` (any kind: Rust, shell, Python, snapshots), build output left out.
fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !matches!(name, "target" | "__pycache__") {
                all_files(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

/// The lowest level a relative path reaches below where it starts: up twice then into `a` is -2,
/// into `a`, up and into `b` is 0; a leading separator counts for nothing (`concat!(dir, "/x")`).
fn lowest_level(path: &str) -> i64 {
    let (mut level, mut lowest) = (0i64, 0i64);
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                level -= 1;
                lowest = lowest.min(level);
            }
            _ => level += 1,
        }
    }
    lowest
}

/// The path-like words of a line that go up a directory: a `..` component in a word holding a path
/// separator (up then into `x`; a script's `dirname "$0"` then up), or `..` quoted alone as a call's
/// argument (`Path::new` of it). Rust's `..` (ranges, `{ a, .. }`, `[..]`) is neither.
fn up_paths(line: &str) -> Vec<&str> {
    let is_delim = |c: char| c.is_whitespace() || "\"'`(),;=<>[]{}|\\".contains(c);
    let alone = concat!("(\"", "..", "\")");
    let mut out = Vec::new();
    for word in line.split(is_delim) {
        let has_up = word.split('/').any(|p| p == "..");
        if has_up && (word.contains('/') || (word == ".." && line.contains(alone))) {
            out.push(word);
        }
    }
    out
}

/// Where a relative path on this line starts from, as a folder relative to the repository root:
/// the file's own folder for `include_str!`, `#[path]` and a script's `dirname "$0"`; a Rust file's
/// crate root otherwise (`CARGO_MANIFEST_DIR`, and a test's working directory); a manifest's own
/// folder; the repository root for anything else (the scripts `cd` there first).
fn anchor(root: &Path, file: &Path, line: &str) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let file_relative = ["include_str!", "include_bytes!", "include!(", "#[path", "dirname", "BASH_SOURCE", "__file__"];
    if file_relative.iter().any(|m| line.contains(m)) || file.file_name().is_some_and(|n| n == "Cargo.toml") {
        return dir;
    }
    if file.extension().is_some_and(|e| e == "rs") {
        return dir.ancestors().find(|d| root.join(d).join("Cargo.toml").is_file()).unwrap_or(Path::new("")).to_path_buf();
    }
    PathBuf::new()
}

/// Every place in `text` (the file `file`, relative to the repository `root`) that names something
/// outside the repository, and how many paths going up it found that stay inside.
fn outside_paths(root: &Path, file: &Path, text: &str) -> (Vec<String>, usize) {
    let (mut bad, mut inside) = (Vec::new(), 0);
    for (i, line) in text.lines().enumerate() {
        let at = format!("{}:{}", file.display(), i + 1);
        if line.contains(OLD_CAPTURES) {
            bad.push(format!("{at}: names the captures folder outside the repository: {}", line.trim()));
        }
        // The crate's folder (its manifest's), then its parent: each is one level up.
        let parents = if line.contains(MANIFEST_DIR) { line.matches(PARENT).count() as i64 } else { 0 };
        let ups = up_paths(line);
        if parents == 0 && ups.is_empty() {
            continue;
        }
        let depth = anchor(root, file, line).components().count() as i64;
        if parents > 0 {
            if depth - parents < 0 {
                bad.push(format!("{at}: CARGO_MANIFEST_DIR's parent is outside the repository: {}", line.trim()));
            } else {
                inside += 1;
            }
        }
        for path in ups {
            let allowed = ALLOWED_UP_PATHS.iter().any(|(f, p, _)| file == Path::new(f) && path == *p);
            if depth + lowest_level(path) - parents < 0 && !allowed {
                bad.push(format!("{at}: `{path}` leads outside the repository: {}", line.trim()));
            } else {
                inside += 1;
            }
        }
    }
    (bad, inside)
}

#[test]
fn nothing_in_the_project_reaches_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut bad, mut inside, mut scanned) = (Vec::new(), 0, 0);
    for top in SELF_CONTAINED {
        let mut files = Vec::new();
        all_files(&root.join(top), &mut files);
        assert!(!files.is_empty(), "{top}/ holds no files: the check would pass without reading anything");
        for p in files {
            let bytes = std::fs::read(&p).unwrap();
            let (b, n) = outside_paths(root, p.strip_prefix(root).unwrap(), &String::from_utf8_lossy(&bytes));
            bad.extend(b);
            inside += n;
            scanned += 1;
        }
    }
    assert!(scanned >= 150, "only {scanned} files scanned");
    // The paths that go up and stay inside (the rule files' include_str!, the sim crate's fixtures,
    // the scripts' `cd` to their parent folder) are found, so the patterns do match.
    assert!(inside >= 15, "only {inside} paths going up found: the patterns no longer match anything");
    assert!(bad.is_empty(), "the repository must be the whole project; copy what these need into it:\n{}", bad.join("\n"));
}

#[test]
fn the_outside_check_catches_the_old_capture_paths_and_keeps_paths_inside() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // In the examples `@` stands for the parent folder's `..` and `~` for a call of `PARENT`, so
    // that this file names no path outside the repository itself.
    let check = |file: &str, line: &str| outside_paths(root, Path::new(file), &line.replace('@', "..").replace('~', PARENT));
    let sibling = "@/shared";
    for (file, line) in [
        ("src/prom/exposition.rs", format!(r#"let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("{sibling}/real-metrics").join(name);"#)),
        ("tests/x.rs", r#"let d = concat!(env!("CARGO_MANIFEST_DIR"), "/@/data");"#.to_string()),
        ("tests/x.rs", r#"let d = Path::new(env!("CARGO_MANIFEST_DIR"))~.unwrap().join("data");"#.to_string()),
        ("tests/x.rs", r#"let d = Path::new("@").join("data");"#.to_string()),
        ("tests/x.rs", format!("//! Every capture in {sibling}, loaded")),
        ("tests/x.rs", format!("let f = \"/work/{OLD_CAPTURES}/a.txt\";")),
        ("crates/sim/src/tests.rs", r#"Path::new(env!("CARGO_MANIFEST_DIR")).join("@/@/@/fixtures")"#.to_string()),
        ("crates/sim/src/tests.rs", r#"Path::new(env!("CARGO_MANIFEST_DIR"))~.unwrap()~.unwrap()~"#.to_string()),
        ("src/rules/load.rs", r#"include_str!("@/@/@/rules/signals.toml")"#.to_string()),
        ("scripts/x.sh", format!("cat {sibling}/x")),
        ("scripts/x.sh", r#"cd "$(dirname "$0")/@/@""#.to_string()),
        (".ci/run", "exec @/other/run".to_string()),
    ] {
        let (bad, _) = check(file, &line);
        assert!(!bad.is_empty(), "{file}: {line}: not caught");
    }
    for (file, line) in [
        ("crates/sim/src/tests.rs", r#"Path::new(env!("CARGO_MANIFEST_DIR")).join("@/@/fixtures/scenarios")"#),
        ("crates/sim/src/tests/events.rs", r#"Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("@/@/fixtures/scenarios/{name}.toml"))"#),
        ("src/rules/load.rs", r#"("rules/signals.toml", include_str!("@/@/rules/signals.toml")),"#),
        ("scripts/test.sh", r#"cd "$(dirname "$0")/@""#),
        ("crates/sim/Cargo.toml", r#"vllm-diag = { path = "@/@" }"#),
    ] {
        let (bad, inside) = check(file, line);
        assert!(bad.is_empty(), "{file}: {line}: {bad:#?}");
        assert_eq!(inside, 1, "{file}: {line}");
    }
    // A path inside the repository does not go up, and Rust's own `..` is no path.
    for (file, line) in [
        ("tests/x.rs", r#"Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-metrics")"#),
        ("src/a.rs", r#"let Foo { a, .. } = x; let y = &s[..]; for i in 0..=3 {} g(..); "a...b"; Foo { ..Default::default() }"#),
        ("src/a.rs", r#"match part { "" | "." => {} ".." => up(), _ => down() }"#),
    ] {
        let (bad, inside) = check(file, line);
        assert!(bad.is_empty() && inside == 0, "{file}: {line}: {bad:#?} {inside}");
    }
}

// ---------------------------------------------------------------------------------------------------
// Completeness: every rule has its test case and its near miss, every module its line in
// docs/architecture.md, the rules table its rules, and no product file grows past about 700 lines.
// ---------------------------------------------------------------------------------------------------

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn toml_files(dir: &Path) -> Vec<(String, toml::Value)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "toml")).collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let value: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), value)
        })
        .collect()
}

/// The built-in pack's rules, from its files: (id, core).
fn pack_rules() -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (_, v) in toml_files(&root().join("rules")) {
        for r in v.get("rule").and_then(|r| r.as_array()).into_iter().flatten() {
            let id = r.get("id").and_then(|i| i.as_str()).expect("every rule has an id").to_string();
            out.push((id, r.get("core").and_then(|c| c.as_bool()).unwrap_or(false)));
        }
    }
    out.sort();
    out
}

/// The rules some `rules test` case (rules/tests/*.toml) expects to fire.
fn rules_tested_firing() -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, v) in toml_files(&root().join("rules/tests")) {
        for t in v.get("test").and_then(|t| t.as_array()).into_iter().flatten() {
            let findings = t.get("expect").and_then(|e| e.get("findings")).and_then(|f| f.as_array());
            for f in findings.into_iter().flatten() {
                if let Some(rule) = f.get("rule").and_then(|r| r.as_str()) {
                    out.entry(rule.to_string()).or_default().push(file.clone());
                }
            }
        }
    }
    out
}

#[test]
fn every_rule_has_a_rules_test_case_that_expects_it_to_fire() {
    let tested = rules_tested_firing();
    let missing: Vec<String> = pack_rules().into_iter().map(|(id, _)| id).filter(|id| !tested.contains_key(id)).collect();
    assert!(
        missing.is_empty(),
        "these rules have no case in rules/tests/*.toml that expects them to fire (a test whose series make the rule fire, \
         with `findings = [{{ rule = \"ID\", ... }}]`): {}",
        missing.join(", ")
    );
}

/// Rules that have no generated near miss yet: a scenario in fixtures/scenarios/ (a `*-near.toml`)
/// whose `[expect] absent` names the rule, its incident brought close to the rule's bar and left
/// under it. Each needs an incident kind in the generator (crates/sim) that can come close to the
/// rule without crossing it; until one exists it is named here, so the gap is written down, and the
/// check fails when a listed rule gains a near miss (take it off the list then) or a new rule has
/// none.
const NO_NEAR_MISS_YET: &[&str] = &[];

/// For each rule, the near-miss scenarios that name it as absent.
fn near_misses() -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, v) in toml_files(&root().join("fixtures/scenarios")) {
        if !file.ends_with("-near.toml") {
            continue;
        }
        let absent = v.get("expect").and_then(|e| e.get("absent")).and_then(|a| a.as_array());
        for rule in absent.into_iter().flatten().filter_map(|r| r.as_str()) {
            out.entry(rule.to_string()).or_default().push(file.clone());
        }
    }
    out
}

#[test]
fn every_rule_has_a_generated_near_miss_or_is_listed_without_one() {
    let near = near_misses();
    let rules: Vec<String> = pack_rules().into_iter().map(|(id, _)| id).collect();
    let unlisted: Vec<&String> = rules.iter().filter(|id| !near.contains_key(*id) && !NO_NEAR_MISS_YET.contains(&id.as_str())).collect();
    assert!(
        unlisted.is_empty(),
        "these rules have no near-miss scenario (fixtures/scenarios/*-near.toml with the rule in `[expect] absent`): {unlisted:?}; \
         add one, or name the rule in NO_NEAR_MISS_YET with why"
    );
    let stale: Vec<&&str> = NO_NEAR_MISS_YET.iter().filter(|id| near.contains_key(**id) || !rules.iter().any(|r| r == *id)).collect();
    assert!(stale.is_empty(), "NO_NEAR_MISS_YET names rules that have a near miss now, or no longer exist: {stale:?}");
}

/// docs/rules.md's table lists exactly the pack's rules, and marks exactly its core ones (the
/// generator and its test, tests/docs.rs, keep the wording; this reads the rule files themselves).
#[test]
fn the_rules_table_in_the_docs_lists_every_rule_and_its_core_mark() {
    let page = std::fs::read_to_string(root().join("docs/rules.md")).unwrap();
    let start = page.find("<!-- rules table -->").expect("docs/rules.md marks its rules table");
    let end = page[start..].find("<!-- end of rules table -->").expect("and its end") + start;
    let mut table: Vec<(String, bool)> = page[start..end]
        .lines()
        .filter_map(|l| {
            let id = l.strip_prefix("| `")?.split('`').next()?.to_string();
            Some((id, l.trim_end().ends_with("| core |")))
        })
        .collect();
    table.sort();
    assert_eq!(
        table,
        pack_rules(),
        "docs/rules.md's table (id, core) differs from rules/*.toml: VLLM_DIAG_UPDATE_DOCS=1 cargo test --features servers --test docs rewrites it"
    );
}

/// The layout block of docs/architecture.md: each entry's path (`src/explain/`) and its text.
fn layout_entries(doc: &str) -> Vec<(String, String)> {
    let block = doc.split("```").find(|b| b.contains("src/main.rs")).expect("docs/architecture.md has its layout block");
    let mut out: Vec<(String, String)> = Vec::new();
    for line in block.lines() {
        if line.starts_with(' ') {
            if let Some(last) = out.last_mut() {
                last.1.push(' ');
                last.1.push_str(line.trim());
            }
        } else if let Some((path, rest)) = line.split_once(' ') {
            out.push((path.to_string(), rest.trim().to_string()));
        }
    }
    out
}

/// The src files docs/architecture.md does not name: `src/x.rs` and `src/x/` as entries of their
/// own, and every file under `src/x/` (`y.rs`, or `y/` for a folder, and `z.rs` for its files)
/// named in the entry of `src/x/` (a `mod.rs` is its folder).
fn undocumented(entries: &[(String, String)], files: &[String]) -> Vec<String> {
    let named = |entry: &str, word: &str| {
        entries.iter().any(|(p, text)| {
            p == entry && text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '/')).any(|w| w.trim_end_matches('.') == word || w == word)
        })
    };
    let mut out = Vec::new();
    for f in files {
        let parts: Vec<&str> = f.split('/').collect(); // ["src", "x.rs"] or ["src", "x", ..., "y.rs"]
        if parts.len() == 2 {
            if !entries.iter().any(|(p, _)| p == f) && !matches!(parts[1], "lib.rs") {
                out.push(f.clone());
            }
            continue;
        }
        let top = format!("src/{}/", parts[1]);
        if !entries.iter().any(|(p, _)| *p == top) {
            out.push(format!("{f} (no entry {top})"));
            continue;
        }
        let rest = &parts[2..];
        let ok = match rest {
            ["mod.rs"] => true,
            [file] => named(&top, file),
            [dir, "mod.rs"] => named(&top, &format!("{dir}/")),
            [dir, file] => named(&top, &format!("{dir}/")) && named(&top, file),
            _ => false,
        };
        if !ok {
            out.push(f.clone());
        }
    }
    out
}

#[test]
fn every_src_module_is_named_in_the_architecture_doc() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let entries = layout_entries(&doc);
    let mut paths = Vec::new();
    rust_files(&root().join("src"), &mut paths);
    let files: Vec<String> = paths.iter().map(|p| p.strip_prefix(root()).unwrap().display().to_string()).collect();
    let missing = undocumented(&entries, &files);
    assert!(missing.is_empty(), "docs/architecture.md's layout block does not name these modules:\n{}", missing.join("\n"));
}

#[test]
fn the_doc_check_finds_a_missing_file_and_accepts_a_named_one() {
    let entries = layout_entries("```\nsrc/main.rs  thin\nsrc/rules/   load/ (model.rs, the pack),\n             eval.rs\n```");
    let files =
        ["src/main.rs", "src/rules/mod.rs", "src/rules/eval.rs", "src/rules/load/mod.rs", "src/rules/load/model.rs", "src/rules/expr.rs", "src/units.rs"]
            .map(String::from);
    assert_eq!(undocumented(&entries, &files), vec!["src/rules/expr.rs".to_string(), "src/units.rs".to_string()]);
}

/// Longest product file, in lines (the issue's "about 700"), without its inline `#[cfg(test)] mod tests { ... }`.
const MAX_FILE_LINES: usize = 700;

/// Product files allowed over [`MAX_FILE_LINES`], each with why it is not split yet.
const LONG_FILES: &[(&str, &str)] = &[];

fn product_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.windows(2).position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod tests {")).unwrap_or(lines.len());
    end
}

/// The product's files and the simulator's, with the test modules in files of their own (and the
/// files under them) left out.
fn product_files() -> Vec<(String, String)> {
    let mut all = Vec::new();
    for dir in ["src", "crates/sim/src"] {
        let mut paths = Vec::new();
        rust_files(&root().join(dir), &mut paths);
        for p in paths {
            let rel = p.strip_prefix(root()).unwrap().display().to_string();
            all.push((rel, String::new(), std::fs::read_to_string(&p).unwrap()));
        }
    }
    let tests = test_module_files(&all);
    let is_test = |rel: &str| tests.iter().any(|t| rel == t || rel.starts_with(&format!("{}/", t.trim_end_matches(".rs"))));
    all.into_iter().filter(|(rel, _, _)| !is_test(rel)).map(|(rel, _, text)| (rel, text)).collect()
}

#[test]
fn no_product_file_is_longer_than_about_700_lines_without_a_reason() {
    let files = product_files();
    assert!(files.iter().any(|(f, _)| f == "crates/sim/src/lib.rs") && !files.iter().any(|(f, _)| f.starts_with("crates/sim/src/tests")));
    let mut long = Vec::new();
    for (rel, text) in &files {
        let n = product_lines(text);
        if n > MAX_FILE_LINES && !LONG_FILES.iter().any(|(f, _)| f == rel) {
            long.push(format!("{rel}: {n} lines"));
        }
    }
    let stale: Vec<&str> =
        LONG_FILES.iter().map(|(f, _)| *f).filter(|f| std::fs::read_to_string(root().join(f)).map_or(true, |t| product_lines(&t) <= MAX_FILE_LINES)).collect();
    assert!(stale.is_empty(), "LONG_FILES names files that are gone or no longer long: {stale:?}");
    assert!(
        long.is_empty(),
        "product files over {MAX_FILE_LINES} lines: split them along their concerns, or give the reason in LONG_FILES:\n{}",
        long.join("\n")
    );
}

/// The fields that carry sentences about findings (a step's, a note's, a card's words) ...
const SENTENCE_FIELDS: &[&str] = &["text", "summary", "title", "line", "arithmetic", "basis", "caveat", "tradeoff", "header", "words"];
/// ... and the string methods that would search or take apart what another layer worded.
const SEARCHES: &[&str] = &[
    "contains",
    "starts_with",
    "ends_with",
    "find",
    "rfind",
    "split",
    "splitn",
    "rsplit",
    "split_once",
    "rsplit_once",
    "replace",
    "replacen",
    "strip_prefix",
    "strip_suffix",
    "trim_start_matches",
    "trim_end_matches",
    "matches",
];
/// Where taking text apart is the job: the wording modules themselves, and parsers of what users
/// and servers send (a PromQL token's text is not a sentence).
const MAY_READ_TEXT: &[&str] = &["src/report/words.rs", "src/report/steps.rs", "src/local/parse.rs"];

/// Product lines that search or split a sentence field (`f.summary.contains("...")`,
/// `step.text().starts_with(...)`), outside inline test modules.
fn sentence_reads(file: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim_start();
        if l.starts_with("#[cfg(test)]") && text.lines().nth(i + 1).is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{')) {
            break;
        }
        let code = code(line);
        for field in SENTENCE_FIELDS {
            for call in [format!(".{field}."), format!(".{field}()."), format!(".{field}.as_str()."), format!(".{field}().as_str().")] {
                let mut rest = code.as_str();
                while let Some(at) = rest.find(&call) {
                    let after = &rest[at + call.len()..];
                    let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if SEARCHES.contains(&name.as_str()) && after[name.len()..].starts_with('(') {
                        out.push(format!("{file}:{}: {}", i + 1, line.trim()));
                    }
                    rest = after;
                }
            }
        }
    }
    out
}

#[test]
fn no_layer_searches_or_splits_the_sentences_another_layer_worded() {
    let (_, files) = sources();
    let tests = test_module_files(&files);
    let found: Vec<String> = files
        .iter()
        .filter(|(file, _, _)| !tests.contains(file) && !MAY_READ_TEXT.contains(&file.as_str()) && !file.ends_with("_tests.rs") && !file.ends_with("/tests.rs"))
        .flat_map(|(file, _, text)| sentence_reads(file, text))
        .collect();
    assert!(
        found.is_empty(),
        "facts travel as types and are worded once (src/report/words.rs, steps.rs); these lines search or split a sentence instead of reading the field it came from:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_sentence_check_catches_a_search_and_skips_tests_and_other_fields() {
    let src = "fn f(x: &X) -> bool {\n    x.summary.contains(\"ended \") || x.step.text().starts_with(\"Not a\")\n}\nfn g(t: &T) -> bool { t.query.contains(\"rate\") }\n#[cfg(test)]\nmod tests {\n    fn h(x: &X) { assert!(x.text.contains(\"a\")); }\n}\n";
    let found = sentence_reads("src/x.rs", src);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|f| f.starts_with("src/x.rs:2:")), "{found:?}");
}

/// Lines of the pipeline's stages (src/explain/) that word a finding's sentence themselves
/// (`text: format!(...)`, `f.summary = format!(...)`) instead of leaving it to the wording module.
fn stage_wording(file: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]")
            && text.lines().nth(i + 1).is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        let code = code(line);
        if SENTENCE_FIELDS
            .iter()
            .any(|f| [format!("{f}: format!("), format!(".{f} = format!("), format!(".{f}.push_str(")].iter().any(|p| code.contains(p.as_str())))
        {
            out.push(format!("{file}:{}: {}", i + 1, line.trim()));
        }
    }
    out
}

#[test]
fn the_stages_leave_a_findings_sentences_to_the_wording_module() {
    let (_, files) = sources();
    let tests = test_module_files(&files);
    let found: Vec<String> = files
        .iter()
        .filter(|(file, _, _)| file.starts_with("src/explain/") && !tests.contains(file) && !file.ends_with("_tests.rs"))
        .flat_map(|(file, _, text)| stage_wording(file, text))
        .collect();
    assert!(found.is_empty(), "explain decides facts; src/report/words.rs words them:\n{}", found.join("\n"));
    let caught = stage_wording("src/explain/x.rs", "fn f(n: &mut Note) {\n    n.text = format!(\"began {}\", 1);\n}\n");
    assert_eq!(caught.len(), 1, "the check catches a stage wording a sentence: {caught:?}");
}

/// A file's module path (`src/explain/moved/reads.rs` -> explain, moved, reads; `mod.rs` is its
/// directory's module; `lib.rs` the crate).
fn module_path(file: &str) -> Vec<String> {
    let rel = file.trim_start_matches("src/").trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Every module path a file's product code names through `crate::`, `super::` (any number) or a
/// grouped import of either, resolved from the file's own module.
fn named_paths(own: &[String], text: &str) -> Vec<Vec<String>> {
    let re = regex::Regex::new(r"\b(crate|super)((?:::super)*)::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)").unwrap();
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") && lines.get(i + 1).is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        let code = code(line);
        for c in re.captures_iter(&code) {
            let base: Vec<String> = if &c[1] == "crate" {
                Vec::new()
            } else {
                let up = 1 + c[2].matches("super").count();
                own[..own.len().saturating_sub(up)].to_vec()
            };
            let tail = &c[3];
            let items: Vec<&str> = match tail.strip_prefix('{') {
                Some(group) => group.trim_end_matches('}').split(',').map(str::trim).filter(|s| !s.is_empty() && *s != "self").collect(),
                None => vec![tail],
            };
            for item in items {
                let mut path = base.clone();
                path.extend(item.split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
                out.push(path);
            }
        }
    }
    out
}

/// Edges between sibling modules, at every level of the tree: a file in `explain/hops.rs` naming
/// `super::plan::X` is hops -> plan under explain; a file under `explain/moved/` naming
/// `crate::explain::plan` is moved -> plan there too. A module and its own parent or child do not
/// count (a child using its parent's items is how Rust modules are built).
fn sibling_edges(files: &[(String, String)]) -> BTreeMap<Vec<String>, std::collections::BTreeSet<(String, String)>> {
    let modules: std::collections::BTreeSet<Vec<String>> = files
        .iter()
        .flat_map(|(f, _)| {
            let p = module_path(f);
            (0..=p.len()).map(move |n| p[..n].to_vec())
        })
        .collect();
    let mut edges: BTreeMap<Vec<String>, std::collections::BTreeSet<(String, String)>> = BTreeMap::new();
    for (file, text) in files {
        let own = module_path(file);
        for target in named_paths(&own, text) {
            let common = own.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let (Some(a), Some(b)) = (own.get(common), target.get(common)) else { continue };
            let level = own[..common].to_vec();
            let mut sibling = level.clone();
            sibling.push(b.clone());
            if modules.contains(&sibling) {
                edges.entry(level).or_default().insert((a.clone(), b.clone()));
            }
        }
    }
    edges
}

/// The cycles among siblings: each as `level: a -> b -> ... -> a`.
fn import_cycles(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (level, edges) in sibling_edges(files) {
        let next = |m: &str| -> Vec<String> { edges.iter().filter(|(a, _)| a == m).map(|(_, b)| b.clone()).collect() };
        let nodes: std::collections::BTreeSet<String> = edges.iter().flat_map(|(a, b)| [a.clone(), b.clone()]).collect();
        let mut seen = std::collections::BTreeSet::new();
        for start in &nodes {
            // Depth-first from each node: a path back to it is a cycle (said once per set of nodes).
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            while let Some((at, path)) = stack.pop() {
                for n in next(&at) {
                    if n == *start {
                        let mut key = path.clone();
                        key.sort();
                        if seen.insert(key) {
                            out.push(format!("{}: {} -> {start}", if level.is_empty() { "crate".to_string() } else { level.join("::") }, path.join(" -> ")));
                        }
                    } else if !path.contains(&n) && path.len() < 8 {
                        let mut p = path.clone();
                        p.push(n.clone());
                        stack.push((n, p));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn no_module_imports_in_a_circle_at_any_level() {
    let (_, files) = sources();
    let tests = test_module_files(&files);
    let product: Vec<(String, String)> = files
        .iter()
        .filter(|(f, _, _)| !tests.contains(f) && !f.ends_with("_tests.rs") && !f.ends_with("/tests.rs"))
        .map(|(f, _, t)| (f.clone(), t.clone()))
        .collect();
    let cycles = import_cycles(&product);
    assert!(
        cycles.is_empty(),
        "modules that import each other (through super:: or crate::): move the shared piece into one of them, or below both:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_circle_check_follows_super_and_groups_and_ignores_parents() {
    let files = vec![
        ("src/x/a.rs".to_string(), "use super::b::B;\n".to_string()),
        ("src/x/b.rs".to_string(), "use super::{c::C, a};\n".to_string()),
        ("src/x/c.rs".to_string(), "fn f() { crate::x::a::g() }\nuse super::Parent;\n".to_string()),
        ("src/x/mod.rs".to_string(), "mod a; mod b; mod c;\nuse a::A;\n".to_string()),
        ("src/x/d/e.rs".to_string(), "use super::super::a::A;\n".to_string()),
        ("src/x/d/mod.rs".to_string(), "mod e;\n".to_string()),
    ];
    let cycles = import_cycles(&files);
    assert_eq!(cycles.len(), 2, "{cycles:?}");
    assert!(cycles.iter().any(|c| c.starts_with("x: ") && c.contains("a -> b -> a")), "{cycles:?}");
    assert!(cycles.iter().any(|c| c.contains("a -> b -> c -> a")), "{cycles:?}");
    let edges = sibling_edges(&files);
    assert!(edges[&vec!["x".to_string()]].contains(&("d".to_string(), "a".to_string())), "a grandchild's super::super counts for its module: {edges:?}");
}

/// Product lines of a file (its test module left out) that build a string with `format!`.
fn formatting(file: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        if code(line).contains("format!(") {
            out.push(format!("{file}:{}: {}", i + 1, line.trim()));
        }
    }
    out
}

/// Advice cards and the levers ruled out are sized in numbers (src/recommend.rs decides
/// report::card's facts) and worded once, in src/report/words.rs.
#[test]
fn the_cards_are_sized_in_numbers_and_worded_in_one_place() {
    let (_, files) = sources();
    let found: Vec<String> = files.iter().filter(|(file, _, _)| file == "src/recommend.rs").flat_map(|(file, _, text)| formatting(file, text)).collect();
    assert!(files.iter().any(|(file, _, _)| file == "src/recommend.rs"), "src/recommend.rs is read");
    assert!(found.is_empty(), "recommend sizes the cards; src/report/words.rs words them:\n{}", found.join("\n"));
    let caught =
        formatting("src/recommend.rs", "fn f() -> String {\n    format!(\"{} blocks\", 3)\n}\n#[cfg(test)]\nmod tests { fn t() { format!(\"x\"); } }\n");
    assert_eq!(caught.len(), 1, "the check catches a card worded where it is sized: {caught:?}");
}

/// Where PromQL is written, with why: the signals' queries and the reads around them
/// (`src/signals/`: `promql.rs`, `kinds/`, and `queries/`, one module per kind of read beyond the
/// rules' signals), and local evaluation, which parses and evaluates it (`src/local/`).
const PROMQL_HOMES: &[(&str, &str)] = &[
    ("src/signals/", "the diagnosis' queries: each signal kind's, what they share, and the stages' own reads by typed request"),
    ("src/local/", "local evaluation: PromQL's functions and operators, parsed and evaluated"),
];

/// Product lines outside [`PROMQL_HOMES`] that write PromQL: a function call over a series or
/// range (`rate(x[5m])`, `max_over_time(`, `histogram_quantile(`, `label_replace(`), or an
/// aggregation with its grouping (`sum by (`, `count without (`), in code, not comments; inline test
/// modules are skipped.
fn promql_written(file: &str, text: &str) -> Vec<String> {
    let call = regex::Regex::new(
        r"\b(rate|irate|increase|delta|idelta|deriv|resets|changes|timestamp|histogram_quantile|label_replace|label_join|absent|[a-z]+_over_time)\(\s*[^)\s]",
    )
    .unwrap();
    let grouping = regex::Regex::new(r"\b(sum|max|min|avg|count|group|topk|bottomk|quantile|stddev|stdvar|count_values) (by|without) \(").unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]")
            && text.lines().nth(i + 1).is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        if string_literals(&code(line)).iter().any(|l| call.is_match(l) || grouping.is_match(l)) {
            out.push(format!("{file}:{}: {}", i + 1, line.trim()));
        }
    }
    out
}

/// The string literals on a line of code (`"..."`, `r"..."`, `r#"..."#`), their text as written.
fn string_literals(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let raw = b[i] == b'r' && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'));
        let hashes = if raw { b[i + 1..].iter().take_while(|c| **c == b'#').count() } else { 0 };
        if raw && b.get(i + 1 + hashes) == Some(&b'"') {
            let start = i + 2 + hashes;
            let close = format!("\"{}", "#".repeat(hashes));
            let end = line[start..].find(&close).map_or(line.len(), |e| start + e);
            out.push(line[start..end].to_string());
            i = end + close.len();
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push(line[i + 1..j.min(line.len())].to_string());
            i = j + 1;
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            i += 3; // a char literal such as '"'
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn promql_is_written_only_in_its_homes() {
    let (_, files) = sources();
    let tests = test_module_files(&files);
    let found: Vec<String> = files
        .iter()
        .filter(|(file, _, _)| !PROMQL_HOMES.iter().any(|(home, _)| file.starts_with(home)))
        .filter(|(file, _, _)| !tests.contains(file) && !file.ends_with("_tests.rs") && !file.ends_with("/tests.rs"))
        .flat_map(|(file, _, text)| promql_written(file, text))
        .collect();
    assert!(
        found.is_empty(),
        "PromQL is written in src/signals/ (a stage asks for a read by typed request, src/signals/queries/); these lines write it elsewhere:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_promql_check_catches_a_query_and_skips_words_comments_and_tests() {
    let src = concat!(
        "fn plan(by: &str, s: &str) -> String {\n",
        "    let q = format!(\"sum by ({by}) (rate({s}[5m]))\");\n",
        "    let r = format!(\"max(max_over_time({s}[60s]))\");\n",
        "    // a comment may say rate(x[5m]) and sum by (model_name)\n",
        "    let why = \"rate() needs two samples, and a sum by model is not a query\";\n",
        "    q + &r + why + &rate(s) + r#\"count without (pod) (up)\"#\n",
        "}\n",
        "#[cfg(test)]\n",
        "mod tests {\n",
        "    const Q: &str = \"histogram_quantile(0.95, x)\";\n",
        "}\n",
    );
    let found = promql_written("src/explain/x.rs", src);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(["2", "3", "6"].iter().zip(&found).all(|(n, f)| f.starts_with(&format!("src/explain/x.rs:{n}:"))), "{found:?}");
}

/// Every id the built-in pack gives a signal or a rule.
fn pack_ids() -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for (_, v) in toml_files(&root().join("rules")) {
        for table in ["signal", "rule"] {
            for item in v.get(table).and_then(|t| t.as_array()).into_iter().flatten() {
                if let Some(id) = item.get("id").and_then(|i| i.as_str()) {
                    ids.insert(id.to_string());
                }
            }
        }
    }
    ids
}

/// Where a pack id is another vocabulary's word: an event kind is named `target-down` as the rule is.
const ID_HOMONYMS: &[(&str, &str)] = &[("src/report/event.rs", "target-down")];

/// Product lines with a string literal that is exactly a signal's or a rule's id.
fn ids_written(file: &str, text: &str, ids: &BTreeSet<String>) -> Vec<String> {
    let end = product_lines(text);
    let mut out = Vec::new();
    for (i, line) in text.lines().take(end).enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for lit in string_literals(line) {
            if ids.contains(&lit) && !ID_HOMONYMS.contains(&(file, lit.as_str())) {
                out.push(format!("{file}:{} names {lit:?}", i + 1));
            }
        }
    }
    out
}

#[test]
fn no_signal_or_rule_is_named_by_id_in_the_products_code() {
    let (_, files) = sources();
    let tests = test_module_files(&files);
    let ids = pack_ids();
    let mut paths = Vec::new();
    rust_files(&root().join("src"), &mut paths);
    let mut found = Vec::new();
    for p in &paths {
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        if tests.contains(&rel) {
            continue;
        }
        found.extend(ids_written(&rel, &std::fs::read_to_string(p).unwrap(), &ids));
    }
    assert!(
        found.is_empty(),
        "what a stage knows of a signal or a rule belongs in its rule file (a `role`, a rule field, a [[correlation]]), not under its id in Rust:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_id_check_catches_an_id_and_skips_tests_comments_and_homonyms() {
    let ids: BTreeSet<String> = ["ttft_mean", "target-down"].map(String::from).into();
    let src = "fn f(t: &T) { t.get(\"ttft_mean\"); }\n// \"ttft_mean\" in a comment\nfn g() -> &'static str { \"target-down\" }\n#[cfg(test)]\nmod tests {\n    fn h() { let _ = \"ttft_mean\"; }\n}\n";
    assert_eq!(ids_written("src/x.rs", src, &ids), vec!["src/x.rs:1 names \"ttft_mean\"", "src/x.rs:3 names \"target-down\""]);
    assert_eq!(ids_written("src/report/event.rs", src, &ids), vec!["src/report/event.rs:1 names \"ttft_mean\""]);
}
