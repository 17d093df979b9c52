//! Why: server-everything (npm, the reference server of the TypeScript SDK v1) is the one real peer
//! that offers every legacy-era feature over all three transports, so it is where Manifold's client
//! side must prove, per transport, that progress, cancellation, and server->client elicitation and
//! sampling work end to end, not only calls and lists.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod peers_kit;

use manifold_upstream::paginate::ListKind;
use manifold_upstream::{EraChoice, HttpTransportChoice, Target, UpstreamError};
use manifold_wire::{Era, ErrorCode, Revision};
use serde_json::{Value, json};

use peers_kit::*;

/// The transports server-everything offers.
#[derive(Debug, Clone, Copy)]
enum Via {
    Stdio,
    StreamableHttp,
    Sse,
}

/// Starts server-everything reachable over `via`; the HTTP peer (if any) dies when dropped.
async fn reach(via: Via) -> (Option<HttpPeer>, Target) {
    match via {
        Via::Stdio => (None, everything_stdio()),
        Via::StreamableHttp => {
            let peer = everything_http("streamableHttp").await;
            let target = http_target(peer.url("/mcp"), HttpTransportChoice::StreamableHttp);
            (Some(peer), target)
        }
        Via::Sse => {
            let peer = everything_http("sse").await;
            let target = http_target(peer.url("/sse"), HttpTransportChoice::Sse);
            (Some(peer), target)
        }
    }
}

async fn close(via: Via, conn: manifold_upstream::Connection) {
    match via {
        Via::Stdio => close_stdio_and_check_gone(conn).await,
        Via::StreamableHttp | Via::Sse => close_http(conn).await,
    }
}

fn long_operation_params(duration: f64, steps: u32, token: &str) -> String {
    json!({
        "name": "trigger-long-running-operation",
        "arguments": { "duration": duration, "steps": steps },
        "_meta": { "progressToken": token }
    })
    .to_string()
}

/// Generates one test per transport for a scenario `async fn scenario(via: Via)`.
macro_rules! over_every_transport {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test]
            async fn stdio() {
                super::$scenario(super::Via::Stdio).await;
            }
            #[tokio::test]
            async fn streamable_http() {
                super::$scenario(super::Via::StreamableHttp).await;
            }
            #[tokio::test]
            async fn legacy_sse() {
                super::$scenario(super::Via::Sse).await;
            }
        }
    };
}

async fn serves_every_primitive(via: Via) {
    let (_peer, target) = reach(via).await;
    let (conn, info) = open("everything", &target, EraChoice::Auto).await;

    assert_eq!(info.era, Era::Legacy);
    assert_eq!(info.revision, Revision::V2025_11_25);
    assert_eq!(info.server_name.as_deref(), Some("mcp-servers/everything"));
    let caps: Value = serde_json::from_str(&info.capabilities).unwrap();
    for cap in ["tools", "resources", "prompts"] {
        assert!(caps.get(cap).is_some(), "no {cap} in {caps}");
    }
    let expected_transport = match via {
        Via::Stdio => "stdio ",
        Via::StreamableHttp => "Streamable HTTP ",
        Via::Sse => "HTTP+SSE ",
    };
    assert!(
        conn.describe().starts_with(expected_transport),
        "{}",
        conn.describe()
    );

    let tools = names(&conn, ListKind::Tools).await;
    for tool in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(
            tools.iter().any(|t| t == tool),
            "{tool} missing from {tools:?}"
        );
    }
    // Declared capabilities reach the server: none declared, so no capability-gated tools.
    assert!(
        !tools.iter().any(|t| t == "trigger-elicitation-request"),
        "{tools:?}"
    );

    let echoed = call_tool(&conn, "echo", json!({ "message": "héllo from manifold" })).await;
    assert_eq!(text_of(&echoed), "Echo: héllo from manifold");
    let sum = call_tool(&conn, "get-sum", json!({ "a": 2, "b": 3 })).await;
    assert_eq!(text_of(&sum), "The sum of 2 and 3 is 5.");

    let uri = "demo://resource/static/document/architecture.md";
    assert!(
        names(&conn, ListKind::Resources)
            .await
            .iter()
            .any(|r| r == uri)
    );
    assert_eq!(
        read_text(&conn, uri).await,
        everything_document("architecture.md")
    );

    assert!(
        names(&conn, ListKind::Prompts)
            .await
            .iter()
            .any(|p| p == "args-prompt")
    );
    assert_eq!(
        prompt_lines(&conn, "args-prompt", json!({ "city": "Paris" })).await,
        vec!["user: What's weather in Paris?".to_owned()]
    );

    close(via, conn).await;
}
over_every_transport!(serves_every_primitive);

