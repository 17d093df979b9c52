//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout, both eras on one
//! connection. This is how Manifold launches the fixture.
//!
//! A request that names a revision in `_meta` (or is `server/discover`, `subscriptions/listen` or
//! a `tasks/*` method) is served in the modern era; anything else in the legacy era of this
//! connection, which `initialize` sets up. Requests are served concurrently; each one's
//! notifications precede its response. Only protocol bytes go to stdout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use manifold_wire::line::{Frame, LineFramer, encode_line};
use manifold_wire::meta::method;
use manifold_wire::{ErrorCode, Id, Kind, Message, Revision};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::engine::{self, Call, Era, Fixture};
use crate::error::{FixtureError, RpcError};
use crate::modern_validation;
use crate::outbox::{Outbox, Outgoing};
use crate::session::LegacyState;
use crate::subscriptions::Change;

/// How many messages may wait for stdout.
pub const WRITE_QUEUE: usize = 1024;

/// How long the process waits for stdout to drain after stdin closed.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest line accepted on stdin (16 MiB).
pub const MAX_LINE: usize = manifold_wire::line::DEFAULT_MAX_LINE;

/// One stdio connection.
struct Connection {
    fixture: Arc<Fixture>,
    writer: mpsc::Sender<Message>,
    /// Set by `initialize`; until then legacy requests use a default state.
    legacy: Mutex<Option<Arc<LegacyState>>>,
    fallback: Arc<LegacyState>,
    /// Modern requests in flight, for `notifications/cancelled`.
    modern: Mutex<HashMap<Id, CancellationToken>>,
}

impl Connection {
    fn legacy_state(&self) -> Arc<LegacyState> {
        self.legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| self.fallback.clone())
    }

    async fn write(&self, message: Message) {
        let _ = self.writer.send(message).await;
    }
}

/// Serves stdin/stdout until stdin closes.
pub async fn run(fixture: Arc<Fixture>) -> Result<(), FixtureError> {
    let (writer, mut queue) = mpsc::channel::<Message>(WRITE_QUEUE);
    let write_loop = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(message) = queue.recv().await {
            stdout.write_all(&encode_line(message.as_str())).await?;
            stdout.flush().await?;
        }
        Ok::<(), std::io::Error>(())
    });
    let connection = Arc::new(Connection {
        fixture: fixture.clone(),
        writer,
        legacy: Mutex::new(None),
        fallback: Arc::new(LegacyState::new(Revision::LATEST_LEGACY, json!({}))),
        modern: Mutex::new(HashMap::new()),
    });
    let forwarder = tokio::spawn(forward_changes(connection.clone(), fixture.hub.listen()));

    let mut stdin = tokio::io::stdin();
    let mut framer = LineFramer::new(MAX_LINE);
    let mut buf = vec![0u8; 64 * 1024];
    let read_result = loop {
        let n = match stdin.read(&mut buf).await {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) => break Err(FixtureError::Stdio(e)),
        };
        framer.push(buf.get(..n).unwrap_or_default());
        while let Some(frame) = framer.next_frame() {
            match frame {
                Frame::Line(line) => on_line(&connection, &line).await,
                Frame::TooLong { limit, seen } => {
                    let error = RpcError::new(
                        ErrorCode::ParseError,
                        format!(
                            "a line of {seen} bytes exceeds the {limit}-byte limit and was dropped"
                        ),
                    );
                    connection.write(error.to_response(None)).await;
                }
            }
        }
    };
    if let Some(rest) = framer.finish() {
        on_line(&connection, &rest).await;
    }

    // Requests already read still get their answers (for a while); then whatever is left (a
    // listen stream, a long task) is cancelled.
    forwarder.abort();
    let weak = Arc::downgrade(&connection);
    drop(connection);
    let mut write_loop = write_loop;
    let drained = match tokio::time::timeout(DRAIN_TIMEOUT, &mut write_loop).await {
        Ok(done) => Some(done),
        Err(_) => {
            if let Some(connection) = weak.upgrade() {
                connection.legacy_state().cancel_all();
                for (_, token) in connection
                    .modern
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .drain()
                {
                    token.cancel();
                }
            }
            tokio::time::timeout(DRAIN_TIMEOUT, write_loop).await.ok()
        }
    };
    if let Some(Ok(Err(e))) = drained {
        return Err(FixtureError::Stdio(e));
    }
    read_result
}

