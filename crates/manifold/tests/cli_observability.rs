//! Observability end to end: `manifold serve` with real upstreams, driven over HTTP, then read
//! back the way an operator would: `/metrics` scraped and checked value by value, the JSON call
//! lines on stderr checked field by field (and for what they must not contain), and the spans an
//! OTLP/HTTP collector received checked against the trace context the client sent and the one the
//! upstream received.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use manifold_testkit::{GatewayProcess, ServeCommand};
use nix::sys::signal::Signal;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
const ACCEPT_BOTH: &str = "application/json, text/event-stream";
const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";
/// A value only the arguments of a call carry: it must never reach a log line.
const SECRET_ARGUMENT: &str = "argument-value-that-must-not-be-logged-4711";
/// Hang guard for the gateway's exit after SIGTERM (not a timing assertion).
const EXIT_GUARD: Duration = Duration::from_secs(60);

fn temp_dir(name: &str) -> PathBuf {
    manifold_testkit::fresh_dir(&format!("cli-observability-{name}")).unwrap()
}

/// `manifold serve --log-format json`, stderr in a file.
struct Gateway {
    process: GatewayProcess,
    url: String,
}

impl Gateway {
    async fn start(dir: &Path, config: &str) -> Gateway {
        let serve = ServeCommand::new(MANIFOLD, dir)
            .config_text(format!(
                "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n{config}",
                dir.join("data").display()
            ))
            .args(["--log-format", "json"])
            .log("stderr.log");
        // Started off the runtime: the upstreams it meets run on this one.
        let process = tokio::task::spawn_blocking(move || serve.start())
            .await
            .unwrap()
            .unwrap();
        Gateway {
            url: process.url().to_owned(),
            process,
        }
    }

    fn base(&self) -> &str {
        self.process.base()
    }

    /// SIGTERM, then waits for the exit (flushing logs and spans), returning stderr.
    async fn stop(mut self) -> String {
        self.process.signal(Signal::SIGTERM).unwrap();
        let deadline = tokio::time::Instant::now() + EXIT_GUARD;
        loop {
            if let Some(status) = self.process.try_wait().unwrap() {
                assert!(status.success(), "the gateway exited with {status}");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the gateway did not exit after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.process.log()
    }
}

fn http() -> reqwest::Client {
    manifold_testkit::http_client()
}

/// What crossed the wire to `/mcp` in bodies, both ways, as the client counted it.
#[derive(Default)]
struct Traffic {
    sent: u64,
    received: u64,
}

struct Client {
    http: reqwest::Client,
    url: String,
    traffic: Mutex<Traffic>,
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "observability-test", "version": "1"}
    })
}

impl Client {
    fn new(url: &str) -> Client {
        Client {
            http: http(),
            url: url.to_owned(),
            traffic: Mutex::new(Traffic::default()),
        }
    }

    /// POSTs `body` to `/mcp` with `headers`; returns status, response headers and body.
    async fn post(&self, headers: &[(&str, &str)], body: &str) -> (u16, HeaderMap, String) {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(body.to_owned());
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let r = request.send().await.unwrap();
        let status = r.status().as_u16();
        let h = r.headers().clone();
        let text = r.text().await.unwrap();
        let mut t = self.traffic.lock().unwrap();
        t.sent += body.len() as u64;
        t.received += text.len() as u64;
        (status, h, text)
    }

    /// Starts a legacy session; returns its id.
    async fn initialize(&self) -> String {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "observability-test", "version": "1"}}});
        let (status, headers, _) = self.post(&[], &body.to_string()).await;
        assert_eq!(status, 200);
        let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, _) = self
            .post(
                &[
                    ("mcp-session-id", &session),
                    ("mcp-protocol-version", LEGACY),
                ],
                &note.to_string(),
            )
            .await;
        assert_eq!(status, 202);
        session
    }

    /// A `tools/call` in a legacy session; returns the response message.
    async fn legacy_call(&self, session: &str, id: u64, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let (status, _, text) = self
            .post(
                &[
                    ("mcp-session-id", session),
                    ("mcp-protocol-version", LEGACY),
                ],
                &body.to_string(),
            )
            .await;
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    /// A modern `tools/call` with extra headers; returns the response message.
    async fn modern_call(&self, id: u64, mut params: Value, extra: &[(&str, &str)]) -> Value {
        let tool = params["name"].as_str().unwrap().to_owned();
        let meta = params
            .as_object_mut()
            .unwrap()
            .entry("_meta")
            .or_insert_with(|| json!({}));
        for (k, v) in modern_meta().as_object().unwrap() {
            meta[k] = v.clone();
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let mut headers = vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", tool.as_str()),
        ];
        headers.extend_from_slice(extra);
        let (status, _, text) = self.post(&headers, &body.to_string()).await;
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }
}

