//! One downstream request in, one response out: dispatch by method, resolve exposed names to
//! their upstream, forward the raw message with only names, URIs and ids patched, and patch the
//! answer back.
//!
//! A tool that ran and failed, or whose server failed during the call, is an `isError` result
//! naming the server and the cause; a call to a server known to be down (restarting) is refused
//! at once with -32000 (`Upstream::unavailable`); a request the gateway cannot make sense of
//! (unknown tool, bad cursor) is a JSON-RPC error.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use manifold_telemetry::labels::AUTHORED_UPSTREAM;
use manifold_upstream::{CallEvent, UpstreamError};
use manifold_wire::id::json_string;
use manifold_wire::patch::{self, Part, decoded};
use manifold_wire::shallow::NameProbe;
use manifold_wire::{Era, ErrorCode, ErrorObject, Id, Kind, Message};
use serde_json::Value;

use crate::builtin;
use crate::catalog::build::{Catalog, Entry};
use crate::catalog::naming::NamingMode;
use crate::context::RequestContext;
use crate::gateway_settings::Discovery;
use crate::mrtr::{HeldCall, INPUT_KEY, QuestionCatcher, StateError, input_required};
use crate::policy::ItemKind;
use crate::result_links::without_hidden_resources;
use crate::server_requests::CallOrigin;
use crate::state::{Core, LIST_TTL_MS};
use crate::upstream::{MAX_CALL_RETRIES, Upstream};

/// The member names a result is probed for before the walks that patch links and tasks back.
static URI: LazyLock<NameProbe> = LazyLock::new(|| NameProbe::new("uri"));
static TASK_ID: LazyLock<NameProbe> = LazyLock::new(|| NameProbe::new("taskId"));

/// The first wait before retrying a call (doubling each time).
pub const CALL_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);
/// The `_meta` key that tells a client how often its call was retried.
pub const RETRIES_META: &str = "io.manifold/retries";
/// Rounds of modern-upstream questions answered for one legacy client's request.
pub const MAX_INPUT_ROUNDS: usize = 8;
/// Items per page of a merged list.
pub const LIST_PAGE_SIZE: usize = 1000;
/// Prefix of Manifold's opaque list cursors.
const CURSOR_PREFIX: &str = "mf1-";

pub(crate) fn error(id: Option<&Id>, code: ErrorCode, message: impl Into<String>) -> Message {
    Message::error(id.cloned(), &ErrorObject::new(code, message))
}

impl Core {
    /// Handles one request from a downstream client and returns its response (with the
    /// request's own id). Notifications tied to the request go out through `ctx.peer` first.
    /// Dropping the returned future cancels the upstream call.
    pub async fn handle(&self, ctx: &RequestContext, request: &Message) -> Message {
        // Boxed once here: the routing future is tens of KiB, and every layer above (the span,
        // the counters, the select on cancellation, the spawned task) would otherwise move it
        // again, one memcpy of its whole size per layer, per call.
        Box::pin(self.handle_as(ctx, request)).await
    }

    async fn handle_as(&self, ctx: &RequestContext, request: &Message) -> Message {
        let Some(method) = request.method() else {
            return error(
                request.id(),
                ErrorCode::InvalidRequest,
                "expected a request",
            );
        };
        let telemetry = std::sync::Arc::clone(&self.settings().telemetry);
        let Some(sink) = telemetry.audit.clone() else {
            return self.route(ctx, request, method).await;
        };
        let recording = sink
            .records_arguments()
            .then(|| crate::audit::ArgumentRecording {
                redactor: &telemetry.call_log.redactor,
                secret_fields: self.secret_fields_of_called_tool(request, method),
            });
        let row = match crate::audit::open_row(sink, ctx, request, method) {
            Ok(row) => row,
            Err(refused) => return *refused,
        };
        let response = self.route(ctx, request, method).await;
        row.finish(recording, ctx, request, method, response).await
    }

    /// The fields the called tool's input schema marks secret, for recorded arguments.
    fn secret_fields_of_called_tool(&self, request: &Message, method: &str) -> Vec<String> {
        if method != "tools/call" {
            return Vec::new();
        }
        let catalog = self.catalog();
        let name = request.params_str(&["name"]).unwrap_or_default();
        let through = (name == builtin::CALL)
            .then(|| request.params_str(&["arguments", "name"]))
            .flatten();
        catalog
            .tool_entry(through.as_deref().unwrap_or(&name))
            .map(|entry| crate::audit::secret_fields(&entry.raw))
            .unwrap_or_default()
    }

