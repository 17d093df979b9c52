//! The unit tests of `session.rs`, kept beside it so the file reads as the code it tests.

use super::*;
use manifold_wire::Revision;

fn session() -> Arc<ClientSession> {
    Arc::new(ClientSession::new(
        ClientView {
            revision: Revision::V2025_11_25,
            capabilities: "{}".to_owned(),
            info: None,
        },
        None,
        "mf-test".to_owned(),
        2,
    ))
}

#[tokio::test]
async fn a_server_request_is_answered_by_the_clients_response() {
    let s = session();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&sent);
    let answer = s.ask("elicitation/create", Some("{}".to_owned()), move |m| {
        lock(&sink).push(m.clone());
        true
    });
    let request = lock(&sent)[0].clone();
    assert_eq!(request.id(), Some(&Id::from("mf-test-1")));
    assert!(s.answer(&Message::result(
        request.id().unwrap(),
        r#"{"action":"accept"}"#
    )));
    assert_eq!(answer.await.unwrap(), r#"{"action":"accept"}"#);
    assert!(!s.answer(&Message::result(&Id::from("mf-test-1"), "{}")));
}

#[tokio::test]
async fn an_undeliverable_server_request_fails_at_once() {
    let s = session();
    let e = s.ask("roots/list", None, |_| false).await.unwrap_err();
    assert!(e.message.contains("cannot reach the client"), "{e}");
    assert!(!s.busy());
}

#[tokio::test]
async fn unanswered_server_requests_are_bounded() {
    let s = session();
    let waiting: Vec<_> = (0..MAX_PENDING_SERVER_REQUESTS)
        .map(|_| s.ask("roots/list", None, |_| true))
        .collect();
    let e = s.ask("roots/list", None, |_| true).await.unwrap_err();
    assert_eq!(e.code, -32006);
    drop(waiting);
    assert!(!s.busy(), "giving up on a request forgets it");
}

#[tokio::test]
async fn a_server_request_given_up_unanswered_is_withdrawn_from_the_client() {
    let s = session();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&sent);
    let question = s.ask("sampling/createMessage", None, move |m| {
        lock(&sink).push(m.clone());
        true
    });
    drop(question);
    let sent = lock(&sent).clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[1].method(), Some("notifications/cancelled"));
    assert_eq!(
        sent[1].params_raw(&["requestId"]),
        Some(r#""mf-test-1""#),
        "{sent:?}"
    );
    // An answered request is not withdrawn.
    let sink = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&sink);
    let answered = s.ask("roots/list", None, move |m| {
        lock(&seen).push(m.clone());
        true
    });
    let id = lock(&sink)[0].id().cloned().unwrap();
    assert!(s.answer(&Message::result(&id, "{}")));
    answered.await.unwrap();
    assert_eq!(lock(&sink).len(), 1);
}

