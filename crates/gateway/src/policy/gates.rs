//! The gates every request passes: rate limits first, then the rules deciding what the caller
//! may see (lists) and call (tools, prompts, resources, completions, tasks), each refusal
//! answered as the module's semantics say (hidden means unknown; explained denials name their
//! rule) and noted for the audit row.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use manifold_telemetry::audit::AuditOutcome;
use manifold_wire::patch;
use manifold_wire::{ErrorCode, ErrorObject, Id, Message};

use super::access::TaskOwner;
use super::rules::{AskRule, Decision, ItemKind, Policy, RuleRef};
use crate::builtin;
use crate::catalog::build::{Catalog, Entry};
use crate::catalog::uri_normal;
use crate::context::{RequestContext, RequestNotes};
use crate::events::GatewayEvent;
use crate::rate_limit::{Exceeded, RateLimiter, RateLimits, Who, human_wait};
use crate::state::Core;

/// The answer `completion/complete` gets when it names nothing the caller may use.
pub(crate) const NO_COMPLETION_TARGET: &str =
    "completion/complete names no prompt or resource Manifold offers";

fn who(ctx: &RequestContext) -> Who<'_> {
    match &ctx.caller {
        Some(c) => Who::Identity(&c.name),
        None => Who::Anonymous,
    }
}

fn error(id: Option<&Id>, code: ErrorCode, message: impl Into<String>) -> Message {
    Message::error(id.cloned(), &ErrorObject::new(code, message))
}

fn with_data(object: ErrorObject, data: serde_json::Value) -> ErrorObject {
    match serde_json::value::RawValue::from_string(data.to_string()) {
        Ok(raw) => object.with_data(raw),
        Err(_) => object,
    }
}

/// Forbidden, naming the explaining rule.
fn refused(
    id: Option<&Id>,
    ctx: &RequestContext,
    what: &str,
    name: &str,
    rule: &RuleRef,
) -> Message {
    ctx.audit.refusal(AuditOutcome::RefusedByPolicy);
    let message = format!(
        "{what} {name:?} is not allowed for {} by {}",
        who(ctx).describe(),
        rule.label()
    );
    let data = serde_json::json!({ "rule": { "index": rule.index, "name": rule.name } });
    Message::error(
        id.cloned(),
        &with_data(ErrorObject::new(ErrorCode::Forbidden, message), data),
    )
}

/// The answer to a `resources/*` request naming a URI the caller cannot use: one the rules hide
/// or one that belongs to no server, the same bytes either way.
fn resource_not_found(id: Option<&Id>, uri: &str) -> Message {
    error(
        id,
        ErrorCode::InvalidParams,
        format!("resource not found: {uri:?}; resources/list shows what is offered"),
    )
}

/// The server of a requested URI and the URI to send it: the listed original when `uri` is
/// exactly a listed one, else the normal form's (so what the rules judged is what is served).
pub(crate) fn resource_target(catalog: &Catalog, uri: &str) -> Option<(Arc<str>, String)> {
    if catalog.lists_resource(uri) {
        return catalog.resource(uri);
    }
    catalog.resource(&uri_normal::normal_form(uri))
}

/// Overloaded, with the wait in `data.retryAfterMs`.
fn rate_limited(
    notes: &RequestNotes,
    id: Option<&Id>,
    who: Who<'_>,
    tool: Option<&str>,
    e: &Exceeded,
) -> Message {
    notes.refusal(AuditOutcome::RateLimited);
    let allowed = match tool {
        Some(tool) => e.limit.describe("call", Some(tool)),
        None => e.limit.describe("request", None),
    };
    let message = format!(
        "rate limit exceeded: {} may make {allowed} ({}); retry in {}",
        who.describe(),
        e.limit_key,
        human_wait(e.retry_after)
    );
    let data = serde_json::json!({ "retryAfterMs": e.retry_after_ms(), "limit": e.limit_key });
    Message::error(
        id.cloned(),
        &with_data(ErrorObject::new(ErrorCode::Overloaded, message), data),
    )
}

impl Core {
    /// The rules in force now.
    pub fn policy(&self) -> Arc<Policy> {
        self.access.policy()
    }

    /// The rate limits in force now, with their buckets.
    pub fn rate_limiter(&self) -> Arc<RateLimiter> {
        self.access.limiter()
    }

