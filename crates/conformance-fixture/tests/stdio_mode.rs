//! The stdio mode, byte for byte where it matters: this is the mode Manifold launches, so these
//! tests pin the exact answers a gateway in front of the fixture will see, in both eras.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned;

use serde_json::{Value, json};
use spawned::{StdioFixture, modern_meta};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn server_info_meta() -> Value {
    json!({ "io.modelcontextprotocol/serverInfo": { "name": "manifold-conformance-fixture", "version": VERSION } })
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test]
async fn initialize_then_a_tool_call_then_a_modern_request() {
    let mut fixture = StdioFixture::start();
    let mut init = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "fixture-test", "version": "1.0.0" },
            },
        }))
        .await;
    let instructions = init["result"]
        .as_object_mut()
        .unwrap()
        .remove("instructions")
        .unwrap();
    assert!(
        instructions
            .as_str()
            .unwrap()
            .starts_with("Manifold's conformance fixture")
    );
    assert_eq!(
        init,
        json!({
            "jsonrpc": "2.0", "id": 1,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {
                    "tools": { "listChanged": true },
                    "prompts": { "listChanged": true },
                    "resources": { "subscribe": true },
                    "logging": {},
                    "completions": {},
                },
                "serverInfo": { "name": "manifold-conformance-fixture", "version": VERSION },
            },
        })
    );
    fixture
        .send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;

    let call = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "test_simple_text", "arguments": {} },
        }))
        .await;
    assert_eq!(
        call,
        json!({
            "jsonrpc": "2.0", "id": 2,
            "result": { "content": [{ "type": "text", "text": "This is a simple text response for testing." }] },
        })
    );

    // The same tool in the modern era, on the same connection: the result gains resultType and
    // the server's identity in _meta.
    let modern = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": "m-3", "method": "tools/call",
            "params": { "name": "test_simple_text", "arguments": {}, "_meta": modern_meta(json!({})) },
        }))
        .await;
    assert_eq!(
        modern,
        json!({
            "jsonrpc": "2.0", "id": "m-3",
            "result": {
                "content": [{ "type": "text", "text": "This is a simple text response for testing." }],
                "resultType": "complete",
                "_meta": server_info_meta(),
            },
        })
    );

    let mut discover = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 4, "method": "server/discover",
            "params": { "_meta": modern_meta(json!({})) },
        }))
        .await;
    discover["result"]
        .as_object_mut()
        .unwrap()
        .remove("instructions")
        .unwrap();
    assert_eq!(
        discover,
        json!({
            "jsonrpc": "2.0", "id": 4,
            "result": {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {
                    "tools": { "listChanged": true },
                    "prompts": { "listChanged": true },
                    "resources": { "subscribe": true },
                    "logging": {},
                    "completions": {},
                    "extensions": { "io.modelcontextprotocol/tasks": {} },
                },
                "resultType": "complete",
                "ttlMs": 300_000,
                "cacheScope": "public",
                "_meta": server_info_meta(),
            },
        })
    );

    let (status, rest) = fixture.finish().await;
    assert!(status.success());
    assert_eq!(rest, Vec::<Value>::new());
}

#[tokio::test]
async fn legacy_initialize_answers_a_supported_revision_or_its_latest() {
    let mut fixture = StdioFixture::start();
    let old = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } },
        }))
        .await;
    assert_eq!(old["result"]["protocolVersion"], "2025-06-18");
    let future = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "initialize",
            "params": { "protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } },
        }))
        .await;
    assert_eq!(future["result"]["protocolVersion"], "2025-11-25");
    let ping = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" }))
        .await;
    assert_eq!(ping, json!({ "jsonrpc": "2.0", "id": 3, "result": {} }));
    fixture.finish().await;
}