    async fn route(&self, ctx: &RequestContext, request: &Message, method: &str) -> Message {
        let id = request.id();
        if let Some(refusal) = self.admit(ctx, request, method) {
            return refusal;
        }
        let params = request.params().unwrap_or("{}");
        self.wake_lazy().await;
        let outcome = match method {
            "ping" => Ok("{}".to_owned()),
            "tools/list" => self.list(ctx, params, ListOf::Tools),
            "prompts/list" => self.list(ctx, params, ListOf::Prompts),
            "resources/list" => self.list(ctx, params, ListOf::Resources),
            "resources/templates/list" => self.list(ctx, params, ListOf::Templates),
            "tools/call" => {
                let response = self.recorded_call_tool(ctx, request).await;
                self.note_task(ctx, request, &response);
                return response;
            }
            "prompts/get" => return self.by_prompt(ctx, request).await,
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                return self.by_uri(ctx, request, &["uri"]).await;
            }
            "completion/complete" => return self.complete(ctx, request).await,
            m if crate::tasks::is_task_method(m) => return self.by_task(ctx, request).await,
            "logging/setLevel" => Ok(self.set_level(params).await),
            other => {
                return error(
                    id,
                    ErrorCode::MethodNotFound,
                    format!("Manifold does not handle the method {other:?}"),
                );
            }
        };
        match (outcome, id) {
            (Ok(result), Some(id)) => Message::result(id, &finish(ctx, result)),
            (Ok(_), None) => error(None, ErrorCode::InvalidRequest, "a request needs an id"),
            (Err(e), _) => Message::error(id.cloned(), &e),
        }
    }

    fn list(&self, ctx: &RequestContext, params: &str, of: ListOf) -> Result<String, ErrorObject> {
        let catalog = self.catalog();
        let builtins = builtin::definitions();
        let policy = self.policy();
        let view = &policy.for_request(ctx.caller.as_deref(), ctx.toolset.as_deref());
        let search_only = self.settings().discovery == Discovery::Search || view.search_only();
        let seen = |kind: ItemKind| move |e: &&Entry| view.sees_entry(kind, e);
        let hosted = match of {
            ListOf::Tools => self.hosted_visible(view, ctx.caller.as_deref()),
            _ => Vec::new(),
        };
        let items: Vec<&str> = match of {
            ListOf::Tools => builtins
                .iter()
                .zip(builtin::NAMES)
                .filter(|(_, n)| view.sees(ItemKind::Tool, None, n))
                .map(|(d, _)| *d)
                .chain(hosted.iter().map(String::as_str))
                .chain(
                    catalog
                        .tools
                        .iter()
                        .filter(|_| !search_only)
                        .filter(seen(ItemKind::Tool))
                        .map(|e| e.raw.as_str()),
                )
                .collect(),
            ListOf::Prompts => (catalog.prompts.iter().filter(seen(ItemKind::Prompt)))
                .map(|e| e.raw.as_str())
                .collect(),
            ListOf::Resources => (catalog.resources.iter().filter(seen(ItemKind::Resource)))
                .map(|e| e.raw.as_str())
                .collect(),
            ListOf::Templates => (catalog.templates.iter().filter(seen(ItemKind::Resource)))
                .map(|e| e.raw.as_str())
                .collect(),
        };
        let start = match decoded::get_str(params, &["cursor"]).ok().flatten() {
            None => 0,
            Some(c) => c
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n <= items.len())
                .ok_or_else(|| {
                    ErrorObject::new(
                        ErrorCode::InvalidParams,
                        format!("the cursor {c:?} is not one Manifold issued for this list; start again without a cursor"),
                    )
                })?,
        };
        let end = (start + LIST_PAGE_SIZE).min(items.len());
        let page = items.get(start..end).unwrap_or_default().join(",");
        let mut out = format!("{{\"{}\":[{page}]", of.member());
        if end < items.len() {
            out.push_str(&format!(",\"nextCursor\":\"{CURSOR_PREFIX}{end}\""));
        }
        if ctx.client.revision.era() == Era::Modern {
            // Lists depend on the caller's identity and on upstream state: never shared caches.
            out.push_str(&format!(
                ",\"ttlMs\":{LIST_TTL_MS},\"cacheScope\":\"private\""
            ));
        }
        out.push('}');
        Ok(out)
    }

    /// The approval stage for a call an ask rule matched: a retry resuming a held call (its
    /// requestState sealed here) passed it already; calls no ask rule matched go on untouched.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn stage<'r>(
        &self,
        ctx: &RequestContext,
        request: &'r Message,
        ask: Option<crate::policy::AskRule>,
        server: &str,
        tool: &str,
        definition: Option<&str>,
        cap: Option<std::time::Duration>,
    ) -> Staged<'r> {
        let Some(ask) = ask else {
            return Staged::Go(Cow::Borrowed(request), None);
        };
        if ctx.client.revision.era() == Era::Modern
            && request
                .params_str(&["requestState"])
                .is_some_and(|s| self.held.issued(&s))
        {
            return Staged::Go(Cow::Borrowed(request), None);
        }
        let held = crate::approval::HeldCall {
            ask: &ask,
            server,
            tool,
            definition,
            cap,
        };
        // Boxed: only a call an ask rule matched waits here, and the wait's future is several
        // KiB that every other call's future would otherwise carry.
        match Box::pin(self.settings().approvals.hold(ctx, request, held)).await {
            crate::approval::Verdict::Run { request, approval } => {
                Staged::Go(Cow::Owned(request), Some(approval))
            }
            crate::approval::Verdict::Answer(raw) => Staged::Answer(raw),
            crate::approval::Verdict::Refuse(refusal) => Staged::Refuse(refusal),
        }
    }

    async fn by_prompt(&self, ctx: &RequestContext, request: &Message) -> Message {
        let id = request.id();
        let Some(name) = request.params_str(&["name"]) else {
            return error(
                id,
                ErrorCode::InvalidParams,
                "prompts/get needs params.name",
            );
        };
        let catalog = self.catalog();
        let (server, original) = match self.resolve_prompt(ctx, id, &catalog, &name) {
            Ok(found) => found,
            Err(refusal) => return *refusal,
        };
        let outgoing = match renamed(request, &original) {
            Ok(m) => m,
            Err(refusal) => return *refusal,
        };
        self.forward_or_error(ctx, &server, &outgoing, id).await
    }

    async fn by_uri(&self, ctx: &RequestContext, request: &Message, path: &[&str]) -> Message {
        let id = request.id();
        let Some(uri) = request.params_str(path) else {
            return error(
                id,
                ErrorCode::InvalidParams,
                format!("{} needs params.uri", request.method().unwrap_or("")),
            );
        };
        let catalog = self.catalog();
        let (server, original) = match self.resolve_resource(ctx, id, &catalog, &uri) {
            Ok(found) => found,
            Err(refusal) => return *refusal,
        };
        let subscribing = matches!(
            request.method(),
            Some("resources/subscribe" | "resources/unsubscribe")
        );
        let upstream_modern = self
            .upstream(&server)
            .and_then(|u| u.peer_era())
            .is_some_and(|era| era == Era::Modern);
        if subscribing && upstream_modern {
            // The stateless era removed resources/subscribe; the subscription is the client's
            // own with Manifold. Updates from such an upstream need subscriptions/listen upstream,
            // which Manifold does not open yet.
            return match id {
                Some(id) => Message::result(id, &finish(ctx, "{}".to_owned())),
                None => error(None, ErrorCode::InvalidRequest, "a request needs an id"),
            };
        }
        let outgoing = match request.patch(Part::Params, path, &json_string(&original)) {
            Ok(m) => m,
            Err(e) => {
                return error(
                    id,
                    ErrorCode::InvalidParams,
                    format!("could not forward: {e}"),
                );
            }
        };
        match self.forward(ctx, &server, &outgoing).await {
            Ok(response) => {
                let namespaced = self.settings().naming.mode != NamingMode::Never;
                let fixed = response.result_raw().map(|r| {
                    decoded::rewrite_elements(r, &["contents"], |el| {
                        let Some(u) = decoded::get_str(el, &["uri"])? else {
                            return Ok(None);
                        };
                        Ok(Some(decoded::set(
                            el,
                            &["uri"],
                            &json_string(&catalog.expose_uri(&server, &u, namespaced)),
                        )?))
                    })
                    .unwrap_or_else(|_| r.to_owned())
                });
                let policy = self.policy();
                let view = policy.for_request(ctx.caller.as_deref(), ctx.toolset.as_deref());
                let fixed = fixed.map(|r| {
                    match without_hidden_resources(&r, &["contents"], &view, &server) {
                        Ok(Cow::Owned(filtered)) => filtered,
                        _ => r,
                    }
                });
                let reading = request.method() == Some("resources/read");
                let fixed = fixed.map(|r| if reading { with_cache_hints(ctx, r) } else { r });
                reply(ctx, id, &response, fixed)
            }
            Err(e) => Message::error(id.cloned(), &e.to_error_object()),
        }
    }

    async fn complete(&self, ctx: &RequestContext, request: &Message) -> Message {
        let id = request.id();
        let kind = request.params_str(&["ref", "type"]).unwrap_or_default();
        let catalog = self.catalog();
        if let Some(refusal) = self.gate_completion(ctx, request, &catalog) {
            return refusal;
        }
        let target = match kind.as_str() {
            "ref/prompt" => request
                .params_str(&["ref", "name"])
                .and_then(|n| {
                    catalog
                        .prompt(&n)
                        .map(|(s, o)| (s.to_owned(), o.to_owned()))
                })
                .map(|(s, o)| (s, "name", o)),
            "ref/resource" => request
                .params_str(&["ref", "uri"])
                .and_then(|u| catalog.resource(&u))
                .map(|(s, o)| (s.to_string(), "uri", o)),
            _ => None,
        };
        let Some((server, key, original)) = target else {
            return error(
                id,
                ErrorCode::InvalidParams,
                crate::policy::NO_COMPLETION_TARGET,
            );
        };
        match request.patch(Part::Params, &["ref", key], &json_string(&original)) {
            Ok(outgoing) => self.forward_or_error(ctx, &server, &outgoing, id).await,
            Err(e) => error(
                id,
                ErrorCode::InvalidParams,
                format!("could not forward: {e}"),
            ),
        }
    }

    async fn by_task(&self, ctx: &RequestContext, request: &Message) -> Message {
        let id = request.id();
        if !ctx.client.declares_extension(crate::tasks::EXTENSION) {
            let required = format!(
                r#"{{"requiredCapabilities":{{"extensions":{{"{}":{{}}}}}}}}"#,
                crate::tasks::EXTENSION
            );
            let message = format!(
                "{} belongs to the {} extension; declare it in the client capabilities' extensions",
                request.method().unwrap_or_default(),
                crate::tasks::EXTENSION
            );
            let mut object = ErrorObject::new(ErrorCode::MissingRequiredClientCapability, message);
            if let Ok(data) = serde_json::value::RawValue::from_string(required) {
                object = object.with_data(data);
            }
            return Message::error(id.cloned(), &object);
        }
        let Some(exposed) = request.params_str(&["taskId"]) else {
            return error(
                id,
                ErrorCode::InvalidParams,
                "a tasks request needs params.taskId",
            );
        };
        let Some((server, original)) = crate::tasks::split(&exposed) else {
            return error(
                id,
                ErrorCode::InvalidParams,
                format!("unknown task {exposed:?}: Manifold's task ids look like SERVER:ID"),
            );
        };
        let (server, original) = (server.to_owned(), original.to_owned());
        if self.upstream(&server).is_none() {
            return error(
                id,
                ErrorCode::InvalidParams,
                format!("unknown task {exposed:?}: no server {server:?} behind Manifold"),
            );
        }
        if let Some(refusal) = self.gate_task(ctx, id, &exposed) {
            return refusal;
        }
        let outgoing = match request.patch(Part::Params, &["taskId"], &json_string(&original)) {
            Ok(m) => m,
            Err(e) => {
                return error(
                    id,
                    ErrorCode::InvalidParams,
                    format!("could not forward: {e}"),
                );
            }
        };
        match self.forward(ctx, &server, &outgoing).await {
            Ok(response) => {
                let fixed = response
                    .result_raw()
                    .map(|r| crate::tasks::expose_in_result(r, &server));
                reply(ctx, id, &response, fixed)
            }
            Err(e) => Message::error(id.cloned(), &e.to_error_object()),
        }
    }

    async fn set_level(&self, params: &str) -> String {
        for u in self.upstreams() {
            let offers_logging = u.peer_info().is_some_and(|i| {
                decoded::get(&i.capabilities, &["logging"])
                    .ok()
                    .flatten()
                    .is_some()
            });
            if let (true, Ok(conn)) = (offers_logging, u.connection())
                && let Err(e) = conn
                    .call("logging/setLevel", Some(params), u.def.call_options())
                    .await
            {
                tracing::debug!(server = %u.def.name, error = %e, "logging/setLevel was not accepted");
            }
        }
        "{}".to_owned()
    }

    pub(crate) fn upstream(&self, server: &str) -> Option<Arc<Upstream>> {
        self.upstream_named(server)
    }

    async fn forward_or_error(
        &self,
        ctx: &RequestContext,
        server: &str,
        outgoing: &Message,
        id: Option<&Id>,
    ) -> Message {
        match self.forward(ctx, server, outgoing).await {
            Ok(response) => reply(ctx, id, &response, None),
            Err(e) => Message::error(id.cloned(), &e.to_error_object()),
        }
    }

    /// Forwards a tool call; an idempotent one is tried again, with backoff, when its upstream
    /// died, refused the connection or timed out after the call was sent. A server that was
    /// already down when the call arrived fails at once. Returns the outcome and the retries made.
    /// `idempotent` is asked only once a call failed in a way a retry could mend: most calls
    /// never need the answer, which reads the tool's definition.
    pub(crate) async fn forward_with_retries(
        &self,
        ctx: &RequestContext,
        server: &str,
        outgoing: &Message,
        idempotent: impl Fn() -> bool,
    ) -> (Result<Message, UpstreamError>, u32) {
        let mut retries = 0u32;
        let upstream = self.upstream(server);
        // A server already known to be down fails at once: retrying cannot help the caller.
        let down_at_start = upstream.as_ref().is_some_and(|u| {
            u.def.scope == crate::upstream::Scope::Shared && u.connection().is_err()
        });
        let max_retries = upstream
            .as_ref()
            .map_or(MAX_CALL_RETRIES, |u| u.def.max_retries);
        loop {
            let outcome = self.forward(ctx, server, outgoing).await;
            let retryable = matches!(
                outcome,
                Err(UpstreamError::Closed { .. }
                    | UpstreamError::Connect { .. }
                    | UpstreamError::Timeout { .. })
            );
            if !(retryable && !down_at_start && retries < max_retries && idempotent()) {
                return (outcome, retries);
            }
            retries += 1;
            self.settings().telemetry.metrics.retried(server);
            let wait = CALL_RETRY_BACKOFF.saturating_mul(1 << (retries - 1));
            tracing::warn!(server, retry = retries, error = ?outcome.err(), "retrying an idempotent tool call");
            tokio::time::sleep(wait).await;
            // Give a restarting upstream a bounded moment to come back.
            if let Some(u) = self.upstream(server) {
                let until = tokio::time::Instant::now() + u.def.timeout;
                while u.connection().is_err() && tokio::time::Instant::now() < until {
                    tokio::time::sleep(CALL_RETRY_BACKOFF).await;
                }
            }
        }
    }

    /// Sends a (patched) request to an upstream, relaying its notifications to the client, and
    /// carries server requests across eras (see `mrtr.rs`).
    /// [`Gateway::forward`] (in `call_record.rs`) wraps this with its span and trace context.
    #[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
    pub(crate) async fn forward_unobserved(
        &self,
        ctx: &RequestContext,
        server: &str,
        outgoing: &Message,
    ) -> Result<Message, UpstreamError> {
        let modern_client = ctx.client.revision.era() == Era::Modern;
        if modern_client && let Some(state) = outgoing.params_str(&["requestState"]) {
            match self.held.take(&state) {
                // Boxed: a resumed call is rare, and its future would otherwise enlarge every
                // forwarded call's (see `SessionConnections::connection`).
                Ok(held) => return Box::pin(self.resume(ctx, held, outgoing)).await,
                Err(StateError::Gone) => {
                    return Err(UpstreamError::Cancelled {
                        server: server.to_owned(),
                        method: outgoing.method().unwrap_or_default().to_owned(),
                        reason: StateError::Gone.to_string(),
                    });
                }
                // Not Manifold's: a modern upstream's own state, forwarded to it verbatim.
                Err(StateError::Forged) => {}
            }
        }
        let unavailable = |cause: String| UpstreamError::Closed {
            server: server.to_owned(),
            cause: format!("{cause}; Manifold restarts it by itself, see manifold_health"),
        };
        let upstream = self
            .upstream(server)
            .ok_or_else(|| unavailable("it is not configured".to_owned()))?;
        let own_legacy = match &ctx.session {
            Some(session)
                if crate::sessions::wants_own_legacy_connection(&ctx.client, &upstream) =>
            {
                self.sessions
                    .legacy_connection(session.as_str(), &upstream.def, &ctx.client.capabilities)
                    .await?
            }
            _ => None,
        };
        let speaks_modern = own_legacy.is_none() && upstream.peer_era() == Some(Era::Modern);
        let conn = match (own_legacy, &ctx.session, upstream.def.scope) {
            (Some(conn), _, _) => conn,
            (None, Some(session), crate::upstream::Scope::Session) => {
                self.sessions
                    .connection(session.as_str(), &upstream.def, &ctx.client.capabilities)
                    .await?
            }
            _ => upstream.connection_on_demand().await.map_err(unavailable)?,
        };
        let method = outgoing.method().unwrap_or_default().to_owned();
        let mut params = outgoing.params().unwrap_or("{}").to_owned();
        if speaks_modern {
            // A modern upstream learns the client's capabilities per request: exactly what the
            // client declared, less what the configuration withholds.
            let caps = upstream.capabilities_for(&ctx.client.capabilities);
            let could_not = |e: patch::PatchError| UpstreamError::Protocol {
                server: server.to_owned(),
                detail: format!("could not forward: {e}"),
            };
            params = decoded::set(
                &params,
                &["_meta", manifold_wire::meta::CLIENT_CAPABILITIES],
                &caps,
            )
            .map_err(could_not)?;
            // A modern server logs only when a request names a level. A legacy client's server
            // would log at will, so its calls ask for everything; the client's own level (set
            // with logging/setLevel) filters what reaches it.
            if !modern_client
                && let Some(with_level) = decoded::set_missing(
                    &params,
                    &["_meta"],
                    &[(manifold_wire::meta::LOG_LEVEL, "\"debug\"")],
                )
                .map_err(could_not)?
            {
                params = with_level;
            }
        }
        for _ in 0..=MAX_INPUT_ROUNDS {
            // Only a modern client's call is parked on a question; a legacy client is asked
            // through its own peer, and its call needs no catcher.
            let catching = modern_client.then(|| QuestionCatcher::new(Arc::clone(&ctx.peer)));
            let peer: Arc<dyn crate::context::DownstreamPeer> = match &catching {
                Some((catcher, _)) => catcher.clone(),
                None => Arc::clone(&ctx.peer),
            };
            let origin: Arc<CallOrigin> = Arc::new(CallOrigin {
                client: ctx.client.clone(),
                peer,
            });
            let call = conn
                .request_in_context(
                    &method,
                    Some(&params),
                    upstream.def.call_options(),
                    Some(origin),
                    // Only transports of servers configured with `token_passthrough = true` send it.
                    ctx.caller_token(),
                )
                .await?;
            let response = self.drive(ctx, server, call, catching).await?;
            // A modern upstream's questions reach a legacy client as server requests, and the
            // request is retried with the answers.
            match self
                .answer_for_legacy_client(ctx, server, &params, &response)
                .await?
            {
                Some(retry) => params = retry,
                None => return Ok(response),
            }
        }
        Err(UpstreamError::Protocol {
            server: server.to_owned(),
            detail: format!("{method} still asked for input after {MAX_INPUT_ROUNDS} rounds"),
        })
    }

    /// Waits for a call's response, relaying notifications; a question from the upstream to a
    /// modern client parks the call and answers `input_required` instead.
    async fn drive(
        &self,
        ctx: &RequestContext,
        server: &str,
        mut call: manifold_upstream::Call,
        catching: Option<(
            Arc<QuestionCatcher>,
            tokio::sync::mpsc::UnboundedReceiver<crate::mrtr::InputNeeded>,
        )>,
    ) -> Result<Message, UpstreamError> {
        let Some((catcher, mut questions)) = catching else {
            return loop {
                match call.next().await {
                    Some(Ok(CallEvent::Notification(n))) => ctx.peer.notify(n),
                    Some(Ok(CallEvent::Response(m))) => break Ok(m),
                    Some(Err(e)) => break Err(e),
                    None => break Err(call_ended(server)),
                }
            };
        };
        loop {
            tokio::select! {
                event = call.next() => match event {
                    Some(Ok(CallEvent::Notification(n))) => ctx.peer.notify(n),
                    Some(Ok(CallEvent::Response(m))) => return Ok(m),
                    Some(Err(e)) => return Err(e),
                    None => return Err(call_ended(server)),
                },
                Some(question) = questions.recv() => {
                    let (method, params) = (question.method.clone(), question.params.clone());
                    let state = self.held.hold(HeldCall::new(server.to_owned(), call, question.answer, catcher, questions));
                    let result = input_required(&method, params.as_deref(), &state);
                    return Ok(Message::result(&Id::Num(0), &result));
                }
            }
        }
    }

    /// A modern client's retry: answers the parked upstream question and waits on.
    async fn resume(
        &self,
        ctx: &RequestContext,
        held: HeldCall,
        retry: &Message,
    ) -> Result<Message, UpstreamError> {
        let HeldCall {
            server,
            mut call,
            answer,
            catcher,
            questions,
            ..
        } = held;
        let reply = match retry.params_raw(&["inputResponses", INPUT_KEY]) {
            Some(raw) => Ok(raw.to_owned()),
            None => Err(ErrorObject::new(
                ErrorCode::InvalidParams,
                format!("the client's retry carried no inputResponses.{INPUT_KEY}"),
            )),
        };
        let _ = answer.send(reply);
        catcher.rebind(Arc::clone(&ctx.peer));
        call.restart_deadline();
        self.drive(ctx, &server, call, Some((catcher, questions)))
            .await
    }

    /// For a legacy client, turns a modern upstream's `input_required` into server requests to
    /// the client and returns the params of the retry; `None` when there is nothing to answer.
    async fn answer_for_legacy_client(
        &self,
        ctx: &RequestContext,
        server: &str,
        params: &str,
        response: &Message,
    ) -> Result<Option<String>, UpstreamError> {
        if ctx.client.revision.era() == Era::Modern
            || !manifold_upstream::negotiate::is_input_required(response)
        {
            return Ok(None);
        }
        let raw = response.result_raw().unwrap_or("{}");
        let view: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
        let protocol = |detail: String| UpstreamError::Protocol {
            server: server.to_owned(),
            detail,
        };
        let mut answers = serde_json::Map::new();
        for (key, request) in view
            .get("inputRequests")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Some(cap) = crate::server_requests::capability_for(method)
                && !ctx.client.declares(cap)
            {
                return Err(protocol(format!(
                    "it asked for {method}, which the client did not declare ({cap})"
                )));
            }
            let params = request.get("params").map(Value::to_string);
            let question = ctx
                .peer
                .request(method, crate::mrtr::as_legacy_question(method, params));
            let Some(question) = question else {
                return Err(protocol(format!(
                    "it asked for {method}, and this client cannot be asked"
                )));
            };
            let answer = question
                .await
                .map_err(|e| protocol(format!("the client could not answer {method}: {e}")))?;
            answers.insert(
                key.clone(),
                serde_json::from_str(&answer).unwrap_or(Value::Null),
            );
        }
        let mut retry = decoded::set(
            params,
            &["inputResponses"],
            &Value::Object(answers).to_string(),
        )
        .map_err(|e| protocol(format!("could not build the retry: {e}")))?;
        if let Some(state) = decoded::get(raw, &["requestState"]).ok().flatten() {
            retry = decoded::set(&retry, &["requestState"], state)
                .map_err(|e| protocol(format!("could not build the retry: {e}")))?;
        }
        Ok(Some(retry))
    }
}

