//! The well-behaved peer over Streamable HTTP: legacy sessions (JSON and SSE replies, the GET
//! stream, resumption, DELETE) and the modern stateless era (header checks, per-request SSE,
//! cancellation by closing the stream), checked on the raw HTTP bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned_peer;

use serde_json::{Value, json};
use spawned_peer::raw_http::{self, POST_JSON, event_id, event_json, send};
use spawned_peer::{HttpPeer, MODERN, modern_meta};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"0"}}}"#;

/// Opens a legacy session and returns its id.
async fn legacy_session(address: &str) -> String {
    let reply = send(address, "POST", "/mcp", &POST_JSON, INITIALIZE.as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json()["result"]["protocolVersion"], "2025-11-25");
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    assert_eq!(session.len(), 32);
    let initialized = send(
        address,
        "POST",
        "/mcp",
        &with(
            &POST_JSON,
            &[
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
        ),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!(initialized.status, 202);
    assert!(initialized.body.is_empty());
    session
}

fn with<'a>(base: &[(&'a str, &'a str)], more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    base.iter().chain(more.iter()).copied().collect()
}

async fn session_post(address: &str, session: &str, accept: &str, body: &Value) -> raw_http::Reply {
    send(
        address,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", accept),
            ("Mcp-Session-Id", session),
        ],
        body.to_string().as_bytes(),
    )
    .await
}

const BOTH: &str = "application/json, text/event-stream";

#[tokio::test]
async fn legacy_session_lifecycle_json_replies_400_404_and_delete() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let address = &peer.address;
    let session = legacy_session(address).await;

    let list = session_post(
        address,
        &session,
        BOTH,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.header("content-type"), Some("application/json"));
    assert_eq!(list.json()["result"]["tools"][0]["name"], "echo");

    let no_session = send(
        address,
        "POST",
        "/mcp",
        &POST_JSON,
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(no_session.status, 400);
    assert_eq!(no_session.json()["error"]["code"], -32000);

    let unknown = session_post(
        address,
        "0123456789abcdef0123456789abcdef",
        BOTH,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
    )
    .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error"]["code"], -32001);

    let deleted = send(
        address,
        "DELETE",
        "/mcp",
        &[("Mcp-Session-Id", &session)],
        b"",
    )
    .await;
    assert_eq!(deleted.status, 200);
    let after = session_post(
        address,
        &session,
        BOTH,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    )
    .await;
    assert_eq!(after.status, 404);
}

#[tokio::test]
async fn legacy_sse_reply_opens_with_a_priming_event() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let address = &peer.address;
    let session = legacy_session(address).await;
    let reply = session_post(
        address,
        &session,
        "text/event-stream",
        &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.header("x-accel-buffering"), Some("no"));
    let events = reply.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0], b"id: 1-0\nretry: 1000\ndata: ");
    assert_eq!(
        events[1],
        b"event: message\nid: 1-1\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}"
    );
}

#[tokio::test]
async fn sse_replies_flag_streams_even_when_json_is_accepted() {
    let peer = HttpPeer::spawn("http", &["--sse-replies"]).await;
    let address = &peer.address;
    let reply = send(address, "POST", "/mcp", &POST_JSON, INITIALIZE.as_bytes()).await;
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert!(reply.header("mcp-session-id").is_some());
    let events = reply.events();
    assert_eq!(
        event_json(&events[1])["result"]["protocolVersion"],
        "2025-11-25"
    );
}

