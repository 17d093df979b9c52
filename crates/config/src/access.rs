//! Who may see and call what, and how often: the `[[rules]]` and `[rate_limits]` sections as
//! typed values. Loading validates them (servers that exist, patterns that compile, rates that
//! make sense); the gateway compiles the patterns again into its own matcher, with the same
//! options, and docs/security.md says what the rules mean.

use std::time::Duration;

/// What a rule does to the items it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleEffect {
    Allow,
    Deny,
    /// A person approves each call first (`[approvals]`, docs/security.md "Approvals").
    Ask,
}

/// Who may answer an ask rule's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approver {
    /// The caller of the held call, when its client can be asked (or through `manifold approvals`).
    Caller,
    /// Any identity in this group.
    Group(String),
    /// This identity.
    Identity(String),
}

impl Approver {
    /// `caller`, `group:NAME`, `identity:NAME`: as written in the configuration and the ledger.
    pub fn as_text(&self) -> String {
        match self {
            Approver::Caller => "caller".to_owned(),
            Approver::Group(g) => format!("group:{g}"),
            Approver::Identity(i) => format!("identity:{i}"),
        }
    }
}

/// Tool annotations an ask rule may require (any one of them `true`).
pub const ASK_ANNOTATIONS: &[&str] = &[
    "destructiveHint",
    "openWorldHint",
    "readOnlyHint",
    "idempotentHint",
];

/// One `[[rules]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRule {
    /// Position in the file, counted from 0 (`rules[0]` is the first), as errors name it.
    pub index: usize,
    pub name: Option<String>,
    pub effect: RuleEffect,
    /// Deny rules only: a call answers Forbidden naming the rule, instead of "unknown".
    pub explain: bool,
    /// Caller names; `"*"` is any authenticated caller.
    pub identities: Vec<String>,
    pub groups: Vec<String>,
    pub scopes: Vec<String>,
    /// Matches requests that carry no identity (authentication off).
    pub anonymous: bool,
    /// Server names the rule is limited to; empty: every server, and the built-in tools.
    pub servers: Vec<String>,
    /// Glob patterns over exposed tool names.
    pub tools: Vec<String>,
    /// Glob patterns over exposed resource URIs and URI templates.
    pub resources: Vec<String>,
    /// Glob patterns over exposed prompt names.
    pub prompts: Vec<String>,
    /// Ask rules only: who may answer; never empty for an ask rule (default `[Caller]`).
    pub approvers: Vec<Approver>,
    /// Ask rules only: the rule covers a tool only when one of these annotations is `true` in
    /// its (pinned) definition; empty: every tool it names.
    pub annotations: Vec<String>,
}

/// `count` requests per `period`, bursting up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub count: u32,
    pub period: Duration,
    pub burst: u32,
}

/// One `[[rate_limits.tools]]` entry: a limit for the tools its patterns match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRateLimit {
    /// Glob patterns over exposed tool names.
    pub patterns: Vec<String>,
    pub limit: RateLimit,
}

/// The `[rate_limits]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Every request of one identity except `ping` and the lists.
    pub per_identity: Option<RateLimit>,
    /// Calls of one identity to one server tool, unless a `tools` entry matches the tool.
    pub per_tool: Option<RateLimit>,
    /// Tried in order before `per_tool`; the first match wins.
    pub tools: Vec<ToolRateLimit>,
}

impl RateLimits {
    pub fn is_empty(&self) -> bool {
        self.per_identity.is_none() && self.per_tool.is_none() && self.tools.is_empty()
    }
}
