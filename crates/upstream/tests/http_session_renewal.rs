//! Why: a legacy-era Streamable HTTP server that dies mid-call, comes back, or forgets its session
//! must cost the caller only the calls it really lost, each failing with the real cause and
//! naming the server; and the calls sent while a new session is being started must wait for it
//! and go out in it. A reply stream belongs to the session it was opened in, so it must never be
//! resumed in another. The legacy server here is written for these tests (axum, on 127.0.0.1,
//! port 0 at first): each of its lives runs on its own runtime, which a test shuts down to kill
//! it (every connection closes, the port refuses) and starts again on the same port with no
//! sessions, and it records every HTTP request it saw.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use manifold_upstream::{
    CallEvent, CallOptions, ConnectOptions, Connection, HttpSpec, HttpTransportChoice, Target,
    UpstreamError, connect,
};
use manifold_wire::{Era, Kind, Message};
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

/// Bounds every wait that should end promptly: a hang guard, never a measurement.
const HANG_GUARD: Duration = Duration::from_secs(30);
const SERVER: &str = "legacy";
const REVISION: &str = "2025-11-25";
/// The `retry` of a test whose resumes must all find the server still down: short, so five
/// refused attempts take little time.
const QUICK_RETRY_MS: u64 = 20;
/// The `retry` of a test that restarts the server and acts before the first resume: long, so
/// that comes after everything the test does meanwhile.
const SLOW_RETRY_MS: u64 = 3_000;

// ---------------------------------------------------------------------------------------------
// The legacy server

/// One HTTP request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    /// Which life of the server saw it (1 for the first).
    life: u64,
    verb: &'static str,
    method: Option<String>,
    session: Option<String>,
    last_event_id: Option<String>,
}

/// How the next ordinary request of a live session is refused, when a test asks for it.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// HTTP 400 with a JSON-RPC error whose id is null, as servers answer transport faults.
    NullId,
    /// HTTP 400 with a JSON-RPC error carrying the request's own id.
    OwnId,
}

/// What outlives each life of the server: what the test controls and what the server saw.
struct World {
    /// The `retry` field of reply streams, in milliseconds.
    retry_ms: u64,
    seen: Mutex<Vec<Seen>>,
    /// While false, `initialize` is held unanswered.
    initialize_open: watch::Sender<bool>,
    /// How many `initialize` requests arrived, in all lives.
    initializes: watch::Sender<u64>,
    refuse_next: Mutex<Option<Refusal>>,
}

/// One life of the server; its sessions die with it.
struct Life {
    number: u64,
    world: Arc<World>,
    sessions: Mutex<HashSet<String>>,
    next_session: AtomicU64,
}

