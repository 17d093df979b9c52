//! Streamable HTTP in both eras against manifold-test-peer: what the server sees (headers,
//! sessions, cancellations) and what the caller gets when the server misbehaves on purpose.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_peer;

use std::sync::Arc;

use http_peer::{
    Answering, Peer, call, echo, seen_headers, slow_call_under_way, slow_with_progress, text_of,
};
use manifold_upstream::{ClientIdentity, ConnectOptions, HttpTransportChoice, UpstreamError};
use manifold_wire::{Era, Kind, Revision};
use serde_json::Value;

#[tokio::test]
async fn a_modern_request_carries_the_metadata_headers_and_mirrored_arguments() {
    let peer = Peer::start("http", &["--era", "both"]).await;
    let (conn, info) = peer.connect("/mcp", HttpTransportChoice::Auto).await;
    assert_eq!(info.era, Era::Modern);
    assert_eq!(info.revision, Revision::V2026_07_28);
    let rejected = conn.learn_tool_headers(&[
        r#"{"name":"seen_headers","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"note":{"type":"string"}}}}"#,
        r#"{"name":"broken","inputSchema":{"type":"object","properties":{"f":{"type":"number","x-mcp-header":"F"}}}}"#,
    ]);
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].name, "broken");
    let headers = seen_headers(&conn, r#"{"region":"Zürich","note":"not mirrored"}"#).await;
    assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
    assert_eq!(headers["mcp-method"], "tools/call");
    assert_eq!(headers["mcp-name"], "seen_headers");
    assert_eq!(headers["mcp-param-region"], "=?base64?WsO8cmljaA==?=");
    assert_eq!(headers["accept"], "application/json, text/event-stream");
    assert_eq!(headers["content-type"], "application/json");
    assert!(!headers.contains_key("mcp-session-id"));
    assert!(!headers.contains_key("mcp-param-note"));
    conn.close().await;
}

#[tokio::test]
async fn a_legacy_request_carries_the_session_and_the_negotiated_revision() {
    let peer = Peer::start("http", &["--era", "legacy"]).await;
    let (conn, info) = peer.connect("/mcp", HttpTransportChoice::Auto).await;
    assert_eq!(info.era, Era::Legacy);
    assert_eq!(info.revision, Revision::V2025_11_25);
    let headers = seen_headers(&conn, "{}").await;
    let session = headers["mcp-session-id"].as_str().unwrap();
    assert_eq!(session.len(), 32);
    assert_eq!(headers["mcp-protocol-version"], "2025-11-25");
    assert!(!headers.contains_key("mcp-method"));
    assert_eq!(echo(&conn, "hi").await.unwrap(), "hi");
    conn.close().await;
}

