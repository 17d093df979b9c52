//! The misbehaving-server corpus over stdio: for each way a server can break the protocol, the
//! client's exact outcome. Nothing may hang (every wait here is a hang guard, not a timing
//! assertion), nothing may panic, and no process may outlive its test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_upstream::paginate::ListKind;
use manifold_upstream::transport::stdio::{self, StdioSpec};
use manifold_upstream::{
    CallOptions, ClientIdentity, ConnectOptions, Connection, EraChoice, PeerInfo, ServerRequest,
    ServerRequestHandler, Target, UpstreamError, connect,
};
use manifold_wire::{Era, ErrorObject, Message};

const HANG_GUARD: Duration = Duration::from_secs(30);

fn spec(behaviour: &str, extra: &[&str]) -> StdioSpec {
    let mut args = vec![
        "stdio".to_owned(),
        "--behaviour".to_owned(),
        behaviour.to_owned(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    StdioSpec {
        command: manifold_testkit::test_peer().unwrap().display().to_string(),
        args,
        ..StdioSpec::default()
    }
}

/// Records server requests and answers them.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl ServerRequestHandler for Recorder {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        self.seen.lock().unwrap().push(request.method.clone());
        Box::pin(async move {
            Ok(match request.method.as_str() {
                "elicitation/create" => {
                    r#"{"action":"accept","content":{"name":"Ada"}}"#.to_owned()
                }
                "roots/list" => r#"{"roots":[{"uri":"file:///tmp","name":"tmp"}]}"#.to_owned(),
                _ => {
                    r#"{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}"#
                        .to_owned()
                }
            })
        })
    }
}

fn options(era: EraChoice, handler: Arc<dyn ServerRequestHandler>) -> ConnectOptions {
    let mut o = ConnectOptions::new("peer");
    o.era = era;
    o.handler = handler;
    o.client = ClientIdentity {
        capabilities: r#"{"elicitation":{},"sampling":{},"roots":{"listChanged":false}}"#
            .to_owned(),
        ..ClientIdentity::default()
    };
    o
}

async fn open(
    behaviour: &str,
    extra: &[&str],
    era: EraChoice,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    tokio::time::timeout(
        HANG_GUARD,
        connect(
            &Target::Stdio(spec(behaviour, extra)),
            &options(era, Arc::new(Recorder::default())),
        ),
    )
    .await
    .expect("connect hung")
}

fn pid_of(conn: &Connection) -> u32 {
    let d = conn.describe();
    let start = d.find("(pid ").expect("stdio describes its pid") + 5;
    d[start..d.len() - 1].parse().unwrap()
}

/// Closes the connection and proves the child's whole process group is gone.
async fn close_and_census(conn: Connection) {
    let pid = pid_of(&conn);
    tokio::time::timeout(HANG_GUARD, conn.close())
        .await
        .expect("close hung");
    let left = manifold_testkit::process_group_members(pid);
    assert!(left.is_empty(), "processes left in group {pid}: {left:?}");
}

