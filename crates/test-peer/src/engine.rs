//! The protocol core every transport shares: what the peer answers, in which era, and which
//! envelope-level misbehaviour it applies.
//!
//! A transport decodes a message and calls [`serve_request`], [`notify`] or
//! [`Connection::deliver`]. Everything the peer then says about that request (notifications,
//! its own requests, the response or responses) is pushed, in order, into the request's [`Sink`];
//! the transport decides how those messages reach the wire (a stdout line, an SSE event, a JSON
//! body) and applies the byte-level misbehaviours that only make sense there.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::behaviour::{Behaviour, EraChoice, Settings};
use crate::canonical_json;
use crate::catalog::{self, META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION};
use crate::jsonrpc::{self, RpcError, code};
use crate::payloads;
use crate::poison_free::lock;
use crate::tools;

/// Where the messages about one request go, in the order they must reach the client.
pub type Sink = mpsc::UnboundedSender<Outgoing>;

/// What kind of message an [`Outgoing`] is; transports treat responses specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutKind {
    Notification,
    Request,
    Response,
}

/// One serialised message on its way to the client.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub kind: OutKind,
    /// For a response: the method of the request it answers.
    pub answers: Option<String>,
    /// For a response over modern Streamable HTTP with a JSON body: the HTTP status to use.
    pub http_status: u16,
    pub bytes: Vec<u8>,
}

impl Outgoing {
    pub fn notification(bytes: Vec<u8>) -> Self {
        Self {
            kind: OutKind::Notification,
            answers: None,
            http_status: 200,
            bytes,
        }
    }

    pub fn request(bytes: Vec<u8>) -> Self {
        Self {
            kind: OutKind::Request,
            answers: None,
            http_status: 200,
            bytes,
        }
    }

    pub fn response(method: &str, http_status: u16, bytes: Vec<u8>) -> Self {
        Self {
            kind: OutKind::Response,
            answers: Some(method.to_owned()),
            http_status,
            bytes,
        }
    }
}

/// The protocol era one request is served in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Legacy,
    Modern,
}

/// Process-wide state: the settings and the counters that must be unique across connections.
#[derive(Debug)]
pub struct Peer {
    pub settings: Settings,
    minted_states: AtomicU64,
}

impl Peer {
    pub fn new(settings: Settings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            minted_states: AtomicU64::new(0),
        })
    }

    /// A fresh MRTR `requestState` for `tool`: `mtp1:<tool>:<n>`.
    pub fn mint_request_state(&self, tool: &str) -> String {
        let n = self.minted_states.fetch_add(1, Ordering::Relaxed) + 1;
        format!("mtp1:{tool}:{n}")
    }
}

/// What a legacy `initialize` established.
#[derive(Debug, Default)]
struct LegacyState {
    initialized: bool,
    protocol_version: String,
    client_capabilities: Value,
    /// Least severe level the client wants; `None` until `logging/setLevel` (everything goes).
    log_level_rank: Option<usize>,
}

/// One client's view of the peer: the stdio process, one legacy HTTP session, one SSE session,
/// or one modern HTTP request.
#[derive(Debug)]
pub struct Connection {
    pub peer: Arc<Peer>,
    legacy: Mutex<LegacyState>,
    in_flight: Mutex<HashMap<String, CancellationToken>>,
    awaiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next_request_id: AtomicU64,
    /// Where messages tied to no request go (stdout, the GET stream, the SSE stream).
    standalone: Sink,
}

impl Connection {
    pub fn new(peer: Arc<Peer>, standalone: Sink) -> Arc<Self> {
        Arc::new(Self {
            peer,
            legacy: Mutex::new(LegacyState::default()),
            in_flight: Mutex::new(HashMap::new()),
            awaiting: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(0),
            standalone,
        })
    }

    /// Registers a request as in flight before it is served, so a cancellation that overtakes
    /// it still finds it.
    pub fn begin(&self, id: &Value) -> CancellationToken {
        let token = CancellationToken::new();
        lock(&self.in_flight).insert(jsonrpc::id_key(id), token.clone());
        token
    }

    pub fn end(&self, id: &Value) {
        lock(&self.in_flight).remove(&jsonrpc::id_key(id));
    }