struct LegacyServer {
    world: Arc<World>,
    port: u16,
    lives: u64,
    life: Option<Arc<Life>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl LegacyServer {
    async fn start(retry_ms: u64) -> LegacyServer {
        let mut server = LegacyServer {
            world: Arc::new(World {
                retry_ms,
                seen: Mutex::new(Vec::new()),
                initialize_open: watch::Sender::new(true),
                initializes: watch::Sender::new(0),
                refuse_next: Mutex::new(None),
            }),
            port: 0,
            lives: 0,
            life: None,
            runtime: None,
        };
        server.port = server.live(0).await;
        server
    }

    /// Starts a life on `port` (0: any) in its own runtime; returns the port bound.
    async fn live(&mut self, port: u16) -> u16 {
        assert!(self.runtime.is_none(), "the server is still alive");
        self.lives += 1;
        let life = Arc::new(Life {
            number: self.lives,
            world: Arc::clone(&self.world),
            sessions: Mutex::new(HashSet::new()),
            next_session: AtomicU64::new(1),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (bound_tx, bound) = oneshot::channel();
        let app = Router::new()
            .route("/mcp", post(on_post).get(on_get).delete(on_delete))
            .with_state(Arc::clone(&life));
        runtime.spawn(async move {
            // Reusing the address lets the next life bind the port while the connections the
            // last one closed linger in TIME_WAIT.
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_reuseaddr(true).unwrap();
            socket
                .bind(SocketAddr::from(([127, 0, 0, 1], port)))
                .unwrap();
            let listener = socket.listen(128).unwrap();
            let _ = bound_tx.send(listener.local_addr().unwrap().port());
            let _ = axum::serve(listener, app).await;
        });
        let port = tokio::time::timeout(HANG_GUARD, bound)
            .await
            .unwrap()
            .unwrap();
        self.life = Some(life);
        self.runtime = Some(runtime);
        port
    }

    /// Ends this life as a crash would: every connection closes and the port refuses.
    async fn kill(&mut self) {
        let runtime = self.runtime.take().expect("the server is not alive");
        self.life = None;
        // Waiting for the runtime's threads makes sure the listener is closed on return.
        tokio::task::spawn_blocking(move || runtime.shutdown_timeout(HANG_GUARD))
            .await
            .unwrap();
    }

    /// A new life on the same port, knowing none of the old sessions.
    async fn restart(&mut self) {
        let port = self.live(self.port).await;
        assert_eq!(port, self.port);
    }

    /// Forgets every session, as a server does when they expire.
    fn expire_sessions(&self) {
        let life = self.life.as_ref().expect("the server is not alive");
        life.sessions.lock().unwrap().clear();
    }

    fn refuse_next(&self, refusal: Refusal) {
        *self.world.refuse_next.lock().unwrap() = Some(refusal);
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.world.seen.lock().unwrap().clone()
    }
}

impl Drop for LegacyServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Life {
    fn knows(&self, session: &str) -> bool {
        self.sessions.lock().unwrap().contains(session)
    }

    fn record(&self, verb: &'static str, method: Option<String>, headers: &HeaderMap) {
        self.world.seen.lock().unwrap().push(Seen {
            life: self.number,
            verb,
            method,
            session: header_text(headers, "mcp-session-id"),
            last_event_id: header_text(headers, "last-event-id"),
        });
    }

    async fn initialize(&self, id: &Value) -> Response {
        self.world.initializes.send_modify(|n| *n += 1);
        let mut open = self.world.initialize_open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        let session = format!(
            "life{}-session{}",
            self.number,
            self.next_session.fetch_add(1, Ordering::Relaxed)
        );
        self.sessions.lock().unwrap().insert(session.clone());
        let mut response = axum::Json(json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {
                "protocolVersion": REVISION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "renewal-test-server", "version": "1"}
            }
        }))
        .into_response();
        response
            .headers_mut()
            .insert("mcp-session-id", HeaderValue::from_str(&session).unwrap());
        response
    }

    /// A reply stream that opens with a priming event and one progress notification (both with
    /// event ids) and then stays open without answering, until the server dies.
    fn endless_reply(&self, session: &str, request: &Value) -> Response {
        let token = request["params"]["_meta"]["progressToken"].clone();
        let progress = json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1, "total": 2}
        });
        let events = [
            format!(
                "id: {session}-1\nretry: {}\ndata: \n\n",
                self.world.retry_ms
            ),
            format!("event: message\nid: {session}-2\ndata: {progress}\n\n"),
        ];
        let body = futures::stream::iter(events.map(|e| Ok::<_, Infallible>(Bytes::from(e))))
            .chain(futures::stream::pending());
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(body))
            .unwrap()
    }
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn rpc_error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message}
        })),
    )
        .into_response()
}

fn session_not_found() -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        &Value::Null,
        -32001,
        "Session not found",
    )
}

