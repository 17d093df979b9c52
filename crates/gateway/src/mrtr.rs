//! Server requests across eras: a legacy upstream's elicitation or sampling reaches a modern client
//! as an `input_required` result, and a modern upstream's `input_required` reaches a legacy session
//! as server-initiated requests.
//!
//! Modern clients cannot receive requests, so when an upstream asks a question during a modern
//! client's call, the call is held: the client gets `input_required` with a sealed `requestState`
//! naming the held call, and its retry (new id, `inputResponses`, the same `requestState`) answers
//! the upstream's question and resumes waiting for the result. `requestState` is attacker
//! controlled, so it carries an HMAC under a per-process key; held calls expire.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use manifold_upstream::Call;
use manifold_wire::{ErrorCode, ErrorObject, Message};
use sha2::Sha256;
use tokio::sync::{mpsc, oneshot};

use crate::context::DownstreamPeer;

/// How long a held call waits for the client's retry.
pub const HELD_CALL_TTL: Duration = Duration::from_secs(300);
/// Held calls kept at most (the oldest is dropped, and its upstream call cancelled).
pub const MAX_HELD_CALLS: usize = 10_000;
/// The key every input request of a held call is answered under (one question at a time).
pub const INPUT_KEY: &str = "manifold-input";

/// A question an upstream asked during a modern client's call.
pub struct InputNeeded {
    pub method: String,
    pub params: Option<String>,
    pub answer: oneshot::Sender<Result<String, ErrorObject>>,
}

/// The peer a modern client's upstream calls see: notifications go to the client of the current
/// round (a retry brings a new one); questions are handed to the forwarding loop, which turns them
/// into `input_required`.
pub struct QuestionCatcher {
    client: Mutex<Arc<dyn DownstreamPeer>>,
    questions: mpsc::UnboundedSender<InputNeeded>,
}

impl QuestionCatcher {
    pub fn new(
        client: Arc<dyn DownstreamPeer>,
    ) -> (Arc<QuestionCatcher>, mpsc::UnboundedReceiver<InputNeeded>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(QuestionCatcher {
                client: Mutex::new(client),
                questions: tx,
            }),
            rx,
        )
    }

    /// Points notifications at the client of the retry that resumed the call.
    pub fn rebind(&self, client: Arc<dyn DownstreamPeer>) {
        *self.client.lock().unwrap_or_else(|p| p.into_inner()) = client;
    }
}

impl DownstreamPeer for QuestionCatcher {
    fn notify(&self, message: Message) {
        let client = Arc::clone(&self.client.lock().unwrap_or_else(|p| p.into_inner()));
        client.notify(message);
    }

    fn request(
        &self,
        method: &str,
        params: Option<String>,
    ) -> Option<BoxFuture<'static, Result<String, ErrorObject>>> {
        let (tx, rx) = oneshot::channel();
        let asked = self.questions.send(InputNeeded {
            method: method.to_owned(),
            params,
            answer: tx,
        });
        if asked.is_err() {
            return None;
        }
        Some(Box::pin(async move {
            rx.await.unwrap_or_else(|_| {
                Err(ErrorObject::new(
                    ErrorCode::RequestCancelled,
                    "the client did not come back with an answer in time",
                ))
            })
        }))
    }
}

/// A call waiting for the client's answer.
pub struct HeldCall {
    pub server: String,
    pub call: Call,
    pub answer: oneshot::Sender<Result<String, ErrorObject>>,
    pub catcher: Arc<QuestionCatcher>,
    pub questions: mpsc::UnboundedReceiver<InputNeeded>,
    held_at: Instant,
}

impl HeldCall {
    pub fn new(
        server: String,
        call: Call,
        answer: oneshot::Sender<Result<String, ErrorObject>>,
        catcher: Arc<QuestionCatcher>,
        questions: mpsc::UnboundedReceiver<InputNeeded>,
    ) -> HeldCall {
        HeldCall {
            server,
            call,
            answer,
            catcher,
            questions,
            held_at: Instant::now(),
        }
    }
}

/// Held calls by handle, and the key that seals handles into `requestState`.
pub struct HeldCalls {
    key: [u8; 32],
    calls: Mutex<HashMap<u128, HeldCall>>,
}

/// Why a `requestState` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("the requestState is not one Manifold issued (or it was altered)")]
    Forged,
    #[error(
        "the requestState names a call that expired or was already answered; call the tool again"
    )]
    Gone,
}

impl HeldCalls {
    pub fn new() -> HeldCalls {
        let mut key = [0u8; 32];
        // Without the OS's randomness a fixed key would make requestState forgeable: fall back to
        // the clock and the address space, which at least differ per process.
        if getrandom::fill(&mut key).is_err() {
            let seed = format!("{:?}{:p}", Instant::now(), &key);
            key.copy_from_slice(&<Sha256 as sha2::Digest>::digest(seed.as_bytes()));
        }
        HeldCalls {
            key,
            calls: Mutex::new(HashMap::new()),
        }
    }

    fn mac(&self, handle: u128) -> Vec<u8> {
        // HMAC accepts keys of any length, so this cannot fail.
        match <Hmac<Sha256> as Mac>::new_from_slice(&self.key) {
            Ok(mut m) => {
                m.update(&handle.to_be_bytes());
                m.finalize().into_bytes().to_vec()
            }
            Err(_) => Vec::new(),
        }
    }

