//! Every stdio misbehaviour, checked against the exact bytes or sequence the README promises.
//! Other suites build on these promises, so each test pins one of them down.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned_peer;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use spawned_peer::{MODERN, StdioPeer, guarded, modern_meta};
use tokio::io::AsyncReadExt;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const CALL_ECHO: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}"#;
/// The result the well-behaved peer gives to CALL_ECHO.
const ECHO_RESULT: &str = r#"{"content":[{"text":"hi","type":"text"}],"isError":false}"#;
const MIB: usize = 1024 * 1024;

fn line(text: &str) -> Vec<u8> {
    format!("{text}\n").into_bytes()
}

/// Initializes through the well-behaved path and returns the peer ready for calls.
async fn ready(args: &[&str]) -> StdioPeer {
    let mut peer = StdioPeer::spawn(args);
    let init = peer.initialize().await;
    assert!(init.get("result").is_some(), "{init}");
    peer
}

#[tokio::test]
async fn garbage_lines_precede_every_response() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "garbage-lines"]);
    peer.send_text(INITIALIZE).await;
    assert_eq!(peer.read_line().await, line("this line is not JSON"));
    assert_eq!(peer.read_line().await, line(r#"{"truncated": "#));
    assert_eq!(peer.read_json().await["id"], 1);
    peer.send_text(INITIALIZED).await;
    peer.send_text(CALL_ECHO).await;
    assert_eq!(peer.read_line().await, line("this line is not JSON"));
    assert_eq!(peer.read_line().await, line(r#"{"truncated": "#));
    assert_eq!(
        peer.read_line().await,
        line(&format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{ECHO_RESULT}}}"#
        ))
    );
}

#[tokio::test]
async fn banner_lines_come_before_anything_is_read() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "banner"]);
    for n in 1..=3 {
        assert_eq!(
            peer.read_line().await,
            line(&format!("manifold-test-peer banner line {n} of 3"))
        );
    }
    peer.send_text(INITIALIZE).await;
    assert_eq!(peer.read_json().await["id"], 1);

    let mut counted = StdioPeer::spawn(&["--behaviour", "banner", "--count", "5"]);
    for n in 1..=5 {
        assert_eq!(
            counted.read_line().await,
            line(&format!("manifold-test-peer banner line {n} of 5"))
        );
    }
}

#[tokio::test]
async fn partial_then_eof_writes_half_the_call_response_and_exits_zero() {
    let mut peer = ready(&["--behaviour", "partial-then-eof"]).await;
    peer.send_text(CALL_ECHO).await;
    let full = format!(r#"{{"jsonrpc":"2.0","id":2,"result":{ECHO_RESULT}}}"#);
    let rest = peer.read_to_end().await;
    assert_eq!(rest, full.as_bytes()[..full.len() / 2].to_vec());
    assert_eq!(peer.wait().await.code(), Some(0));
}

#[tokio::test]
async fn over_long_line_is_one_twenty_mib_notification_then_the_response() {
    let mut peer = ready(&["--behaviour", "over-long-line"]).await;
    peer.send_text(CALL_ECHO).await;
    let long = peer.read_line().await;
    assert_eq!(long.len(), 20 * MIB + 1);
    let notification: Value = serde_json::from_slice(&long).unwrap();
    assert_eq!(notification["method"], "notifications/message");
    assert_eq!(notification["params"]["logger"], "over-long-line");
    assert_eq!(
        peer.read_line().await,
        line(&format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{ECHO_RESULT}}}"#
        ))
    );
}

#[tokio::test]
async fn invalid_utf8_puts_ff_fe_inside_the_text() {
    let mut peer = ready(&["--behaviour", "invalid-utf8"]).await;
    peer.send_text(CALL_ECHO).await;
    let mut expected =
        br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"invalid utf-8: "#
            .to_vec();
    expected.extend_from_slice(&[0xFF, 0xFE]);
    expected.extend_from_slice(b" end\"}],\"isError\":false}}\n");
    assert_eq!(peer.read_line().await, expected);
}

