//! Why: the approval stage is where a risky call either runs once, for exactly what was shown, or
//! does not run at all. These tests drive `Approvals::hold` with a client that answers (or not) as
//! scripted, and the attack cases a client could try: a forged or replayed `requestState`, a state
//! reused for other arguments or by another caller, a late answer after the window.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_gateway::approval::ledger::{self, ApprovalLedger, MemoryLedger, Transition};
use manifold_gateway::approval::{Approvals, HeldCall, Verdict};
use manifold_gateway::policy::{Approver, AskRule, RuleRef};
use manifold_gateway::{Caller, ClientView, DownstreamPeer, RequestContext};
use manifold_wire::{ErrorObject, Id, Message, Revision};
use serde_json::Value;

/// A client that answers every question after `delay` with `answer` (`None`: never).
struct ScriptedClient {
    answer: Option<&'static str>,
    delay: Duration,
    asked: Mutex<Vec<String>>,
    notified: Mutex<Vec<String>>,
}

impl ScriptedClient {
    fn new(answer: Option<&'static str>, delay: Duration) -> Arc<ScriptedClient> {
        Arc::new(ScriptedClient {
            answer,
            delay,
            asked: Mutex::new(Vec::new()),
            notified: Mutex::new(Vec::new()),
        })
    }
}

impl DownstreamPeer for ScriptedClient {
    fn notify(&self, message: Message) {
        self.notified
            .lock()
            .unwrap()
            .push(message.as_str().to_owned());
    }

    fn request(
        &self,
        method: &str,
        params: Option<String>,
    ) -> Option<BoxFuture<'static, Result<String, ErrorObject>>> {
        self.asked
            .lock()
            .unwrap()
            .push(format!("{method} {}", params.unwrap_or_default()));
        let answer = self.answer;
        let delay = self.delay;
        Some(Box::pin(async move {
            tokio::time::sleep(delay).await;
            match answer {
                Some(action) => Ok(format!(r#"{{"action":"{action}","content":{{}}}}"#)),
                None => std::future::pending().await,
            }
        }))
    }
}

const ELICITS: &str = r#"{"elicitation":{}}"#;

fn ctx(
    revision: Revision,
    capabilities: &str,
    peer: Arc<dyn DownstreamPeer>,
    caller: Option<&str>,
) -> RequestContext {
    RequestContext {
        client: ClientView {
            revision,
            capabilities: capabilities.to_owned(),
            info: None,
        },
        peer,
        session: None,
        caller: caller.map(|name| {
            Arc::new(Caller {
                name: name.to_owned(),
                ..Caller::default()
            })
        }),
        toolset: None,
        trace: None,
        audit: Default::default(),
    }
}

fn ask(approvers: Vec<Approver>) -> AskRule {
    AskRule {
        rule: RuleRef {
            index: 0,
            name: Some("push-needs-a-person".to_owned()),
        },
        approvers,
    }
}

const DEFINITION: &str = r#"{"name":"push","inputSchema":{"type":"object"}}"#;

fn call<'a>(rule: &'a AskRule) -> HeldCall<'a> {
    HeldCall {
        ask: rule,
        server: "git",
        tool: "git__push",
        definition: Some(DEFINITION),
        cap: None,
    }
}

fn request(id: i64, params: &str) -> Message {
    Message::request(&Id::from(id), "tools/call", Some(params))
}

