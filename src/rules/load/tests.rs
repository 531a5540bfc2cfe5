use super::builtin::*;
use super::validate::*;

use super::*;

#[test]
fn the_pack_read_ahead_on_its_own_thread_is_the_pack_read_in_place() {
    let cached = load_builtin().unwrap();
    // What the loader returned came through the process's one parse (the cell `preload` fills).
    assert!(PARSED_BUILTIN.get().is_some_and(Result::is_ok));
    let fresh = parse_builtin().unwrap();
    assert_eq!(cached, fresh);
    // Each caller gets its own copy to change (profiles, the file's thresholds).
    let mut changed = load_builtin().unwrap();
    changed.thresholds.insert("x".into(), 1.0);
    assert_eq!(load_builtin().unwrap(), fresh);
}

#[test]
fn the_builtin_pack_loads_and_validates() {
    let set = load_builtin().unwrap();
    for id in ["load-exceeds-capacity", "slow-prefill", "slow-decode", "severe-saturation", "kv-cache-pressure", "http-errors"] {
        assert!(set.rule(id).is_some(), "missing {id}");
    }
}

#[test]
fn a_toml_syntax_error_names_file_line_and_column() {
    let mut set = RuleSet::default();
    let e = load_str(&mut set, "x.toml", "[[rule]]\nid = \"a\"\ntitle = \n").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("x.toml", 3), "{e}");
}

#[test]
fn a_bad_condition_points_inside_the_string() {
    let mut set = RuleSet::default();
    let src = "[[rule]]\nid = \"a\"\ntitle = \"A\"\nseverity = \"warning\"\nsummary = \"s\"\nwhen = [\"ttft_p95 > 3 sec\"]\n";
    let e = load_str(&mut set, "x.toml", src).unwrap_err();
    assert_eq!(e.line, 6);
    assert_eq!(e.column, 23, "{e}"); // the "s" of "sec"
    assert!(e.message.contains("rule a"), "{e}");
}

#[test]
fn unknown_fields_severities_and_signals_are_rejected_with_their_line() {
    let mut set = RuleSet::default();
    let e = load_str(&mut set, "x.toml", "[[rule]]\nid = \"a\"\ntitle = \"A\"\nseverity = \"fatal\"\nsummary = \"s\"\nwhen = [\"x > 1\"]\n").unwrap_err();
    assert!(e.message.contains("fatal") || e.message.contains("variant"), "{e}");
    let e =
        load_str(&mut set, "x.toml", "[[signal]]\nid = \"s\"\ntitle = \"S\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantle = 0.9\nhistogram = [\"h\"]\n")
            .unwrap_err();
    assert_eq!(e.line, 1, "{e}");
    assert!(e.message.contains("quantle"), "{e}");

    let mut set = load_builtin().unwrap();
    load_str(&mut set, "y.toml", "[[rule]]\nid = \"b\"\ntitle = \"B\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"no_such_signal > 1\"]\n").unwrap();
    let e = validate(&set).unwrap_err();
    // Found once every file is merged, and reported at the condition that names it.
    assert_eq!((e.file.as_str(), e.line, e.column), ("y.toml", 6, 10), "{e}");
    assert!(e.message.contains("no_such_signal"), "{e}");
}

#[test]
fn profiles_replace_the_default_thresholds() {
    let mut set = load_builtin().unwrap();
    assert_eq!(set.thresholds["ttft_target"], 0.5);
    set.apply_profile("code-completion").unwrap();
    assert_eq!(set.thresholds["ttft_target"], 0.2);
    assert_eq!(set.thresholds["ttft_p95_high"], 1.2);
    for p in ["chat", "code-completion", "batch", "rag", "agentic"] {
        assert!(set.profiles.contains_key(p), "{p}");
    }
    let e = set.apply_profile("gaming").unwrap_err();
    assert!(e.contains("chat"), "{e}");
}