/// What a `tools/call` came to: the answer, and what its recorder cannot read from the answer.
pub(crate) struct ToolCallAnswer {
    pub message: Message,
    /// Why the upstream could not run the call; the answer is then an `isError` result, which
    /// would otherwise read as the tool's own failure.
    pub upstream_failure: Option<String>,
    /// Attempts after the first (also in the result's `_meta`).
    pub retries: u32,
}

impl From<Message> for ToolCallAnswer {
    fn from(message: Message) -> ToolCallAnswer {
        ToolCallAnswer {
            message,
            upstream_failure: None,
            retries: 0,
        }
    }
}

/// The stages of a `tools/call` that `pipeline.rs` runs in order, as far as they are the router's.
impl Core {
    /// A tool Manifold answers itself: a built-in one, or a hosted one (through the approval
    /// stage when an ask rule holds it). `None`: a server's tool.
    pub(crate) async fn own_tool(
        &self,
        ctx: &RequestContext,
        request: &Message,
        catalog: &Catalog,
        name: &str,
        ask: Option<crate::policy::AskRule>,
    ) -> Option<ToolCallAnswer> {
        let id = request.id();
        match name {
            builtin::HEALTH => {
                let upstreams = self.upstreams();
                let view = builtin::HealthView {
                    upstreams: &upstreams,
                    visible: self.visible_servers(ctx),
                    pins: self.settings().pins.as_deref(),
                    audit: self.settings().telemetry.audit.as_ref().map(|a| a.status()),
                    catalog_error: self.catalog_error(),
                };
                return Some(respond(ctx, id, builtin::health(view, ctx)).into());
            }
            builtin::SEARCH => {
                let policy = self.policy();
                let rules = policy.for_request(ctx.caller.as_deref(), ctx.toolset.as_deref());
                let view = builtin::SearchView {
                    catalog,
                    rules: &rules,
                    hosted: (self.settings().hosted.as_ref())
                        .map(|h| h.listed())
                        .unwrap_or_default(),
                };
                let found = builtin::search(view, &arguments_of(request));
                return Some(respond(ctx, id, found).into());
            }
            builtin::CALL => return Some(self.call_found_tool(ctx, request).await),
            _ => {}
        }
        if !self.is_hosted(catalog, name) {
            return None;
        }
        // Only the authoring tools that make or change code can be held (policy.rs); the
        // approval is bound to the definition the client saw.
        let definition = self.settings().hosted.as_ref().and_then(|h| {
            h.authoring()
                .iter()
                .zip(builtin::AUTHORING)
                .find(|(_, n)| **n == name)
                .map(|(d, _)| *d)
        });
        let staged = self
            .stage(ctx, request, ask, AUTHORED_UPSTREAM, name, definition, None)
            .await;
        let (request, approval) = match staged {
            Staged::Go(request, approval) => (request, approval),
            Staged::Answer(raw) => return Some(respond(ctx, id, raw).into()),
            Staged::Refuse(refusal) => return Some(refusal.into()),
        };
        // Boxed for the same reason as the approval's wait in `stage`: every call passes
        // through this function, few run a hosted tool.
        let answer = match Box::pin(self.call_hosted(ctx, &request, name)).await {
            Ok(raw) => respond(ctx, id, with_approval(raw, approval.as_ref())),
            Err(refusal) => *refusal,
        };
        Some(answer.into())
    }

