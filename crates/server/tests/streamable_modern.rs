//! Why: pins every modern-era (2026-07-28) rule of `/mcp` with raw HTTP against a real gateway:
//! `_meta` validation, mirrored-header checks, revision refusal, unknown methods, reply forms,
//! the refusal of GET and DELETE, and `subscriptions/listen`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use live_server::*;
use serde_json::json;

fn modern_post(
    live: &Live,
    method: &str,
    name: Option<&str>,
    body: &str,
) -> reqwest::RequestBuilder {
    let mut r = live
        .post(body)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(n) = name {
        r = r.header("mcp-name", n);
    }
    r
}

const ECHO_PARAMS: &str = r#""name":"SERVER__echo","arguments":{"message":"hi"}"#;

#[tokio::test]
async fn server_discover_answers_the_gateways_discovery() {
    let live = start().await;
    let r = modern_post(
        &live,
        "server/discover",
        None,
        &modern_body(1, "server/discover", ""),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(content_type(&r), "application/json");
    let body = json_of(r).await;
    assert_eq!(body["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(body["result"]["resultType"], "complete");
    assert_eq!(body["result"]["serverInfo"]["name"], "manifold");
    live.stop().await;
}

#[tokio::test]
async fn a_tool_call_with_matching_headers_is_served_statelessly() {
    let live = start().await;
    let r = modern_post(
        &live,
        "tools/call",
        Some("SERVER__echo"),
        &modern_body(2, "tools/call", ECHO_PARAMS),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        !r.headers().contains_key("mcp-session-id"),
        "the modern era mints no session"
    );
    let body = json_of(r).await;
    assert_eq!(body["id"], 2);
    assert_eq!(body["result"]["content"][0]["text"], "hi");
    assert_eq!(body["result"]["resultType"], "complete");
    // A name sent in the base64 sentinel form is decoded before comparing.
    let r = modern_post(
        &live,
        "tools/call",
        Some("=?base64?U0VSVkVSX19lY2hv?="),
        &modern_body(3, "tools/call", ECHO_PARAMS),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    live.stop().await;
}

#[tokio::test]
async fn missing_or_different_mirrored_headers_are_400_header_mismatch() {
    let live = start().await;
    let body = modern_body(4, "tools/call", ECHO_PARAMS);
    let cases: Vec<(&str, reqwest::RequestBuilder)> = vec![
        ("no Mcp-Name", modern_post(&live, "tools/call", None, &body)),
        (
            "other Mcp-Name",
            modern_post(&live, "tools/call", Some("SERVER__add"), &body),
        ),
        (
            "other Mcp-Method",
            modern_post(&live, "tools/list", Some("SERVER__echo"), &body),
        ),
        (
            "no Mcp-Method",
            live.post(&body)
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-name", "SERVER__echo"),
        ),
        (
            "no MCP-Protocol-Version",
            live.post(&body)
                .header("mcp-method", "tools/call")
                .header("mcp-name", "SERVER__echo"),
        ),
        (
            "other MCP-Protocol-Version",
            live.post(&body)
                .header("mcp-protocol-version", "2025-11-25")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "SERVER__echo"),
        ),
    ];
    for (case, request) in cases {
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), 400, "{case}");
        let body = json_of(r).await;
        assert_eq!(body["error"]["code"], -32020, "{case}: {body}");
        assert_eq!(body["id"], 4, "{case}");
    }
    live.stop().await;
}

#[tokio::test]
async fn an_incomplete_meta_is_400_invalid_params() {
    let live = start().await;
    let body = r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    let r = modern_post(&live, "tools/list", None, body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body = json_of(r).await;
    assert_eq!(body["error"]["code"], -32602);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities")
    );
    // The modern header without any _meta is a modern request missing its _meta too.
    let r = modern_post(
        &live,
        "tools/list",
        None,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(json_of(r).await["error"]["code"], -32602);
    live.stop().await;
}

#[tokio::test]
async fn an_unsupported_revision_is_400_with_the_supported_list() {
    let live = start().await;
    let body = modern_body(7, "tools/list", "").replace("2026-07-28", "2099-01-01");
    let r = live
        .post(&body)
        .header("mcp-protocol-version", "2099-01-01")
        .header("mcp-method", "tools/list")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body = json_of(r).await;
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(
        body["error"]["data"],
        json!({"supported":["2026-07-28"],"requested":"2099-01-01"})
    );
    live.stop().await;
}

#[tokio::test]
async fn unknown_and_removed_methods_are_404_method_not_found() {
    let live = start().await;
    for method in [
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "frobnicate/now",
    ] {
        let r = modern_post(&live, method, None, &modern_body(8, method, ""))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{method}");
        let body = json_of(r).await;
        assert_eq!(body["error"]["code"], -32601, "{method}");
    }
    live.stop().await;
}

#[tokio::test]
async fn a_modern_notification_is_202() {
    let live = start().await;
    let r = live
        .post(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#)
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    assert!(r.bytes().await.unwrap().is_empty());
    live.stop().await;
}

#[tokio::test]
async fn get_and_delete_without_a_legacy_session_are_405() {
    let live = start().await;
    let get = live
        .http
        .get(&live.url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    assert_eq!(get.headers()["allow"], "GET, POST, DELETE");
    let delete = live.http.delete(&live.url).send().await.unwrap();
    assert_eq!(delete.status(), 405);
    let put = live.http.put(&live.url).send().await.unwrap();
    assert_eq!(put.status(), 405);
    live.stop().await;
}

#[tokio::test]
async fn a_progress_token_gets_a_stream_without_event_ids() {
    let live = start().await;
    let params = r#""name":"SERVER__slow","arguments":{"seconds":0.1,"steps":2},"_meta":{"progressToken":"m1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let body = format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{{params}}}}}"#);
    let r = modern_post(&live, "tools/call", Some("SERVER__slow"), &body)
        .send()
        .await
        .unwrap();
    let mut events = Events::of(r);
    let mut seen = Vec::new();
    while let Some(e) = events.next().await {
        assert!(e.id.is_none(), "modern streams are not resumable: {e:?}");
        seen.push(serde_json::from_str::<serde_json::Value>(e.data.as_deref().unwrap()).unwrap());
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0]["params"]["progressToken"], "m1");
    assert_eq!(
        seen[2]["result"]["content"][0]["text"],
        "slow done after 2 steps"
    );
    live.stop().await;
}

#[tokio::test]
async fn subscriptions_listen_acknowledges_first_then_forwards_changes_tagged_with_its_id() {
    let live = start_with(vec![
        peer_def("SERVER", &[]),
        peer_def("flaky", &["--behaviour", "rug-pull", "--era", "legacy"]),
    ])
    .await;
    let listen = modern_body(
        "42".parse().unwrap(),
        "subscriptions/listen",
        r#""notifications":{"toolsListChanged":true,"promptsListChanged":false}"#,
    );
    let r = modern_post(&live, "subscriptions/listen", None, &listen)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut events = Events::of(r);
    let (_, ack) = events.next_message().await.unwrap();
    assert_eq!(
        ack,
        json!({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":42}}})
    );
    let call = modern_body(
        43,
        "tools/call",
        r#""name":"flaky__echo","arguments":{"message":"x"}"#,
    );
    let _ = modern_post(&live, "tools/call", Some("flaky__echo"), &call)
        .send()
        .await
        .unwrap();
    let (_, change) = events.next_message().await.unwrap();
    assert_eq!(
        change,
        json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":42}}})
    );
    // Shutting the server down ends the stream with the listen request's result.
    let Live {
        server, gateway, ..
    } = live;
    let stopping = tokio::spawn(server.shutdown());
    let mut last = None;
    while let Some((_, m)) = events.next_message().await {
        last = Some(m);
    }
    assert_eq!(
        last.unwrap(),
        json!({"jsonrpc":"2.0","id":42,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":42}}})
    );
    stopping.await.unwrap();
    gateway.shutdown().await;
}

/// Calls in flight on the (only) upstream's connection.
fn upstream_in_flight(live: &Live) -> usize {
    live.gateway.upstreams()[0]
        .connection()
        .unwrap()
        .in_flight()
}

async fn wait_until_idle(live: &Live) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while upstream_in_flight(live) != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream call was never cancelled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

const SLOW_CALL: &str = r#""name":"SERVER__slow","arguments":{"seconds":30,"steps":300}"#;

#[tokio::test]
async fn closing_a_modern_reply_stream_cancels_the_request_upstream() {
    let live = start().await;
    let params = format!(
        r#"{SLOW_CALL},"_meta":{{"progressToken":"x","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}"#
    );
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{{{params}}}}}"#);
    let r = modern_post(&live, "tools/call", Some("SERVER__slow"), &body)
        .send()
        .await
        .unwrap();
    let mut events = Events::of(r);
    let (_, progress) = events.next_message().await.unwrap();
    assert_eq!(progress["method"], "notifications/progress");
    assert_eq!(upstream_in_flight(&live), 1);
    drop(events);
    wait_until_idle(&live).await;
    live.stop().await;
}

#[tokio::test]
async fn a_client_leaving_before_a_json_answer_cancels_the_request_upstream() {
    let live = start().await;
    let body = modern_body(21, "tools/call", SLOW_CALL);
    let waiting =
        tokio::spawn(modern_post(&live, "tools/call", Some("SERVER__slow"), &body).send());
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while upstream_in_flight(&live) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    waiting.abort();
    wait_until_idle(&live).await;
    live.stop().await;
}

#[tokio::test]
async fn mcp_param_headers_must_mirror_the_arguments_their_tool_marks() {
    // The conformance fixture offers `test_custom_header`, whose `region` carries x-mcp-header.
    let fixture = manifold_testkit::workspace_binary(
        "manifold-conformance-fixture",
        "manifold-conformance-fixture",
    )
    .unwrap();
    let mut def = manifold_gateway::UpstreamDefinition::new(
        "FIX",
        manifold_upstream::Target::Stdio(manifold_upstream::transport::stdio::StdioSpec {
            command: fixture.display().to_string(),
            args: vec!["stdio".to_owned()],
            ..Default::default()
        }),
    );
    def.client_capabilities = "{}".to_owned();
    let live = start_with(vec![def]).await;
    let body = |region: &str| {
        modern_body(
            30,
            "tools/call",
            &format!(r#""name":"FIX__test_custom_header","arguments":{{"region":"{region}"}}"#),
        )
    };
    let call = |region: &str, header: Option<&str>| {
        let mut r = modern_post(
            &live,
            "tools/call",
            Some("FIX__test_custom_header"),
            &body(region),
        );
        if let Some(h) = header {
            r = r.header("mcp-param-region", h);
        }
        r.send()
    };
    let ok = call("us-west1", Some("us-west1")).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        json_of(ok).await["result"]["content"][0]["text"],
        "Region: us-west1"
    );
    let encoded = call("Hello", Some("=?base64?SGVsbG8=?=")).await.unwrap();
    assert_eq!(encoded.status(), 200);
    for (case, region, header) in [
        ("missing", "us-west1", None),
        ("different", "us-west1", Some("eu-central1")),
        ("bad padding", "Hello", Some("=?base64?SGVsbG8?=")),
        ("bad alphabet", "Hello", Some("=?base64?SGVs!!!bG8=?=")),
    ] {
        let r = call(region, header).await.unwrap();
        assert_eq!(r.status(), 400, "{case}");
        assert_eq!(json_of(r).await["error"]["code"], -32020, "{case}");
    }
    live.stop().await;
}
