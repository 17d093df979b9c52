//! Legacy session state sealed into the session id itself.
//!
//! A legacy session is the revision negotiated in `initialize` plus what the client declared,
//! and (with authentication on) a digest of the identity that started it.
//! Sealing that into the id (ChaCha20-Poly1305 under the session key, a fresh random nonce per
//! session) means any replica holding the key, or this gateway after a restart, can serve the
//! session's next request without shared storage; a forged or altered id fails authentication.
//! The id is `<key id>.<base64url(nonce | ciphertext | tag)>`: visible ASCII, as the spec requires.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use manifold_wire::Revision;
use manifold_wire::id::json_string;
use serde_json::value::RawValue;

use crate::error::ServerError;
use crate::limits::MAX_SEALED_STATE_BYTES;
use crate::session_key::{SessionKey, random_bytes};

const NONCE_BYTES: usize = 12;
/// Bound into the authentication tag, so a sealed blob means nothing in another context.
const AAD_PREFIX: &[u8] = b"manifold-session-v1:";

/// What a legacy session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    pub revision: Revision,
    /// Raw JSON object of the client's capabilities.
    pub capabilities: String,
    /// Raw JSON of the client's `clientInfo`, when it gave one.
    pub info: Option<String>,
    /// Seconds since the Unix epoch when the session was minted.
    pub created: u64,
    /// Digest of the identity that started the session (`None` without authentication); only
    /// the same identity may use the session.
    pub owner: Option<String>,
}

/// Why a session id was not accepted (all of them are a 404 to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the session id was minted under another key (id {0:?})")]
    OtherKey(String),
    #[error("the session id is not one Manifold mints")]
    Malformed,
    #[error("the session id failed authentication (altered, or sealed with another key)")]
    Forged,
    #[error("the session expired")]
    Expired,
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn aad(key: &SessionKey) -> Vec<u8> {
    let mut aad = AAD_PREFIX.to_vec();
    aad.extend_from_slice(key.id().as_bytes());
    aad
}

fn encode(state: &SessionState) -> String {
    let owner = state
        .owner
        .as_deref()
        .map(|o| format!(",\"o\":{}", json_string(o)))
        .unwrap_or_default();
    format!(
        "{{\"r\":\"{}\",\"c\":{},\"i\":{},\"t\":{}{owner}}}",
        state.revision,
        state.capabilities,
        state.info.as_deref().unwrap_or("null"),
        state.created
    )
}

/// The capabilities with only their top-level keys (each `{}`), for clients whose declaration
/// does not fit in an id.
fn top_level_only(capabilities: &str) -> String {
    let keys: Vec<String> = serde_json::from_str::<HashMap<String, Box<RawValue>>>(capabilities)
        .map(|m| {
            let mut keys: Vec<String> = m.into_keys().collect();
            keys.sort();
            keys
        })
        .unwrap_or_default();
    let members: Vec<String> = keys
        .iter()
        .map(|k| format!("{}:{{}}", json_string(k)))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// Seals a state into a session id. State larger than [`MAX_SEALED_STATE_BYTES`] is reduced
/// (capabilities to their top-level keys, then client info to nothing) so the id stays short.
pub fn seal(key: &SessionKey, state: &SessionState) -> Result<String, ServerError> {
    let mut plain = encode(state);
    if plain.len() > MAX_SEALED_STATE_BYTES {
        let mut reduced = state.clone();
        reduced.capabilities = top_level_only(&state.capabilities);
        plain = encode(&reduced);
        if plain.len() > MAX_SEALED_STATE_BYTES {
            reduced.info = None;
            plain = encode(&reduced);
        }
        tracing::warn!(
            bytes = encode(state).len(),
            "a client's capabilities and info are too large to seal whole; sub-capabilities are dropped from its session"
        );
    }
    let nonce_bytes = random_bytes::<NONCE_BYTES>()?;
    let cipher = ChaCha20Poly1305::new(key.bytes().into());
    let nonce = Nonce::from(nonce_bytes);
    let sealed = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: plain.as_bytes(),
                aad: &aad(key),
            },
        )
        .map_err(|_| ServerError::Random("the AEAD refused to seal".to_owned()))?;
    let mut blob = nonce_bytes.to_vec();
    blob.extend_from_slice(&sealed);
    Ok(format!(
        "{}.{}",
        key.id(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(blob)
    ))
}