    /// `notifications/cancelled`: stop the request; it will never be answered.
    pub fn cancel(&self, id: &Value) {
        if let Some(token) = lock(&self.in_flight).get(&jsonrpc::id_key(id)) {
            token.cancel();
        }
    }

    /// The connection is going away: stop everything still running.
    pub fn cancel_all(&self) {
        for token in lock(&self.in_flight).values() {
            token.cancel();
        }
        lock(&self.awaiting).clear();
    }

    /// Hands a client's response to the server->client request waiting for it.
    pub fn deliver(&self, id: &Value, message: Value) -> bool {
        match lock(&self.awaiting).remove(&jsonrpc::id_key(id)) {
            Some(waiter) => waiter.send(message).is_ok(),
            None => false,
        }
    }

    /// Sends a server->client request on `sink` and waits for the client's whole response
    /// message. `None` when the originating request was cancelled first.
    pub async fn ask_client(
        &self,
        sink: &Sink,
        cancel: &CancellationToken,
        method: &str,
        params: &Value,
    ) -> Option<Value> {
        let n = self.next_request_id.fetch_add(1, Ordering::Relaxed) + 1;
        let id = if self.peer.settings.behaviour == Behaviour::StringIds {
            Value::from(format!("srv-{n}"))
        } else {
            Value::from(n)
        };
        let (answer_tx, answer_rx) = oneshot::channel();
        lock(&self.awaiting).insert(jsonrpc::id_key(&id), answer_tx);
        if sink
            .send(Outgoing::request(jsonrpc::request_message(
                &id, method, params,
            )))
            .is_err()
        {
            lock(&self.awaiting).remove(&jsonrpc::id_key(&id));
            return None;
        }
        tokio::select! {
            answer = answer_rx => answer.ok(),
            () = cancel.cancelled() => {
                lock(&self.awaiting).remove(&jsonrpc::id_key(&id));
                None
            }
        }
    }

    pub fn client_capabilities(&self) -> Value {
        lock(&self.legacy).client_capabilities.clone()
    }

    pub fn negotiated_version(&self) -> String {
        lock(&self.legacy).protocol_version.clone()
    }

    /// Whether a legacy `notifications/message` at `level` may be sent.
    pub fn legacy_log_allows(&self, level: &str) -> bool {
        let wanted = lock(&self.legacy).log_level_rank;
        match (wanted, catalog::log_level_rank(level)) {
            (None, _) => true,
            (Some(min), Some(rank)) => rank >= min,
            (Some(_), None) => false,
        }
    }

    pub fn standalone_sink(&self) -> Sink {
        self.standalone.clone()
    }
}

/// Everything a handler needs about the request it serves.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub connection: Arc<Connection>,
    /// Where this request's notifications, server->client requests and response go.
    pub sink: Sink,
    /// Fires on `notifications/cancelled`, on a closed modern HTTP stream, or at shutdown.
    pub cancel: CancellationToken,
    /// The HTTP request headers (lower-case names), when the request came over HTTP.
    pub http_headers: Option<Vec<(String, String)>>,
    /// The era the transport already decided (Streamable HTTP knows it from the session
    /// header); `None` lets the request's shape decide.
    pub era: Option<Era>,
}

impl RequestContext {
    pub fn settings(&self) -> &Settings {
        &self.connection.peer.settings
    }

    pub fn push(&self, message: Outgoing) {
        // A closed sink means the client is gone; there is nobody left to tell.
        let _ = self.sink.send(message);
    }
}

/// How a handler answers.
#[derive(Debug)]
pub enum Reply {
    /// A result object (modern era results gain `resultType` and `_meta` on the way out).
    Result(Map<String, Value>),
    /// A result object as literal bytes, forwarded as is.
    Raw(Vec<u8>),
    Error(RpcError),
    /// Never answer; wait until the request is cancelled.
    Hang,
    /// The request was cancelled: say nothing more about it.
    Dropped,
}

impl Reply {
    pub fn error(code: i64, message: impl Into<String>) -> Self {
        Reply::Error(RpcError::new(code, message))
    }
}

