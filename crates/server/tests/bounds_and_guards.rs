//! Why: pins the Origin/Host guard and every bound of the HTTP server (body size, live
//! sessions, streams per session, the resumption buffer), each hit for real.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use std::time::Duration;

use live_server::*;
use manifold_server::limits;

#[tokio::test]
async fn a_foreign_origin_is_403_on_every_endpoint_and_loopback_or_no_origin_pass() {
    let live = start().await;
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let r = live
        .post(&init_body("2025-11-25", "{}"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let body = json_of(r).await;
    assert_eq!(body["error"]["code"], -32007);
    assert!(body["id"].is_null());
    let sse = live
        .get("/sse")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 403);
    let ok = live
        .post(&init_body("2025-11-25", "{}"))
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let sid = live.initialize("{}").await;
    let r = live
        .session_post(&sid, ping)
        .header("origin", "null")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    live.stop().await;
}

#[tokio::test]
async fn a_foreign_host_is_403_and_loopback_names_or_the_listen_address_pass() {
    let live = start().await;
    let port = live.server.local_addr().port();
    let init = init_body("2025-11-25", "{}");
    let r = live
        .post(&init)
        .header("host", format!("rebound.evil.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(json_of(r).await["error"]["code"], -32007);
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "localhost".to_owned(),
    ] {
        assert_eq!(status_of_initialize_for(&live, &host).await, 200, "{host}");
    }
    live.stop().await;
}

/// The HTTP status an `initialize` POST gets when its `Host` header is `host`.
async fn status_of_initialize_for(live: &Live, host: &str) -> u16 {
    live.post(&init_body("2025-11-25", "{}"))
        .header("host", host)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn listed_hosts_are_all_that_pass_not_even_the_listen_address() {
    let only = manifold_server::HostAllowlist::only(vec![
        manifold_server::HostPattern::parse("mcp.example.com").unwrap(),
    ]);
    let live = serve(gateway(vec![]).await, |s| s.allowed_hosts = only).await;
    let port = live.server.local_addr().port();
    for (host, status) in [
        ("mcp.example.com".to_owned(), 200),
        (format!("127.0.0.1:{port}"), 403),
        (format!("localhost:{port}"), 403),
    ] {
        assert_eq!(
            status_of_initialize_for(&live, &host).await,
            status,
            "{host}"
        );
    }
    live.stop().await;
}

#[tokio::test]
async fn a_body_past_the_limit_is_413() {
    assert_eq!(limits::MAX_BODY_BYTES, 16 * 1024 * 1024);
    let live = start().await;
    let padding = "x".repeat(limits::MAX_BODY_BYTES);
    let big =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{padding}"}}}}"#);
    let r = live.post(&big).send().await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(json_of(r).await["error"]["code"], -32005);
    live.stop().await;
    // A smaller configured bound applies too, to the HTTP+SSE message endpoint as well.
    let live = serve(gateway(vec![]).await, |s| s.limits.max_body_bytes = 100).await;
    let r = live
        .post(&init_body(
            "2025-11-25",
            &format!(r#"{{"x":"{}"}}"#, "y".repeat(100)),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    live.stop().await;
}

#[tokio::test]
async fn past_the_session_bound_idle_sessions_make_room_and_busy_ones_refuse_with_503() {
    assert_eq!(limits::MAX_SESSIONS, 1024);
    let live = serve(gateway(vec![peer_def("SERVER", &[])]).await, |s| {
        s.limits.max_sessions = 2
    })
    .await;
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let first = live.initialize("{}").await;
    let second = live.initialize("{}").await;
    let third = live.initialize("{}").await; // evicts an idle one
    // An evicted session is not ended: its sealed id brings it back (evicting another idle one).
    for sid in [&first, &second, &third] {
        let r = live.session_send(sid, ping).await;
        assert_eq!(r.status(), 200);
    }
    // Two sessions holding streams open cannot be evicted: a third is refused.
    let mut held = Vec::new();
    for sid in [&first, &second] {
        let r = live
            .http
            .get(&live.url)
            .header("mcp-session-id", sid.as_str())
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let mut events = Events::of(r);
        let _ = events.next().await.unwrap();
        held.push(events);
    }
    let r = live
        .post(&init_body("2025-11-25", "{}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(json_of(r).await["error"]["code"], -32006);
    drop(held);
    live.stop().await;
}

#[tokio::test]
async fn past_the_stream_bound_a_session_gets_429() {
    assert_eq!(limits::MAX_STREAMS_PER_SESSION, 16);
    let live = serve(gateway(vec![peer_def("SERVER", &[])]).await, |s| {
        s.limits.max_streams_per_session = 1
    })
    .await;
    let sid = live.initialize("{}").await;
    let get = || {
        live.http
            .get(&live.url)
            .header("mcp-session-id", sid.as_str())
            .header("accept", "text/event-stream")
            .send()
    };
    let r = get().await.unwrap();
    let mut open = Events::of(r);
    let _ = open.next().await.unwrap();
    let r = get().await.unwrap();
    assert_eq!(r.status(), 429);
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"SERVER__slow","arguments":{"seconds":0.1,"steps":1},"_meta":{"progressToken":1}}}"#).await;
    assert_eq!(r.status(), 429);
    // JSON replies need no stream and still work.
    let r = live
        .session_send(&sid, r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .await;
    assert_eq!(r.status(), 200);
    live.stop().await;
}

#[tokio::test]
async fn the_resumption_buffer_keeps_only_its_newest_events() {
    assert_eq!(limits::RESUME_BUFFER_EVENTS, 1000);
    assert_eq!(limits::RESUME_BUFFER_BYTES, 1024 * 1024);
    let live = serve(gateway(vec![peer_def("SERVER", &[])]).await, |s| {
        s.limits.resume_buffer_events = 2;
        s.limits.keepalive_interval = Duration::from_millis(50);
    })
    .await;
    let sid = live.initialize("{}").await;
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"SERVER__slow","arguments":{"seconds":0.3,"steps":3},"_meta":{"progressToken":1}}}"#).await;
    let mut events = Events::of(r);
    let priming = events.next().await.unwrap().id.unwrap();
    drop(events);
    let prefix = priming.strip_suffix(".0").unwrap().to_owned();
    let resume = |from: String| {
        live.http
            .get(&live.url)
            .header("mcp-session-id", sid.as_str())
            .header("accept", "text/event-stream")
            .header("last-event-id", from)
            .send()
    };
    // Wait until the call has finished (4 events: 3 progress + the answer), keeping only 2.
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let r = resume(format!("{prefix}.3")).await.unwrap();
        if r.status() == 200 {
            let mut e = Events::of(r);
            let (_, last) = e.next_message().await.unwrap();
            if last.get("result").is_some() {
                break;
            }
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = resume(format!("{prefix}.0")).await.unwrap();
    assert_eq!(
        r.status(),
        400,
        "events 1 and 2 were dropped from the buffer"
    );
    live.stop().await;
}

#[tokio::test]
async fn listen_streams_and_http_sse_sessions_past_their_bounds_get_503() {
    assert_eq!(limits::MAX_LISTEN_STREAMS, 1024);
    assert_eq!(limits::MAX_SSE_SESSIONS, 256);
    let live = serve(gateway(vec![]).await, |s| {
        s.limits.max_listen_streams = 1;
        s.limits.max_sse_sessions = 1;
    })
    .await;
    let listen = |id: i64| {
        live.post(&modern_body(
            id,
            "subscriptions/listen",
            r#""notifications":{"toolsListChanged":true}"#,
        ))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .send()
    };
    let first = listen(1).await.unwrap();
    assert_eq!(first.status(), 200);
    let mut first = Events::of(first);
    let _ack = first.next_message().await.unwrap();
    let second = listen(2).await.unwrap();
    assert_eq!(second.status(), 503);
    assert_eq!(json_of(second).await["error"]["code"], -32006);
    let sse = || live.get("/sse").send();
    let open = sse().await.unwrap();
    assert_eq!(open.status(), 200);
    let mut open = Events::of(open);
    let _endpoint = open.next().await.unwrap();
    assert_eq!(sse().await.unwrap().status(), 503);
    // Closing a listen stream frees its slot.
    drop(first);
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while listen(3).await.unwrap().status() != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the closed listen stream kept its slot"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    live.stop().await;
}

/// A POST to a JSON-RPC endpoint with the given `Content-Type` (none when `None`).
async fn post_typed(
    live: &Live,
    path: &str,
    content_type: Option<&str>,
    body: &str,
) -> reqwest::Response {
    let mut r = live
        .http
        .post(format!("{}{path}", live.base))
        .header("accept", "application/json, text/event-stream");
    if let Some(ct) = content_type {
        r = r.header("content-type", ct);
    }
    r.body(body.to_owned()).send().await.unwrap()
}

#[tokio::test]
async fn a_post_that_is_not_json_is_415_on_every_json_rpc_endpoint_and_says_what_to_send() {
    let live = start().await;
    let init = init_body("2025-11-25", "{}");
    let refused = [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ];
    for path in ["/mcp", "/message?sessionId=0000"] {
        for ct in refused {
            let r = post_typed(&live, path, ct, &init).await;
            assert_eq!(r.status(), 415, "{path} with {ct:?}");
            let body = json_of(r).await;
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("Content-Type: application/json"),
                "{message}"
            );
            match ct {
                Some(ct) => assert!(message.contains(ct), "{message}"),
                None => assert!(message.contains("no Content-Type"), "{message}"),
            }
            assert!(body["id"].is_null());
        }
    }
    for ct in ["application/json;charset=utf-8", "Application/JSON"] {
        let r = post_typed(&live, "/mcp", Some(ct), &init).await;
        assert_eq!(r.status(), 200, "{ct}");
    }
    let metrics = live
        .get("/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("reason=\"unsupported_media_type\""),
        "{metrics}"
    );
    live.stop().await;
}