#[tokio::test]
async fn envelope_misbehaviours_hit_tools_call_responses_only() {
    let cases: [(&str, Vec<String>); 5] = [
        (
            "wrong-jsonrpc",
            vec![format!(
                r#"{{"jsonrpc":"1.0","id":2,"result":{ECHO_RESULT}}}"#
            )],
        ),
        (
            "result-and-error",
            vec![format!(
                r#"{{"jsonrpc":"2.0","id":2,"result":{ECHO_RESULT},"error":{{"code":-32603,"message":"this response carries both result and error"}}}}"#
            )],
        ),
        (
            "unknown-id",
            vec![
                format!(r#"{{"jsonrpc":"2.0","id":424242424,"result":{ECHO_RESULT}}}"#),
                format!(r#"{{"jsonrpc":"2.0","id":2,"result":{ECHO_RESULT}}}"#),
            ],
        ),
        (
            "duplicate-response",
            vec![
                format!(r#"{{"jsonrpc":"2.0","id":2,"result":{ECHO_RESULT}}}"#),
                format!(r#"{{"jsonrpc":"2.0","id":2,"result":{ECHO_RESULT}}}"#),
            ],
        ),
        (
            "null-id",
            vec![format!(
                r#"{{"jsonrpc":"2.0","id":null,"result":{ECHO_RESULT}}}"#
            )],
        ),
    ];
    for (behaviour, lines) in cases {
        // The handshake is untouched...
        let mut peer = ready(&["--behaviour", behaviour]).await;
        peer.send_text(CALL_ECHO).await;
        for expected in &lines {
            assert_eq!(
                String::from_utf8(peer.read_line().await).unwrap(),
                format!("{expected}\n"),
                "{behaviour}"
            );
        }
        // ...and nothing else follows the documented lines.
        peer.close_stdin();
        assert!(peer.read_to_end().await.is_empty(), "{behaviour}");
    }
}

#[tokio::test]
async fn result_and_error_on_an_error_reply_adds_an_empty_result() {
    let mut peer = ready(&["--behaviour", "result-and-error"]).await;
    peer.send_text(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}"#)
        .await;
    let both = peer.read_json().await;
    assert_eq!(both["result"], json!({}));
    assert_eq!(both["error"]["code"], -32602);
}

#[tokio::test]
async fn string_ids_number_the_peers_own_requests_srv_n() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "string-ids"]);
    peer.initialize_with("2025-11-25", json!({"elicitation": {}}))
        .await;
    peer.call(2, "ask", json!({})).await;
    let request = peer.read_json().await;
    assert_eq!(request["id"], "srv-1");
    assert_eq!(request["method"], "elicitation/create");
    peer.send(json!({"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "accept", "content": {"answer": "a"}}}))
        .await;
    assert_eq!(
        peer.read_json().await["result"]["content"][0]["text"],
        r#"{"answer":"a"}"#
    );
}

#[tokio::test]
async fn notification_flood_sends_ten_thousand_messages_before_each_response() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "notification-flood"]);
    peer.send_text(INITIALIZE).await;
    for n in 1..=10_000 {
        let notification = peer.read_json().await;
        assert_eq!(notification["method"], "notifications/message");
        assert_eq!(
            notification["params"]["data"],
            format!("flood {n} of 10000")
        );
    }
    assert_eq!(peer.read_json().await["id"], 1);

    let mut few = StdioPeer::spawn(&["--behaviour", "notification-flood", "--count", "2"]);
    few.send_text(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .await;
    assert_eq!(few.read_json().await["params"]["data"], "flood 1 of 2");
    assert_eq!(few.read_json().await["params"]["data"], "flood 2 of 2");
    assert_eq!(few.read_json().await["id"], 4);
}

#[tokio::test]
async fn never_answer_reads_everything_and_answers_nothing() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "never-answer"]);
    peer.send_text(INITIALIZE).await;
    peer.send_text(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    peer.close_stdin();
    assert!(peer.read_to_end().await.is_empty());
    assert_eq!(peer.wait().await.code(), Some(0));
}