/// Which era serves a request, given what the peer speaks and what the request looks like.
pub fn resolve_era(choice: EraChoice, method: &str, params: Option<&Value>) -> Era {
    match choice {
        EraChoice::Legacy => Era::Legacy,
        EraChoice::Modern => Era::Modern,
        EraChoice::Both => {
            if method == "initialize" {
                Era::Legacy
            } else if method == "server/discover" || modern_protocol_version(params).is_some() {
                Era::Modern
            } else {
                Era::Legacy
            }
        }
    }
}

/// `params._meta["io.modelcontextprotocol/protocolVersion"]`, when the request carries one.
pub fn modern_protocol_version(params: Option<&Value>) -> Option<&str> {
    params?.get("_meta")?.get(META_PROTOCOL_VERSION)?.as_str()
}

/// `params._meta.progressToken`, when it is a string or an integer.
pub fn progress_token(params: Option<&Value>) -> Option<Value> {
    let token = params?.get("_meta")?.get("progressToken")?;
    (token.is_string() || token.is_i64() || token.is_u64()).then(|| token.clone())
}

/// Whether serving this request will send anything before its response, so that an HTTP
/// transport in automatic mode should answer with an SSE stream.
pub fn emits_before_reply(
    settings: &Settings,
    era: Era,
    method: &str,
    params: Option<&Value>,
) -> bool {
    let behaviour = settings.behaviour;
    if behaviour == Behaviour::NotificationFlood {
        return true;
    }
    if method == "initialize" {
        return behaviour == Behaviour::ListChangedBeforeInit;
    }
    if method != "tools/call" {
        return false;
    }
    if matches!(
        behaviour,
        Behaviour::UnknownId
            | Behaviour::DuplicateResponse
            | Behaviour::OverLongLine
            | Behaviour::GiantSseEvent
            | Behaviour::ProgressAfterResponse
    ) {
        return true;
    }
    if progress_token(params).is_some() {
        return true;
    }
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    match name {
        Some("slow") => true,
        Some("ask" | "sample" | "roots") => era == Era::Legacy,
        Some("echo") => {
            let says_log = params
                .and_then(|p| p.get("arguments"))
                .and_then(|a| a.get("message"))
                .and_then(Value::as_str)
                == Some("log");
            let modern_asked_for_logs = params
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get(META_LOG_LEVEL))
                .is_some();
            says_log && (era == Era::Legacy || modern_asked_for_logs)
        }
        _ => false,
    }
}

/// Serves one request to completion: pushes everything it has to say into `ctx.sink`.
pub async fn serve_request(ctx: RequestContext, id: Value, method: String, params: Option<Value>) {
    let settings = ctx.settings().clone();
    if method == "tools/call" && settings.behaviour == Behaviour::ExitMidCall {
        eprintln!(
            "manifold-test-peer: behaviour exit-mid-call: a tools/call arrived, exiting with status 1"
        );
        std::process::exit(1);
    }
    if settings.behaviour == Behaviour::NeverAnswer {
        ctx.cancel.cancelled().await;
        return;
    }
    let era = ctx
        .era
        .unwrap_or_else(|| resolve_era(settings.era, &method, params.as_ref()));
    let reply = match era {
        Era::Legacy => legacy_request(&ctx, &method, params.as_ref()).await,
        Era::Modern => modern_request(&ctx, &method, params.as_ref()).await,
    };
    match reply {
        Reply::Hang => ctx.cancel.cancelled().await,
        Reply::Dropped => {}
        reply => send_reply(&ctx, &id, &method, era, params.as_ref(), reply),
    }
}

/// Handles a client notification.
pub fn notify(connection: &Arc<Connection>, method: &str, params: Option<&Value>) {
    match method {
        "notifications/cancelled" => {
            if let Some(id) = params.and_then(|p| p.get("requestId")) {
                connection.cancel(id);
            }
        }
        "notifications/initialized" => {
            let wants_roots = connection.client_capabilities().get("roots").is_some();
            if connection.peer.settings.behaviour == Behaviour::RootsAfterInitialized && wants_roots
            {
                let connection = Arc::clone(connection);
                tokio::spawn(async move {
                    let sink = connection.standalone_sink();
                    let never = CancellationToken::new();
                    // The answer is not used; the point is the unsolicited request itself.
                    let _ = connection
                        .ask_client(&sink, &never, "roots/list", &json!({}))
                        .await;
                });
            }
        }
        _ => {}
    }
}