#[tokio::test]
async fn legacy_progress_and_elicitation_travel_on_the_post_stream() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let address = peer.address.clone();
    let session = legacy_session(&address).await;

    let slow = session_post(&address, &session, BOTH, &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.2, "steps": 2}, "_meta": {"progressToken": 7}}})).await;
    assert_eq!(
        slow.header("content-type"),
        Some("text/event-stream"),
        "auto mode streams progress"
    );
    let events = slow.events();
    assert_eq!(events.len(), 4);
    assert_eq!(event_json(&events[1])["params"]["progress"], 1);
    assert_eq!(event_json(&events[2])["params"]["progress"], 2);
    assert_eq!(
        event_json(&events[3])["result"]["content"][0]["text"],
        "slow done after 2 steps"
    );

    let mut ask = raw_http::open(
        &address,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", BOTH),
            ("Mcp-Session-Id", &session),
        ],
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask","arguments":{}}}"#,
    )
    .await;
    assert_eq!(
        ask.next_event().await.unwrap(),
        b"id: 2-0\nretry: 1000\ndata: "
    );
    let request = event_json(&ask.next_event().await.unwrap());
    assert_eq!(request["method"], "elicitation/create");
    let answered = session_post(
        &address,
        &session,
        BOTH,
        &json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"action": "accept", "content": {"answer": "yes"}}}),
    )
    .await;
    assert_eq!(answered.status, 202);
    let result = event_json(&ask.next_event().await.unwrap());
    assert_eq!(result["id"], 3);
    assert_eq!(
        result["result"]["content"][0]["text"],
        r#"{"answer":"yes"}"#
    );
    assert!(
        ask.next_event().await.is_none(),
        "the stream ends after the response"
    );
}

#[tokio::test]
async fn json_replies_send_server_requests_on_the_get_stream() {
    let peer = HttpPeer::spawn("http", &["--json-replies"]).await;
    let address = peer.address.clone();
    let session = legacy_session(&address).await;
    let mut get = raw_http::open(
        &address,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
        ],
        b"",
    )
    .await;
    assert_eq!(get.status, 200);
    assert_eq!(
        get.next_event().await.unwrap(),
        b"id: 0-0\nretry: 1000\ndata: "
    );
    let second = send(
        &address,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
        ],
        b"",
    )
    .await;
    assert_eq!(second.status, 409, "one GET stream per session");
    let json_only = send(
        &address,
        "GET",
        "/mcp",
        &[("Accept", "application/json"), ("Mcp-Session-Id", &session)],
        b"",
    )
    .await;
    assert_eq!(json_only.status, 406);
    let no_session = send(
        &address,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream")],
        b"",
    )
    .await;
    assert_eq!(no_session.status, 400);

    let call_address = address.clone();
    let call_session = session.clone();
    let call = tokio::spawn(async move {
        session_post(
            &call_address,
            &call_session,
            BOTH,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "ask", "arguments": {}}}),
        )
        .await
    });
    let request_event = get.next_event().await.unwrap();
    assert_eq!(event_id(&request_event).as_deref(), Some("0-1"));
    let request = event_json(&request_event);
    assert_eq!(request["method"], "elicitation/create");
    let answered = session_post(
        &address,
        &session,
        BOTH,
        &json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"action": "accept", "content": {"answer": "via GET"}}}),
    )
    .await;
    assert_eq!(answered.status, 202);
    let reply = call.await.unwrap();
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.json()["result"]["content"][0]["text"],
        r#"{"answer":"via GET"}"#
    );
}

#[tokio::test]
async fn last_event_id_resumes_a_stream_the_server_closed_after_priming() {
    let peer = HttpPeer::spawn("http", &["--behaviour", "close-sse-after-priming"]).await;
    let address = peer.address.clone();
    let session = legacy_session(&address).await;
    let cut = session_post(&address, &session, BOTH, &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.2, "steps": 2}, "_meta": {"progressToken": "r"}}})).await;
    assert_eq!(cut.events(), vec![b"id: 1-0\nretry: 1000\ndata: ".to_vec()]);

    let resumed = send(
        &address,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
            ("Last-Event-ID", "1-0"),
        ],
        b"",
    )
    .await;
    assert_eq!(resumed.status, 200);
    let events = resumed.events();
    assert_eq!(events[0], b"retry: 1000");
    let ids: Vec<String> = events[1..].iter().map(|e| event_id(e).unwrap()).collect();
    assert_eq!(ids, ["1-1", "1-2", "1-3"]);
    assert_eq!(
        event_json(&events[3])["result"]["content"][0]["text"],
        "slow done after 2 steps"
    );

    let again = send(
        &address,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
            ("Last-Event-ID", "1-2"),
        ],
        b"",
    )
    .await;
    let events = again.events();
    assert_eq!(events.len(), 2, "only what came after 1-2");
    assert_eq!(event_id(&events[1]).as_deref(), Some("1-3"));

    let bogus = send(
        &address,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
            ("Last-Event-ID", "9-9"),
        ],
        b"",
    )
    .await;
    assert_eq!(bogus.status, 400);
}

