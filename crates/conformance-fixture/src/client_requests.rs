//! Legacy era: requests the fixture sends to the client (sampling, elicitation, roots) and the
//! matching of the client's answers to them.
//!
//! The request goes out through the outbox of the client request that caused it (so over HTTP it
//! travels on that request's SSE stream); the answer comes back as a separate message (a POST
//! over HTTP, a line on stdin) and is routed here by id.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use manifold_wire::{Id, Kind, Message};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::error::RpcError;
use crate::outbox::{Outbox, Outgoing};

/// How long the fixture waits for the client to answer one of its requests.
pub const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// The most requests to the client that may await an answer at once, per connection.
pub const MAX_PENDING: usize = 64;

/// The requests to one client that await an answer.
#[derive(Debug, Default)]
pub struct ClientRequests {
    next: AtomicU64,
    pending: Mutex<HashMap<Id, oneshot::Sender<Message>>>,
}

impl ClientRequests {
    /// Sends `method` to the client through `out` and waits for the result.
    pub async fn call(
        &self,
        out: &Outbox,
        method: &str,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = Id::from(format!("fixture-{n}").as_str());
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            if pending.len() >= MAX_PENDING {
                return Err(RpcError::internal(format!(
                    "{MAX_PENDING} requests to the client already await an answer; {method} was not sent"
                )));
            }
            pending.insert(id.clone(), tx);
        }
        let params = params.to_string();
        out.send(Outgoing::Message(Message::request(
            &id,
            method,
            Some(&params),
        )))
        .await;
        let answer = tokio::time::timeout(CLIENT_ANSWER_TIMEOUT, rx).await;
        self.forget(&id);
        let message = match answer {
            Ok(Ok(message)) => message,
            Ok(Err(_)) => {
                return Err(RpcError::internal(format!(
                    "the connection closed before the client answered {method}"
                )));
            }
            Err(_) => {
                return Err(RpcError::internal(format!(
                    "the client did not answer {method} within {}s",
                    CLIENT_ANSWER_TIMEOUT.as_secs()
                )));
            }
        };
        match message.kind() {
            Kind::Result => message
                .result_raw()
                .and_then(|raw| serde_json::from_str(raw).ok())
                .ok_or_else(|| {
                    RpcError::internal(format!("the client's {method} result is not JSON"))
                }),
            _ => {
                let why = message
                    .error_object()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "an unreadable error".to_owned());
                Err(RpcError::internal(format!(
                    "the client refused {method}: {why}"
                )))
            }
        }
    }

    /// Routes a response from the client; false when no request of ours has its id.
    pub fn resolve(&self, response: Message) -> bool {
        let Some(id) = response.id().cloned() else {
            return false;
        };
        let waiter = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        match waiter {
            Some(tx) => tx.send(response).is_ok(),
            None => false,
        }
    }

    fn forget(&self, id: &Id) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn an_answer_reaches_the_request_with_its_id() {
        let requests = std::sync::Arc::new(ClientRequests::default());
        let (out, mut rx) = Outbox::channel();
        let caller = {
            let requests = requests.clone();
            tokio::spawn(async move { requests.call(&out, "roots/list", &json!({})).await })
        };
        let Some(Outgoing::Message(sent)) = rx.recv().await else {
            panic!("no request went out");
        };
        assert_eq!(sent.method(), Some("roots/list"));
        let id = sent.id().cloned().unwrap();
        assert!(!requests.resolve(Message::result(&Id::from("other"), "{}")));
        assert!(requests.resolve(Message::result(&id, r#"{"roots":[]}"#)));
        assert_eq!(caller.await.unwrap(), Ok(json!({"roots": []})));
    }
}
