//! The seam for tools Manifold hosts beside the server tools: tools that users author at run time
//! (manifold-authored implements [`HostedTools`]; the binary wires it into the settings).
//!
//! The gateway keeps what it does for every tool: listing with pagination and the caller's rules,
//! authorization, `list_changed` to every session, audit and metrics. The provider keeps what is
//! its own: the definitions (stored, versioned), the authoring tools' behaviour and the sandboxed
//! run. Hosted tools are named without a server prefix; a server tool of the same exposed name
//! wins (it is checked at creation, so this only happens when a server adds one later), and the
//! hosted tool stays out of lists until it is renamed.

use std::sync::Arc;

use futures::future::BoxFuture;

/// Tells the client how a call is going (`notifications/progress` with its token); a no-op for a
/// call that sent none.
pub type Progress = Arc<dyn Fn(String) + Send + Sync>;

/// One call of a hosted or authoring tool.
pub struct HostedCall<'a> {
    pub name: &'a str,
    /// The call's `arguments` (an empty object when it sent none).
    pub arguments: serde_json::Value,
    /// Who calls, as audit and history name them: the caller's identity, or `None` when
    /// authentication is off (a local user).
    pub caller: Option<&'a str>,
    pub progress: Progress,
    /// Whether an exposed name is taken by a built-in or a server tool (creation refuses it).
    pub taken: &'a (dyn Fn(&str) -> bool + Send + Sync),
}

/// A hosted tool as lists show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedEntry {
    pub name: String,
    /// Its definition as `tools/list` carries it (raw JSON).
    pub raw: String,
}

/// Tools Manifold hosts itself.
pub trait HostedTools: std::fmt::Debug + Send + Sync + 'static {
    /// Definitions of the authoring tools (raw JSON), in listing order; their names are among
    /// `builtin::AUTHORING`, and they are judged as built-ins.
    fn authoring(&self) -> &[&'static str];
    /// The hosted tools in listing order (most recently changed first).
    fn listed(&self) -> Arc<Vec<HostedEntry>>;
    /// Runs an authoring or hosted tool and settles with its raw result (an `isError` result for
    /// a tool error). Dropping the future cancels the call and kills whatever it started.
    fn call<'a>(&'a self, call: HostedCall<'a>) -> BoxFuture<'a, String>;
    /// Bumped after every change of [`HostedTools::listed`].
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;
}

impl crate::gateway::Gateway {
    /// The hosted tools the caller may see, in listing order: the authoring tools first, then the
    /// hosted ones no server tool shadows. Empty without a provider.
    pub(crate) fn hosted_visible(
        &self,
        view: &crate::policy::CallerRules<'_>,
        caller: Option<&crate::context::Caller>,
    ) -> Vec<String> {
        use crate::policy::ItemKind;
        let Some(hosted) = &self.settings().hosted else {
            return Vec::new();
        };
        let catalog = self.catalog();
        let mut out: Vec<String> = hosted
            .authoring()
            .iter()
            .zip(crate::builtin::AUTHORING)
            .filter(|(_, name)| view.sees(ItemKind::Tool, None, name))
            .filter(|(_, name)| may_author(view, caller, name))
            .map(|(raw, _)| (*raw).to_owned())
            .collect();
        out.extend(
            hosted
                .listed()
                .iter()
                .filter(|e| catalog.tool(&e.name).is_none())
                .filter(|e| view.sees(ItemKind::Tool, None, &e.name))
                .map(|e| e.raw.clone()),
        );
        out
    }

    /// Whether `name` is a hosted tool (authoring, or listed and not shadowed by a server tool
    /// of `catalog`, the one the request is judged with). A server tool's call pays one lookup
    /// in the catalog it already holds.
    pub(crate) fn is_hosted(&self, catalog: &crate::catalog::build::Catalog, name: &str) -> bool {
        let Some(hosted) = &self.settings().hosted else {
            return false;
        };
        crate::builtin::AUTHORING.contains(&name)
            || (catalog.tool(name).is_none() && hosted.listed().iter().any(|e| e.name == name))
    }
}

