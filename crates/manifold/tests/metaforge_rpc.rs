//! The legacy MetaForge dialect at `POST /rpc`, end to end: a real `manifold serve` with API keys
//! on and a real Python SDK server behind it, asked the dialect's three methods over HTTP as an
//! older MetaForge caller does. Checks the shapes, the error types, a timeout that cancels the
//! call, that authentication and the audit trail apply as on `/mcp`, and that the endpoint is
//! absent unless turned on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use manifold_testkit::{
    GatewayProcess, ScratchDir, ServeCommand, python_server_section, toml_string,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Bounds waits for the audit trail; never a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn config(data: &Path, dialect: bool) -> String {
    let dialect = if dialect {
        "[metaforge]\nenabled = true\n"
    } else {
        ""
    };
    format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = {data}\n\n[auth]\napi_keys = true\n\n{dialect}\n{py}",
        data = toml_string(&data.to_string_lossy()),
        py = python_server_section("py").unwrap(),
    )
}

struct Served {
    _gateway: GatewayProcess,
    rpc: String,
}

fn serve(dir: &Path, config: &Path) -> Served {
    let gateway = ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .start()
        .unwrap();
    Served {
        rpc: gateway.endpoint("/rpc"),
        _gateway: gateway,
    }
}

fn setup(name: &str, dialect: bool) -> (ScratchDir, std::path::PathBuf, Served, String) {
    let dir = ScratchDir::new(name).unwrap();
    let config_path = dir.path().join("manifold.toml");
    std::fs::write(&config_path, config(&dir.path().join("data"), dialect)).unwrap();
    let key = ServeCommand::new(MANIFOLD, dir.path())
        .config(&config_path)
        .create_key("legacy-caller", &[])
        .unwrap();
    let served = serve(dir.path(), &config_path);
    (dir, config_path, served, key)
}

async fn rpc(url: &str, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = manifold_testkit::http_client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn call(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test]
async fn the_dialects_methods_answer_in_its_shapes_through_the_same_pipeline() {
    let (_dir, config_path, served, key) = setup("metaforge", true);
    let key = Some(key.as_str());

    let (status, _) = rpc(&served.rpc, None, call(1, "tool/list", json!({}))).await;
    assert_eq!(status, 401, "the same authentication as /mcp");

    let (status, listed) = rpc(&served.rpc, key, call(1, "tool/list", json!({}))).await;
    assert_eq!(status, 200, "{listed}");
    let tools = listed["result"]["tools"].as_array().unwrap();
    let echo = tools
        .iter()
        .find(|t| t["tool_id"] == "py__echo")
        .expect("py__echo is listed");
    assert_eq!(echo["adapter"], "py");
    assert_eq!(echo["input_schema"]["type"], "object", "{echo}");
    assert!(
        tools
            .iter()
            .any(|t| t["tool_id"] == "manifold_health" && t["adapter"] == "manifold")
    );

    let (_, called) = rpc(
        &served.rpc,
        key,
        call(
            2,
            "tool/call",
            json!({"tool_id": "py__echo", "arguments": {"message": "hi"}, "trace_id": "t-1"}),
        ),
    )
    .await;
    let result = &called["result"];
    assert_eq!(called["id"], 2);
    assert_eq!(result["status"], "success", "{called}");
    assert_eq!(result["tool_id"], "py__echo");
    assert_eq!(result["trace_id"], "t-1");
    assert!(result["data"].to_string().contains("hi"), "{called}");
    assert!(result["duration_ms"].is_u64(), "{called}");

    let (_, unknown) = rpc(
        &served.rpc,
        key,
        call(3, "tool/call", json!({"tool_id": "py__nope"})),
    )
    .await;
    assert_eq!(
        unknown["error"]["data"]["error_type"], "not_found",
        "{unknown}"
    );
    assert_eq!(unknown["error"]["data"]["tool_id"], "py__nope");

    let (_, slow) = rpc(
        &served.rpc,
        key,
        call(4, "tool/call", json!({"tool_id": "py__slow", "arguments": {"seconds": 30, "steps": 1}, "timeout_seconds": 0.5})),
    )
    .await;
    assert_eq!(slow["error"]["data"]["error_type"], "timeout", "{slow}");

    let (_, bad) = rpc(
        &served.rpc,
        key,
        call(
            5,
            "tool/call",
            json!({"tool_id": "py__echo", "timeout_seconds": -1}),
        ),
    )
    .await;
    assert_eq!(
        bad["error"]["data"]["error_type"], "invalid_arguments",
        "{bad}"
    );

    let (_, health) = rpc(&served.rpc, key, call(6, "health/check", json!({}))).await;
    let h = &health["result"];
    assert_eq!(h["status"], "healthy", "{health}");
    assert_eq!(h["unreachable_adapters"], json!([]));
    assert_eq!(h["adapters"][0]["name"], "py");
    assert_eq!(h["adapters"][0]["state"], "up");

    let (_, other) = rpc(&served.rpc, key, call(7, "tools/list", json!({}))).await;
    assert_eq!(
        other["error"]["data"]["error_type"], "method_not_found",
        "{other}"
    );
    let (_, garbage) = rpc(&served.rpc, key, json!("not a request")).await;
    assert_eq!(
        garbage["error"]["data"]["error_type"], "invalid_request",
        "{garbage}"
    );

    // The call is on the record as the caller's, as any /mcp call is.
    ServeCommand::new(MANIFOLD, config_path.parent().unwrap())
        .config(&config_path)
        .audit_search_until(
            &[
                "--caller",
                "legacy-caller",
                "--server",
                "py",
                "--tool",
                "echo",
            ],
            "legacy-caller",
            HANG_GUARD,
        )
        .unwrap();
}

#[tokio::test]
async fn the_dialect_is_absent_unless_turned_on() {
    let (_dir, _config, served, key) = setup("metaforge-off", false);
    let (status, _) = rpc(&served.rpc, Some(&key), call(1, "tool/list", json!({}))).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_body_past_the_endpoints_bound_is_refused_unread() {
    let (_dir, _config, served, key) = setup("metaforge-big", true);
    // One byte past manifold-server's MAX_BODY_BYTES (16 MiB), the bound /mcp has too.
    let big = format!("\"{}\"", "x".repeat(16 * 1024 * 1024));
    let response = manifold_testkit::http_client()
        .post(&served.rpc)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(
        answer["error"]["data"]["error_type"], "invalid_request",
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_body_bytes"),
        "{answer}"
    );
}
