//! What each tool does when called, in both eras.
//!
//! The interactive tools (`ask`, `sample`, `roots`) are where the eras differ most: legacy sends a
//! real server->client request and waits; modern answers `input_required` (MRTR) and finishes
//! when the client retries with `inputResponses` and the `requestState` it was given.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::behaviour::Behaviour;
use crate::canonical_json;
use crate::catalog::{self, META_CLIENT_CAPABILITIES, META_LOG_LEVEL};
use crate::engine::{self, Era, Outgoing, Reply, RequestContext};
use crate::jsonrpc::{self, RpcError, code};
use crate::payloads;

/// Serves `tools/call`.
pub async fn call(ctx: &RequestContext, era: Era, params: Option<&Value>) -> Reply {
    let settings = ctx.settings();
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        return invalid("Invalid params: tools/call needs params.name (a string)");
    };
    let empty = Map::new();
    let args = match params.and_then(|p| p.get("arguments")) {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(args)) => args,
        Some(_) => return invalid("Invalid params: tools/call arguments must be an object"),
    };
    match settings.behaviour {
        Behaviour::DepthBomb => return Reply::Raw(payloads::depth_bomb_result()),
        Behaviour::InvalidUtf8 => return Reply::Raw(payloads::invalid_utf8_result()),
        Behaviour::GiantSseEvent => return Reply::Raw(payloads::giant_text_result()),
        Behaviour::ManyTools
            if catalog::generated_tool_index(name, settings.count_or(100_000)).is_some() =>
        {
            return text_result(name, false);
        }
        _ => {}
    }
    match name {
        "echo" => echo(ctx, era, params, args),
        "add" => add(args),
        "fail" => text_result("this tool always fails", true),
        "slow" => slow(ctx, params, args).await,
        "ask" | "sample" | "roots" => {
            let Some(kind) = Interaction::for_tool(name) else {
                return invalid(format!("Invalid params: unknown tool {name}"));
            };
            match era {
                Era::Legacy => interact_legacy(ctx, kind, args).await,
                Era::Modern => interact_modern(ctx, kind, params, args),
            }
        }
        "echo_raw" => Reply::Raw(payloads::ECHO_RAW_RESULT.to_vec()),
        "seen_headers" => seen_headers(ctx),
        crate::cancel_journal::TOOL if crate::cancel_journal::enabled(settings) => {
            crate::cancel_journal::report()
        }
        other => crate::definition_attacks::call(settings, other)
            .unwrap_or_else(|| invalid(format!("Invalid params: unknown tool {other}"))),
    }
}

fn invalid(message: impl Into<String>) -> Reply {
    Reply::error(code::INVALID_PARAMS, message)
}

/// `{"content":[{"type":"text","text":..}],"isError":..}`.
pub fn text_result(text: &str, is_error: bool) -> Reply {
    engine::into_reply(json!({
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
    }))
}

fn echo(
    ctx: &RequestContext,
    era: Era,
    params: Option<&Value>,
    args: &Map<String, Value>,
) -> Reply {
    let Some(message) = args.get("message").and_then(Value::as_str) else {
        return invalid("Invalid params: echo needs arguments.message (a string)");
    };
    if message == "log" {
        let allowed = match era {
            Era::Legacy => ctx.connection.legacy_log_allows("info"),
            Era::Modern => params
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get(META_LOG_LEVEL))
                .and_then(Value::as_str)
                .and_then(catalog::log_level_rank)
                .zip(catalog::log_level_rank("info"))
                .is_some_and(|(wanted, info)| info >= wanted),
        };
        if allowed {
            ctx.push(Outgoing::notification(jsonrpc::notification_message(
                "notifications/message",
                &json!({"level": "info", "logger": catalog::SERVER_NAME, "data": "log"}),
            )));
        }
    }
    text_result(message, false)
}

fn add(args: &Map<String, Value>) -> Reply {
    let (Some(a), Some(b)) = (args.get("a"), args.get("b")) else {
        return invalid("Invalid params: add needs arguments a and b (numbers)");
    };
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => a.checked_add(b).map(Value::from),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => serde_json::Number::from_f64(a + b).map(Value::Number),
            _ => return invalid("Invalid params: add needs arguments a and b (numbers)"),
        },
    };
    let Some(sum) = sum else {
        return invalid("Invalid params: the sum of a and b is not representable");
    };
    engine::into_reply(json!({
        "content": [{"type": "text", "text": sum.to_string()}],
        "structuredContent": {"sum": sum},
        "isError": false,
    }))
}

