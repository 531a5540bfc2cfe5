//! Deep links from evidence to charts, against a real Prometheus: a live run's markdown, slack and
//! html link every evidence query to the server's `/graph` page over the diagnosed window; the page
//! answers, and the query carried in the link is the evidence query, which the server evaluates.

mod common;

use assert_cmd::Command;

use common::start_scenario;

fn run(url: &str, at: &str, format: &str, extra: &[&str]) -> String {
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--no-config", "--prometheus", url, "--at", at, "--window", "30m", "--format", format])
        .args(extra)
        .env_remove("VLLM_DIAG_PROMETHEUS_URL")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Every link to `{url}/graph?...` in a text, decoded: (whole link, the expression it carries).
fn graph_links(text: &str, url: &str) -> Vec<(String, String)> {
    let prefix = format!("{url}/graph?");
    text.match_indices(&prefix)
        .map(|(i, _)| {
            let link: String = text[i..].chars().take_while(|c| !matches!(c, '>' | '|' | '"' | ')' | ' ' | '\n')).collect();
            let expr = link.split("g0.expr=").nth(1).unwrap_or("").split('&').next().unwrap_or("");
            let expr = percent_encoding::percent_decode_str(expr).decode_utf8().unwrap().to_string();
            (link, expr)
        })
        .collect()
}

/// GET a URL on the test server, following redirects; returns the last status and URL.
fn follow(base: &str, url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut url = url.to_string();
    for _ in 0..5 {
        let rest = url.strip_prefix("http://").expect("an http URL");
        let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
        let mut s = std::net::TcpStream::connect(host).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw);
        let head = text.split("\r\n\r\n").next().unwrap_or("");
        let status: u16 = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let location = head.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("location")).map(|(_, v)| v.trim().to_string()));
        match (status, location) {
            (301 | 302 | 303 | 307 | 308, Some(loc)) => url = if loc.starts_with('/') { format!("{base}{loc}") } else { loc },
            _ => return (status, url),
        }
    }
    (0, url)
}

#[test]
fn a_live_runs_evidence_links_to_the_servers_graph_page_for_the_window() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let json: serde_json::Value = serde_json::from_str(&run(&prom.url, &at, "json", &[])).unwrap();
    let queries: Vec<String> =
        json["findings"][0]["evidence"].as_array().unwrap().iter().map(|e| e["query"].as_str().unwrap_or("").to_string()).filter(|q| !q.is_empty()).collect();
    assert!(!queries.is_empty());

    // Markdown links each number that decided the finding; the HTML page every evidence query.
    let md = run(&prom.url, &at, "markdown", &[]);
    let links = graph_links(&md, &prom.url);
    assert!(md.contains("([chart](<") && !links.is_empty(), "{md}");
    for (_, e) in &links {
        assert!(queries.contains(e), "a chart link carries {e}, no evidence query\n{md}");
    }
    let html = run(&prom.url, &at, "html", &[]);
    let page_links = graph_links(&html, &prom.url);
    for q in &queries {
        assert!(page_links.iter().any(|(_, e)| e == q), "no chart link carries {q} in the HTML page");
    }
    let end_input = spec.window_end().format("%Y-%m-%d%%20%H%%3A%M%%3A%S").to_string();
    for (link, expr) in &links {
        assert!(link.contains("g0.range_input=30m") && link.contains(&format!("g0.end_input={end_input}")), "{link}");
        // The page is there (after the redirects the server makes, which keep the query string),
        // and the server evaluates the query the link carries.
        let (status, landed) = follow(&prom.url, link);
        assert_eq!(status, 200, "{link} ended at {landed}");
        assert!(landed.contains("g0.expr=") && landed.contains("g0.end_input="), "the redirects dropped the query: {landed}");
        assert!(!prom.query(expr, spec.window_end()).is_empty() || expr.contains("offset"), "{expr} selects nothing at the window's end");
    }
    assert!(!graph_links(&run(&prom.url, &at, "slack", &[]), &prom.url).is_empty(), "slack links its evidence");
    assert!(run(&prom.url, &at, "html", &[]).contains(&format!("<a href=\"{}/graph?g0.expr=", prom.url)), "html links its PromQL");
}

#[test]
fn a_template_in_the_file_replaces_the_graph_page_and_none_turns_links_off() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let dir = tempfile::tempdir().unwrap();
    let write = |body: &str| {
        let p = dir.path().join("vllm-diag.toml");
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    let markdown_with = |file: &str| {
        let out = Command::cargo_bin("vllm-diag")
            .unwrap()
            .args(["explain", "--config", file, "--prometheus", &prom.url, "--at", &at, "--window", "30m", "--format", "markdown"])
            .env_remove("VLLM_DIAG_PROMETHEUS_URL")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let md = markdown_with(&write("[links]\ngraph = \"https://grafana.example/d/vllm?var-q={expr}&from={start_ms}&to={end_ms}\"\n"));
    let from = spec.window_end().timestamp_millis() - 30 * 60 * 1000;
    assert!(md.contains(&format!("&from={from}&to={}", spec.window_end().timestamp_millis())), "{md}");
    assert!(md.contains("(<https://grafana.example/d/vllm?var-q="), "{md}");
    assert!(!md.contains("/graph?"), "{md}");

    assert!(!markdown_with(&write("[links]\ngraph = \"none\"\n")).contains("[chart]"));

    // A bad template is refused at its line.
    let file = write("window = \"30m\"\n[links]\ngraph = \"https://g/x?q={query}\"\n");
    let out = Command::cargo_bin("vllm-diag").unwrap().args(["config", "show", "--config", &file]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(":3:") && err.contains("unknown placeholder {query}"), "{err}");
}
