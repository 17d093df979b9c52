//! Serving one request, whatever the transport: method dispatch for both eras, and the result
//! decoration each era needs.
//!
//! Transports decode a message, decide its era (legacy session state, or admitted modern `_meta`)
//! and hand it here with an [`Outbox`]; everything the request produces leaves through that outbox,
//! the response last. Legacy results are the plain revision-2025 shapes; modern results also carry
//! `resultType`, `_meta["io.modelcontextprotocol/serverInfo"]`, and on cacheable results `ttlMs`
//! and `cacheScope`.

use std::sync::Arc;

use manifold_wire::meta::{self, method};
use manifold_wire::revision::legacy_server_answer;
use manifold_wire::{ErrorCode, Id, Message, Revision};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::catalog::tools::{TaskSupport, ToolOutcome};
use crate::catalog::{Catalog, completions, prompts, resources, tools};
use crate::error::{FixtureError, RpcError};
use crate::interaction::{InputSource, Interaction, Interrupt};
use crate::log_level::LogLevel;
use crate::modern_validation::{MODERN_REVISIONS, ModernMeta};
use crate::mrtr::Replay;
use crate::outbox::{Outbox, Outgoing};
use crate::sealing::Sealer;
use crate::session::LegacyState;
use crate::subscriptions::{self, Hub};
use crate::tasks::{self, TaskStore};

pub const SERVER_NAME: &str = "manifold-conformance-fixture";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

const INSTRUCTIONS: &str = "Manifold's conformance fixture: every tool, resource, template and prompt \
    the official MCP conformance suite's server scenarios expect, in the legacy (initialize) and \
    modern (2026-07-28) eras.";

/// How long (ms) clients may cache list results; a list-changed notification invalidates sooner.
pub const LIST_TTL_MS: u64 = 30_000;
/// How long (ms) clients may cache `server/discover` and static resource contents.
pub const STATIC_TTL_MS: u64 = 300_000;

/// The process-wide state every request may touch.
pub struct Fixture {
    pub catalog: Catalog,
    pub sealer: Sealer,
    pub tasks: TaskStore,
    pub hub: Hub,
}

impl Fixture {
    pub fn new() -> Result<Arc<Fixture>, FixtureError> {
        Ok(Arc::new(Fixture {
            catalog: Catalog::default(),
            sealer: Sealer::new()?,
            tasks: TaskStore::default(),
            hub: Hub::default(),
        }))
    }
}

/// The era a request is served in, with what that era knows about the client.
#[derive(Debug, Clone)]
pub enum Era {
    Legacy(Arc<LegacyState>),
    Modern(ModernMeta),
}

/// A decoded request.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: Id,
    pub method: String,
    pub params: Value,
}

impl Call {
    /// Reads a request message; `params` must be an object when present.
    pub fn from_message(message: &Message) -> Result<Call, RpcError> {
        let id = message
            .id()
            .cloned()
            .ok_or_else(|| RpcError::new(ErrorCode::InvalidRequest, "a request needs an id"))?;
        let method = message.method().unwrap_or_default().to_owned();
        let params = match message.params() {
            None => Value::Object(Map::new()),
            Some(raw) => match serde_json::from_str::<Value>(raw) {
                Ok(v @ Value::Object(_)) => v,
                _ => {
                    return Err(RpcError::invalid_params(format!(
                        "the params of {method} must be an object"
                    )));
                }
            },
        };
        Ok(Call { id, method, params })
    }
}

/// Why serving stopped without a result.
#[derive(Debug)]
enum Stop {
    Error(RpcError),
    Cancelled,
}

impl From<RpcError> for Stop {
    fn from(e: RpcError) -> Self {
        Stop::Error(e)
    }
}

impl From<Interrupt> for Stop {
    fn from(i: Interrupt) -> Self {
        match i {
            Interrupt::Failed(e) => Stop::Error(e),
            Interrupt::Cancelled => Stop::Cancelled,
            Interrupt::NeedInput(_) => Stop::Error(RpcError::internal(
                "a primitive asked for input where none can be given",
            )),
        }
    }
}

/// Serves `call`: its notifications and then its response go to `out`. A cancelled request
/// gets no response.
pub async fn serve(
    fixture: Arc<Fixture>,
    call: Call,
    era: Era,
    out: Outbox,
    cancel: CancellationToken,
) {
    let outcome = match &era {
        Era::Legacy(state) => legacy(&fixture, &call, state, &out, &cancel).await,
        Era::Modern(meta) => modern(&fixture, &call, meta, &out, &cancel).await,
    };
    let response = match outcome {
        Ok(result) => Message::result(&call.id, &result.to_string()),
        Err(Stop::Error(e)) => e.to_response(Some(call.id.clone())),
        Err(Stop::Cancelled) => return,
    };
    out.send(Outgoing::Final(response)).await;
}