#[tokio::test]
async fn modern_lists_carry_cache_hints_in_a_deterministic_order() {
    let mut fixture = StdioFixture::start();
    let request = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": modern_meta(json!({})) },
    });
    let first = fixture.call(&request).await;
    let second = fixture.call(&request).await;
    assert_eq!(first, second);
    let result = &first["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], 30_000);
    assert_eq!(result["cacheScope"], "public");
    assert_eq!(result["_meta"], server_info_meta());
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 36);
    assert_eq!(names[0], "test_simple_text");
    assert_eq!(names[35], "test_tool_with_task");
    let read = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "resources/read",
            "params": { "uri": "test://static-text", "_meta": modern_meta(json!({})) },
        }))
        .await;
    assert_eq!(
        read["result"],
        json!({
            "contents": [{ "uri": "test://static-text", "mimeType": "text/plain", "text": "This is the content of the static text resource." }],
            "resultType": "complete", "ttlMs": 300_000, "cacheScope": "public", "_meta": server_info_meta(),
        })
    );
    fixture.finish().await;
}

#[tokio::test]
async fn modern_requests_are_validated_before_dispatch() {
    let mut fixture = StdioFixture::start();
    let no_meta = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {} }))
        .await;
    assert_eq!(no_meta["id"], 1);
    assert_eq!(no_meta["error"]["code"], -32602);

    let mut old = modern_meta(json!({}));
    old["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let unsupported = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": { "_meta": old } }))
        .await;
    assert_eq!(unsupported["error"]["code"], -32022);
    assert_eq!(
        unsupported["error"]["data"],
        json!({ "supported": ["2026-07-28"], "requested": "v999.0.0" })
    );

    let removed = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 3, "method": "ping", "params": { "_meta": modern_meta(json!({})) } }))
        .await;
    assert_eq!(removed["error"]["code"], -32601);

    let undeclared = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": { "name": "test_missing_capability", "arguments": {}, "_meta": modern_meta(json!({})) },
        }))
        .await;
    assert_eq!(undeclared["error"]["code"], -32021);
    assert_eq!(
        undeclared["error"]["data"],
        json!({ "requiredCapabilities": { "sampling": {} } })
    );

    let not_found = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 5, "method": "resources/read",
            "params": { "uri": "test://nope", "_meta": modern_meta(json!({})) },
        }))
        .await;
    assert_eq!(not_found["error"]["code"], -32602);
    assert_eq!(not_found["error"]["data"], json!({ "uri": "test://nope" }));
    fixture.finish().await;
}

#[tokio::test]
async fn a_modern_round_trip_completes_and_a_tampered_state_is_refused() {
    let mut fixture = StdioFixture::start();
    let caps = json!({ "elicitation": {} });
    let first = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "test_input_required_result_multi_round", "arguments": {}, "_meta": modern_meta(caps.clone()) },
        }))
        .await;
    let r1 = &first["result"];
    assert_eq!(r1["resultType"], "input_required");
    assert_eq!(
        r1["inputRequests"],
        json!({ "step1": {
            "method": "elicitation/create",
            "params": {
                "message": "Step 1: What is your name?",
                "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"] },
            },
        }})
    );
    let state1 = r1["requestState"].as_str().unwrap().to_owned();

    let second = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {
                "name": "test_input_required_result_multi_round", "arguments": {},
                "inputResponses": { "step1": { "action": "accept", "content": { "name": "Alice" } } },
                "requestState": state1,
                "_meta": modern_meta(caps.clone()),
            },
        }))
        .await;
    let r2 = &second["result"];
    assert_eq!(r2["resultType"], "input_required");
    assert_eq!(
        r2["inputRequests"]["step2"]["params"]["message"],
        "Step 2: What is your favorite color?"
    );
    let state2 = r2["requestState"].as_str().unwrap().to_owned();
    assert_ne!(state1, state2);

    // The answer to step1 travels sealed in state2: forging it is refused...
    let tampered = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {
                "name": "test_input_required_result_multi_round", "arguments": {},
                "inputResponses": { "step2": { "action": "accept", "content": { "color": "blue" } } },
                "requestState": format!("{state2}-TAMPERED"),
                "_meta": modern_meta(caps.clone()),
            },
        }))
        .await;
    assert_eq!(tampered["error"]["code"], -32602);
    // ...and a state minted for another tool does not transfer.
    let moved = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {
                "name": "test_input_required_result_elicitation", "arguments": {},
                "requestState": state2,
                "_meta": modern_meta(caps.clone()),
            },
        }))
        .await;
    assert_eq!(moved["error"]["code"], -32602);

    let done = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {
                "name": "test_input_required_result_multi_round", "arguments": {},
                "inputResponses": { "step2": { "action": "accept", "content": { "color": "blue" } } },
                "requestState": state2,
                "_meta": modern_meta(caps),
            },
        }))
        .await;
    assert_eq!(
        done["result"],
        json!({
            "content": [{ "type": "text", "text": "Alice likes blue" }],
            "resultType": "complete",
            "_meta": server_info_meta(),
        })
    );
    fixture.finish().await;
}

