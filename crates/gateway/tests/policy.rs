//! Authorization and rate limits in the core, against real upstream processes (the conformance
//! fixture and the test peer over stdio), with the caller set on the request context as the
//! authentication layer sets it. Each test names one attack and asserts the exact JSON-RPC error
//! (code and message) the caller gets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use manifold_gateway::policy::{Effect, Policy, RuleSpec};
use manifold_gateway::rate_limit::{Limit, RateLimitSpec, RateLimits, ToolLimitSpec};
use manifold_gateway::{
    Caller, ClientView, Gateway, GatewayEvent, GatewaySettings, RequestContext, SilentPeer,
    UpstreamDefinition,
};
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{EraChoice, Target};
use manifold_wire::{Id, Message, Revision};
use serde_json::{Value, json};

const TASKS: &str = r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#;
const DAY: Duration = Duration::from_secs(86_400);

fn fixture(name: &str, era: EraChoice) -> UpstreamDefinition {
    let bin = manifold_testkit::workspace_binary(
        "manifold-conformance-fixture",
        "manifold-conformance-fixture",
    )
    .unwrap();
    let mut def = UpstreamDefinition::new(
        name,
        Target::Stdio(StdioSpec {
            command: bin.display().to_string(),
            args: vec!["stdio".to_owned()],
            ..StdioSpec::default()
        }),
    );
    def.era = era;
    def.client_capabilities = r#"{"elicitation":{},"sampling":{},"extensions":{}}"#.to_owned();
    def
}

fn test_peer(name: &str, extra: &[&str]) -> UpstreamDefinition {
    let mut args = vec!["stdio".to_owned()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    UpstreamDefinition::new(
        name,
        Target::Stdio(StdioSpec {
            command: manifold_testkit::test_peer().unwrap().display().to_string(),
            args,
            ..StdioSpec::default()
        }),
    )
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

async fn started(
    rules: Vec<RuleSpec>,
    limits: RateLimitSpec,
    defs: Vec<UpstreamDefinition>,
) -> Gateway {
    let settings = GatewaySettings {
        rules: Policy::compile(rules).unwrap(),
        rate_limits: RateLimits::compile(limits).unwrap(),
        ..GatewaySettings::default()
    };
    let g = Gateway::start(settings, defs);
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

fn ctx(caller: Option<Arc<Caller>>, revision: Revision, caps: &str) -> RequestContext {
    RequestContext {
        client: ClientView {
            revision,
            capabilities: caps.to_owned(),
            info: None,
        },
        peer: Arc::new(SilentPeer),
        session: None,
        caller,
        toolset: None,
        trace: None,
        audit: Default::default(),
    }
}

fn legacy(caller: Option<Arc<Caller>>) -> RequestContext {
    ctx(caller, Revision::V2025_11_25, "{}")
}

fn req(id: i64, method: &str, params: &str) -> Message {
    Message::request(&Id::Num(id), method, Some(params))
}

fn result(m: &Message) -> Value {
    serde_json::from_str(
        m.result_raw()
            .unwrap_or_else(|| panic!("not a result: {}", m.as_str())),
    )
    .unwrap()
}

/// The (code, message) of an error response.
fn error_of(m: &Message) -> (i64, String) {
    let e = m
        .error_object()
        .unwrap_or_else(|| panic!("not an error: {}", m.as_str()));
    (e.code, e.message)
}

fn error_data(m: &Message) -> Value {
    serde_json::from_str(m.error_object().unwrap().data.unwrap().get()).unwrap()
}

/// Every item of a list, following Manifold's cursors.
async fn list_all(g: &Gateway, c: &RequestContext, method: &str, member: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..10 {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }).to_string(),
            None => "{}".to_owned(),
        };
        let r = result(&g.handle(c, &req(100 + page, method, &params)).await);
        items.extend(r[member].as_array().unwrap().iter().cloned());
        match r["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return items,
        }
    }
    panic!("more than 10 pages");
}