/// Legacy `initialize`: the connection state and the `InitializeResult`.
pub fn initialize(params: &Value) -> (Arc<LegacyState>, Value) {
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let supported: Vec<Revision> = Revision::legacy().collect();
    let revision = legacy_server_answer(requested, &supported);
    let capabilities = params.get("capabilities").cloned().unwrap_or(json!({}));
    let state = Arc::new(LegacyState::new(revision, capabilities));
    let result = json!({
        "protocolVersion": revision.as_str(),
        "capabilities": {
            "tools": { "listChanged": true },
            "prompts": { "listChanged": true },
            "resources": { "subscribe": true },
            "logging": {},
            "completions": {},
        },
        "serverInfo": { "name": SERVER_NAME, "version": SERVER_VERSION },
        "instructions": INSTRUCTIONS,
    });
    (state, result)
}

async fn legacy(
    fixture: &Arc<Fixture>,
    call: &Call,
    state: &Arc<LegacyState>,
    out: &Outbox,
    cancel: &CancellationToken,
) -> Result<Value, Stop> {
    let params = &call.params;
    let catalog = &fixture.catalog;
    match call.method.as_str() {
        method::INITIALIZE => Err(RpcError::new(
            ErrorCode::InvalidRequest,
            "this connection is already initialized",
        )
        .into()),
        method::PING => Ok(json!({})),
        method::TOOLS_LIST => Ok(tools_list(catalog)),
        method::TOOLS_CALL => {
            let cx = Interaction {
                fixture: fixture.clone(),
                out: out.clone(),
                inputs: InputSource::Client(state.client_requests.clone()),
                client_capabilities: state.client_capabilities.clone(),
                log: state.log_policy(),
                progress_token: progress_token(params),
                cancel: cancel.clone(),
            };
            call_tool_inline(params, cx, catalog).await
        }
        method::RESOURCES_LIST => Ok(json!({ "resources": resources::listed() })),
        method::TEMPLATES_LIST => Ok(json!({ "resourceTemplates": resources::templates() })),
        method::RESOURCES_READ => {
            let uri = required_str(params, "uri", method::RESOURCES_READ)?;
            match resources::read(catalog, uri) {
                Some(contents) => Ok(json!({ "contents": contents })),
                None => Err(RpcError::new(
                    ErrorCode::ResourceNotFound,
                    format!("Resource not found: {uri}"),
                )
                .with_data(json!({ "uri": uri }))
                .into()),
            }
        }
        "resources/subscribe" => {
            let uri = required_str(params, "uri", "resources/subscribe")?;
            state.subscribe(uri)?;
            Ok(json!({}))
        }
        "resources/unsubscribe" => {
            let uri = required_str(params, "uri", "resources/unsubscribe")?;
            state.unsubscribe(uri);
            Ok(json!({}))
        }
        method::PROMPTS_LIST => Ok(prompts_list(catalog)),
        method::PROMPTS_GET => {
            let cx = Interaction {
                fixture: fixture.clone(),
                out: out.clone(),
                inputs: InputSource::Client(state.client_requests.clone()),
                client_capabilities: state.client_capabilities.clone(),
                log: state.log_policy(),
                progress_token: progress_token(params),
                cancel: cancel.clone(),
            };
            get_prompt(params, cx, catalog).await.map_err(Stop::from)
        }
        "completion/complete" => Ok(completions::complete(params)),
        "logging/setLevel" => {
            let level = params
                .get("level")
                .and_then(Value::as_str)
                .and_then(LogLevel::parse)
                .ok_or_else(|| {
                    RpcError::invalid_params(
                        "logging/setLevel needs level: one of debug, info, notice, warning, error, critical, alert, emergency",
                    )
                })?;
            state.set_log_level(level);
            Ok(json!({}))
        }
        other => Err(RpcError::method_not_found(other).into()),
    }
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
async fn modern(
    fixture: &Arc<Fixture>,
    call: &Call,
    meta: &ModernMeta,
    out: &Outbox,
    cancel: &CancellationToken,
) -> Result<Value, Stop> {
    let params = &call.params;
    let catalog = &fixture.catalog;
    let interaction = |inputs: InputSource| Interaction {
        fixture: fixture.clone(),
        out: out.clone(),
        inputs,
        client_capabilities: meta.client_capabilities.clone(),
        log: meta.log,
        progress_token: meta.progress_token.clone(),
        cancel: cancel.clone(),
    };
    let (result, cache) = match call.method.as_str() {
        method::DISCOVER => {
            let supported: Vec<&str> = MODERN_REVISIONS.iter().map(|r| r.as_str()).collect();
            let result = json!({
                "supportedVersions": supported,
                "capabilities": {
                    "tools": { "listChanged": true },
                    "prompts": { "listChanged": true },
                    "resources": { "subscribe": true },
                    "logging": {},
                    "completions": {},
                    "extensions": { tasks::EXTENSION: {} },
                },
                "instructions": INSTRUCTIONS,
            });
            (result, Some((STATIC_TTL_MS, "public")))
        }
        method::TOOLS_LIST => (tools_list(catalog), Some((LIST_TTL_MS, "public"))),
        method::TOOLS_CALL => (
            call_tool_modern(fixture, params, meta, interaction).await?,
            None,
        ),
        method::RESOURCES_LIST => (
            json!({ "resources": resources::listed() }),
            Some((LIST_TTL_MS, "public")),
        ),
        method::TEMPLATES_LIST => (
            json!({ "resourceTemplates": resources::templates() }),
            Some((LIST_TTL_MS, "public")),
        ),
        method::RESOURCES_READ => {
            let uri = required_str(params, "uri", method::RESOURCES_READ)?;
            let contents = resources::read(catalog, uri).ok_or_else(|| {
                RpcError::invalid_params(format!("Resource not found: {uri}"))
                    .with_data(json!({ "uri": uri }))
            })?;
            let cache = if resources::is_static(uri) {
                (STATIC_TTL_MS, "public")
            } else {
                (0, "public")
            };
            (json!({ "contents": contents }), Some(cache))
        }
        method::PROMPTS_LIST => (prompts_list(catalog), Some((LIST_TTL_MS, "public"))),
        method::PROMPTS_GET => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let binding = format!("{}:{name}", method::PROMPTS_GET);
            let replay = Replay::from_params(&fixture.sealer, &binding, params)?;
            let mut cx = interaction(InputSource::Replay(replay));
            let result = match get_prompt_with(params, &mut cx, catalog).await {
                Err(Interrupt::NeedInput(missing)) => {
                    input_required(fixture, &cx, &binding, &missing)?
                }
                other => other?,
            };
            (result, None)
        }
        "completion/complete" => (completions::complete(params), None),
        method::SUBSCRIPTIONS_LISTEN => {
            let id = subscriptions::listen(&fixture.hub, &call.id, params, out, cancel).await;
            if cancel.is_cancelled() {
                return Err(Stop::Cancelled);
            }
            (
                json!({ "_meta": { subscriptions::SUBSCRIPTION_ID: id } }),
                None,
            )
        }
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            if !negotiated_tasks(&meta.client_capabilities) {
                return Err(tasks_not_negotiated(&call.method).into());
            }
            let task_id = required_str(params, "taskId", &call.method)?;
            let result = match call.method.as_str() {
                "tasks/get" => fixture.tasks.get(task_id)?.detailed(),
                "tasks/update" => {
                    let responses = params
                        .get("inputResponses")
                        .and_then(Value::as_object)
                        .ok_or_else(|| {
                            RpcError::invalid_params(
                                "tasks/update needs inputResponses: an object mapping input keys to responses",
                            )
                        })?;
                    fixture.tasks.update(task_id, responses)?;
                    json!({})
                }
                _ => {
                    fixture.tasks.cancel(task_id)?;
                    json!({})
                }
            };
            (result, None)
        }
        other => return Err(RpcError::method_not_found(other).into()),
    };
    Ok(decorate_modern(result, cache))
}

