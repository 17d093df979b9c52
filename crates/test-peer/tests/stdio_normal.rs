//! The well-behaved peer over stdio, in both eras: what the README promises a correct client
//! gets, checked on the bytes the binary writes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned_peer;

use serde_json::{Value, json};
use spawned_peer::{MODERN, StdioPeer, modern_meta};

/// The `echo_raw` result exactly as the README quotes it.
const ECHO_RAW: &str = r#"{"content":[{"type":"text","text":"caf\u00e9 \"quoted\" \/slash\/ \ud83d\ude00 tab\tend"}],"zz_unknown":{"keep":[1,1.0,1e2,-0,1.50,100000000000000000000000000001]},"isError":false,"structuredContent":{"b":1,"a":1.0,"nested":{"z":null,"y":[]}},"_meta":{"com.example/vendor":"kept"}}"#;

fn modern_request(id: u64, method: &str, mut params: Value, capabilities: Value) -> Value {
    params["_meta"] = modern_meta(capabilities);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn initialize_echoes_known_revisions_and_answers_the_latest_otherwise() {
    let mut peer = StdioPeer::spawn(&[]);
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let response = peer.initialize_with(asked, json!({})).await;
        let result = &response["result"];
        assert_eq!(result["protocolVersion"], answered, "asked {asked}");
        assert_eq!(result["serverInfo"]["name"], "manifold-test-peer");
        assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
        assert!(result["capabilities"]["logging"].is_object());
        assert_eq!(
            result["instructions"],
            "manifold-test-peer, a server for Manifold's tests; behaviour: normal"
        );
        assert!(
            result.get("resultType").is_none(),
            "legacy results carry no resultType"
        );
    }
}

#[tokio::test]
async fn ping_answers_an_empty_object() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.send_text(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#)
        .await;
    assert_eq!(
        peer.read_line().await,
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n"
    );
}

#[tokio::test]
async fn discover_answers_versions_capabilities_identity_and_cache_hints() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.send(modern_request(1, "server/discover", json!({}), json!({})))
        .await;
    let response = peer.read_json().await;
    let result = &response["result"];
    assert_eq!(result["supportedVersions"], json!([MODERN]));
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["serverInfo"]["name"], "manifold-test-peer");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "manifold-test-peer"
    );
    assert_eq!(result["ttlMs"], 60000);
    assert_eq!(result["cacheScope"], "public");
    assert!(result["capabilities"]["tools"].is_object());
    assert!(
        result["instructions"]
            .as_str()
            .unwrap()
            .contains("behaviour: normal")
    );
}

#[tokio::test]
async fn legacy_only_peer_answers_discover_with_method_not_found() {
    let mut peer = StdioPeer::spawn(&["--era", "legacy"]);
    peer.send(modern_request(1, "server/discover", json!({}), json!({})))
        .await;
    let response = peer.read_json().await;
    assert_eq!(response["error"]["code"], -32601);
    assert_eq!(response["id"], 1);
    // ...and still speaks legacy.
    let init = peer.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn modern_only_peer_refuses_initialize_naming_its_versions() {
    let mut peer = StdioPeer::spawn(&["--era", "modern"]);
    let response = peer.initialize().await;
    assert_eq!(response["error"]["code"], -32022);
    assert_eq!(
        response["error"]["data"],
        json!({"supported": [MODERN], "requested": "2025-11-25"})
    );
}

#[tokio::test]
async fn modern_requests_need_their_meta() {
    let mut peer = StdioPeer::spawn(&["--era", "modern"]);
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32602);
    // Version without clientCapabilities is just as malformed.
    peer.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}}))
        .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32602);
}

#[tokio::test]
async fn dual_era_peer_refuses_a_request_with_neither_meta_nor_initialize() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32602);
}

#[tokio::test]
async fn legacy_only_peer_refuses_requests_before_initialize() {
    let mut peer = StdioPeer::spawn(&["--era", "legacy"]);
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32600);
}

#[tokio::test]
async fn unsupported_modern_version_gets_32022_with_supported_and_requested() {
    let mut peer = StdioPeer::spawn(&[]);
    let mut request = modern_request(3, "tools/list", json!({}), json!({}));
    request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    peer.send(request).await;
    let response = peer.read_json().await;
    assert_eq!(response["error"]["code"], -32022);
    assert_eq!(
        response["error"]["data"],
        json!({"supported": [MODERN], "requested": "1900-01-01"})
    );
}