async fn names(
    g: &Gateway,
    c: &RequestContext,
    method: &str,
    member: &str,
    key: &str,
) -> Vec<String> {
    list_all(g, c, method, member)
        .await
        .iter()
        .map(|i| i[key].as_str().unwrap().to_owned())
        .collect()
}

async fn call(g: &Gateway, c: &RequestContext, name: &str, arguments: Value) -> Message {
    let params = json!({ "name": name, "arguments": arguments }).to_string();
    g.handle(c, &req(1, "tools/call", &params)).await
}

/// bob may not see the fixture's `greet`; everyone else may.
fn hide_greet_from_bob() -> Vec<RuleSpec> {
    vec![RuleSpec {
        name: Some("no-greet-for-bob".into()),
        identities: strings(&["bob"]),
        tools: strings(&["fx__greet"]),
        ..RuleSpec::new(0, Effect::Deny)
    }]
}

const UNKNOWN_GREET: &str =
    "unknown tool \"fx__greet\"; tools/list (or manifold_search_tools) shows what is offered";

#[tokio::test]
async fn a_hidden_tool_called_by_its_exposed_name_is_answered_as_an_unknown_tool() {
    let g = started(
        hide_greet_from_bob(),
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let (alice, bob) = (legacy(person("alice", &[])), legacy(person("bob", &[])));
    let alice_sees = names(&g, &alice, "tools/list", "tools", "name").await;
    let bob_sees = names(&g, &bob, "tools/list", "tools", "name").await;
    assert!(alice_sees.contains(&"fx__greet".to_owned()));
    assert!(!bob_sees.contains(&"fx__greet".to_owned()), "{bob_sees:?}");
    assert_eq!(alice_sees.len(), bob_sees.len() + 1);

    let hidden = call(&g, &bob, "fx__greet", json!({"name": "x"})).await;
    assert_eq!(error_of(&hidden), (-32602, UNKNOWN_GREET.to_owned()));
    // Exactly what a tool that exists nowhere gets.
    let nowhere = call(&g, &bob, "fx__nowhere_at_all", json!({})).await;
    assert_eq!(
        error_of(&nowhere),
        (
            -32602,
            "unknown tool \"fx__nowhere_at_all\"; tools/list (or manifold_search_tools) shows what is offered"
                .to_owned()
        )
    );
    // "Did you mean" never points at a hidden tool.
    let typo = call(&g, &bob, "fx__gret", json!({})).await;
    assert_eq!(
        error_of(&typo),
        (
            -32602,
            "unknown tool \"fx__gret\"; tools/list (or manifold_search_tools) shows what is offered"
                .to_owned()
        )
    );
    let typo = call(&g, &alice, "fx__gret", json!({})).await;
    assert_eq!(
        error_of(&typo),
        (
            -32602,
            "unknown tool \"fx__gret\"; did you mean \"fx__greet\"?".to_owned()
        )
    );
    let greeted = call(&g, &alice, "fx__greet", json!({"name": "Ada"})).await;
    assert_eq!(result(&greeted)["content"][0]["text"], "Hello, Ada!");
    g.shutdown().await;
}

#[tokio::test]
async fn a_hidden_tool_is_not_reached_through_manifold_call_tool() {
    let g = started(
        hide_greet_from_bob(),
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let bob = legacy(person("bob", &[]));
    let through = call(
        &g,
        &bob,
        "manifold_call_tool",
        json!({"name": "fx__greet", "arguments": {"name": "x"}}),
    )
    .await;
    assert_eq!(error_of(&through), (-32602, UNKNOWN_GREET.to_owned()));
    let alice = legacy(person("alice", &[]));
    let through = call(
        &g,
        &alice,
        "manifold_call_tool",
        json!({"name": "fx__greet", "arguments": {"name": "Ada"}}),
    )
    .await;
    assert_eq!(result(&through)["content"][0]["text"], "Hello, Ada!");
    g.shutdown().await;
}

#[tokio::test]
async fn a_hidden_tool_is_not_found_through_manifold_search_tools() {
    let g = started(
        hide_greet_from_bob(),
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let search = |c: RequestContext| {
        let g = g.clone();
        async move {
            let r = result(
                &call(
                    &g,
                    &c,
                    "manifold_search_tools",
                    json!({"query": "greet hello"}),
                )
                .await,
            );
            r["structuredContent"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let for_alice = search(legacy(person("alice", &[]))).await;
    assert_eq!(
        for_alice.first().map(String::as_str),
        Some("fx__greet"),
        "{for_alice:?}"
    );
    let for_bob = search(legacy(person("bob", &[]))).await;
    assert!(!for_bob.contains(&"fx__greet".to_owned()), "{for_bob:?}");
    g.shutdown().await;
}

#[tokio::test]
async fn every_page_of_a_long_list_is_filtered_and_the_cursors_count_what_the_caller_sees() {
    let rules = vec![RuleSpec {
        anonymous: true,
        tools: strings(&["many__tool_0000*", "many__tool_0120*"]),
        ..RuleSpec::new(0, Effect::Deny)
    }];
    let g = started(
        rules,
        RateLimitSpec::default(),
        vec![test_peer(
            "many",
            &[
                "--behaviour",
                "many-tools",
                "--count",
                "1500",
                "--page-size",
                "400",
            ],
        )],
    )
    .await;
    let anonymous = legacy(None);
    let first = result(&g.handle(&anonymous, &req(1, "tools/list", "{}")).await);
    assert_eq!(first["tools"].as_array().unwrap().len(), 1000);
    assert_eq!(first["nextCursor"], "mf1-1000");
    let seen = names(&g, &anonymous, "tools/list", "tools", "name").await;
    // 3 built-ins + 1500 generated - 20 hidden, over two pages.
    assert_eq!(seen.len(), 1483);
    assert!(seen.contains(&"many__tool_00010".to_owned()));
    assert!(seen.contains(&"many__tool_01199".to_owned()));
    assert!(
        !seen
            .iter()
            .any(|n| n.starts_with("many__tool_0000") || n.starts_with("many__tool_0120")),
        "a hidden tool was listed"
    );
    let everyone = legacy(person("alice", &[]));
    assert_eq!(
        names(&g, &everyone, "tools/list", "tools", "name")
            .await
            .len(),
        1503
    );
    g.shutdown().await;
}

#[tokio::test]
async fn resources_and_templates_outside_the_rules_are_neither_listed_nor_read() {
    let rules = vec![RuleSpec {
        groups: strings(&["interns"]),
        resources: strings(&["fx+test://static-*", "fx+test://template/*"]),
        ..RuleSpec::new(0, Effect::Deny)
    }];
    let g = started(
        rules,
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let intern = legacy(person("ivy", &["interns"]));
    let staff = legacy(person("sam", &["staff"]));
    let uris = names(&g, &intern, "resources/list", "resources", "uri").await;
    assert_eq!(uris, ["fx+test://watched-resource"]);
    let all = names(&g, &staff, "resources/list", "resources", "uri").await;
    assert!(all.contains(&"fx+test://static-text".to_owned()), "{all:?}");
    let templates = names(
        &g,
        &intern,
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    )
    .await;
    assert!(templates.is_empty(), "{templates:?}");
    let templates = names(
        &g,
        &staff,
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    )
    .await;
    assert_eq!(templates, ["fx+test://template/{id}/data"]);

    let read = |uri: &str| req(2, "resources/read", &json!({ "uri": uri }).to_string());
    let not_found = |uri: &str| {
        (
            -32602,
            format!("resource not found: {uri:?}; resources/list shows what is offered"),
        )
    };
    for uri in [
        "fx+test://static-text",
        "fx+test://template/7/data",
        // Nothing is there: the answer is the same, so the rules are no oracle.
        "fx+test://static-nothing",
    ] {
        assert_eq!(
            error_of(&g.handle(&intern, &read(uri)).await),
            not_found(uri),
            "{uri}"
        );
    }
    let sub = g
        .handle(
            &intern,
            &req(
                3,
                "resources/subscribe",
                r#"{"uri":"fx+test://static-text"}"#,
            ),
        )
        .await;
    assert_eq!(error_of(&sub), not_found("fx+test://static-text"));
    let ok = result(&g.handle(&staff, &read("fx+test://template/7/data")).await);
    assert_eq!(ok["contents"][0]["uri"], "fx+test://template/7/data");
    let ok = result(&g.handle(&intern, &read("fx+test://watched-resource")).await);
    assert_eq!(ok["contents"][0]["uri"], "fx+test://watched-resource");
    g.shutdown().await;
}

#[tokio::test]
async fn prompts_outside_the_rules_and_their_completions_are_unknown() {
    let rules = vec![RuleSpec {
        anonymous: true,
        prompts: strings(&["fx__test_prompt_with_*"]),
        ..RuleSpec::new(0, Effect::Deny)
    }];
    let g = started(
        rules,
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let anonymous = legacy(None);
    let signed_in = legacy(person("alice", &[]));
    let prompts = names(&g, &anonymous, "prompts/list", "prompts", "name").await;
    assert!(
        prompts.contains(&"fx__test_simple_prompt".to_owned()),
        "{prompts:?}"
    );
    assert!(
        !prompts
            .iter()
            .any(|p| p.starts_with("fx__test_prompt_with_")),
        "{prompts:?}"
    );
    assert!(
        names(&g, &signed_in, "prompts/list", "prompts", "name")
            .await
            .contains(&"fx__test_prompt_with_arguments".to_owned())
    );

    let get = req(
        2,
        "prompts/get",
        r#"{"name":"fx__test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}"#,
    );
    assert_eq!(
        error_of(&g.handle(&anonymous, &get).await),
        (
            -32602,
            "unknown prompt \"fx__test_prompt_with_arguments\"; prompts/list shows what is offered"
                .to_owned()
        )
    );
    assert!(g.handle(&signed_in, &get).await.result_raw().is_some());

    let complete = req(
        3,
        "completion/complete",
        r#"{"ref":{"type":"ref/prompt","name":"fx__test_prompt_with_arguments"},"argument":{"name":"arg1","value":"par"}}"#,
    );
    let no_target = (
        -32602,
        "completion/complete names no prompt or resource Manifold offers".to_owned(),
    );
    assert_eq!(error_of(&g.handle(&anonymous, &complete).await), no_target);
    // The same answer as for a prompt that does not exist.
    let missing = req(
        4,
        "completion/complete",
        r#"{"ref":{"type":"ref/prompt","name":"fx__no_such_prompt"},"argument":{"name":"arg1","value":"par"}}"#,
    );
    assert_eq!(error_of(&g.handle(&anonymous, &missing).await), no_target);
    let values = result(&g.handle(&signed_in, &complete).await);
    assert_eq!(
        values["completion"]["values"],
        json!(["paris", "park", "party"])
    );
    g.shutdown().await;
}

#[tokio::test]
async fn an_explaining_rule_answers_forbidden_and_names_itself() {
    let rules = vec![RuleSpec {
        name: Some("no-errors".into()),
        explain: true,
        identities: strings(&["bob"]),
        tools: strings(&["fx__test_error_handling"]),
        prompts: strings(&["fx__test_simple_prompt"]),
        ..RuleSpec::new(0, Effect::Deny)
    }];
    let g = started(
        rules,
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let bob = legacy(person("bob", &[]));
    let refused = call(&g, &bob, "fx__test_error_handling", json!({})).await;
    assert_eq!(
        error_of(&refused),
        (
            -32007,
            "the tool \"fx__test_error_handling\" is not allowed for \"bob\" by rule \"no-errors\" (rules[0])"
                .to_owned()
        )
    );
    assert_eq!(
        error_data(&refused),
        json!({"rule": {"index": 0, "name": "no-errors"}})
    );
    let prompt = g
        .handle(
            &bob,
            &req(2, "prompts/get", r#"{"name":"fx__test_simple_prompt"}"#),
        )
        .await;
    assert_eq!(
        error_of(&prompt),
        (
            -32007,
            "the prompt \"fx__test_simple_prompt\" is not allowed for \"bob\" by rule \"no-errors\" (rules[0])"
                .to_owned()
        )
    );
    // Still not listed: explaining is about the answer to a call, not about advertising.
    let listed = names(&g, &bob, "tools/list", "tools", "name").await;
    assert!(!listed.contains(&"fx__test_error_handling".to_owned()));
    g.shutdown().await;
}

#[tokio::test]
async fn built_in_tools_can_be_hidden_too() {
    let rules = vec![RuleSpec {
        anonymous: true,
        tools: strings(&["manifold_call_tool"]),
        ..RuleSpec::new(0, Effect::Deny)
    }];
    let g = started(rules, RateLimitSpec::default(), vec![]).await;
    let anonymous = legacy(None);
    let listed = names(&g, &anonymous, "tools/list", "tools", "name").await;
    assert_eq!(listed, ["manifold_health", "manifold_search_tools"]);
    let m = call(&g, &anonymous, "manifold_call_tool", json!({"name": "x"})).await;
    assert_eq!(
        error_of(&m),
        (
            -32602,
            "unknown tool \"manifold_call_tool\"; tools/list (or manifold_search_tools) shows what is offered"
                .to_owned()
        )
    );
    g.shutdown().await;
}

#[tokio::test]
async fn health_shows_only_the_servers_a_caller_may_reach() {
    let rules = vec![RuleSpec {
        identities: strings(&["bob"]),
        servers: strings(&["tp"]),
        ..RuleSpec::new(0, Effect::Deny)
    }];
    let g = started(
        rules,
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy), test_peer("tp", &[])],
    )
    .await;
    let servers = |c: RequestContext| {
        let g = g.clone();
        async move {
            let r = result(&call(&g, &c, "manifold_health", json!({})).await);
            r["structuredContent"]["upstreams"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| {
                    (
                        u["name"].as_str().unwrap().to_owned(),
                        u["tools"].as_u64().unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    let for_bob = servers(legacy(person("bob", &[]))).await;
    assert_eq!(for_bob.len(), 1);
    assert_eq!(for_bob[0].0, "fx");
    let for_alice = servers(legacy(person("alice", &[]))).await;
    assert_eq!(for_alice.len(), 2);
    assert_eq!(for_alice[1].0, "tp");
    let tp_listed = names(
        &g,
        &legacy(person("alice", &[])),
        "tools/list",
        "tools",
        "name",
    )
    .await
    .iter()
    .filter(|n| n.starts_with("tp__"))
    .count();
    assert!(tp_listed > 0);
    assert_eq!(for_alice[1].1, tp_listed as u64);
    let tp_tools = call(
        &g,
        &legacy(person("bob", &[])),
        "tp__echo",
        json!({"message": "x"}),
    )
    .await;
    assert_eq!(error_of(&tp_tools).0, -32602);
    g.shutdown().await;
}

#[tokio::test]
async fn a_task_of_a_hidden_tool_cannot_be_followed() {
    let g = started(
        vec![],
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Modern)],
    )
    .await;
    // Rules that hide nothing from alice yet, put in force as a reload would.
    let hide_slow_from = |who: &[&str]| {
        Policy::compile(vec![RuleSpec {
            identities: strings(who),
            tools: strings(&["fx__slow_compute"]),
            ..RuleSpec::new(0, Effect::Deny)
        }])
        .unwrap()
    };
    g.replace_access(hide_slow_from(&["mallory"]), RateLimits::default());
    let alice = ctx(person("alice", &[]), Revision::V2026_07_28, TASKS);
    let bob = ctx(person("bob", &[]), Revision::V2026_07_28, TASKS);
    let created = result(&call(&g, &alice, "fx__slow_compute", json!({"seconds": 30})).await);
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    assert!(task.starts_with("fx:"), "{task}");
    let get = req(2, "tasks/get", &json!({ "taskId": task }).to_string());
    let status = result(&g.handle(&alice, &get).await);
    assert_eq!(status["status"], "working", "{status}");

    let unknown = |id: &str| {
        (
            -32602,
            format!("unknown task {id:?}: Manifold knows no task by that id for this caller"),
        )
    };
    // Another identity cannot follow alice's task.
    assert_eq!(error_of(&g.handle(&bob, &get).await), unknown(&task));
    // An id no one was given: the same answer.
    let made_up = req(3, "tasks/get", r#"{"taskId":"fx:made-up"}"#);
    assert_eq!(
        error_of(&g.handle(&alice, &made_up).await),
        unknown("fx:made-up")
    );
    // Once the tool is hidden from alice, so is the task it started.
    g.replace_access(hide_slow_from(&["alice"]), RateLimits::default());
    assert_eq!(error_of(&g.handle(&alice, &get).await), unknown(&task));
    let cancel = req(4, "tasks/cancel", &json!({ "taskId": task }).to_string());
    assert_eq!(error_of(&g.handle(&alice, &cancel).await), unknown(&task));
    g.shutdown().await;
}

#[tokio::test]
async fn the_rate_limit_answers_with_the_limit_and_a_retry_hint() {
    let limits = RateLimitSpec {
        per_identity: Some(Limit::per(3, DAY)),
        per_tool: None,
        tools: vec![ToolLimitSpec {
            tools: strings(&["fx__greet"]),
            limit: Limit::per(1, DAY),
        }],
    };
    let g = started(
        hide_greet_from_bob(),
        limits,
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let alice = legacy(person("alice", &[]));
    let greeted = call(&g, &alice, "fx__greet", json!({"name": "Ada"})).await;
    assert!(greeted.result_raw().is_some());
    let again = call(&g, &alice, "fx__greet", json!({"name": "Ada"})).await;
    assert_eq!(
        error_of(&again),
        (
            -32006,
            "rate limit exceeded: \"alice\" may make 1 call of \"fx__greet\" per day (rate_limits.tools[0]); retry in 24 h"
                .to_owned()
        )
    );
    let data = error_data(&again);
    assert_eq!(data["limit"], "rate_limits.tools[0]");
    let wait = data["retryAfterMs"].as_u64().unwrap();
    assert!(
        (86_400_000 - 3_600_000..=86_400_000).contains(&wait),
        "{wait}"
    );
    // Lists are not counted; the third counted request is the last one alice gets today.
    for _ in 0..5 {
        assert!(
            g.handle(&alice, &req(9, "tools/list", "{}"))
                .await
                .result_raw()
                .is_some()
        );
    }
    let third = call(&g, &alice, "fx__test_simple_text", json!({})).await;
    assert!(third.result_raw().is_some(), "{}", third.as_str());
    let fourth = call(&g, &alice, "fx__test_simple_text", json!({})).await;
    assert_eq!(
        error_of(&fourth),
        (
            -32006,
            "rate limit exceeded: \"alice\" may make 3 requests per day (rate_limits.per_identity); retry in 8 h"
                .to_owned()
        )
    );
    assert_eq!(error_data(&fourth)["limit"], "rate_limits.per_identity");
    assert_eq!(
        manifold_gateway::rate_limit::retry_after_secs_of(&fourth),
        Some(
            error_data(&fourth)["retryAfterMs"]
                .as_u64()
                .unwrap()
                .div_ceil(1000)
        )
    );
    // Someone else has their own budget; a hidden tool is still unknown, not rate limited.
    let bob = legacy(person("bob", &[]));
    for _ in 0..2 {
        let hidden = call(&g, &bob, "fx__greet", json!({"name": "x"})).await;
        assert_eq!(error_of(&hidden), (-32602, UNKNOWN_GREET.to_owned()));
    }
    let anonymous = legacy(None);
    for _ in 0..3 {
        assert!(
            g.handle(&anonymous, &req(5, "ping", "{}"))
                .await
                .result_raw()
                .is_some()
        );
        assert!(
            call(&g, &anonymous, "manifold_health", json!({}))
                .await
                .result_raw()
                .is_some()
        );
    }
    assert_eq!(
        error_of(&call(&g, &anonymous, "manifold_health", json!({})).await),
        (
            -32006,
            "rate limit exceeded: anonymous callers may make 3 requests per day (rate_limits.per_identity); retry in 8 h"
                .to_owned()
        )
    );
    g.shutdown().await;
}

#[tokio::test]
async fn rules_apply_to_the_tools_a_list_changed_brings_in() {
    let rules = vec![
        RuleSpec {
            identities: strings(&["alice"]),
            tools: strings(&["old__test_dynamic_*"]),
            ..RuleSpec::new(0, Effect::Allow)
        },
        RuleSpec {
            tools: strings(&["old__test_dynamic_*"]),
            ..RuleSpec::new(1, Effect::Deny)
        },
    ];
    let g = started(
        rules,
        RateLimitSpec::default(),
        vec![fixture("old", EraChoice::Legacy)],
    )
    .await;
    let mut events = g.events();
    let anonymous = legacy(None);
    let alice = legacy(person("alice", &[]));
    assert!(g.catalog().tool("old__test_dynamic_tool").is_none());
    let before = call(&g, &anonymous, "old__test_dynamic_tool", json!({})).await;
    assert_eq!(
        error_of(&before),
        (
            -32602,
            "unknown tool \"old__test_dynamic_tool\"; did you mean \"old__test_logging_tool\"?"
                .to_owned()
        )
    );
    let toggled = call(&g, &anonymous, "old__test_trigger_tool_change", json!({})).await;
    assert!(
        result(&toggled)["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("now listed")
    );
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if events.recv().await.unwrap() == GatewayEvent::ToolsChanged
                && g.catalog().tool("old__test_dynamic_tool").is_some()
            {
                return;
            }
        }
    })
    .await
    .expect("the new tool reached the catalog");
    let seen = names(&g, &anonymous, "tools/list", "tools", "name").await;
    assert!(
        !seen.contains(&"old__test_dynamic_tool".to_owned()),
        "{seen:?}"
    );
    assert!(
        names(&g, &alice, "tools/list", "tools", "name")
            .await
            .contains(&"old__test_dynamic_tool".to_owned())
    );
    // Called now, it is answered exactly as before it existed.
    let after = call(&g, &anonymous, "old__test_dynamic_tool", json!({})).await;
    assert_eq!(error_of(&after), error_of(&before));
    assert!(
        call(&g, &alice, "old__test_dynamic_tool", json!({}))
            .await
            .result_raw()
            .is_some()
    );
    g.shutdown().await;
}

#[tokio::test]
async fn rules_a_reload_puts_in_force_apply_to_the_next_request_and_lists_are_announced() {
    let g = started(
        vec![],
        RateLimitSpec::default(),
        vec![fixture("fx", EraChoice::Legacy)],
    )
    .await;
    let mut events = g.events();
    let anonymous = legacy(None);
    assert!(
        names(&g, &anonymous, "tools/list", "tools", "name")
            .await
            .contains(&"fx__greet".to_owned())
    );
    g.replace_access(
        Policy::compile(vec![RuleSpec {
            anonymous: true,
            tools: strings(&["fx__greet"]),
            ..RuleSpec::new(0, Effect::Deny)
        }])
        .unwrap(),
        RateLimits::default(),
    );
    let mut announced = Vec::new();
    while let Ok(e) = events.try_recv() {
        if !matches!(
            e,
            GatewayEvent::Log { .. } | GatewayEvent::ResourceUpdated { .. }
        ) {
            announced.push(e);
        }
    }
    assert_eq!(
        announced,
        [
            GatewayEvent::ToolsChanged,
            GatewayEvent::PromptsChanged,
            GatewayEvent::ResourcesChanged
        ]
    );
    assert!(
        !names(&g, &anonymous, "tools/list", "tools", "name")
            .await
            .contains(&"fx__greet".to_owned())
    );
    assert_eq!(
        error_of(&call(&g, &anonymous, "fx__greet", json!({"name": "x"})).await),
        (-32602, UNKNOWN_GREET.to_owned())
    );
    g.shutdown().await;
}
