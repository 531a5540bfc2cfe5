//! What a probe will send: the endpoint from the URL given, the request shape, the limits, and each
//! request's body. Nothing here touches the network, so a dry run is this module alone.

use serde::Serialize;
use serde_json::{json, Value};

use super::{Api, Limits, Shape};

/// A probe's plan, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The URL as given, credentials removed (for people).
    pub target: String,
    /// Where every request goes (credentials never in it: they travel as headers).
    pub endpoint: url::Url,
    /// The server's `/v1/models`, asked once when no model was given.
    pub models_url: url::Url,
    /// The model to ask for; `None`: read from `models_url` first.
    pub model: Option<String>,
    pub shape: Shape,
    pub limits: Limits,
}

/// Why a URL cannot be probed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

/// The endpoint for `api` from the URL given: a server's root (`http://host:8000`), its `/v1`
/// (`https://gateway/llm/v1`), or the endpoint itself (`.../v1/chat/completions`, whose API then
/// must be the one asked for). Credentials in the URL are refused: they would be shown and logged
/// by every proxy on the way; the credential flags carry them instead.
pub fn endpoint(url: &str, api: Api) -> Result<(url::Url, url::Url), PlanError> {
    let shown = crate::prom::redact_url(url);
    let bad = |what: String| PlanError(format!("probe URL {shown:?}: {what}"));
    let parsed = url::Url::parse(url).map_err(|e| bad(format!("not a URL ({e}); write e.g. http://10.0.0.5:8000")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(format!("the scheme must be http or https, not {}", parsed.scheme())));
    }
    if parsed.host_str().is_none() {
        return Err(bad("the URL has no host".into()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("credentials in the URL are not sent; give them with --basic-auth-user and --basic-auth-password-file, or --bearer-token-file".into()));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("give the server's address without a query string or fragment".into()));
    }
    let path = parsed.path().trim_end_matches('/').to_string();
    let (base, given) = if let Some(b) = path.strip_suffix("/v1/chat/completions") {
        (b.to_string(), Some(Api::Chat))
    } else if let Some(b) = path.strip_suffix("/v1/completions") {
        (b.to_string(), Some(Api::Completions))
    } else if let Some(b) = path.strip_suffix("/v1") {
        (b.to_string(), None)
    } else {
        (path, None)
    };
    if let Some(g) = given {
        if g != api {
            return Err(bad(format!("the URL names /v1/{} but --api is {}; drop the path or change --api", g.path(), api_name(api))));
        }
    }
    let at = |p: &str| {
        let mut u = parsed.clone();
        u.set_path(&format!("{base}/v1/{p}"));
        u
    };
    Ok((at(api.path()), at("models")))
}

fn api_name(api: Api) -> &'static str {
    match api {
        Api::Completions => "completions",
        Api::Chat => "chat",
    }
}

/// Short common words: most tokenizers make each one token, so a prompt of N words is about N
/// tokens whatever the model.
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "it", "for", "on", "with", "as", "was", "at", "by", "be", "this", "from", "or", "an", "are", "not", "but", "all",
    "can", "one", "time", "day", "way", "new", "good", "work", "city", "river", "road", "light", "water", "house", "paper", "stone", "field",
];