async fn on_line(connection: &Arc<Connection>, line: &[u8]) {
    let message = match Message::decode(line) {
        Ok(message) => message,
        Err(fault) => {
            connection.write(fault.to_response()).await;
            return;
        }
    };
    match message.kind() {
        Kind::Request => on_request(connection, &message).await,
        Kind::Notification => on_notification(connection, &message),
        Kind::Result | Kind::Error => {
            connection.legacy_state().client_requests.resolve(message);
        }
    }
}

fn is_modern_only(method_name: &str) -> bool {
    matches!(
        method_name,
        method::DISCOVER
            | method::SUBSCRIPTIONS_LISTEN
            | "tasks/get"
            | "tasks/update"
            | "tasks/cancel"
    )
}

async fn on_request(connection: &Arc<Connection>, message: &Message) {
    let call = match Call::from_message(message) {
        Ok(call) => call,
        Err(e) => {
            connection.write(e.to_response(message.id().cloned())).await;
            return;
        }
    };
    let modern = modern_validation::names_a_revision(&call.params) || is_modern_only(&call.method);
    if modern {
        let meta = match modern_validation::admit(
            &call.method,
            &call.params,
            None,
            connection.fixture.catalog.dynamic_tool(),
        ) {
            Ok(meta) => meta,
            Err(e) => {
                connection.write(e.to_response(Some(call.id))).await;
                return;
            }
        };
        let cancel = CancellationToken::new();
        connection
            .modern
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(call.id.clone(), cancel.clone());
        spawn_call(connection.clone(), call, Era::Modern(meta), cancel, None);
        return;
    }
    if call.method == method::INITIALIZE {
        let (state, result) = engine::initialize(&call.params);
        *connection.legacy.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
        connection
            .write(Message::result(&call.id, &result.to_string()))
            .await;
        return;
    }
    let state = connection.legacy_state();
    let cancel = match state.begin(&call.id) {
        Ok(token) => token,
        Err(e) => {
            connection.write(e.to_response(Some(call.id))).await;
            return;
        }
    };
    spawn_call(
        connection.clone(),
        call,
        Era::Legacy(state.clone()),
        cancel,
        Some(state),
    );
}

fn spawn_call(
    connection: Arc<Connection>,
    call: Call,
    era: Era,
    cancel: CancellationToken,
    legacy: Option<Arc<LegacyState>>,
) {
    let (out, mut rx) = Outbox::channel();
    let id = call.id.clone();
    tokio::spawn(engine::serve(
        connection.fixture.clone(),
        call,
        era,
        out,
        cancel,
    ));
    tokio::spawn(async move {
        while let Some(item) = rx.recv().await {
            match item {
                Outgoing::Message(m) | Outgoing::Final(m) => connection.write(m).await,
                Outgoing::CloseStream => {}
            }
        }
        match legacy {
            Some(state) => state.end(&id),
            None => {
                connection
                    .modern
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
            }
        }
    });
}

fn on_notification(connection: &Connection, message: &Message) {
    match message.method() {
        Some(method::INITIALIZED) => connection.legacy_state().mark_initialized(),
        Some(method::CANCELLED) => {
            let Some(id) = message
                .params_raw(&["requestId"])
                .and_then(|raw| Id::from_raw(raw).ok())
            else {
                return;
            };
            let modern = connection
                .modern
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            match modern {
                Some(token) => token.cancel(),
                None => connection.legacy_state().cancel(&id),
            }
        }
        _ => {}
    }
}

/// Legacy era: list changes (and updates of subscribed resources) go out as they happen, once the
/// connection is initialized. Modern clients hear about changes through `subscriptions/listen`.
async fn forward_changes(connection: Arc<Connection>, mut changes: broadcast::Receiver<Change>) {
    loop {
        let change = match changes.recv().await {
            Ok(change) => change,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(state) = connection
            .legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            continue;
        };
        if !state.is_initialized() {
            continue;
        }
        if let Change::ResourceUpdated(uri) = &change
            && !state.is_subscribed(uri)
        {
            continue;
        }
        let params = Value::Object(change.params()).to_string();
        connection
            .write(Message::notification(change.method(), Some(&params)))
            .await;
    }
}
