//! The unit tests of `rules.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::path::Path;

use super::*;
use crate::{Config, ConfigErrors, FixedEnvironment};

const SERVERS: &str =
    "[servers.git]\ncommand = \"git-mcp\"\n\n[servers.time]\ncommand = \"time-mcp\"\n\n";

fn load(text: &str) -> Result<Config, ConfigErrors> {
    let env = FixedEnvironment::new().with_var("HOME", "/home/ada");
    Config::from_str_with(
        &format!("{SERVERS}{text}"),
        "m.toml",
        Some(Path::new("/etc")),
        &env,
    )
}

/// Every error, rendered with its position, as `manifold check` prints it.
fn errors(text: &str) -> Vec<String> {
    match load(text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn an_ask_rule_reads_its_approvers_and_annotations_and_defaults_to_the_caller() {
    let c = load(
        r#"
[[rules]]
name = "push-needs-ops"
effect = "ask"
tools = ["git__push*"]
approvers = ["caller", "group:ops", "identity:alice"]

[[rules]]
effect = "ask"
annotations = ["destructiveHint", "openWorldHint"]
"#,
    )
    .unwrap();
    assert_eq!(c.rules[0].effect, Effect::Ask);
    assert_eq!(
        c.rules[0].approvers,
        [
            Approver::Caller,
            Approver::Group("ops".into()),
            Approver::Identity("alice".into())
        ]
    );
    assert_eq!(c.rules[1].approvers, [Approver::Caller]);
    assert_eq!(c.rules[1].annotations, ["destructiveHint", "openWorldHint"]);
    assert_eq!(c.rules[1].approvers[0].as_text(), "caller");
    assert_eq!(c.rules[0].approvers[1].as_text(), "group:ops");
}

#[test]
fn ask_only_keys_and_bad_approvers_are_refused_at_their_place() {
    let e = errors("[[rules]]\neffect = \"allow\"\napprovers = [\"caller\"]\n").join("\n");
    assert!(
        e.contains("rules[0].approvers") && e.contains("only an ask rule"),
        "{e}"
    );
    let e =
        errors("[[rules]]\neffect = \"deny\"\nannotations = [\"destructiveHint\"]\n").join("\n");
    assert!(e.contains("never exempt"), "{e}");
    let e = errors("[[rules]]\neffect = \"ask\"\napprovers = [\"alice\"]\n").join("\n");
    assert!(
        e.contains("identity:alice") && e.contains("group:alice"),
        "{e}"
    );
    let e = errors("[[rules]]\neffect = \"ask\"\napprovers = []\n").join("\n");
    assert!(e.contains("names nobody"), "{e}");
    let e = errors("[[rules]]\neffect = \"ask\"\nannotations = [\"destructivehint\"]\n").join("\n");
    assert!(e.contains("did you mean \"destructiveHint\""), "{e}");
    let e = errors("[[rules]]\neffect = \"ask\"\nprompts = [\"*\"]\n").join("\n");
    assert!(e.contains("holds tool calls only"), "{e}");
    let e = errors("[[rules]]\neffect = \"ask\"\nexplain = true\n").join("\n");
    assert!(e.contains("only a deny rule can explain"), "{e}");
}

#[test]
fn rules_load_in_file_order_with_every_field() {
    let c = load(
        r#"
[[rules]]
name = "admins-push"
effect = "allow"
groups = ["admins"]
servers = ["git"]
tools = ["git__push*"]

[[rules]]
effect = "deny"
explain = true
identities = ["*"]
anonymous = true
scopes = ["read-only"]
tools = ["git__push*"]
resources = ["git+file:///secret/*"]
prompts = ["time__*"]
"#,
    )
    .unwrap();
    assert_eq!(c.rules.len(), 2);
    let first = &c.rules[0];
    assert_eq!(first.index, 0);
    assert_eq!(first.name.as_deref(), Some("admins-push"));
    assert_eq!(first.effect, Effect::Allow);
    assert!(!first.explain && !first.anonymous);
    assert_eq!(first.groups, ["admins"]);
    assert_eq!(first.servers, ["git"]);
    assert_eq!(first.tools, ["git__push*"]);
    let second = &c.rules[1];
    assert_eq!(second.index, 1);
    assert_eq!(second.name, None);
    assert_eq!(second.effect, Effect::Deny);
    assert!(second.explain && second.anonymous);
    assert_eq!(second.identities, ["*"]);
    assert_eq!(second.scopes, ["read-only"]);
    assert_eq!(second.resources, ["git+file:///secret/*"]);
    assert_eq!(second.prompts, ["time__*"]);
    assert!(second.servers.is_empty());
    assert!(c.rate_limits.is_empty());
}

#[test]
fn no_rules_and_no_limits_by_default() {
    let c = load("").unwrap();
    assert!(c.rules.is_empty());
    assert_eq!(c.rate_limits, RateLimitSpec::default());
}

#[test]
fn rule_mistakes_are_reported_where_they_are() {
    let e = errors(
        r#"[[rules]]
effect = "deny"
servers = ["gitt", "nope"]
tools = ["[abc", ""]

[[rules]]
tools = ["x"]

[[rules]]
effect = "alow"
explain = true
users = ["bob"]
identities = [""]
"#,
    );
    assert_eq!(
        e,
        [
            "m.toml:9:12: error: rules[0].servers[0] = \"gitt\": names no configured server; did you mean \"git\"?",
            "m.toml:9:20: error: rules[0].servers[1] = \"nope\": names no configured server; the servers are git, time",
            "m.toml:10:10: error: rules[0].tools[0] = \"[abc\": is not a valid pattern (unclosed character class; missing ']'); patterns use * (any characters), ? (one character), [abc] and {a,b}; write [*] to match a literal *",
            "m.toml:10:18: error: rules[0].tools[1] = \"\": is not a valid pattern (an empty pattern matches nothing); patterns use * (any characters), ? (one character), [abc] and {a,b}; write [*] to match a literal *",
            "m.toml:12:1: error: rules[1]: has no effect; write effect = \"allow\", \"deny\" or \"ask\"",
            "m.toml:16:10: error: rules[2].effect = \"alow\": is not one of allow, deny, ask; did you mean \"allow\"?",
            "m.toml:18:1: error: rules[2].users: unknown key; write identities = [\"NAME\", ...]",
            "m.toml:19:15: error: rules[2].identities[0] = \"\": is empty; write e.g. identities = [\"alice\", \"ci-bot\"]",
        ]
    );
}

#[test]
fn an_explaining_allow_and_a_repeated_name_are_refused() {
    let e = errors(
        "[[rules]]\nname = \"r\"\neffect = \"allow\"\nexplain = true\n\n[[rules]]\nname = \"r\"\neffect = \"deny\"\n",
    );
    assert_eq!(
        e,
        [
            "m.toml:10:11: error: rules[0].explain = true: only a deny rule can explain a refusal; remove explain, or write effect = \"deny\"",
            "m.toml:13:8: error: rules[1].name = \"r\": is also the name of rules[0]; give each rule its own name: errors name the rule that refused a call",
        ]
    );
}

#[test]
fn rules_written_as_one_table_are_refused() {
    let e = errors("[rules]\neffect = \"deny\"\n");
    assert_eq!(
        e,
        [
            "m.toml:7:1: error: rules: must be an array of tables, one per rule; write each rule as its own [[rules]] section, in the order they are tried"
        ]
    );
}

#[test]
fn rate_limits_load_as_strings_or_tables() {
    let c = load(
        r#"
[rate_limits]
per_identity = "600/minute"
per_tool = { rate = "10/s", burst = 3 }

[[rate_limits.tools]]
match = ["git__push*"]
rate = "5/1h"

[[rate_limits.tools]]
match = ["time__*", "git__log"]
rate = "100/10s"
burst = 1
"#,
    )
    .unwrap();
    let r = &c.rate_limits;
    assert_eq!(
        r.per_identity,
        Some(Limit {
            count: 600,
            period: Duration::from_secs(60),
            burst: 600
        })
    );
    assert_eq!(
        r.per_tool,
        Some(Limit {
            count: 10,
            period: Duration::from_secs(1),
            burst: 3
        })
    );
    assert_eq!(r.tools.len(), 2);
    assert_eq!(r.tools[0].tools, ["git__push*"]);
    assert_eq!(r.tools[0].limit.period, Duration::from_secs(3600));
    assert_eq!(r.tools[0].limit.burst, 5);
    assert_eq!(r.tools[1].tools, ["time__*", "git__log"]);
    assert_eq!(
        r.tools[1].limit,
        Limit {
            count: 100,
            period: Duration::from_secs(10),
            burst: 1
        }
    );
}

#[test]
fn rate_limit_mistakes_are_reported_where_they_are() {
    let e = errors(
        r#"[rate_limits]
per_identity = "fast"
per_tool = { rate = "0/s", burst = 0 }
per_minute = 5

[[rate_limits.tools]]
rate = "5/fortnight"
"#,
    );
    assert_eq!(
        e,
        [
            "m.toml:8:16: error: rate_limits.per_identity = \"fast\": is not a rate; write e.g. \"60/minute\": a number of requests per second, minute, hour or day, or per a duration such as \"10s\"",
            "m.toml:9:21: error: rate_limits.per_tool.rate = \"0/s\": the count must be a whole number from 1 to 1000000; write e.g. \"60/minute\": a number of requests per second, minute, hour or day, or per a duration such as \"10s\"",
            "m.toml:9:36: error: rate_limits.per_tool.burst = 0: must be from 1 to 1000000; write a number from 1 to 1000000, e.g. burst = 10",
            "m.toml:10:1: error: rate_limits.per_minute: unknown key; the keys here are per_identity, per_tool, tools",
            "m.toml:12:1: error: rate_limits.tools[0]: has no match; write match = [\"PATTERN\"]: the exposed tool names this limit is for",
            "m.toml:13:8: error: rate_limits.tools[0].rate = \"5/fortnight\": \"fortnight\" is not a period (second, minute, hour, day, or a duration such as \"10s\"); write e.g. \"60/minute\": a number of requests per second, minute, hour or day, or per a duration such as \"10s\"",
        ]
    );
}

#[test]
fn rates_read_counts_and_periods() {
    assert_eq!(parse_rate("5/s"), Ok((5, Duration::from_secs(1))));
    assert_eq!(
        parse_rate(" 60 / Minute "),
        Ok((60, Duration::from_secs(60)))
    );
    assert_eq!(parse_rate("1/day"), Ok((1, Duration::from_secs(86_400))));
    assert_eq!(parse_rate("7/500ms"), Ok((7, Duration::from_millis(500))));
    assert_eq!(
        parse_rate("1/25h"),
        Err("the period must be at most a day".to_owned())
    );
    assert!(parse_rate("1000001/s").is_err());
    assert!(parse_rate("-1/s").is_err());
}
