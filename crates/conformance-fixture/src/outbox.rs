//! Everything the fixture sends about one request, in order, for the transport to put on the wire.
//!
//! A request may produce notifications (progress, log messages, subscription events) and, in the
//! legacy era, requests to the client before its response. The handler writes all of them, and
//! finally the response, into one ordered channel; the transport decides the wire form (a line on
//! stdout, an SSE event, or a plain JSON body when the response is the only thing produced).

use manifold_wire::Message;
use serde_json::Value;
use tokio::sync::mpsc;

/// How many messages of one request may wait for the transport before the handler waits too.
pub const OUTBOX_CAPACITY: usize = 256;

/// One thing to send about a request.
#[derive(Debug, Clone)]
pub enum Outgoing {
    /// A notification or a server->client request, sent before the response.
    Message(Message),
    /// Ask the transport to end the live response stream now (the request goes on; a client may
    /// resume the stream later). Only HTTP SSE streams honour it.
    CloseStream,
    /// The response; nothing follows it.
    Final(Message),
}

/// The sending half handed to a request's handler.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: Option<mpsc::Sender<Outgoing>>,
}

impl Outbox {
    /// An outbox and the receiver the transport drains.
    pub fn channel() -> (Outbox, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::channel(OUTBOX_CAPACITY);
        (Outbox { tx: Some(tx) }, rx)
    }

    /// An outbox that drops everything (work that outlives its request, such as a task).
    pub fn detached() -> Outbox {
        Outbox { tx: None }
    }

    /// Sends one item; a transport that went away is not an error (the work simply goes on).
    pub async fn send(&self, item: Outgoing) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(item).await;
        }
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: &Value) {
        let params = params.to_string();
        self.send(Outgoing::Message(Message::notification(
            method,
            Some(&params),
        )))
        .await;
    }

    /// Resolves when nobody reads this outbox any more (the HTTP client went away).
    pub async fn closed(&self) {
        match &self.tx {
            Some(tx) => tx.closed().await,
            None => std::future::pending().await,
        }
    }
}