/// Longest `slow` run accepted, so a typo cannot park a test for a day.
const SLOW_MAX_SECONDS: f64 = 3600.0;
const SLOW_MAX_STEPS: u64 = 10_000;

async fn slow(ctx: &RequestContext, params: Option<&Value>, args: &Map<String, Value>) -> Reply {
    let seconds = match args.get("seconds") {
        None | Some(Value::Null) => 1.0,
        Some(value) => match value.as_f64() {
            Some(s) if (0.0..=SLOW_MAX_SECONDS).contains(&s) => s,
            _ => return invalid("Invalid params: slow needs seconds between 0 and 3600"),
        },
    };
    let steps = match args.get("steps") {
        None | Some(Value::Null) => 5,
        Some(value) => match value.as_u64() {
            Some(n) if (1..=SLOW_MAX_STEPS).contains(&n) => n,
            _ => return invalid("Invalid params: slow needs steps between 1 and 10000"),
        },
    };
    let Ok(step) = Duration::try_from_secs_f64(seconds / steps as f64) else {
        return invalid("Invalid params: slow needs seconds between 0 and 3600");
    };
    let token = engine::progress_token(params);
    let defer_progress = ctx.settings().behaviour == Behaviour::ProgressAfterResponse;
    let journaled = crate::cancel_journal::start(ctx.settings(), args);
    for n in 1..=steps {
        tokio::select! {
            () = tokio::time::sleep(step) => {}
            () = ctx.cancel.cancelled() => {
                // A test's only way to see that the cancellation landed.
                eprintln!("manifold-test-peer: slow cancelled before step {n} of {steps}");
                journaled.cancelled();
                return Reply::Dropped;
            }
        }
        if let (Some(token), false) = (&token, defer_progress) {
            ctx.push(engine::progress_notification(
                token,
                n,
                steps,
                &format!("step {n} of {steps}"),
            ));
        }
    }
    if ctx.cancel.is_cancelled() {
        journaled.cancelled();
        return Reply::Dropped;
    }
    let done = journaled.finished(format!("slow done after {steps} steps"));
    text_result(&done, false)
}

/// The three tools that need something from the client.
#[derive(Debug, Clone, Copy)]
enum Interaction {
    Ask,
    Sample,
    Roots,
}

impl Interaction {
    fn for_tool(name: &str) -> Option<Self> {
        match name {
            "ask" => Some(Self::Ask),
            "sample" => Some(Self::Sample),
            "roots" => Some(Self::Roots),
            _ => None,
        }
    }

