//! Streamable HTTP's side of the state legacy sessions share between replicas
//! (`crate::shared_sessions`): a session revived here takes in what other replicas recorded for
//! it (or is refused, if it ended); a subscription, log level or DELETE made here is recorded and
//! announced; an announcement from another replica reaches the session live here. Without a
//! relay (one process, a SQLite store) none of this runs.

use std::sync::Arc;

use manifold_wire::Message;

use super::AppState;
use super::edge_facts::EdgeFacts;
use super::legacy_sessions::LiveSession;
use crate::shared_sessions::{self, SessionChange};

/// Takes in what the store holds for `session`, just revived here for a request made as the
/// current caller. `false`: the session ended on another replica (it is ended here too).
pub(crate) async fn revive(
    state: &Arc<AppState>,
    session: &Arc<LiveSession>,
    facts: &EdgeFacts,
) -> bool {
    let Some(relay) = &state.settings.relay else {
        return true;
    };
    let shared = match relay.sessions.load(&session.id).await {
        Ok(Some(shared)) => shared,
        Ok(None) => return true,
        Err(e) => {
            // Calls need none of it: serve the session, with what this replica knows.
            tracing::warn!("{e}; the session is served without what other replicas recorded");
            return true;
        }
    };
    let caller = facts.caller();
    let toolset = facts.toolset();
    let live = shared_sessions::adopt(&state.gateway, &session.core, shared, caller, toolset);
    if !live {
        end_here(state, &session.id);
    }
    live
}

/// Another replica changed `session`'s shared state: take the change in here.
pub(crate) async fn take_in_change(state: Arc<AppState>, session: Arc<LiveSession>) {
    let Some(relay) = &state.settings.relay else {
        return;
    };
    match relay.sessions.load(&session.id).await {
        Ok(Some(shared)) => {
            let (caller, toolset) = session.core.heard_as();
            if !shared_sessions::adopt(&state.gateway, &session.core, shared, caller, toolset) {
                tracing::info!("a legacy session ended on another replica; ended here too");
                end_here(&state, &session.id);
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!("{e}; a change made on another replica is not taken in here"),
    }
}

/// Records what a successful `request` changed about session `sid` for the other replicas,
/// before its answer leaves (so the session's next request, wherever it lands, sees it).
pub(crate) async fn share_outcome(
    state: &AppState,
    sid: &str,
    request: &Message,
    response: &Message,
) {
    let Some(relay) = &state.settings.relay else {
        return;
    };
    if let Some(change) = shared_sessions::change_of(request, response) {
        relay.share(sid, change).await;
    }
}

/// A client ended session `sid` here (DELETE): every replica refuses it from now on.
pub(crate) async fn share_end(state: &AppState, sid: &str) {
    if let Some(relay) = &state.settings.relay {
        relay.share(sid, SessionChange::Ended).await;
    }
}

fn end_here(state: &AppState, sid: &str) {
    state
        .sessions
        .delete(sid, state.settings.limits.max_tombstones);
}