    /// `manifold_call_tool`: the named tool, called as if the client had called it.
    async fn call_found_tool(&self, ctx: &RequestContext, request: &Message) -> ToolCallAnswer {
        let id = request.id();
        let args = arguments_of(request);
        let Some(target) = args.get("name").and_then(Value::as_str) else {
            return respond(ctx, id, builtin::error_result(
                "manifold_call_tool needs \"name\": the tool's name as manifold_search_tools returned it",
            ))
            .into();
        };
        if builtin::NAMES.contains(&target) {
            return respond(
                ctx,
                id,
                builtin::error_result(
                    "manifold_call_tool calls server tools; call built-in tools directly",
                ),
            )
            .into();
        }
        let inner_args = args
            .get("arguments")
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        let params = serde_json::json!({ "name": target, "arguments": inner_args });
        let Some(id) = id else {
            return error(None, ErrorCode::InvalidRequest, "a request needs an id").into();
        };
        let inner = Message::request(id, "tools/call", Some(&params.to_string()));
        Box::pin(self.call_tool(ctx, &inner)).await
    }

    /// The server of an exposed tool name and the tool's name there; a name withheld by pins,
    /// unknown, or on a server known to be down (restarting) is answered here, untried.
    pub(crate) fn resolve_tool<'c>(
        &self,
        ctx: &RequestContext,
        id: Option<&Id>,
        catalog: &'c Catalog,
        name: &str,
    ) -> Result<(&'c str, &'c str), Box<Message>> {
        // In search mode tools are unlisted, not forbidden: manifold_call_tool reaches them by name.
        let Some((server, original)) = catalog.tool(name) else {
            if let Some(refusal) = catalog.withheld_tool(name) {
                return Err(Box::new(Message::error(id.cloned(), &refusal)));
            }
            return Err(Box::new(self.unknown_tool(ctx, id, catalog, name)));
        };
        if let Some(down) = self
            .upstream(server)
            .and_then(|u| u.unavailable(ctx.session.is_some()))
        {
            return Err(Box::new(Message::error(
                id.cloned(),
                &down.to_error_object(),
            )));
        }
        Ok((server, original))
    }

    /// Whether a call of this tool may be retried: the server's configuration says so, or the
    /// tool's `idempotentHint`.
    pub(crate) fn idempotent(
        &self,
        catalog: &Catalog,
        server: &str,
        original: &str,
        name: &str,
    ) -> bool {
        self.upstream(server)
            .is_some_and(|u| u.def.idempotent_tools.is_match(original))
            || catalog.tool_entry(name).is_some_and(|e| {
                decoded::get(&e.raw, &["annotations", "idempotentHint"])
                    .ok()
                    .flatten()
                    .is_some_and(|v| v.trim() == "true")
            })
    }

    /// The client's answer from what the upstream said: links and embedded resources under
    /// exposed URIs, those the caller may not see taken out, tasks under exposed ids, the size
    /// cap, and the approval and retries in `_meta`; an upstream that failed becomes an
    /// `isError` result saying why.
    pub(crate) fn patched_back(
        &self,
        ctx: &RequestContext,
        id: Option<&Id>,
        (catalog, server): (&Catalog, &str),
        (outcome, retries): (Result<Message, manifold_upstream::UpstreamError>, u32),
        approval: Option<&crate::approval::Granted>,
    ) -> ToolCallAnswer {
        let with_retries = |raw: String| {
            if retries == 0 {
                return raw;
            }
            decoded::set(&raw, &["_meta", RETRIES_META], &retries.to_string()).unwrap_or(raw)
        };
        let response = match outcome {
            Ok(response) => response,
            Err(e) => {
                let why = e.to_string();
                return ToolCallAnswer {
                    message: respond(ctx, id, with_retries(builtin::error_result(&why))),
                    upstream_failure: Some(why),
                    retries,
                };
            }
        };
        let max = self.settings().result_max_bytes;
        let fixed = response.result_raw().map(|r| {
            // Most results name no URI and no task: the walks below would change nothing.
            let linked = if URI.may_be_named_in(r) || TASK_ID.may_be_named_in(r) {
                Cow::Owned(self.links_and_tasks_back(ctx, catalog, server, r))
            } else {
                Cow::Borrowed(r)
            };
            let capped = crate::truncate::cap_tool_result(&linked, max);
            with_retries(with_approval(capped, approval))
        });
        ToolCallAnswer {
            message: reply(ctx, id, &response, fixed),
            upstream_failure: None,
            retries,
        }
    }

    /// A tool result with its links and embedded resources under exposed URIs, those the caller
    /// may not see taken out, and its tasks under exposed ids.
    fn links_and_tasks_back(
        &self,
        ctx: &RequestContext,
        catalog: &Catalog,
        server: &str,
        result: &str,
    ) -> String {
        let namespaced = self.settings().naming.mode != NamingMode::Never;
        let linked = decoded::rewrite_elements(result, &["content"], |el| {
            link_uri_back(catalog, server, el, namespaced)
        })
        .unwrap_or_else(|_| result.to_owned());
        // A link the caller could not follow would still name what it may not see.
        let policy = self.policy();
        let view = policy.for_request(ctx.caller.as_deref(), ctx.toolset.as_deref());
        let linked = match without_hidden_resources(&linked, &["content"], &view, server) {
            Ok(Cow::Owned(filtered)) => filtered,
            _ => linked,
        };
        crate::tasks::expose_in_result(&linked, server)
    }
}

