//! Why: pins every legacy-era (2025-03-26 .. 2025-11-25) Streamable HTTP rule of `/mcp` with raw
//! HTTP against a real gateway: sessions, headers, reply forms, resumption, cancellation and
//! server-to-client requests, each with its exact status, headers and body.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use std::time::Duration;

use live_server::*;
use serde_json::{Value, json};

#[tokio::test]
async fn initialize_mints_a_sealed_session_and_answers_json() {
    let live = start().await;
    let r = live
        .post(&init_body("2025-06-18", "{}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(content_type(&r), "application/json");
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(sid.starts_with("k1."), "{sid}");
    assert!(sid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let body = json_of(r).await;
    assert_eq!(body["id"], 1);
    assert_eq!(body["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(body["result"]["serverInfo"]["name"], "manifold");
    assert_eq!(body["result"]["capabilities"]["tools"]["listChanged"], true);
    live.stop().await;
}

#[tokio::test]
async fn an_unknown_revision_is_answered_with_the_latest_legacy_one() {
    let live = start().await;
    for (asked, answered) in [
        ("2099-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("2025-03-26", "2025-03-26"),
    ] {
        let body = json_of(live.post(&init_body(asked, "{}")).send().await.unwrap()).await;
        assert_eq!(body["result"]["protocolVersion"], answered, "asked {asked}");
    }
    live.stop().await;
}

#[tokio::test]
async fn a_client_that_only_accepts_sse_gets_a_primed_stream() {
    let live = start().await;
    let r = live
        .post_accepting("text/event-stream", &init_body("2025-11-25", "{}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("mcp-session-id"));
    assert_eq!(r.headers()["x-accel-buffering"], "no");
    let mut events = Events::of(r);
    let priming = events.next().await.unwrap();
    assert!(
        priming.id.as_deref().is_some_and(|id| id.ends_with(".0")),
        "{priming:?}"
    );
    assert_eq!(priming.data.as_deref(), Some(""));
    assert_eq!(priming.retry, Some(1000));
    let (id, msg) = events.next_message().await.unwrap();
    assert!(id.unwrap().ends_with(".1"));
    assert_eq!(msg["result"]["protocolVersion"], "2025-11-25");
    assert!(
        events.next().await.is_none(),
        "the stream ends after the answer"
    );
    live.stop().await;
}

#[tokio::test]
async fn notifications_and_responses_are_accepted_with_202_and_no_body() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    for body in [
        r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#,
        r#"{"jsonrpc":"2.0","id":"nobody-asked","result":{}}"#,
    ] {
        let r = live.session_send(&sid, body).await;
        assert_eq!(r.status(), 202, "{body}");
        assert!(r.bytes().await.unwrap().is_empty());
    }
    live.stop().await;
}

#[tokio::test]
async fn ping_answers_an_empty_object() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let r = live
        .session_send(&sid, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"jsonrpc":"2.0","id":2,"result":{}}"#
    );
    live.stop().await;
}

#[tokio::test]
async fn the_protocol_version_header_defaults_to_2025_03_26_and_refuses_others() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    let without = live
        .post(ping)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), 200, "a missing header means 2025-03-26");
    for bad in ["1999-01-01", "2026-07-28", "garbage"] {
        let r = live
            .post(ping)
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let body = json_of(r).await;
        assert_eq!(body["error"]["code"], -32600);
        assert_eq!(body["id"], 3);
    }
    live.stop().await;
}

#[tokio::test]
async fn a_missing_session_is_400_and_an_unknown_one_is_404() {
    let live = start().await;
    let list = r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#;
    let r = live.post(list).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let body = json_of(r).await;
    assert_eq!(body["error"]["code"], -32600);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Mcp-Session-Id")
    );
    for bogus in [
        "k1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "not-a-session",
        "k9.xyz",
    ] {
        let r = live.session_send(bogus, list).await;
        assert_eq!(r.status(), 404, "{bogus}");
        assert_eq!(json_of(r).await["error"]["code"], -32008);
    }
    live.stop().await;
}

#[tokio::test]
async fn delete_ends_a_session_for_good() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let delete = || {
        live.http
            .delete(&live.url)
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-11-25")
    };
    assert_eq!(delete().send().await.unwrap().status(), 204);
    let r = live
        .session_send(&sid, r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#)
        .await;
    assert_eq!(r.status(), 404);
    assert_eq!(delete().send().await.unwrap().status(), 404);
    assert_eq!(live.get_stream(&sid, None).await.status(), 404);
    live.stop().await;
}

#[tokio::test]
async fn a_tool_call_answers_json_when_nothing_comes_before_its_result() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"SERVER__echo","arguments":{"message":"hello"}}}"#).await;
    assert_eq!(r.status(), 200);
    assert_eq!(content_type(&r), "application/json");
    let body = json_of(r).await;
    assert_eq!(body["id"], 6);
    assert_eq!(body["result"]["content"][0]["text"], "hello");
    live.stop().await;
}