async fn echo(conn: &Connection, message: &str) -> Result<Message, UpstreamError> {
    let params = format!(r#"{{"name":"echo","arguments":{{"message":"{message}"}}}}"#);
    tokio::time::timeout(
        HANG_GUARD,
        conn.call(
            "tools/call",
            Some(&params),
            CallOptions::with_timeout(Duration::from_secs(10)),
        ),
    )
    .await
    .expect("call hung")
}

fn text_of(m: &Message) -> String {
    let v: serde_json::Value = serde_json::from_str(m.result_raw().expect("a result")).unwrap();
    v["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn echo_ok(behaviour: &str, extra: &[&str]) -> Connection {
    let (conn, _) = open(behaviour, extra, EraChoice::Auto).await.unwrap();
    assert_eq!(
        text_of(&echo(&conn, "hi").await.unwrap()),
        "hi",
        "behaviour {behaviour}"
    );
    conn
}

#[tokio::test]
async fn normal_server_speaks_both_eras() {
    let (conn, info) = open("normal", &[], EraChoice::Auto).await.unwrap();
    assert_eq!(
        (info.era, info.revision.as_str()),
        (Era::Modern, "2026-07-28")
    );
    assert_eq!(text_of(&echo(&conn, "hi").await.unwrap()), "hi");
    close_and_census(conn).await;
    let (conn, info) = open("normal", &[], EraChoice::Legacy).await.unwrap();
    assert_eq!(
        (info.era, info.revision.as_str()),
        (Era::Legacy, "2025-11-25")
    );
    assert_eq!(info.server_name.as_deref(), Some("manifold-test-peer"));
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_legacy_only_server_is_reached_by_falling_back() {
    let (conn, info) = open("normal", &["--era", "legacy"], EraChoice::Auto)
        .await
        .unwrap();
    assert_eq!(info.era, Era::Legacy);
    close_and_census(conn).await;
    let err = open("normal", &["--era", "legacy"], EraChoice::Modern)
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Negotiation { .. }), "{err}");
}

#[tokio::test]
async fn a_modern_only_server_refuses_legacy_with_its_own_error() {
    let (conn, info) = open("normal", &["--era", "modern"], EraChoice::Auto)
        .await
        .unwrap();
    assert_eq!(info.era, Era::Modern);
    close_and_census(conn).await;
    let err = open("normal", &["--era", "modern"], EraChoice::Legacy)
        .await
        .unwrap_err();
    assert!(
        matches!(err, UpstreamError::Rpc { ref method, .. } if method == "initialize"),
        "{err}"
    );
}

#[tokio::test]
async fn result_content_crosses_byte_for_byte() {
    let (conn, _) = open("normal", &[], EraChoice::Legacy).await.unwrap();
    let m = conn
        .call(
            "tools/call",
            Some(r#"{"name":"echo_raw","arguments":{}}"#),
            CallOptions::default(),
        )
        .await
        .unwrap();
    let raw = m.result_raw().unwrap();
    assert!(
        raw.contains(r#""zz_unknown":{"keep":[1,1.0,1e2,-0,1.50,100000000000000000000000000001]}"#),
        "{raw}"
    );
    assert!(
        raw.contains(r#"caf\u00e9 \"quoted\" \/slash\/ \ud83d\ude00 tab\tend"#),
        "{raw}"
    );
    assert!(
        raw.contains(r#""structuredContent":{"b":1,"a":1.0,"nested":{"z":null,"y":[]}}"#),
        "{raw}"
    );
    close_and_census(conn).await;
}

#[tokio::test]
async fn garbage_lines_between_messages_are_skipped() {
    close_and_census(echo_ok("garbage-lines", &[]).await).await;
}

#[tokio::test]
async fn a_short_banner_is_skipped() {
    close_and_census(echo_ok("banner", &["--count", "3"]).await).await;
}

#[tokio::test]
async fn an_endless_banner_closes_the_connection_with_the_reason() {
    let err = open("banner", &["--count", "150"], EraChoice::Auto)
        .await
        .unwrap_err();
    match err {
        UpstreamError::Closed { cause, .. } => assert!(
            cause.contains("more than 100 lines that are not JSON"),
            "{cause}"
        ),
        other => panic!("expected Closed, got {other}"),
    }
}

#[tokio::test]
async fn partial_json_then_eof_settles_the_call_as_closed() {
    let (conn, _) = open("partial-then-eof", &[], EraChoice::Auto)
        .await
        .unwrap();
    let err = echo(&conn, "hi").await.unwrap_err();
    assert!(
        matches!(err, UpstreamError::Closed { ref cause, .. } if cause.contains("exited")),
        "{err}"
    );
    close_and_census(conn).await;
}

#[tokio::test]
async fn an_over_long_line_is_skipped_and_the_stream_stays_in_sync() {
    close_and_census(echo_ok("over-long-line", &[]).await).await;
}

#[tokio::test]
async fn an_over_long_answer_fails_its_call_at_once_naming_the_method_and_the_limit() {
    let (conn, _) = open("over-long-answer", &[], EraChoice::Auto)
        .await
        .unwrap();
    // The call's own timeout is far past the hang guard: only the skipped line's id can end it.
    let options = CallOptions {
        timeout: HANG_GUARD * 10,
        ..CallOptions::default()
    };
    let outcome = tokio::time::timeout(HANG_GUARD, conn.list_all(ListKind::Tools, options))
        .await
        .expect("the call waited for its timeout instead of failing at once");
    match outcome {
        Err(UpstreamError::Protocol { detail, .. }) => assert!(
            detail.contains("the server's answer to tools/list was over 16 MiB"),
            "{detail}"
        ),
        other => panic!("expected a protocol error, got {other:?}"),
    }
    // The stream stayed in sync: the next call is answered.
    assert_eq!(text_of(&echo(&conn, "after").await.unwrap()), "after");
    close_and_census(conn).await;
}

async fn protocol_error(behaviour: &str, needle: &str) {
    let (conn, _) = open(behaviour, &[], EraChoice::Auto).await.unwrap();
    match echo(&conn, "hi").await {
        Err(UpstreamError::Protocol { server, detail }) => {
            assert_eq!(server, "peer");
            assert!(detail.contains(needle), "{behaviour}: {detail}");
        }
        other => panic!("{behaviour}: expected a protocol error, got {other:?}"),
    }
    // The connection survives a bad message.
    let list = conn
        .list_all(ListKind::Tools, CallOptions::default())
        .await
        .unwrap();
    assert!(!list.is_empty());
    close_and_census(conn).await;
}

#[tokio::test]
async fn invalid_utf8_fails_that_call_with_a_protocol_error() {
    protocol_error("invalid-utf8", "UTF-8").await;
}

#[tokio::test]
async fn a_wrong_jsonrpc_version_fails_that_call() {
    protocol_error("wrong-jsonrpc", "\"jsonrpc\" must be \"2.0\"").await;
}

#[tokio::test]
async fn result_and_error_together_fail_that_call() {
    protocol_error("result-and-error", "it has both").await;
}

#[tokio::test]
async fn a_depth_bomb_fails_that_call() {
    protocol_error("depth-bomb", "nests deeper").await;
}

#[tokio::test]
async fn a_response_to_an_unknown_id_is_ignored_and_counted() {
    let conn = echo_ok("unknown-id", &[]).await;
    assert_eq!(conn.stats().stray_responses.load(Ordering::Relaxed), 1);
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_duplicate_response_is_delivered_once() {
    let conn = echo_ok("duplicate-response", &[]).await;
    assert_eq!(text_of(&echo(&conn, "again").await.unwrap()), "again");
    // The second copy of the second answer may still be on its way: wait for it (hang guard).
    for _ in 0..500 {
        if conn.stats().stray_responses.load(Ordering::Relaxed) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(conn.stats().stray_responses.load(Ordering::Relaxed), 2);
    close_and_census(conn).await;
}

#[tokio::test]
async fn server_requests_with_string_ids_are_answered() {
    let handler = Arc::new(Recorder::default());
    let (conn, _) = connect(
        &Target::Stdio(spec("string-ids", &[])),
        &options(EraChoice::Legacy, handler.clone()),
    )
    .await
    .unwrap();
    let m = conn
        .call(
            "tools/call",
            Some(r#"{"name":"ask","arguments":{}}"#),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(text_of(&m).contains("Ada"), "{}", m.as_str());
    assert_eq!(
        handler.seen.lock().unwrap().as_slice(),
        ["elicitation/create"]
    );
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_null_id_response_never_settles_another_call_and_the_deadline_does() {
    let (conn, _) = open("null-id", &[], EraChoice::Auto).await.unwrap();
    let params = r#"{"name":"echo","arguments":{"message":"hi"}}"#;
    let err = conn
        .call(
            "tools/call",
            Some(params),
            CallOptions::with_timeout(Duration::from_millis(500)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Timeout { .. }), "{err}");
    assert_eq!(conn.in_flight(), 0);
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_notification_flood_does_not_block_the_response() {
    let (conn, _) = open("notification-flood", &["--count", "10000"], EraChoice::Auto)
        .await
        .unwrap();
    // The flood comes before the response with no request id; with one call in flight each line
    // belongs to that call. Every line is either delivered to it in order or counted as dropped.
    let dropped_before = conn.stats().dropped_notifications.load(Ordering::Relaxed);
    let params = r#"{"name":"echo","arguments":{"message":"hi"}}"#;
    let mut call = conn
        .request("tools/call", Some(params), CallOptions::default())
        .await
        .unwrap();
    let mut delivered = 0u64;
    let response = loop {
        match tokio::time::timeout(HANG_GUARD, call.next())
            .await
            .expect("call hung")
        {
            Some(Ok(manifold_upstream::CallEvent::Notification(_))) => delivered += 1,
            Some(Ok(manifold_upstream::CallEvent::Response(m))) => break m,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(text_of(&response), "hi");
    let dropped = conn.stats().dropped_notifications.load(Ordering::Relaxed) - dropped_before;
    assert_eq!(delivered + dropped, 10_000);
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_is_still_reaped() {
    let (transport, inbound) = stdio::spawn("peer", &spec("never-answer", &[])).unwrap();
    let conn = Connection::start("peer", transport, inbound, Arc::new(Recorder::default()));
    let err = conn
        .call(
            "tools/list",
            None,
            CallOptions::with_timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, UpstreamError::Timeout { ref server, .. } if server == "peer"),
        "{err}"
    );
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_server_exiting_mid_call_settles_the_call_with_its_exit_status() {
    let (conn, _) = open("exit-mid-call", &[], EraChoice::Auto).await.unwrap();
    let err = echo(&conn, "hi").await.unwrap_err();
    assert!(
        matches!(err, UpstreamError::Closed { ref cause, .. } if cause.contains("exit status: 1")),
        "{err}"
    );
    assert!(matches!(
        echo(&conn, "again").await,
        Err(UpstreamError::Closed { .. })
    ));
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_server_exiting_before_the_handshake_fails_connect_with_its_status() {
    let err = open("exit-before-handshake", &[], EraChoice::Auto)
        .await
        .unwrap_err();
    assert!(
        matches!(err, UpstreamError::Closed { ref cause, .. } if cause.contains("exit status: 3")),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_that_closes_stdout_but_lives_is_closed_and_killed() {
    let (conn, _) = open("close-stdout-stay-alive", &[], EraChoice::Auto)
        .await
        .unwrap();
    let err = echo(&conn, "hi").await.unwrap_err();
    assert!(matches!(err, UpstreamError::Closed { .. }), "{err}");
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_stderr_flood_neither_blocks_nor_reaches_stdout() {
    close_and_census(echo_ok("stderr-flood", &[]).await).await;
}

#[tokio::test]
async fn drip_fed_bytes_are_reassembled() {
    close_and_census(echo_ok("drip-feed", &["--delay-ms", "0"]).await).await;
}

#[tokio::test]
async fn crlf_line_endings_are_tolerated() {
    close_and_census(echo_ok("crlf", &[]).await).await;
}

#[tokio::test]
async fn a_repeating_cursor_stops_pagination_with_an_error() {
    let (conn, _) = open("cursor-loop", &[], EraChoice::Auto).await.unwrap();
    let err = conn
        .list_all(ListKind::Tools, CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, UpstreamError::Pagination { ref detail, .. } if detail.contains("repeated the cursor")),
        "{err}"
    );
    close_and_census(conn).await;
}

#[tokio::test]
async fn one_hundred_thousand_tools_are_listed_across_pages() {
    let (conn, _) = open("many-tools", &["--count", "100000"], EraChoice::Auto)
        .await
        .unwrap();
    let tools = conn
        .list_all(ListKind::Tools, CallOptions::default())
        .await
        .unwrap();
    assert_eq!(tools.len(), 100_000);
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_revision_that_was_not_offered_is_refused() {
    let err = open("wrong-revision", &[], EraChoice::Auto)
        .await
        .unwrap_err();
    assert!(
        matches!(err, UpstreamError::Negotiation { ref detail, .. } if detail.contains("1999-01-01")),
        "{err}"
    );
}

#[tokio::test]
async fn a_slow_handshake_within_the_probe_window_still_goes_modern() {
    let (conn, info) = open("slow-handshake", &["--delay-ms", "1000"], EraChoice::Auto)
        .await
        .unwrap();
    assert_eq!(info.era, Era::Modern);
    close_and_census(conn).await;
}

#[tokio::test]
async fn an_unanswered_discover_probe_falls_back_to_legacy() {
    let (conn, info) = open("discover-timeout", &[], EraChoice::Auto)
        .await
        .unwrap();
    assert_eq!(info.era, Era::Legacy);
    assert_eq!(text_of(&echo(&conn, "hi").await.unwrap()), "hi");
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_child_that_ignores_sigterm_is_killed_with_its_grandchild() {
    let (conn, _) = open("ignore-sigterm", &[], EraChoice::Auto).await.unwrap();
    let pid = pid_of(&conn);
    let members = manifold_testkit::process_group_members(pid);
    assert!(
        members.len() >= 2,
        "the peer keeps a grandchild in its group: {members:?}"
    );
    close_and_census(conn).await;
}

#[tokio::test]
async fn a_list_change_before_the_handshake_reaches_the_notification_channel() {
    let (conn, _) = open("list-changed-before-init", &[], EraChoice::Legacy)
        .await
        .unwrap();
    let mut notes = conn.take_notifications().unwrap();
    let n = tokio::time::timeout(HANG_GUARD, notes.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n.method(), Some("notifications/tools/list_changed"));
    close_and_census(conn).await;
}

#[tokio::test]
async fn roots_asked_right_after_initialized_are_answered() {
    let handler = Arc::new(Recorder::default());
    let (conn, _) = connect(
        &Target::Stdio(spec("roots-after-initialized", &[])),
        &options(EraChoice::Legacy, handler.clone()),
    )
    .await
    .unwrap();
    // The roots request races the first call; the call's answer proves the server went on.
    assert_eq!(text_of(&echo(&conn, "hi").await.unwrap()), "hi");
    for _ in 0..100 {
        if !handler.seen.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(handler.seen.lock().unwrap().as_slice(), ["roots/list"]);
    close_and_census(conn).await;
}

#[tokio::test]
async fn progress_after_the_response_is_dropped_quietly() {
    let (conn, _) = open("progress-after-response", &[], EraChoice::Auto)
        .await
        .unwrap();
    let params = r#"{"name":"echo","arguments":{"message":"p"},"_meta":{"progressToken":"t"}}"#;
    let m = conn
        .call("tools/call", Some(params), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(text_of(&m), "p");
    assert_eq!(text_of(&echo(&conn, "next").await.unwrap()), "next");
    close_and_census(conn).await;
}
