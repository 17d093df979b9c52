//! The ways a session could learn of what its caller's rules hide, each closed, against the real
//! conformance fixture behind a real gateway and the legacy session every transport keeps: a
//! `list_changed` whose every change is hidden, a subscription a reload hid, and a tool result
//! embedding a hidden resource (docs/security.md, "What a session hears").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use manifold_gateway::policy::{Effect, Policy, RuleSpec};
use manifold_gateway::rate_limit::RateLimits;
use manifold_gateway::{
    Caller, ClientView, Gateway, GatewayEvent, GatewaySettings, UpstreamDefinition,
};
use manifold_server::session::{CallOrigin, ClientSession, Outlet, run_session_call_as};
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{EraChoice, Target};
use manifold_wire::{Id, Message, Revision};
use tokio::sync::broadcast::Receiver;
use tokio_util::sync::CancellationToken;

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

async fn started(rules: Vec<RuleSpec>) -> Gateway {
    let settings = GatewaySettings {
        rules: Policy::compile(rules).unwrap(),
        ..GatewaySettings::default()
    };
    let g = Gateway::start(settings, vec![fixture()]);
    g.wait_started(Duration::from_secs(60)).await;
    g
}

fn person(name: &str) -> Option<Arc<Caller>> {
    Some(Arc::new(Caller {
        name: name.to_owned(),
        groups: Vec::new(),
        scopes: Vec::new(),
        bearer: None,
    }))
}

#[derive(Default)]
struct Collected(Mutex<Vec<String>>);

impl Outlet for Collected {
    fn send(&self, message: &Message) -> bool {
        self.0.lock().unwrap().push(message.as_str().to_owned());
        true
    }
}

fn session() -> Arc<ClientSession> {
    Arc::new(ClientSession::new(
        ClientView {
            revision: Revision::V2025_11_25,
            capabilities: "{}".to_owned(),
            info: None,
        },
        Some("s".to_owned()),
        "m".to_owned(),
        16,
    ))
}

async fn call(
    g: &Gateway,
    s: &Arc<ClientSession>,
    caller: Option<Arc<Caller>>,
    method: &str,
    params: &str,
) -> Message {
    let request = Message::request(&Id::Num(1), method, Some(params));
    let outlet: Arc<dyn Outlet> = Arc::new(Collected::default());
    let answer = run_session_call_as(
        g,
        s,
        outlet,
        &request,
        &CancellationToken::new(),
        CallOrigin {
            caller,
            ..CallOrigin::default()
        },
    )
    .await
    .unwrap();
    (*answer).clone()
}

/// The methods `session` hears for the events `events` yields until one is `until` (included).
async fn heard_until(
    events: &mut Receiver<GatewayEvent>,
    session: &ClientSession,
    until: &GatewayEvent,
) -> Vec<String> {
    let mut methods = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let received = events.recv().await;
            let last = received.as_ref().is_ok_and(|e| e == until);
            for m in session.messages_for_received(received).unwrap() {
                methods.push(m.method().unwrap_or_default().to_owned());
            }
            if last {
                return;
            }
        }
    })
    .await
    .expect("the event arrived");
    methods
}

#[tokio::test]
async fn a_list_changed_whose_every_change_is_hidden_does_not_reach_the_caller() {
    let g = started(vec![
        RuleSpec {
            identities: vec!["alice".to_owned()],
            tools: vec!["fx__test_dynamic_*".to_owned()],
            ..RuleSpec::new(0, Effect::Allow)
        },
        RuleSpec {
            tools: vec!["fx__test_dynamic_*".to_owned()],
            ..RuleSpec::new(1, Effect::Deny)
        },
    ])
    .await;
    let (bob, alice) = (session(), session());
    call(&g, &bob, person("bob"), "ping", "{}").await;
    call(&g, &alice, person("alice"), "ping", "{}").await;
    let (mut bob_events, mut alice_events) = (g.events(), g.events());
    let toggle = r#"{"name":"fx__test_trigger_tool_change","arguments":{}}"#;
    call(&g, &bob, person("bob"), "tools/call", toggle).await;
    let changed = GatewayEvent::ToolsChanged;
    let list_changed = "notifications/tools/list_changed".to_owned();
    let alice_heard = heard_until(&mut alice_events, &alice, &changed).await;
    assert!(alice_heard.contains(&list_changed), "{alice_heard:?}");
    let bob_heard = heard_until(&mut bob_events, &bob, &changed).await;
    assert!(!bob_heard.contains(&list_changed), "{bob_heard:?}");
    g.shutdown().await;
}

#[tokio::test]
async fn a_subscription_a_reload_hides_gets_no_further_updates() {
    let g = started(Vec::new()).await;
    let s = session();
    let watched = r#"{"uri":"fx+test://watched-resource"}"#;
    let subscribed = call(&g, &s, None, "resources/subscribe", watched).await;
    assert!(subscribed.result_raw().is_some(), "{}", subscribed.as_str());
    let trigger = r#"{"name":"fx__test_trigger_resource_update","arguments":{}}"#;
    let updated = GatewayEvent::ResourceUpdated {
        uri: "fx+test://watched-resource".to_owned(),
    };
    let mut events = g.events();
    call(&g, &s, None, "tools/call", trigger).await;
    let heard = heard_until(&mut events, &s, &updated).await;
    assert!(
        heard.contains(&"notifications/resources/updated".to_owned()),
        "before the reload the update is heard: {heard:?}"
    );
    g.replace_access(
        Policy::compile(vec![RuleSpec {
            resources: vec!["fx+test://watched-*".to_owned()],
            ..RuleSpec::new(0, Effect::Deny)
        }])
        .unwrap(),
        RateLimits::default(),
    );
    for _ in 0..2 {
        call(&g, &s, None, "tools/call", trigger).await;
        let heard = heard_until(&mut events, &s, &updated).await;
        assert!(
            !heard.contains(&"notifications/resources/updated".to_owned()),
            "after the reload: {heard:?}"
        );
    }
    g.replace_access(Policy::default(), RateLimits::default());
    call(&g, &s, None, "tools/call", trigger).await;
    let heard = heard_until(&mut events, &s, &updated).await;
    assert!(
        !heard.contains(&"notifications/resources/updated".to_owned()),
        "the subscription was dropped, not paused: {heard:?}"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn an_embedded_resource_the_caller_may_not_see_is_taken_out_of_the_result() {
    let g = started(vec![RuleSpec {
        identities: vec!["bob".to_owned()],
        resources: vec!["fx+test://mixed-*".to_owned()],
        ..RuleSpec::new(0, Effect::Deny)
    }])
    .await;
    let s = session();
    let mixed = r#"{"name":"fx__test_multiple_content_types","arguments":{}}"#;
    let full = call(&g, &s, person("carol"), "tools/call", mixed).await;
    let kept = call(&g, &s, person("bob"), "tools/call", mixed).await;
    let full: serde_json::Value = serde_json::from_str(full.result_raw().unwrap()).unwrap();
    let kept: serde_json::Value = serde_json::from_str(kept.result_raw().unwrap()).unwrap();
    let content = full["content"].as_array().unwrap();
    assert_eq!(
        content[2]["resource"]["uri"],
        "fx+test://mixed-content-resource"
    );
    assert_eq!(kept["content"].as_array().unwrap(), &content[..2]);
    let mut without = full.clone();
    without["content"] = kept["content"].clone();
    without["_meta"]["io.manifold/callId"] = kept["_meta"]["io.manifold/callId"].clone();
    assert_eq!(kept, without, "everything else is as the upstream sent it");
    g.shutdown().await;
}
