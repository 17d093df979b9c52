//! What other replicas relay to this one, delivered: a legacy client's answer or cancellation to
//! the Streamable HTTP session holding the call, the news that a session's shared state changed
//! (taken in by the session live here), and an HTTP+SSE post to the session whose stream is here.
//! A message for a session this replica does not hold is dropped.

use std::sync::{Arc, Weak};

use manifold_wire::Message;
use tokio::sync::mpsc;

use super::AppState;
use crate::relay::Relayed;
use crate::shared_sessions::SESSION_CHANGED;

/// Delivers relayed messages to the sessions live here until the inbox closes; a message for a
/// session this replica does not hold is dropped (its call is not here).
pub(crate) async fn deliver(mut inbox: mpsc::Receiver<Relayed>, state: Weak<AppState>) {
    while let Some(relayed) = inbox.recv().await {
        let Some(state) = state.upgrade() else {
            return;
        };
        if super::sse_transport::take_relayed(&state, &relayed.session, &relayed.message) {
            continue;
        }
        let Some(session) = state.sessions.get(&relayed.session) else {
            tracing::debug!("a relayed message names a session not live here; dropped");
            continue;
        };
        match Message::decode_str(&relayed.message) {
            Ok(message) if message.method() == Some(SESSION_CHANGED) => {
                let elsewhere = state
                    .settings
                    .relay
                    .as_ref()
                    .is_some_and(|r| r.is_change_from_elsewhere(&message));
                if elsewhere {
                    tokio::spawn(super::shared_state::take_in_change(
                        Arc::clone(&state),
                        session,
                    ));
                }
            }
            Ok(message) => {
                if session.core.take_unless_request(message).is_some() {
                    tracing::debug!("a relayed request was dropped: only answers are relayed");
                }
            }
            Err(e) => tracing::debug!(error = %e, "a relayed message did not decode; dropped"),
        }
    }
}
