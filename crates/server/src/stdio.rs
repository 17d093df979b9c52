//! The stdio downstream (`manifold stdio`): one client, legacy or modern, over newline-delimited
//! JSON on a reader and a writer.
//!
//! The writer carries protocol bytes only: every line written is a message built here, through
//! one writer task, so nothing (logs included) can interleave with it. Requests run concurrently;
//! `notifications/cancelled` stops one (and ends a `subscriptions/listen`), and closing the reader
//! cancels everything. Messages tied to a call are queued to the writer without waiting; past
//! [`STDIO_OUTBOX`] queued lines such a message is dropped (answers never are). Requests wait
//! for the upstreams' first start as [`FirstStart`] bounds it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use manifold_gateway::{ClientView, Gateway, RequestContext};
use manifold_wire::line::{DEFAULT_MAX_LINE, Frame, LineFramer};
use manifold_wire::{ErrorCode, ErrorObject, Id, Message, Revision, meta};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::events::ListenFilter;
use crate::first_start::FirstStart;
use crate::limits::MAX_IN_FLIGHT;
use crate::modern_meta::{looks_modern, read_meta};
use crate::session::{ClientSession, ModernPeer, Outlet, negotiate, run_call, run_session_call};
use manifold_gateway::audience::Audience;

/// Lines queued for the writer before notifications are dropped.
pub const STDIO_OUTBOX: usize = 1024;
/// Bytes read from the client at a time.
const READ_CHUNK: usize = 64 * 1024;

#[derive(Clone)]
struct Writer(mpsc::Sender<Arc<str>>);

impl Writer {
    /// Queues an answer, waiting for room: answers are never dropped.
    async fn answer(&self, message: &Message) {
        let _ = self.0.send(message.text()).await;
    }
}

impl Outlet for Writer {
    fn send(&self, message: &Message) -> bool {
        match self.0.try_send(message.text()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(method = ?message.method(), "the stdio client is not reading; dropped a notification");
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

struct Connection {
    gateway: Gateway,
    /// The tool set this connection works in (`manifold stdio --toolset NAME`).
    toolset: Option<Arc<str>>,
    core: Arc<ClientSession>,
    initialized: AtomicBool,
    first_start: FirstStart,
    writer: Writer,
    ended: CancellationToken,
}

/// Serves one client until its reader ends. Returns the first I/O error of the reader or writer.
pub async fn serve_stdio<R, W>(gateway: Gateway, reader: R, writer: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_stdio_in(gateway, None, FirstStart::settled(), reader, writer).await
}

/// As [`serve_stdio`], the client seeing only the tool set `toolset` (checked by the caller),
/// its requests waiting for the upstreams' first start as `first_start` says.
pub async fn serve_stdio_in<R, W>(
    gateway: Gateway,
    toolset: Option<Arc<str>>,
    first_start: FirstStart,
    mut reader: R,
    mut writer: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Arc<str>>(STDIO_OUTBOX);
    let write_task = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            writer.write_all(line.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            writer.flush().await?;
        }
        Ok::<(), std::io::Error>(())
    });
    let conn = Arc::new(Connection {
        gateway,
        toolset,
        core: Arc::new(ClientSession::new(
            ClientView {
                revision: Revision::LATEST_LEGACY,
                capabilities: "{}".to_owned(),
                info: None,
            },
            None,
            "mf-stdio".to_owned(),
            MAX_IN_FLIGHT,
        )),
        initialized: AtomicBool::new(false),
        first_start,
        writer: Writer(tx),
        ended: CancellationToken::new(),
    });
    let mut framer = LineFramer::new(DEFAULT_MAX_LINE);
    let mut buf = vec![0u8; READ_CHUNK];
    let read_result = loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) => break Err(e),
        };
        framer.push(buf.get(..n).unwrap_or_default());
        while let Some(frame) = framer.next_frame() {
            match frame {
                Frame::Line(line) => conn.receive(&line).await,
                Frame::TooLong { limit, .. } => {
                    let e = ErrorObject::new(
                        ErrorCode::ParseError,
                        format!("a line longer than {limit} bytes was skipped"),
                    );
                    conn.writer.answer(&Message::error(None, &e)).await;
                }
            }
        }
    };
    if let Some(last) = framer.finish() {
        conn.receive(&last).await;
    }
    conn.ended.cancel();
    conn.core.cancel_all();
    drop(conn);
    let written = write_task.await.unwrap_or(Ok(()));
    read_result.and(written)
}

impl Connection {
    async fn receive(self: &Arc<Self>, line: &[u8]) {
        let message = match Message::decode(line) {
            Ok(m) => m,
            Err(fault) => {
                self.writer.answer(&fault.to_response()).await;
                return;
            }
        };
        if let Some(message) = self.core.take_unless_request(message) {
            self.request(message).await;
        }
    }