#[tokio::test]
async fn exit_mid_call_exits_with_status_one_when_a_call_arrives() {
    let mut peer = ready(&["--behaviour", "exit-mid-call"]).await;
    peer.send_text(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        .await;
    assert_eq!(peer.read_json().await["id"], 2, "other requests still work");
    peer.send_text(CALL_ECHO).await;
    assert!(peer.read_to_end().await.is_empty());
    assert_eq!(peer.wait().await.code(), Some(1));
}

#[tokio::test]
async fn exit_before_handshake_exits_three_at_once() {
    let mut peer = StdioPeer::spawn_reading_stderr(&["--behaviour", "exit-before-handshake"]);
    assert_eq!(
        peer.read_stderr_line().await,
        "manifold-test-peer: behaviour exit-before-handshake: exiting with status 3\n"
    );
    assert!(peer.read_to_end().await.is_empty());
    assert_eq!(peer.wait().await.code(), Some(3));
}

#[tokio::test]
async fn close_stdout_stay_alive_closes_stdout_after_the_handshake_and_keeps_running() {
    let mut peer = StdioPeer::spawn_reading_stderr(&["--behaviour", "close-stdout-stay-alive"]);
    peer.send_text(INITIALIZE).await;
    assert_eq!(peer.read_json().await["id"], 1);
    assert!(peer.read_to_end().await.is_empty(), "stdout reached EOF");
    assert_eq!(
        peer.read_stderr_line().await,
        "manifold-test-peer: behaviour close-stdout-stay-alive: stdout closed, still running\n"
    );
    // Still reading stdin, and alive.
    peer.send_text(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    assert!(peer.child.try_wait().unwrap().is_none());
    peer.close_stdin();
    assert_eq!(peer.wait().await.code(), Some(0));
}

#[tokio::test]
async fn stderr_flood_writes_fifty_mib_before_serving() {
    let mut peer = StdioPeer::spawn_reading_stderr(&["--behaviour", "stderr-flood"]);
    let mut stderr = peer.stderr.take().unwrap();
    let drained = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&drained);
    let drain = tokio::spawn(async move {
        let mut buffer = vec![0; 1 << 16];
        let mut first_line = Vec::new();
        loop {
            let read = stderr.read(&mut buffer).await.unwrap();
            if read == 0 {
                break;
            }
            if first_line.len() < 64 {
                first_line.extend_from_slice(&buffer[..read.min(64)]);
            }
            counter.fetch_add(read, Ordering::SeqCst);
        }
        first_line
    });
    peer.send_text(INITIALIZE).await;
    assert_eq!(peer.read_json().await["id"], 1);
    // The flood precedes serving: by the time the answer exists, all but what a pipe buffers
    // has been drained already.
    assert!(drained.load(Ordering::SeqCst) >= 49 * MIB);
    peer.close_stdin();
    assert_eq!(peer.wait().await.code(), Some(0));
    let first_line = guarded("draining stderr", drain).await.unwrap();
    assert_eq!(drained.load(Ordering::SeqCst), 50 * MIB);
    assert_eq!(
        &first_line[..64],
        b"manifold-test-peer stderr-flood: this line is 64 bytes long....\n"
    );
}

#[tokio::test]
async fn drip_feed_writes_a_correct_line_in_many_small_writes() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "drip-feed", "--delay-ms", "5"]);
    peer.send_text(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)
        .await;
    let expected = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n";
    let mut received = Vec::new();
    let mut reads = 0;
    while received.len() < expected.len() {
        received.extend_from_slice(&peer.read_available().await);
        reads += 1;
    }
    assert_eq!(received, expected);
    assert!(
        reads > 1,
        "one byte at a time cannot arrive in a single read"
    );
}