#[tokio::test]
async fn legacy_sampling_goes_to_the_client_and_its_answer_comes_back() {
    let mut fixture = StdioFixture::start();
    fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": { "sampling": {} }, "clientInfo": { "name": "t", "version": "1" } },
        }))
        .await;
    fixture
        .send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;
    let asked = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "test_sampling", "arguments": { "prompt": "Say hi" } },
        }))
        .await;
    assert_eq!(
        asked,
        json!({
            "jsonrpc": "2.0", "id": "fixture-1", "method": "sampling/createMessage",
            "params": {
                "messages": [{ "role": "user", "content": { "type": "text", "text": "Say hi" } }],
                "maxTokens": 100,
            },
        })
    );
    let answered = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": "fixture-1",
            "result": { "role": "assistant", "content": { "type": "text", "text": "hi" }, "model": "m", "stopReason": "endTurn" },
        }))
        .await;
    assert_eq!(
        answered,
        json!({ "jsonrpc": "2.0", "id": 2, "result": { "content": [{ "type": "text", "text": "LLM response: hi" }] } })
    );
    fixture.finish().await;
}

#[tokio::test]
async fn legacy_progress_and_log_messages_precede_the_result_and_follow_the_level() {
    let mut fixture = StdioFixture::start();
    fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } },
        }))
        .await;
    fixture
        .send(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "test_tool_with_progress", "arguments": {}, "_meta": { "progressToken": "p1" } },
        }))
        .await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(fixture.recv().await);
    }
    let progress: Vec<(Value, Value)> = seen[..3]
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "notifications/progress");
            assert_eq!(n["params"]["progressToken"], "p1");
            (
                n["params"]["progress"].clone(),
                n["params"]["total"].clone(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        vec![
            (json!(0), json!(100)),
            (json!(50), json!(100)),
            (json!(100), json!(100))
        ]
    );
    assert_eq!(
        seen[3]["result"]["content"][0]["text"],
        "Tool with progress executed successfully"
    );

    let set = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": { "level": "warning" } }))
        .await;
    assert_eq!(set, json!({ "jsonrpc": "2.0", "id": 3, "result": {} }));
    let quiet = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": { "name": "test_tool_with_logging" } }))
        .await;
    assert_eq!(
        quiet["id"], 4,
        "no info message may precede the result at level warning"
    );

    fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": { "level": "info" } }))
        .await;
    fixture
        .send(&json!({ "jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": { "name": "test_tool_with_logging" } }))
        .await;
    let mut texts = Vec::new();
    for _ in 0..3 {
        let n = fixture.recv().await;
        assert_eq!(n["method"], "notifications/message");
        assert_eq!(n["params"]["level"], "info");
        assert_eq!(n["params"]["logger"], "conformance-fixture");
        texts.push(n["params"]["data"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        texts,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );
    assert_eq!(fixture.recv().await["id"], 6);
    fixture.finish().await;
}

#[tokio::test]
async fn tasks_run_to_completion_and_take_input_through_tasks_update() {
    let mut fixture = StdioFixture::start();
    let with_tasks =
        json!({ "elicitation": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } });

    let refused = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "failing_job", "arguments": {}, "_meta": modern_meta(json!({})) },
        }))
        .await;
    assert_eq!(refused["error"]["code"], -32021);
    assert_eq!(
        refused["error"]["data"],
        json!({ "requiredCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } } })
    );

    let created = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "confirm_delete", "arguments": { "filename": "a.txt" }, "_meta": modern_meta(with_tasks.clone()) },
        }))
        .await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task");
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttlMs"], 600_000);
    assert_eq!(task["pollIntervalMs"], 200);
    assert!(task.get("requestState").is_none());
    let task_id = task["taskId"].as_str().unwrap().to_owned();

    let get = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tasks/get",
        "params": { "taskId": task_id, "_meta": modern_meta(with_tasks.clone()) },
    });
    let mut parked = fixture.call(&get).await;
    for _ in 0..100 {
        if parked["result"]["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        parked = fixture.call(&get).await;
    }
    assert_eq!(parked["result"]["status"], "input_required");
    assert_eq!(
        parked["result"]["inputRequests"]["confirm"]["params"]["message"],
        "Delete a.txt?"
    );

    let ack = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 4, "method": "tasks/update",
            "params": {
                "taskId": task_id,
                "inputResponses": { "confirm": { "action": "accept", "content": { "confirm": true } } },
                "_meta": modern_meta(with_tasks.clone()),
            },
        }))
        .await;
    assert_eq!(
        ack["result"],
        json!({ "resultType": "complete", "_meta": server_info_meta() })
    );
    let mut done = fixture.call(&get).await;
    for _ in 0..100 {
        if done["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        done = fixture.call(&get).await;
    }
    assert_eq!(done["result"]["status"], "completed");
    assert_eq!(
        done["result"]["result"],
        json!({ "content": [{ "type": "text", "text": "Deleted a.txt (pretend)" }], "resultType": "complete" })
    );

    let unknown = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 5, "method": "tasks/get",
            "params": { "taskId": "no-such-task", "_meta": modern_meta(with_tasks) },
        }))
        .await;
    assert_eq!(unknown["error"]["code"], -32602);
    let ungated = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": 6, "method": "tasks/get",
            "params": { "taskId": task_id, "_meta": modern_meta(json!({})) },
        }))
        .await;
    assert_eq!(ungated["error"]["code"], -32021);
    fixture.finish().await;
}