#[test]
fn a_user_file_overrides_a_builtin_rule_by_id() {
    let mut set = load_builtin().unwrap();
    let n = set.rules.len();
    load_str(&mut set, "mine.toml", "[[rule]]\nid = \"slow-decode\"\ntitle = \"Mine\"\nseverity = \"critical\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n")
        .unwrap();
    assert_eq!(set.rules.len(), n);
    assert_eq!(set.rule("slow-decode").unwrap().title, "Mine");
    assert_eq!(set.rule("slow-decode").unwrap().origin, "mine.toml:1");
}

#[test]
fn an_error_about_a_whole_file_or_directory_shows_no_position() {
    let e = |line, column| RuleError { file: "rd".into(), line, column, message: "m".into() }.to_string();
    assert_eq!((e(0, 0), e(3, 0), e(3, 7)), ("rd: m".into(), "rd:3: m".into(), "rd:3:7: m".into()));
}

#[test]
fn a_watched_signal_says_which_way_hurts_and_its_floor_fits_its_unit() {
    let sig =
        |extra: &str| format!("[[signal]]\nid = \"w\"\ntitle = \"T\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]\n{extra}\n");
    let load = |extra: &str| load_str(&mut load_builtin().unwrap(), "mine.toml", &sig(extra));
    let mut set = load_builtin().unwrap();
    load_str(&mut set, "mine.toml", &sig("worse = \"up\"\nsymptom = true\nmoved_floor = \"250ms\"")).unwrap();
    let d = &set.signals["w"];
    assert_eq!((d.worse, d.moved_floor, d.symptom, d.spare), (Some(crate::signals::Worse::Up), 0.25, true, false));
    load("worse = \"down\"\nmoved_floor = 2").unwrap();
    let e = load("worse = \"sideways\"").unwrap_err();
    assert!(e.message.contains("must be \"up\" or \"down\""), "{e}");
    let e = load("worse = \"up\"\nmoved_floor = \"10%\"").unwrap_err();
    assert!(e.message.contains("moved_floor \"10%\" is a percentage, but it is compared with values in seconds"), "{e}");
    let e = load("moved_floor = \"1s\"").unwrap_err();
    assert!(e.message.contains("only apply to a signal with `worse`"), "{e}");
    // The built-in pack watches latency up and the prefix-cache hit ratio down.
    let set = load_builtin().unwrap();
    assert_eq!(set.signals["ttft_p95"].worse, Some(crate::signals::Worse::Up));
    assert_eq!(set.signals["prefix_hit_ratio"].worse, Some(crate::signals::Worse::Down));
    assert!(set.signals["external_prefix_hit_ratio"].spare);
}

#[test]
fn a_caveat_reads_only_the_rules_own_signals_and_says_something() {
    let rule = |caveat: &str| {
        format!("[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n\n[rule.caveat]\n{caveat}\n")
    };
    let mut set = load_builtin().unwrap();
    load_str(&mut set, "mine.toml", &rule("when = \"itl_p95 <= 0\"\ntext = \"blind\"")).unwrap();
    assert_eq!(set.rule("mine").unwrap().caveat.as_ref().map(|c| c.text.as_str()), Some("blind"));
    validate(&set).unwrap();
    let mut set = load_builtin().unwrap();
    load_str(&mut set, "mine.toml", &rule("when = \"abort_share <= 0\"\ntext = \"blind\"")).unwrap();
    let e = validate(&set).unwrap_err();
    assert!(e.message.contains("caveat condition \"abort_share <= 0\" reads signal \"abort_share\", which the rule itself does not read"), "{e}");
    let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &rule("when = \"itl_p95 <= 0\"\ntext = \" \"")).unwrap_err();
    assert!(e.message.contains("[rule.caveat] needs a `text`"), "{e}");
    let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &rule("when = \"itl_p95 <<= 0\"\ntext = \"t\"")).unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("mine.toml", 9), "{e}");
}

