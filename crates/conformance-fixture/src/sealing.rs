//! Sealing of MRTR `requestState`.
//!
//! In the modern era the server keeps no state between the rounds of a multi round-trip request:
//! whatever it learned so far travels to the client as `requestState` and comes back verbatim. The
//! client (or anyone on the path) controls those bytes, so they are authenticated with
//! HMAC-SHA256 under a key drawn from the system RNG when the process starts; a state that was
//! changed, minted by another process, bound to another request, or too old is refused.
//!
//! Wire form: `base64url(payload JSON) "." base64url(tag)`, where the tag covers the first part.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Map, Value, json};

use crate::error::FixtureError;

/// How long a sealed state stays acceptable (ten minutes).
pub const STATE_LIFETIME_MS: u64 = 10 * 60 * 1000;

/// The largest `requestState` accepted for unsealing (64 KiB).
pub const MAX_SEALED_LEN: usize = 64 * 1024;

/// Why a presented `requestState` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsealError {
    #[error("requestState is larger than {MAX_SEALED_LEN} bytes")]
    TooLarge,
    #[error("requestState is not in the form this server mints (payload.tag)")]
    Malformed,
    #[error("requestState failed its integrity check (it was altered or minted elsewhere)")]
    BadTag,
    #[error("requestState was minted for {minted_for}, not for {used_for}")]
    WrongRequest {
        minted_for: String,
        used_for: String,
    },
    #[error("requestState expired; start the request again without it")]
    Expired,
}

/// Seals and unseals request state with one per-process key.
pub struct Sealer {
    key: hmac::Key,
    rng: SystemRandom,
}

impl Sealer {
    /// A sealer with a fresh random key.
    pub fn new() -> Result<Sealer, FixtureError> {
        let rng = SystemRandom::new();
        let key =
            hmac::Key::generate(hmac::HMAC_SHA256, &rng).map_err(|_| FixtureError::NoRandomKey)?;
        Ok(Sealer { key, rng })
    }

    /// Seals `state` for the request named `binding` (e.g. `tools/call:test_x`).
    pub fn seal(&self, binding: &str, state: &Value) -> String {
        self.seal_minted_at(binding, state, now_ms())
    }

    fn seal_minted_at(&self, binding: &str, state: &Value, minted_at: u64) -> String {
        let mut nonce = [0u8; 12];
        // A failed fill leaves zeros: the nonce only makes equal states look different.
        let _ = self.rng.fill(&mut nonce);
        let payload = json!({
            "b": binding,
            "t": minted_at,
            "n": URL_SAFE_NO_PAD.encode(nonce),
            "s": state,
        });
        let body = URL_SAFE_NO_PAD.encode(payload.to_string());
        let tag = hmac::sign(&self.key, body.as_bytes());
        format!("{body}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// Verifies `sealed` and returns the state it carries, if it was minted here for `binding`.
    pub fn unseal(&self, binding: &str, sealed: &str) -> Result<Value, UnsealError> {
        if sealed.len() > MAX_SEALED_LEN {
            return Err(UnsealError::TooLarge);
        }
        let (body, tag) = sealed.split_once('.').ok_or(UnsealError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| UnsealError::BadTag)?;
        hmac::verify(&self.key, body.as_bytes(), &tag).map_err(|_| UnsealError::BadTag)?;
        let payload = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| UnsealError::Malformed)?;
        let mut payload: Map<String, Value> =
            serde_json::from_slice(&payload).map_err(|_| UnsealError::Malformed)?;
        let minted_for = payload
            .get("b")
            .and_then(Value::as_str)
            .ok_or(UnsealError::Malformed)?;
        if minted_for != binding {
            return Err(UnsealError::WrongRequest {
                minted_for: minted_for.to_owned(),
                used_for: binding.to_owned(),
            });
        }
        let minted_at = payload
            .get("t")
            .and_then(Value::as_u64)
            .ok_or(UnsealError::Malformed)?;
        if now_ms().saturating_sub(minted_at) > STATE_LIFETIME_MS {
            return Err(UnsealError::Expired);
        }
        Ok(payload.remove("s").unwrap_or(Value::Null))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_sealed_state_round_trips_for_its_binding_only() {
        let sealer = Sealer::new().unwrap();
        let state = json!({"answers": {"step1": {"action": "accept"}}});
        let sealed = sealer.seal("tools/call:t", &state);
        assert_eq!(sealer.unseal("tools/call:t", &sealed), Ok(state));
        assert_eq!(
            sealer.unseal("tools/call:other", &sealed),
            Err(UnsealError::WrongRequest {
                minted_for: "tools/call:t".into(),
                used_for: "tools/call:other".into()
            })
        );
    }

    #[test]
    fn altered_or_foreign_states_are_refused() {
        let sealer = Sealer::new().unwrap();
        let sealed = sealer.seal("b", &json!(1));
        assert_eq!(
            sealer.unseal("b", &format!("{sealed}-TAMPERED")),
            Err(UnsealError::BadTag)
        );
        let (body, tag) = sealed.split_once('.').unwrap();
        let mut forged = body.to_owned();
        forged.insert(0, 'A');
        assert_eq!(
            sealer.unseal("b", &format!("{forged}.{tag}")),
            Err(UnsealError::BadTag)
        );
        let other = Sealer::new().unwrap();
        assert_eq!(other.unseal("b", &sealed), Err(UnsealError::BadTag));
        assert_eq!(sealer.unseal("b", "no-dot"), Err(UnsealError::Malformed));
        assert_eq!(
            sealer.unseal("b", &"x".repeat(MAX_SEALED_LEN + 1)),
            Err(UnsealError::TooLarge)
        );
    }

    #[test]
    fn an_old_state_has_expired() {
        let sealer = Sealer::new().unwrap();
        let minted = now_ms() - STATE_LIFETIME_MS - 1000;
        let sealed = sealer.seal_minted_at("b", &json!(1), minted);
        assert_eq!(sealer.unseal("b", &sealed), Err(UnsealError::Expired));
        let fresh = sealer.seal_minted_at("b", &json!(1), now_ms() - 1000);
        assert_eq!(sealer.unseal("b", &fresh), Ok(json!(1)));
    }

    #[test]
    fn equal_states_seal_differently() {
        let sealer = Sealer::new().unwrap();
        assert_ne!(sealer.seal("b", &json!({})), sealer.seal("b", &json!({})));
    }
}