async fn reports_progress_in_order_before_the_response(via: Via) {
    let (_peer, target) = reach(via).await;
    let (conn, _) = open("everything", &target, EraChoice::Auto).await;

    let call = conn
        .request(
            "tools/call",
            Some(&long_operation_params(0.6, 3, "caller-token-7")),
            call_options(),
        )
        .await
        .unwrap();
    let (notes, response) = drain(call).await;
    let result = result_of("tools/call", &response.unwrap());
    assert_eq!(
        text_of(&result),
        "Long running operation completed. Duration: 0.6 seconds, Steps: 3."
    );
    let progress: Vec<Value> = notes.iter().map(progress_params).collect();
    assert_eq!(progress.len(), 3, "{progress:?}");
    for (i, p) in progress.iter().enumerate() {
        // The caller's own token comes back, not the one the connection put on the wire.
        assert_eq!(p["progressToken"], "caller-token-7", "{p}");
        assert_eq!(p["progress"], json!(i + 1), "{p}");
        assert_eq!(p["total"], json!(3), "{p}");
    }

    close(via, conn).await;
}
over_every_transport!(reports_progress_in_order_before_the_response);

async fn answers_elicitation_through_the_handler(via: Via) {
    let (_peer, target) = reach(via).await;
    let (conn, _, handler) = open_answering("everything", &target, EraChoice::Auto).await;

    let tools = names(&conn, ListKind::Tools).await;
    assert!(
        tools.iter().any(|t| t == "trigger-elicitation-request"),
        "declaring elicitation should unlock the tool: {tools:?}"
    );
    let params = json!({ "name": "trigger-elicitation-request", "arguments": {} }).to_string();
    let call = conn
        .request("tools/call", Some(&params), call_options())
        .await
        .unwrap();
    let call_id = call.id().clone();
    let result = result_of("tools/call", &call.response().await.unwrap());
    let text = text_of(&result);
    assert!(
        text.contains("User provided the requested information!"),
        "{text}"
    );
    assert!(text.contains(&format!("- Name: {ELICITED_NAME}")), "{text}");
    assert!(text.contains("- Agreed to terms: true"), "{text}");

    let asked = handler.seen_params("elicitation/create");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0]["message"],
        "Please provide inputs for the following fields:"
    );
    assert_eq!(asked[0]["requestedSchema"]["required"], json!(["name"]));
    let seen = handler.seen();
    assert_eq!(
        seen[0].related.as_ref(),
        Some(&call_id),
        "the elicitation should be tied to the call that caused it"
    );

    close(via, conn).await;
}
over_every_transport!(answers_elicitation_through_the_handler);

async fn answers_sampling_through_the_handler(via: Via) {
    let (_peer, target) = reach(via).await;
    let (conn, _, handler) = open_answering("everything", &target, EraChoice::Auto).await;

    let result = call_tool(
        &conn,
        "trigger-sampling-request",
        json!({ "prompt": "What is 6 times 7?", "maxTokens": 50 }),
    )
    .await;
    let text = text_of(&result);
    assert!(text.starts_with("LLM sampling result:"), "{text}");
    assert!(text.contains(SAMPLED_TEXT), "{text}");
    assert!(text.contains(SAMPLING_MODEL), "{text}");

    let asked = handler.seen_params("sampling/createMessage");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0]["messages"][0]["content"]["text"],
        "Resource trigger-sampling-request context: What is 6 times 7?"
    );
    assert_eq!(asked[0]["maxTokens"], json!(50));

    close(via, conn).await;
}
over_every_transport!(answers_sampling_through_the_handler);

async fn cancels_a_long_call_and_keeps_serving(via: Via) {
    let (_peer, target) = reach(via).await;
    let (conn, _) = open("everything", &target, EraChoice::Auto).await;

    let mut doomed = conn
        .request(
            "tools/call",
            Some(&long_operation_params(1.5, 3, "doomed")),
            call_options(),
        )
        .await
        .unwrap();
    // The first progress proves the operation runs before it is cancelled.
    let first = next_progress(&mut doomed).await;
    assert_eq!(first["progressToken"], "doomed");
    assert_eq!(first["progress"], json!(1));

    let error = doomed.cancel("the interop test cancels it");
    assert!(
        matches!(&error, UpstreamError::Cancelled { method, reason, .. }
            if method == "tools/call" && reason == "the interop test cancels it"),
        "{error:?}"
    );
    assert_eq!(error.code(), ErrorCode::RequestCancelled);
    assert_eq!(conn.in_flight(), 0);

    // The same operation again, started later, ends later than the cancelled one would have:
    // once it is done, an answer to the cancelled request would already have arrived.
    let call = conn
        .request(
            "tools/call",
            Some(&long_operation_params(1.5, 3, "second")),
            call_options(),
        )
        .await
        .unwrap();
    let (notes, response) = drain(call).await;
    let result = result_of("tools/call", &response.unwrap());
    assert_eq!(
        text_of(&result),
        "Long running operation completed. Duration: 1.5 seconds, Steps: 3."
    );
    let progress: Vec<Value> = notes.iter().map(progress_params).collect();
    assert_eq!(
        progress
            .iter()
            .map(|p| p["progress"].clone())
            .collect::<Vec<_>>(),
        vec![json!(1), json!(2), json!(3)],
        "the cancelled call's progress must not leak into the new call: {progress:?}"
    );
    assert!(progress.iter().all(|p| p["progressToken"] == "second"));
    assert_eq!(
        conn.stats()
            .stray_responses
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "the server answered the cancelled request"
    );

    close(via, conn).await;
}
over_every_transport!(cancels_a_long_call_and_keeps_serving);
