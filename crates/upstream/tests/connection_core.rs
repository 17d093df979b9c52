//! The connection core's guarantees, pinned with an in-memory transport whose "server" side the
//! test scripts message by message: settle exactly once, progress-token mapping, server requests
//! answered through the handler, cancellation, deadlines and closure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_upstream::transport::{Inbound, InboundTx, Transport, inbound_channel};
use manifold_upstream::{
    CallEvent, CallOptions, Connection, ServerRequest, ServerRequestHandler, UpstreamError,
};
use manifold_wire::{ErrorObject, Id, Message, Revision};
use tokio::sync::mpsc;

/// A transport that records what the client wrote and lets the test inject what the server says.
struct Loopback {
    written: mpsc::UnboundedSender<Message>,
    cancelled: Mutex<Vec<Id>>,
    cancels_itself: bool,
}

impl Transport for Loopback {
    fn send(&self, message: Message) -> BoxFuture<'_, Result<(), UpstreamError>> {
        let _ = self.written.send(message);
        Box::pin(async { Ok(()) })
    }
    fn cancel_request(&self, id: &Id) -> bool {
        self.cancelled.lock().unwrap().push(id.clone());
        self.cancels_itself
    }
    fn negotiated(&self, _revision: Revision) {}
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    fn describe(&self) -> String {
        "loopback".to_owned()
    }
}

struct Echoing;

impl ServerRequestHandler for Echoing {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        Box::pin(async move {
            Ok(format!(
                "{{\"method\":{},\"related\":{}}}",
                serde_json::to_string(&request.method).unwrap(),
                request.related.map_or("null".to_owned(), |i| i.to_json())
            ))
        })
    }
}

struct Harness {
    conn: Connection,
    written: mpsc::UnboundedReceiver<Message>,
    inbound: InboundTx,
    transport: Arc<Loopback>,
}

fn harness(cancels_itself: bool) -> Harness {
    let (wtx, wrx) = mpsc::unbounded_channel();
    let (itx, irx) = inbound_channel();
    let transport = Arc::new(Loopback {
        written: wtx,
        cancelled: Mutex::new(Vec::new()),
        cancels_itself,
    });
    let conn = Connection::start("fake", transport.clone(), irx, Arc::new(Echoing));
    Harness {
        conn,
        written: wrx,
        inbound: itx,
        transport,
    }
}

/// Starts a call with default options.
async fn start(h: &Harness, method: &str, params: Option<&str>) -> manifold_upstream::Call {
    h.conn
        .request(method, params, CallOptions::default())
        .await
        .unwrap()
}

async fn say(h: &Harness, text: &str) {
    h.inbound
        .send(Inbound::Message {
            message: Message::decode_str(text).unwrap(),
            related: None,
        })
        .await
        .unwrap();
}

async fn next_written(h: &mut Harness) -> Message {
    tokio::time::timeout(Duration::from_secs(5), h.written.recv())
        .await
        .expect("the client wrote nothing")
        .unwrap()
}

#[tokio::test]
async fn a_response_settles_its_call_with_the_bytes_the_server_sent() {
    let mut h = harness(false);
    let call = start(&h, "tools/list", None).await;
    let sent = next_written(&mut h).await;
    assert_eq!(sent.method(), Some("tools/list"));
    let id = sent.id().unwrap().to_json();
    say(
        &h,
        &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[],"x":1.0}}}}"#),
    )
    .await;
    let resp = call.response().await.unwrap();
    assert_eq!(resp.result_raw(), Some(r#"{"tools":[],"x":1.0}"#));
    assert_eq!(h.conn.in_flight(), 0);
}

#[tokio::test]
async fn progress_tokens_are_replaced_on_the_way_out_and_restored_on_the_way_back() {
    let mut h = harness(false);
    let mut call = start(
        &h,
        "tools/call",
        Some(r#"{"name":"t","_meta":{"progressToken":"caller-token"}}"#),
    )
    .await;
    let sent = next_written(&mut h).await;
    let ours = sent
        .params_raw(&["_meta", "progressToken"])
        .unwrap()
        .to_owned();
    assert_ne!(
        ours, "\"caller-token\"",
        "the caller's token must not reach the server"
    );
    for p in 1..=3 {
        say(&h, &format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{ours},"progress":{p}}}}}"#)).await;
    }
    say(
        &h,
        &format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
            sent.id().unwrap().to_json()
        ),
    )
    .await;
    let mut seen = Vec::new();
    while let Some(ev) = call.next().await {
        match ev.unwrap() {
            CallEvent::Notification(n) => {
                assert_eq!(n.params_raw(&["progressToken"]), Some("\"caller-token\""));
                seen.push(n.params_raw(&["progress"]).unwrap().to_owned());
            }
            CallEvent::Response(_) => seen.push("response".to_owned()),
        }
    }
    assert_eq!(
        seen,
        ["1", "2", "3", "response"],
        "notifications come before the response, in order"
    );
}