/// What a call that ended without its answer fails with.
fn call_ended(server: &str) -> UpstreamError {
    UpstreamError::Closed {
        server: server.to_owned(),
        cause: "the call ended without an answer".to_owned(),
    }
}

/// A result with the approval a person gave in its `_meta`.
fn with_approval(raw: String, approval: Option<&crate::approval::Granted>) -> String {
    match approval {
        Some(a) => decoded::set(
            &raw,
            &["_meta", crate::approval::APPROVAL_META],
            &a.meta_json(),
        )
        .unwrap_or(raw),
        None => raw,
    }
}

/// A result for the request `id`, finished for the client's era.
pub(crate) fn respond(ctx: &RequestContext, id: Option<&Id>, raw: String) -> Message {
    match id {
        Some(id) => Message::result(id, &finish(ctx, raw)),
        None => error(None, ErrorCode::InvalidRequest, "a request needs an id"),
    }
}

/// The downstream response for an upstream response: same bytes, the client's id.
fn reply(
    ctx: &RequestContext,
    id: Option<&Id>,
    response: &Message,
    fixed: Option<String>,
) -> Message {
    match response.kind() {
        Kind::Result => {
            let raw = fixed.unwrap_or_else(|| response.result_raw().unwrap_or("{}").to_owned());
            match id {
                Some(id) => Message::result(id, &finish(ctx, raw)),
                None => error(None, ErrorCode::InvalidRequest, "a request needs an id"),
            }
        }
        _ => Message::error(
            id.cloned(),
            &response.error_object().unwrap_or_else(|| {
                ErrorObject::new(ErrorCode::InternalError, "unreadable upstream error")
            }),
        ),
    }
}