fn input_required(
    fixture: &Fixture,
    cx: &Interaction,
    binding: &str,
    missing: &[crate::interaction::InputRequest],
) -> Result<Value, Interrupt> {
    match &cx.inputs {
        InputSource::Replay(replay) => Ok(replay.input_required(&fixture.sealer, binding, missing)),
        InputSource::Client(_) | InputSource::Task(_) => Err(Interrupt::Failed(
            RpcError::internal("input was missing where it should have been asked for directly"),
        )),
    }
}

/// Adds what every modern result carries.
fn decorate_modern(mut result: Value, cache: Option<(u64, &str)>) -> Value {
    if let Some(obj) = result.as_object_mut() {
        obj.entry("resultType").or_insert(json!("complete"));
        let meta = obj.entry("_meta").or_insert(json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                meta::SERVER_INFO.to_owned(),
                json!({ "name": SERVER_NAME, "version": SERVER_VERSION }),
            );
        }
        if let Some((ttl, scope)) = cache {
            obj.insert("ttlMs".to_owned(), json!(ttl));
            obj.insert("cacheScope".to_owned(), json!(scope));
        }
    }
    result
}

fn tools_list(catalog: &Catalog) -> Value {
    let tools: Vec<Value> = tools::listed(catalog.dynamic_tool())
        .map(tools::definition)
        .collect();
    json!({ "tools": tools })
}