#[tokio::test]
async fn modern_results_carry_result_type_server_info_and_list_cache_hints() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.send(modern_request(1, "tools/list", json!({}), json!({})))
        .await;
    let list = peer.read_json().await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "echo",
            "add",
            "fail",
            "slow",
            "ask",
            "sample",
            "roots",
            "echo_raw",
            "seen_headers"
        ]
    );
    assert_eq!(list["result"]["resultType"], "complete");
    assert_eq!(list["result"]["ttlMs"], 60000);
    peer.send(modern_request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi"}}),
        json!({}),
    ))
    .await;
    let call = peer.read_json().await;
    assert_eq!(call["result"]["resultType"], "complete");
    assert_eq!(call["result"]["content"][0]["text"], "hi");
    assert_eq!(
        call["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "manifold-test-peer"
    );
    assert!(
        call["result"].get("ttlMs").is_none(),
        "tool results are not cacheable"
    );
}

#[tokio::test]
async fn echo_add_and_fail_answer_as_documented() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    peer.call(2, "echo", json!({"message": "hi"})).await;
    assert_eq!(
        peer.read_line().await,
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"text\":\"hi\",\"type\":\"text\"}],\"isError\":false}}\n"
    );
    peer.call(3, "add", json!({"a": 2, "b": 3})).await;
    let added = peer.read_json().await;
    assert_eq!(added["result"]["content"][0]["text"], "5");
    assert_eq!(added["result"]["structuredContent"], json!({"sum": 5}));
    peer.call(4, "add", json!({"a": 1.5, "b": 1})).await;
    assert_eq!(
        peer.read_json().await["result"]["structuredContent"]["sum"],
        2.5
    );
    peer.call(5, "fail", json!({})).await;
    let failed = peer.read_json().await;
    assert_eq!(failed["result"]["isError"], true);
    assert_eq!(
        failed["result"]["content"][0]["text"],
        "this tool always fails"
    );
    peer.call(6, "no_such_tool", json!({})).await;
    assert_eq!(peer.read_json().await["error"]["code"], -32602);
    peer.call(7, "echo", json!({"message": 5})).await;
    assert_eq!(peer.read_json().await["error"]["code"], -32602);
}

#[tokio::test]
async fn echo_log_sends_a_log_message_first_unless_the_level_excludes_it() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    peer.call(2, "echo", json!({"message": "log"})).await;
    assert_eq!(
        peer.read_json().await,
        json!({"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"level": "info", "logger": "manifold-test-peer", "data": "log"}})
    );
    assert_eq!(peer.read_json().await["id"], 2);
    peer.send(json!({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "warning"}}))
        .await;
    assert_eq!(
        peer.read_json().await,
        json!({"jsonrpc": "2.0", "id": 3, "result": {}})
    );
    peer.call(4, "echo", json!({"message": "log"})).await;
    assert_eq!(
        peer.read_json().await["id"],
        4,
        "no notification at level warning"
    );
}

#[tokio::test]
async fn modern_echo_log_needs_the_log_level_meta() {
    let mut peer = StdioPeer::spawn(&[]);
    let call = |id: u64| {
        modern_request(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "log"}}),
            json!({}),
        )
    };
    peer.send(call(1)).await;
    assert_eq!(
        peer.read_json().await["id"],
        1,
        "no logLevel, no notification"
    );
    let mut with_level = call(2);
    with_level["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
    peer.send(with_level).await;
    assert_eq!(peer.read_json().await["method"], "notifications/message");
    assert_eq!(peer.read_json().await["id"], 2);
}

#[tokio::test]
async fn slow_reports_progress_then_answers() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    peer.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 0.3, "steps": 3}, "_meta": {"progressToken": "tok"}}}))
        .await;
    for step in 1..=3 {
        assert_eq!(
            peer.read_json().await,
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": "tok", "progress": step, "total": 3,
                "message": format!("step {step} of 3")}})
        );
    }
    let done = peer.read_json().await;
    assert_eq!(done["id"], 5);
    assert_eq!(
        done["result"]["content"][0]["text"],
        "slow done after 3 steps"
    );
}

#[tokio::test]
async fn slow_stops_on_cancel_and_never_answers_that_id() {
    let mut peer = StdioPeer::spawn_reading_stderr(&[]);
    peer.initialize().await;
    peer.send(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 2, "steps": 4}, "_meta": {"progressToken": 9}}}),
    )
    .await;
    assert_eq!(peer.read_json().await["params"]["progress"], 1);
    peer.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}),
    )
    .await;
    assert_eq!(
        peer.read_stderr_line().await,
        "manifold-test-peer: slow cancelled before step 2 of 4\n"
    );
    peer.send(json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}))
        .await;
    assert_eq!(
        peer.read_json().await,
        json!({"jsonrpc": "2.0", "id": 6, "result": {}})
    );
    peer.close_stdin();
    let rest = peer.read_to_end().await;
    assert!(
        rest.is_empty(),
        "nothing after the cancel: {:?}",
        String::from_utf8_lossy(&rest)
    );
    assert!(peer.wait().await.success());
}