/// Whether the caller may use the authoring tool `name`: anyone when authentication is off (the
/// gateway then listens on loopback only), an authenticated caller only when a rule allows the
/// tool by name. The read-only ones (the instructions, a tool's history) are open to everyone
/// who sees them, as the authored tools themselves are.
pub(crate) fn may_author(
    view: &crate::policy::CallerRules<'_>,
    caller: Option<&crate::context::Caller>,
    name: &str,
) -> bool {
    name == crate::builtin::INSTRUCTIONS
        || name == crate::builtin::TOOL_HISTORY
        || caller.is_none()
        || view.explicitly_allows(crate::policy::ItemKind::Tool, None, name)
}

impl crate::gateway::Gateway {
    /// Runs a hosted or authoring tool the caller may use; `Err` is the refusal to send instead.
    pub(crate) async fn call_hosted(
        &self,
        ctx: &crate::context::RequestContext,
        request: &manifold_wire::Message,
        name: &str,
    ) -> Result<String, Box<manifold_wire::Message>> {
        let Some(hosted) = self.settings().hosted.clone() else {
            return Err(Box::new(self.unknown_tool(
                ctx,
                request.id(),
                &self.catalog(),
                name,
            )));
        };
        if crate::builtin::AUTHORING.contains(&name) {
            let policy = self.policy();
            let view = policy.for_request(ctx.caller.as_deref(), ctx.toolset.as_deref());
            if !may_author(&view, ctx.caller.as_deref(), name) {
                ctx.audit
                    .refusal(manifold_telemetry::audit::AuditOutcome::RefusedByPolicy);
                return Err(Box::new(manifold_wire::Message::error(
                    request.id().cloned(),
                    &manifold_wire::ErrorObject::new(
                        manifold_wire::ErrorCode::Forbidden,
                        format!(
                            "{name} is refused to authenticated callers unless a rule allows it by name; add [[rules]] with effect = \"allow\" and tools = [\"{name}\"] (or \"manifold_*_tool\") for this identity"
                        ),
                    ),
                )));
            }
        }
        let arguments = request
            .params_raw(&["arguments"])
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_else(|| serde_json::Value::Object(Default::default()));
        let catalog = self.catalog();
        let taken = move |candidate: &str| name_taken(&catalog, candidate);
        let call = HostedCall {
            name,
            arguments,
            caller: ctx.caller.as_ref().map(|c| c.name.as_str()),
            progress: progress_for(ctx, request),
            taken: &taken,
        };
        Ok(hosted.call(call).await)
    }
}

/// Whether `candidate` is the name of a built-in or of a server tool in `catalog`: an authored
/// tool may not take it (the gateway's authoring calls and the dashboard's ask the same).
pub fn name_taken(catalog: &crate::catalog::build::Catalog, candidate: &str) -> bool {
    crate::builtin::NAMES.contains(&candidate) || catalog.tool(candidate).is_some()
}

/// Progress notifications for `request`, numbered from 1, when it sent a progress token.
fn progress_for(
    ctx: &crate::context::RequestContext,
    request: &manifold_wire::Message,
) -> Progress {
    let Some(token) = request
        .params_raw(&["_meta", "progressToken"])
        .map(str::to_owned)
    else {
        return Arc::new(|_| {});
    };
    let peer = Arc::clone(&ctx.peer);
    let sent = std::sync::atomic::AtomicU64::new(0);
    Arc::new(move |message: String| {
        let progress = sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let params = serde_json::json!({ "progress": progress, "message": message }).to_string();
        let params =
            manifold_wire::patch::set(&params, &["progressToken"], &token).unwrap_or(params);
        peer.notify(manifold_wire::Message::notification(
            "notifications/progress",
            Some(&params),
        ));
    })
}
