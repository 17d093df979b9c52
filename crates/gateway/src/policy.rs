//! Who may see and call what: the configuration's rules, compiled once, applied to every list and
//! gating every call, together with the rate limits (`rate_limit.rs`) and the record of who
//! started which task.
//!
//! The semantics, which docs/security.md ("Authorization") states for operators:
//! - **First match.** Rules are tried in file order; the first rule that applies to the caller and
//!   covers the item decides. When none does, the item is allowed, so a configuration without
//!   rules behaves as one without this module; an allowlist ends with a catch-all deny.
//! - **Subjects.** A rule that names no `identities`, `groups`, `scopes` and not `anonymous`
//!   applies to every caller. Otherwise it applies when the caller's name is in `identities`
//!   (`"*"`: any authenticated caller), or one of its groups is in `groups`, or one of its scopes in
//!   `scopes`, or, for a request without an identity (authentication off), when `anonymous = true`.
//!   Identities, groups and scopes never match an anonymous caller.
//! - **Objects.** `servers` restricts a rule to those servers' items. A rule that names none of
//!   `tools`, `resources`, `prompts` covers every item (of its servers); one that names some
//!   covers only items of those kinds whose exposed name (tools, prompts) or exposed URI
//!   (resources, resource templates' `uriTemplate`) one of its glob patterns matches. Built-in
//!   tools belong to no server: only rules without `servers` cover them.
//! - **Hidden means unknown.** A denied item is left out of every list (tools, prompts,
//!   resources, templates, each page, the built-in search and health) and a request naming it is
//!   answered exactly as one naming something that does not exist: same code, same message, and
//!   "did you mean" drawn only from what the caller sees. The answer depends on the rules and the
//!   name, never on whether the item exists, so rules are no oracle for hidden names.
//! - **Explained denials.** A deny rule with `explain = true` instead answers -32007 (Forbidden)
//!   naming the rule: the operator chose to let callers know the item exists.
//! - **Tasks.** With rules configured, a task can be followed (`tasks/*`) only by the identity that
//!   started it and only while that identity may still call the tool that started it; a task
//!   Manifold did not see start (another process, a restart, older than the last
//!   [`MAX_TRACKED_TASKS`]) is unknown.
//!
//! Every request reads the rules in force at that moment, so items a `list_changed` brings in,
//! and rules a reload brings in ([`Gateway::reconfigure_with`], with its servers, or
//! [`Gateway::replace_access`]), apply before anything is served.
//! With no rules and no limits configured nothing here allocates.

mod access;
mod gates;
mod rules;

pub(crate) use access::Access;
pub use access::MAX_TRACKED_TASKS;
pub(crate) use gates::{NO_COMPLETION_TARGET, resource_target};
pub use rules::{
    ASK_ANNOTATIONS, Approver, AskRule, CallerRules, Decision, Effect, ItemKind, Policy,
    PolicyError, RuleRef, RuleSpec, Toolset, ToolsetRefusal, ToolsetSpec,
};

#[cfg(test)]
mod tests;