#[tokio::test]
async fn cursor_loop_hands_out_the_same_cursor_forever() {
    let mut peer = ready(&["--behaviour", "cursor-loop"]).await;
    for (id, cursor) in [
        (2, Value::Null),
        (3, json!("loop-cursor")),
        (4, json!("loop-cursor")),
    ] {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({"cursor": cursor})
        };
        peer.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}))
            .await;
        let page = peer.read_json().await;
        assert_eq!(page["result"]["nextCursor"], "loop-cursor");
        assert_eq!(page["result"]["tools"][0]["name"], "echo");
    }
}

async fn page_through(peer: &mut StdioPeer) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut pages = 0;
    let mut cursor = Value::Null;
    loop {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({"cursor": cursor})
        };
        peer.send(
            json!({"jsonrpc": "2.0", "id": 100 + pages, "method": "tools/list", "params": params}),
        )
        .await;
        let page = peer.read_json().await;
        pages += 1;
        for tool in page["result"]["tools"].as_array().unwrap() {
            names.push(tool["name"].as_str().unwrap().to_owned());
        }
        cursor = page["result"]["nextCursor"].clone();
        if cursor.is_null() {
            return (names, pages);
        }
    }
}

#[tokio::test]
async fn many_tools_serves_one_hundred_thousand_tools_in_pages() {
    let mut peer = ready(&["--behaviour", "many-tools"]).await;
    let (names, pages) = page_through(&mut peer).await;
    assert_eq!(pages, 100);
    assert_eq!(names.len(), 100_000);
    assert_eq!(names[0], "tool_00000");
    assert_eq!(names[99_999], "tool_99999");
    peer.call(2, "tool_04242", json!({})).await;
    assert_eq!(
        peer.read_json().await["result"]["content"][0]["text"],
        "tool_04242"
    );

    let mut small = ready(&[
        "--behaviour",
        "many-tools",
        "--count",
        "10",
        "--page-size",
        "3",
    ])
    .await;
    let (names, pages) = page_through(&mut small).await;
    assert_eq!(pages, 4);
    assert_eq!(names.len(), 10);
}

#[tokio::test]
async fn depth_bomb_nests_one_hundred_thousand_arrays() {
    let mut peer = ready(&["--behaviour", "depth-bomb"]).await;
    peer.send_text(CALL_ECHO).await;
    let bomb = peer.read_line().await;
    let head = br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"depth bomb"}],"isError":false,"structuredContent":{"deep":"#;
    assert!(bomb.starts_with(head));
    let nested = &bomb[head.len()..bomb.len() - 4];
    assert_eq!(nested.len(), 200_000);
    assert!(nested[..100_000].iter().all(|b| *b == b'['));
    assert!(nested[100_000..].iter().all(|b| *b == b']'));
    assert_eq!(&bomb[bomb.len() - 4..], b"}}}\n");
}

#[tokio::test]
async fn wrong_revision_claims_1999_01_01_in_both_eras() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "wrong-revision"]);
    let init = peer.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], "1999-01-01");
    peer.send(json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": modern_meta(json!({}))}}))
        .await;
    assert_eq!(
        peer.read_json().await["error"]["data"]["supported"],
        json!(["1999-01-01"])
    );
    let mut meta = modern_meta(json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!("1999-01-01");
    peer.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": meta}}),
    )
    .await;
    assert_eq!(
        peer.read_json().await["result"]["supportedVersions"],
        json!(["1999-01-01"])
    );
}

