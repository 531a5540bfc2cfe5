//! `vllm-diag mcp`: the diagnosis as read-only tools for AI agents, over the Model Context
//! Protocol (the official Rust SDK, `rmcp`), on stdio or streamable HTTP.
//!
//! The tools ([`tools`]) are explain, check, rules_list, rules_show and events. A call's
//! arguments are checked here, before anything runs: a bad one gives a tool error (`isError`)
//! that names the argument and what to give instead, which the agent reads and can act on; an
//! unknown tool is a protocol error. A call that runs gives a short text summary first, then the
//! JSON document bounded to [`bound::SIZE_CAP`] (also as `structuredContent`). Findings are a
//! successful result carrying the verdict and the exit code explain would give; a source that
//! cannot be reached or holds no data is a tool error that says so (never an empty, healthy-looking
//! report). Every text of every result, error and log line has the connection's secrets masked
//! ([`Redact`]), whatever produced it.
//!
//! Like `serve`, this module knows nothing of the settings or the app: the caller hands over how
//! to run a call ([`Run`]), which blocks (it runs on a blocking thread, at most
//! [`MAX_CONCURRENT`] at once).

pub mod bound;
pub mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::error::{exit, Failure};
use crate::source::prometheus::Secret;
pub use tools::Call;

/// What a call that ran gives: the summary people and agents read first, and the document (the
/// JSON report, or the rules or events), bounded before it is sent.
#[derive(Debug, Clone)]
pub struct Answer {
    pub summary: String,
    pub document: Value,
}

/// Runs one checked call. Blocks.
pub type Run = dyn Fn(Call) -> Result<Answer, Failure> + Send + Sync;

/// Calls running at once; more wait. Each diagnosis sends its own queries (up to --concurrency).
pub const MAX_CONCURRENT: usize = 2;

/// Masks the connection's secrets (tokens, passwords, header values) in any text.
#[derive(Debug, Clone, Default)]
pub struct Redact {
    secrets: Vec<String>,
}

impl Redact {
    /// Secrets shorter than 4 characters are not masked: masking them would garble ordinary words,
    /// and no credential is that short.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Redact {
        let mut secrets: Vec<String> = secrets.into_iter().map(|s| s.trim().to_string()).filter(|s| s.chars().count() >= 4).collect();
        // Longest first, so that a secret containing another is masked whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redact { secrets }
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }

    fn value(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => {
                let masked: Vec<(String, Value)> = std::mem::take(map)
                    .into_iter()
                    .map(|(k, mut v)| {
                        self.value(&mut v);
                        (self.text(&k), v)
                    })
                    .collect();
                map.extend(masked);
            }
            _ => {}
        }
    }
}

/// The MCP server: the tools, how to run a call, the secrets to mask.
#[derive(Clone)]
pub struct Server {
    run: Arc<Run>,
    redact: Arc<Redact>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl Server {
    pub fn new(run: Arc<Run>, redact: Redact) -> Server {
        Server { run, redact: Arc::new(redact), slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT)) }
    }

    /// Check and run one call, as the tool result the client gets. `Err` only for a tool that does
    /// not exist.
    pub async fn call(&self, tool: &str, arguments: Option<&serde_json::Map<String, Value>>) -> Result<CallToolResult, ErrorData> {
        let call = match tools::parse(tool, arguments) {
            Ok(call) => call,
            Err(Some(message)) => return Ok(self.tool_error(&message, exit::USAGE)),
            Err(None) => {
                return Err(ErrorData::invalid_params(format!("unknown tool {tool:?}: the tools are {}", tools::NAMES.join(", ")), None));
            }
        };
        let _slot = self.slots.acquire().await.map_err(|_| ErrorData::internal_error("the server is stopping", None))?;
        let run = self.run.clone();
        let answer = tokio::task::spawn_blocking(move || run(call)).await;
        Ok(match answer {
            Ok(Ok(answer)) => self.success(answer),
            Ok(Err(failure)) => self.failure(tool, &failure),
            Err(e) => self.tool_error(&format!("{tool} stopped unexpectedly: {e}"), exit::USAGE),
        })
    }

    fn success(&self, answer: Answer) -> CallToolResult {
        let mut document = bound::bound(answer.document);
        self.redact.value(&mut document);
        let json = serde_json::to_string(&document).unwrap_or_else(|e| json!({ "error": format!("cannot encode the result: {e}") }).to_string());
        let mut result = CallToolResult::success(vec![ContentBlock::text(self.redact.text(&answer.summary)), ContentBlock::text(json)]);
        result.structured_content = Some(document);
        result
    }

    /// A call that ran but gave no verdict: the source, the data, an argument the pack refused.
    fn failure(&self, tool: &str, failure: &Failure) -> CallToolResult {
        let code = failure.exit_code();
        let lead = if code == exit::NO_DATA {
            format!("NOT EVALUATED: {tool} gives no verdict (exit code 3); this is not a healthy result.")
        } else {
            // A usage error names its argument, and says what to do, itself.
            let text = failure.to_string();
            let text = if text.starts_with(tool) { text } else { format!("{tool}: {text}") };
            return self.tool_error(&text, code);
        };
        self.tool_error(&format!("{lead} {failure}"), code)
    }

    fn tool_error(&self, message: &str, code: u8) -> CallToolResult {
        let message = self.redact.text(message);
        let document = json!({
            "schema_version": crate::report::SCHEMA_VERSION,
            "error": { "message": message, "exit_code": code },
        });
        let mut result = CallToolResult::error(vec![ContentBlock::text(message)]);
        result.structured_content = Some(document);
        result
    }
}