#[tokio::test]
async fn a_listen_stream_acknowledges_then_forwards_only_what_it_asked_for() {
    let mut fixture = StdioFixture::start();
    let ack = fixture
        .call(&json!({
            "jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
            "params": { "notifications": { "toolsListChanged": true }, "_meta": modern_meta(json!({})) },
        }))
        .await;
    assert_eq!(
        ack,
        json!({
            "jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": { "notifications": { "toolsListChanged": true }, "_meta": { "io.modelcontextprotocol/subscriptionId": "sub-1" } },
        })
    );
    // A prompt change is not forwarded; the tool change is, tagged with the subscription id.
    for (id, tool) in [
        (2, "test_trigger_prompt_change"),
        (3, "test_trigger_tool_change"),
    ] {
        fixture
            .send(&json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": { "name": tool, "arguments": {}, "_meta": modern_meta(json!({})) },
            }))
            .await;
    }
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(fixture.recv().await);
    }
    let notifications: Vec<&Value> = got.iter().filter(|m| m.get("method").is_some()).collect();
    assert_eq!(
        notifications,
        vec![&json!({
            "jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": { "_meta": { "io.modelcontextprotocol/subscriptionId": "sub-1" } },
        })]
    );
    let mut answered: Vec<i64> = got.iter().filter_map(|m| m["id"].as_i64()).collect();
    answered.sort_unstable();
    assert_eq!(answered, vec![2, 3]);

    // The tool list now has the dynamic tool at its end.
    let list = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": { "_meta": modern_meta(json!({})) } }))
        .await;
    assert_eq!(
        list["result"]["tools"].as_array().unwrap().last().unwrap()["name"],
        "test_dynamic_tool"
    );

    // Cancelling the listen request ends it without a response.
    fixture
        .send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "sub-1" } }))
        .await;
    let (status, rest) = fixture.finish().await;
    assert!(status.success());
    assert_eq!(rest, Vec::<Value>::new());
}

#[tokio::test]
async fn malformed_lines_get_errors_and_the_connection_goes_on() {
    let mut fixture = StdioFixture::start();
    fixture.send(&json!([1, 2])).await;
    let batch = fixture.recv().await;
    assert_eq!(batch["id"], Value::Null);
    assert_eq!(batch["error"]["code"], -32600);
    let after = fixture
        .call(&json!({ "jsonrpc": "2.0", "id": 9, "method": "no/such/method" }))
        .await;
    assert_eq!(after["id"], 9);
    assert_eq!(after["error"]["code"], -32601);
    fixture.finish().await;
}