#[tokio::test]
async fn a_duplicate_or_unknown_response_is_ignored_and_counted() {
    let mut h = harness(false);
    let call = start(&h, "ping", None).await;
    let id = next_written(&mut h).await.id().unwrap().to_json();
    say(&h, r#"{"jsonrpc":"2.0","id":999,"result":{}}"#).await;
    say(
        &h,
        &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"n":1}}}}"#),
    )
    .await;
    say(
        &h,
        &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"n":2}}}}"#),
    )
    .await;
    assert_eq!(
        call.response().await.unwrap().result_raw(),
        Some(r#"{"n":1}"#)
    );
    // A later request proves the router handled both strays before it.
    let call2 = start(&h, "ping", None).await;
    let id2 = next_written(&mut h).await.id().unwrap().to_json();
    say(
        &h,
        &format!(r#"{{"jsonrpc":"2.0","id":{id2},"result":{{}}}}"#),
    )
    .await;
    call2.response().await.unwrap();
    assert_eq!(
        h.conn
            .stats()
            .stray_responses
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
}

#[tokio::test]
async fn closing_the_transport_settles_every_pending_call_with_the_cause() {
    let mut h = harness(false);
    let a = start(&h, "a", None).await;
    let b = start(&h, "b", None).await;
    next_written(&mut h).await;
    next_written(&mut h).await;
    h.inbound
        .send(Inbound::Closed {
            cause: "the server process exited (exit status: 3)".into(),
        })
        .await
        .unwrap();
    for call in [a, b] {
        match call.response().await {
            Err(UpstreamError::Closed { server, cause }) => {
                assert_eq!(server, "fake");
                assert!(cause.contains("exit status: 3"), "{cause}");
            }
            other => panic!("expected Closed, got {other:?}"),
        }
    }
    assert!(matches!(
        h.conn.request("c", None, CallOptions::default()).await,
        Err(UpstreamError::Closed { .. })
    ));
}

#[tokio::test]
async fn a_deadline_settles_the_call_and_tells_the_server() {
    let mut h = harness(false);
    let call = h
        .conn
        .request(
            "slow",
            None,
            CallOptions {
                timeout: Duration::from_millis(50),
                reset_on_progress: false,
                max_total: None,
            },
        )
        .await
        .unwrap();
    let id = next_written(&mut h).await.id().unwrap().clone();
    assert!(matches!(
        call.response().await,
        Err(UpstreamError::Timeout { .. })
    ));
    let cancel = next_written(&mut h).await;
    assert_eq!(cancel.method(), Some("notifications/cancelled"));
    assert_eq!(
        cancel.params_raw(&["requestId"]),
        Some(id.to_json().as_str())
    );
    assert_eq!(h.conn.in_flight(), 0);
}

#[tokio::test]
async fn progress_resets_the_deadline_but_not_past_the_absolute_cap() {
    let mut h = harness(false);
    let mut call = h
        .conn
        .request(
            "slow",
            Some(r#"{"_meta":{"progressToken":1}}"#),
            CallOptions {
                timeout: Duration::from_millis(300),
                reset_on_progress: true,
                max_total: Some(Duration::from_millis(900)),
            },
        )
        .await
        .unwrap();
    let sent = next_written(&mut h).await;
    let ours = sent
        .params_raw(&["_meta", "progressToken"])
        .unwrap()
        .to_owned();
    let mut progress_seen = 0;
    let outcome = loop {
        tokio::select! {
            ev = call.next() => match ev {
                Some(Ok(CallEvent::Notification(_))) => progress_seen += 1,
                Some(Ok(CallEvent::Response(_))) => break Ok(()),
                Some(Err(e)) => break Err(e),
                None => panic!("no outcome"),
            },
            _ = tokio::time::sleep(Duration::from_millis(150)) => {
                say(&h, &format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{ours},"progress":1}}}}"#)).await;
            }
        }
    };
    // Progress every 150 ms keeps a 300 ms timeout alive, until the 900 ms cap ends it.
    assert!(
        matches!(outcome, Err(UpstreamError::Timeout { .. })),
        "{outcome:?}"
    );
    assert!(
        progress_seen >= 3,
        "progress kept the call alive past its plain timeout ({progress_seen} events)"
    );
}