    async fn request(self: &Arc<Self>, message: Message) {
        let Some(id) = message.id().cloned() else {
            return;
        };
        let method = message.method().unwrap_or_default().to_owned();
        if method == meta::method::INITIALIZE {
            self.first_start.before_greeting(&self.gateway).await;
            let answer = match negotiate(&message) {
                Ok(view) => {
                    let revision = view.revision;
                    self.core.set_view(view);
                    if !self.initialized.swap(true, Ordering::SeqCst) {
                        tokio::spawn(forward_events(Arc::clone(self)));
                    }
                    Message::result(&id, &self.gateway.initialize_result(revision))
                }
                Err(e) => Message::error(Some(id), &e),
            };
            self.writer.answer(&answer).await;
            return;
        }
        if looks_modern(&message) {
            return self.modern(message, id).await;
        }
        if !self.initialized.load(Ordering::SeqCst) && method != meta::method::PING {
            let e = ErrorObject::new(
                ErrorCode::InvalidParams,
                "send initialize first, or state the revision in params._meta[\"io.modelcontextprotocol/protocolVersion\"] (2026-07-28)",
            );
            self.writer.answer(&Message::error(Some(id), &e)).await;
            return;
        }
        let token = match self.core.begin(&id) {
            Ok(t) => t,
            Err(e) => return self.writer.answer(&Message::error(Some(id), &e)).await,
        };
        let conn = Arc::clone(self);
        let reads_catalog = method != meta::method::PING;
        tokio::spawn(async move {
            if reads_catalog && !conn.first_start.before_request(&conn.gateway, &token).await {
                conn.core.end(&id);
                return;
            }
            let outlet = Arc::new(conn.writer.clone());
            if let Some(r) = run_session_call(
                &conn.gateway,
                &conn.core,
                outlet,
                &message,
                &token,
                conn.toolset.clone(),
            )
            .await
            {
                conn.writer.answer(&r).await;
            }
            conn.core.end(&id);
        });
    }

    async fn modern(self: &Arc<Self>, message: Message, id: Id) {
        let meta = match read_meta(&message) {
            Ok(m) => m,
            Err(e) => return self.writer.answer(&Message::error(Some(id), &e)).await,
        };
        let method = message.method().unwrap_or_default();
        if method == meta::method::DISCOVER {
            self.first_start.before_greeting(&self.gateway).await;
            let r = Message::result(&id, &self.gateway.discover_result());
            return self.writer.answer(&r).await;
        }
        let is_listen = method == meta::method::SUBSCRIPTIONS_LISTEN;
        if !is_listen && !meta::MODERN_METHODS.contains(&method) {
            let e = ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!(
                    "Method not found: Manifold does not serve {method:?} in the 2026-07-28 era"
                ),
            );
            return self.writer.answer(&Message::error(Some(id), &e)).await;
        }
        let filter = if is_listen {
            match ListenFilter::parse(message.params()) {
                Ok(f) => Some(f),
                Err(why) => {
                    let e = ErrorObject::new(ErrorCode::InvalidParams, why);
                    return self.writer.answer(&Message::error(Some(id), &e)).await;
                }
            }
        } else {
            None
        };
        let token = match self.core.begin(&id) {
            Ok(t) => t,
            Err(e) => return self.writer.answer(&Message::error(Some(id), &e)).await,
        };
        let conn = Arc::clone(self);
        if let Some(filter) = filter {
            tokio::spawn(async move {
                conn.listen(filter, &id, &token).await;
                conn.core.end(&id);
            });
            return;
        }
        tokio::spawn(async move {
            if !conn.first_start.before_request(&conn.gateway, &token).await {
                conn.core.end(&id);
                return;
            }
            let ctx = RequestContext {
                client: meta.client_view(),
                peer: Arc::new(ModernPeer {
                    outlet: Arc::new(conn.writer.clone()),
                    log_level: meta.log_level,
                }),
                session: None,
                caller: None,
                toolset: conn.toolset.clone(),
                trace: None,
                audit: Default::default(),
            };
            if let Some(r) = run_call(&conn.gateway, ctx, &message, &token).await {
                conn.writer.answer(&r).await;
            }
            conn.core.end(&id);
        });
    }

    /// A `subscriptions/listen` over stdio: its notifications share the one channel, each tagged
    /// with the listen request's id; the client ends it with `notifications/cancelled`.
    async fn listen(&self, filter: ListenFilter, id: &Id, cancel: &CancellationToken) {
        let mut events = self.gateway.events();
        let audience = Audience::new(self.gateway.clone(), None, self.toolset.clone());
        self.writer.answer(&filter.acknowledgement(id)).await;
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                _ = self.ended.cancelled() => return,
                e = events.recv() => e,
            };
            let notes = match event {
                Ok(e) => filter.heard(&e, id, &audience).into_iter().collect(),
                Err(RecvError::Lagged(_)) => filter.heard_after_lag(id, &audience),
                Err(RecvError::Closed) => return,
            };
            for n in notes {
                let _ = self.writer.send(&n);
            }
        }
    }
}

async fn forward_events(conn: Arc<Connection>) {
    let mut events = conn.gateway.events();
    loop {
        let event = tokio::select! {
            _ = conn.ended.cancelled() => return,
            e = events.recv() => e,
        };
        let Some(messages) = conn.core.messages_for_received(event) else {
            return;
        };
        for m in messages {
            let _ = conn.writer.send(&m);
        }
    }
}
