//! The HTTP misbehaviours (and the message-level ones as they look over HTTP), checked against
//! the statuses, headers and SSE events the README promises.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned_peer;

use spawned_peer::raw_http::{self, POST_JSON, event_data, event_json, send};
use spawned_peer::{HttpPeer, guarded};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
const BOTH: &str = "application/json, text/event-stream";
const MIB: usize = 1024 * 1024;

async fn initialize(address: &str) -> String {
    let reply = send(address, "POST", "/mcp", &POST_JSON, INITIALIZE.as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.header("mcp-session-id").unwrap().to_owned()
}

async fn post(address: &str, session: &str, body: &str) -> raw_http::Reply {
    send(
        address,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", BOTH),
            ("Mcp-Session-Id", session),
        ],
        body.as_bytes(),
    )
    .await
}

const CALL_ECHO: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}"#;

#[tokio::test]
async fn giant_sse_event_answers_a_call_with_one_twenty_mib_event() {
    let peer = HttpPeer::spawn("http", &["--behaviour", "giant-sse-event"]).await;
    let session = initialize(&peer.address).await;
    let reply = post(&peer.address, &session, CALL_ECHO).await;
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(events.len(), 2, "priming event, then the giant one");
    let data = event_data(&events[1]);
    assert!(data.len() > 20 * MIB);
    let response: serde_json::Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(
        response["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .len(),
        20 * MIB
    );
}

#[tokio::test]
async fn http_status_faults_answer_every_request_from_the_counted_one_on() {
    for (behaviour, status) in [("http-500", 500), ("http-404", 404), ("http-405", 405)] {
        let peer = HttpPeer::spawn("http", &["--behaviour", behaviour]).await;
        let reply = send(
            &peer.address,
            "POST",
            "/mcp",
            &POST_JSON,
            INITIALIZE.as_bytes(),
        )
        .await;
        assert_eq!(reply.status, status, "{behaviour}");
        assert_eq!(
            reply.text(),
            format!("manifold-test-peer behaviour {behaviour}: this request fails on purpose\n")
        );
        if status == 405 {
            assert_eq!(reply.header("allow"), Some("GET"));
        }
        let get = send(
            &peer.address,
            "GET",
            "/mcp",
            &[("Accept", "text/event-stream")],
            b"",
        )
        .await;
        assert_eq!(get.status, status, "{behaviour} GET");
    }
    let later = HttpPeer::spawn("http", &["--behaviour", "http-500", "--count", "2"]).await;
    let session = initialize(&later.address).await;
    let second = post(
        &later.address,
        &session,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    )
    .await;
    assert_eq!(second.status, 500);
}

#[tokio::test]
async fn redirect_other_host_sends_a_307_to_127_0_0_2() {
    let peer = HttpPeer::spawn("http", &["--behaviour", "redirect-other-host"]).await;
    let port = peer.address.rsplit(':').next().unwrap();
    let reply = send(
        &peer.address,
        "POST",
        "/mcp?x=1",
        &POST_JSON,
        INITIALIZE.as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 307);
    assert_eq!(
        reply.header("location"),
        Some(format!("http://127.0.0.2:{port}/mcp?x=1").as_str())
    );
}

#[tokio::test]
async fn session_expiry_answers_404_once_count_requests_used_the_session() {
    let peer = HttpPeer::spawn("http", &["--behaviour", "session-expiry", "--count", "2"]).await;
    let session = initialize(&peer.address).await;
    for id in [2, 3] {
        let ok = post(
            &peer.address,
            &session,
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        )
        .await;
        assert_eq!(ok.status, 200, "request {id}");
    }
    let expired = post(
        &peer.address,
        &session,
        r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
    )
    .await;
    assert_eq!(expired.status, 404);
    assert_eq!(expired.json()["error"]["code"], -32001);
    let still = post(
        &peer.address,
        &session,
        r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
    )
    .await;
    assert_eq!(still.status, 404, "the session is gone for good");
    let fresh = initialize(&peer.address).await;
    assert_ne!(fresh, session);
}

#[tokio::test]
async fn sse_comments_precede_every_event() {
    let peer = HttpPeer::spawn("http", &["--behaviour", "sse-comments", "--sse-replies"]).await;
    let session = initialize(&peer.address).await;
    let reply = post(
        &peer.address,
        &session,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    )
    .await;
    assert_eq!(
        reply.text(),
        ": keep-alive\n\nid: 2-0\nretry: 1000\ndata: \n\n: keep-alive\n\nevent: message\nid: 2-1\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"
    );
}

#[tokio::test]
async fn multi_message_behaviours_switch_http_replies_to_sse() {
    let peer = HttpPeer::spawn(
        "http",
        &["--behaviour", "notification-flood", "--count", "3"],
    )
    .await;
    let reply = send(
        &peer.address,
        "POST",
        "/mcp",
        &POST_JSON,
        INITIALIZE.as_bytes(),
    )
    .await;
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let events = reply.events();
    assert_eq!(events.len(), 5);
    assert_eq!(event_json(&events[3])["params"]["data"], "flood 3 of 3");
    assert_eq!(event_json(&events[4])["id"], 1);

    let peer = HttpPeer::spawn("http", &["--behaviour", "unknown-id"]).await;
    let session = initialize(&peer.address).await;
    let reply = post(&peer.address, &session, CALL_ECHO).await;
    let events = reply.events();
    assert_eq!(event_json(&events[1])["id"], 424242424);
    assert_eq!(event_json(&events[2])["id"], 2);
}

#[tokio::test]
async fn exit_mid_call_over_http_drops_the_connection_and_exits_one() {
    let mut peer = HttpPeer::spawn("http", &["--behaviour", "exit-mid-call"]).await;
    let session = initialize(&peer.address).await;
    let address = peer.address.clone();
    let call = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAccept: {BOTH}\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{CALL_ECHO}",
            CALL_ECHO.len()
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        let mut rest = Vec::new();
        let _ = socket.read_to_end(&mut rest).await;
        rest
    });
    let status = guarded("the peer to exit", peer.child.wait())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(call.await.unwrap().is_empty(), "no HTTP response at all");
}

/// Sends one raw POST and returns every byte the server sends back before closing.
async fn raw_post(address: String, body: &'static str) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAccept: {BOTH}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut rest = Vec::new();
    let _ = socket.read_to_end(&mut rest).await;
    rest
}

#[tokio::test]
async fn never_answer_holds_the_post_until_the_server_dies() {
    let mut peer = HttpPeer::spawn("http", &["--behaviour", "never-answer"]).await;
    let pending = tokio::spawn(raw_post(peer.address.clone(), INITIALIZE));
    // Give the request time to arrive; whatever the peer would say, it would say by then.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    peer.child.kill().await.unwrap();
    let received = guarded("the pending POST", pending).await.unwrap();
    assert!(
        received.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&received)
    );
}