#[tokio::test]
async fn closing_a_legacy_connection_deletes_its_session() {
    let peer = Peer::start("http", &["--era", "legacy"]).await;
    let (conn, _) = peer.open_streamable().await;
    let headers = seen_headers(&conn, "{}").await;
    let session = headers["mcp-session-id"].as_str().unwrap().to_owned();
    conn.close().await;
    let probe = reqwest::Client::new()
        .get(peer.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(probe.status().as_u16(), 404);
}

#[tokio::test]
async fn progress_arrives_on_legacy_sse_replies_that_open_with_priming_events() {
    let peer = Peer::start("http", &["--era", "legacy", "--sse-replies"]).await;
    let (conn, _) = peer.open_streamable().await;
    let (tokens, text) = slow_with_progress(&conn).await;
    assert_eq!(tokens, vec!["\"mine\""; 3]);
    assert_eq!(text, "slow done after 3 steps");
    conn.close().await;
}

#[tokio::test]
async fn progress_arrives_on_a_modern_per_request_stream() {
    let peer = Peer::start("http", &["--era", "modern", "--sse-replies"]).await;
    let (conn, info) = peer.open_streamable().await;
    assert_eq!(info.era, Era::Modern);
    let (tokens, text) = slow_with_progress(&conn).await;
    assert_eq!(tokens, vec!["\"mine\""; 3]);
    assert_eq!(text, "slow done after 3 steps");
}

#[tokio::test]
async fn a_broken_legacy_reply_stream_is_resumed_with_last_event_id() {
    let peer = Peer::start(
        "http",
        &[
            "--era",
            "legacy",
            "--sse-replies",
            "--behaviour",
            "close-sse-after-priming",
        ],
    )
    .await;
    let (conn, info) = peer.open_streamable().await;
    assert_eq!(info.era, Era::Legacy);
    assert_eq!(echo(&conn, "resumed").await.unwrap(), "resumed");
    conn.close().await;
}

#[tokio::test]
async fn cancelling_a_modern_call_closes_its_stream_and_the_server_stops() {
    let mut peer = Peer::start("http", &["--era", "modern", "--sse-replies"]).await;
    let (conn, _) = peer.open_streamable().await;
    // The first progress proves the tool is running before it is cancelled.
    let running = slow_call_under_way(&conn).await;
    let error = running.cancel("the test changed its mind");
    assert_eq!(
        error,
        UpstreamError::Cancelled {
            server: "peer".to_owned(),
            method: "tools/call".to_owned(),
            reason: "the test changed its mind".to_owned(),
        }
    );
    let line = peer.stderr_line("manifold-test-peer: slow cancelled").await;
    assert!(line.ends_with("of 600"), "{line}");
    assert_eq!(conn.in_flight(), 0);
}

#[tokio::test]
async fn cancelling_a_legacy_call_tells_the_server() {
    let mut peer = Peer::start("http", &["--era", "legacy", "--sse-replies"]).await;
    let (conn, _) = peer.open_streamable().await;
    let running = slow_call_under_way(&conn).await;
    let _ = running.cancel("no longer needed");
    let line = peer.stderr_line("manifold-test-peer: slow cancelled").await;
    assert!(line.ends_with("of 600"), "{line}");
    conn.close().await;
}

async fn elicitation_round_trip(reply_flag: &str) {
    let peer = Peer::start("http", &["--era", "legacy", reply_flag]).await;
    let handler = Arc::new(Answering::default());
    let mut options = ConnectOptions::new("peer");
    options.client = ClientIdentity {
        capabilities: r#"{"elicitation":{}}"#.to_owned(),
        ..ClientIdentity::default()
    };
    options.handler = handler.clone();
    let (conn, _) = peer
        .open("/mcp", HttpTransportChoice::StreamableHttp, &options)
        .await;
    let reply = call(
        &conn,
        "tools/call",
        r#"{"name":"ask","arguments":{"question":"Favourite colour?"}}"#,
    )
    .await
    .unwrap();
    assert_eq!(text_of(&reply), r#"{"answer":"blue"}"#);
    let asked = handler.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, "elicitation/create");
    let params: Value = serde_json::from_str(asked[0].1.as_deref().unwrap()).unwrap();
    assert_eq!(params["message"], "Favourite colour?");
    conn.close().await;
}

#[tokio::test]
async fn elicitation_on_the_reply_stream_is_answered_by_the_handler() {
    elicitation_round_trip("--sse-replies").await;
}

#[tokio::test]
async fn elicitation_on_the_get_stream_is_answered_by_the_handler() {
    // With JSON replies the peer sends its own requests on the GET stream.
    elicitation_round_trip("--json-replies").await;
}

#[tokio::test]
async fn an_expired_session_is_renewed_without_the_caller_noticing() {
    let peer = Peer::start(
        "http",
        &[
            "--era",
            "legacy",
            "--behaviour",
            "session-expiry",
            "--count",
            "3",
        ],
    )
    .await;
    let (conn, _) = peer.open_streamable().await;
    let first = seen_headers(&conn, "{}").await["mcp-session-id"].clone();
    for n in 0..4 {
        let message = format!("call {n}");
        assert_eq!(echo(&conn, &message).await.unwrap(), message);
    }
    let last = seen_headers(&conn, "{}").await["mcp-session-id"].clone();
    assert_ne!(first, last);
    conn.close().await;
}

#[tokio::test]
async fn http_500_settles_the_call_with_the_server_and_status() {
    // Request 1 is server/discover; from request 2 on, every request fails.
    let peer = Peer::start(
        "http",
        &["--era", "modern", "--behaviour", "http-500", "--count", "2"],
    )
    .await;
    let (conn, _) = peer.open_streamable().await;
    let error = echo(&conn, "x").await.unwrap_err();
    assert_eq!(
        error,
        UpstreamError::Http {
            server: "peer".to_owned(),
            method: "tools/call".to_owned(),
            status: 500,
            body: "manifold-test-peer behaviour http-500: this request fails on purpose".to_owned(),
        }
    );
    assert_eq!(
        error.to_string(),
        "server \"peer\" answered HTTP 500 to tools/call: manifold-test-peer behaviour http-500: this request fails on purpose"
    );
}

#[tokio::test]
async fn a_giant_sse_event_fails_the_call_clearly() {
    let peer = Peer::start("http", &["--behaviour", "giant-sse-event", "--sse-replies"]).await;
    let (conn, _) = peer.connect("/mcp", HttpTransportChoice::Auto).await;
    let error = echo(&conn, "x").await.unwrap_err();
    assert_eq!(
        error,
        UpstreamError::Protocol {
            server: "peer".to_owned(),
            detail: "an event of its reply stream to tools/call is larger than 16777216 bytes; the request was abandoned".to_owned(),
        }
    );
    // The connection stays usable.
    let echoed = call(&conn, "tools/list", "{}").await.unwrap();
    assert_eq!(echoed.kind(), Kind::Result);
}
