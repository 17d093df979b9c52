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

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use globset::GlobSet;
use manifold_telemetry::audit::AuditOutcome;
use manifold_wire::patch;
use manifold_wire::{ErrorCode, ErrorObject, Id, Message};

use crate::builtin;
use crate::catalog::build::{Catalog, Entry};
use crate::catalog::uri_normal;
use crate::context::{Caller, RequestContext, RequestNotes};
use crate::gateway::{Gateway, GatewayEvent, GatewaySettings};
use crate::rate_limit::{Exceeded, RateLimiter, RateLimits, Who, compile_globs, human_wait};

/// Tasks remembered with the identity and tool that started them; the oldest are forgotten first.
pub const MAX_TRACKED_TASKS: usize = 10_000;

/// The answer `completion/complete` gets when it names nothing the caller may use.
pub(crate) const NO_COMPLETION_TARGET: &str =
    "completion/complete names no prompt or resource Manifold offers";

/// What a rule does to what it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Allow,
    Deny,
    /// A person approves each call first (`approval/`): tools only, and never built-in ones.
    Ask,
}

/// Who may answer an ask rule's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approver {
    /// The held call's own caller.
    Caller,
    Group(String),
    Identity(String),
}

impl Approver {
    /// `caller`, `group:NAME`, `identity:NAME`, as configured and as the ledger keeps it.
    pub fn as_text(&self) -> String {
        match self {
            Approver::Caller => "caller".to_owned(),
            Approver::Group(g) => format!("group:{g}"),
            Approver::Identity(i) => format!("identity:{i}"),
        }
    }
}

/// One rule as configured, before its patterns are compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// Position in the configuration (`rules[N]`, counted from 0 like every field path).
    pub index: usize,
    pub name: Option<String>,
    pub effect: Effect,
    /// Deny rules only: answer Forbidden naming the rule instead of "unknown".
    pub explain: bool,
    pub identities: Vec<String>,
    pub groups: Vec<String>,
    pub scopes: Vec<String>,
    pub anonymous: bool,
    pub servers: Vec<String>,
    /// Glob patterns over exposed tool names.
    pub tools: Vec<String>,
    /// Glob patterns over exposed resource URIs and URI templates.
    pub resources: Vec<String>,
    /// Glob patterns over exposed prompt names.
    pub prompts: Vec<String>,
    /// Ask rules: who may answer.
    pub approvers: Vec<Approver>,
    /// Ask rules: the rule covers a tool only when one of these annotations is `true` in its
    /// definition; empty: every tool it names.
    pub annotations: Vec<String>,
}

impl RuleSpec {
    /// A rule at `index` that covers everything and applies to everyone.
    pub fn new(index: usize, effect: Effect) -> RuleSpec {
        RuleSpec {
            index,
            name: None,
            effect,
            explain: false,
            identities: Vec::new(),
            groups: Vec::new(),
            scopes: Vec::new(),
            anonymous: false,
            servers: Vec::new(),
            tools: Vec::new(),
            resources: Vec::new(),
            prompts: Vec::new(),
            approvers: Vec::new(),
            annotations: Vec::new(),
        }
    }

    /// `rule "no-push" (rules[2])`, or `rules[2]` for an unnamed rule.
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("rule {name:?} (rules[{}])", self.index),
            None => format!("rules[{}]", self.index),
        }
    }
}

/// A pattern the gateway cannot compile (the configuration loader refuses these first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: the {list} pattern {pattern:?} is not valid ({reason})")]
pub struct PolicyError {
    pub rule: String,
    pub list: &'static str,
    pub pattern: String,
    pub reason: String,
}

/// The kinds of item a rule can cover. Resource templates are resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Tool,
    Prompt,
    Resource,
}

impl ItemKind {
    fn noun(self) -> &'static str {
        match self {
            ItemKind::Tool => "the tool",
            ItemKind::Prompt => "the prompt",
            ItemKind::Resource => "the resource",
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    spec: RuleSpec,
    tools: Option<GlobSet>,
    resources: Option<GlobSet>,
    prompts: Option<GlobSet>,
}

impl Rule {
    fn names_subjects(&self) -> bool {
        let s = &self.spec;
        s.anonymous || !s.identities.is_empty() || !s.groups.is_empty() || !s.scopes.is_empty()
    }

    fn applies_to(&self, caller: Option<&Caller>) -> bool {
        if !self.names_subjects() {
            return true;
        }
        let s = &self.spec;
        match caller {
            None => s.anonymous,
            Some(c) => {
                s.identities.iter().any(|i| i == "*" || *i == c.name)
                    || s.groups.iter().any(|g| c.groups.contains(g))
                    || s.scopes.iter().any(|x| c.scopes.contains(x))
            }
        }
    }