fn invalid_params(message: impl Into<String>) -> Reply {
    Reply::error(code::INVALID_PARAMS, message)
}

async fn legacy_request(ctx: &RequestContext, method: &str, params: Option<&Value>) -> Reply {
    let settings = ctx.settings();
    match method {
        "initialize" => return initialize(ctx, params).await,
        "ping" => return Reply::Result(Map::new()),
        _ => {}
    }
    const LEGACY_METHODS: [&str; 8] = [
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "logging/setLevel",
    ];
    if !LEGACY_METHODS.contains(&method) {
        // Unknown methods, server/discover among them on a legacy-only peer, are unknown
        // whether or not initialize came first.
        return Reply::error(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        );
    }
    let initialized = lock(&ctx.connection.legacy).initialized;
    if !initialized {
        return if settings.era == EraChoice::Both {
            invalid_params(
                "this request carries no _meta \"io.modelcontextprotocol/protocolVersion\" (modern era) \
                 and no initialize came first (legacy era); send one or the other",
            )
        } else {
            Reply::error(
                code::INVALID_REQUEST,
                "the server is not initialized: send initialize first",
            )
        };
    }
    match method {
        "tools/list" => tools_list(settings, Era::Legacy, params),
        "tools/call" => tools::call(ctx, Era::Legacy, params).await,
        "resources/list" => list_result("resources", catalog::resources(), Era::Legacy),
        "resources/templates/list" => list_result(
            "resourceTemplates",
            catalog::resource_templates(),
            Era::Legacy,
        ),
        "resources/read" => read_resource(Era::Legacy, params),
        "prompts/list" => list_result("prompts", catalog::prompts(), Era::Legacy),
        "prompts/get" => get_prompt(params),
        "logging/setLevel" => set_log_level(ctx, params),
        other => Reply::error(code::METHOD_NOT_FOUND, format!("Method not found: {other}")),
    }
}

/// The protocol versions a modern request may name.
pub fn supported_modern_versions(settings: &Settings) -> Vec<&'static str> {
    if settings.behaviour == Behaviour::WrongRevision {
        vec![catalog::WRONG_REVISION]
    } else {
        vec![catalog::MODERN_REVISION]
    }
}

async fn modern_request(ctx: &RequestContext, method: &str, params: Option<&Value>) -> Reply {
    let settings = ctx.settings();
    let supported = supported_modern_versions(settings);
    if method == "initialize" {
        let requested = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return Reply::Error(
            RpcError::new(
                code::UNSUPPORTED_PROTOCOL_VERSION,
                format!(
                    "Unsupported protocol version: this server has no initialize handshake and speaks only {}",
                    supported.join(", ")
                ),
            )
            .with_data(json!({"supported": supported, "requested": requested}))
            .with_status(400),
        );
    }
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object);
    let Some(version) = meta
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str)
    else {
        return Reply::Error(
            RpcError::new(
                code::INVALID_PARAMS,
                "Invalid params: _meta \"io.modelcontextprotocol/protocolVersion\" is required on every request",
            )
            .with_status(400),
        );
    };
    if !meta
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .is_some_and(Value::is_object)
    {
        return Reply::Error(
            RpcError::new(
                code::INVALID_PARAMS,
                "Invalid params: _meta \"io.modelcontextprotocol/clientCapabilities\" (an object) is required on every request",
            )
            .with_status(400),
        );
    }
    if !supported.contains(&version) {
        return Reply::Error(
            RpcError::new(
                code::UNSUPPORTED_PROTOCOL_VERSION,
                format!("Unsupported protocol version: {version}"),
            )
            .with_data(json!({"supported": supported, "requested": version}))
            .with_status(400),
        );
    }
    if let Some(level) = meta.and_then(|m| m.get(META_LOG_LEVEL))
        && level.as_str().and_then(catalog::log_level_rank).is_none()
    {
        return invalid_params(format!("Invalid params: unknown log level {level}"));
    }
    match method {
        "server/discover" => discover(ctx).await,
        "tools/list" => tools_list(settings, Era::Modern, params),
        "tools/call" => tools::call(ctx, Era::Modern, params).await,
        "resources/list" => list_result("resources", catalog::resources(), Era::Modern),
        "resources/templates/list" => list_result(
            "resourceTemplates",
            catalog::resource_templates(),
            Era::Modern,
        ),
        "resources/read" => read_resource(Era::Modern, params),
        "prompts/list" => list_result("prompts", catalog::prompts(), Era::Modern),
        "prompts/get" => get_prompt(params),
        other => Reply::Error(
            RpcError::new(code::METHOD_NOT_FOUND, format!("Method not found: {other}"))
                .with_status(404),
        ),
    }
}

