//! PKCE (RFC 7636) with the S256 method, and the random values an authorization request needs.
//!
//! The verifier is 32 random bytes from the operating system's generator, Base64url-encoded
//! (43 characters, within RFC 7636's 43..=128 of unreserved characters); the challenge is the
//! Base64url SHA-256 of the verifier.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};

use super::error::AuthError;

/// The only challenge method Manifold sends.
pub const METHOD: &str = "S256";

/// A verifier and the challenge derived from it.
#[derive(Clone, PartialEq, Eq)]
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce")
            .field("verifier", &"<redacted>")
            .field("challenge", &self.challenge)
            .finish()
    }
}

impl Pkce {
    /// A fresh verifier and its S256 challenge.
    pub fn generate() -> Result<Pkce, AuthError> {
        let verifier = random_string(32)?;
        Ok(Pkce {
            challenge: s256(&verifier),
            verifier,
        })
    }
}

/// `BASE64URL(SHA256(ASCII(verifier)))`.
pub fn s256(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// `bytes` random bytes, Base64url-encoded: for PKCE verifiers and `state` values.
pub fn random_string(bytes: usize) -> Result<String, AuthError> {
    let mut buf = vec![0u8; bytes];
    SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| AuthError::Unsupported {
            detail: "the operating system's random number generator failed".to_owned(),
        })?;
    Ok(URL_SAFE_NO_PAD.encode(&buf))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn s256_matches_the_rfc_7636_example() {
        // RFC 7636, Appendix B.
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn verifiers_are_43_unreserved_characters_and_differ() {
        let a = Pkce::generate().unwrap();
        let b = Pkce::generate().unwrap();
        assert_eq!(a.verifier.len(), 43);
        assert!(
            a.verifier
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c)),
            "{}",
            a.verifier
        );
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.challenge, s256(&a.verifier));
        assert!(!format!("{a:?}").contains(&a.verifier));
    }
}
