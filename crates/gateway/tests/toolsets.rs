//! Tool sets in the core (`[toolsets.NAME]`, served at `/mcp/NAME`), against real upstream
//! processes (the conformance fixture and the test peer over stdio): a request in a set lists,
//! searches and calls only the set's items, the meta-tools included in every set; rules still
//! apply inside a set; `discovery = "search"` lists the meta-tools alone; callers can be confined
//! to a set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use manifold_gateway::policy::{Effect, Policy, RuleSpec, ToolsetRefusal, ToolsetSpec};
use manifold_gateway::{
    Caller, ClientView, Gateway, GatewaySettings, RequestContext, SilentPeer, UpstreamDefinition,
};
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{EraChoice, Target};
use manifold_wire::{Id, Message, Revision};
use serde_json::{Value, json};

const CORE: [&str; 3] = [
    "manifold_health",
    "manifold_search_tools",
    "manifold_call_tool",
];

fn fixture() -> UpstreamDefinition {
    let bin = manifold_testkit::workspace_binary(
        "manifold-conformance-fixture",
        "manifold-conformance-fixture",
    )
    .unwrap();
    let mut def = UpstreamDefinition::new(
        "fx",
        Target::Stdio(StdioSpec {
            command: bin.display().to_string(),
            args: vec!["stdio".to_owned()],
            ..StdioSpec::default()
        }),
    );
    def.era = EraChoice::Legacy;
    def
}

fn test_peer() -> UpstreamDefinition {
    UpstreamDefinition::new(
        "tp",
        Target::Stdio(StdioSpec {
            command: manifold_testkit::test_peer().unwrap().display().to_string(),
            args: vec!["stdio".to_owned()],
            ..StdioSpec::default()
        }),
    )
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn set(name: &str) -> ToolsetSpec {
    ToolsetSpec {
        name: name.to_owned(),
        ..ToolsetSpec::default()
    }
}

async fn started(rules: Vec<RuleSpec>, sets: Vec<ToolsetSpec>) -> Gateway {
    let settings = GatewaySettings {
        rules: Policy::compile(rules).unwrap().with_toolsets(sets).unwrap(),
        ..GatewaySettings::default()
    };
    let g = Gateway::start(settings, vec![fixture(), test_peer()]);
    g.wait_started(Duration::from_secs(60)).await;
    g
}

fn person(name: &str, groups: &[&str]) -> Option<Arc<Caller>> {
    Some(Arc::new(Caller {
        name: name.to_owned(),
        groups: strings(groups),
        scopes: Vec::new(),
        bearer: None,
    }))
}

fn ctx(caller: Option<Arc<Caller>>, toolset: Option<&str>) -> RequestContext {
    RequestContext {
        client: ClientView {
            revision: Revision::V2025_11_25,
            capabilities: "{}".to_owned(),
            info: None,
        },
        peer: Arc::new(SilentPeer),
        session: None,
        caller,
        toolset: toolset.map(Arc::from),
        trace: None,
        audit: Default::default(),
    }
}

fn result(m: &Message) -> Value {
    serde_json::from_str(
        m.result_raw()
            .unwrap_or_else(|| panic!("not a result: {}", m.as_str())),
    )
    .unwrap()
}

async fn tools(g: &Gateway, c: &RequestContext) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..20 {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }).to_string(),
            None => "{}".to_owned(),
        };
        let r = result(
            &g.handle(
                c,
                &Message::request(&Id::Num(page), "tools/list", Some(&params)),
            )
            .await,
        );
        names.extend(
            r["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned()),
        );
        match r["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return names,
        }
    }
    panic!("more than 20 pages");
}

async fn call(g: &Gateway, c: &RequestContext, name: &str, arguments: Value) -> Message {
    let params = json!({ "name": name, "arguments": arguments }).to_string();
    g.handle(
        c,
        &Message::request(&Id::Num(1), "tools/call", Some(&params)),
    )
    .await
}

