//! The gateway's compiled policy and rate limits for a configuration. The configuration holds
//! the gateway's own specs (`[[rules]]`, `[toolsets.NAME]`, `[rate_limits]`), checked by the
//! gateway's own pattern compiler while loading, so this only compiles them. Should that ever
//! fail, the gateway fails closed (every item denied) and says why in the log, rather than serve
//! with a rule missing.

use manifold_config::Config;
use manifold_gateway::policy::Policy;
use manifold_gateway::rate_limit::RateLimits;

/// The core's rules (with the tool sets) and rate limits for a configuration.
pub fn access_settings(config: &Config) -> (Policy, RateLimits) {
    let rules = Policy::compile(config.rules.clone())
        .and_then(|p| p.with_toolsets(config.toolsets.clone()));
    let limits = RateLimits::compile(config.rate_limits.clone());
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use manifold_gateway::policy::{Effect, ItemKind, RuleSpec};
    use manifold_gateway::rate_limit::Limit;

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
    fn rules_that_do_not_compile_deny_everything() {
        // Loading refuses such a pattern; a spec changed after loading is the one way here.
        let mut config = Config::from_str(
            "[servers.git]\ncommand = \"git-mcp\"\n\n[rate_limits]\nper_identity = \"10/minute\"\n",
            "test.toml",
        )
        .unwrap();
        let mut rule = RuleSpec::new(0, Effect::Allow);
        rule.tools = vec!["[".to_owned()];
        config.rules.push(rule);
        let (rules, limits) = access_settings(&config);
        let view = rules.for_caller(None);
        assert!(!view.sees(ItemKind::Tool, Some("git"), "git__status"));
        assert!(!view.sees(ItemKind::Tool, None, "manifold_health"));
        assert!(limits.is_empty(), "no limit is left to count against");
    }

    #[test]
    fn no_rules_is_an_empty_policy() {
        let config = Config::from_str("", "empty.toml").unwrap();
        let (rules, limits) = access_settings(&config);
        assert!(rules.is_empty());
        assert!(limits.is_empty());
    }
}