    fn names_kinds(&self) -> bool {
        self.tools.is_some() || self.resources.is_some() || self.prompts.is_some()
    }

    fn covers_server(&self, server: Option<&str>) -> bool {
        self.spec.servers.is_empty()
            || server.is_some_and(|s| self.spec.servers.iter().any(|x| x == s))
    }

    fn covers(&self, kind: ItemKind, server: Option<&str>, name: &str, tool: Option<&str>) -> bool {
        if self.spec.effect == Effect::Ask {
            // Ask rules hold tool calls of servers, and the authoring tools that make or change
            // code that will run here; the other built-ins run in Manifold and read only.
            // Annotations can only add a hold: unknown ones (no definition) never match.
            if kind != ItemKind::Tool
                || (server.is_none() && !builtin::AUTHORING_CHANGES.contains(&name))
            {
                return false;
            }
            if !self.spec.annotations.is_empty()
                && !tool.is_some_and(|raw| {
                    self.spec
                        .annotations
                        .iter()
                        .any(|a| annotation_is_true(raw, a))
                })
            {
                return false;
            }
        }
        if !self.covers_server(server) {
            return false;
        }
        if !self.names_kinds() {
            return true;
        }
        let set = match kind {
            ItemKind::Tool => &self.tools,
            ItemKind::Prompt => &self.prompts,
            ItemKind::Resource => &self.resources,
        };
        set.as_ref().is_some_and(|set| set.is_match(name))
    }
}

/// A tool set (`[toolsets.NAME]`): the servers and patterns of what clients of `/mcp/NAME` see,
/// and who is confined to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolsetSpec {
    pub name: String,
    /// Every item of these servers.
    pub servers: Vec<String>,
    /// Glob patterns over exposed tool names, resource URIs (and templates), prompt names.
    pub tools: Vec<String>,
    pub resources: Vec<String>,
    pub prompts: Vec<String>,
    /// Only the meta-tools are listed (`manifold_search_tools` finds the rest of the set).
    pub search_only: bool,
    /// Callers confined to this set (by identity or group): at `/mcp` they get it, and another
    /// set's endpoint refuses them.
    pub identities: Vec<String>,
    pub groups: Vec<String>,
}

/// A compiled tool set.
#[derive(Debug, Clone)]
pub struct Toolset {
    spec: ToolsetSpec,
    tools: Option<GlobSet>,
    resources: Option<GlobSet>,
    prompts: Option<GlobSet>,
}

impl Toolset {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether the set holds the item. Manifold's meta-tools are in every set; a server's item is
    /// in when the set names its server or a pattern matches it; an authored tool when a pattern
    /// matches it.
    fn includes(&self, kind: ItemKind, server: Option<&str>, name: &str) -> bool {
        if kind == ItemKind::Tool && server.is_none() && builtin::CORE.contains(&name) {
            return true;
        }
        if server.is_some_and(|s| self.spec.servers.iter().any(|x| x == s)) {
            return true;
        }
        let set = match kind {
            ItemKind::Tool => &self.tools,
            ItemKind::Prompt => &self.prompts,
            ItemKind::Resource => &self.resources,
        };
        set.as_ref().is_some_and(|set| set.is_match(name))
    }

    /// Whether a caller is confined to this set.
    fn binds(&self, caller: &Caller) -> bool {
        self.spec.identities.contains(&caller.name)
            || self.spec.groups.iter().any(|g| caller.groups.contains(g))
    }

    /// Whether the set names callers (only they, and callers bound to no set, may use it).
    fn is_bound(&self) -> bool {
        !self.spec.identities.is_empty() || !self.spec.groups.is_empty()
    }
}

/// Why a request may not use a tool set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsetRefusal {
    #[error("there is no tool set {0:?}; the sets are configured as [toolsets.NAME]")]
    Unknown(String),
    #[error(
        "{caller} is confined to the tool set {bound:?} and may not use {asked:?}; connect to /mcp/{bound} (or /mcp)"
    )]
    Elsewhere {
        caller: String,
        bound: String,
        asked: String,
    },
}

/// The compiled glob sets of a rule's or a set's tools, resources and prompts (`None`: the
/// list is empty), errors naming `label` and the list.
type CompiledLists = (Option<GlobSet>, Option<GlobSet>, Option<GlobSet>);