/// For modern clients, the cache hints the 2026-07-28 revision requires on `resources/read`, when
/// a legacy upstream gave none: private, since what a server returns may depend on who asks.
fn with_cache_hints(ctx: &RequestContext, raw: String) -> String {
    if ctx.client.revision.era() != Era::Modern
        || decoded::get(&raw, &["ttlMs"]).ok().flatten().is_some()
    {
        return raw;
    }
    let with_ttl = decoded::set(&raw, &["ttlMs"], &LIST_TTL_MS.to_string()).unwrap_or(raw);
    decoded::set(&with_ttl, &["cacheScope"], "\"private\"").unwrap_or(with_ttl)
}

/// For modern clients: `resultType` when the upstream (a legacy server) gave none, and Manifold's
/// own `serverInfo` in `_meta`, as the 2026-07-28 revision asks of every result.
fn finish(ctx: &RequestContext, raw: String) -> String {
    if ctx.client.revision.era() != Era::Modern {
        return raw;
    }
    let mut raw = raw;
    if decoded::get(&raw, &["resultType"]).ok().flatten().is_none() {
        raw = decoded::set(&raw, &["resultType"], "\"complete\"").unwrap_or(raw);
    }
    let info = crate::state::server_info_json();
    decoded::set(&raw, &["_meta", manifold_wire::meta::SERVER_INFO], &info).unwrap_or(raw)
}