#[test]
fn a_recent_reading_must_be_a_short_read_of_the_same_kind_and_a_recent_rule_must_have_one() {
    let sig = |id: &str, extra: &str| {
        format!("[[signal]]\nid = \"{id}\"\ntitle = \"T\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]\n{extra}\n")
    };
    let check = |text: &str| {
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "mine.toml", text).unwrap();
        validate(&set)
    };
    check(&(sig("a", "recent = \"a_recent\"") + &sig("a_recent", "range = \"5m\"\nwithin_window = true"))).unwrap();
    let e = check(&sig("a", "recent = \"nope\"")).unwrap_err();
    assert!(e.message.contains("recent = \"nope\" names no declared [[signal]]") && e.file == "mine.toml" && e.line == 1, "{e}");
    let e = check(&(sig("a", "recent = \"a_recent\"") + &sig("a_recent", "range = \"5m\""))).unwrap_err();
    assert!(e.message.contains("must have a fixed `range` with `within_window = true`"), "{e}");
    let e = check(&(sig("a", "recent = \"a_recent\"") + &sig("a_recent", "range = \"5m\"\nwithin_window = true").replace("seconds", "ratio"))).unwrap_err();
    assert!(e.message.contains("same kind and unit"), "{e}");
    // A rule that asks for a second reading must read something that has one.
    let rule = |when: &str| format!("[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nrecent = true\nwhen = [\"{when}\"]\n");
    check(&rule("itl_p95 > 1s")).unwrap();
    let e = check(&rule("ttft_p95 > 1s")).unwrap_err();
    assert!(e.message.contains("recent = true (or [rule.recent]), but none of the signals it reads has a `recent` reading"), "{e}");
    // Its condition: a table with `when`, over the rule's own signals, reported at its place.
    let gated = |when: &str| {
        format!("[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n\n[rule.recent]\nwhen = \"{when}\"\n")
    };
    check(&gated("itl_p95 >= 1.1x baseline")).unwrap();
    let mut set = load_builtin().unwrap();
    load_str(&mut set, "mine.toml", &gated("itl_p95 >= 1.1x baseline")).unwrap();
    let mine = set.rule("mine").unwrap();
    assert!(mine.recent && mine.recent_when.as_ref().is_some_and(|c| c.text == "itl_p95 >= 1.1x baseline"));
    let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &gated("itl_p95 >=> 1.1x baseline")).unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("mine.toml", 9), "{e}");
    assert!(e.message.contains("rule mine: in condition \"itl_p95 >=> 1.1x baseline\""), "{e}");
    let e = check(&gated("ttft_p95 >= 1.1x baseline")).unwrap_err();
    assert!(e.message.contains("[rule.recent] condition \"ttft_p95 >= 1.1x baseline\" reads signal \"ttft_p95\", which the rule itself does not read"), "{e}");
    // Found once every file is merged, it is still reported at the condition.
    assert_eq!((e.file.as_str(), e.line, e.column), ("mine.toml", 9, 9), "{e}");
    let e = check(&gated("itl_p95 >= $nope")).unwrap_err();
    assert!(e.message.contains("uses $nope, which no [thresholds] table defines") && e.line == 9, "{e}");
    let e =
        load_str(&mut load_builtin().unwrap(), "mine.toml", &gated("itl_p95 > 1s").replace("[rule.recent]\n", "[rule.recent]\nrange = \"5m\"\n")).unwrap_err();
    assert!(e.message.contains("unknown field `range`"), "{e}");
    let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &rule("itl_p95 > 1s").replace("recent = true", "recent = \"yes\"")).unwrap_err();
    assert!(e.message.contains("true, false, or a [rule.recent] table with `when`"), "{e}");
    assert!(load_builtin().unwrap().rule("slow-decode").unwrap().recent_when.is_some(), "the built-in slow-decode declares its condition");
    // The built-in slow-decode reads four signals there.
    let set = load_builtin().unwrap();
    let pairs = set.recent_pairs(set.rule("slow-decode").unwrap());
    assert!(pairs.contains(&("itl_p95".to_string(), "itl_p95_recent".to_string())), "{pairs:?}");
    // The second reading asks slow-decode's readings and those of the rules that would absorb
    // its findings (workload-shift's request shape), not what a rule reads anyway.
    let late = set.late_signals();
    for s in ["itl_p95_recent", "queue_p95_recent", "prompt_len_recent", "max_tokens_recent"] {
        assert!(late.contains(s), "{s} not in {late:?}");
    }
    assert!(!late.contains("running_recent") && !late.contains("preemption_recent"), "{late:?}");
}

