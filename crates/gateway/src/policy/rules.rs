//! The rules themselves, pure: compiled once from the configuration (`RuleSpec`, tool sets), then
//! asked who may see or call what (`Policy`, `CallerRules`). Nothing here reads a request, a
//! catalog or a clock; the gates (`gates.rs`) apply it to requests.

use std::sync::Arc;

use manifold_wire::patch;

use crate::builtin::{AUTHORING_CHANGES, CORE};
use crate::catalog::build::Entry;
use crate::catalog::uri_normal;
use crate::context::Caller;
use crate::patterns::NamePatterns;

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

/// The tool annotations an ask rule may name (`annotations`): a rule covers a tool only when one
/// of those it names is `true` in the tool's definition.
pub const ASK_ANNOTATIONS: &[&str] = &[
    "destructiveHint",
    "openWorldHint",
    "readOnlyHint",
    "idempotentHint",
];

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
    pub(crate) fn noun(self) -> &'static str {
        match self {
            ItemKind::Tool => "the tool",
            ItemKind::Prompt => "the prompt",
            ItemKind::Resource => "the resource",
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Rule {
    spec: RuleSpec,
    tools: NamePatterns,
    resources: NamePatterns,
    prompts: NamePatterns,
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
        !self.tools.is_empty() || !self.resources.is_empty() || !self.prompts.is_empty()
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
            if kind != ItemKind::Tool || (server.is_none() && !AUTHORING_CHANGES.contains(&name)) {
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
        set.is_match(name)
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
    tools: NamePatterns,
    resources: NamePatterns,
    prompts: NamePatterns,
}

impl Toolset {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether the set holds the item. Manifold's meta-tools are in every set; a server's item is
    /// in when the set names its server or a pattern matches it; an authored tool when a pattern
    /// matches it.
    fn includes(&self, kind: ItemKind, server: Option<&str>, name: &str) -> bool {
        if kind == ItemKind::Tool && server.is_none() && CORE.contains(&name) {
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
        set.is_match(name)
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

/// The compiled patterns of a rule's or a set's tools, resources and prompts (an empty list
/// matches nothing), errors naming `label` and the list.
type CompiledLists = (NamePatterns, NamePatterns, NamePatterns);

fn compile_lists(
    label: &str,
    tools: &[String],
    resources: &[String],
    prompts: &[String],
) -> Result<CompiledLists, PolicyError> {
    let compile = |list: &'static str, patterns: &[String]| {
        NamePatterns::compile(patterns.to_vec()).map_err(|bad| PolicyError {
            rule: label.to_owned(),
            list,
            pattern: bad.pattern,
            reason: bad.reason,
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
                tools: NamePatterns::none(),
                resources: NamePatterns::none(),
                prompts: NamePatterns::none(),
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
    pub(super) rules: Vec<&'p Rule>,
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
                    || !set.tools.is_empty()
                    || !set.resources.is_empty()
                    || !set.prompts.is_empty()
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
