//! The gateway core against real upstream processes (the workspace's test peer over stdio):
//! merged names, forwarding with byte fidelity, routing of server requests to the calling client,
//! failure isolation, and the built-in tools.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_gateway::{
    ClientView, DownstreamPeer, Gateway, GatewaySettings, RequestContext, UpstreamDefinition,
};
use manifold_upstream::Target;
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_wire::{ErrorObject, Id, Message, Revision};
use serde_json::Value;

fn peer_def(name: &str, extra: &[&str]) -> UpstreamDefinition {
    let mut args = vec!["stdio".to_owned()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let mut def = UpstreamDefinition::new(
        name,
        Target::Stdio(StdioSpec {
            command: manifold_testkit::test_peer().unwrap().display().to_string(),
            args,
            ..StdioSpec::default()
        }),
    );
    def.client_capabilities = r#"{"elicitation":{}}"#.to_owned();
    def
}

/// A downstream client that records notifications and answers elicitation.
#[derive(Default)]
struct Client {
    notes: Mutex<Vec<Message>>,
    asked: Mutex<Vec<String>>,
}

impl DownstreamPeer for Client {
    fn notify(&self, message: Message) {
        self.notes.lock().unwrap().push(message);
    }
    fn request(
        &self,
        method: &str,
        _params: Option<String>,
    ) -> Option<BoxFuture<'static, Result<String, ErrorObject>>> {
        self.asked.lock().unwrap().push(method.to_owned());
        Some(Box::pin(async {
            Ok(r#"{"action":"accept","content":{"name":"Grace"}}"#.to_owned())
        }))
    }
}

fn ctx(client: Arc<Client>, revision: Revision, caps: &str) -> RequestContext {
    RequestContext {
        client: ClientView {
            revision,
            capabilities: caps.to_owned(),
            info: Some(manifold_gateway::ClientInfo::new(
                r#"{"name":"test","version":"1"}"#,
            )),
        },
        peer: client,
        session: None,
        caller: None,
        toolset: None,
        trace: None,
        audit: Default::default(),
    }
}

/// Calls a tool through the gateway and returns the result (panics on a JSON-RPC error).
async fn call_tool(g: &Gateway, c: &RequestContext, id: i64, params: &str) -> Value {
    result(&g.handle(c, &req(id, "tools/call", params)).await)
}

async fn started(defs: Vec<UpstreamDefinition>) -> Gateway {
    let g = Gateway::start(GatewaySettings::default(), defs);
    g.wait_started(Duration::from_secs(30)).await;
    g
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

#[tokio::test]
async fn tools_of_every_upstream_are_listed_with_prefixes_after_the_builtins() {
    let g = started(vec![peer_def("a", &[]), peer_def("b", &[])]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let list = result(&g.handle(&c, &req(1, "tools/list", "{}")).await);
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        &names[..3],
        [
            "manifold_health",
            "manifold_search_tools",
            "manifold_call_tool"
        ]
    );
    assert!(
        names.contains(&"a__echo") && names.contains(&"b__echo"),
        "{names:?}"
    );
    assert!(
        list.get("ttlMs").is_none(),
        "legacy clients get no modern cache fields"
    );
    let modern = ctx(Arc::new(Client::default()), Revision::V2026_07_28, "{}");
    let list = result(&g.handle(&modern, &req(2, "tools/list", "{}")).await);
    assert_eq!(list["cacheScope"], "private");
    g.shutdown().await;
}

#[tokio::test]
async fn a_call_reaches_the_right_upstream_and_the_result_bytes_cross_unchanged() {
    let g = started(vec![peer_def("a", &[]), peer_def("b", &[])]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let m = g
        .handle(
            &c,
            &req(7, "tools/call", r#"{"name":"b__echo_raw","arguments":{}}"#),
        )
        .await;
    assert_eq!(m.id(), Some(&Id::Num(7)));
    let raw = m.result_raw().unwrap();
    assert!(
        raw.contains(r#""zz_unknown":{"keep":[1,1.0,1e2,-0,1.50,100000000000000000000000000001]}"#),
        "{raw}"
    );
    assert!(raw.contains(r#"caf\u00e9 \"quoted\" \/slash\/"#), "{raw}");
    let m = g
        .handle(
            &c,
            &req(
                8,
                "tools/call",
                r#"{"name":"a__echo","arguments":{"message":"hi"}}"#,
            ),
        )
        .await;
    assert_eq!(result(&m)["content"][0]["text"], "hi");
    g.shutdown().await;
}

#[tokio::test]
async fn an_unknown_tool_is_a_json_rpc_error_with_a_suggestion() {
    let g = started(vec![peer_def("a", &[])]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let m = g
        .handle(
            &c,
            &req(1, "tools/call", r#"{"name":"a__ecoh","arguments":{}}"#),
        )
        .await;
    let e = m.error_object().unwrap();
    assert_eq!(e.code, -32602);
    assert!(
        e.message.contains("did you mean \"a__echo\""),
        "{}",
        e.message
    );
    g.shutdown().await;
}

#[tokio::test]
async fn a_dead_upstream_fails_its_calls_at_once_and_the_others_keep_working() {
    let g = started(vec![
        peer_def("good", &[]),
        peer_def("dead", &["--behaviour", "exit-before-handshake"]),
    ])
    .await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let m = g
        .handle(
            &c,
            &req(
                1,
                "tools/call",
                r#"{"name":"good__echo","arguments":{"message":"ok"}}"#,
            ),
        )
        .await;
    assert_eq!(result(&m)["content"][0]["text"], "ok");
    let health = call_tool(&g, &c, 2, r#"{"name":"manifold_health","arguments":{}}"#).await;
    let s = &health["structuredContent"];
    assert_eq!(s["status"], "degraded");
    let dead = s["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "dead")
        .unwrap();
    assert_eq!(dead["state"], "down");
    assert!(
        dead["lastError"]
            .as_str()
            .unwrap()
            .contains("exit status: 3"),
        "{dead}"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn a_call_to_a_server_that_went_down_is_an_is_error_result_naming_it() {
    let g = started(vec![peer_def("flaky", &["--behaviour", "exit-mid-call"])]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let m = g
        .handle(
            &c,
            &req(
                1,
                "tools/call",
                r#"{"name":"flaky__echo","arguments":{"message":"x"}}"#,
            ),
        )
        .await;
    let r = result(&m);
    assert_eq!(r["isError"], true);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("\"flaky\"") && text.contains("exit status: 1"),
        "{text}"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn resources_are_namespaced_and_read_back_through_their_server() {
    let g = started(vec![peer_def("a", &[])]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let list = result(&g.handle(&c, &req(1, "resources/list", "{}")).await);
    let uri = list["resources"][0]["uri"].as_str().unwrap().to_owned();
    assert_eq!(uri, "a+test://static");
    let read = result(
        &g.handle(
            &c,
            &req(2, "resources/read", &format!(r#"{{"uri":"{uri}"}}"#)),
        )
        .await,
    );
    assert_eq!(read["contents"][0]["uri"], "a+test://static");
    assert_eq!(read["contents"][0]["text"], "static resource");
    let missing = g
        .handle(
            &c,
            &req(3, "resources/read", r#"{"uri":"zz+test://static"}"#),
        )
        .await;
    assert_eq!(missing.error_object().unwrap().code, -32602);
    g.shutdown().await;
}

#[tokio::test]
async fn an_elicitation_reaches_the_client_whose_call_caused_it() {
    let g = started(vec![peer_def("a", &["--era", "legacy"])]).await;
    let asker = Arc::new(Client::default());
    let bystander = Arc::new(Client::default());
    let c = ctx(
        asker.clone(),
        Revision::V2025_11_25,
        r#"{"elicitation":{}}"#,
    );
    let _other = ctx(
        bystander.clone(),
        Revision::V2025_11_25,
        r#"{"elicitation":{}}"#,
    );
    let m = g
        .handle(
            &c,
            &req(1, "tools/call", r#"{"name":"a__ask","arguments":{}}"#),
        )
        .await;
    assert!(
        result(&m)["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Grace"),
        "{}",
        m.as_str()
    );
    assert_eq!(
        asker.asked.lock().unwrap().as_slice(),
        ["elicitation/create"]
    );
    assert!(bystander.asked.lock().unwrap().is_empty());
    g.shutdown().await;
}

#[tokio::test]
async fn progress_is_relayed_with_the_clients_own_token_before_the_result() {
    let g = started(vec![peer_def("a", &[])]).await;
    let client = Arc::new(Client::default());
    let c = ctx(client.clone(), Revision::V2025_11_25, "{}");
    let m = g
        .handle(&c, &req(1, "tools/call", r#"{"name":"a__slow","arguments":{"seconds":0.2,"steps":3},"_meta":{"progressToken":"mine"}}"#))
        .await;
    assert!(m.result_raw().is_some(), "{}", m.as_str());
    {
        let notes = client.notes.lock().unwrap();
        let progress: Vec<&Message> = notes
            .iter()
            .filter(|n| n.method() == Some("notifications/progress"))
            .collect();
        assert_eq!(progress.len(), 3, "{notes:?}");
        assert!(
            progress
                .iter()
                .all(|n| n.params_raw(&["progressToken"]) == Some("\"mine\""))
        );
    }
    g.shutdown().await;
}

#[tokio::test]
async fn search_finds_tools_by_keyword_and_call_tool_runs_them() {
    let g = started(vec![peer_def("math", &[])]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let found = call_tool(
        &g,
        &c,
        1,
        r#"{"name":"manifold_search_tools","arguments":{"query":"adds numbers"}}"#,
    )
    .await;
    let first = &found["structuredContent"]["tools"][0];
    assert_eq!(first["name"], "math__add");
    assert!(first["inputSchema"].is_object());
    let sum = call_tool(&g, &c, 2, r#"{"name":"manifold_call_tool","arguments":{"name":"math__add","arguments":{"a":2,"b":3}}}"#).await;
    assert_eq!(sum["structuredContent"]["sum"], 5);
    g.shutdown().await;
}

#[tokio::test]
async fn a_legacy_upstreams_question_reaches_a_modern_client_as_input_required() {
    let g = started(vec![peer_def("old", &["--era", "legacy"])]).await;
    let client = Arc::new(Client::default());
    let c = ctx(
        client.clone(),
        Revision::V2026_07_28,
        r#"{"elicitation":{}}"#,
    );
    let first = call_tool(&g, &c, 1, r#"{"name":"old__ask","arguments":{}}"#).await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let question = &first["inputRequests"]["manifold-input"];
    assert_eq!(question["method"], "elicitation/create");
    let state = first["requestState"].as_str().unwrap();
    let forged = format!("{state}x");
    let bad = g
        .handle(&c, &req(2, "tools/call", &format!(r#"{{"name":"old__ask","arguments":{{}},"requestState":"{forged}","inputResponses":{{}}}}"#)))
        .await;
    // A state Manifold did not seal is not taken for one of its own: the upstream sees a fresh
    // call and asks again. With the held call still in flight on the same shared stdio child,
    // that question cannot be attributed to a client, and says so; the held call is untouched.
    let bad = result(&bad);
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("cannot tell which client"),
        "{bad}"
    );
    let retry = format!(
        r#"{{"name":"old__ask","arguments":{{}},"requestState":"{state}","inputResponses":{{"manifold-input":{{"action":"accept","content":{{"name":"Ada"}}}}}}}}"#
    );
    let done = call_tool(&g, &c, 3, &retry).await;
    assert_eq!(done["resultType"], "complete");
    assert!(
        done["content"][0]["text"].as_str().unwrap().contains("Ada"),
        "{done}"
    );
    assert!(
        client.asked.lock().unwrap().is_empty(),
        "a modern client is never sent a request"
    );
    // The same state cannot be used twice.
    let again = call_tool(&g, &c, 4, &retry).await;
    assert_eq!(again["isError"], true);
    assert!(
        again["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("already answered"),
        "{again}"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn a_modern_upstreams_input_required_reaches_a_legacy_client_as_a_server_request() {
    let g = started(vec![peer_def("new", &["--era", "modern"])]).await;
    let client = Arc::new(Client::default());
    let c = ctx(
        client.clone(),
        Revision::V2025_11_25,
        r#"{"elicitation":{}}"#,
    );
    let m = g
        .handle(
            &c,
            &req(1, "tools/call", r#"{"name":"new__ask","arguments":{}}"#),
        )
        .await;
    let r = result(&m);
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("Grace"),
        "{r}"
    );
    assert_eq!(
        client.asked.lock().unwrap().as_slice(),
        ["elicitation/create"]
    );
    g.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_calls_over_five_upstreams_each_get_their_own_result() {
    let defs = (0..5).map(|i| peer_def(&format!("s{i}"), &[])).collect();
    let g = started(defs).await;
    let sessions: Vec<RequestContext> = (0..50)
        .map(|_| ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}"))
        .collect();
    let calls = (0..500).map(|n| {
        let g = g.clone();
        let c = sessions[n % 50].clone();
        async move {
            let message = format!("call-{n}-of-session-{}", n % 50);
            let params = format!(
                r#"{{"name":"s{}__echo","arguments":{{"message":"{message}"}}}}"#,
                n % 5
            );
            let m = g.handle(&c, &req(n as i64, "tools/call", &params)).await;
            (n, message, m)
        }
    });
    let results = futures::future::join_all(calls).await;
    for (n, message, m) in results {
        assert_eq!(m.id(), Some(&Id::Num(n as i64)));
        assert_eq!(result(&m)["content"][0]["text"], message.as_str());
    }
    g.shutdown().await;
}

fn pid_in(description: &str) -> u32 {
    let start = description.find("(pid ").unwrap() + 5;
    description[start..description.len() - 1].parse().unwrap()
}

#[tokio::test]
async fn a_session_scoped_server_gets_one_child_per_session_that_ends_with_it() {
    let mut def = peer_def("stateful", &[]);
    def.scope = manifold_gateway::Scope::Session;
    let g = started(vec![def]).await;
    let mut sessions = Vec::new();
    for name in ["s1", "s2"] {
        let mut c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
        c.session = Some(manifold_gateway::SessionId::new(name));
        let m = g
            .handle(
                &c,
                &req(
                    1,
                    "tools/call",
                    r#"{"name":"stateful__echo","arguments":{"message":"x"}}"#,
                ),
            )
            .await;
        assert_eq!(result(&m)["content"][0]["text"], "x");
        sessions.push(c);
    }
    assert_eq!(g.session_connections(), 2);
    let p1 = pid_in(&g.describe_session("s1")[0]);
    let p2 = pid_in(&g.describe_session("s2")[0]);
    assert_ne!(p1, p2, "each session has its own child");
    // A second call of the same session reuses its child.
    g.handle(
        &sessions[0],
        &req(
            2,
            "tools/call",
            r#"{"name":"stateful__echo","arguments":{"message":"y"}}"#,
        ),
    )
    .await;
    assert_eq!(pid_in(&g.describe_session("s1")[0]), p1);
    g.end_session("s1").await;
    assert_eq!(g.session_connections(), 1);
    assert!(
        manifold_testkit::process_group_members(p1).is_empty(),
        "the ended session's child is gone"
    );
    assert!(manifold_testkit::process_is_running(p2));
    g.shutdown().await;
    assert!(
        manifold_testkit::process_group_members(p2).is_empty(),
        "shutdown ends every session's child"
    );
}

#[tokio::test]
async fn a_server_that_keeps_failing_enters_a_crash_loop_visible_in_health() {
    let mut def = peer_def("broken", &["--behaviour", "exit-before-handshake"]);
    def.restart = manifold_gateway::RestartPolicy {
        backoff_base: Duration::from_millis(5),
        backoff_max: Duration::from_millis(20),
        crash_loop_failures: 3,
        crash_loop_window: Duration::from_secs(60),
        crash_loop_retry: Duration::from_secs(600),
    };
    let g = started(vec![def, peer_def("fine", &[])]).await;
    let mut looped = false;
    for _ in 0..500 {
        if matches!(
            g.upstreams()[0].status(),
            manifold_gateway::Status::CrashLoop { .. }
        ) {
            looped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(looped, "status stayed {:?}", g.upstreams()[0].status());
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let health = call_tool(&g, &c, 1, r#"{"name":"manifold_health","arguments":{}}"#).await;
    let broken = &health["structuredContent"]["upstreams"][0];
    assert_eq!(broken["state"], "crash-loop");
    assert!(broken["restarts"].as_u64().is_some());
    let fine = call_tool(
        &g,
        &c,
        2,
        r#"{"name":"fine__echo","arguments":{"message":"still here"}}"#,
    )
    .await;
    assert_eq!(fine["content"][0]["text"], "still here");
    g.shutdown().await;
}

fn fast_restarts(def: &mut UpstreamDefinition) {
    def.restart = manifold_gateway::RestartPolicy {
        backoff_base: Duration::from_millis(5),
        backoff_max: Duration::from_millis(20),
        crash_loop_failures: 100,
        crash_loop_window: Duration::from_secs(60),
        crash_loop_retry: Duration::from_secs(600),
    };
}

#[tokio::test]
async fn an_idempotent_call_is_retried_when_its_server_dies_and_says_so_in_meta() {
    let mut def = peer_def("dies", &["--behaviour", "exit-mid-call"]);
    fast_restarts(&mut def);
    def.idempotent_tools = manifold_gateway::NamePatterns::compile(vec!["echo".into()]).unwrap();
    let g = started(vec![def]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let r = call_tool(
        &g,
        &c,
        1,
        r#"{"name":"dies__echo","arguments":{"message":"x"}}"#,
    )
    .await;
    assert_eq!(
        r["isError"], true,
        "the server dies on every call, so every attempt fails"
    );
    assert_eq!(r["_meta"]["io.manifold/retries"], 2, "{r}");
    g.shutdown().await;
}

#[tokio::test]
async fn the_retry_count_is_configurable_and_each_retry_is_counted_in_metrics() {
    let mut def = peer_def("dies", &["--behaviour", "exit-mid-call"]);
    fast_restarts(&mut def);
    def.idempotent_tools = manifold_gateway::NamePatterns::compile(vec!["echo".into()]).unwrap();
    def.max_retries = 3;
    let g = started(vec![def]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let r = call_tool(
        &g,
        &c,
        1,
        r#"{"name":"dies__echo","arguments":{"message":"x"}}"#,
    )
    .await;
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["_meta"]["io.manifold/retries"], 3, "{r}");
    let scraped = g
        .settings()
        .telemetry
        .metrics
        .encode(&manifold_telemetry::metrics::Snapshot::default());
    assert!(
        scraped.contains("manifold_tool_call_retries_total{upstream=\"dies\"} 3"),
        "{scraped}"
    );
    g.shutdown().await;
}

#[tokio::test]
async fn a_call_that_is_not_idempotent_is_never_retried() {
    let mut def = peer_def("dies", &["--behaviour", "exit-mid-call"]);
    fast_restarts(&mut def);
    let g = started(vec![def]).await;
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let r = call_tool(
        &g,
        &c,
        1,
        r#"{"name":"dies__add","arguments":{"a":1,"b":2}}"#,
    )
    .await;
    assert_eq!(r["isError"], true);
    assert!(r["_meta"].get("io.manifold/retries").is_none(), "{r}");
    g.shutdown().await;
}

#[tokio::test]
async fn tasks_methods_need_the_extension_and_name_a_server() {
    let g = started(vec![peer_def("a", &[])]).await;
    let plain = ctx(Arc::new(Client::default()), Revision::V2026_07_28, "{}");
    let m = g
        .handle(&plain, &req(1, "tasks/get", r#"{"taskId":"a:t1"}"#))
        .await;
    let e = m.error_object().unwrap();
    assert_eq!(e.code, -32021);
    assert!(
        e.data
            .unwrap()
            .get()
            .contains("io.modelcontextprotocol/tasks")
    );
    let declared = ctx(
        Arc::new(Client::default()),
        Revision::V2026_07_28,
        r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
    );
    let m = g
        .handle(&declared, &req(2, "tasks/get", r#"{"taskId":"nobody:t1"}"#))
        .await;
    let e = m.error_object().unwrap();
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("no server \"nobody\""), "{}", e.message);
    g.shutdown().await;
}

#[tokio::test]
async fn a_lazy_server_starts_on_the_first_request_and_that_request_sees_its_tools() {
    let mut def = peer_def("later", &[]);
    def.lazy = true;
    let g = started(vec![def, peer_def("now", &[])]).await;
    assert_eq!(g.upstreams()[0].status(), manifold_gateway::Status::Idle);
    assert!(
        g.upstreams()[0].peer_info().is_none(),
        "nothing was started for it"
    );
    let c = ctx(Arc::new(Client::default()), Revision::V2025_11_25, "{}");
    let list = result(&g.handle(&c, &req(1, "tools/list", "{}")).await);
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"later__echo") && names.contains(&"now__echo"),
        "{names:?}"
    );
    assert_eq!(g.upstreams()[0].status(), manifold_gateway::Status::Up);
    g.shutdown().await;
}
