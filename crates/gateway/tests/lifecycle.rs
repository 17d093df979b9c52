//! The gateway core's lifecycle against real upstream processes (the workspace's test peer over
//! stdio): a reload applied by name and definition (`Gateway::reconfigure`), a refused reload
//! that leaves everything as it was, a removed server that lets its running call finish, the
//! idle shutdown of a lazy upstream, a crashed upstream that keeps its lists while it restarts
//! (and withdraws them in a crash loop), and the rules and pin policies a reload puts in force.
//! Process ids come from `Upstream::describe` ("stdio CMD (pid N)").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_gateway::reconfigure::{ReconfigureError, Reconfigured};
use manifold_gateway::{
    Gateway, GatewayEvent, GatewaySettings, RequestContext, Status, UpstreamDefinition,
};
use manifold_testkit::process_is_running;
use manifold_upstream::Target;
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_wire::{Id, Message, Revision};
use serde_json::Value;

const HANG_GUARD: Duration = Duration::from_secs(60);
const DRAIN: Duration = Duration::from_secs(30);

fn peer_def(name: &str, env: &[(&str, &str)]) -> UpstreamDefinition {
    UpstreamDefinition::new(
        name,
        Target::Stdio(StdioSpec {
            command: manifold_testkit::test_peer().unwrap().display().to_string(),
            args: vec!["stdio".to_owned()],
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..StdioSpec::default()
        }),
    )
}

fn ctx() -> RequestContext {
    RequestContext::silent(Revision::V2025_11_25)
}

