//! Who a request was authenticated as, in the one shape every check downstream reads (policy,
//! logs, session binding), whichever credential proved it.

use sha2::{Digest, Sha256};

/// How an identity was proven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// One of Manifold's API keys (the key's id, not its secret).
    ApiKey { id: String },
    /// An OAuth access token from this issuer.
    AccessToken { issuer: String },
}

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The API key's name, or the token's subject (`sub`).
    pub name: String,
    /// Groups from the key's record or the token's groups claim.
    pub groups: Vec<String>,
    /// Scopes granted to the key, or the token's `scope` / `scp`.
    pub scopes: Vec<String>,
    pub credential: Credential,
}

/// Bytes of the principal digest kept in a binding (128 bits: a collision is out of reach).
const BINDING_BYTES: usize = 16;

impl Identity {
    /// The principal: kind plus name, so an API key named like a token's subject is still
    /// someone else. Keys with the same name are one principal (a re-created key keeps its
    /// sessions); tokens are one principal per issuer and subject.
    pub fn principal(&self) -> String {
        match &self.credential {
            Credential::ApiKey { .. } => format!("key:{}", self.name),
            Credential::AccessToken { issuer } => format!("token:{issuer}#{}", self.name),
        }
    }

    /// A short digest of the principal, sealed into sessions so that only the same principal
    /// can use them again. Fixed length whatever the name's, and no name inside a session id.
    pub fn binding(&self) -> String {
        let digest = Sha256::digest(format!("manifold-binding-v1:{}", self.principal()));
        digest
            .iter()
            .take(BINDING_BYTES)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether every one of `required` was granted; the missing ones otherwise.
    pub fn missing_scopes(&self, required: &[String]) -> Vec<String> {
        required
            .iter()
            .filter(|r| !self.scopes.contains(r))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Identity {
        Identity {
            name: name.to_owned(),
            groups: Vec::new(),
            scopes: Vec::new(),
            credential: Credential::ApiKey { id: "a".into() },
        }
    }

    #[test]
    fn bindings_tell_principals_apart_and_ignore_the_key_id() {
        let token = Identity {
            credential: Credential::AccessToken {
                issuer: "https://i".into(),
            },
            ..key("alice")
        };
        assert_ne!(key("alice").binding(), token.binding());
        assert_ne!(key("alice").binding(), key("bob").binding());
        let recreated = Identity {
            credential: Credential::ApiKey { id: "b".into() },
            ..key("alice")
        };
        assert_eq!(key("alice").binding(), recreated.binding());
        assert_eq!(key("alice").binding().len(), 32);
    }

    #[test]
    fn missing_scopes_are_listed_in_the_required_order() {
        let id = Identity {
            scopes: vec!["b".into()],
            ..key("x")
        };
        assert_eq!(
            id.missing_scopes(&["a".into(), "b".into(), "c".into()]),
            ["a", "c"]
        );
    }
}