    /// Puts new rules and limits in force (a configuration reload): the next request is judged by
    /// them, every bucket starts full, and sessions are told that every list may have changed.
    pub fn replace_access(&self, rules: Policy, rate_limits: RateLimits) {
        self.install_access(rules, rate_limits);
        for event in [
            GatewayEvent::ToolsChanged,
            GatewayEvent::PromptsChanged,
            GatewayEvent::ResourcesChanged,
        ] {
            let _ = self.events.send(event);
        }
    }

    /// Puts new rules and limits in force without telling sessions: a reload tells them once,
    /// with the catalog it rebuilds (`reconfigure.rs`).
    pub(crate) fn install_access(&self, rules: Policy, rate_limits: RateLimits) {
        self.access.replace(rules, rate_limits);
    }

    /// Counts a request against its caller's `rate_limits.per_identity`. `ping` and the lists
    /// are answered from memory and are not counted.
    pub(crate) fn admit(
        &self,
        ctx: &RequestContext,
        request: &Message,
        method: &str,
    ) -> Option<Message> {
        if matches!(
            method,
            "ping" | "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list"
        ) {
            return None;
        }
        let limiter = self.access.limiter();
        if limiter.is_off() {
            return None;
        }
        let who = who(ctx);
        limiter
            .check_identity(who, Instant::now())
            .err()
            .map(|e| rate_limited(&ctx.audit, request.id(), who, None, &e))
    }

    /// Judges a `tools/call` of the exposed (or built-in) `name` before anything runs: a hidden
    /// tool is answered as unknown, an explained denial as Forbidden, a call over its tool limit
    /// as Overloaded (`Err`). `Ok(Some)`: an ask rule holds it for approval; `Ok(None)`: go on
    /// (an unknown name is the router's to answer).
    pub(crate) fn gate_tool_call(
        &self,
        ctx: &RequestContext,
        id: Option<&Id>,
        catalog: &Catalog,
        name: &str,
    ) -> Result<Option<AskRule>, Box<Message>> {
        let policy = self.access.policy();
        let limiter = self.access.limiter();
        if policy.is_empty() && limiter.is_off() {
            return Ok(None);
        }
        // Hosted tools (authored in Manifold) have no server: rules judge them by name, as
        // built-ins.
        let is_builtin = builtin::NAMES.contains(&name) || self.is_hosted(catalog, name);
        let server = if is_builtin {
            None
        } else {
            // A withheld tool (pins) is judged like any other, so that its own refusal, which
            // says it exists, reaches only callers who may see it.
            let withheld = || {
                catalog
                    .withheld_tools()
                    .find(|(exposed, _)| *exposed == name)
                    .map(|(_, change)| change.server.as_str())
            };
            match catalog.tool(name).map(|(s, _)| s).or_else(withheld) {
                Some(server) => Some(server),
                None => return Ok(None),
            }
        };
        let definition = catalog.tool_entry(name).map(|e| e.raw.as_str());
        let ask = match policy
            .for_request(ctx.caller.as_deref(), ctx.toolset.as_deref())
            .decide_tool(server, name, definition)
        {
            Decision::Allow => None,
            Decision::Ask(ask) => Some(ask),
            Decision::Hide => {
                ctx.audit.refusal(AuditOutcome::RefusedByPolicy);
                return Err(Box::new(self.unknown_tool(ctx, id, catalog, name)));
            }
            Decision::Refuse(rule) => {
                return Err(Box::new(refused(
                    id,
                    ctx,
                    ItemKind::Tool.noun(),
                    name,
                    &rule,
                )));
            }
        };
        // Built-in tools run in Manifold; the tool manifold_call_tool reaches is counted itself.
        // An ask can only have matched an authoring tool that changes code (`covers`). Authored
        // tools run code, so their calls count against the tool limits like a server's.
        if builtin::NAMES.contains(&name) {
            return Ok(ask);
        }
        let who = who(ctx);
        match limiter.check_tool(who, name, Instant::now()) {
            Ok(()) => Ok(ask),
            Err(e) => Err(Box::new(rate_limited(&ctx.audit, id, who, Some(name), &e))),
        }
    }

