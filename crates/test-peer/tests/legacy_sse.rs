//! The legacy HTTP+SSE transport (`sse` mode): the endpoint event, 202 for every POST, replies
//! and server->client requests on the stream, and session lifetime tied to the stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned_peer;

use serde_json::json;
use spawned_peer::HttpPeer;
use spawned_peer::raw_http::{self, event_json, send};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"0"}}}"#;

/// Opens the stream and returns it with the POST path from the endpoint event.
async fn connect(address: &str) -> (raw_http::Stream, String) {
    let mut stream = raw_http::open(
        address,
        "GET",
        "/sse",
        &[("Accept", "text/event-stream")],
        b"",
    )
    .await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    let endpoint = stream.next_event().await.unwrap();
    let text = String::from_utf8(endpoint).unwrap();
    let path = text
        .strip_prefix("event: endpoint\ndata: ")
        .unwrap_or_else(|| panic!("{text:?}"))
        .to_owned();
    let session = path.strip_prefix("/message?sessionId=").unwrap();
    assert_eq!(session.len(), 32);
    (stream, path)
}

async fn post(address: &str, path: &str, body: &str) -> raw_http::Reply {
    send(
        address,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .await
}

#[tokio::test]
async fn posts_are_accepted_and_replies_arrive_on_the_stream() {
    let peer = HttpPeer::spawn("sse", &[]).await;
    let (mut stream, path) = connect(&peer.address).await;
    let accepted = post(&peer.address, &path, INITIALIZE).await;
    assert_eq!(accepted.status, 202);
    assert_eq!(accepted.text(), "Accepted");
    let event = stream.next_event().await.unwrap();
    assert!(event.starts_with(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"));
    assert_eq!(
        event_json(&event)["result"]["protocolVersion"],
        "2024-11-05"
    );

    post(
        &peer.address,
        &path,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    post(
        &peer.address,
        &path,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{}}}"#,
    )
    .await;
    let request = event_json(&stream.next_event().await.unwrap());
    assert_eq!(request["method"], "elicitation/create");
    let answered = post(
        &peer.address,
        &path,
        &json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"action": "accept", "content": {"answer": "sse"}}})
        .to_string(),
    )
    .await;
    assert_eq!(answered.status, 202);
    let result = event_json(&stream.next_event().await.unwrap());
    assert_eq!(result["id"], 2);
    assert_eq!(
        result["result"]["content"][0]["text"],
        r#"{"answer":"sse"}"#
    );
}

#[tokio::test]
async fn sse_mode_is_legacy_only() {
    let peer = HttpPeer::spawn("sse", &[]).await;
    let (mut stream, path) = connect(&peer.address).await;
    post(
        &peer.address,
        &path,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": spawned_peer::modern_meta(json!({}))}})
        .to_string(),
    )
    .await;
    assert_eq!(
        event_json(&stream.next_event().await.unwrap())["error"]["code"],
        -32601
    );
}

#[tokio::test]
async fn unknown_or_missing_sessions_are_refused_and_closing_the_stream_ends_the_session() {
    let peer = HttpPeer::spawn("sse", &[]).await;
    let missing = post(&peer.address, "/message", INITIALIZE).await;
    assert_eq!(missing.status, 400);
    let unknown = post(&peer.address, "/message?sessionId=nope", INITIALIZE).await;
    assert_eq!(unknown.status, 404);

    let (stream, path) = connect(&peer.address).await;
    drop(stream);
    // The session goes when the peer drops the stream's body, which happens once it notices
    // the closed socket (at the latest when a reply is written to it); the POSTs provoke that.
    spawned_peer::guarded("the session to end with its stream", async {
        while post(&peer.address, &path, INITIALIZE).await.status != 404 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn http_faults_apply_to_the_sse_endpoints_too() {
    let peer = HttpPeer::spawn("sse", &["--behaviour", "http-500"]).await;
    let reply = send(
        &peer.address,
        "GET",
        "/sse",
        &[("Accept", "text/event-stream")],
        b"",
    )
    .await;
    assert_eq!(reply.status, 500);
}
