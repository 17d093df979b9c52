//! One `tools/call` through the gateway, stage by stage, top to bottom. Each stage is a call to
//! the file that owns it; what a stage needs it takes as arguments or from `Core`, and what it
//! decides comes back as its value. Around this function: `call_record.rs` (the call id,
//! metrics and log line) and `audit.rs` (the trail's row), which read the `ToolCallAnswer` it
//! returns (defined with the stages that build it, `router.rs`); before it, `admit` (`policy/gates.rs`) and the dispatch by method (`router.rs`).
//!
//! 1. authorize: the caller's rules (`policy/gates.rs`, `gate_tool_call`);
//! 2. answer Manifold's own tools: built-in (`builtin.rs`) and hosted (`hosted_calls.rs`);
//! 3. resolve: the exposed name to its server and the name there (`router.rs`, `resolve_tool`);
//! 4. approve: a call an ask rule matched waits for a person (`approval/stage.rs`);
//! 5. forward: renamed, with trace context and the caller's token, retried when idempotent
//!    (`router.rs`, `forward_with_retries`; `call_record.rs`, `forward`); or, for a read-only,
//!    idempotent tool of a server with a `cache_ttl`, the answer its server gave this caller for
//!    these arguments a moment ago (`result_cache.rs`), and a fresh answer kept for next time;
//! 6. patch back: exposed URIs, hidden resources out, the size cap, `_meta` notes
//!    (`router.rs`, `patched_back`).

use manifold_wire::{ErrorCode, Message};

use crate::result_cache::{Cacheable, ToolCall};
use crate::router::{Staged, ToolCallAnswer, error, renamed, respond};
use crate::state::Core;

impl Core {
    /// One `tools/call`, through the stages above.
    pub(crate) async fn call_tool(
        &self,
        ctx: &crate::context::RequestContext,
        request: &Message,
    ) -> ToolCallAnswer {
        let id = request.id();
        let Some(name) = request.params_str(&["name"]) else {
            return error(id, ErrorCode::InvalidParams, "tools/call needs params.name").into();
        };
        let catalog = self.catalog();
        // 1. Authorize.
        let ask = match self.gate_tool_call(ctx, id, &catalog, &name) {
            Ok(ask) => ask,
            Err(refusal) => return (*refusal).into(),
        };
        // 2. Manifold's own tools.
        if let Some(answer) = self
            .own_tool(ctx, request, &catalog, &name, ask.clone())
            .await
        {
            return answer;
        }
        // 3. Resolve.
        let (server, original) = match self.resolve_tool(ctx, id, &catalog, &name) {
            Ok(found) => found,
            Err(refusal) => return (*refusal).into(),
        };
        // 4. Approve.
        let upstream = self.upstream(server);
        let cap = upstream.as_ref().and_then(|u| u.def.max_timeout);
        let definition = catalog.tool_entry(&name).map(|e| e.raw.as_str());
        let staged = self
            .stage(ctx, request, ask, server, &name, definition, cap)
            .await;
        let (request, approval) = match staged {
            Staged::Go(request, approval) => (request, approval),
            Staged::Answer(raw) => return respond(ctx, id, raw).into(),
            Staged::Refuse(refusal) => return refusal.into(),
        };
        // 5. Forward, or answer from the result cache.
        let cacheable = upstream.as_deref().and_then(|u| {
            let call = (server, original, name.as_str());
            self.cache_part(ctx, &catalog, &request, u, call, approval.is_some())
        });
        if let Some(c) = &cacheable
            && let Some((kept, age)) = self.results.get(&c.key, c.asked)
        {
            self.settings().telemetry.metrics.result_cache_hit(server);
            let kept = crate::result_cache::marked_as_kept(&kept, age);
            return self.patched_back(ctx, id, (&catalog, server), (Ok(kept), 0), None);
        }
        let outgoing = match renamed(&request, original) {
            Ok(m) => m,
            Err(refusal) => return (*refusal).into(),
        };
        let idempotent = || self.idempotent(&catalog, server, original, &name);
        let forwarded = self
            .forward_with_retries(ctx, server, &outgoing, idempotent)
            .await;
        if let (Some(c), (Ok(response), _)) = (&cacheable, &forwarded) {
            self.results
                .put(c.key, response, (c.ttl, c.asked, c.generation));
        }
        // 6. Patch back.
        self.patched_back(ctx, id, (&catalog, server), forwarded, approval.as_ref())
    }

    /// The result cache's part in a call (`result_cache.rs`): `None`, after one test, for a
    /// server without `cache_ttl`, and for a call the cache may not answer.
    fn cache_part(
        &self,
        ctx: &crate::context::RequestContext,
        catalog: &crate::catalog::build::Catalog,
        request: &Message,
        upstream: &crate::upstream::Upstream,
        (server, original, name): (&str, &str, &str),
        approved: bool,
    ) -> Option<Cacheable> {
        let ttl = upstream.def.result_cache_ttl?;
        let call = ToolCall {
            ttl,
            session_scoped: upstream.def.scope == crate::upstream::Scope::Session,
            approved,
            caller: ctx.caller.as_deref().map(|c| c.name.as_str()),
            server,
            original,
            definition: catalog.tool_entry(name).map(|e| e.raw.as_str()),
            arguments: request.params_raw(&["arguments"]).unwrap_or("{}"),
        };
        self.results
            .cacheable(&call, || self.idempotent(catalog, server, original, name))
    }
}