#[test]
fn in_flight_requests_are_bounded_unique_and_cancellable() {
    let s = session();
    let t = s.begin(&Id::Num(1)).unwrap();
    assert_eq!(s.begin(&Id::Num(1)).unwrap_err().code, -32600);
    s.begin(&Id::Num(2)).unwrap();
    assert_eq!(s.begin(&Id::Num(3)).unwrap_err().code, -32006);
    s.cancel_from(Some(r#"{"requestId":1,"reason":"user"}"#));
    assert!(t.is_cancelled());
}

#[test]
fn subscriptions_and_levels_follow_successful_requests_only() {
    let s = session();
    let sub = Message::request(
        &Id::Num(1),
        "resources/subscribe",
        Some(r#"{"uri":"a+x://1"}"#),
    );
    s.note_outcome(
        &sub,
        &Message::error(
            Some(Id::Num(1)),
            &ErrorObject::new(ErrorCode::MethodNotFound, "no"),
        ),
    );
    let updated = GatewayEvent::ResourceUpdated {
        uri: "a+x://1".to_owned(),
    };
    assert!(s.event_message(&updated).is_none());
    s.note_outcome(&sub, &Message::result(&Id::Num(1), "{}"));
    assert!(s.event_message(&updated).is_some());
    let level = Message::request(
        &Id::Num(2),
        "logging/setLevel",
        Some(r#"{"level":"error"}"#),
    );
    s.note_outcome(&level, &Message::result(&Id::Num(2), "{}"));
    let log = GatewayEvent::Log {
        server: "a".to_owned(),
        params: r#"{"level":"info"}"#.to_owned(),
    };
    assert!(s.event_message(&log).is_none());
}

#[test]
fn requests_come_back_and_cancellations_cancel_the_named_call() {
    let s = session();
    let call = s.begin(&Id::Num(7)).unwrap();
    let ping = Message::request(&Id::Num(8), "ping", None);
    assert_eq!(
        s.take_unless_request(ping.clone())
            .map(|m| m.as_str().to_owned()),
        Some(ping.as_str().to_owned())
    );
    let progress = Message::notification("notifications/progress", Some("{}"));
    assert!(s.take_unless_request(progress).is_none());
    assert!(!call.is_cancelled());
    let cancel = Message::notification("notifications/cancelled", Some(r#"{"requestId":7}"#));
    assert!(s.take_unless_request(cancel).is_none());
    assert!(call.is_cancelled());
}

#[test]
fn a_lagging_session_hears_every_list_changed_and_a_closed_channel_ends_it() {
    let s = session();
    let methods = |received| {
        s.messages_for_received(received).map(|ms| {
            ms.iter()
                .map(|m| m.method().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(
        methods(Err(RecvError::Lagged(3))),
        Some(vec![
            "notifications/tools/list_changed".to_owned(),
            "notifications/prompts/list_changed".to_owned(),
            "notifications/resources/list_changed".to_owned(),
        ])
    );
    assert_eq!(
        methods(Ok(GatewayEvent::ToolsChanged)),
        Some(vec!["notifications/tools/list_changed".to_owned()])
    );
    let unsubscribed = GatewayEvent::ResourceUpdated {
        uri: "a+x://1".to_owned(),
    };
    assert_eq!(methods(Ok(unsubscribed)), Some(vec![]));
    assert_eq!(methods(Err(RecvError::Closed)), None);
}

struct Collect(Mutex<Vec<String>>);

impl Outlet for Collect {
    fn send(&self, message: &Message) -> bool {
        lock(&self.0).push(message.method().unwrap_or_default().to_owned());
        true
    }
}

fn log(level: &str) -> Message {
    Message::notification(
        "notifications/message",
        Some(&format!(r#"{{"level":"{level}","data":"x"}}"#)),
    )
}

#[test]
fn a_modern_call_hears_log_lines_only_at_or_above_its_requested_level() {
    let progress = Message::notification(
        "notifications/progress",
        Some(r#"{"progressToken":1,"progress":1}"#),
    );
    let quiet = Arc::new(Collect(Mutex::new(Vec::new())));
    let peer = ModernPeer {
        outlet: quiet.clone(),
        log_level: None,
    };
    peer.notify(log("error"));
    peer.notify(progress.clone());
    assert_eq!(
        *lock(&quiet.0),
        ["notifications/progress"],
        "no logLevel, no log lines"
    );
    let warned = Arc::new(Collect(Mutex::new(Vec::new())));
    let peer = ModernPeer {
        outlet: warned.clone(),
        log_level: Some(LogLevel::Warning),
    };
    peer.notify(log("info"));
    peer.notify(log("error"));
    assert_eq!(*lock(&warned.0), ["notifications/message"]);
    assert!(
        peer.request("roots/list", None).is_none(),
        "no server requests in the modern era"
    );
}

#[test]
fn a_legacy_call_hears_log_lines_at_or_above_its_sessions_level_once_it_chose_one() {
    let session = session();
    let heard = Arc::new(Collect(Mutex::new(Vec::new())));
    let peer = CallPeer {
        session: Arc::clone(&session),
        outlet: heard.clone(),
        asked: Arc::new(Mutex::new(Vec::new())),
    };
    peer.notify(log("debug"));
    assert_eq!(lock(&heard.0).len(), 1, "no level chosen: every line");
    session.set_log_level(Some(LogLevel::Error));
    peer.notify(log("info"));
    peer.notify(log("critical"));
    peer.notify(Message::notification(
        "notifications/progress",
        Some(r#"{"progressToken":1,"progress":1}"#),
    ));
    assert_eq!(
        *lock(&heard.0),
        [
            "notifications/message",
            "notifications/message",
            "notifications/progress"
        ]
    );
}

#[test]
fn initialize_negotiates_and_keeps_capabilities() {
    let init = Message::request(
        &Id::Num(1),
        "initialize",
        Some(
            r#"{"protocolVersion":"2025-03-26","capabilities":{"roots":{}},"clientInfo":{"name":"x","version":"1"}}"#,
        ),
    );
    let v = negotiate(&init).unwrap();
    assert_eq!(v.revision, Revision::V2025_03_26);
    assert_eq!(v.capabilities, r#"{"roots":{}}"#);
    let newer = Message::request(
        &Id::Num(1),
        "initialize",
        Some(r#"{"protocolVersion":"2099-01-01"}"#),
    );
    assert_eq!(negotiate(&newer).unwrap().revision, Revision::V2025_11_25);
    assert!(negotiate(&Message::request(&Id::Num(1), "initialize", Some("{}"))).is_err());
}
