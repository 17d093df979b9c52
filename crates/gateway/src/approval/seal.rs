//! The `requestState` of an approval asked inline of a modern client (MRTR): the approval's id
//! under an HMAC, so the client's retry names the question it answers and nothing else. The state
//! is attacker controlled; the MAC proves Manifold issued it, and the ledger row it names (bound to
//! caller, tool, arguments and definition, single use) decides the rest.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What every approval `requestState` starts with, so it is told apart from an upstream's own
/// state and from a held call's (`mrtr.rs`).
pub const STATE_PREFIX: &str = "mfa1.";
/// Longest approval id a state may carry.
const MAX_SEALED_ID: usize = 64;

/// Seals and opens approval states under one key.
#[derive(Clone)]
pub struct StateSeal {
    key: [u8; 32],
}

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSeal(<key>)")
    }
}

impl StateSeal {
    pub fn new(key: [u8; 32]) -> StateSeal {
        StateSeal { key }
    }

    fn mac(&self) -> Option<Hmac<Sha256>> {
        <Hmac<Sha256> as Mac>::new_from_slice(&self.key).ok()
    }

    /// The `requestState` naming approval `id`.
    pub fn seal(&self, id: &str) -> String {
        let tag = self
            .mac()
            .map(|mut m| {
                m.update(id.as_bytes());
                m.finalize().into_bytes().to_vec()
            })
            .unwrap_or_default();
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("{STATE_PREFIX}{}.{}", engine.encode(id), engine.encode(tag))
    }

    /// The approval id a state names; `None` when Manifold did not issue it (or it was altered).
    pub fn open(&self, state: &str) -> Option<String> {
        let rest = state.strip_prefix(STATE_PREFIX)?;
        let (id, tag) = rest.split_once('.')?;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let id = engine.decode(id).ok()?;
        let tag = engine.decode(tag).ok()?;
        if id.len() > MAX_SEALED_ID {
            return None;
        }
        let mut m = self.mac()?;
        m.update(&id);
        m.verify_slice(&tag).ok()?;
        String::from_utf8(id).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_sealed_id_opens_and_an_altered_or_foreign_state_does_not() {
        let seal = StateSeal::new([7; 32]);
        let state = seal.seal("apr_0123");
        assert!(state.starts_with(STATE_PREFIX));
        assert_eq!(seal.open(&state).as_deref(), Some("apr_0123"));
        let other = StateSeal::new([8; 32]);
        assert_eq!(other.open(&state), None);
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let (_, tag) = state.rsplit_once('.').unwrap();
        let forged = format!("{STATE_PREFIX}{}.{tag}", engine.encode("apr_9999"));
        assert_eq!(seal.open(&forged), None);
        assert_eq!(seal.open("mfa1."), None);
        assert_eq!(seal.open("not-ours"), None);
    }
}
