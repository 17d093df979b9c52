//! Token passthrough through `manifold serve`, end to end: a caller authenticates with an API
//! key, and only the upstream configured with `token_passthrough = true` receives that caller's
//! own bearer token; the other upstream, behind the same gateway, never sees it. Each upstream
//! is a small recording MCP server inside the test, so what crossed the wire is what is asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use manifold_testkit::{GatewayProcess, McpSession, ServeCommand};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// The `Authorization` header of every `tools/call` an upstream received (`None`: no header).
#[derive(Clone, Default)]
struct Recorder {
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
}

/// A legacy-era MCP server over Streamable HTTP with JSON replies and no session: one tool,
/// `probe`.
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
            r.authorizations.lock().unwrap().push(
                headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_owned()),
            );
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

fn temp_dir(name: &str) -> PathBuf {
    manifold_testkit::fresh_dir(&format!("token-passthrough-{name}")).unwrap()
}

/// `manifold keys create NAME`: the key, printed once.
fn create_key(dir: &Path, config: &Path, name: &str) -> String {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .create_key(name, &[])
        .unwrap()
}

fn serve(dir: &Path, config: &Path) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .start()
        .unwrap()
}

/// One stateless (2026-07-28) `tools/call` with `Authorization: Bearer KEY`.
async fn call(url: &str, key: &str, tool: &str) -> Value {
    McpSession::options(url)
        .client_info("token-passthrough", "1")
        .accept("application/json")
        .bearer(key)
        .modern()
        .call_tool(tool, json!({}))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_passthrough_server_receives_the_callers_own_token() {
    let passing = Recorder::default();
    let passing_port = serve_on_loopback(
        Router::new()
            .route("/mcp", post(record))
            .with_state(passing.clone()),
    )
    .await;
    let keeping = Recorder::default();
    let keeping_port = serve_on_loopback(
        Router::new()
            .route("/mcp", post(record))
            .with_state(keeping.clone()),
    )
    .await;
    let dir = temp_dir("keys");
    let config = dir.join("manifold.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n[auth]\napi_keys = true\n\n\
             [servers.pass]\nurl = \"http://127.0.0.1:{passing_port}/mcp\"\ntoken_passthrough = true\n\n\
             [servers.keep]\nurl = \"http://127.0.0.1:{keeping_port}/mcp\"\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let alice = create_key(&dir, &config, "alice");
    let bob = create_key(&dir, &config, "bob");
    let gateway = serve(&dir, &config);

    for (key, tool) in [
        (&alice, "pass__probe"),
        (&bob, "pass__probe"),
        (&alice, "keep__probe"),
    ] {
        let answer = call(gateway.url(), key, tool).await;
        assert_eq!(
            answer["result"]["content"][0]["text"], "recorded",
            "{answer}"
        );
    }

    // Each call to the passthrough server carried its own caller's token, in order.
    assert_eq!(
        *passing.authorizations.lock().unwrap(),
        vec![
            Some(format!("Bearer {alice}")),
            Some(format!("Bearer {bob}"))
        ]
    );
    // The other server got the call and no credential at all.
    assert_eq!(*keeping.authorizations.lock().unwrap(), vec![None]);
}