/// Request `index`'s prompt: `words` words chosen by a fixed sequence from the index, so prompts
/// differ (no two share a long prefix a cache would serve) and a rerun sends the same ones.
pub fn prompt(index: usize, words: usize) -> String {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ (index as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut out = Vec::with_capacity(words);
    for _ in 0..words {
        // xorshift64*: enough to spread the words; not for anything secret.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        out.push(WORDS[(r >> 33) as usize % WORDS.len()]);
    }
    out.join(" ")
}

/// Request `index`'s JSON body.
pub fn body(shape: &Shape, model: &str, index: usize) -> Value {
    let stream = shape.stream.streams(index);
    let text = prompt(index, shape.prompt_words);
    let mut b = match shape.api {
        Api::Completions => json!({"model": model, "prompt": text}),
        Api::Chat => json!({"model": model, "messages": [{"role": "user", "content": text}]}),
    };
    b["max_tokens"] = json!(shape.max_tokens);
    b["temperature"] = json!(0.0);
    b["stream"] = json!(stream);
    if stream {
        // The last event then carries the usage: the tokens generated, counted by the server.
        b["stream_options"] = json!({"include_usage": true});
    }
    if shape.ignore_eos {
        b["ignore_eos"] = json!(true);
    }
    b
}

/// One request a dry run shows.
#[derive(Debug, Clone, Serialize)]
pub struct Planned {
    pub method: &'static str,
    pub url: String,
    pub body: Option<Value>,
}

/// Everything the probe would send, in order: the model lookup when no model is given, then every
/// request (the model shown as `<from /v1/models>` until it is known).
pub fn planned(plan: &Plan) -> Vec<Planned> {
    let mut out = Vec::new();
    if plan.model.is_none() {
        out.push(Planned { method: "GET", url: plan.models_url.to_string(), body: None });
    }
    let model = plan.model.clone().unwrap_or_else(|| "<from /v1/models>".to_string());
    for i in 0..plan.limits.requests {
        out.push(Planned { method: "POST", url: plan.endpoint.to_string(), body: Some(body(&plan.shape, &model, i)) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::StreamMode;

    #[test]
    fn the_endpoint_is_found_from_a_root_a_v1_or_the_endpoint_itself() {
        let e = |u: &str, api| endpoint(u, api).map(|(e, m)| (e.to_string(), m.to_string()));
        assert_eq!(e("http://h:8000", Api::Completions).unwrap().0, "http://h:8000/v1/completions");
        assert_eq!(e("http://h:8000/", Api::Chat).unwrap().0, "http://h:8000/v1/chat/completions");
        assert_eq!(e("https://gw/llm/v1/", Api::Chat).unwrap(), ("https://gw/llm/v1/chat/completions".into(), "https://gw/llm/v1/models".into()));
        assert_eq!(e("https://gw/llm", Api::Completions).unwrap().0, "https://gw/llm/v1/completions");
        assert_eq!(e("http://h/v1/chat/completions", Api::Chat).unwrap().1, "http://h/v1/models");
        assert!(e("http://h/v1/chat/completions", Api::Completions).unwrap_err().0.contains("--api"));
        assert!(e("ftp://h", Api::Chat).unwrap_err().0.contains("http or https"));
        assert!(e("h:8000", Api::Chat).is_err());
        let creds = e("http://me:hunter2@h:8000", Api::Chat).unwrap_err().0;
        assert!(creds.contains("--bearer-token-file") && !creds.contains("hunter2"), "{creds}");
        assert!(e("http://h:8000/?key=1", Api::Chat).is_err());
    }

    #[test]
    fn prompts_have_the_words_asked_differ_by_request_and_repeat_by_index() {
        assert_eq!(prompt(3, 64).split(' ').count(), 64);
        assert_eq!(prompt(3, 64), prompt(3, 64));
        assert_ne!(prompt(3, 64), prompt(4, 64));
        assert_ne!(prompt(0, 16).split(' ').next(), None);
    }

    #[test]
    fn bodies_follow_the_shape() {
        let shape = Shape { api: Api::Chat, stream: StreamMode::Both, prompt_words: 8, max_tokens: 16, ignore_eos: true };
        let b0 = body(&shape, "m", 0);
        assert_eq!((b0["stream"].clone(), b0["max_tokens"].clone(), b0["ignore_eos"].clone()), (json!(true), json!(16), json!(true)));
        assert_eq!(b0["messages"][0]["content"].as_str().unwrap().split(' ').count(), 8);
        assert_eq!(b0["stream_options"]["include_usage"], json!(true));
        let b1 = body(&Shape { api: Api::Completions, ignore_eos: false, ..shape }, "m", 1);
        assert_eq!((b1["stream"].clone(), b1.get("ignore_eos"), b1.get("stream_options")), (json!(false), None, None));
        assert!(b1["prompt"].is_string());
    }
}