fn compile_lists(
    label: &str,
    tools: &[String],
    resources: &[String],
    prompts: &[String],
) -> Result<CompiledLists, PolicyError> {
    let compile = |list: &'static str, patterns: &[String]| {
        if patterns.is_empty() {
            return Ok(None);
        }
        compile_globs(patterns)
            .map(Some)
            .map_err(|(pattern, reason)| PolicyError {
                rule: label.to_owned(),
                list,
                pattern,
                reason,
            })
    };
    Ok((
        compile("tools", tools)?,
        compile("resources", resources)?,
        compile("prompts", prompts)?,
    ))
}

/// Compiled rules, and the tool sets.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
    toolsets: Vec<Toolset>,
}

impl Policy {
    /// Compiles every rule's patterns the way the configuration validated them.
    pub fn compile(specs: Vec<RuleSpec>) -> Result<Policy, PolicyError> {
        let mut rules = Vec::with_capacity(specs.len());
        for spec in specs {
            let (tools, resources, prompts) =
                compile_lists(&spec.label(), &spec.tools, &spec.resources, &spec.prompts)?;
            rules.push(Rule {
                spec,
                tools,
                resources,
                prompts,
            });
        }
        Ok(Policy {
            rules,
            toolsets: Vec::new(),
        })
    }

    /// Adds the tool sets, compiled the way the configuration validated them.
    pub fn with_toolsets(mut self, specs: Vec<ToolsetSpec>) -> Result<Policy, PolicyError> {
        let mut toolsets = Vec::with_capacity(specs.len());
        for spec in specs {
            let label = format!("toolsets.{}", spec.name);
            let (tools, resources, prompts) =
                compile_lists(&label, &spec.tools, &spec.resources, &spec.prompts)?;
            toolsets.push(Toolset {
                spec,
                tools,
                resources,
                prompts,
            });
        }
        self.toolsets = toolsets;
        Ok(self)
    }

    /// The set a request works in: the one its endpoint names, else the first set the caller
    /// is confined to, else none (everything the rules allow).
    pub fn toolset_for(
        &self,
        asked: Option<&str>,
        caller: Option<&Caller>,
    ) -> Result<Option<Arc<str>>, ToolsetRefusal> {
        let bound = caller.and_then(|c| self.toolsets.iter().find(|t| t.binds(c)));
        let Some(asked) = asked else {
            return Ok(bound.map(|t| Arc::from(t.name())));
        };
        let Some(set) = self.toolsets.iter().find(|t| t.name() == asked) else {
            return Err(ToolsetRefusal::Unknown(asked.to_owned()));
        };
        match (bound, caller) {
            (Some(b), Some(c)) if b.name() != asked && !set.binds(c) => {
                Err(ToolsetRefusal::Elsewhere {
                    caller: c.name.clone(),
                    bound: b.name().to_owned(),
                    asked: asked.to_owned(),
                })
            }
            (None, Some(c)) if set.is_bound() && !set.binds(c) => Err(ToolsetRefusal::Elsewhere {
                caller: c.name.clone(),
                bound: "(none: the set is for the identities and groups it names)".to_owned(),
                asked: asked.to_owned(),
            }),
            _ => Ok(Some(Arc::from(set.name()))),
        }
    }

    /// The rules that apply to `caller`, in order, inside the tool set `toolset` when there is
    /// one (an unknown name hides everything: the server refuses such requests first).
    pub fn for_request(&self, caller: Option<&Caller>, toolset: Option<&str>) -> CallerRules<'_> {
        let mut view = self.for_caller(caller);
        if let Some(name) = toolset {
            view.set = Some(self.toolsets.iter().find(|t| t.name() == name).ok_or(()));
        }
        view
    }

    /// One rule that denies every item to every caller: what runs when the configured rules
    /// cannot be compiled, so that a broken rule never opens anything.
    pub fn deny_everything() -> Policy {
        Policy {
            rules: vec![Rule {
                spec: RuleSpec::new(0, Effect::Deny),
                tools: None,
                resources: None,
                prompts: None,
            }],
            toolsets: Vec::new(),
        }
    }

    /// Whether no rule and no tool set is configured: nothing to judge.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.toolsets.is_empty()
    }

    /// The rules that apply to `caller`, in order.
    pub fn for_caller(&self, caller: Option<&Caller>) -> CallerRules<'_> {
        CallerRules {
            rules: if self.rules.is_empty() {
                Vec::new()
            } else {
                self.rules.iter().filter(|r| r.applies_to(caller)).collect()
            },
            set: None,
        }
    }
}

/// Whether the raw tool definition's `annotations.NAME` is `true`.
fn annotation_is_true(raw: &str, name: &str) -> bool {
    patch::get(raw, &["annotations", name])
        .ok()
        .flatten()
        .is_some_and(|v| v.trim() == "true")
}