/// The request with the upstream's own name in `params.name`, or the error response saying why not.
pub(crate) fn renamed(request: &Message, original: &str) -> Result<Message, Box<Message>> {
    request.with_name(original).map_err(|e| {
        Box::new(error(
            request.id(),
            ErrorCode::InvalidParams,
            format!("could not forward: {e}"),
        ))
    })
}

/// What the approval stage made of a call.
pub(crate) enum Staged<'r> {
    /// Go on with this request; the approval, when a person gave one, goes into the result.
    Go(Cow<'r, Message>, Option<crate::approval::Granted>),
    /// The call ends with this raw result (declined, timed out).
    Answer(String),
    /// The call is refused with this message.
    Refuse(Message),
}

fn arguments_of(request: &Message) -> Value {
    request
        .params_raw(&["arguments"])
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or(Value::Object(Default::default()))
}

/// Rewrites the URI of a `resource_link` or embedded `resource` content block to its exposed form.
fn link_uri_back(
    catalog: &Catalog,
    server: &str,
    el: &str,
    namespaced: bool,
) -> Result<Option<String>, patch::PatchError> {
    let path: &[&str] = match decoded::get_str(el, &["type"])?.as_deref() {
        Some("resource_link") => &["uri"],
        Some("resource") => &["resource", "uri"],
        _ => return Ok(None),
    };
    let Some(uri) = decoded::get_str(el, path)? else {
        return Ok(None);
    };
    Ok(Some(decoded::set(
        el,
        path,
        &json_string(&catalog.expose_uri(server, &uri, namespaced)),
    )?))
}