    /// For `manifold_health`: each upstream the caller may know of, with the number of its tools
    /// the caller sees; `None` when no rule applies to the caller (show everything).
    pub(crate) fn visible_servers(&self, ctx: &RequestContext) -> Option<HashMap<String, usize>> {
        let policy = self.access.policy();
        let view = policy.for_request(ctx.caller.as_deref(), ctx.toolset.as_deref());
        if view.is_unrestricted() {
            return None;
        }
        let catalog = self.catalog();
        let mut out = HashMap::new();
        for u in self.upstreams().iter() {
            let server = u.def.name.as_str();
            let of_server = |e: &&Entry| &*e.server == server;
            let tools = (catalog.tools.iter().filter(of_server))
                .filter(|e| view.sees_entry(ItemKind::Tool, e))
                .count();
            let other = (catalog.prompts.iter().filter(of_server))
                .any(|e| view.sees_entry(ItemKind::Prompt, e))
                || (catalog.resources.iter().chain(&catalog.templates))
                    .filter(of_server)
                    .any(|e| view.sees_entry(ItemKind::Resource, e));
            if tools > 0 || other || view.sees_whole_server(server) {
                out.insert(server.to_owned(), tools);
            }
        }
        Some(out)
    }

    /// The answer to a call of a tool that does not exist, or that this caller cannot see: the
    /// same either way, with a suggestion drawn only from the tools the caller sees.
    pub(crate) fn unknown_tool(
        &self,
        ctx: &RequestContext,
        id: Option<&Id>,
        catalog: &Catalog,
        name: &str,
    ) -> Message {
        let policy = self.access.policy();
        let view = policy.for_request(ctx.caller.as_deref(), ctx.toolset.as_deref());
        let visible = catalog.tool_names().filter(|n| {
            view.is_unrestricted()
                || catalog
                    .tool(n)
                    .is_some_and(|(s, _)| view.sees(ItemKind::Tool, Some(s), n))
        });
        let hint = crate::catalog::suggest::closest(name, visible)
            .map(|n| format!("; did you mean {n:?}?"))
            .unwrap_or_else(|| {
                "; tools/list (or manifold_search_tools) shows what is offered".to_owned()
            });
        // A tool of a server that is not running (it never started, or was refused, say for an
        // unmet sandbox `require`) is unknown because its list is: say why, to callers who may
        // see that server.
        let down = self.upstreams().iter().find_map(|u| {
            let prefix = format!("{}{}", u.def.prefix, crate::catalog::naming::PREFIX_SEPARATOR);
            let status = u.status();
            (name.starts_with(&prefix)
                && matches!(
                    status,
                    crate::upstream::Status::Down { .. } | crate::upstream::Status::CrashLoop { .. }
                )
                && view.sees(ItemKind::Tool, Some(&u.def.name), name))
            .then(|| {
                let why = u
                    .last_error()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default();
                format!(
                    "; the server {:?} that would offer it is not running{why}; manifold_health shows its state",
                    u.def.name
                )
            })
        });
        error(
            id,
            ErrorCode::InvalidParams,
            format!("unknown tool {name:?}{}", down.unwrap_or(hint)),
        )
    }

    /// The (server, original name) of a prompt this caller may get, or the answer refusing it.
    pub(crate) fn resolve_prompt(
        &self,
        ctx: &RequestContext,
        id: Option<&Id>,
        catalog: &Catalog,
        name: &str,
    ) -> Result<(String, String), Box<Message>> {
        let unknown = || {
            Box::new(error(
                id,
                ErrorCode::InvalidParams,
                format!("unknown prompt {name:?}; prompts/list shows what is offered"),
            ))
        };
        let (server, original) = catalog.prompt(name).ok_or_else(unknown)?;
        match self.decide(ctx, ItemKind::Prompt, Some(server), name) {
            Decision::Allow | Decision::Ask(_) => {
                ctx.audit.target(server, original);
                Ok((server.to_owned(), original.to_owned()))
            }
            Decision::Hide => {
                ctx.audit.refusal(AuditOutcome::RefusedByPolicy);
                Err(unknown())
            }
            Decision::Refuse(rule) => Err(Box::new(refused(
                id,
                ctx,
                ItemKind::Prompt.noun(),
                name,
                &rule,
            ))),
        }
    }

    /// The (server, URI to send upstream) of a resource this caller may use, or the answer
    /// refusing it. The URI sent is the listed original when `uri` is exactly a listed one, and
    /// otherwise the normal form of `uri` (what the rules judged). A hidden URI, and one that
    /// belongs to no server, get one answer, byte for byte, whatever exists there.
    pub(crate) fn resolve_resource(
        &self,
        ctx: &RequestContext,
        id: Option<&Id>,
        catalog: &Catalog,
        uri: &str,
    ) -> Result<(Arc<str>, String), Box<Message>> {
        let not_found = || Box::new(resource_not_found(id, uri));
        let (server, original) = resource_target(catalog, uri).ok_or_else(not_found)?;
        match self.decide(ctx, ItemKind::Resource, Some(&server), uri) {
            Decision::Allow | Decision::Ask(_) => {
                ctx.audit.target(&server, &original);
                Ok((server, original))
            }
            Decision::Hide => {
                ctx.audit.refusal(AuditOutcome::RefusedByPolicy);
                Err(not_found())
            }
            Decision::Refuse(rule) => Err(Box::new(refused(
                id,
                ctx,
                ItemKind::Resource.noun(),
                uri,
                &rule,
            ))),
        }
    }