/// Sleeps for the slow-handshake delay; `false` when the request was cancelled meanwhile.
async fn handshake_delay(ctx: &RequestContext) -> bool {
    let settings = ctx.settings();
    if settings.behaviour != Behaviour::SlowHandshake {
        return true;
    }
    let delay = Duration::from_millis(settings.delay_ms_or(2000));
    tokio::select! {
        () = tokio::time::sleep(delay) => true,
        () = ctx.cancel.cancelled() => false,
    }
}

async fn initialize(ctx: &RequestContext, params: Option<&Value>) -> Reply {
    if !handshake_delay(ctx).await {
        return Reply::Dropped;
    }
    let settings = ctx.settings();
    let requested = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = if settings.behaviour == Behaviour::WrongRevision {
        catalog::WRONG_REVISION
    } else if catalog::LEGACY_REVISIONS.contains(&requested) {
        requested
    } else {
        catalog::LATEST_LEGACY_REVISION
    };
    {
        let mut state = lock(&ctx.connection.legacy);
        state.initialized = true;
        state.protocol_version = version.to_owned();
        state.client_capabilities = params
            .and_then(|p| p.get("capabilities"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        state.log_level_rank = None;
    }
    if settings.behaviour == Behaviour::ListChangedBeforeInit {
        ctx.push(Outgoing::notification(jsonrpc::notification_message(
            "notifications/tools/list_changed",
            &json!({}),
        )));
    }
    let result = json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"subscribe": false, "listChanged": false},
            "prompts": {"listChanged": false},
            "logging": {}
        },
        "serverInfo": catalog::server_info(),
        "instructions": catalog::instructions(&settings.behaviour.name()),
    });
    into_reply(result)
}

async fn discover(ctx: &RequestContext) -> Reply {
    let settings = ctx.settings();
    if settings.behaviour == Behaviour::DiscoverTimeout {
        return Reply::Hang;
    }
    if !handshake_delay(ctx).await {
        return Reply::Dropped;
    }
    let result = json!({
        "supportedVersions": supported_modern_versions(settings),
        "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "logging": {}},
        "serverInfo": catalog::server_info(),
        "instructions": catalog::instructions(&settings.behaviour.name()),
        "ttlMs": catalog::TTL_MS,
        "cacheScope": "public",
    });
    into_reply(result)
}

/// Wraps a JSON object as a result; anything else becomes an internal error.
pub fn into_reply(value: Value) -> Reply {
    match value {
        Value::Object(map) => Reply::Result(map),
        _ => Reply::error(
            code::INTERNAL_ERROR,
            "internal error: a result must be an object",
        ),
    }
}

fn cacheable(map: &mut Map<String, Value>, era: Era) {
    if era == Era::Modern {
        map.insert("ttlMs".to_owned(), Value::from(catalog::TTL_MS));
        map.insert("cacheScope".to_owned(), Value::from("public"));
    }
}

fn list_result(member: &str, items: Vec<Value>, era: Era) -> Reply {
    let mut map = Map::new();
    map.insert(member.to_owned(), Value::Array(items));
    cacheable(&mut map, era);
    Reply::Result(map)
}

/// Prefix of the opaque cursors `many-tools` hands out.
const OFFSET_CURSOR_PREFIX: &str = "offset:";
/// The cursor `cursor-loop` always returns.
pub const LOOP_CURSOR: &str = "loop-cursor";

