//! OAuth 2.1 access tokens as a resource server checks them: a JWT signed by the configured
//! issuer with one of the allowed (asymmetric) algorithms, with the gateway as its audience,
//! inside its validity window give or take [`LEEWAY_SECS`].
//!
//! Signature checking is `jsonwebtoken`'s; this module decides which key and which algorithm it
//! may use. The algorithm is checked against the allowlist before any key is looked up, and a
//! key is only ever used with an algorithm of its own family, so `alg: none` and an HMAC
//! "signed" with the issuer's public key never verify.

use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};

use crate::error::{AuthError, SetupError, TokenProblem};
use crate::identity::{Credential, Identity};
use crate::jwks::{JwksCache, KeyLookupError, KeySource, printable};

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY_SECS: u64 = 60;
/// Longest subject kept as an identity's name.
const MAX_SUBJECT_CHARS: usize = 256;
/// Most groups or scopes read from one token.
const MAX_LIST_ITEMS: usize = 256;

/// What tokens must be.
#[derive(Debug, Clone)]
pub struct JwtSettings {
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<Algorithm>,
    pub required_scopes: Vec<String>,
    pub groups_claim: String,
}

/// Checks access tokens of one issuer.
#[derive(Debug)]
pub struct JwtValidator {
    settings: JwtSettings,
    keys: JwksCache,
}

/// Parses configured algorithm names, refusing any that is not asymmetric.
pub fn parse_algorithms(names: &[String]) -> Result<Vec<Algorithm>, SetupError> {
    names
        .iter()
        .map(|n| match n.parse::<Algorithm>() {
            Ok(a) if a.family() != jsonwebtoken::AlgorithmFamily::Hmac => Ok(a),
            _ => Err(SetupError::BadAlgorithm(n.clone())),
        })
        .collect()
}

fn algorithm_name(a: Algorithm) -> String {
    format!("{a:?}")
}

/// The header's `alg`, read before anything else so the refusal can say what it was.
fn stated_algorithm(token: &str) -> Result<String, TokenProblem> {
    let header = token.split('.').next().unwrap_or_default();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .map_err(|_| TokenProblem::Malformed("its header is not base64url".to_owned()))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| TokenProblem::Malformed("its header is not JSON".to_owned()))?;
    value
        .get("alg")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| TokenProblem::Malformed("its header has no alg".to_owned()))
}