/// What the first covering rule decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Allowed once a person says yes (`approval/`).
    Ask(AskRule),
    /// Denied; answered as if the item did not exist.
    Hide,
    /// Denied by an explaining rule: answered Forbidden, naming it.
    Refuse(RuleRef),
}

/// The rule that refused, as the error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    pub index: usize,
    pub name: Option<String>,
}

/// The ask rule that holds a call, and who may answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRule {
    pub rule: RuleRef,
    pub approvers: Vec<Approver>,
}

impl RuleRef {
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("rule {name:?} (rules[{}])", self.index),
            None => format!("rules[{}]", self.index),
        }
    }
}

/// The rules of one caller, ready to judge items, inside a tool set when the request is in one.
#[derive(Debug)]
pub struct CallerRules<'p> {
    rules: Vec<&'p Rule>,
    /// The set (`Err`: a name no set has, which holds nothing).
    set: Option<Result<&'p Toolset, ()>>,
}

impl CallerRules<'_> {
    /// Whether no rule applies to this caller and no set narrows it (everything is allowed).
    pub fn is_unrestricted(&self) -> bool {
        self.rules.is_empty() && self.set.is_none()
    }

    /// Whether the set lists only the meta-tools (`discovery = "search"`).
    pub fn search_only(&self) -> bool {
        matches!(self.set, Some(Ok(set)) if set.spec.search_only)
    }

    /// Whether the request's set (if any) holds the item.
    fn in_set(&self, kind: ItemKind, server: Option<&str>, name: &str) -> bool {
        match self.set {
            None => true,
            Some(Ok(set)) => set.includes(kind, server, name),
            Some(Err(())) => false,
        }
    }

    /// The decision of the first rule covering the item; allowed when none does. A resource URI
    /// is judged as written and in each of its readings (`catalog/uri_normal.rs`), normal form
    /// first: the first reading some rule denies decides, so no spelling dodges a deny.
    /// A tool is judged without its definition here, so ask rules that match annotations do
    /// not apply: [`CallerRules::decide_tool`] is the judgement of a call.
    pub fn decide(&self, kind: ItemKind, server: Option<&str>, name: &str) -> Decision {
        if !self.in_set(kind, server, name) {
            return Decision::Hide;
        }
        if kind != ItemKind::Resource || self.rules.is_empty() {
            return self.decide_as_written(kind, server, name, None);
        }
        let mut forms = uri_normal::readings(name);
        forms.push(name.to_owned());
        forms
            .iter()
            .map(|form| self.decide_as_written(kind, server, form, None))
            .find(|d| *d != Decision::Allow)
            .unwrap_or(Decision::Allow)
    }

    /// The decision on a tool whose raw definition is `definition` (the one pinned, when pins
    /// are on), so that ask rules naming annotations can apply.
    pub fn decide_tool(
        &self,
        server: Option<&str>,
        name: &str,
        definition: Option<&str>,
    ) -> Decision {
        if !self.in_set(ItemKind::Tool, server, name) {
            return Decision::Hide;
        }
        self.decide_as_written(ItemKind::Tool, server, name, definition)
    }

    fn decide_as_written(
        &self,
        kind: ItemKind,
        server: Option<&str>,
        name: &str,
        tool: Option<&str>,
    ) -> Decision {
        match self
            .rules
            .iter()
            .find(|r| r.covers(kind, server, name, tool))
        {
            None => Decision::Allow,
            Some(r) if r.spec.effect == Effect::Allow => Decision::Allow,
            Some(r) if r.spec.effect == Effect::Ask => Decision::Ask(AskRule {
                rule: RuleRef {
                    index: r.spec.index,
                    name: r.spec.name.clone(),
                },
                approvers: r.spec.approvers.clone(),
            }),
            Some(r) if r.spec.explain => Decision::Refuse(RuleRef {
                index: r.spec.index,
                name: r.spec.name.clone(),
            }),
            Some(_) => Decision::Hide,
        }
    }

    /// Whether a rule allows the item in so many words (the first rule covering it is `allow`),
    /// not just for want of a rule: what authoring tools need from an authenticated caller.
    pub fn explicitly_allows(&self, kind: ItemKind, server: Option<&str>, name: &str) -> bool {
        self.in_set(kind, server, name)
            && self
                .rules
                .iter()
                .find(|r| r.covers(kind, server, name, None))
                .is_some_and(|r| r.spec.effect == Effect::Allow)
    }

    /// Whether the caller sees the item (lists, search, suggestions).
    pub fn sees(&self, kind: ItemKind, server: Option<&str>, name: &str) -> bool {
        matches!(
            self.decide(kind, server, name),
            Decision::Allow | Decision::Ask(_)
        )
    }

    /// Whether the caller sees a catalog entry (a tool with its definition, so that a call the
    /// caller could make after approval is listed).
    pub fn sees_entry(&self, kind: ItemKind, entry: &Entry) -> bool {
        if self.is_unrestricted() {
            return true;
        }
        if kind == ItemKind::Tool {
            return matches!(
                self.decide_tool(Some(&entry.server), &entry.exposed, Some(&entry.raw)),
                Decision::Allow | Decision::Ask(_)
            );
        }
        self.sees(kind, Some(&entry.server), &entry.exposed)
    }

    /// Whether a rule covering a whole server (no kind patterns) hides it from the caller; the
    /// first such rule decides, as for items.
    pub fn sees_whole_server(&self, server: &str) -> bool {
        let in_set = match self.set {
            None => true,
            Some(Ok(set)) => {
                set.spec.servers.iter().any(|s| s == server)
                    || set.tools.is_some()
                    || set.resources.is_some()
                    || set.prompts.is_some()
            }
            Some(Err(())) => false,
        };
        in_set
            && self
                .rules
                .iter()
                .find(|r| !r.names_kinds() && r.covers_server(Some(server)))
                .is_none_or(|r| r.spec.effect != Effect::Deny)
    }
}