/// Opens a session id sealed with `key`, refusing ids older than `lifetime`.
pub fn open(key: &SessionKey, id: &str, lifetime: Duration) -> Result<SessionState, OpenError> {
    let (kid, body) = id.split_once('.').ok_or(OpenError::Malformed)?;
    if kid != key.id() {
        return Err(OpenError::OtherKey(kid.chars().take(16).collect()));
    }
    let blob = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| OpenError::Malformed)?;
    if blob.len() <= NONCE_BYTES {
        return Err(OpenError::Malformed);
    }
    let (nonce_bytes, sealed) = blob.split_at(NONCE_BYTES);
    let nonce_array: [u8; NONCE_BYTES] =
        nonce_bytes.try_into().map_err(|_| OpenError::Malformed)?;
    let cipher = ChaCha20Poly1305::new(key.bytes().into());
    let plain = cipher
        .decrypt(
            &Nonce::from(nonce_array),
            Payload {
                msg: sealed,
                aad: &aad(key),
            },
        )
        .map_err(|_| OpenError::Forged)?;
    let fields: HashMap<String, Box<RawValue>> =
        serde_json::from_slice(&plain).map_err(|_| OpenError::Malformed)?;
    let text = |k: &str| fields.get(k).map(|v| v.get().to_owned());
    let revision = text("r")
        .and_then(|r| serde_json::from_str::<String>(&r).ok())
        .and_then(|r| r.parse::<Revision>().ok())
        .ok_or(OpenError::Malformed)?;
    let created = text("t")
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or(OpenError::Malformed)?;
    if now_secs().saturating_sub(created) > lifetime.as_secs() {
        return Err(OpenError::Expired);
    }
    Ok(SessionState {
        revision,
        capabilities: text("c").unwrap_or_else(|| "{}".to_owned()),
        info: text("i").filter(|i| i != "null"),
        created,
        owner: text("o").and_then(|o| serde_json::from_str::<String>(&o).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> SessionState {
        SessionState {
            revision: Revision::V2025_06_18,
            capabilities: r#"{"elicitation":{"form":{}},"roots":{"listChanged":true}}"#.to_owned(),
            info: Some(r#"{"name":"c","version":"1"}"#.to_owned()),
            created: now_secs(),
            owner: None,
        }
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_sealed_id_opens_with_the_same_key_to_the_same_state() {
        let key = SessionKey::from_bytes(&[1; 32]).unwrap();
        let id = seal(&key, &state()).unwrap();
        assert!(id.starts_with("k1."));
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert_eq!(open(&key, &id, DAY).unwrap(), state());
        assert_ne!(
            id,
            seal(&key, &state()).unwrap(),
            "every id has its own nonce"
        );
    }

    #[test]
    fn another_key_tampering_and_age_are_refused() {
        let key = SessionKey::from_bytes(&[1; 32]).unwrap();
        let other = SessionKey::from_bytes(&[2; 32]).unwrap();
        let id = seal(&key, &state()).unwrap();
        assert_eq!(open(&other, &id, DAY), Err(OpenError::Forged));
        let renamed = other.clone().with_id("k9").unwrap();
        assert!(matches!(
            open(&renamed, &id, DAY),
            Err(OpenError::OtherKey(_))
        ));
        let mut bytes = id.clone().into_bytes();
        let last = bytes.len() - 3;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert_eq!(open(&key, &tampered, DAY), Err(OpenError::Forged));
        assert_eq!(open(&key, "k1.!!!", DAY), Err(OpenError::Malformed));
        let mut old = state();
        old.created -= 2 * 86_400;
        let id = seal(&key, &old).unwrap();
        assert_eq!(open(&key, &id, DAY), Err(OpenError::Expired));
    }

    #[test]
    fn the_owner_is_sealed_in_and_read_back() {
        let key = SessionKey::from_bytes(&[3; 32]).unwrap();
        let owned = SessionState {
            owner: Some("0123456789abcdef0123456789abcdef".to_owned()),
            ..state()
        };
        let id = seal(&key, &owned).unwrap();
        assert_eq!(open(&key, &id, DAY).unwrap(), owned);
        let unowned = seal(&key, &state()).unwrap();
        assert_eq!(open(&key, &unowned, DAY).unwrap().owner, None);
    }

    #[test]
    fn oversized_capabilities_are_reduced_to_their_top_level_keys() {
        let key = SessionKey::generate().unwrap();
        let mut big = state();
        big.capabilities = format!(
            r#"{{"sampling":{{"x":"{}"}},"elicitation":{{}}}}"#,
            "y".repeat(4000)
        );
        let id = seal(&key, &big).unwrap();
        let back = open(&key, &id, DAY).unwrap();
        assert_eq!(back.capabilities, r#"{"elicitation":{},"sampling":{}}"#);
        assert_eq!(back.info, big.info);
    }
}