#[tokio::test]
async fn a_progress_token_gets_an_sse_reply_with_ids_progress_and_the_result() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"SERVER__slow","arguments":{"seconds":0.1,"steps":3},"_meta":{"progressToken":"p7"}}}"#).await;
    assert_eq!(r.status(), 200);
    let mut events = Events::of(r);
    let priming = events.next().await.unwrap();
    let prefix = priming.id.unwrap().strip_suffix(".0").unwrap().to_owned();
    for step in 1..=3 {
        let (id, msg) = events.next_message().await.unwrap();
        assert_eq!(id.unwrap(), format!("{prefix}.{step}"));
        assert_eq!(msg["method"], "notifications/progress");
        assert_eq!(msg["params"]["progressToken"], "p7");
        assert_eq!(msg["params"]["progress"], step);
    }
    let (id, msg) = events.next_message().await.unwrap();
    assert_eq!(id.unwrap(), format!("{prefix}.4"));
    assert_eq!(msg["id"], 7);
    assert_eq!(
        msg["result"]["content"][0]["text"],
        "slow done after 3 steps"
    );
    assert!(events.next().await.is_none());
    live.stop().await;
}

#[tokio::test]
async fn upstream_log_lines_go_to_the_get_stream_and_a_json_only_client_still_gets_json() {
    // A legacy upstream logs on its own channel (a modern one would need a logLevel per request).
    let live = start_with(vec![peer_def("SERVER", &["--era", "legacy"])]).await;
    let sid = live.initialize("{}").await;
    let get = live.get_stream(&sid, None).await;
    let mut stream = Events::of(get);
    let _priming = stream.next().await.unwrap();
    let call = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"SERVER__echo","arguments":{"message":"log"}}}"#;
    let r = live
        .session_post_accepting(&sid, "application/json", call)
        .send()
        .await
        .unwrap();
    assert_eq!(content_type(&r), "application/json");
    assert_eq!(json_of(r).await["result"]["content"][0]["text"], "log");
    let (_, note) = stream.next_message().await.unwrap();
    assert_eq!(note["method"], "notifications/message");
    assert_eq!(note["params"]["data"], "log");
    assert_eq!(note["params"]["level"], "info");
    live.stop().await;
}

#[tokio::test]
async fn a_client_accepting_neither_form_gets_406() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let r = live
        .session_post_accepting(
            &sid,
            "text/html",
            r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    live.stop().await;
}

#[tokio::test]
async fn an_elicitation_from_an_upstream_travels_on_the_calls_stream_and_the_posted_answer_returns()
{
    let live = start_with(vec![peer_def("SERVER", &["--era", "legacy"])]).await;
    let sid = live.initialize(r#"{"elicitation":{}}"#).await;
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"SERVER__ask","arguments":{"question":"Colour?"}}}"#).await;
    let mut events = Events::of(r);
    let _priming = events.next().await.unwrap();
    let (_, ask) = events.next_message().await.unwrap();
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["params"]["message"], "Colour?");
    let ask_id = ask["id"].clone();
    assert!(ask_id.as_str().unwrap().starts_with("mf-"), "{ask_id}");
    let answer = json!({"jsonrpc":"2.0","id":ask_id,"result":{"action":"accept","content":{"answer":"blue"}}});
    let r = live.session_send(&sid, &answer.to_string()).await;
    assert_eq!(r.status(), 202);
    let (_, result) = events.next_message().await.unwrap();
    assert_eq!(result["id"], 11);
    assert_eq!(
        result["result"]["content"][0]["text"],
        r#"{"answer":"blue"}"#
    );
    live.stop().await;
}

#[tokio::test]
async fn the_get_stream_carries_list_changes_of_the_session() {
    let live = start_with(vec![
        peer_def("SERVER", &[]),
        peer_def("flaky", &["--behaviour", "rug-pull", "--era", "legacy"]),
    ])
    .await;
    let sid = live.initialize("{}").await;
    let r = live.get_stream(&sid, None).await;
    assert_eq!(r.status(), 200);
    let mut stream = Events::of(r);
    let priming = stream.next().await.unwrap();
    assert!(priming.id.unwrap().ends_with(".0.0"));
    // The flaky upstream changes its tools after a call (and says so): the session hears of it.
    let _ = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"flaky__echo","arguments":{"message":"x"}}}"#).await;
    let (id, note) = stream.next_message().await.unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    assert!(
        id.unwrap().contains(".0."),
        "GET-stream events carry ids of stream 0"
    );
    live.stop().await;
}