#[tokio::test]
async fn legacy_ask_sends_elicitation_and_returns_the_answer() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize_with("2025-11-25", json!({"elicitation": {}}))
        .await;
    peer.call(2, "ask", json!({"question": "Colour?"})).await;
    assert_eq!(
        peer.read_json().await,
        json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {
            "message": "Colour?", "mode": "form",
            "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}})
    );
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {"answer": "blue"}}}))
        .await;
    let result = peer.read_json().await;
    assert_eq!(result["id"], 2);
    assert_eq!(
        result["result"]["content"][0]["text"],
        r#"{"answer":"blue"}"#
    );
    peer.call(3, "ask", json!({})).await;
    assert_eq!(
        peer.read_json().await["id"],
        2,
        "the peer's own ids count up"
    );
    peer.send(json!({"jsonrpc": "2.0", "id": 2, "result": {"action": "decline"}}))
        .await;
    assert_eq!(
        peer.read_json().await["result"]["content"][0]["text"],
        "decline"
    );
}

#[tokio::test]
async fn legacy_ask_without_the_capability_is_a_tool_error() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    peer.call(2, "ask", json!({})).await;
    let result = peer.read_json().await;
    assert_eq!(result["result"]["isError"], true);
    assert_eq!(
        result["result"]["content"][0]["text"],
        "the client did not declare the elicitation capability"
    );
}

#[tokio::test]
async fn legacy_sample_and_roots_ask_the_client() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize_with("2025-06-18", json!({"sampling": {}, "roots": {}}))
        .await;
    peer.call(2, "sample", json!({"prompt": "hi"})).await;
    let request = peer.read_json().await;
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(request["params"]["messages"][0]["content"]["text"], "hi");
    assert_eq!(request["params"]["maxTokens"], 100);
    peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}}))
        .await;
    assert_eq!(
        peer.read_json().await["result"]["content"][0]["text"],
        "sampled"
    );
    peer.call(3, "roots", json!({})).await;
    let request = peer.read_json().await;
    assert_eq!(request["method"], "roots/list");
    peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]}}))
        .await;
    assert_eq!(
        peer.read_json().await["result"]["content"][0]["text"],
        "file:///a\nfile:///b"
    );
}

#[tokio::test]
async fn modern_ask_is_a_multi_round_trip_request() {
    let mut peer = StdioPeer::spawn(&[]);
    let caps = json!({"elicitation": {}});
    peer.send(modern_request(
        1,
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
        caps.clone(),
    ))
    .await;
    let first = peer.read_json().await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required");
    assert_eq!(
        result["inputRequests"]["answer"]["method"],
        "elicitation/create"
    );
    assert_eq!(result["inputRequests"]["answer"]["params"]["mode"], "form");
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(state.starts_with("mtp1:ask:"), "{state}");

    peer.send(modern_request(
        2,
        "tools/call",
        json!({
        "name": "ask", "arguments": {},
        "inputResponses": {"answer": {"action": "accept", "content": {"answer": "42"}}},
        "requestState": state}),
        caps.clone(),
    ))
    .await;
    let second = peer.read_json().await;
    assert_eq!(second["result"]["resultType"], "complete");
    assert_eq!(second["result"]["content"][0]["text"], r#"{"answer":"42"}"#);

    peer.send(modern_request(
        3,
        "tools/call",
        json!({
        "name": "ask", "arguments": {},
        "inputResponses": {"answer": {"action": "accept", "content": {}}},
        "requestState": "forged"}),
        caps,
    ))
    .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32602);

    peer.send(modern_request(
        4,
        "tools/call",
        json!({"name": "ask", "arguments": {}}),
        json!({}),
    ))
    .await;
    let refused = peer.read_json().await;
    assert_eq!(refused["error"]["code"], -32021);
    assert_eq!(
        refused["error"]["data"],
        json!({"requiredCapabilities": {"elicitation": {}}})
    );
}