#[test]
fn every_built_in_threshold_changes_something() {
    // A threshold no condition or signal reads is a knob that turns nothing.
    let set = load_builtin().unwrap();
    let uses = threshold_uses(&set);
    let unused: Vec<_> = set.thresholds.keys().filter(|k| !uses.contains_key(*k)).collect();
    assert!(unused.is_empty(), "built-in thresholds no rule or signal uses: {unused:?}");
    for (name, w) in &set.threshold_origins {
        assert_eq!(unit_misfit(name, &w.text, &uses), None);
    }
}

#[test]
fn a_threshold_must_be_used_and_written_in_its_signals_unit() {
    let check = |src: &str| {
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "mine.toml", src)?;
        validate(&set)
    };
    check("[thresholds]\nttft_p95_high = \"1.5s\"\nkv_usage_high = 0.85\n").unwrap();
    // Misspelt: used by nothing, reported at its line with the name meant.
    let e = check("# mine\n[thresholds]\nttft_p95_hgh = \"1.5s\"\n").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("mine.toml", 3), "{e}");
    assert!(
        e.message.contains("threshold ttft_p95_hgh is used by no rule condition and no signal") && e.message.contains("Did you mean \"ttft_p95_high\"?"),
        "{e}"
    );
    // A new threshold for a rule of one's own is used.
    let own = "[thresholds]\nmy_ceiling = \"2s\"\n\n[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > $my_ceiling\"]\n";
    check(own).unwrap();
    // A percentage for a latency in seconds, and a duration for a share.
    let e = check("[thresholds]\nttft_p95_high = \"90%\"\n").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert!(
        e.message.contains("threshold ttft_p95_high: \"90%\" is a percentage, but it is compared with values in seconds")
            && e.message.contains("compares ttft_p95 with it"),
        "{e}"
    );
    let e = check("[thresholds]\nkv_usage_high = \"90s\"\n").unwrap_err();
    assert!(e.message.contains("\"90s\" is a duration") && e.message.contains("a percentage (\"90%\") or a fraction (0.9)"), "{e}");
    // An SLO burn rate's target is a latency, its objective a share.
    let e = check("[thresholds]\nlatency_objective = \"99s\"\n").unwrap_err();
    assert!(e.message.contains("takes it as its objective"), "{e}");
    let e = check("[thresholds]\nttft_target = \"50%\"\n").unwrap_err();
    assert!(e.message.contains("takes it as its latency target"), "{e}");
    // The same in a profile, and for a condition's own number.
    let e = check("[profile.mine]\nttft_target = \"50%\"\n").unwrap_err();
    assert!(e.message.starts_with("profile mine: threshold ttft_target: \"50%\" is a percentage") && e.line == 2, "{e}");
    let e = check("[profile.mine]\nttft_targt = \"500ms\"\n").unwrap_err();
    assert!(e.message.contains("Did you mean \"ttft_target\"?"), "{e}");
    let e = check(&own.replace("$my_ceiling", "90%").replace("my_ceiling = \"2s\"\n", "")).unwrap_err();
    assert!(e.message.contains("rule mine: condition \"itl_p95 > 90%\" compares itl_p95: \"90%\" is a percentage"), "{e}");
    let e = check(&own.replace("$my_ceiling", "$my_celing")).unwrap_err();
    assert!(e.message.contains("uses $my_celing, which no [thresholds] table defines. Did you mean \"my_ceiling\"?"), "{e}");
}

#[test]
fn a_rule_or_signal_defined_twice_in_one_file_is_an_error_at_the_second() {
    let rule = |id: &str| format!("[[rule]]\nid = \"{id}\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n");
    let mut set = load_builtin().unwrap();
    let e = load_str(&mut set, "mine.toml", &format!("{}\n{}", rule("mine"), rule("mine"))).unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("mine.toml", 8), "{e}");
    assert!(e.message.contains("rule mine is defined twice in this file (first at line 1)"), "{e}");
    let signal = "[[signal]]\nid = \"s\"\ntitle = \"S\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]\n";
    let e = load_str(&mut RuleSet::default(), "sig.toml", &format!("{signal}{signal}")).unwrap_err();
    assert_eq!(e.line, 8, "{e}");
    assert!(e.message.contains("signal s is defined twice"), "{e}");
}

