//! The pipeline's stage for hosted tools (`hosted.rs` is the seam): which of them a caller's
//! view lists, whether a name is one, and running a call through the provider with a progress
//! sink for the client.

use std::sync::Arc;

use crate::hosted::{HostedCall, Progress, may_author, name_taken};
use crate::state::Core;

impl Core {
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

impl Core {
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
