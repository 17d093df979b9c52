//! The Streamable HTTP mode over raw HTTP/1.1: session lifecycle, DNS-rebinding refusal, modern
//! header validation, SSE replies and stream resumption, each with the exact status and bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned;

use serde_json::{Value, json};
use spawned::{HttpFixture, modern_meta};

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } },
    })
}

#[tokio::test]
async fn a_legacy_session_lives_until_deleted() {
    let fixture = HttpFixture::start().await;
    let init = fixture.post(&[], &initialize()).await;
    assert_eq!(init.status, 200);
    assert_eq!(init.header("content-type"), Some("application/json"));
    assert_eq!(init.json()["result"]["protocolVersion"], "2025-11-25");
    let session = init.header("mcp-session-id").unwrap().to_owned();
    assert_eq!(session.len(), 32);
    assert!(session.bytes().all(|b| b.is_ascii_hexdigit()));

    let with_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = fixture
        .post(
            &with_session,
            &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        )
        .await;
    assert_eq!(initialized.status, 202);
    assert_eq!(initialized.body, "");

    let list = fixture
        .post(
            &with_session,
            &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
        )
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(
        list.json()["result"]["tools"][0]["name"],
        "test_simple_text"
    );

    let without = fixture
        .post(
            &[("MCP-Protocol-Version", "2025-11-25")],
            &json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list" }),
        )
        .await;
    assert_eq!(without.status, 400);

    let deleted = fixture.request("DELETE", &with_session, "").await;
    assert_eq!(deleted.status, 200);
    let after = fixture
        .post(
            &with_session,
            &json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/list" }),
        )
        .await;
    assert_eq!(after.status, 404);
    assert_eq!(after.json()["id"], 4);
    fixture.stop().await;
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let fixture = HttpFixture::start().await;
    let body = initialize().to_string();
    let evil_host = fixture
        .request(
            "POST",
            &[
                ("Host", "evil.example.com"),
                ("Content-Type", "application/json"),
            ],
            &body,
        )
        .await;
    assert_eq!(evil_host.status, 403);
    let evil_origin = fixture
        .request(
            "POST",
            &[
                ("Origin", "http://evil.example.com"),
                ("Content-Type", "application/json"),
            ],
            &body,
        )
        .await;
    assert_eq!(evil_origin.status, 403);
    assert_eq!(evil_origin.json()["error"]["code"], -32007);
    let local = format!("http://localhost:{}", fixture.port);
    let fine = fixture
        .request(
            "POST",
            &[
                ("Origin", local.as_str()),
                ("Content-Type", "application/json"),
            ],
            &body,
        )
        .await;
    assert_eq!(fine.status, 200);
    fixture.stop().await;
}

#[tokio::test]
async fn modern_requests_are_admitted_by_their_headers() {
    let fixture = HttpFixture::start().await;
    let list = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": { "_meta": modern_meta(json!({})) } });
    let ok = fixture
        .post(
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/list"),
            ],
            &list,
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["result"]["resultType"], "complete");

    let no_method = fixture
        .post(&[("MCP-Protocol-Version", "2026-07-28")], &list)
        .await;
    assert_eq!(no_method.status, 400);
    assert_eq!(no_method.json()["error"]["code"], -32020);
    assert_eq!(no_method.json()["id"], 7);

    let wrong_version = fixture
        .post(
            &[
                ("MCP-Protocol-Version", "2025-11-25-x"),
                ("Mcp-Method", "tools/list"),
            ],
            &list,
        )
        .await;
    assert_eq!(wrong_version.status, 400);
    assert_eq!(wrong_version.json()["error"]["code"], -32020);

    let unknown = json!({ "jsonrpc": "2.0", "id": 8, "method": "unknown/method", "params": { "_meta": modern_meta(json!({})) } });
    let not_found = fixture
        .post(
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "unknown/method"),
            ],
            &unknown,
        )
        .await;
    assert_eq!(not_found.status, 404);
    assert_eq!(not_found.json()["error"]["code"], -32601);

    let get = fixture
        .request("GET", &[("Accept", "text/event-stream")], "")
        .await;
    assert_eq!(get.status, 405);
    fixture.stop().await;
}

#[tokio::test]
async fn modern_progress_travels_as_sse_before_the_result() {
    let fixture = HttpFixture::start().await;
    let mut meta = modern_meta(json!({}));
    meta["progressToken"] = json!("p");
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "test_tool_with_progress", "arguments": {}, "_meta": meta },
    });
    let reply = fixture
        .post(
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "test_tool_with_progress"),
            ],
            &call,
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events: Vec<Value> = reply
        .sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.len(), 4);
    let progress: Vec<&Value> = events[..3]
        .iter()
        .map(|e| &e["params"]["progress"])
        .collect();
    assert_eq!(progress, [&json!(0), &json!(50), &json!(100)]);
    assert_eq!(events[3]["id"], 1);
    assert_eq!(events[3]["result"]["resultType"], "complete");
    fixture.stop().await;
}

#[tokio::test]
async fn a_closed_stream_is_resumed_with_last_event_id() {
    let fixture = HttpFixture::start().await;
    let init = fixture.post(&[], &initialize()).await;
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let call = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": { "name": "test_reconnection" } });
    let first = fixture.post(&headers, &call).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-type"), Some("text/event-stream"));
    assert_eq!(first.body, "id: 1-0\nretry: 1000\ndata:\n\n");

    let resumed = fixture
        .request(
            "GET",
            &[
                ("Mcp-Session-Id", session.as_str()),
                ("Last-Event-ID", "1-0"),
                ("Accept", "text/event-stream"),
            ],
            "",
        )
        .await;
    assert_eq!(resumed.status, 200);
    let data = resumed.sse_data();
    assert_eq!(data.len(), 1);
    assert_eq!(
        serde_json::from_str::<Value>(&data[0]).unwrap(),
        json!({
            "jsonrpc": "2.0", "id": 5,
            "result": { "content": [{ "type": "text", "text": "Reconnection test completed: the result arrived after the stream was closed" }] },
        })
    );
    assert!(resumed.body.starts_with("id: 1-2\n"));
    fixture.stop().await;
}