fn tools_list(settings: &Settings, era: Era, params: Option<&Value>) -> Reply {
    let cursor = params.and_then(|p| p.get("cursor"));
    let cursor = match cursor {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.as_str()),
        Some(_) => return invalid_params("Invalid params: cursor must be a string"),
    };
    let mut map = Map::new();
    match settings.behaviour {
        Behaviour::ManyTools => {
            let total = settings.count_or(100_000);
            let page = u64::try_from(settings.page_size.max(1)).unwrap_or(u64::MAX);
            let offset = match cursor {
                None => 0,
                Some(text) => match text
                    .strip_prefix(OFFSET_CURSOR_PREFIX)
                    .and_then(|n| n.parse::<u64>().ok())
                    .filter(|n| *n < total)
                {
                    Some(offset) => offset,
                    None => {
                        return invalid_params(format!("Invalid params: unknown cursor {text:?}"));
                    }
                },
            };
            let end = offset.saturating_add(page).min(total);
            let tools: Vec<Value> = (offset..end).map(catalog::generated_tool).collect();
            map.insert("tools".to_owned(), Value::Array(tools));
            if end < total {
                map.insert(
                    "nextCursor".to_owned(),
                    Value::from(format!("{OFFSET_CURSOR_PREFIX}{end}")),
                );
            }
        }
        Behaviour::CursorLoop => {
            map.insert("tools".to_owned(), Value::Array(catalog::tools()));
            map.insert("nextCursor".to_owned(), Value::from(LOOP_CURSOR));
        }
        _ => {
            if let Some(text) = cursor {
                return invalid_params(format!("Invalid params: unknown cursor {text:?}"));
            }
            let mut tools = catalog::tools();
            if crate::cancel_journal::enabled(settings) {
                tools.push(crate::cancel_journal::tool_definition());
            }
            crate::definition_attacks::adjust_tools(settings, &mut tools);
            map.insert("tools".to_owned(), Value::Array(tools));
        }
    }
    cacheable(&mut map, era);
    Reply::Result(map)
}

fn read_resource(era: Era, params: Option<&Value>) -> Reply {
    let Some(uri) = params.and_then(|p| p.get("uri")).and_then(Value::as_str) else {
        return invalid_params("Invalid params: resources/read needs params.uri (a string)");
    };
    let Some(text) = catalog::read_resource(uri) else {
        let not_found = match era {
            Era::Legacy => code::RESOURCE_NOT_FOUND_LEGACY,
            Era::Modern => code::INVALID_PARAMS,
        };
        return Reply::Error(
            RpcError::new(not_found, format!("Resource not found: {uri}"))
                .with_data(json!({"uri": uri})),
        );
    };
    let mut map = Map::new();
    map.insert(
        "contents".to_owned(),
        json!([{"uri": uri, "mimeType": "text/plain", "text": text}]),
    );
    cacheable(&mut map, era);
    Reply::Result(map)
}

fn get_prompt(params: Option<&Value>) -> Reply {
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    if name != Some("greet") {
        return invalid_params(format!(
            "Invalid params: unknown prompt {}",
            name.unwrap_or("(none given)")
        ));
    }
    let Some(who) = params
        .and_then(|p| p.get("arguments"))
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str)
    else {
        return invalid_params("Invalid params: prompt greet needs the argument name (a string)");
    };
    into_reply(json!({
        "description": "A greeting",
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello, {who}!")}}]
    }))
}

fn set_log_level(ctx: &RequestContext, params: Option<&Value>) -> Reply {
    let level = params.and_then(|p| p.get("level")).and_then(Value::as_str);
    match level.and_then(catalog::log_level_rank) {
        Some(rank) => {
            lock(&ctx.connection.legacy).log_level_rank = Some(rank);
            Reply::Result(Map::new())
        }
        None => invalid_params(format!(
            "Invalid params: unknown log level {}",
            level.unwrap_or("(none given)")
        )),
    }
}

/// The progress notification `slow` sends for step `step` of `total`.
pub fn progress_notification(token: &Value, step: u64, total: u64, message: &str) -> Outgoing {
    Outgoing::notification(jsonrpc::notification_message(
        "notifications/progress",
        &json!({"progressToken": token, "progress": step, "total": total, "message": message}),
    ))
}