    /// Judges the prompt or resource a `completion/complete` names; `None`: go on.
    pub(crate) fn gate_completion(
        &self,
        ctx: &RequestContext,
        request: &Message,
        catalog: &Catalog,
    ) -> Option<Message> {
        if self.access.policy().is_empty() {
            return None;
        }
        let id = request.id();
        let kind = request.params_str(&["ref", "type"])?;
        let (item, server, name) = match kind.as_str() {
            "ref/prompt" => {
                let name = request.params_str(&["ref", "name"])?;
                let server = catalog.prompt(&name)?.0.to_owned();
                (ItemKind::Prompt, server, name)
            }
            "ref/resource" => {
                let uri = request.params_str(&["ref", "uri"])?;
                let server = resource_target(catalog, &uri)?.0.to_string();
                (ItemKind::Resource, server, uri)
            }
            _ => return None,
        };
        match self.decide(ctx, item, Some(&server), &name) {
            Decision::Allow | Decision::Ask(_) => None,
            Decision::Hide => Some(error(id, ErrorCode::InvalidParams, NO_COMPLETION_TARGET)),
            Decision::Refuse(rule) => Some(refused(id, ctx, item.noun(), &name, &rule)),
        }
    }

    /// Judges a `tasks/*` request for the exposed task id; `None`: go on.
    pub(crate) fn gate_task(
        &self,
        ctx: &RequestContext,
        id: Option<&Id>,
        exposed: &str,
    ) -> Option<Message> {
        if self.access.policy().is_empty() {
            return None;
        }
        let unknown = || {
            error(
                id,
                ErrorCode::InvalidParams,
                format!(
                    "unknown task {exposed:?}: Manifold knows no task by that id for this caller"
                ),
            )
        };
        let Some(owner) = self.access.task_owner(exposed) else {
            return Some(unknown());
        };
        if owner.caller.as_deref() != ctx.caller.as_deref().map(|c| c.name.as_str()) {
            return Some(unknown());
        }
        match self.decide(ctx, ItemKind::Tool, Some(&owner.server), &owner.tool) {
            // Following a task reads its progress; the call that started it was approved.
            Decision::Allow | Decision::Ask(_) => None,
            Decision::Hide => Some(unknown()),
            Decision::Refuse(rule) => Some(refused(id, ctx, "the task's tool", &owner.tool, &rule)),
        }
    }

    /// Remembers who started the task a `tools/call` answered with, if it did (rules configured
    /// and the client declared the tasks extension; otherwise nothing is read).
    pub(crate) fn note_task(&self, ctx: &RequestContext, request: &Message, response: &Message) {
        if self.access.policy().is_empty()
            || !ctx.client.declares_extension(crate::tasks::EXTENSION)
        {
            return;
        }
        let Some(raw) = response.result_raw() else {
            return;
        };
        let task = [&["taskId"][..], &["task", "taskId"][..]]
            .into_iter()
            .find_map(|path| patch::get_str(raw, path).ok().flatten());
        let Some(task) = task else {
            return;
        };
        let Some(mut tool) = request.params_str(&["name"]) else {
            return;
        };
        if tool == builtin::CALL {
            match request.params_str(&["arguments", "name"]) {
                Some(target) => tool = target,
                None => return,
            }
        }
        let Some(server) = self.catalog().tool(&tool).map(|(s, _)| s.to_owned()) else {
            return;
        };
        let owner = TaskOwner {
            server,
            tool,
            caller: ctx.caller.as_ref().map(|c| c.name.clone()),
        };
        self.access.record_task(task, owner);
    }

    fn decide(
        &self,
        ctx: &RequestContext,
        kind: ItemKind,
        server: Option<&str>,
        name: &str,
    ) -> Decision {
        let policy = self.access.policy();
        if policy.is_empty() {
            return Decision::Allow;
        }
        policy
            .for_request(ctx.caller.as_deref(), ctx.toolset.as_deref())
            .decide(kind, server, name)
    }
}