async fn on_post(State(life): State<Arc<Life>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap();
    let method = request["method"].as_str().map(str::to_owned);
    life.record("POST", method.clone(), &headers);
    let id = request.get("id").cloned();
    if method.as_deref() == Some("initialize") {
        return life.initialize(&id.unwrap_or(Value::Null)).await;
    }
    let session = header_text(&headers, "mcp-session-id");
    let Some(id) = id else {
        // A notification or a response: accepted within a live session.
        return match session {
            Some(s) if life.knows(&s) => StatusCode::ACCEPTED.into_response(),
            _ => session_not_found(),
        };
    };
    let Some(session) = session else {
        // The era probe gets what servers of this age answer: a null id. Other requests get
        // their own id, which is why such an answer once passed for the call's answer.
        let id = if method.as_deref() == Some("server/discover") {
            Value::Null
        } else {
            id
        };
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            -32600,
            "Bad Request: the Mcp-Session-Id header is required; send initialize first",
        );
    };
    if !life.knows(&session) {
        return session_not_found();
    }
    if let Some(refusal) = life.world.refuse_next.lock().unwrap().take() {
        let id = match refusal {
            Refusal::NullId => Value::Null,
            Refusal::OwnId => id,
        };
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            -32600,
            "Bad Request: this request is refused on purpose",
        );
    }
    match (
        method.as_deref(),
        request["params"]["name"].as_str().unwrap_or_default(),
    ) {
        (Some("tools/call"), "echo") => axum::Json(json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {"content": [{"type": "text", "text": request["params"]["arguments"]["message"]}]}
        }))
        .into_response(),
        (Some("tools/call"), "endless") => life.endless_reply(&session, &request),
        // Never answered, not even with headers: what a POST stuck on a dead server's
        // connection looks like from the client.
        (Some("tools/call"), "silent") => std::future::pending().await,
        _ => rpc_error(StatusCode::OK, &id, -32601, "Method not found"),
    }
}

