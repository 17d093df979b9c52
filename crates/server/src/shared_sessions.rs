//! What a legacy session asked for, following it from replica to replica: the resources it
//! subscribed to, the log level it chose, and whether it ended. Behind a load balancer without
//! affinity a session's next request, or its GET stream, may land on a replica that never saw the
//! `resources/subscribe`, `logging/setLevel` or `DELETE`; without this, that replica would let the
//! session miss its updates, flood it with log lines it turned down, or serve it after it ended.
//!
//! Every such change is recorded in the shared store (the binary backs [`SharedSessions`] with
//! manifold-store) before its answer leaves, and announced to every replica through the relay
//! ([`SESSION_CHANGED`], `SessionRelay::share` in `relay.rs`), so a replica where the session is live now takes the change in at once;
//! one where it is not yet live reads the state when the session first arrives there. A replica
//! taking in subscriptions subscribes upstream itself, through the gateway, as the session's
//! caller (the rules judge it again there).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use manifold_gateway::{Caller, Gateway};
use manifold_wire::log_level::LogLevel;
use manifold_wire::{Id, Kind, Message};
use tokio_util::sync::CancellationToken;

use crate::session::{CallOrigin, ClientSession, Outlet, run_session_call_as};

/// The notification one replica relays to all when a session's shared state changed; its params
/// name the replica that changed it (`from`), which does not read it back.
pub const SESSION_CHANGED: &str = "notifications/manifold/session_changed";

/// A session's shared state as the store keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedSession {
    pub subscriptions: Vec<String>,
    pub log_level: Option<LogLevel>,
    pub ended: bool,
}

/// One change to a session's shared state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChange {
    Subscribed(String),
    Unsubscribed(String),
    LogLevel(LogLevel),
    Ended,
}

/// The shared store could not read or record a session's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shared store could not {doing} a legacy session's state: {reason}")]
pub struct SharedSessionError {
    pub doing: &'static str,
    pub reason: String,
}

/// Where sessions' shared state is kept (the binary: manifold-store's `legacy_sessions`).
pub trait SharedSessions: std::fmt::Debug + Send + Sync {
    /// The state recorded for `session`; `None` when no replica recorded any.
    fn load<'a>(
        &'a self,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<SharedSession>, SharedSessionError>>;
    /// Records one change of `session`.
    fn record<'a>(
        &'a self,
        session: &'a str,
        change: &'a SessionChange,
    ) -> BoxFuture<'a, Result<(), SharedSessionError>>;
}

/// The change a request made, when its answer was a success and it is one that follows the
/// session.
pub fn change_of(request: &Message, response: &Message) -> Option<SessionChange> {
    if response.kind() != Kind::Result {
        return None;
    }
    let uri = || request.params_str(&["uri"]);
    match request.method()? {
        "resources/subscribe" => uri().map(SessionChange::Subscribed),
        "resources/unsubscribe" => uri().map(SessionChange::Unsubscribed),
        "logging/setLevel" => request
            .params_str(&["level"])
            .and_then(|l| LogLevel::parse(&l))
            .map(SessionChange::LogLevel),
        _ => None,
    }
}

/// Drops what a session's server questions would need: the resubscriptions made here ask none.
struct Nowhere;

impl Outlet for Nowhere {
    fn send(&self, _: &Message) -> bool {
        false
    }
}

static RESUBSCRIPTIONS: AtomicU64 = AtomicU64::new(1);

/// Makes `session` here what the store says it is: its log level, and its subscriptions.
/// Subscriptions the store no longer has are forgotten here at once; each new one is subscribed
/// upstream through the gateway as `caller` (so the rules judge it here too; one they refuse is
/// not kept) in a task of its own, so the request that revived the session never waits on an
/// upstream. Returns `false` when the session has ended.
pub fn adopt(
    gateway: &Gateway,
    session: &Arc<ClientSession>,
    shared: SharedSession,
    caller: Option<Arc<Caller>>,
    toolset: Option<Arc<str>>,
) -> bool {
    if shared.ended {
        return false;
    }
    session.set_log_level(shared.log_level);
    let held = session.subscriptions();
    for gone in held.iter().filter(|u| !shared.subscriptions.contains(u)) {
        session.forget_subscription(gone);
    }
    let new: Vec<String> = shared
        .subscriptions
        .into_iter()
        .filter(|u| !held.contains(u))
        .collect();
    if !new.is_empty() {
        tokio::spawn(subscribe_upstream(
            gateway.clone(),
            Arc::clone(session),
            new,
            caller,
            toolset,
        ));
    }
    true
}

/// Subscribes `session` to each of `uris` through the gateway, as a client request would.
async fn subscribe_upstream(
    gateway: Gateway,
    session: Arc<ClientSession>,
    uris: Vec<String>,
    caller: Option<Arc<Caller>>,
    toolset: Option<Arc<str>>,
) {
    for uri in uris {
        let n = RESUBSCRIPTIONS.fetch_add(1, Ordering::Relaxed);
        let request = Message::request(
            &Id::Str(format!("mf-resubscribe-{n}").into()),
            "resources/subscribe",
            Some(&serde_json::json!({ "uri": uri }).to_string()),
        );
        let origin = CallOrigin {
            caller: caller.clone(),
            toolset: toolset.clone(),
            trace: None,
        };
        let answer = run_session_call_as(
            &gateway,
            &session,
            Arc::new(Nowhere),
            &request,
            &CancellationToken::new(),
            origin,
        )
        .await;
        if !answer.is_some_and(|a| a.kind() == Kind::Result) {
            tracing::debug!(
                "a subscription another replica recorded was not taken up here (refused or failed)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn message(text: &str) -> Message {
        Message::decode_str(text).unwrap()
    }

    #[test]
    fn only_successful_subscriptions_and_levels_are_changes_that_follow_the_session() {
        let ok = message(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        let failed = message(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#);
        let sub = message(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"a://b"}}"#,
        );
        let unsub = message(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/unsubscribe","params":{"uri":"a://b"}}"#,
        );
        let level = message(
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}"#,
        );
        let bad_level = message(
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}}"#,
        );
        let call = message(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#);
        assert_eq!(
            change_of(&sub, &ok),
            Some(SessionChange::Subscribed("a://b".into()))
        );
        assert_eq!(
            change_of(&unsub, &ok),
            Some(SessionChange::Unsubscribed("a://b".into()))
        );
        assert_eq!(
            change_of(&level, &ok),
            Some(SessionChange::LogLevel(LogLevel::Error))
        );
        assert_eq!(change_of(&sub, &failed), None);
        assert_eq!(change_of(&bad_level, &ok), None);
        assert_eq!(change_of(&call, &ok), None);
    }
}