/// Serialises the reply, applies the envelope-level misbehaviours and pushes the result.
fn send_reply(
    ctx: &RequestContext,
    id: &Value,
    method: &str,
    era: Era,
    params: Option<&Value>,
    reply: Reply,
) {
    let settings = ctx.settings();
    let behaviour = settings.behaviour;
    let (member, payload, status) = match reply {
        Reply::Result(mut map) => {
            if era == Era::Modern {
                decorate_modern(&mut map);
            }
            (
                "result",
                canonical_json::to_string(&Value::Object(map)).into_bytes(),
                200,
            )
        }
        Reply::Raw(bytes) => {
            let bytes = match era {
                Era::Modern => payloads::with_result_type_complete(&bytes),
                Era::Legacy => bytes,
            };
            ("result", bytes, 200)
        }
        Reply::Error(error) => ("error", error.object_text().into_bytes(), error.http_status),
        Reply::Hang | Reply::Dropped => return,
    };
    let is_call = method == "tools/call";

    if behaviour == Behaviour::NotificationFlood {
        let total = settings.count_or(10_000);
        for n in 1..=total {
            ctx.push(Outgoing::notification(jsonrpc::notification_message(
                "notifications/message",
                &json!({"level": "info", "logger": "flood", "data": format!("flood {n} of {total}")}),
            )));
        }
    }
    if is_call && behaviour == Behaviour::OverLongLine {
        ctx.push(Outgoing::notification(payloads::over_long_notification()));
    }

    let id_text = id.to_string();
    let normal = jsonrpc::envelope("2.0", &id_text, member, &payload, "");
    let frames = if method == "tools/list" && behaviour == Behaviour::OverLongAnswer {
        vec![payloads::over_long_answer(&id_text)]
    } else if !is_call {
        vec![normal]
    } else {
        match behaviour {
            Behaviour::WrongJsonrpc => {
                vec![jsonrpc::envelope("1.0", &id_text, member, &payload, "")]
            }
            Behaviour::ResultAndError => {
                let both_error = r#","error":{"code":-32603,"message":"this response carries both result and error"}"#;
                if member == "result" {
                    vec![jsonrpc::envelope(
                        "2.0", &id_text, "result", &payload, both_error,
                    )]
                } else {
                    let trailing = format!(",\"error\":{}", String::from_utf8_lossy(&payload));
                    vec![jsonrpc::envelope(
                        "2.0", &id_text, "result", b"{}", &trailing,
                    )]
                }
            }
            Behaviour::UnknownId => vec![
                jsonrpc::envelope(
                    "2.0",
                    &payloads::UNKNOWN_ID.to_string(),
                    member,
                    &payload,
                    "",
                ),
                normal,
            ],
            Behaviour::DuplicateResponse => vec![normal.clone(), normal],
            Behaviour::NullId => vec![jsonrpc::envelope("2.0", "null", member, &payload, "")],
            _ => vec![normal],
        }
    };
    for frame in frames {
        ctx.push(Outgoing::response(method, status, frame));
    }
    if is_call {
        crate::definition_attacks::after_call_response(ctx);
    }
    if is_call
        && behaviour == Behaviour::ProgressAfterResponse
        && let Some(token) = progress_token(params)
    {
        ctx.push(progress_notification(
            &token,
            1,
            1,
            "progress after the response",
        ));
    }
}

/// Adds the members every modern result carries: `resultType` and `_meta` serverInfo.
fn decorate_modern(map: &mut Map<String, Value>) {
    if !map.contains_key("resultType") {
        map.insert("resultType".to_owned(), Value::from("complete"));
    }
    let meta = map
        .entry("_meta".to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(catalog::META_SERVER_INFO.to_owned(), catalog::server_info());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn era_follows_method_and_meta_in_dual_mode() {
        let modern = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}});
        assert_eq!(
            resolve_era(EraChoice::Both, "initialize", Some(&modern)),
            Era::Legacy
        );
        assert_eq!(
            resolve_era(EraChoice::Both, "server/discover", None),
            Era::Modern
        );
        assert_eq!(
            resolve_era(EraChoice::Both, "tools/list", Some(&modern)),
            Era::Modern
        );
        assert_eq!(
            resolve_era(EraChoice::Both, "tools/list", None),
            Era::Legacy
        );
        assert_eq!(
            resolve_era(EraChoice::Legacy, "server/discover", Some(&modern)),
            Era::Legacy
        );
    }

    #[test]
    fn modern_decoration_adds_result_type_and_server_info() {
        let mut map = Map::new();
        decorate_modern(&mut map);
        assert_eq!(map["resultType"], "complete");
        assert_eq!(
            map["_meta"][catalog::META_SERVER_INFO]["name"],
            catalog::SERVER_NAME
        );
    }
}