#[test]
fn a_profile_setting_an_unknown_threshold_is_an_error_at_its_line() {
    let mut set = load_builtin().unwrap();
    load_str(&mut set, "rd/mine.toml", "# mine\n[profile.chat]\nnope = \"1s\"\n").unwrap();
    let e = validate(&set).unwrap_err();
    assert_eq!((e.file.as_str(), e.line, e.column), ("rd/mine.toml", 3, 8), "{e}");
    assert!(e.message.contains("profile chat sets nope"), "{e}");
}

#[test]
fn the_http_shares_read_users_routes_and_share_one_read_of_the_counter() {
    let set = crate::rules::load_builtin().unwrap();
    use crate::signals::*;
    let users = &set.routes["user"];
    assert!(users.contains(&"/v1/completions".to_string()) && users.contains(&"/v1/chat/completions".to_string()));
    assert!(!users.iter().any(|r| r == "none" || r == "/health" || r == "/metrics" || r.ends_with("/render") || r == "/tokenize"));
    let SignalKind::Ratio(r) = &set.signals["http_4xx_ratio"].kind else { panic!("http_4xx_ratio is a ratio") };
    assert!(r.denominator.r#match.starts_with(r#"handler=~"/v1/completions|/v1/chat/completions|"#), "{}", r.denominator.r#match);
    assert!(r.denominator.r#match.contains(r#"/v1/responses/\\{response_id\\}"#), "{}", r.denominator.r#match);
    // The matcher reads back as the list, each route literal.
    let m = &parse_match(&r.denominator.r#match).unwrap()[0];
    let c = m.compile().unwrap();
    assert!(c.matches(Some("/v1/responses/{response_id}")) && c.matches(Some("/v1/completions")));
    assert!(!c.matches(Some("none")) && !c.matches(Some("/v1/completions/render")) && !c.matches(Some("/health")));
    // Every HTTP read of one range is answered by one read grouped by handler and status.
    let ctx = QueryContext {
        selector: crate::prom::Selector::default(),
        group_by: vec!["model_name".into()],
        range: std::time::Duration::from_secs(1800),
        thresholds: std::sync::Arc::new(set.thresholds.clone()),
        buckets: Default::default(),
        replica_label: "instance".into(),
    };
    let mut reads = Vec::new();
    for id in ["http_4xx_ratio", "http_5xx_ratio", "http_request_rate", "http_unmatched_4xx_share"] {
        let def = &set.signals[id];
        let r = resolve(&def.kind, &["http_requests_total", "vllm:num_requests_running"].iter().map(|s| s.to_string()).collect()).unwrap();
        reads.extend(build(&def.kind, &r, &ctx).unwrap().sums.into_iter().map(|(_, read)| read));
    }
    let all: Vec<&SumRead> = reads.iter().collect();
    let shared = SumRead::shared(&all, &ctx.selector, &ctx.group_by).expect("one shared read");
    assert!(shared.starts_with("sum by (model_name, handler, status) ("), "{shared}");
}

#[test]
fn a_rules_directorys_route_list_replaces_the_built_in_one_for_the_built_in_signals() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("routes.toml"), "[routes]\nuser = [\"/generate\", \"/v1/chat/completions\"]\n").unwrap();
    let set = load_with_overrides(Some(dir.path())).unwrap();
    let crate::signals::SignalKind::Ratio(r) = &set.signals["http_5xx_ratio"].kind else { panic!("a ratio") };
    assert_eq!(r.numerator.r#match, r#"status="5xx",handler=~"/generate|/v1/chat/completions""#);
    // A list no file declares is an error naming the signal.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("s.toml"), "[[signal]]\nid = \"x_rate\"\ntitle = \"x\"\nunit = \"per_second\"\nkind = \"rate\"\ncounter = [\"http_requests_total\"]\nmatch = 'handler=~\"$routes.nope\"'\n").unwrap();
    let e = load_with_overrides(Some(bad.path())).unwrap_err();
    assert!(e.message.contains("no route list named \"nope\""), "{e:?}");
}

#[test]
fn a_rule_added_in_toml_gets_cards_won_t_help_cold_starts_and_replica_causes_from_its_fields() {
    let mut set = load_builtin().unwrap();
    let rule = |extra: &str| format!("[[rule]]\nid = \"mine\"\ntitle = \"Mine\"\nseverity = \"warning\"\n{extra}\nsummary = \"s\"\nwhen = [\"itl_p95 > 1\"]\n");
    load_str(
        &mut set,
        "mine.toml",
        &rule("also_size = [\"kv_blocks\", \"replicas_for_kv\"]\nrules_out_levers = true\ncold_start = \"model\"\nreplica_cause = true"),
    )
    .unwrap();
    let r = set.rule("mine").unwrap();
    assert_eq!(r.also_size, ["kv_blocks", "replicas_for_kv"]);
    assert!(r.rules_out_levers && r.replica_cause);
    assert_eq!(r.cold_start, Some(ColdStartReach::Model));
    let plain = set.rule("http-errors").unwrap();
    assert!(plain.also_size.is_empty() && !plain.rules_out_levers && !plain.replica_cause && plain.cold_start.is_none());
    let mut typo = load_builtin().unwrap();
    load_str(&mut typo, "mine.toml", &rule("also_size = [\"kv_block\"]")).unwrap();
    let e = validate(&typo).unwrap_err();
    assert!(e.message.contains("unknown card \"kv_block\"") && e.message.contains("kv_blocks"), "{e}");
    assert_eq!(e.file, "mine.toml", "{e}");
    let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &rule("cold_start = \"pod\"")).unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("mine.toml", 5), "{e}");
}

