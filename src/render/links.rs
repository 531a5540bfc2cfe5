//! Deep links from an evidence query to a chart of it: the backend's graph page (Prometheus'
//! `/graph` by default) or any URL template, such as a Grafana Explore link, set in the
//! configuration file (`[links] graph = "..."`).
//!
//! A template is a URL with placeholders, each replaced already URL-encoded:
//! `{source}` the source URL (credentials removed), `{expr}` the PromQL, `{start}` and `{end}` the
//! diagnosed window in RFC 3339, `{start_ms}` and `{end_ms}` the same in Unix milliseconds,
//! `{range}` its length as a PromQL duration (`30m`), and `{end_input}` its end as Prometheus'
//! graph page writes it (`2026-01-15 09:30:00`, UTC).

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::report::TimeRange;

/// Prometheus' own graph page for the source: the query as a graph over the diagnosed window.
pub const PROMETHEUS_GRAPH: &str = "{source}/graph?g0.expr={expr}&g0.tab=0&g0.range_input={range}&g0.end_input={end_input}&g0.moment_input={end_input}";

const PLACEHOLDERS: &[&str] = &["source", "expr", "start", "end", "start_ms", "end_ms", "range", "end_input"];

/// Everything but the unreserved characters of RFC 3986 is encoded, so a value is safe in any part
/// of a URL (query value, path segment, fragment).
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A checked link template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphLinks {
    template: String,
}

impl GraphLinks {
    /// Check a template: an http(s) URL (or one starting with `{source}`) that uses `{expr}` and no
    /// unknown placeholder.
    pub fn parse(template: &str) -> Result<GraphLinks, String> {
        let t = template.trim();
        if !(t.starts_with("http://") || t.starts_with("https://") || t.starts_with("{source}")) {
            return Err(format!("{t:?} is not a URL: start it with https://, http:// or {{source}}"));
        }
        if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("a link template holds no spaces or control characters".into());
        }
        let mut rest = t;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else { return Err(format!("{{ at {:?} is never closed", &rest[open..])) };
            let name = &rest[open + 1..open + close];
            if !PLACEHOLDERS.contains(&name) {
                return Err(format!(
                    "unknown placeholder {{{name}}} (write a literal brace as %7B or %7D); the template may use {}",
                    PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect::<Vec<_>>().join(", ")
                ));
            }
            rest = &rest[open + close + 1..];
        }
        if !t.contains("{expr}") {
            return Err("the template must place the query somewhere: add {expr}".into());
        }
        Ok(GraphLinks { template: t.to_string() })
    }

    /// Links to Prometheus' graph page of the report's source.
    pub fn prometheus() -> GraphLinks {
        GraphLinks { template: PROMETHEUS_GRAPH.to_string() }
    }

    /// The link for `query` over `window`, on `source` (credentials are removed here again, so a
    /// slip elsewhere cannot put them in a link).
    pub fn link(&self, source: &str, query: &str, window: &TimeRange) -> String {
        let enc = |s: &str| utf8_percent_encode(s, COMPONENT).to_string();
        let source = crate::prom::strip_credentials(source.trim());
        let secs = window.duration().as_secs();
        let range = if secs.is_multiple_of(3600) && secs > 0 {
            format!("{}h", secs / 3600)
        } else if secs.is_multiple_of(60) && secs > 0 {
            format!("{}m", secs / 60)
        } else {
            format!("{}s", secs.max(1))
        };
        let rfc = |t: &chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut out = String::new();
        let mut rest = self.template.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c);
            let value = match &rest[open + 1..close] {
                // The source is a URL already: kept as it is, without a trailing slash.
                "source" => source.trim_end_matches('/').to_string(),
                "expr" => enc(query),
                "start" => enc(&rfc(&window.start)),
                "end" => enc(&rfc(&window.end)),
                "start_ms" => window.start.timestamp_millis().to_string(),
                "end_ms" => window.end.timestamp_millis().to_string(),
                "range" => range.clone(),
                "end_input" => enc(&window.end.format("%Y-%m-%d %H:%M:%S").to_string()),
                other => format!("{{{other}}}"),
            };
            out.push_str(&value);
            rest = rest.get(close + 1..).unwrap_or("");
        }
        out.push_str(rest);
        // Characters a template may hold literally but that end a link in Slack (`|`, `>`),
        // Markdown (`>`) or an HTML attribute (`"`) are encoded, whatever the template said.
        out.replace('|', "%7C").replace('<', "%3C").replace('>', "%3E").replace('"', "%22")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn window() -> TimeRange {
        let t = |h, m| chrono::Utc.with_ymd_and_hms(2026, 1, 15, h, m, 0).unwrap();
        TimeRange { start: t(9, 0), end: t(9, 30) }
    }

    #[test]
    fn the_prometheus_link_graphs_the_query_over_the_window() {
        let q = r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{model_name="a b"}[30m])))"#;
        let link = GraphLinks::prometheus().link("https://user:pw@prom.example/prometheus/", q, &window());
        assert!(link.starts_with("https://prom.example/prometheus/graph?g0.expr=histogram_quantile%280.95%2C%20sum"), "{link}");
        assert!(link.contains("&g0.range_input=30m&g0.end_input=2026-01-15%2009%3A30%3A00"), "{link}");
        assert!(!link.contains("pw") && !link.contains("user"), "{link}");
        // The query comes back whole from the link.
        let expr = link.split("g0.expr=").nth(1).unwrap().split('&').next().unwrap();
        assert_eq!(percent_encoding::percent_decode_str(expr).decode_utf8().unwrap(), q);
    }

    #[test]
    fn a_template_places_every_value_encoded() {
        let g = GraphLinks::parse(
            "https://grafana.example/explore?left={\"queries\":[{\"expr\":\"{expr}\"}],\"range\":{\"from\":\"{start_ms}\",\"to\":\"{end_ms}\"}}",
        );
        assert!(g.is_err(), "a brace that opens no placeholder is refused: {g:?}");
        let g = GraphLinks::parse("https://grafana.example/d/vllm?var-q={expr}&from={start_ms}&to={end_ms}&t={start}").unwrap();
        let link = g.link("http://ignored", "up == 1", &window());
        assert_eq!(link, "https://grafana.example/d/vllm?var-q=up%20%3D%3D%201&from=1768467600000&to=1768469400000&t=2026-01-15T09%3A00%3A00Z");
    }

    #[test]
    fn a_link_never_holds_what_ends_a_link_in_slack_markdown_or_html() {
        let g = GraphLinks::parse("https://g.example/x?a=1|2&q={expr}&b=\"x\"").unwrap();
        let link = g.link("http://p", "a > b | c", &window());
        assert!(!link.contains(['|', '<', '>', '"', ' ']), "{link}");
    }

    #[test]
    fn bad_templates_say_what_to_fix() {
        for (t, want) in [
            ("grafana/explore?q={expr}", "not a URL"),
            ("https://g/x?q={query}", "unknown placeholder {query}"),
            ("https://g/x?q=", "add {expr}"),
            ("https://g/x?q={expr", "never closed"),
            ("https://g/x?q={expr} y", "no spaces"),
        ] {
            let e = GraphLinks::parse(t).unwrap_err();
            assert!(e.contains(want), "{t}: {e}");
        }
    }
}