fn push(branch: &str) -> String {
    format!(r#"{{"name":"git__push","arguments":{{"branch":"{branch}"}}}}"#)
}

fn data(verdict: &Verdict) -> Value {
    match verdict {
        Verdict::Refuse(m) => {
            let e: Value = serde_json::from_str(m.error_raw().unwrap()).unwrap();
            e["data"].clone()
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn stage(ledger: Arc<MemoryLedger>, window: Duration) -> Approvals {
    Approvals::new(ledger, window, window)
}

#[tokio::test]
async fn a_legacy_client_that_accepts_runs_the_call_once_and_the_ledger_names_the_approver() {
    let ledger = Arc::new(MemoryLedger::default());
    let approvals = stage(Arc::clone(&ledger), Duration::from_secs(5));
    let client = ScriptedClient::new(Some("accept"), Duration::ZERO);
    let c = ctx(Revision::V2025_11_25, ELICITS, client.clone(), Some("ada"));
    let rule = ask(vec![Approver::Caller]);
    let verdict = approvals
        .hold(&c, &request(1, &push("main")), call(&rule))
        .await;
    let Verdict::Run {
        request: forwarded,
        approval,
    } = verdict
    else {
        panic!("expected the call to run, got {verdict:?}");
    };
    assert_eq!(forwarded.params(), Some(push("main").as_str()));
    assert_eq!(approval.approver, "ada");
    assert_eq!(approval.channel, ledger::CHANNEL_ELICITATION);
    let asked = client.asked.lock().unwrap().join("\n");
    assert!(asked.starts_with("elicitation/create"), "{asked}");
    for shown in [
        "git__push",
        "\\\"git\\\"",
        "ada",
        "\\\"branch\\\": \\\"main\\\"",
        &approval.id,
    ] {
        assert!(asked.contains(shown), "the question shows {shown}: {asked}");
    }
    let row = ledger.get(&approval.id).await.unwrap().unwrap();
    assert_eq!(row.state, ledger::USED);
    assert_eq!(row.answered_by.as_deref(), Some("ada"));
    assert_eq!(row.caller.as_deref(), Some("ada"));
}

#[tokio::test]
async fn decline_and_dismiss_refuse_with_their_outcomes() {
    for (answer, outcome, state) in [
        ("decline", "rejected", ledger::REJECTED),
        ("cancel", "cancelled", ledger::CANCELLED),
    ] {
        let ledger = Arc::new(MemoryLedger::default());
        let approvals = stage(Arc::clone(&ledger), Duration::from_secs(5));
        let c = ctx(
            Revision::V2025_06_18,
            ELICITS,
            ScriptedClient::new(Some(answer), Duration::ZERO),
            None,
        );
        let rule = ask(vec![Approver::Caller]);
        let verdict = approvals
            .hold(&c, &request(1, &push("main")), call(&rule))
            .await;
        let d = data(&verdict);
        assert_eq!(d["code"], "approval_required");
        assert_eq!(d["outcome"], outcome, "{answer}: {d}");
        assert_eq!(d["route"], "elicitation");
        assert_eq!(d["window_seconds"], 5);
        let id = d["approval_id"].as_str().unwrap();
        assert_eq!(ledger.get(id).await.unwrap().unwrap().state, state);
    }
}

#[tokio::test]
async fn an_answer_after_the_window_is_never_applied() {
    let ledger = Arc::new(MemoryLedger::default());
    let approvals = stage(Arc::clone(&ledger), Duration::from_millis(300));
    // Accepts, but only after the window has closed.
    let c = ctx(
        Revision::V2025_11_25,
        ELICITS,
        ScriptedClient::new(Some("accept"), Duration::from_millis(800)),
        None,
    );
    let rule = ask(vec![Approver::Caller]);
    let verdict = approvals
        .hold(&c, &request(1, &push("main")), call(&rule))
        .await;
    let d = data(&verdict);
    assert_eq!(d["outcome"], "timed_out");
    let id = d["approval_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        ledger.get(&id).await.unwrap().unwrap().state,
        ledger::TIMED_OUT
    );
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_with_no_one_else_to_answer_is_not_configured() {
    let approvals = stage(Arc::new(MemoryLedger::default()), Duration::from_secs(5));
    let c = ctx(
        Revision::V2025_11_25,
        "{}",
        ScriptedClient::new(None, Duration::ZERO),
        Some("ada"),
    );
    let rule = ask(vec![Approver::Caller]);
    let verdict = approvals
        .hold(&c, &request(1, &push("main")), call(&rule))
        .await;
    let d = data(&verdict);
    assert_eq!(d["outcome"], "not_configured");
    assert!(d["approval_id"].is_null());
}

#[tokio::test]
async fn out_of_band_the_call_waits_for_an_answer_in_the_ledger_with_progress_naming_it() {
    let ledger = Arc::new(MemoryLedger::shared());
    let approvals = Approvals::new(
        ledger.clone(),
        Duration::from_secs(20),
        Duration::from_secs(20),
    )
    .with_progress_every(Duration::from_millis(100));
    let client = ScriptedClient::new(None, Duration::ZERO);
    // The client could be asked, but the rule wants someone else.
    let c = ctx(
        Revision::V2025_11_25,
        ELICITS,
        client.clone(),
        Some("intern"),
    );
    let rule = ask(vec![Approver::Group("ops".to_owned())]);
    let params =
        r#"{"name":"git__push","arguments":{"branch":"main"},"_meta":{"progressToken":"p-7"}}"#;
    let req = request(1, params);
    let held = approvals.hold(&c, &req, call(&rule));
    let answer = async {
        let id = loop {
            let pending = ledger.list(true, 10).await.unwrap();
            if let Some(row) = pending.first() {
                break row.id.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(
            ledger
                .transition(Transition {
                    id: &id,
                    from: ledger::PENDING,
                    to: ledger::APPROVED,
                    by: Some("grace"),
                    at_ms: 1,
                    note: None,
                })
                .await
                .unwrap()
        );
        id
    };
    let (verdict, id) = tokio::join!(held, answer);
    let Verdict::Run { approval, .. } = verdict else {
        panic!("expected the call to run, got {verdict:?}");
    };
    assert_eq!(approval.id, id);
    assert_eq!(approval.approver, "grace");
    assert_eq!(approval.channel, ledger::CHANNEL_OUT_OF_BAND);
    assert!(
        client.asked.lock().unwrap().is_empty(),
        "the caller was not asked"
    );
    let notified = client.notified.lock().unwrap().clone();
    assert!(
        notified.len() >= 2,
        "progress repeats while held: {notified:?}"
    );
    assert!(
        notified.iter().all(|n| n.contains("notifications/progress")
            && n.contains("\"p-7\"")
            && n.contains(&id)
            && n.contains("manifold approvals approve")),
        "{notified:?}"
    );
    assert_eq!(ledger.get(&id).await.unwrap().unwrap().state, ledger::USED);
}

/// Asks a modern client; returns the `requestState` of the `input_required` answer.
async fn modern_question(
    approvals: &Approvals,
    c: &RequestContext,
    rule: &AskRule,
    params: &str,
) -> String {
    let verdict = approvals.hold(c, &request(1, params), call(rule)).await;
    let Verdict::Answer(raw) = verdict else {
        panic!("expected input_required, got {verdict:?}");
    };
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v["resultType"], "input_required");
    let question = &v["inputRequests"]["manifold-input"];
    assert_eq!(question["method"], "elicitation/create");
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains("git__push")
    );
    v["requestState"].as_str().unwrap().to_owned()
}

fn retry(params: &str, state: &str, action: &str) -> String {
    let mut v: Value = serde_json::from_str(params).unwrap();
    v["requestState"] = state.into();
    v["inputResponses"] =
        serde_json::json!({ "manifold-input": { "action": action, "content": {} } });
    v.to_string()
}

#[tokio::test]
async fn a_modern_retry_with_the_answer_runs_the_call_once_and_attacks_on_its_state_are_refused() {
    let ledger = Arc::new(MemoryLedger::default());
    let approvals = stage(Arc::clone(&ledger), Duration::from_secs(30));
    let peer = ScriptedClient::new(None, Duration::ZERO);
    let ada = ctx(Revision::V2026_07_28, ELICITS, peer.clone(), Some("ada"));
    let eve = ctx(Revision::V2026_07_28, ELICITS, peer.clone(), Some("eve"));
    let rule = ask(vec![Approver::Caller]);
    let state = modern_question(&approvals, &ada, &rule, &push("main")).await;

    let refused = |v: &Verdict| match v {
        Verdict::Refuse(m) => m.error_raw().unwrap().to_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    };
    // Other arguments under the same state: refused, and the question stays open.
    let other = approvals
        .hold(
            &ada,
            &request(2, &retry(&push("prod"), &state, "accept")),
            call(&rule),
        )
        .await;
    assert!(
        refused(&other).contains("asked for another call"),
        "{}",
        refused(&other)
    );
    // Another caller presenting it: refused the same way.
    let stolen = approvals
        .hold(
            &eve,
            &request(3, &retry(&push("main"), &state, "accept")),
            call(&rule),
        )
        .await;
    assert!(refused(&stolen).contains("asked for another call"));
    // A forged state: refused as not Manifold's.
    let forged = format!("{}x", &state[..state.len() - 1]);
    let forged = approvals
        .hold(
            &ada,
            &request(4, &retry(&push("main"), &forged, "accept")),
            call(&rule),
        )
        .await;
    assert!(refused(&forged).contains("not one Manifold issued"));

    // The genuine retry runs, without the stage's own members.
    let verdict = approvals
        .hold(
            &ada,
            &request(5, &retry(&push("main"), &state, "accept")),
            call(&rule),
        )
        .await;
    let Verdict::Run {
        request: forwarded,
        approval,
    } = verdict
    else {
        panic!("expected the call to run, got {verdict:?}");
    };
    let forwarded: Value = serde_json::from_str(forwarded.params().unwrap()).unwrap();
    let sent: Value = serde_json::from_str(&push("main")).unwrap();
    assert_eq!(
        forwarded, sent,
        "requestState and inputResponses stay with Manifold"
    );
    assert_eq!(approval.channel, ledger::CHANNEL_INPUT_REQUIRED);
    assert_eq!(
        ledger.get(&approval.id).await.unwrap().unwrap().state,
        ledger::USED
    );

    // Replayed: single use.
    let replay = approvals
        .hold(
            &ada,
            &request(6, &retry(&push("main"), &state, "accept")),
            call(&rule),
        )
        .await;
    let d = data(&replay);
    assert_eq!(d["outcome"], "rejected");
    assert!(refused(&replay).contains("single use"));
}

#[tokio::test]
async fn a_modern_decline_refuses_and_the_state_cannot_be_answered_again() {
    let ledger = Arc::new(MemoryLedger::default());
    let approvals = stage(Arc::clone(&ledger), Duration::from_secs(30));
    let c = ctx(
        Revision::V2026_07_28,
        ELICITS,
        ScriptedClient::new(None, Duration::ZERO),
        None,
    );
    let rule = ask(vec![Approver::Caller]);
    let state = modern_question(&approvals, &c, &rule, &push("main")).await;
    let declined = approvals
        .hold(
            &c,
            &request(2, &retry(&push("main"), &state, "decline")),
            call(&rule),
        )
        .await;
    assert_eq!(data(&declined)["outcome"], "rejected");
    let again = approvals
        .hold(
            &c,
            &request(3, &retry(&push("main"), &state, "accept")),
            call(&rule),
        )
        .await;
    assert_eq!(data(&again)["outcome"], "rejected");
}

#[tokio::test]
async fn a_cancelled_hold_marks_its_question_cancelled() {
    let ledger = Arc::new(MemoryLedger::default());
    let approvals = stage(Arc::clone(&ledger), Duration::from_secs(30));
    let c = ctx(
        Revision::V2025_11_25,
        ELICITS,
        ScriptedClient::new(None, Duration::ZERO),
        None,
    );
    let rule = ask(vec![Approver::Caller]);
    let req = request(1, &push("main"));
    let held = approvals.hold(&c, &req, call(&rule));
    // The call is dropped while its question is open, as a cancelled request is.
    let _ = tokio::time::timeout(Duration::from_millis(200), held).await;
    let id = ledger.list(false, 1).await.unwrap()[0].id.clone();
    for _ in 0..100 {
        if ledger.get(&id).await.unwrap().unwrap().state == ledger::CANCELLED {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the question was not marked cancelled");
}

#[tokio::test]
async fn a_question_approved_from_outside_while_the_modern_client_was_asked_runs_on_its_accept() {
    let ledger = Arc::new(MemoryLedger::shared());
    let approvals = stage(Arc::clone(&ledger), Duration::from_secs(30));
    let c = ctx(
        Revision::V2026_07_28,
        ELICITS,
        ScriptedClient::new(None, Duration::ZERO),
        Some("ada"),
    );
    let rule = ask(vec![Approver::Caller, Approver::Group("ops".to_owned())]);
    let state = modern_question(&approvals, &c, &rule, &push("main")).await;
    let id = ledger.list(true, 1).await.unwrap()[0].id.clone();
    assert!(
        ledger
            .transition(Transition {
                id: &id,
                from: ledger::PENDING,
                to: ledger::APPROVED,
                by: Some("grace"),
                at_ms: 1,
                note: None,
            })
            .await
            .unwrap()
    );
    let verdict = approvals
        .hold(
            &c,
            &request(2, &retry(&push("main"), &state, "accept")),
            call(&rule),
        )
        .await;
    let Verdict::Run { approval, .. } = verdict else {
        panic!("expected the call to run, got {verdict:?}");
    };
    assert_eq!(approval.approver, "grace");
    assert_eq!(ledger.get(&id).await.unwrap().unwrap().state, ledger::USED);

    // Approved outside, declined by the caller: the caller's no stands.
    let state = modern_question(&approvals, &c, &rule, &push("dev")).await;
    let id = ledger.list(true, 1).await.unwrap()[0].id.clone();
    ledger
        .transition(Transition {
            id: &id,
            from: ledger::PENDING,
            to: ledger::APPROVED,
            by: Some("grace"),
            at_ms: 1,
            note: None,
        })
        .await
        .unwrap();
    let verdict = approvals
        .hold(
            &c,
            &request(3, &retry(&push("dev"), &state, "decline")),
            call(&rule),
        )
        .await;
    assert_eq!(data(&verdict)["outcome"], "rejected");
    assert_eq!(
        ledger.get(&id).await.unwrap().unwrap().state,
        ledger::REJECTED
    );
}