#[tokio::test]
async fn foreign_origin_is_forbidden() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let reply = send(
        &peer.address,
        "POST",
        "/mcp",
        &with(&POST_JSON, &[("Origin", "http://evil.example")]),
        INITIALIZE.as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 403);
    let local = send(
        &peer.address,
        "POST",
        "/mcp",
        &with(&POST_JSON, &[("Origin", "http://localhost:3000")]),
        INITIALIZE.as_bytes(),
    )
    .await;
    assert_eq!(local.status, 200);
}

/// A modern POST with correct mirrored headers.
async fn modern_post(
    address: &str,
    id: u64,
    method: &str,
    mut params: Value,
    extra: &[(&str, &str)],
) -> raw_http::Reply {
    params["_meta"] = modern_meta(json!({"elicitation": {}}));
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut headers = with(
        &POST_JSON,
        &[("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)],
    );
    if let Some(name) = &name {
        headers.push(("Mcp-Name", name));
    }
    headers.extend_from_slice(extra);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    send(
        address,
        "POST",
        "/mcp",
        &headers,
        body.to_string().as_bytes(),
    )
    .await
}

#[tokio::test]
async fn modern_requests_are_stateless_json_with_result_type() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let discover = modern_post(&peer.address, 1, "server/discover", json!({}), &[]).await;
    assert_eq!(discover.status, 200);
    assert!(
        discover.header("mcp-session-id").is_none(),
        "no sessions in the modern era"
    );
    assert_eq!(
        discover.json()["result"]["supportedVersions"],
        json!([MODERN])
    );
    let call = modern_post(
        &peer.address,
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "m"}}),
        &[],
    )
    .await;
    assert_eq!(call.header("content-type"), Some("application/json"));
    assert_eq!(call.json()["result"]["resultType"], "complete");
    assert_eq!(call.json()["result"]["content"][0]["text"], "m");
    let ask = modern_post(&peer.address, 3, "tools/call", json!({"name": "ask"}), &[]).await;
    assert_eq!(ask.json()["result"]["resultType"], "input_required");
}

#[tokio::test]
async fn modern_header_mismatches_are_400_with_32020() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let address = &peer.address;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "x"}, "_meta": modern_meta(json!({}))}})
    .to_string();
    let cases: [(&str, Vec<(&str, &str)>); 5] = [
        (
            "missing version header",
            vec![("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")],
        ),
        (
            "version mismatch",
            vec![
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "echo"),
            ],
        ),
        (
            "method mismatch",
            vec![
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/list"),
                ("Mcp-Name", "echo"),
            ],
        ),
        (
            "missing name",
            vec![
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
            ],
        ),
        (
            "name mismatch",
            vec![
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "add"),
            ],
        ),
    ];
    for (case, headers) in cases {
        let reply = send(
            address,
            "POST",
            "/mcp",
            &with(&POST_JSON, &headers),
            body.as_bytes(),
        )
        .await;
        assert_eq!(reply.status, 400, "{case}");
        assert_eq!(reply.json()["error"]["code"], -32020, "{case}");
        assert_eq!(reply.json()["id"], 1, "{case}");
    }
    // The base64 sentinel form of Mcp-Name is decoded before comparing ("echo").
    let encoded = send(
        address,
        "POST",
        "/mcp",
        &with(
            &POST_JSON,
            &[
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "=?base64?ZWNobw==?="),
            ],
        ),
        body.as_bytes(),
    )
    .await;
    assert_eq!(encoded.status, 200, "{}", encoded.text());
}

