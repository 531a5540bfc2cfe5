//! Short, readable quotes of a foreign body for error messages: plain text cut to its start and its
//! end, an HTML error page by its title or its text.

/// Longest excerpt of a foreign body quoted in an error.
const EXCERPT_CHARS: usize = 200;

/// At most `n` characters of `s`, with "..." when cut.
pub(super) fn short(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        let cut: String = s.chars().take(n).collect();
        format!("{cut}...")
    } else {
        s.to_string()
    }
}

pub(super) fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(super) fn looks_like_html(body: &str, content_type: &str) -> bool {
    if content_type.to_ascii_lowercase().contains("html") {
        return true;
    }
    let head: String = body.trim_start().chars().take(512).collect::<String>().to_ascii_lowercase();
    head.starts_with('<') && ["<!doctype html", "<html", "<head", "<body", "<title", "<h1", "<center", "<p>"].iter().any(|t| head.contains(t))
}

/// A short, readable excerpt of a body that is not a Prometheus response.
pub(super) fn excerpt(body: &str, content_type: &str) -> String {
    if body.trim().is_empty() {
        return "(empty body)".to_string();
    }
    if looks_like_html(body, content_type) {
        return html_excerpt(body);
    }
    let text = collapse_ws(body);
    format!("{:?}", head_and_tail(&text, EXCERPT_CHARS))
}

/// At most about `n` characters of a plain-text error: its start and its end, since servers often
/// put the request first and the reason last (VictoriaMetrics: `remoteAddr: ...; requestURI: ...;
/// unsupported path requested: ...`).
fn head_and_tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    let tail_len = n * 2 / 5;
    let head: String = s.chars().take(n - tail_len).collect();
    let tail: String = s.chars().skip(count - tail_len).collect();
    format!("{head} ... {tail}")
}

/// `HTML page titled "502 Bad Gateway"`, or the page's text when it has no title.
pub(super) fn html_excerpt(body: &str) -> String {
    if let Some(title) = html_title(body) {
        let text = collapse_ws(&decode_entities(&strip_tags(&title)));
        if !text.is_empty() {
            return format!("HTML page titled {:?}", short(&text, EXCERPT_CHARS));
        }
    }
    let text = collapse_ws(&decode_entities(&strip_tags(&drop_blocks(body))));
    if text.is_empty() {
        "HTML page without text".to_string()
    } else {
        format!("HTML page: {:?}", short(&text, EXCERPT_CHARS))
    }
}

/// Text between `<title ...>` and `</title>`, if present. ASCII lowercasing keeps byte offsets valid.
fn html_title(body: &str) -> Option<String> {
    let lower = body.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let content_start = open + lower[open..].find('>')? + 1;
    let close = content_start + lower[content_start..].find("</title")?;
    Some(body[content_start..close].to_string())
}

/// Removes `<script>` and `<style>` elements with their content.
fn drop_blocks(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let lower = body.to_ascii_lowercase();
    let mut i = 0;
    while i < body.len() {
        let next = ["<script", "<style"].iter().filter_map(|t| lower[i..].find(t).map(|p| (i + p, *t))).min_by_key(|(p, _)| *p);
        match next {
            Some((p, tag)) => {
                out.push_str(&body[i..p]);
                let closing = format!("</{}", &tag[1..]);
                match lower[p..].find(&closing) {
                    Some(c) => {
                        let after = p + c;
                        i = match lower[after..].find('>') {
                            Some(g) => after + g + 1,
                            None => body.len(),
                        };
                    }
                    None => i = body.len(),
                }
            }
            None => {
                out.push_str(&body[i..]);
                break;
            }
        }
    }
    out
}

/// Replaces every `<...>` with a space.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn decode_entities(s: &str) -> String {
    s.replace("&nbsp;", " ").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}