#[derive(Debug, Clone, Copy)]
enum ListOf {
    Tools,
    Prompts,
    Resources,
    Templates,
}

impl ListOf {
    fn member(self) -> &'static str {
        match self {
            ListOf::Tools => "tools",
            ListOf::Prompts => "prompts",
            ListOf::Resources => "resources",
            ListOf::Templates => "resourceTemplates",
        }
    }
}

#[cfg(test)]
mod tests {
    use manifold_wire::{Id, Message, Revision};

    use crate::context::RequestContext;
    use crate::{Gateway, GatewaySettings};

    /// Most bytes the future of one routed request may take, in the layout tests are built with
    /// (a release build's is smaller). The paths few calls take (connecting a session's own
    /// upstream, resuming a held call, waiting for an approval, running a hosted tool) are boxed
    /// where they are taken: inline they made this future 8.6 KB, allocated and copied whole for
    /// every call.
    const MAX_ROUTE_FUTURE_BYTES: usize = 5 * 1024;

    #[tokio::test]
    async fn a_routed_request_s_future_carries_no_rarely_taken_path() {
        let gateway = Gateway::start(GatewaySettings::default(), Vec::new());
        let ctx = RequestContext::silent(Revision::LATEST_LEGACY);
        let request = Message::request(&Id::Num(1), "tools/call", Some(r#"{"name":"x"}"#));
        let routed = gateway.inner.handle_as(&ctx, &request);
        let bytes = std::mem::size_of_val(&routed);
        drop(routed);
        assert!(
            bytes <= MAX_ROUTE_FUTURE_BYTES,
            "a routed request's future takes {bytes} bytes (at most {MAX_ROUTE_FUTURE_BYTES}): \
             box the new await on a path few calls take where it is taken"
        );
        gateway.shutdown().await;
    }
}