#[test]
fn a_step_answered_by_the_binding_or_the_replicas_says_so_with_its_own_words() {
    let rule = |step: &str| {
        format!("[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\nsteps = [\n  {step},\n]\n")
    };
    let check = |step: &str| {
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "mine.toml", &rule(step)).unwrap();
        validate(&set).map(|_| set.rule("mine").unwrap().steps[0].clone())
    };
    let ok = check(r#"{ text = "Is it admission?", answered_by = "binding", held_by = ["max-num-seqs"], if_held = "yes", if_not_held = "no" }"#).unwrap();
    assert_eq!((ok.answered_by.as_deref(), ok.held_by.as_slice()), (Some("binding"), &["max-num-seqs".to_string()][..]));
    assert_eq!(ok.signals().count(), 0, "the binding is not a signal the rule must read");
    check(r#"{ text = "Even?", answered_by = "replicas", if_even = "yes", if_uneven = "no" }"#).unwrap();
    for (step, says) in [
        (r#"{ text = "x", answered_by = "binding" }"#, "needs `held_by`"),
        (r#"{ text = "x", answered_by = "binding", held_by = ["max-seqs"] }"#, "unknown limit \"max-seqs\" (known: kv-cache, max-num-seqs"),
        (r#"{ text = "x", answered_by = "binding", held_by = ["none"] }"#, "unknown limit \"none\""),
        (r#"{ text = "x", answered_by = "binding", held_by = ["kv-cache"], if_grew = "g" }"#, "use `if_held` and `if_not_held`"),
        (r#"{ text = "x", answered_by = "replicas", if_held = "h" }"#, "need answered_by = \"binding\""),
        (r#"{ text = "x", answered_by = "itl_p95", if_even = "e" }"#, "need answered_by = \"replicas\""),
        (r#"{ text = "x", if_uneven = "u" }"#, "add `answered_by`"),
    ] {
        let e = check(step).unwrap_err();
        assert!(e.message.contains("rule mine: step 1: ") && e.message.contains(says), "{step}: {e}");
    }
}

/// A signal of the given id with `extra` lines, as a rule file writes it.
fn signal_with(id: &str, extra: &str) -> String {
    format!("[[signal]]\nid = \"{id}\"\ntitle = \"T\"\nunit = \"seconds\"\nkind = \"mean\"\nhistogram = [\"vllm:request_queue_time_seconds\"]\n{extra}")
}

#[test]
fn a_role_belongs_to_one_signal_and_a_later_file_takes_it_over() {
    use crate::signals::{HopRole, Role};
    let mut set = load_builtin().unwrap();
    assert_eq!(set.signal_for(Role::Hop(HopRole::Queue)), Some("queue_mean"));
    load_str(&mut set, "mine.toml", &signal_with("my_queue_mean", "role = \"hop.queue\"\n")).unwrap();
    validate(&set).unwrap();
    assert_eq!(set.signal_for(Role::Hop(HopRole::Queue)), Some("my_queue_mean"));
    assert_eq!(set.signals["queue_mean"].role, None, "the built-in signal gave the role up");

    let twice = format!("{}\n{}", signal_with("a", "role = \"hop.queue\"\n"), signal_with("b", "role = \"hop.queue\"\n"));
    let e = load_str(&mut RuleSet::default(), "x.toml", &twice).unwrap_err();
    assert_eq!(e.line, 9, "{e}");
    assert!(e.message.contains("signal b: role \"hop.queue\" is given to signal a too (line 1)"), "{e}");

    let e = load_str(&mut RuleSet::default(), "x.toml", &signal_with("a", "role = \"hop.queueing\"\n")).unwrap_err();
    assert_eq!(e.line, 1, "{e}");
    assert!(e.message.contains("role \"hop.queueing\" is not a role any stage reads (one of hop.ttft, hop.queue,"), "{e}");
}

#[test]
fn dated_by_names_change_events_and_a_misspelt_one_is_refused_at_its_signal() {
    let mut set = RuleSet::default();
    load_str(&mut set, "x.toml", &signal_with("gone", "dated_by = [\"replica-removed\", \"target-down\"]\n")).unwrap();
    assert_eq!(set.signals["gone"].dated_by, vec![crate::report::EventKind::ReplicaRemoved, crate::report::EventKind::TargetDown]);
    let e = load_str(&mut RuleSet::default(), "x.toml", &signal_with("gone", "dated_by = [\"replica-gone\"]\n")).unwrap_err();
    assert_eq!(e.line, 1, "{e}");
    assert!(e.message.contains("dated_by names \"replica-gone\", which is not a change event (one of restart, target-down,"), "{e}");
}

#[test]
fn a_correlation_names_declared_signals_and_a_later_one_of_the_same_pair_replaces_it() {
    let mut set = load_builtin().unwrap();
    let pairs = |set: &RuleSet| set.correlations.iter().map(|c| (c.cause.clone(), c.effect.clone(), c.healthy_at_or_below)).collect::<Vec<_>>();
    assert_eq!(pairs(&set)[0], ("kv_usage_avg".to_string(), "ttft_p95".to_string(), Some(0.6)));
    let n = set.correlations.len();
    load_str(&mut set, "mine.toml", "[[correlation]]\ncause = \"kv_usage_avg\"\neffect = \"ttft_p95\"\nmeaning = \"mine\"\nhealthy_at_or_below = \"70%\"\n")
        .unwrap();
    validate(&set).unwrap();
    assert_eq!(set.correlations.len(), n);
    assert_eq!(set.correlations.last().map(|c| (c.meaning.as_str(), c.healthy_at_or_below)), Some(("mine", Some(0.7))));

    load_str(&mut set, "bad.toml", "\n[[correlation]]\ncause = \"kv_usage_avg\"\neffect = \"no_such\"\nmeaning = \"m\"\n").unwrap();
    let e = validate(&set).unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("bad.toml", 2), "{e}");
    assert!(e.message.contains("correlation kv_usage_avg -> no_such: \"no_such\" names no declared [[signal]]"), "{e}");
    let e = load_str(&mut RuleSet::default(), "x.toml", "[[correlation]]\ncause = \"a\"\neffect = \"b\"\nmeaning = \"m\"\nhealthy = 1\n").unwrap_err();
    assert!(e.message.contains("healthy"), "{e}");
}