    fn tool(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Sample => "sample",
            Self::Roots => "roots",
        }
    }

    fn capability(self) -> &'static str {
        match self {
            Self::Ask => "elicitation",
            Self::Sample => "sampling",
            Self::Roots => "roots",
        }
    }

    fn method(self) -> &'static str {
        match self {
            Self::Ask => "elicitation/create",
            Self::Sample => "sampling/createMessage",
            Self::Roots => "roots/list",
        }
    }

    /// The request's params. `with_mode` adds the `mode` member elicitation gained in 2025-11-25.
    fn params(self, args: &Map<String, Value>, with_mode: bool) -> Value {
        match self {
            Self::Ask => {
                let question = args
                    .get("question")
                    .and_then(Value::as_str)
                    .unwrap_or("What is your answer?");
                let mut params = json!({
                    "message": question,
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"]
                    }
                });
                if with_mode && let Value::Object(map) = &mut params {
                    map.insert("mode".to_owned(), Value::from("form"));
                }
                params
            }
            Self::Sample => {
                let prompt = args
                    .get("prompt")
                    .and_then(Value::as_str)
                    .unwrap_or("Say something.");
                json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100
                })
            }
            Self::Roots => json!({}),
        }
    }

    /// Turns the client's result into the tool's text.
    fn answer_text(self, result: &Value) -> String {
        match self {
            Self::Ask => match result.get("action").and_then(Value::as_str) {
                Some("accept") => result
                    .get("content")
                    .map_or_else(|| "{}".to_owned(), canonical_json::to_string),
                Some(other) => other.to_owned(),
                None => canonical_json::to_string(result),
            },
            Self::Sample => {
                let content = result.get("content");
                let text = match content {
                    Some(Value::Array(items)) => items
                        .iter()
                        .find_map(|item| item.get("text").and_then(Value::as_str)),
                    Some(item) => item.get("text").and_then(Value::as_str),
                    None => None,
                };
                match (text, content) {
                    (Some(text), _) => text.to_owned(),
                    (None, Some(content)) => canonical_json::to_string(content),
                    (None, None) => canonical_json::to_string(result),
                }
            }
            Self::Roots => result
                .get("roots")
                .and_then(Value::as_array)
                .map(|roots| {
                    roots
                        .iter()
                        .filter_map(|root| root.get("uri").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
        }
    }
}

async fn interact_legacy(
    ctx: &RequestContext,
    kind: Interaction,
    args: &Map<String, Value>,
) -> Reply {
    let capability = kind.capability();
    if ctx
        .connection
        .client_capabilities()
        .get(capability)
        .is_none()
    {
        return text_result(
            &format!("the client did not declare the {capability} capability"),
            true,
        );
    }
    let with_mode = ctx.connection.negotiated_version().as_str() >= "2025-11-25";
    let params = kind.params(args, with_mode);
    let Some(response) = ctx
        .connection
        .ask_client(&ctx.sink, &ctx.cancel, kind.method(), &params)
        .await
    else {
        return Reply::Dropped;
    };
    match (response.get("result"), response.get("error")) {
        (Some(result), _) => text_result(&kind.answer_text(result), false),
        (None, error) => text_result(
            &format!(
                "the client answered {} with an error: {}",
                kind.method(),
                error.map_or_else(|| "(none)".to_owned(), canonical_json::to_string)
            ),
            true,
        ),
    }
}

/// Key of the single entry in `inputRequests` / `inputResponses`.
const INPUT_KEY: &str = "answer";

fn interact_modern(
    ctx: &RequestContext,
    kind: Interaction,
    params: Option<&Value>,
    args: &Map<String, Value>,
) -> Reply {
    let state_prefix = format!("mtp1:{}:", kind.tool());
    if let Some(responses) = params.and_then(|p| p.get("inputResponses")) {
        let state = params
            .and_then(|p| p.get("requestState"))
            .and_then(Value::as_str);
        if !state.is_some_and(|s| s.starts_with(&state_prefix)) {
            return invalid(format!(
                "Invalid params: requestState {} was not minted by this server for {}",
                state.map_or_else(|| "(missing)".to_owned(), |s| format!("{s:?}")),
                kind.tool()
            ));
        }
        if let Some(answer) = responses.get(INPUT_KEY) {
            return text_result(&kind.answer_text(answer), false);
        }
    }
    let capability = kind.capability();
    let declared = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get(capability))
        .is_some();
    if !declared {
        return Reply::Error(
            RpcError::new(
                code::MISSING_REQUIRED_CLIENT_CAPABILITY,
                format!("Missing required client capability: {capability}"),
            )
            .with_data(json!({"requiredCapabilities": {capability: {}}}))
            .with_status(400),
        );
    }
    let state = ctx.connection.peer.mint_request_state(kind.tool());
    engine::into_reply(json!({
        "resultType": "input_required",
        "inputRequests": {
            INPUT_KEY: {"method": kind.method(), "params": kind.params(args, true)}
        },
        "requestState": state,
    }))
}

fn seen_headers(ctx: &RequestContext) -> Reply {
    let Some(headers) = &ctx.http_headers else {
        return text_result(
            "seen_headers works only over HTTP; this request did not come over HTTP",
            true,
        );
    };
    let mut map = Map::new();
    for (name, value) in headers {
        match map.get_mut(name) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(value);
            }
            _ => {
                map.insert(name.clone(), Value::from(value.clone()));
            }
        }
    }
    let structured = json!({"headers": map});
    engine::into_reply(json!({
        "content": [{"type": "text", "text": canonical_json::to_string(&structured)}],
        "structuredContent": structured,
        "isError": false,
    }))
}