#[tokio::test]
async fn cancel_sends_cancelled_unless_the_transport_cancels_itself() {
    let mut h = harness(false);
    let call = start(&h, "slow", None).await;
    let id = next_written(&mut h).await.id().unwrap().clone();
    let err = call.cancel("user asked");
    assert!(matches!(err, UpstreamError::Cancelled { .. }));
    let note = next_written(&mut h).await;
    assert_eq!(note.method(), Some("notifications/cancelled"));
    assert_eq!(note.params_raw(&["reason"]), Some("\"user asked\""));
    assert_eq!(h.transport.cancelled.lock().unwrap().as_slice(), [id]);

    let mut h = harness(true);
    let call = start(&h, "slow", None).await;
    next_written(&mut h).await;
    drop(call);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), h.written.recv())
            .await
            .is_err(),
        "a transport that cancels by closing the stream needs no notification"
    );
}

#[tokio::test]
async fn server_requests_reach_the_handler_with_the_call_they_belong_to() {
    let mut h = harness(false);
    let call = start(&h, "tools/call", Some(r#"{"name":"ask"}"#)).await;
    let our_id = next_written(&mut h).await.id().unwrap().to_json();
    say(&h, r#"{"jsonrpc":"2.0","id":"srv-1","method":"elicitation/create","params":{"message":"name?"}}"#).await;
    let reply = next_written(&mut h).await;
    assert_eq!(reply.id(), Some(&Id::from("srv-1")));
    assert_eq!(
        reply.result_raw().unwrap(),
        format!(r#"{{"method":"elicitation/create","related":{our_id}}}"#)
    );
    say(&h, r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#).await;
    let pong = next_written(&mut h).await;
    assert_eq!(
        (pong.id(), pong.result_raw()),
        (Some(&Id::from("p")), Some("{}"))
    );
    drop(call);
}

#[tokio::test]
async fn a_malformed_response_with_a_readable_id_fails_that_call_only() {
    let mut h = harness(false);
    let bad = start(&h, "a", None).await;
    let good = start(&h, "b", None).await;
    let id_bad = next_written(&mut h).await.id().unwrap().to_json();
    let id_good = next_written(&mut h).await.id().unwrap().to_json();
    let fault = Message::decode_str(&format!(
        r#"{{"jsonrpc":"1.0","id":{id_bad},"result":{{}}}}"#
    ))
    .unwrap_err();
    h.inbound.send(Inbound::Fault(fault)).await.unwrap();
    say(
        &h,
        &format!(r#"{{"jsonrpc":"2.0","id":{id_good},"result":{{}}}}"#),
    )
    .await;
    match bad.response().await {
        Err(UpstreamError::Protocol { detail, .. }) => {
            assert!(detail.contains("jsonrpc"), "{detail}")
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
    good.response().await.unwrap();
}
