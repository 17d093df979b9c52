//! The unit tests of `policy.rs` (its rules and task owners), kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::access::{TaskOwner, TaskOwners};
use super::*;
use crate::context::Caller;

fn caller(name: &str, groups: &[&str], scopes: &[&str]) -> Caller {
    Caller {
        name: name.to_owned(),
        groups: groups.iter().map(|s| (*s).to_owned()).collect(),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        bearer: None,
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn policy(specs: Vec<RuleSpec>) -> Policy {
    Policy::compile(specs).unwrap()
}

#[test]
fn no_rules_allow_everything_without_allocating_a_view() {
    let p = Policy::default();
    let view = p.for_caller(None);
    assert!(view.is_unrestricted());
    assert_eq!(view.rules.capacity(), 0);
    assert_eq!(
        view.decide(ItemKind::Tool, Some("a"), "a__x"),
        Decision::Allow
    );
}

#[test]
fn the_first_covering_rule_decides_and_nothing_matching_allows() {
    let p = policy(vec![
        RuleSpec {
            groups: strings(&["admins"]),
            tools: strings(&["git__push*"]),
            ..RuleSpec::new(0, Effect::Allow)
        },
        RuleSpec {
            tools: strings(&["git__push*"]),
            ..RuleSpec::new(1, Effect::Deny)
        },
    ]);
    let admin = caller("ada", &["admins"], &[]);
    let dev = caller("bob", &["devs"], &[]);
    let push = |c: Option<&Caller>| {
        p.for_caller(c)
            .decide(ItemKind::Tool, Some("git"), "git__push")
    };
    assert_eq!(push(Some(&admin)), Decision::Allow);
    assert_eq!(push(Some(&dev)), Decision::Hide);
    assert_eq!(push(None), Decision::Hide);
    let status = p
        .for_caller(Some(&dev))
        .decide(ItemKind::Tool, Some("git"), "git__status");
    assert_eq!(status, Decision::Allow, "no rule covers it");
}

#[test]
fn subjects_match_by_name_group_scope_or_anonymity() {
    let rule = |f: fn(&mut RuleSpec)| {
        let mut s = RuleSpec::new(0, Effect::Deny);
        f(&mut s);
        policy(vec![s])
    };
    let alice = caller("alice", &["devs"], &["tools:read"]);
    let hidden = |p: &Policy, c: Option<&Caller>| {
        p.for_caller(c).decide(ItemKind::Tool, Some("s"), "s__t") == Decision::Hide
    };
    let by_name = rule(|s| s.identities = strings(&["alice"]));
    assert!(hidden(&by_name, Some(&alice)));
    assert!(!hidden(&by_name, Some(&caller("bob", &[], &[]))));
    assert!(
        !hidden(&by_name, None),
        "names never match anonymous callers"
    );
    let any_identity = rule(|s| s.identities = strings(&["*"]));
    assert!(hidden(&any_identity, Some(&caller("zed", &[], &[]))));
    assert!(!hidden(&any_identity, None));
    let by_group = rule(|s| s.groups = strings(&["devs"]));
    assert!(hidden(&by_group, Some(&alice)));
    assert!(!hidden(&by_group, None));
    let by_scope = rule(|s| s.scopes = strings(&["tools:read"]));
    assert!(hidden(&by_scope, Some(&alice)));
    assert!(!hidden(&by_scope, Some(&caller("alice", &["devs"], &[]))));
    let anonymous = rule(|s| s.anonymous = true);
    assert!(hidden(&anonymous, None));
    assert!(!hidden(&anonymous, Some(&alice)));
    // An identity named "anonymous" is an identity, not the anonymous caller.
    assert!(!hidden(&anonymous, Some(&caller("anonymous", &[], &[]))));
    let everyone = rule(|_| {});
    assert!(hidden(&everyone, None) && hidden(&everyone, Some(&alice)));
}

#[test]
fn kinds_servers_and_built_ins() {
    let p = policy(vec![
        RuleSpec {
            servers: strings(&["fs"]),
            resources: strings(&["fs+file:///secret/*"]),
            ..RuleSpec::new(0, Effect::Deny)
        },
        RuleSpec {
            servers: strings(&["admin"]),
            ..RuleSpec::new(1, Effect::Deny)
        },
        RuleSpec {
            tools: strings(&["manifold_health"]),
            ..RuleSpec::new(2, Effect::Deny)
        },
    ]);
    let v = p.for_caller(None);
    assert!(!v.sees(ItemKind::Resource, Some("fs"), "fs+file:///secret/key"));
    assert!(!v.sees(ItemKind::Resource, Some("fs"), "fs+file:///secret/{name}"));
    assert!(v.sees(ItemKind::Resource, Some("fs"), "fs+file:///public/a"));
    // A resource pattern does not cover a tool or a prompt of the same name.
    assert!(v.sees(ItemKind::Tool, Some("fs"), "fs+file:///secret/key"));
    // The same pattern on another server's item does not apply.
    assert!(v.sees(ItemKind::Resource, Some("other"), "fs+file:///secret/key"));
    // A rule with servers and no kinds covers every item of those servers.
    for kind in [ItemKind::Tool, ItemKind::Prompt, ItemKind::Resource] {
        assert!(!v.sees(kind, Some("admin"), "admin__x"));
    }
    assert!(!v.sees_whole_server("admin"));
    assert!(
        v.sees_whole_server("fs"),
        "a kind-specific rule hides items, not the server"
    );
    // Built-in tools belong to no server: only rules without servers reach them.
    assert!(!v.sees(ItemKind::Tool, None, "manifold_health"));
    assert!(v.sees(ItemKind::Tool, None, "manifold_search_tools"));
}

#[test]
fn explaining_denials_name_their_rule() {
    let p = policy(vec![RuleSpec {
        name: Some("no-fail".into()),
        explain: true,
        tools: strings(&["*__fail"]),
        ..RuleSpec::new(3, Effect::Deny)
    }]);
    let d = p
        .for_caller(None)
        .decide(ItemKind::Tool, Some("a"), "a__fail");
    let Decision::Refuse(rule) = d else {
        panic!("expected a refusal, got {d:?}");
    };
    assert_eq!(rule.label(), "rule \"no-fail\" (rules[3])");
    assert!(
        !p.for_caller(None)
            .sees(ItemKind::Tool, Some("a"), "a__fail")
    );
    assert_eq!(RuleSpec::new(7, Effect::Deny).label(), "rules[7]");
}

#[test]
fn patterns_are_whole_name_globs_and_bad_ones_are_refused() {
    let p = policy(vec![RuleSpec {
        tools: strings(&["a__get_?", "{x,y}__*", "a/*"]),
        ..RuleSpec::new(0, Effect::Deny)
    }]);
    let v = p.for_caller(None);
    let seen = |n: &str| v.sees(ItemKind::Tool, Some("a"), n);
    assert!(!seen("a__get_x"));
    assert!(seen("a__get_xy"));
    assert!(!seen("y__anything"));
    assert!(!seen("a/b/c"), "* crosses /");
    assert!(seen("A__get_x"), "case counts");
    let e = Policy::compile(vec![RuleSpec {
        name: Some("broken".into()),
        prompts: strings(&["{open"]),
        ..RuleSpec::new(1, Effect::Allow)
    }])
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "rule \"broken\" (rules[1]): the prompts pattern \"{open\" is not valid (unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?))"
    );
}

#[test]
fn tracked_tasks_are_bounded_oldest_first() {
    let mut t = TaskOwners::default();
    let owner = TaskOwner {
        server: "s".into(),
        tool: "s__t".into(),
        caller: None,
    };
    for i in 0..=MAX_TRACKED_TASKS {
        t.insert(format!("s:{i}"), owner.clone());
    }
    assert_eq!(t.owners.len(), MAX_TRACKED_TASKS);
    assert!(!t.owners.contains_key("s:0"));
    assert!(t.owners.contains_key(&format!("s:{MAX_TRACKED_TASKS}")));
    // Recording the same task again does not count it twice.
    t.insert("s:1".into(), owner);
    assert_eq!(t.order.len(), MAX_TRACKED_TASKS);
}
