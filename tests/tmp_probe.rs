mod common;
#[test]
#[ignore]
fn probe() {
    let name = std::env::var("SCEN").unwrap();
    let (spec, prom) = common::start_scenario(&name);
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    std::fs::write("/tmp/probe-url", format!("{} {}", prom.url, at)).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(600));
}