/// The tools as listed: read-only, and explain, check and events reach the metrics backend.
fn list() -> Vec<Tool> {
    tools::specs()
        .into_iter()
        .map(|spec| {
            let schema = match spec.schema {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            };
            let open = matches!(spec.name, "explain" | "check" | "events");
            let annotations = ToolAnnotations::with_title(spec.title).read_only(true).destructive(false).idempotent(true).open_world(open);
            Tool::new(spec.name, spec.description, Arc::new(schema)).with_title(spec.title).with_annotations(annotations)
        })
        .collect()
}

const INSTRUCTIONS: &str = "vllm-diag diagnoses vLLM inference fleets from their Prometheus metrics. Call explain for what is wrong now (or in a given window), check after a deploy, events for what changed, rules_list and rules_show for what each finding means. Each result opens with a text summary; the JSON that follows is the report: findings are ranked best first, and their numbers (values, baselines, thresholds, recommendations) are computed from the metrics, so quote them rather than recomputing them. NOT EVALUATED or exit code 3 means no verdict (no data, or the source unreachable), never healthy.";

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("vllm-diag", env!("CARGO_PKG_VERSION")).with_title("vllm-diag: diagnosis of vLLM fleets"))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(list()))
    }

    async fn call_tool(&self, request: CallToolRequestParams, _context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        self.call(&request.name, request.arguments.as_ref()).await.map(CallToolResponse::from)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        list().into_iter().find(|t| t.name == name)
    }
}

/// Serve one client on stdin and stdout until it closes them.
pub async fn run_stdio(server: Server) -> Result<(), Failure> {
    let running = server.serve(rmcp::transport::stdio()).await.map_err(|e| Failure::Usage(format!("mcp: the client did not initialize the session: {e}")))?;
    running.waiting().await.map_err(|e| Failure::Output(format!("mcp: the session ended abnormally: {e}")))?;
    Ok(())
}

/// What the HTTP transport is told.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// host:port; port 0 picks one (stderr says which).
    pub listen: String,
    /// Host header values accepted besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Required as `Authorization: Bearer <token>` on every request when set.
    pub auth_token: Option<Secret>,
}

/// Serve MCP streamable HTTP at `/mcp` until `shutdown`.
pub async fn run_http(server: Server, config: HttpConfig, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), Failure> {
    use rmcp::transport::streamable_http_server::{session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService};
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|e| Failure::Usage(format!("--listen {}: cannot listen there: {e}. Give a free host:port, e.g. 127.0.0.1:9096", config.listen)))?;
    let addr = listener.local_addr().map_err(|e| Failure::Output(format!("--listen {}: {e}", config.listen)))?;
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    hosts.extend(config.allowed_hosts.iter().cloned());
    let http_config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts);
    // Cancelled on shutdown: the open sessions (and their event streams) end with the server.
    let stop = http_config.cancellation_token.clone();
    let service = StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), http_config);
    let token = config.auth_token.clone();
    let router = axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let token = token.clone();
            async move {
                match &token {
                    Some(t) if !crate::serve::authorized(request.headers(), t) => {
                        axum::response::IntoResponse::into_response((axum::http::StatusCode::UNAUTHORIZED, "missing or wrong Authorization: Bearer token\n"))
                    }
                    _ => next.run(request).await,
                }
            }
        },
    ));
    eprintln!("vllm-diag mcp: listening on http://{addr}/mcp");
    if config.auth_token.is_none() {
        eprintln!("vllm-diag mcp: warning: no --auth-token-file: anyone who can reach {addr} can run diagnoses with this server's credentials");
    }
    let served = axum::serve(listener, router).with_graceful_shutdown(async move {
        shutdown.await;
        stop.cancel();
    });
    served.await.map_err(|e| Failure::Output(format!("mcp: the HTTP server stopped: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_in_text_keys_and_nested_values() {
        let r = Redact::new(["s3cr3t-token".to_string(), "ab".to_string(), "s3cr3t".to_string()]);
        assert_eq!(r.text("Bearer s3cr3t-token and s3cr3t"), "Bearer *** and ***");
        // Too short to be a credential: left alone.
        assert_eq!(r.text("abc"), "abc");
        let mut v = json!({"a": ["x s3cr3t-token y"], "s3cr3t": {"b": "s3cr3t"}});
        r.value(&mut v);
        assert_eq!(v, json!({"a": ["x *** y"], "***": {"b": "***"}}));
    }

    #[test]
    fn every_tool_is_listed_read_only_with_an_object_schema() {
        let tools = list();
        assert_eq!(tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>(), tools::NAMES);
        for t in &tools {
            assert_eq!(t.input_schema.get("type"), Some(&json!("object")));
            assert_eq!(t.annotations.as_ref().and_then(|a| a.read_only_hint), Some(true));
        }
    }

    #[tokio::test]
    async fn a_bad_argument_is_a_tool_error_and_an_unknown_tool_a_protocol_error() {
        let server = Server::new(Arc::new(|_| Err(Failure::Usage("not run".into()))), Redact::default());
        let args = json!({"window": "banana"});
        let r = server.call("explain", args.as_object()).await.unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content.as_ref().unwrap()["error"]["exit_code"], 2);
        assert!(server.call("explian", None).await.is_err());
    }

    #[tokio::test]
    async fn no_data_is_not_evaluated_and_the_secret_never_shows() {
        let server = Server::new(Arc::new(|_| Err(Failure::Source("cannot reach http://u:hunter2-pass@x".into()))), Redact::new(["hunter2-pass".to_string()]));
        let r = server.call("events", None).await.unwrap();
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("NOT EVALUATED") && text.contains("exit code 3"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
