//! Legacy session messages that belong to another replica. Behind a load balancer without
//! affinity, a legacy client's answer to a server's question (elicitation, sampling, roots) or its
//! cancellation of a call may reach a replica other than the one holding the call. The server
//! requests a replica sends carry its id (`mf-<replica>.<epoch>-<n>`), so an answer names its
//! holder; a cancellation of a call not running here goes to every replica. The binary carries the
//! messages (through the store: PostgreSQL's LISTEN/NOTIFY); this crate decides what to relay and
//! hands what arrives to the HTTP side (`http/relay_inbox.rs`). The same way carries the news that
//! a session's shared state changed (`shared_sessions.rs`), and HTTP+SSE posts that reached a
//! replica other than the one holding their stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use manifold_wire::{Kind, Message, meta};

use crate::shared_sessions::{SESSION_CHANGED, SessionChange, SharedSessions};
use tokio::sync::mpsc;

/// Addressed to every replica.
pub const EVERY_REPLICA: &str = "*";

/// A relay that could not take a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not hand the message to replica {to}: {reason}")]
pub struct RelayError {
    pub to: String,
    pub reason: String,
}

pub type RelayFuture<'a> = Pin<Box<dyn Future<Output = Result<(), RelayError>> + Send + 'a>>;

/// Carries messages to other replicas.
pub trait RelaySend: std::fmt::Debug + Send + Sync {
    /// Hands `message` of session `session` to replica `to` ([`EVERY_REPLICA`]: all of them).
    fn send<'a>(&'a self, to: &'a str, session: &'a str, message: &'a str) -> RelayFuture<'a>;
}

/// A message another replica relayed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed {
    pub session: String,
    pub message: String,
}

/// What the server needs to take part: this replica's id, the way out, and the way in (taken
/// once by the server that serves it).
#[derive(Debug, Clone)]
pub struct SessionRelay {
    pub replica: String,
    pub sender: Arc<dyn RelaySend>,
    /// Where what a session asked for is kept for every replica (`shared_sessions.rs`).
    pub sessions: Arc<dyn SharedSessions>,
    inbox: Arc<Mutex<Option<mpsc::Receiver<Relayed>>>>,
}

impl SessionRelay {
    pub fn new(
        replica: String,
        sender: Arc<dyn RelaySend>,
        sessions: Arc<dyn SharedSessions>,
        inbox: mpsc::Receiver<Relayed>,
    ) -> SessionRelay {
        SessionRelay {
            replica,
            sender,
            sessions,
            inbox: Arc::new(Mutex::new(Some(inbox))),
        }
    }

    /// Records `change` of session `sid` and tells every other replica. A store that fails is
    /// logged and the change stays on this replica: the request it came from did succeed.
    pub async fn share(&self, sid: &str, change: SessionChange) {
        if let Err(e) = self.sessions.record(sid, &change).await {
            tracing::warn!(
                "{e}; the change stays on this replica until the session's next request reaches another"
            );
            return;
        }
        let announce = Message::notification(
            SESSION_CHANGED,
            Some(&serde_json::json!({ "from": self.replica }).to_string()),
        );
        if let Err(e) = self
            .sender
            .send(EVERY_REPLICA, sid, announce.as_str())
            .await
        {
            tracing::warn!(
                "{e}; other replicas holding the session read its change when it reaches them next"
            );
        }
    }

    /// Whether `message` is another replica's [`SESSION_CHANGED`] (this replica's own are
    /// ignored).
    pub fn is_change_from_elsewhere(&self, message: &Message) -> bool {
        message.kind() == Kind::Notification
            && message.method() == Some(SESSION_CHANGED)
            && message.params_str(&["from"]).as_deref() != Some(self.replica.as_str())
    }

