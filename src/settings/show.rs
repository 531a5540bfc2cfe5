//! `vllm-diag config show`: the settings in force, each with where it came from, secrets masked.

use std::path::PathBuf;

use super::{Origin, Setting, Settings, DEFAULT_PROFILE, DEFAULT_WINDOW};

/// One row of `config show`: the key as written in the file, the value (already masked when
/// secret) and its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

/// The rows `config show` prints, in the file's order of sections.
pub fn rows(s: &Settings) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut push = |key: &str, value: String, origin: &Origin| rows.push(Row { key: key.to_string(), value, origin: origin.clone() });
    let c = &s.connection;
    push("source.prometheus", crate::prom::mask_password(&s.source.prometheus), &s.source.prometheus.origin);
    if let Some(origin) = &c.withheld {
        push("source.headers, credentials", "(the file's are not sent: the URL is not the file's)".into(), origin);
    }
    push("source.tenant", c.tenant.value.clone().unwrap_or_else(|| "(none)".into()), &c.tenant.origin);
    // The file's headers, then the flags'.
    let header_rows = c.headers.iter().filter(|h| h.origin.is_file()).chain(c.headers.iter().filter(|h| !h.origin.is_file()));
    for h in header_rows {
        if let Some((name, _)) = h.expose().split_once(':') {
            push(&format!("source.headers.{}", name.trim()), "***".into(), &h.origin);
        }
    }
    push("source.ca_file", show_path(&c.ca_file), &c.ca_file.origin);
    push("source.cert_file", show_path(&c.cert_file), &c.cert_file.origin);
    push("source.key_file", show_path(&c.key_file), &c.key_file.origin);
    push("source.insecure_skip_verify", c.insecure_skip_verify.to_string(), &c.insecure_skip_verify.origin);
    push("source.bearer_token_file", show_path(&c.bearer_token_file), &c.bearer_token_file.origin);
    push("source.bearer_token", masked(&c.bearer_token), &c.bearer_token.origin);
    push("source.basic_auth_user", c.basic_auth_user.value.clone().unwrap_or_else(|| "(none)".into()), &c.basic_auth_user.origin);
    push("source.basic_auth_password_file", show_path(&c.basic_auth_password_file), &c.basic_auth_password_file.origin);
    push("source.basic_auth_password", masked(&c.basic_auth_password), &c.basic_auth_password.origin);

    let sc = &s.scope;
    let selector = sc.selector.value.clone().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| "(none)".into());
    push("selector", selector, &sc.selector.origin);
    push("group_by", sc.group_by.value.clone(), &sc.group_by.origin);
    push("replica_label", sc.replica_label.value.clone(), &sc.replica_label.origin);
    push("window", humantime::format_duration(sc.window.unwrap_or(DEFAULT_WINDOW)).to_string(), &sc.window.origin);
    let baseline = match *sc.baseline {
        Some(b) => humantime::format_duration(b).to_string(),
        None => "the window's length (the window right before)".into(),
    };
    push("baseline", baseline, &sc.baseline.origin);

    let r = &s.rules;
    let dir = r.dir.as_ref().map_or("(built-in pack only)".into(), |p| p.display().to_string());
    push("rules.dir", dir, &r.dir.origin);
    push("profile", r.profile.value.clone().unwrap_or_else(|| DEFAULT_PROFILE.into()), &r.profile.origin);
    let links = s.output.links.value.clone().unwrap_or_else(|| "(Prometheus /graph for a live run)".into());
    push("links.graph", links, &s.output.links.origin);
    for t in &r.thresholds {
        push(&format!("thresholds.{}", t.name), t.written.clone(), &t.origin);
    }
    if let Some(list) = r.enabled.as_ref() {
        push("rules.enabled", list.join(", "), &r.enabled.origin);
    }
    if let Some(off) = r.off.as_ref() {
        push("rules.disabled", if off.is_empty() { "(none)".into() } else { off.join(", ") }, &r.off.origin);
    }

    // A file the configuration names that does not exist is shown as such.
    for (key, setting) in super::merge::file_paths(s) {
        if let (Some(p), true) = (setting.value.as_ref(), setting.origin.is_file()) {
            if !p.exists() {
                if let Some(row) = rows.iter_mut().find(|r| r.key == key) {
                    row.value = format!("{} (DOES NOT EXIST)", row.value);
                }
            }
        }
    }
    rows
}

/// The text of `config show`: which file was read, then a row per setting with its origin.
pub fn show(s: &Settings) -> String {
    let mut out = String::new();
    match &s.file.read {
        Some((path, found)) => out.push_str(&format!("Configuration file: {} (from {found})\n", path.display())),
        None if s.file.disabled => out.push_str("Configuration file: none (--no-config)\n"),
        None => {
            let looked: Vec<String> = s.file.searched.iter().map(|p| p.display().to_string()).collect();
            out.push_str(&format!("Configuration file: none found (looked for {})\n", looked.join(", ")));
        }
    }
    out.push('\n');
    let rows: Vec<(String, String, String)> = rows(s).into_iter().map(|r| (r.key, one_line(&r.value), origin_text(&r.origin))).collect();
    let kw = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0).max("setting".len());
    let vw = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0).max("value".len()).min(60);
    out.push_str(&format!("{:<kw$}  {:<vw$}  {}\n", "setting", "value", "from"));
    for (k, v, o) in rows {
        out.push_str(&format!("{k:<kw$}  {v:<vw$}  {o}\n"));
    }
    out
}

/// `flag --window`, `env $VLLM_DIAG_PROMETHEUS_URL`, `file ./vllm-diag.toml:3 (via ${NS})`, `default`.
pub fn origin_text(o: &Origin) -> String {
    match o {
        Origin::Flag(f) => format!("flag {f}"),
        Origin::Env(v) => format!("env ${v}"),
        Origin::File { path, line, vars, .. } if vars.is_empty() => format!("file {}:{line}", path.display()),
        Origin::File { path, line, vars, .. } => {
            let via = vars.iter().map(|v| format!("${{{v}}}")).collect::<Vec<_>>().join(", ");
            format!("file {}:{line} (via {via})", path.display())
        }
        Origin::Default => "default".to_string(),
    }
}

fn show_path(p: &Setting<Option<PathBuf>>) -> String {
    p.as_ref().map_or("(none)".into(), |p| p.display().to_string())
}

fn masked<T>(secret: &Setting<Option<T>>) -> String {
    if secret.is_some() { "***" } else { "(none)" }.to_string()
}

use crate::text::one_line;

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_in_urls_are_masked() {
        assert_eq!(crate::prom::mask_password("https://alice:pw@host/p"), "https://alice:***@host/p");
        assert_eq!(crate::prom::mask_password("http://host:9090/a@b"), "http://host:9090/a@b");
    }
}