/// Strings from a claim that is a list of strings or one space-separated string.
fn strings(value: Option<&serde_json::Value>, split_spaces: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |s: &str| {
        let s = s.trim();
        if !s.is_empty() && out.len() < MAX_LIST_ITEMS && !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    match value {
        Some(serde_json::Value::String(s)) if split_spaces => s.split(' ').for_each(&mut add),
        Some(serde_json::Value::String(s)) => add(s),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(serde_json::Value::as_str)
            .for_each(&mut add),
        _ => {}
    }
    out
}

impl JwtValidator {
    pub fn new(settings: JwtSettings, source: KeySource) -> Result<JwtValidator, SetupError> {
        Ok(JwtValidator {
            settings,
            keys: JwksCache::new(source)?,
        })
    }

    pub fn settings(&self) -> &JwtSettings {
        &self.settings
    }

    /// How many times the issuer's keys were fetched.
    pub fn key_fetches(&self) -> u64 {
        self.keys.fetch_count()
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.set_issuer(&[&self.settings.issuer]);
        v.set_audience(&[&self.settings.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.leeway = LEEWAY_SECS;
        v.validate_exp = true;
        v.validate_nbf = true;
        v
    }

    fn problem(&self, kind: &ErrorKind) -> TokenProblem {
        match kind {
            ErrorKind::InvalidSignature => TokenProblem::BadSignature,
            ErrorKind::ExpiredSignature => TokenProblem::Expired,
            ErrorKind::ImmatureSignature => TokenProblem::NotYetValid,
            ErrorKind::InvalidIssuer => TokenProblem::WrongIssuer(self.settings.issuer.clone()),
            ErrorKind::InvalidAudience => {
                TokenProblem::WrongAudience(self.settings.audience.clone())
            }
            ErrorKind::MissingRequiredClaim(c) => TokenProblem::MissingClaim(c.clone()),
            ErrorKind::InvalidClaimFormat(c) => TokenProblem::BadClaim(c.clone()),
            ErrorKind::Base64(_) => TokenProblem::Malformed("a part is not base64url".to_owned()),
            ErrorKind::Json(_) | ErrorKind::Utf8(_) => {
                TokenProblem::Malformed("a part is not JSON".to_owned())
            }
            ErrorKind::InvalidAlgorithm => TokenProblem::BadSignature,
            _ => TokenProblem::Malformed("it could not be decoded".to_owned()),
        }
    }

    /// Checks an access token; the identity it proves, or why not.
    pub async fn validate(&self, token: &str) -> Result<Identity, AuthError> {
        let stated = stated_algorithm(token)?;
        if stated.eq_ignore_ascii_case("none") {
            return Err(TokenProblem::Unsigned.into());
        }
        let allowed = || {
            self.settings
                .algorithms
                .iter()
                .map(|a| algorithm_name(*a))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let alg = match stated.parse::<Algorithm>() {
            Ok(a) if self.settings.algorithms.contains(&a) => a,
            _ => {
                return Err(TokenProblem::AlgorithmNotAllowed {
                    alg: printable(&stated),
                    allowed: allowed(),
                }
                .into());
            }
        };
        let header = jsonwebtoken::decode_header(token).map_err(|e| self.problem(e.kind()))?;
        let candidates = self
            .keys
            .keys_for(header.kid.as_deref(), alg)
            .await
            .map_err(|e| match e {
                KeyLookupError::Refused(p) => AuthError::InvalidToken(p),
                KeyLookupError::Unavailable(why) => AuthError::Unavailable(format!(
                    "Manifold could not fetch the issuer's signing keys ({why}); retry shortly"
                )),
            })?;
        let validation = self.validation(alg);
        let mut last = TokenProblem::BadSignature;
        for key in candidates {
            match jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                token,
                &key,
                &validation,
            ) {
                Ok(data) => return self.identity(&data.claims),
                Err(e) => {
                    let problem = self.problem(e.kind());
                    // Claims are only checked once a signature verified: report that at once.
                    if problem != TokenProblem::BadSignature {
                        return Err(problem.into());
                    }
                    last = problem;
                }
            }
        }
        Err(last.into())
    }

    fn identity(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Identity, AuthError> {
        let sub = claims
            .get("sub")
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| TokenProblem::BadClaim("sub".to_owned()))?;
        let mut scopes = strings(claims.get("scope"), true);
        for s in strings(claims.get("scp"), true) {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
        let identity = Identity {
            name: sub.chars().take(MAX_SUBJECT_CHARS).collect(),
            groups: strings(claims.get(&self.settings.groups_claim), false),
            scopes,
            credential: Credential::AccessToken {
                issuer: self.settings.issuer.clone(),
            },
        };
        let missing = identity.missing_scopes(&self.settings.required_scopes);
        if !missing.is_empty() {
            return Err(AuthError::InsufficientScope { missing });
        }
        Ok(identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_groups_read_from_strings_and_lists() {
        let v = serde_json::json!("a b  a c");
        assert_eq!(strings(Some(&v), true), ["a", "b", "c"]);
        let v = serde_json::json!(["x", 1, "y", "x"]);
        assert_eq!(strings(Some(&v), false), ["x", "y"]);
        let v = serde_json::json!("one group");
        assert_eq!(strings(Some(&v), false), ["one group"]);
        assert!(strings(None, true).is_empty());
    }

    #[test]
    fn the_stated_algorithm_is_read_before_any_key() {
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
        assert_eq!(stated_algorithm(&format!("{header}.e30.")).unwrap(), "none");
        assert_eq!(
            stated_algorithm("!!.e30.x").unwrap_err(),
            TokenProblem::Malformed("its header is not base64url".to_owned())
        );
        let no_alg = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT"}"#);
        assert_eq!(
            stated_algorithm(&format!("{no_alg}.e30.x")).unwrap_err(),
            TokenProblem::Malformed("its header has no alg".to_owned())
        );
    }

    #[test]
    fn shared_secret_algorithms_cannot_be_configured() {
        assert!(parse_algorithms(&["RS256".into(), "EdDSA".into()]).is_ok());
        assert!(matches!(
            parse_algorithms(&["HS256".into()]),
            Err(SetupError::BadAlgorithm(a)) if a == "HS256"
        ));
        assert!(parse_algorithms(&["none".into()]).is_err());
    }
}