    /// Holds a call and returns the sealed `requestState` naming it.
    pub fn hold(&self, held: HeldCall) -> String {
        let mut raw = [0u8; 16];
        let handle = match getrandom::fill(&mut raw) {
            Ok(()) => u128::from_be_bytes(raw),
            Err(_) => Instant::now().elapsed().as_nanos() ^ u128::from(std::process::id()),
        };
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.retain(|_, c| c.held_at.elapsed() < HELD_CALL_TTL);
        if calls.len() >= MAX_HELD_CALLS
            && let Some(oldest) = calls.iter().min_by_key(|(_, c)| c.held_at).map(|(h, _)| *h)
        {
            calls.remove(&oldest);
        }
        calls.insert(handle, held);
        let mut token = handle.to_be_bytes().to_vec();
        token.extend(self.mac(handle));
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token)
    }

    /// Whether Manifold sealed `state` for a held call (the call it names passed every stage
    /// when it first went out; a retry resumes that call and no other).
    pub fn issued(&self, state: &str) -> bool {
        let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(state) else {
            return false;
        };
        let Some((head, mac)) = bytes.split_at_checked(16) else {
            return false;
        };
        let Ok(mut verifier) = <Hmac<Sha256> as Mac>::new_from_slice(&self.key) else {
            return false;
        };
        verifier.update(head);
        verifier.verify_slice(mac).is_ok()
    }

    /// Takes the held call a `requestState` names.
    pub fn take(&self, state: &str) -> Result<HeldCall, StateError> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(state)
            .map_err(|_| StateError::Forged)?;
        let (head, mac) = bytes.split_at_checked(16).ok_or(StateError::Forged)?;
        let handle = u128::from_be_bytes(head.try_into().map_err(|_| StateError::Forged)?);
        let mut verifier =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.key).map_err(|_| StateError::Forged)?;
        verifier.update(head);
        verifier.verify_slice(mac).map_err(|_| StateError::Forged)?;
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        match calls.remove(&handle) {
            Some(c) if c.held_at.elapsed() < HELD_CALL_TTL => Ok(c),
            _ => Err(StateError::Gone),
        }
    }
}

impl Default for HeldCalls {
    fn default() -> Self {
        HeldCalls::new()
    }
}

/// A modern upstream's question as a legacy client expects it: a URL-mode elicitation of the
/// 2026-07-28 revision has no `elicitationId` (the server correlates through `requestState`), but
/// the 2025-11-25 revision requires one, so Manifold mints it.
pub fn as_legacy_question(method: &str, params: Option<String>) -> Option<String> {
    let raw = params.as_deref()?;
    let is_url = method == "elicitation/create"
        && manifold_wire::patch::get(raw, &["mode"])
            .ok()
            .flatten()
            .is_some_and(|m| m.trim() == "\"url\"");
    if !is_url {
        return params;
    }
    let mut id = [0u8; 16];
    if getrandom::fill(&mut id).is_err() {
        id = Instant::now().elapsed().as_nanos().to_be_bytes();
    }
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id);
    match manifold_wire::patch::set_missing(
        raw,
        &[],
        &[("elicitationId", &manifold_wire::id::json_string(&id))],
    ) {
        Ok(Some(with_id)) => Some(with_id),
        _ => params,
    }
}

/// The `input_required` result asking the client one question.
pub fn input_required(method: &str, params: Option<&str>, state: &str) -> String {
    format!(
        r#"{{"resultType":"input_required","inputRequests":{{"{INPUT_KEY}":{{"method":{},"params":{}}}}},"requestState":{}}}"#,
        manifold_wire::id::json_string(method),
        params.unwrap_or("{}"),
        manifold_wire::id::json_string(state)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_forged_or_altered_state_is_refused() {
        let held = HeldCalls::new();
        assert_eq!(held.take("not base64 !!").err(), Some(StateError::Forged));
        let other = HeldCalls::new();
        // A state sealed by another process (another key) is not ours.
        let mut token = 7u128.to_be_bytes().to_vec();
        token.extend(other.mac(7));
        let foreign = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token);
        assert_eq!(held.take(&foreign).err(), Some(StateError::Forged));
        let mut token = 7u128.to_be_bytes().to_vec();
        token.extend(held.mac(7));
        let ours_but_unknown = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token);
        assert_eq!(held.take(&ours_but_unknown).err(), Some(StateError::Gone));
    }

    #[test]
    fn a_modern_url_elicitation_gets_the_elicitation_id_a_legacy_client_needs() {
        let url = r#"{"mode":"url","message":"m","url":"https://e.example/"}"#;
        let legacy = as_legacy_question("elicitation/create", Some(url.to_owned())).unwrap();
        let v: serde_json::Value = serde_json::from_str(&legacy).unwrap();
        assert!(v["elicitationId"].as_str().is_some_and(|id| !id.is_empty()));
        assert_eq!(v["url"], "https://e.example/");
        let form = r#"{"message":"m","requestedSchema":{}}"#;
        assert_eq!(
            as_legacy_question("elicitation/create", Some(form.to_owned())).as_deref(),
            Some(form)
        );
        let has_id = r#"{"mode":"url","elicitationId":"x","url":"u","message":"m"}"#;
        assert_eq!(
            as_legacy_question("elicitation/create", Some(has_id.to_owned())).as_deref(),
            Some(has_id)
        );
    }

    #[test]
    fn input_required_names_the_question() {
        let r = input_required("elicitation/create", Some(r#"{"message":"m"}"#), "s");
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        assert_eq!(v["resultType"], "input_required");
        assert_eq!(
            v["inputRequests"][INPUT_KEY]["method"],
            "elicitation/create"
        );
        assert_eq!(v["requestState"], "s");
    }
}