/// The tool names a `manifold_search_tools` query returns.
async fn found(g: &Gateway, c: &RequestContext, query: &str) -> Vec<String> {
    let r = result(
        &call(
            g,
            c,
            "manifold_search_tools",
            json!({"query": query, "limit": 50}),
        )
        .await,
    );
    r["structuredContent"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_set_of_servers_and_patterns_lists_searches_and_calls_only_its_items() {
    let g = started(
        Vec::new(),
        vec![
            ToolsetSpec {
                servers: strings(&["fx"]),
                ..set("fixture")
            },
            ToolsetSpec {
                tools: strings(&["tp__*"]),
                ..set("peer")
            },
        ],
    )
    .await;
    let everything = tools(&g, &ctx(None, None)).await;
    let fixture = tools(&g, &ctx(None, Some("fixture"))).await;
    let peer = tools(&g, &ctx(None, Some("peer"))).await;
    let fx: Vec<&String> = everything
        .iter()
        .filter(|n| n.starts_with("fx__"))
        .collect();
    let tp: Vec<&String> = everything
        .iter()
        .filter(|n| n.starts_with("tp__"))
        .collect();
    assert!(!fx.is_empty() && !tp.is_empty(), "{everything:?}");
    for core in CORE {
        assert!(fixture.contains(&core.to_owned()) && peer.contains(&core.to_owned()));
    }
    assert!(fx.iter().all(|n| fixture.contains(n)), "{fixture:?}");
    assert!(
        !fixture.iter().any(|n| n.starts_with("tp__")),
        "{fixture:?}"
    );
    assert!(tp.iter().all(|n| peer.contains(n)), "{peer:?}");
    assert!(!peer.iter().any(|n| n.starts_with("fx__")), "{peer:?}");
    // Only the core tools are outside the servers' own: no authoring tool got in.
    assert_eq!(fixture.len(), fx.len() + CORE.len(), "{fixture:?}");

    // A tool outside the set is unknown there, as if it did not exist; inside it runs.
    let outside = call(
        &g,
        &ctx(None, Some("peer")),
        "fx__greet",
        json!({"name": "x"}),
    )
    .await;
    let e = outside.error_object().expect("an error");
    assert_eq!(e.code, -32602, "{}", outside.as_str());
    assert!(
        e.message.contains("unknown tool \"fx__greet\""),
        "{}",
        e.message
    );
    let inside = call(
        &g,
        &ctx(None, Some("fixture")),
        "fx__greet",
        json!({"name": "x"}),
    )
    .await;
    assert!(inside.result_raw().is_some(), "{}", inside.as_str());

    // Search sees only the set.
    assert!(
        found(&g, &ctx(None, None), "greet")
            .await
            .contains(&"fx__greet".to_owned())
    );
    assert!(
        found(&g, &ctx(None, Some("peer")), "greet")
            .await
            .is_empty()
    );
    assert!(
        found(&g, &ctx(None, Some("fixture")), "greet")
            .await
            .contains(&"fx__greet".to_owned())
    );
    // manifold_call_tool cannot reach out of the set either.
    let via_call = call(
        &g,
        &ctx(None, Some("peer")),
        "manifold_call_tool",
        json!({"name": "fx__greet", "arguments": {"name": "x"}}),
    )
    .await;
    let text = via_call.as_str();
    assert!(
        via_call.error_object().is_some() || text.contains("\"isError\":true"),
        "{text}"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn rules_apply_inside_a_set_and_a_search_set_lists_only_the_meta_tools() {
    let g = started(
        vec![RuleSpec {
            identities: strings(&["bob"]),
            tools: strings(&["fx__greet"]),
            ..RuleSpec::new(0, Effect::Deny)
        }],
        vec![
            ToolsetSpec {
                servers: strings(&["fx"]),
                ..set("fixture")
            },
            ToolsetSpec {
                servers: strings(&["fx"]),
                search_only: true,
                ..set("lean")
            },
        ],
    )
    .await;
    let alice = tools(&g, &ctx(person("alice", &[]), Some("fixture"))).await;
    let bob = tools(&g, &ctx(person("bob", &[]), Some("fixture"))).await;
    assert!(alice.contains(&"fx__greet".to_owned()));
    assert!(!bob.contains(&"fx__greet".to_owned()), "{bob:?}");
    assert_eq!(alice.len(), bob.len() + 1);

    let lean = tools(&g, &ctx(None, Some("lean"))).await;
    assert_eq!(lean, CORE.map(str::to_owned).to_vec(), "{lean:?}");
    assert!(
        found(&g, &ctx(None, Some("lean")), "greet")
            .await
            .contains(&"fx__greet".to_owned())
    );
    assert!(
        !found(&g, &ctx(person("bob", &[]), Some("lean")), "greet")
            .await
            .contains(&"fx__greet".to_owned())
    );
    g.shutdown().await;
}

#[test]
fn callers_bound_to_a_set_get_it_and_are_kept_out_of_others() {
    let policy = Policy::default()
        .with_toolsets(vec![
            ToolsetSpec {
                servers: strings(&["fx"]),
                identities: strings(&["ci"]),
                ..set("ci-only")
            },
            ToolsetSpec {
                servers: strings(&["fx"]),
                groups: strings(&["dev"]),
                ..set("dev")
            },
            ToolsetSpec {
                servers: strings(&["tp"]),
                ..set("open")
            },
        ])
        .unwrap();
    let ci = person("ci", &[]);
    let dana = person("dana", &["dev"]);
    let eve = person("eve", &[]);
    // At /mcp a bound caller works in its set; others in none.
    assert_eq!(
        policy.toolset_for(None, ci.as_deref()).unwrap().as_deref(),
        Some("ci-only")
    );
    assert_eq!(
        policy
            .toolset_for(None, dana.as_deref())
            .unwrap()
            .as_deref(),
        Some("dev")
    );
    assert_eq!(policy.toolset_for(None, eve.as_deref()).unwrap(), None);
    assert_eq!(policy.toolset_for(None, None).unwrap(), None);
    // A bound caller may not wander into another set; an unbound one may not use a bound set.
    assert!(matches!(
        policy.toolset_for(Some("open"), ci.as_deref()),
        Err(ToolsetRefusal::Elsewhere { .. })
    ));
    assert!(matches!(
        policy.toolset_for(Some("ci-only"), eve.as_deref()),
        Err(ToolsetRefusal::Elsewhere { .. })
    ));
    assert_eq!(
        policy
            .toolset_for(Some("open"), eve.as_deref())
            .unwrap()
            .as_deref(),
        Some("open")
    );
    let unknown = policy.toolset_for(Some("nope"), None).unwrap_err();
    assert_eq!(unknown, ToolsetRefusal::Unknown("nope".to_owned()));
    assert!(unknown.to_string().contains("[toolsets.NAME]"));
}