async fn on_get(State(life): State<Arc<Life>>, headers: HeaderMap) -> Response {
    life.record("GET", None, &headers);
    let Some(session) = header_text(&headers, "mcp-session-id").filter(|s| life.knows(s)) else {
        return session_not_found();
    };
    match header_text(&headers, "last-event-id") {
        Some(last) if !last.starts_with(&format!("{session}-")) => rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            -32600,
            "Bad Request: this Last-Event-ID was not issued in this session",
        ),
        // No standalone stream, and no resumption within a session: no test needs either.
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

async fn on_delete(State(life): State<Arc<Life>>, headers: HeaderMap) -> StatusCode {
    life.record("DELETE", None, &headers);
    StatusCode::OK
}

// ---------------------------------------------------------------------------------------------
// The client side

async fn open(server: &LegacyServer) -> Connection {
    let target = Target::Http(HttpSpec {
        url: server.url(),
        transport: HttpTransportChoice::StreamableHttp,
        ..HttpSpec::default()
    });
    let (conn, info) =
        tokio::time::timeout(HANG_GUARD, connect(&target, &ConnectOptions::new(SERVER)))
            .await
            .expect("connect hung")
            .unwrap();
    assert_eq!(info.era, Era::Legacy);
    conn
}

async fn echo(conn: &Connection, message: &str) -> Result<Message, UpstreamError> {
    let params = json!({"name": "echo", "arguments": {"message": message}}).to_string();
    tokio::time::timeout(
        HANG_GUARD,
        conn.call("tools/call", Some(&params), CallOptions::default()),
    )
    .await
    .expect("the call hung")
}

fn text_of(message: &Message) -> String {
    assert_eq!(message.kind(), Kind::Result, "{}", message.as_str());
    let result: Value = serde_json::from_str(message.result_raw().unwrap()).unwrap();
    result["content"][0]["text"].as_str().unwrap().to_owned()
}

/// Starts a call the server answers with an endless reply stream, and returns it once its
/// progress arrived: from then on the client holds the stream's last event id.
async fn start_endless_call(conn: &Connection) -> manifold_upstream::Call {
    let mut call = conn
        .request(
            "tools/call",
            Some(r#"{"name":"endless","arguments":{},"_meta":{"progressToken":"mine"}}"#),
            CallOptions::default(),
        )
        .await
        .unwrap();
    match tokio::time::timeout(HANG_GUARD, call.next()).await.unwrap() {
        Some(Ok(CallEvent::Notification(n))) => {
            assert_eq!(n.method(), Some("notifications/progress"));
        }
        other => panic!("expected the call's progress, got {other:?}"),
    }
    call
}

/// The session the server saw the last `tools/call` in.
fn session_of_last_call(server: &LegacyServer) -> String {
    server
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.method.as_deref() == Some("tools/call"))
        .and_then(|s| s.session)
        .expect("no tools/call was seen")
}

/// The error a call gets when its reply stream's session is gone.
fn lost_with_the_session() -> UpstreamError {
    UpstreamError::Closed {
        server: SERVER.to_owned(),
        cause: "the server restarted or ended the session while answering tools/call; the reply \
                stream belonged to that session and cannot be resumed in another, so the call \
                was lost (whether it ran is unknown)"
            .to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// A server killed mid-call

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_server_dies_mid_reply_fails_as_unreachable_naming_the_refusal() {
    let mut server = LegacyServer::start(QUICK_RETRY_MS).await;
    let conn = open(&server).await;
    let call = start_endless_call(&conn).await;
    server.kill().await;
    let error = tokio::time::timeout(HANG_GUARD, call.response())
        .await
        .expect("the call never settled")
        .unwrap_err();
    // A transport failure (the gateway may retry an idempotent call), not a protocol violation.
    let UpstreamError::Connect {
        server: name,
        reason,
    } = &error
    else {
        panic!("expected the server to be unreachable, got {error:?}");
    };
    assert_eq!(name, SERVER);
    let expected = format!(
        "the server closed the reply stream to tools/call and refused reconnection: GET {}: could not connect: ",
        server.url()
    );
    assert!(reason.starts_with(&expected), "{reason}");
    assert!(reason.contains("Connection refused"), "{reason}");
    assert!(
        error
            .to_string()
            .starts_with("could not reach server \"legacy\": the server closed the reply stream"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_stream_is_never_resumed_in_the_session_that_replaced_its_own() {
    let mut server = LegacyServer::start(SLOW_RETRY_MS).await;
    let conn = open(&server).await;
    let call = start_endless_call(&conn).await;
    let old_session = session_of_last_call(&server);
    server.kill().await;
    server.restart().await;
    // This call finds the old session unknown and starts a new one, before the stream's first
    // resume attempt (a `retry` later). On a loaded machine it can go out on a pooled connection
    // to the killed server whose close the client has not read yet ("connection closed before
    // message completed", a `Connect` error): the request never reached the new server, and a
    // client sends it again, as this test does once. That race is not what this test is about.
    let answer = match echo(&conn, "after the restart").await {
        Err(UpstreamError::Connect { .. }) => echo(&conn, "after the restart").await,
        other => other,
    }
    .unwrap();
    assert_eq!(text_of(&answer), "after the restart");
    let error = tokio::time::timeout(HANG_GUARD, call.response())
        .await
        .expect("the call never settled")
        .unwrap_err();
    assert_eq!(error, lost_with_the_session());
    let seen = server.seen();
    let renewed = seen
        .iter()
        .filter(|s| s.life == 2 && s.method.as_deref() == Some("tools/call"))
        .filter_map(|s| s.session.clone())
        .collect::<Vec<_>>();
    // The echo went out in the old session, was refused (404), and went again in the new one.
    assert_eq!(renewed, [old_session.clone(), "life2-session1".to_owned()]);
    // Whatever the resume attempts found, none carried the old stream's event id in the new
    // session (nor in any session but its own).
    for s in seen.iter().filter(|s| s.last_event_id.is_some()) {
        assert_eq!(s.session.as_deref(), Some(old_session.as_str()), "{s:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_stream_whose_session_the_restarted_server_does_not_know_is_lost() {
    let mut server = LegacyServer::start(1_000).await;
    let conn = open(&server).await;
    let call = start_endless_call(&conn).await;
    let old_session = session_of_last_call(&server);
    server.kill().await;
    server.restart().await;
    let error = tokio::time::timeout(HANG_GUARD, call.response())
        .await
        .expect("the call never settled")
        .unwrap_err();
    assert_eq!(error, lost_with_the_session());
    // The resume went to the new life in the stream's own session, which answered 404.
    let resumes: Vec<Seen> = server
        .seen()
        .into_iter()
        .filter(|s| s.life == 2 && s.last_event_id.is_some())
        .collect();
    assert_eq!(resumes.len(), 1, "{resumes:?}");
    assert_eq!(resumes[0].session.as_deref(), Some(old_session.as_str()));
    assert_eq!(
        resumes[0].last_event_id.as_deref(),
        Some(format!("{old_session}-2").as_str())
    );
    // The connection itself recovers: the next call starts a new session.
    let answer = echo(&conn, "still here").await.unwrap();
    assert_eq!(text_of(&answer), "still here");
}

// ---------------------------------------------------------------------------------------------
// Session renewal

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_sent_during_a_session_renewal_wait_for_it_and_go_out_in_the_new_session() {
    let server = LegacyServer::start(QUICK_RETRY_MS).await;
    let conn = open(&server).await;
    assert_eq!(text_of(&echo(&conn, "before").await.unwrap()), "before");
    // The renewal's initialize is held until the other calls were sent.
    server.world.initialize_open.send_replace(false);
    server.expire_sessions();
    let renewing = {
        let conn = conn.clone();
        tokio::spawn(async move { echo(&conn, "renewing").await })
    };
    let mut initializes = server.world.initializes.subscribe();
    tokio::time::timeout(HANG_GUARD, initializes.wait_for(|n| *n == 2))
        .await
        .expect("the session was never renewed")
        .unwrap();
    let during: Vec<_> = (0..5)
        .map(|n| {
            let conn = conn.clone();
            tokio::spawn(async move {
                let message = format!("during {n}");
                (message.clone(), echo(&conn, &message).await)
            })
        })
        .collect();
    // A moment for the calls to go out if they would (no outcome depends on how long it is:
    // waiting calls wait through it, and calls that go out are answered at once).
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.world.initialize_open.send_replace(true);
    assert_eq!(
        text_of(&renewing.await.unwrap().unwrap()),
        "renewing",
        "the call that found the session expired"
    );
    for call in during {
        let (message, answer) = call.await.unwrap();
        assert_eq!(text_of(&answer.unwrap()), message);
    }
    let seen = server.seen();
    // Only the era probe and the two initializes went out without a session.
    let sessionless: Vec<_> = seen
        .iter()
        .filter(|s| s.verb == "POST" && s.session.is_none())
        .map(|s| s.method.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        sessionless,
        ["server/discover", "initialize", "initialize"],
        "{seen:?}"
    );
    // Every call after the renewal went out in the new session.
    let calls_in_new_session = seen
        .iter()
        .filter(|s| s.method.as_deref() == Some("tools/call"))
        .filter(|s| s.session.as_deref() == Some("life1-session2"))
        .count();
    assert_eq!(calls_in_new_session, 6, "{seen:?}");
}

/// The chaos test's rare hang: a POST that never got an answer (in the chaos run, stuck in the
/// HTTP client's `send` on the killed server's connection) waited for its call deadline, though
/// the server had long since started a new session. Once the session it was sent in has ended,
/// it is given up after ENDED_SESSION_GRACE, with the cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_never_answered_is_given_up_once_its_session_ended() {
    let server = LegacyServer::start(QUICK_RETRY_MS).await;
    let conn = open(&server).await;
    assert_eq!(text_of(&echo(&conn, "before").await.unwrap()), "before");
    let silent = {
        let conn = conn.clone();
        tokio::spawn(async move {
            conn.call(
                "tools/call",
                Some(r#"{"name":"silent","arguments":{}}"#),
                CallOptions::default(),
            )
            .await
        })
    };
    let calls_seen = |server: &LegacyServer| {
        server
            .seen()
            .iter()
            .filter(|s| s.method.as_deref() == Some("tools/call"))
            .count()
    };
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while calls_seen(&server) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the silent call never arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // While its session lives, the silent call waits (as long as the server takes).
    tokio::time::sleep(manifold_upstream::transport::http::streamable::ENDED_SESSION_GRACE * 2)
        .await;
    assert!(
        !silent.is_finished(),
        "the call ended while its session lived"
    );
    server.expire_sessions();
    assert_eq!(text_of(&echo(&conn, "after").await.unwrap()), "after");
    let error = tokio::time::timeout(HANG_GUARD, silent)
        .await
        .expect("the unanswered call outlived its ended session")
        .unwrap()
        .unwrap_err();
    let UpstreamError::Closed {
        server: name,
        cause,
    } = &error
    else {
        panic!("expected the ended session as the cause, got {error:?}");
    };
    assert_eq!(name, SERVER);
    assert!(
        cause.starts_with(
            "the server restarted or ended the session while tools/call waited for its answer"
        ),
        "{cause}"
    );
    assert!(
        cause.ends_with("so the call was lost (whether it ran is unknown)"),
        "{cause}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_session_renewal_still_ends_at_its_own_deadline() {
    let server = LegacyServer::start(QUICK_RETRY_MS).await;
    let conn = open(&server).await;
    assert_eq!(text_of(&echo(&conn, "before").await.unwrap()), "before");
    server.world.initialize_open.send_replace(false);
    server.expire_sessions();
    let renewing = {
        let conn = conn.clone();
        tokio::spawn(async move { echo(&conn, "renewing").await })
    };
    let mut initializes = server.world.initializes.subscribe();
    tokio::time::timeout(HANG_GUARD, initializes.wait_for(|n| *n == 2))
        .await
        .expect("the session was never renewed")
        .unwrap();
    let params = json!({"name": "echo", "arguments": {"message": "impatient"}}).to_string();
    let impatient = tokio::time::timeout(
        HANG_GUARD,
        conn.call(
            "tools/call",
            Some(&params),
            CallOptions::with_timeout(Duration::from_millis(300)),
        ),
    )
    .await
    .expect("the call outlived its deadline")
    .unwrap_err();
    let UpstreamError::Timeout {
        server: name,
        method,
        ..
    } = &impatient
    else {
        panic!("expected the call's own timeout, got {impatient:?}");
    };
    assert_eq!((name.as_str(), method.as_str()), (SERVER, "tools/call"));
    server.world.initialize_open.send_replace(true);
    assert_eq!(text_of(&renewing.await.unwrap().unwrap()), "renewing");
    // The impatient call never went out: the calls seen are "before", and "renewing" twice
    // (refused in the expired session, then answered in the new one).
    let calls: Vec<Option<String>> = server
        .seen()
        .into_iter()
        .filter(|s| s.method.as_deref() == Some("tools/call"))
        .map(|s| s.session)
        .collect();
    let old = Some("life1-session1".to_owned());
    assert_eq!(calls, [old.clone(), old, Some("life1-session2".to_owned())]);
}

// ---------------------------------------------------------------------------------------------
// HTTP errors with JSON-RPC bodies

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_error_is_the_calls_answer_only_when_it_carries_the_calls_id() {
    let server = LegacyServer::start(QUICK_RETRY_MS).await;
    let conn = open(&server).await;
    server.refuse_next(Refusal::NullId);
    let error = echo(&conn, "refused").await.unwrap_err();
    assert_eq!(
        error,
        UpstreamError::Http {
            server: SERVER.to_owned(),
            method: "tools/call".to_owned(),
            status: 400,
            body: "Bad Request: this request is refused on purpose (code -32600)".to_owned(),
        }
    );
    server.refuse_next(Refusal::OwnId);
    let answer = echo(&conn, "refused").await.unwrap();
    assert_eq!(answer.kind(), Kind::Error, "{}", answer.as_str());
    let error = answer.error_object().unwrap();
    assert_eq!(error.code, -32600);
    assert_eq!(
        error.message,
        "Bad Request: this request is refused on purpose"
    );
    assert_eq!(text_of(&echo(&conn, "answered").await.unwrap()), "answered");
}
