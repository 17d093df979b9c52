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

/// Whether `candidate` is the name of a built-in or of a server tool in `catalog`: an authored
/// tool may not take it (the gateway's authoring calls and the dashboard's ask the same).
pub fn name_taken(catalog: &crate::catalog::build::Catalog, candidate: &str) -> bool {
    crate::builtin::NAMES.contains(&candidate) || catalog.tool(candidate).is_some()
}