/// The samples of an exposition: `name{labels}` -> value.
fn samples(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(series, value)| (series.to_owned(), value.to_owned()))
        .collect()
}

fn call_id_of(response: &Value) -> String {
    let id = response["result"]["_meta"]["io.manifold/callId"]
        .as_str()
        .unwrap_or_else(|| panic!("no call id in {response}"))
        .to_owned();
    assert!(
        id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    id
}

/// The JSON call lines of a stderr capture.
fn call_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "manifold::call")
        .collect()
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_every_call_and_each_call_id_leads_to_its_log_line() {
    let dir = temp_dir("metrics");
    let peer = manifold_testkit::test_peer().unwrap();
    let gw = Gateway::start(
        &dir,
        &format!(
            "[servers.peer]\ncommand = \"{}\"\nargs = [\"stdio\"]\n",
            peer.display()
        ),
    )
    .await;
    let client = Client::new(&gw.url);

    let session = client.initialize().await;
    let echoed = client
        .legacy_call(
            &session,
            1,
            json!({"name": "peer__echo", "arguments": {"message": SECRET_ARGUMENT}}),
        )
        .await;
    assert_eq!(echoed["result"]["content"][0]["text"], SECRET_ARGUMENT);
    let echo_id = call_id_of(&echoed);
    let failed = client
        .legacy_call(&session, 2, json!({"name": "peer__fail", "arguments": {}}))
        .await;
    assert_eq!(failed["result"]["isError"], true);
    let fail_id = call_id_of(&failed);
    let unknown = client
        .legacy_call(&session, 3, json!({"name": "peer__nope", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let modern = client
        .modern_call(
            4,
            json!({"name": "peer__echo", "arguments": {"message": "modern"}}),
            &[],
        )
        .await;
    let modern_id = call_id_of(&modern);
    assert_ne!(echo_id, modern_id);

    // Two refusals: a foreign Origin (refused before the body is read: send none) and a body
    // that is no JSON-RPC message.
    let (status, _, _) = client.post(&[("origin", "http://evil.example")], "").await;
    assert_eq!(status, 403);
    let (status, _, _) = client.post(&[], "this is not json").await;
    assert_eq!(status, 400);

    let scrape = client
        .http
        .get(format!("{}/metrics", gw.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(scrape.status(), 200);
    assert_eq!(
        scrape.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = scrape.text().await.unwrap();
    let m = samples(&text);
    let (sent, received) = {
        let t = client.traffic.lock().unwrap();
        (t.sent, t.received)
    };
    let expected = [
        (
            r#"manifold_requests_total{method="initialize",era="legacy",outcome="ok"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_requests_total{method="tools/call",era="legacy",outcome="ok"}"#,
            "2".to_owned(),
        ),
        (
            r#"manifold_requests_total{method="tools/call",era="legacy",outcome="error"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_requests_total{method="tools/call",era="modern",outcome="ok"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_tool_calls_total{upstream="peer",tool="echo",outcome="ok"}"#,
            "2".to_owned(),
        ),
        (
            r#"manifold_tool_calls_total{upstream="peer",tool="fail",outcome="tool_error"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_tool_call_duration_seconds_count{upstream="peer",tool="echo"}"#,
            "2".to_owned(),
        ),
        (
            r#"manifold_tool_call_duration_seconds_count{upstream="peer",tool="fail"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_tool_calls_in_flight{upstream="peer"}"#,
            "0".to_owned(),
        ),
        (
            r#"manifold_sessions{transport="streamable_http",era="legacy",revision="2025-11-25"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_upstream_state{upstream="peer",state="up"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_upstream_state{upstream="peer",state="down"}"#,
            "0".to_owned(),
        ),
        (
            r#"manifold_upstream_restarts_total{upstream="peer"}"#,
            "0".to_owned(),
        ),
        (
            r#"manifold_rejected_requests_total{reason="origin"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_rejected_requests_total{reason="parse_error"}"#,
            "1".to_owned(),
        ),
        (
            r#"manifold_rejected_requests_total{reason="host"}"#,
            "0".to_owned(),
        ),
        (
            r#"manifold_http_bytes_total{direction="in"}"#,
            sent.to_string(),
        ),
        (
            r#"manifold_http_bytes_total{direction="out"}"#,
            received.to_string(),
        ),
    ];
    for (series, value) in &expected {
        assert_eq!(m.get(*series), Some(value), "{series}\n{text}");
    }
    // Exactly these tool-call series: the unknown name made none, arguments are no label.
    let tool_series: Vec<&String> = m
        .keys()
        .filter(|k| k.starts_with("manifold_tool_calls_total{"))
        .collect();
    assert_eq!(tool_series.len(), 2, "{tool_series:?}");
    assert!(!text.contains("nope") && !text.contains(SECRET_ARGUMENT));
    assert!(
        !m.contains_key(r#"manifold_upstream_last_restart_timestamp_seconds{upstream="peer"}"#)
    );

    let stderr = gw.stop().await;
    let lines = call_lines(&stderr);
    assert_eq!(lines.len(), 4, "one line per call:\n{stderr}");
    let by_id = |id: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["call_id"] == id)
            .unwrap_or_else(|| panic!("no line for call {id}:\n{stderr}"))["fields"]
            .clone()
    };
    let tag = manifold_telemetry::redact::session_tag(&session);
    let echo = by_id(&echo_id);
    assert_eq!(echo["message"], "tool call");
    assert_eq!(echo["session"], tag);
    assert_eq!(echo["upstream"], "peer");
    assert_eq!(echo["tool"], "echo");
    assert_eq!(echo["outcome"], "ok");
    assert_eq!(echo["retries"], 0);
    assert!(
        echo["duration_ms"].as_f64().is_some_and(|d| d >= 0.0),
        "{echo}"
    );
    assert_eq!(echo["arguments"], r#"{"message":"<redacted>"}"#);
    let fail = by_id(&fail_id);
    assert_eq!(
        (&fail["tool"], &fail["outcome"], &fail["session"]),
        (&json!("fail"), &json!("tool_error"), &json!(tag))
    );
    let modern_line = by_id(&modern_id);
    assert_eq!(
        (&modern_line["session"], &modern_line["outcome"]),
        (&json!("-"), &json!("ok"))
    );
    let unknown_line = lines
        .iter()
        .map(|l| &l["fields"])
        .find(|f| f["tool"] == "peer__nope")
        .unwrap_or_else(|| panic!("no line for the unknown tool:\n{stderr}"));
    assert_eq!(
        (
            &unknown_line["upstream"],
            &unknown_line["outcome"],
            &unknown_line["error_code"]
        ),
        (&json!("-"), &json!("error"), &json!(-32602))
    );
    assert!(
        !stderr.contains(SECRET_ARGUMENT),
        "an argument value reached the log:\n{stderr}"
    );
    assert!(
        !stderr.contains(&session),
        "the session id (a credential) reached the log"
    );
}

// ---------------------------------------------------------------------------------------------
// Traces: an OTLP/HTTP collector and an MCP server that records what it was sent, both in the test

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    service_names: Arc<Mutex<Vec<String>>>,
}

async fn collect(State(c): State<Collector>, body: Bytes) -> Response {
    let request = ExportTraceServiceRequest::decode(body).unwrap();
    for rs in request.resource_spans {
        for attr in rs.resource.map(|r| r.attributes).unwrap_or_default() {
            if attr.key == "service.name" {
                c.service_names
                    .lock()
                    .unwrap()
                    .push(string_value(&attr.value));
            }
        }
        for ss in rs.scope_spans {
            c.spans.lock().unwrap().extend(ss.spans);
        }
    }
    (
        StatusCode::OK,
        [("content-type", "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

fn string_value(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| string_value(&a.value))
}

/// One `tools/call` the recording server received: its `params._meta` and its `traceparent`
/// header.
#[derive(Debug, Clone)]
struct Received {
    meta: Value,
    header: Option<String>,
}

#[derive(Clone, Default)]
struct Recorder {
    calls: Arc<Mutex<Vec<Received>>>,
}

/// A minimal legacy-era MCP server over Streamable HTTP (JSON replies, no session): one tool,
/// `probe`, whose calls are recorded.
async fn record(State(r): State<Recorder>, headers: HeaderMap, body: String) -> Response {
    let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "recorder", "version": "1"}
        }),
        "tools/list" => json!({"tools": [{"name": "probe", "inputSchema": {"type": "object"}}]}),
        "tools/call" => {
            r.calls.lock().unwrap().push(Received {
                meta: message["params"]["_meta"].clone(),
                header: headers
                    .get("traceparent")
                    .map(|v| v.to_str().unwrap().to_owned()),
            });
            json!({"content": [{"type": "text", "text": "recorded"}]})
        }
        _ => {
            let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not here"}});
            return ([("content-type", "application/json")], error.to_string()).into_response();
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    ([("content-type", "application/json")], answer.to_string()).into_response()
}

async fn serve_on_loopback(app: Router) -> u16 {
    manifold_testkit::serve_router(app).await.unwrap().port()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_crosses_the_gateway_from_the_client_to_the_upstream() {
    let collector = Collector::default();
    let collector_port = serve_on_loopback(
        Router::new()
            .route("/v1/traces", post(collect))
            .with_state(collector.clone()),
    )
    .await;
    let recorder = Recorder::default();
    let upstream_port = serve_on_loopback(
        Router::new()
            .route("/mcp", post(record))
            .with_state(recorder.clone()),
    )
    .await;
    let dir = temp_dir("traces");
    let gw = Gateway::start(
        &dir,
        &format!(
            "[servers.rec]\nurl = \"http://127.0.0.1:{upstream_port}/mcp\"\n\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:{collector_port}\"\nservice_name = \"manifold-test\"\n"
        ),
    )
    .await;
    let client = Client::new(&gw.url);

    // 1. The trace context in HTTP headers (a modern request).
    let (t1, p1) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let by_header = client
        .modern_call(
            1,
            json!({"name": "rec__probe", "arguments": {}}),
            &[("traceparent", &format!("00-{t1}-{p1}-01"))],
        )
        .await;
    // 2. In `_meta` (a legacy session, where HTTP headers name no trace).
    let (t2, p2) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let session = client.initialize().await;
    let by_meta = client
        .legacy_call(
            &session,
            2,
            json!({"name": "rec__probe", "arguments": {},
                   "_meta": {"traceparent": format!("00-{t2}-{p2}-01"), "tracestate": "vendor=x"}}),
        )
        .await;
    // 3. Both: `_meta` wins over the header.
    let (t3, p3) = ("11111111111111111111111111111111", "2222222222222222");
    let both = client
        .modern_call(
            3,
            json!({"name": "rec__probe", "arguments": {},
                   "_meta": {"traceparent": format!("00-{t3}-{p3}-01")}}),
            &[(
                "traceparent",
                "00-99999999999999999999999999999999-8888888888888888-01",
            )],
        )
        .await;
    let stderr = gw.stop().await;

    let spans = collector.spans.lock().unwrap().clone();
    assert_eq!(
        spans.len(),
        6,
        "a server and a client span per call: {spans:#?}\n{stderr}"
    );
    assert!(
        collector
            .service_names
            .lock()
            .unwrap()
            .iter()
            .all(|n| n == "manifold-test")
    );
    let received = recorder.calls.lock().unwrap().clone();
    assert_eq!(received.len(), 3, "{received:?}");
    for (trace, parent, response, state) in [
        (t1, p1, &by_header, None),
        (t2, p2, &by_meta, Some("vendor=x")),
        (t3, p3, &both, None),
    ] {
        let in_trace: Vec<&Span> = spans.iter().filter(|s| hex(&s.trace_id) == trace).collect();
        assert_eq!(in_trace.len(), 2, "trace {trace}: {in_trace:#?}");
        let server = in_trace
            .iter()
            .find(|s| s.kind == 2)
            .unwrap_or_else(|| panic!("no server span in {trace}"));
        let client_span = in_trace
            .iter()
            .find(|s| s.kind == 3)
            .unwrap_or_else(|| panic!("no client span in {trace}"));
        assert_eq!(server.name, "tools/call");
        assert_eq!(
            hex(&server.parent_span_id),
            parent,
            "the caller's span is the parent"
        );
        assert_eq!(
            attribute(server, "manifold.call_id"),
            Some(call_id_of(response)),
            "the call id leads to the trace"
        );
        assert_eq!(client_span.name, "tools/call rec");
        assert_eq!(client_span.parent_span_id, server.span_id);
        assert_eq!(
            attribute(client_span, "gen_ai.tool.name").as_deref(),
            Some("probe")
        );
        let sent = format!("00-{trace}-{}-01", hex(&client_span.span_id));
        let upstream = received
            .iter()
            .find(|r| {
                r.meta["traceparent"]
                    .as_str()
                    .is_some_and(|p| p.contains(trace))
            })
            .unwrap_or_else(|| panic!("the upstream got no call in {trace}: {received:?}"));
        assert_eq!(upstream.meta["traceparent"], sent.as_str());
        assert_eq!(upstream.header.as_deref(), Some(sent.as_str()));
        assert_eq!(upstream.meta["tracestate"].as_str(), state);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_line_names_its_caller_and_groups_and_never_the_key() {
    let dir = temp_dir("caller");
    let peer = manifold_testkit::test_peer().unwrap();
    let config = format!(
        "[auth]\napi_keys = true\n\n[servers.peer]\ncommand = \"{}\"\nargs = [\"stdio\"]\n",
        peer.display()
    );
    // The key must exist before the gateway starts: write the file `Gateway::start` writes.
    let path = dir.join("manifold.toml");
    std::fs::write(
        &path,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n{config}",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let made = Command::new(MANIFOLD)
        .args([
            "keys",
            "create",
            "ci-bot",
            "--scopes",
            "mcp",
            "--groups",
            "ops,oncall",
        ])
        .arg("--config")
        .arg(&path)
        .current_dir(&dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    let gw = Gateway::start(&dir, &config).await;
    let client = Client::new(&gw.url);
    let bearer = format!("Bearer {key}");
    let auth = [("authorization", bearer.as_str())];

    let echoed = client
        .modern_call(
            1,
            json!({"name": "peer__echo", "arguments": {"message": "who"}}),
            &auth,
        )
        .await;
    let call_id = call_id_of(&echoed);

    let stderr = gw.stop().await;
    let line = call_lines(&stderr)
        .into_iter()
        .find(|l| l["fields"]["call_id"] == call_id.as_str())
        .unwrap_or_else(|| panic!("no call line for {call_id}: {stderr}"));
    assert_eq!(line["fields"]["caller"], "ci-bot", "{line}");
    assert_eq!(line["fields"]["groups"], "ops,oncall", "{line}");
    assert!(!stderr.contains(&key), "the API key reached the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifold_stdio_serves_metrics_on_admin_listen_and_counts_a_call_made_over_stdin() {
    use std::io::Write as _;
    let dir = temp_dir("stdio-metrics");
    let peer = manifold_testkit::test_peer().unwrap();
    let port = manifold_testkit::free_port().unwrap();
    let path = dir.join("manifold.toml");
    std::fs::write(
        &path,
        format!(
            "[gateway]\ndata_dir = \"{}\"\n\n[telemetry]\nadmin_listen = \"127.0.0.1:{port}\"\n\n[servers.peer]\ncommand = \"{}\"\nargs = [\"stdio\"]\n",
            dir.join("data").display(),
            peer.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(MANIFOLD)
        .args(["stdio", "--config"])
        .arg(&path)
        .current_dir(&dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "stdio-metrics-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "peer__echo", "arguments": {"message": "counted"}}}),
    ];
    for r in &requests {
        writeln!(stdin, "{r}").unwrap();
    }
    stdin.flush().unwrap();
    // stdout carries protocol only: every line is a JSON-RPC message, up to the call's answer.
    let answer = tokio::time::timeout(
        EXIT_GUARD,
        tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                let line = lines.next().unwrap().unwrap();
                let message: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line}"));
                assert_eq!(message["jsonrpc"], "2.0", "{line}");
                if message["id"] == 2 {
                    return message;
                }
            }
        }),
    )
    .await
    .expect("no answer to the call over stdin")
    .unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"], "counted",
        "{answer}"
    );

    let scrape = http()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(scrape.status(), 200);
    let m = samples(&scrape.text().await.unwrap());
    assert_eq!(
        m.get(r#"manifold_tool_calls_total{upstream="peer",tool="echo",outcome="ok"}"#)
            .map(String::as_str),
        Some("1"),
        "{m:?}"
    );
    let health = http()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    drop(stdin);
    let deadline = std::time::Instant::now() + EXIT_GUARD;
    while child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "manifold stdio did not exit when stdin closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