#[tokio::test]
async fn modern_sample_and_roots_use_input_required_too() {
    let mut peer = StdioPeer::spawn(&[]);
    for (tool, method, capability, answer, text) in [
        (
            "sample",
            "sampling/createMessage",
            "sampling",
            json!({"role": "assistant", "content": {"type": "text", "text": "s"}, "model": "m"}),
            "s",
        ),
        (
            "roots",
            "roots/list",
            "roots",
            json!({"roots": [{"uri": "file:///r"}]}),
            "file:///r",
        ),
    ] {
        let caps = json!({capability: {}});
        peer.send(modern_request(
            1,
            "tools/call",
            json!({"name": tool}),
            caps.clone(),
        ))
        .await;
        let first = peer.read_json().await;
        assert_eq!(first["result"]["inputRequests"]["answer"]["method"], method);
        let state = first["result"]["requestState"].clone();
        peer.send(modern_request(
            2,
            "tools/call",
            json!({
            "name": tool, "inputResponses": {"answer": answer}, "requestState": state}),
            caps,
        ))
        .await;
        assert_eq!(peer.read_json().await["result"]["content"][0]["text"], text);
    }
}

#[tokio::test]
async fn echo_raw_result_is_written_byte_for_byte() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    peer.call(3, "echo_raw", json!({})).await;
    let expected = format!("{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{ECHO_RAW}}}\n");
    assert_eq!(String::from_utf8(peer.read_line().await).unwrap(), expected);

    peer.send(modern_request(
        4,
        "tools/call",
        json!({"name": "echo_raw"}),
        json!({}),
    ))
    .await;
    let modern_raw = ECHO_RAW.strip_suffix('}').unwrap();
    let expected = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{modern_raw},\"resultType\":\"complete\"}}}}\n"
    );
    assert_eq!(String::from_utf8(peer.read_line().await).unwrap(), expected);
}

#[tokio::test]
async fn resources_and_prompts_answer_as_documented() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    let request = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    peer.send(request(1, "resources/list", json!({}))).await;
    assert_eq!(
        peer.read_json().await["result"]["resources"][0]["uri"],
        "test://static"
    );
    peer.send(request(2, "resources/templates/list", json!({})))
        .await;
    assert_eq!(
        peer.read_json().await["result"]["resourceTemplates"][0]["uriTemplate"],
        "test://item/{id}"
    );
    peer.send(request(
        3,
        "resources/read",
        json!({"uri": "test://static"}),
    ))
    .await;
    assert_eq!(
        peer.read_json().await["result"]["contents"],
        json!([{"uri": "test://static", "mimeType": "text/plain", "text": "static resource"}])
    );
    peer.send(request(
        4,
        "resources/read",
        json!({"uri": "test://item/abc"}),
    ))
    .await;
    assert_eq!(
        peer.read_json().await["result"]["contents"][0]["text"],
        "item abc"
    );
    peer.send(request(
        5,
        "resources/read",
        json!({"uri": "test://missing"}),
    ))
    .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32002);
    peer.send(request(6, "prompts/list", json!({}))).await;
    assert_eq!(
        peer.read_json().await["result"]["prompts"][0]["name"],
        "greet"
    );
    peer.send(request(
        7,
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    ))
    .await;
    assert_eq!(
        peer.read_json().await["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Hello, Ada!"}}])
    );
    peer.send(request(8, "prompts/get", json!({"name": "greet"})))
        .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32602);
    peer.send(request(9, "no/such/method", json!({}))).await;
    assert_eq!(peer.read_json().await["error"]["code"], -32601);

    peer.send(modern_request(
        10,
        "resources/read",
        json!({"uri": "test://missing"}),
        json!({}),
    ))
    .await;
    assert_eq!(
        peer.read_json().await["error"]["code"],
        -32602,
        "modern not-found code"
    );
}

#[tokio::test]
async fn malformed_input_gets_parse_and_invalid_request_errors() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.send_text("this is not json").await;
    let parse = peer.read_json().await;
    assert_eq!(parse["id"], Value::Null);
    assert_eq!(parse["error"]["code"], -32700);
    peer.send_text(r#"{"jsonrpc":"1.0","id":6,"method":"ping"}"#)
        .await;
    let invalid = peer.read_json().await;
    assert_eq!(invalid["id"], 6);
    assert_eq!(invalid["error"]["code"], -32600);
    peer.send_text(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await;
    assert_eq!(peer.read_json().await["error"]["code"], -32600);
    // Empty lines are skipped silently.
    peer.send_text("").await;
    peer.send_text(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#)
        .await;
    assert_eq!(peer.read_json().await["id"], 8);
}

#[tokio::test]
async fn closing_stdin_ends_the_peer_with_status_zero() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    peer.close_stdin();
    assert!(peer.read_to_end().await.is_empty());
    assert_eq!(peer.wait().await.code(), Some(0));
}

#[tokio::test]
async fn seen_headers_over_stdio_is_a_tool_error() {
    let mut peer = StdioPeer::spawn(&[]);
    peer.initialize().await;
    peer.call(2, "seen_headers", json!({})).await;
    assert_eq!(peer.read_json().await["result"]["isError"], true);
}