#[tokio::test]
async fn slow_handshake_answers_later_requests_first() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "slow-handshake", "--delay-ms", "500"]);
    peer.send_text(INITIALIZE).await;
    peer.send_text(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    assert_eq!(peer.read_json().await["id"], 2);
    assert_eq!(peer.read_json().await["id"], 1);
    peer.send(json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": modern_meta(json!({}))}}))
        .await;
    peer.send_text(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .await;
    assert_eq!(peer.read_json().await["id"], 4);
    assert_eq!(
        peer.read_json().await["result"]["supportedVersions"],
        json!([MODERN])
    );
}

#[tokio::test]
async fn discover_timeout_never_answers_discover_but_initializes() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "discover-timeout"]);
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta(json!({}))}}))
        .await;
    let init = peer.initialize().await;
    assert_eq!(init["id"], 0);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    peer.close_stdin();
    assert!(
        peer.read_to_end().await.is_empty(),
        "discover stays unanswered"
    );
}

#[tokio::test]
async fn ignore_sigterm_survives_sigterm_and_eof_and_keeps_a_grandchild() {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;

    let mut peer = StdioPeer::spawn_with(&["--behaviour", "ignore-sigterm"], true, true);
    let announced = peer.read_stderr_line().await;
    let grandchild: i32 = announced
        .strip_prefix("manifold-test-peer: behaviour ignore-sigterm: grandchild sleep pid ")
        .unwrap_or_else(|| panic!("{announced:?}"))
        .trim()
        .parse()
        .unwrap();
    let peer_pid = Pid::from_raw(i32::try_from(peer.child.id().unwrap()).unwrap());
    kill(peer_pid, Signal::SIGTERM).unwrap();
    assert_eq!(
        peer.read_stderr_line().await,
        "manifold-test-peer: behaviour ignore-sigterm: SIGTERM received and ignored\n"
    );
    let init = peer.initialize().await;
    assert!(init.get("result").is_some());
    peer.close_stdin();
    assert_eq!(
        peer.read_stderr_line().await,
        "manifold-test-peer: behaviour ignore-sigterm: stdin closed, staying alive anyway\n"
    );
    assert!(peer.child.try_wait().unwrap().is_none());
    // The grandchild shares the peer's process group.
    let group = nix::unistd::getpgid(Some(Pid::from_raw(grandchild))).unwrap();
    assert_eq!(group, peer_pid);

    killpg(peer_pid, Signal::SIGKILL).unwrap();
    let status = peer.wait().await;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    guarded("the grandchild to disappear", async {
        loop {
            let stat =
                std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            let state = stat.rsplit(')').next().unwrap_or("").trim().chars().next();
            if matches!(state, None | Some('Z')) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn list_changed_before_init_precedes_the_initialize_response() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "list-changed-before-init"]);
    peer.send_text(INITIALIZE).await;
    assert_eq!(
        peer.read_line().await,
        line(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}"#)
    );
    assert_eq!(peer.read_json().await["id"], 1);
}

#[tokio::test]
async fn roots_after_initialized_asks_for_roots_unprompted_when_declared() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "roots-after-initialized"]);
    peer.initialize_with("2025-11-25", json!({"roots": {"listChanged": true}}))
        .await;
    assert_eq!(
        peer.read_line().await,
        line(r#"{"jsonrpc":"2.0","id":1,"method":"roots/list","params":{}}"#)
    );

    let mut undeclared = StdioPeer::spawn(&["--behaviour", "roots-after-initialized"]);
    undeclared.initialize().await;
    undeclared
        .send_text(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#)
        .await;
    assert_eq!(undeclared.read_json().await["id"], 9);
}

#[tokio::test]
async fn crlf_ends_every_line_with_cr_lf() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "crlf"]);
    peer.send_text(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)
        .await;
    assert_eq!(
        peer.read_line().await,
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\r\n"
    );
}

#[tokio::test]
async fn progress_after_response_sends_progress_once_the_call_is_answered() {
    let mut peer = ready(&["--behaviour", "progress-after-response"]).await;
    peer.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 0.1, "steps": 2}, "_meta": {"progressToken": "p"}}}))
        .await;
    assert_eq!(peer.read_json().await["id"], 5);
    assert_eq!(
        peer.read_json().await,
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": "p", "progress": 1, "total": 1, "message": "progress after the response"}})
    );
}