    /// The incoming messages; `None` once taken.
    pub(crate) fn take_inbox(&self) -> Option<mpsc::Receiver<Relayed>> {
        self.inbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The prefix of the ids of server requests a session of this replica sends.
    pub(crate) fn request_prefix(replica: Option<&str>, epoch: &str) -> String {
        match replica {
            Some(r) => format!("mf-{r}.{epoch}"),
            None => format!("mf-{epoch}"),
        }
    }

    /// Where `message`, received for a session here, must go instead of (or besides) this
    /// replica: the replica that asked, for an answer to a server request of another replica's;
    /// every replica, for a cancellation of a request not running here (`running_here`).
    pub(crate) fn destination(
        &self,
        message: &Message,
        running_here: impl Fn(&manifold_wire::Id) -> bool,
    ) -> Option<String> {
        match message.kind() {
            Kind::Result | Kind::Error => {
                let manifold_wire::Id::Str(id) = message.id()? else {
                    return None;
                };
                let replica = id.strip_prefix("mf-")?.split_once('.')?.0;
                (!replica.is_empty() && replica != self.replica).then(|| replica.to_owned())
            }
            Kind::Notification if message.method() == Some(meta::method::CANCELLED) => {
                let raw = message.params()?;
                let id = manifold_wire::patch::get(raw, &["requestId"])
                    .ok()
                    .flatten()?;
                let id = manifold_wire::Id::from_raw(id).ok()?;
                (!running_here(&id)).then(|| EVERY_REPLICA.to_owned())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[derive(Debug)]
    struct Nowhere;
    impl RelaySend for Nowhere {
        fn send<'a>(&'a self, _: &'a str, _: &'a str, _: &'a str) -> RelayFuture<'a> {
            Box::pin(async { Ok(()) })
        }
    }
    impl crate::shared_sessions::SharedSessions for Nowhere {
        fn load<'a>(
            &'a self,
            _: &'a str,
        ) -> futures::future::BoxFuture<
            'a,
            Result<
                Option<crate::shared_sessions::SharedSession>,
                crate::shared_sessions::SharedSessionError,
            >,
        > {
            Box::pin(async { Ok(None) })
        }
        fn record<'a>(
            &'a self,
            _: &'a str,
            _: &'a crate::shared_sessions::SessionChange,
        ) -> futures::future::BoxFuture<'a, Result<(), crate::shared_sessions::SharedSessionError>>
        {
            Box::pin(async { Ok(()) })
        }
    }

    #[test]
    fn a_session_change_is_taken_in_only_from_another_replica() {
        let r = relay();
        let ours = message(
            r#"{"jsonrpc":"2.0","method":"notifications/manifold/session_changed","params":{"from":"a1b2"}}"#,
        );
        let theirs = message(
            r#"{"jsonrpc":"2.0","method":"notifications/manifold/session_changed","params":{"from":"c3d4"}}"#,
        );
        assert!(!r.is_change_from_elsewhere(&ours));
        assert!(r.is_change_from_elsewhere(&theirs));
        // A relayed session change is never relayed on: only answers and cancellations are.
        assert_eq!(r.destination(&theirs, |_| false), None);
    }

    fn relay() -> SessionRelay {
        let (_, inbox) = mpsc::channel(1);
        SessionRelay::new("a1b2".into(), Arc::new(Nowhere), Arc::new(Nowhere), inbox)
    }

    fn message(text: &str) -> Message {
        Message::decode_str(text).unwrap()
    }

    #[test]
    fn answers_go_to_the_replica_that_asked_and_ours_stay() {
        let r = relay();
        let never = |_: &manifold_wire::Id| false;
        let theirs = message(r#"{"jsonrpc":"2.0","id":"mf-c3d4.0a0b0c0d-7","result":{}}"#);
        assert_eq!(r.destination(&theirs, never).as_deref(), Some("c3d4"));
        let error = message(
            r#"{"jsonrpc":"2.0","id":"mf-c3d4.0a0b0c0d-7","error":{"code":-1,"message":"no"}}"#,
        );
        assert_eq!(r.destination(&error, never).as_deref(), Some("c3d4"));
        for ours_or_not_a_relay in [
            r#"{"jsonrpc":"2.0","id":"mf-a1b2.0a0b0c0d-7","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"mf-0a0b0c0d-7","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"other.x","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"mf-.x-1","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
        ] {
            assert_eq!(
                r.destination(&message(ours_or_not_a_relay), never),
                None,
                "{ours_or_not_a_relay}"
            );
        }
    }

    #[test]
    fn a_cancellation_goes_to_every_replica_unless_its_call_runs_here() {
        let r = relay();
        let cancel = message(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#,
        );
        assert_eq!(
            r.destination(&cancel, |_| false).as_deref(),
            Some(EVERY_REPLICA)
        );
        assert_eq!(r.destination(&cancel, |_| true), None);
        let unreadable =
            message(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#);
        assert_eq!(r.destination(&unreadable, |_| false), None);
    }

    #[test]
    fn request_ids_name_the_replica_only_when_there_is_a_relay() {
        assert_eq!(SessionRelay::request_prefix(Some("r1"), "e"), "mf-r1.e");
        assert_eq!(SessionRelay::request_prefix(None, "e"), "mf-e");
    }
}