async fn call(g: &Gateway, id: i64, tool: &str, args: &str) -> Value {
    let m = g
        .handle(
            &ctx(),
            &Message::request(
                &Id::Num(id),
                "tools/call",
                Some(&format!(r#"{{"name":"{tool}","arguments":{args}}}"#)),
            ),
        )
        .await;
    match m.result_raw() {
        Some(r) => serde_json::from_str(r).unwrap(),
        None => serde_json::json!({ "error": m.error_object().map(|e| e.message) }),
    }
}

fn pid(g: &Gateway, name: &str) -> Option<u32> {
    let u = g.upstreams().iter().find(|u| u.def.name == name).cloned()?;
    let described = u.describe()?;
    described
        .rsplit_once("(pid ")?
        .1
        .trim_end_matches(')')
        .parse()
        .ok()
}

async fn wait_until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "hung waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn started(defs: Vec<UpstreamDefinition>) -> Gateway {
    let g = Gateway::start(GatewaySettings::default(), defs);
    g.wait_started(HANG_GUARD).await;
    g
}

#[tokio::test]
async fn a_reload_restarts_only_what_changed_and_tells_sessions_once() {
    let g = started(vec![
        peer_def("keep", &[]),
        peer_def("change", &[]),
        peer_def("remove", &[]),
    ])
    .await;
    let (keep, change, remove) = (
        pid(&g, "keep").unwrap(),
        pid(&g, "change").unwrap(),
        pid(&g, "remove").unwrap(),
    );
    let kept_upstream = g.upstreams()[0].clone();
    let mut events = g.events();
    let summary = g
        .reconfigure(
            vec![
                peer_def("keep", &[]),
                peer_def("change", &[("VERSION", "2")]),
                peer_def("add", &[]),
            ],
            DRAIN,
        )
        .await
        .unwrap();
    assert_eq!(
        summary,
        Reconfigured {
            added: vec!["add".to_owned()],
            removed: vec!["remove".to_owned()],
            changed: vec!["change".to_owned()],
            unchanged: vec!["keep".to_owned()],
        }
    );
    let names: Vec<String> = g.upstreams().iter().map(|u| u.def.name.clone()).collect();
    assert_eq!(names, ["keep", "change", "add"]);
    assert!(
        Arc::ptr_eq(&g.upstreams()[0], &kept_upstream),
        "the unchanged upstream is the same, untouched"
    );
    assert_eq!(pid(&g, "keep"), Some(keep));
    let restarted = pid(&g, "change").unwrap();
    assert_ne!(restarted, change);
    assert!(
        pid(&g, "add").is_some(),
        "an added server is up when the reload returns"
    );
    for old in [change, remove] {
        wait_until("the retired processes to end", || {
            (!process_is_running(old)).then_some(())
        })
        .await;
    }
    let tools = call(&g, 1, "add__echo", r#"{"message":"new"}"#).await;
    assert_eq!(tools["content"][0]["text"], "new");
    let gone = call(&g, 2, "remove__echo", r#"{"message":"x"}"#).await;
    assert!(
        gone["error"].as_str().unwrap().contains("unknown tool"),
        "{gone}"
    );
    // One rebuild, one notice per list that changed (the peer offers tools, prompts and
    // resources, and a server came and went), however many upstreams moved.
    let mut heard = Vec::new();
    while let Ok(e) = events.try_recv() {
        heard.push(e);
    }
    assert_eq!(
        heard,
        [
            GatewayEvent::ToolsChanged,
            GatewayEvent::PromptsChanged,
            GatewayEvent::ResourcesChanged
        ]
    );
    g.shutdown().await;
    assert!(!process_is_running(keep) && !process_is_running(restarted));
}

#[tokio::test]
async fn a_reload_whose_names_collide_is_refused_and_changes_nothing() {
    let g = started(vec![peer_def("a", &[])]).await;
    let a = pid(&g, "a").unwrap();
    let mut clash = peer_def("b", &[]);
    clash.prefix = "a".to_owned();
    let refused = g
        .reconfigure(vec![peer_def("a", &[]), clash], DRAIN)
        .await
        .unwrap_err();
    match &refused {
        ReconfigureError::Collision(why) => assert!(why.contains("a__echo"), "{why}"),
        other => panic!("expected a collision, got {other:?}"),
    }
    assert!(
        refused
            .to_string()
            .starts_with("refusing the new configuration, the running one stays in force: ")
    );
    let names: Vec<String> = g.upstreams().iter().map(|u| u.def.name.clone()).collect();
    assert_eq!(names, ["a"]);
    assert_eq!(pid(&g, "a"), Some(a));
    let r = call(&g, 1, "a__echo", r#"{"message":"still"}"#).await;
    assert_eq!(r["content"][0]["text"], "still");
    g.shutdown().await;
}

#[tokio::test]
async fn a_removed_server_finishes_its_running_call_before_it_stops() {
    let g = started(vec![peer_def("old", &[]), peer_def("other", &[])]).await;
    let old = pid(&g, "old").unwrap();
    let running = {
        let g = g.clone();
        tokio::spawn(async move { call(&g, 1, "old__slow", r#"{"seconds":2,"steps":4}"#).await })
    };
    wait_until("the call to be in flight", || {
        (g.upstreams()[0].calls_in_flight() == 1).then_some(())
    })
    .await;
    let summary = g
        .reconfigure(vec![peer_def("other", &[])], DRAIN)
        .await
        .unwrap();
    assert_eq!(summary.removed, ["old"]);
    assert!(process_is_running(old), "it drains before it stops");
    let finished = running.await.unwrap();
    assert_eq!(finished["isError"], false, "{finished}");
    assert!(
        finished["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("slow done after 4 steps"),
        "{finished}"
    );
    wait_until("the drained process to end", || {
        (!process_is_running(old)).then_some(())
    })
    .await;
    g.shutdown().await;
}

#[tokio::test]
async fn an_idle_lazy_upstream_stops_and_its_next_call_starts_it_again() {
    let mut def = peer_def("lazy", &[]);
    def.lazy = true;
    def.idle_shutdown = Some(Duration::from_millis(200));
    let mut eager = peer_def("eager", &[]);
    // Ignored: only lazy upstreams are stopped when idle.
    eager.idle_shutdown = Some(Duration::from_millis(200));
    let g = started(vec![def, eager]).await;
    let eager_pid = pid(&g, "eager").unwrap();
    let r = call(&g, 1, "lazy__echo", r#"{"message":"one"}"#).await;
    assert_eq!(r["content"][0]["text"], "one");
    let first = pid(&g, "lazy").unwrap();
    wait_until("the idle upstream to stop", || {
        (g.upstreams()[0].status() == Status::Idle && !process_is_running(first)).then_some(())
    })
    .await;
    // Its tools stay offered while it is stopped.
    let listed = g
        .handle(
            &ctx(),
            &Message::request(&Id::Num(2), "tools/list", Some("{}")),
        )
        .await;
    assert!(listed.result_raw().unwrap().contains("\"lazy__echo\""));
    assert_eq!(
        g.upstreams()[0].status(),
        Status::Idle,
        "listing does not wake it"
    );
    let r = call(&g, 3, "lazy__echo", r#"{"message":"two"}"#).await;
    assert_eq!(r["content"][0]["text"], "two");
    let second = pid(&g, "lazy").unwrap();
    assert_ne!(second, first);
    assert_eq!(
        pid(&g, "eager"),
        Some(eager_pid),
        "an eager upstream is never stopped"
    );
    g.shutdown().await;
}

/// Lists as a client sees them, raw: the bytes must not move while an upstream restarts.
async fn list_raw(g: &Gateway, id: i64, method: &str) -> String {
    g.handle(&ctx(), &Message::request(&Id::Num(id), method, Some("{}")))
        .await
        .result_raw()
        .unwrap()
        .to_owned()
}

fn sigkill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -KILL {pid}: {status}");
}

/// List changes heard so far (other events, logs, are not list changes).
fn list_changes(events: &mut tokio::sync::broadcast::Receiver<GatewayEvent>) -> Vec<GatewayEvent> {
    let mut heard = Vec::new();
    while let Ok(e) = events.try_recv() {
        if matches!(
            e,
            GatewayEvent::ToolsChanged
                | GatewayEvent::PromptsChanged
                | GatewayEvent::ResourcesChanged
        ) {
            heard.push(e);
        }
    }
    heard
}

fn restart_policy(
    backoff: Duration,
    crash_loop_failures: usize,
) -> manifold_gateway::RestartPolicy {
    manifold_gateway::RestartPolicy {
        backoff_base: backoff,
        backoff_max: backoff,
        crash_loop_failures,
        crash_loop_window: Duration::from_secs(600),
        crash_loop_retry: Duration::from_secs(600),
    }
}

#[tokio::test]
async fn a_restarting_upstream_keeps_its_lists_and_refuses_calls_naming_its_crash() {
    let mut crashing = peer_def("crashing", &[]);
    // Long enough that it stays down for the whole test.
    crashing.restart = restart_policy(Duration::from_secs(30), 5);
    let g = started(vec![crashing, peer_def("other", &[])]).await;
    let methods = [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ];
    let mut before = Vec::new();
    for (i, m) in methods.iter().enumerate() {
        before.push(list_raw(&g, i as i64, m).await);
    }
    assert!(before[0].contains("\"crashing__echo\""), "{}", before[0]);
    let mut events = g.events();
    sigkill(pid(&g, "crashing").unwrap());
    let crashing = g.upstreams()[0].clone();
    let cause = wait_until("the crash to be noticed", || match crashing.status() {
        Status::Down { cause } => Some(cause),
        _ => None,
    })
    .await;
    assert!(
        cause.starts_with("the server process exited (signal: 9 (SIGKILL))"),
        "{cause}"
    );
    for (i, m) in methods.iter().enumerate() {
        assert_eq!(
            list_raw(&g, 10 + i as i64, m).await,
            before[i],
            "{m} is the same while the server restarts"
        );
    }
    let answer = g
        .handle(
            &ctx(),
            &Message::request(
                &Id::Num(20),
                "tools/call",
                Some(r#"{"name":"crashing__echo","arguments":{"message":"there?"}}"#),
            ),
        )
        .await;
    let error = answer.error_object().unwrap();
    assert_eq!(error.code, -32000, "Manifold's upstream-unavailable code");
    let data: Value = serde_json::from_str(error.data.unwrap().get()).unwrap();
    let wait = data["retryAfterMs"].as_u64().unwrap();
    // The 30 s backoff and at most a fifth of jitter, counted down from the crash.
    assert!((1..=36_000).contains(&wait), "{data}");
    assert_eq!(
        data,
        serde_json::json!({
            "server": "crashing",
            "state": "down",
            "lastError": cause,
            "retryAfterMs": wait,
        })
    );
    assert_eq!(
        error.message,
        format!(
            "server \"crashing\" is restarting: its connection is closed ({cause}); retry in {}",
            manifold_gateway::rate_limit::human_wait(Duration::from_millis(wait))
        )
    );
    assert_eq!(
        crashing.status(),
        Status::Down {
            cause: cause.clone()
        },
        "the refused call started nothing"
    );
    let other = call(&g, 21, "other__echo", r#"{"message":"fine"}"#).await;
    assert_eq!(other["content"][0]["text"], "fine");
    assert_eq!(
        list_changes(&mut events),
        [],
        "a crash tells sessions nothing"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn an_upstream_back_from_a_crash_with_the_same_lists_tells_sessions_nothing() {
    let mut crashing = peer_def("crashing", &[]);
    crashing.restart = restart_policy(Duration::from_millis(5), 5);
    let g = started(vec![crashing]).await;
    let before = list_raw(&g, 1, "tools/list").await;
    let mut events = g.events();
    let first = pid(&g, "crashing").unwrap();
    sigkill(first);
    let crashing = g.upstreams()[0].clone();
    wait_until("the restart", || {
        (crashing.restarts() == 1 && crashing.status() == Status::Up)
            .then(|| pid(&g, "crashing"))
            .flatten()
            .filter(|p| *p != first)
    })
    .await;
    g.rebuild();
    assert_eq!(list_raw(&g, 2, "tools/list").await, before);
    assert_eq!(list_changes(&mut events), []);
    let r = call(&g, 3, "crashing__echo", r#"{"message":"back"}"#).await;
    assert_eq!(r["content"][0]["text"], "back");
    g.shutdown().await;
}

#[tokio::test]
async fn an_upstream_in_a_crash_loop_withdraws_its_tools() {
    let mut looping = peer_def("looping", &[]);
    // One failure within the window is a crash loop, retried only after 600 s.
    looping.restart = restart_policy(Duration::from_millis(5), 1);
    let g = started(vec![looping, peer_def("other", &[])]).await;
    let mut events = g.events();
    sigkill(pid(&g, "looping").unwrap());
    let looping = g.upstreams()[0].clone();
    wait_until("the crash loop", || {
        matches!(looping.status(), Status::CrashLoop { .. }).then_some(())
    })
    .await;
    wait_until("the tools to be withdrawn", || {
        list_changes(&mut events)
            .contains(&GatewayEvent::ToolsChanged)
            .then_some(())
    })
    .await;
    let tools = list_raw(&g, 1, "tools/list").await;
    assert!(
        !tools.contains("looping__") && tools.contains("\"other__echo\""),
        "{tools}"
    );
    let gone = call(&g, 2, "looping__echo", r#"{"message":"x"}"#).await;
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool \"looping__echo\""),
        "{gone}"
    );
    g.shutdown().await;
}

/// The names in a `tools/list` answer.
fn names_in(list: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(list).unwrap();
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_reload_puts_new_rules_and_pin_policies_in_force_with_its_servers_and_only_then() {
    use manifold_gateway::pins::{MemoryPins, OnChange, Pins};
    use manifold_gateway::policy::{Effect, Policy, RuleSpec};
    use manifold_gateway::rate_limit::RateLimits;
    use manifold_gateway::reconfigure::AccessChange;
    use std::collections::HashMap;

    let pins = Pins::open(
        Arc::new(MemoryPins::new()),
        HashMap::from([("peer".to_owned(), OnChange::Warn)]),
    )
    .await;
    let settings = GatewaySettings {
        pins: Some(Arc::new(pins)),
        ..GatewaySettings::default()
    };
    let mut peer = peer_def("peer", &[]);
    if let Target::Stdio(spec) = &mut peer.target {
        spec.args
            .extend(["--behaviour".to_owned(), "rug-pull".to_owned()]);
    }
    let g = Gateway::start(settings, vec![peer.clone()]);
    g.wait_started(HANG_GUARD).await;
    // The first call pulls the rug: echo's definition changes; "warn" still serves it.
    let first = call(&g, 1, "peer__echo", r#"{"message":"hi"}"#).await;
    assert_eq!(first["content"][0]["text"], "hi");
    let mut names = Vec::new();
    for i in 0.. {
        names = names_in(&list_raw(&g, 100 + i, "tools/list").await);
        if names.contains(&"peer__added_later".to_owned()) {
            break;
        }
        assert!(i < 3000, "the rug pull never reached the list: {names:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        names.contains(&"peer__echo".to_owned()) && names.contains(&"peer__add".to_owned()),
        "{names:?}"
    );
    let access = || AccessChange {
        rules: Some((
            Policy::compile(vec![RuleSpec {
                anonymous: true,
                tools: vec!["peer__add".to_owned()],
                ..RuleSpec::new(0, Effect::Deny)
            }])
            .unwrap(),
            RateLimits::default(),
        )),
        pin_policies: Some(HashMap::from([("peer".to_owned(), OnChange::Block)])),
    };

    // A refused reload (its names collide) puts none of it in force.
    let mut clash = peer_def("clash", &[]);
    clash.prefix = "peer".to_owned();
    let refused = g
        .reconfigure_with(vec![peer.clone(), clash], access(), DRAIN)
        .await;
    assert!(
        matches!(refused, Err(ReconfigureError::Collision(_))),
        "{refused:?}"
    );
    assert_eq!(names_in(&list_raw(&g, 2, "tools/list").await), names);

    let mut events = g.events();
    let summary = g
        .reconfigure_with(vec![peer], access(), DRAIN)
        .await
        .unwrap();
    assert_eq!(summary.unchanged, ["peer"]);
    let after = names_in(&list_raw(&g, 3, "tools/list").await);
    assert!(
        !after.contains(&"peer__add".to_owned()) && !after.contains(&"peer__echo".to_owned()),
        "the rule hides add, the block policy withholds the changed echo: {after:?}"
    );
    assert!(after.contains(&"peer__added_later".to_owned()), "{after:?}");
    let hidden = call(&g, 4, "peer__add", r#"{"a":1,"b":2}"#).await;
    assert_eq!(
        hidden["error"],
        "unknown tool \"peer__add\"; did you mean \"peer__ask\"?"
    );
    let withheld = g
        .handle(
            &ctx(),
            &Message::request(
                &Id::Num(5),
                "tools/call",
                Some(r#"{"name":"peer__echo","arguments":{"message":"x"}}"#),
            ),
        )
        .await;
    assert_eq!(withheld.error_object().unwrap().code, -32007);
    // New rules may change every list for someone: each list is announced once.
    assert_eq!(
        list_changes(&mut events),
        [
            GatewayEvent::ToolsChanged,
            GatewayEvent::PromptsChanged,
            GatewayEvent::ResourcesChanged
        ]
    );
    g.shutdown().await;
}