/// Who started a task.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TaskOwner {
    server: String,
    tool: String,
    caller: Option<String>,
}

/// Started tasks by exposed id, bounded, oldest forgotten first.
#[derive(Debug, Default)]
struct TaskOwners {
    order: VecDeque<String>,
    owners: HashMap<String, TaskOwner>,
}

impl TaskOwners {
    fn insert(&mut self, task: String, owner: TaskOwner) {
        if self.owners.insert(task.clone(), owner).is_none() {
            self.order.push_back(task);
        }
        while self.order.len() > MAX_TRACKED_TASKS {
            if let Some(old) = self.order.pop_front() {
                self.owners.remove(&old);
            }
        }
    }
}

/// The live authorization state of one gateway: replaced whole on reload.
pub(crate) struct Access {
    policy: RwLock<Arc<Policy>>,
    limiter: RwLock<Arc<RateLimiter>>,
    tasks: Mutex<TaskOwners>,
}

impl Access {
    pub(crate) fn new(settings: &GatewaySettings) -> Access {
        Access {
            policy: RwLock::new(Arc::new(settings.rules.clone())),
            limiter: RwLock::new(Arc::new(RateLimiter::new(settings.rate_limits.clone()))),
            tasks: Mutex::new(TaskOwners::default()),
        }
    }

    fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn limiter(&self) -> Arc<RateLimiter> {
        Arc::clone(&self.limiter.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn task_owner(&self, task: &str) -> Option<TaskOwner> {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .owners
            .get(task)
            .cloned()
    }
}

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
pub(crate) fn resource_not_found(id: Option<&Id>, uri: &str) -> Message {
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

impl Gateway {
    /// The rules in force now.
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.access.policy()
    }

    /// The rate limits in force now, with their buckets.
    pub fn rate_limiter(&self) -> Arc<RateLimiter> {
        self.inner.access.limiter()
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
            let _ = self.inner.events.send(event);
        }
    }

    /// Puts new rules and limits in force without telling sessions: a reload tells them once,
    /// with the catalog it rebuilds (`reconfigure.rs`).
    pub(crate) fn install_access(&self, rules: Policy, rate_limits: RateLimits) {
        *self
            .inner
            .access
            .policy
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(rules);
        *self
            .inner
            .access
            .limiter
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(RateLimiter::new(rate_limits));
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
        let limiter = self.inner.access.limiter();
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
        let policy = self.inner.access.policy();
        let limiter = self.inner.access.limiter();
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
        let policy = self.inner.access.policy();
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
        let policy = self.inner.access.policy();
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
        if self.inner.access.policy().is_empty() {
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
        if self.inner.access.policy().is_empty() {
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
        let Some(owner) = self.inner.access.task_owner(exposed) else {
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
        if self.inner.access.policy().is_empty()
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
        self.inner
            .access
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task, owner);
    }

    fn decide(
        &self,
        ctx: &RequestContext,
        kind: ItemKind,
        server: Option<&str>,
        name: &str,
    ) -> Decision {
        let policy = self.inner.access.policy();
        if policy.is_empty() {
            return Decision::Allow;
        }
        policy
            .for_request(ctx.caller.as_deref(), ctx.toolset.as_deref())
            .decide(kind, server, name)
    }
}

#[cfg(test)]
mod tests;
