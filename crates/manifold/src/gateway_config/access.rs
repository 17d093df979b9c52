//! From the configuration's `[[rules]]`, `[toolsets.NAME]` and `[rate_limits]` to the core's compiled policy and
//! limits. Loading has already compiled every pattern the way the core does; should the two ever
//! disagree, the gateway fails closed (every item denied) and says why in the log, rather than
//! serve with a rule missing.

use manifold_config::access::{AccessRule, Approver as ConfigApprover, RateLimit, RuleEffect};
use manifold_config::{Config, ToolsetConfig};
use manifold_gateway::policy::{Approver, Effect, Policy, RuleSpec, ToolsetSpec};
use manifold_gateway::rate_limit::{Limit, RateLimitSpec, RateLimits, ToolLimitSpec};

/// The core's rules (with the tool sets) and rate limits for a configuration.
pub fn access_settings(config: &Config) -> (Policy, RateLimits) {
    let rules = Policy::compile(config.rules.iter().map(rule_spec).collect())
        .and_then(|p| p.with_toolsets(config.toolsets.iter().map(toolset_spec).collect()));
    let limits = RateLimits::compile(limit_spec(config));
    match (rules, limits) {
        (Ok(rules), Ok(limits)) => (rules, limits),
        (rules, limits) => {
            let why = [
                rules.err().map(|e| e.to_string()),
                limits.err().map(|e| e.to_string()),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ");
            tracing::error!(
                error = %why,
                "the rules could not be compiled; Manifold denies every tool, resource and prompt until the configuration is fixed"
            );
            (Policy::deny_everything(), RateLimits::default())
        }
    }
}

fn toolset_spec(set: &ToolsetConfig) -> ToolsetSpec {
    ToolsetSpec {
        name: set.name.clone(),
        servers: set.servers.clone(),
        tools: set.tools.clone(),
        resources: set.resources.clone(),
        prompts: set.prompts.clone(),
        search_only: set.search_only,
        identities: set.identities.clone(),
        groups: set.groups.clone(),
    }
}

fn rule_spec(rule: &AccessRule) -> RuleSpec {
    RuleSpec {
        index: rule.index,
        name: rule.name.clone(),
        effect: match rule.effect {
            RuleEffect::Allow => Effect::Allow,
            RuleEffect::Deny => Effect::Deny,
            RuleEffect::Ask => Effect::Ask,
        },
        explain: rule.explain,
        identities: rule.identities.clone(),
        groups: rule.groups.clone(),
        scopes: rule.scopes.clone(),
        anonymous: rule.anonymous,
        servers: rule.servers.clone(),
        tools: rule.tools.clone(),
        resources: rule.resources.clone(),
        prompts: rule.prompts.clone(),
        approvers: rule
            .approvers
            .iter()
            .map(|a| match a {
                ConfigApprover::Caller => Approver::Caller,
                ConfigApprover::Group(g) => Approver::Group(g.clone()),
                ConfigApprover::Identity(i) => Approver::Identity(i.clone()),
            })
            .collect(),
        annotations: rule.annotations.clone(),
    }
}

fn limit(l: &RateLimit) -> Limit {
    Limit {
        count: l.count,
        period: l.period,
        burst: l.burst,
    }
}

fn limit_spec(config: &Config) -> RateLimitSpec {
    let r = &config.rate_limits;
    RateLimitSpec {
        per_identity: r.per_identity.as_ref().map(limit),
        per_tool: r.per_tool.as_ref().map(limit),
        tools: r
            .tools
            .iter()
            .map(|t| ToolLimitSpec {
                tools: t.patterns.clone(),
                limit: limit(&t.limit),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use manifold_gateway::policy::ItemKind;

    #[test]
    fn configured_rules_and_limits_reach_the_core() {
        let config = Config::from_str(
            r#"
[servers.git]
command = "git-mcp"

[[rules]]
name = "hide-push"
effect = "deny"
anonymous = true
tools = ["git__push*"]

[rate_limits]
per_identity = "10/minute"

[[rate_limits.tools]]
match = ["git__*"]
rate = "1/s"
"#,
            "test.toml",
        )
        .unwrap();
        let (rules, limits) = access_settings(&config);
        let view = rules.for_caller(None);
        assert!(!view.sees(ItemKind::Tool, Some("git"), "git__push"));
        assert!(view.sees(ItemKind::Tool, Some("git"), "git__status"));
        assert_eq!(
            limits.spec().per_identity,
            Some(Limit::per(10, std::time::Duration::from_secs(60)))
        );
        assert_eq!(limits.spec().tools[0].tools, ["git__*"]);
    }

    #[test]
    fn no_rules_is_an_empty_policy() {
        let config = Config::from_str("", "empty.toml").unwrap();
        let (rules, limits) = access_settings(&config);
        assert!(rules.is_empty());
        assert!(limits.is_empty());
    }
}