#[tokio::test]
async fn a_dropped_reply_stream_resumes_from_its_last_event_id_and_the_call_goes_on() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"SERVER__slow","arguments":{"seconds":0.6,"steps":3},"_meta":{"progressToken":1}}}"#).await;
    let mut events = Events::of(r);
    let _priming = events.next().await.unwrap();
    let (first_id, first) = events.next_message().await.unwrap();
    assert_eq!(first["params"]["progress"], 1);
    drop(events); // the connection closes mid-call
    let resumed = live
        .get_stream(&sid, Some(first_id.as_deref().unwrap()))
        .await;
    assert_eq!(resumed.status(), 200);
    let mut events = Events::of(resumed);
    let mut seen = Vec::new();
    while let Some((_, msg)) = events.next_message().await {
        seen.push(msg);
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0]["params"]["progress"], 2);
    assert_eq!(seen[1]["params"]["progress"], 3);
    assert_eq!(
        seen[2]["result"]["content"][0]["text"],
        "slow done after 3 steps"
    );

    // A finished stream stays resumable for a while: from its priming event, everything again.
    let prefix = first_id.unwrap().rsplit_once('.').unwrap().0.to_owned();
    let again = live
        .get_stream(&sid, Some(format!("{prefix}.0").as_str()))
        .await;
    let mut events = Events::of(again);
    let mut count = 0;
    while events.next_message().await.is_some() {
        count += 1;
    }
    assert_eq!(count, 4);
    let unknown = live.get_stream(&sid, Some("ffffffff.99.1")).await;
    assert_eq!(unknown.status(), 400);
    // The GET stream (stream 0) of another replica, or of this one before the session moved:
    // a new GET stream stands in, first saying every list may have changed.
    let moved = live.get_stream(&sid, Some("ffffffff.0.7")).await;
    assert_eq!(moved.status(), 200);
    let mut events = Events::of(moved);
    let mut told = Vec::new();
    for _ in 0..3 {
        let (_, m) = events.next_message().await.unwrap();
        told.push(m["method"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        told,
        [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed"
        ]
    );
    drop(events);
    live.stop().await;
}

#[tokio::test]
async fn a_cancelled_notification_stops_the_call_and_its_stream_ends_without_an_answer() {
    let live = start().await;
    let sid = live.initialize("{}").await;
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"SERVER__slow","arguments":{"seconds":30,"steps":300},"_meta":{"progressToken":"c"}}}"#).await;
    let mut events = Events::of(r);
    let _priming = events.next().await.unwrap();
    let (_, progress) = events.next_message().await.unwrap();
    assert_eq!(progress["method"], "notifications/progress");
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":14,"reason":"test"}}"#;
    assert_eq!(live.session_send(&sid, cancel).await.status(), 202);
    let mut rest: Vec<Value> = Vec::new();
    while let Some((_, msg)) = events.next_message().await {
        rest.push(msg);
    }
    assert!(
        rest.iter().all(|m| m.get("id").is_none()),
        "no answer after a cancel: {rest:?}"
    );
    live.stop().await;
}

#[tokio::test]
async fn a_reply_stream_closed_by_the_client_and_not_resumed_cancels_its_call() {
    // One request in flight at most: a call still running would make the next one -32006.
    let live = serve(gateway(vec![peer_def("SERVER", &[])]).await, |s| {
        s.limits.max_in_flight = 1;
        s.limits.disconnect_grace = Duration::from_millis(200);
        s.limits.keepalive_interval = Duration::from_millis(50);
    })
    .await;
    let sid = live.initialize("{}").await;
    let r = live.session_send(&sid, r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"SERVER__slow","arguments":{"seconds":30,"steps":300},"_meta":{"progressToken":"d"}}}"#).await;
    let mut events = Events::of(r);
    let _ = events.next().await.unwrap();
    drop(events);
    let ping = r#"{"jsonrpc":"2.0","id":16,"method":"ping"}"#;
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let body = json_of(live.session_send(&sid, ping).await).await;
        if body.get("result").is_some() {
            break;
        }
        assert_eq!(body["error"]["code"], -32006, "{body}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the abandoned call was never cancelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    live.stop().await;
}