#[tokio::test]
async fn modern_validation_errors_carry_their_http_status() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let address = &peer.address;
    let no_meta = send(
        address,
        "POST",
        "/mcp",
        &with(
            &POST_JSON,
            &[
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/list"),
            ],
        ),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(no_meta.status, 400);
    assert_eq!(no_meta.json()["error"]["code"], -32602);

    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    let old = send(
        address,
        "POST",
        "/mcp",
        &with(
            &POST_JSON,
            &[
                ("MCP-Protocol-Version", "1900-01-01"),
                ("Mcp-Method", "tools/list"),
            ],
        ),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(old.status, 400);
    assert_eq!(old.json()["error"]["code"], -32022);
    assert_eq!(
        old.json()["error"]["data"],
        json!({"supported": [MODERN], "requested": "1900-01-01"})
    );

    let unknown = modern_post(address, 3, "no/such", json!({}), &[]).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error"]["code"], -32601);

    let ordinary = modern_post(address, 4, "tools/call", json!({"name": "fail"}), &[]).await;
    assert_eq!(ordinary.status, 200, "a tool error is a result");
}

#[tokio::test]
async fn modern_slow_streams_progress_without_event_ids() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let mut params = json!({"name": "slow", "arguments": {"seconds": 0.2, "steps": 2}});
    params["_meta"] = modern_meta(json!({}));
    params["_meta"]["progressToken"] = json!("mp");
    let reply = send(
        &peer.address,
        "POST",
        "/mcp",
        &with(
            &POST_JSON,
            &[
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "slow"),
            ],
        ),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(events.len(), 3, "no priming event in the modern era");
    for event in &events {
        assert!(
            event.starts_with(b"event: message\ndata: "),
            "{:?}",
            String::from_utf8_lossy(event)
        );
        assert!(event_id(event).is_none());
    }
    assert_eq!(event_json(&events[0])["params"]["progressToken"], "mp");
    assert_eq!(event_json(&events[2])["result"]["resultType"], "complete");
}

#[tokio::test]
async fn closing_a_modern_stream_cancels_the_request() {
    let mut peer = HttpPeer::spawn_with("http", &[], true).await;
    let mut params = json!({"name": "slow", "arguments": {"seconds": 20, "steps": 100}});
    params["_meta"] = modern_meta(json!({}));
    let stream = raw_http::open(
        &peer.address,
        "POST",
        "/mcp",
        &with(
            &POST_JSON,
            &[
                ("MCP-Protocol-Version", MODERN),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "slow"),
            ],
        ),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    drop(stream);
    let line = peer.read_stderr_line().await;
    assert!(
        line.starts_with("manifold-test-peer: slow cancelled before step "),
        "{line:?}"
    );
}

#[tokio::test]
async fn seen_headers_reports_the_request_headers() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let reply = modern_post(
        &peer.address,
        1,
        "tools/call",
        json!({"name": "seen_headers"}),
        &[("X-Test", "yes"), ("Mcp-Param-Region", "eu")],
    )
    .await;
    let headers = &reply.json()["result"]["structuredContent"]["headers"];
    assert_eq!(headers["x-test"], "yes");
    assert_eq!(headers["mcp-param-region"], "eu");
    assert_eq!(headers["mcp-method"], "tools/call");
    assert_eq!(headers["mcp-name"], "seen_headers");
}

#[tokio::test]
async fn modern_only_peer_refuses_get_delete_and_initialize() {
    let peer = HttpPeer::spawn("http", &["--era", "modern"]).await;
    let get = send(
        &peer.address,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream")],
        b"",
    )
    .await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    let delete = send(&peer.address, "DELETE", "/mcp", &[], b"").await;
    assert_eq!(delete.status, 405);
    let init = send(
        &peer.address,
        "POST",
        "/mcp",
        &POST_JSON,
        INITIALIZE.as_bytes(),
    )
    .await;
    assert_eq!(init.status, 400);
    assert_eq!(init.json()["error"]["code"], -32022);
}

#[tokio::test]
async fn legacy_only_peer_answers_a_modern_probe_with_a_non_modern_400() {
    let peer = HttpPeer::spawn("http", &["--era", "legacy"]).await;
    let probe = modern_post(&peer.address, 1, "server/discover", json!({}), &[]).await;
    assert_eq!(probe.status, 400);
    assert_eq!(
        probe.json()["error"]["code"],
        -32000,
        "not a modern error, so clients fall back"
    );
    legacy_session(&peer.address).await;
}

#[tokio::test]
async fn dual_era_peer_accepts_a_sessionless_notification() {
    let peer = HttpPeer::spawn("http", &[]).await;
    let reply = send(
        &peer.address,
        "POST",
        "/mcp",
        &with(&POST_JSON, &[("MCP-Protocol-Version", MODERN)]),
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
    )
    .await;
    assert_eq!(reply.status, 202);
}