fn prompts_list(catalog: &Catalog) -> Value {
    let prompts: Vec<Value> = prompts::listed(catalog.dynamic_prompt())
        .map(prompts::definition)
        .collect();
    json!({ "prompts": prompts })
}

fn required_str<'a>(
    params: &'a Value,
    field: &str,
    method_name: &str,
) -> Result<&'a str, RpcError> {
    params.get(field).and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!("{method_name} needs the string param {field:?}"))
    })
}

fn progress_token(params: &Value) -> Option<Value> {
    params
        .get("_meta")
        .and_then(|m| m.get(meta::PROGRESS_TOKEN))
        .cloned()
}

fn negotiated_tasks(client_capabilities: &Value) -> bool {
    client_capabilities
        .get("extensions")
        .and_then(|e| e.get(tasks::EXTENSION))
        .is_some()
}

fn tasks_not_negotiated(what: &str) -> RpcError {
    RpcError::missing_capability(
        json!({ "extensions": { tasks::EXTENSION: {} } }),
        &format!(
            "{what} belongs to the {} extension, which",
            tasks::EXTENSION
        ),
    )
}

fn tool_spec(
    params: &Value,
    catalog: &Catalog,
) -> Result<(&'static tools::ToolSpec, Value), RpcError> {
    let name = required_str(params, "name", method::TOOLS_CALL)?;
    let spec = tools::find(name, catalog.dynamic_tool()).ok_or_else(|| {
        RpcError::invalid_params(format!("Unknown tool: {name}")).with_data(json!({ "name": name }))
    })?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(args @ Value::Object(_)) => args.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "tools/call arguments must be an object",
            ));
        }
    };
    Ok((spec, args))
}

/// Legacy era (and anywhere tasks are not negotiated): the whole call, long work included, runs
/// within the request.
async fn call_tool_inline(
    params: &Value,
    mut cx: Interaction,
    catalog: &Catalog,
) -> Result<Value, Stop> {
    let (spec, args) = tool_spec(params, catalog)?;
    match tools::call(spec, &args, &mut cx).await? {
        ToolOutcome::Done(result) => Ok(result),
        ToolOutcome::Escalate(job) => Ok(tools::run_job(&job, &mut cx).await?),
    }
}

async fn call_tool_modern(
    fixture: &Arc<Fixture>,
    params: &Value,
    meta: &ModernMeta,
    interaction: impl Fn(InputSource) -> Interaction,
) -> Result<Value, Stop> {
    let (spec, args) = tool_spec(params, &fixture.catalog)?;
    let tasks_ok = negotiated_tasks(&meta.client_capabilities);
    if spec.tasks == TaskSupport::Required && !tasks_ok {
        return Err(tasks_not_negotiated(&format!("tool {}", spec.name)).into());
    }
    let binding = format!("{}:{}", method::TOOLS_CALL, spec.name);
    let replay = Replay::from_params(&fixture.sealer, &binding, params)?;
    let mut cx = interaction(InputSource::Replay(replay));
    let outcome = match tools::call(spec, &args, &mut cx).await {
        Ok(ToolOutcome::Done(result)) => Ok(result),
        Ok(ToolOutcome::Escalate(job)) if tasks_ok && spec.tasks != TaskSupport::Forbidden => {
            let task = fixture
                .tasks
                .create(fixture, job, meta.client_capabilities.clone())?;
            Ok(task.created())
        }
        Ok(ToolOutcome::Escalate(job)) => tools::run_job(&job, &mut cx).await,
        Err(e) => Err(e),
    };
    match outcome {
        Err(Interrupt::NeedInput(missing)) => Ok(input_required(fixture, &cx, &binding, &missing)?),
        other => Ok(other?),
    }
}

async fn get_prompt(
    params: &Value,
    mut cx: Interaction,
    catalog: &Catalog,
) -> Result<Value, Interrupt> {
    get_prompt_with(params, &mut cx, catalog).await
}

async fn get_prompt_with(
    params: &Value,
    cx: &mut Interaction,
    catalog: &Catalog,
) -> Result<Value, Interrupt> {
    let name = required_str(params, "name", method::PROMPTS_GET)?;
    let spec = prompts::find(name, catalog.dynamic_prompt()).ok_or_else(|| {
        RpcError::invalid_params(format!("Unknown prompt: {name}"))
            .with_data(json!({ "name": name }))
    })?;
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "prompts/get arguments must be an object of strings",
            )
            .into());
        }
    };
    prompts::get(spec, &args, cx).await
}
