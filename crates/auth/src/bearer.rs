//! Reading a bearer credential out of a request, strictly: exactly one `Authorization` header,
//! printable ASCII, bounded, scheme `Bearer` (any case), a token68 value; and never from the URL.
//!
//! Strictness here is what keeps ambiguity out of the checks after it: two headers could be
//! read differently by a proxy and by Manifold, and a token in a URL ends up in access logs.

use crate::error::{AuthError, TokenProblem};

/// Longest `Authorization` header accepted (large JWTs stay well under it).
pub const MAX_AUTHORIZATION_BYTES: usize = 8192;

/// The prefix of Manifold's API keys.
pub const API_KEY_PREFIX: &str = "mfk_";

/// What a bearer token is, judged by its shape alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented<'t> {
    ApiKey(&'t str),
    Jwt(&'t str),
}

/// The bearer token of a request, from all of its `Authorization` header values (raw bytes, as
/// they arrived). `Ok(None)`: no credentials.
pub fn bearer_token(values: &[&[u8]]) -> Result<Option<String>, AuthError> {
    let value = match values {
        [] => return Ok(None),
        [one] => *one,
        more => {
            return Err(AuthError::InvalidRequest(format!(
                "send exactly one Authorization header; this request has {}",
                more.len()
            )));
        }
    };
    if value.len() > MAX_AUTHORIZATION_BYTES {
        return Err(AuthError::InvalidRequest(format!(
            "the Authorization header is longer than {MAX_AUTHORIZATION_BYTES} bytes"
        )));
    }
    if !value
        .iter()
        .all(|b| (0x20..=0x7e).contains(b) || *b == b'\t')
    {
        return Err(AuthError::InvalidRequest(
            "the Authorization header holds bytes that are not printable ASCII".to_owned(),
        ));
    }
    // Checked above: every byte is ASCII.
    let text = String::from_utf8_lossy(value);
    let text = text.trim_matches(|c| c == ' ' || c == '\t');
    let (scheme, rest) = match text.split_once([' ', '\t']) {
        Some((s, r)) => (s, r.trim_matches(|c| c == ' ' || c == '\t')),
        None => (text, ""),
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::UnsupportedScheme(
            scheme.chars().take(20).collect(),
        ));
    }
    if rest.is_empty() {
        return Err(AuthError::InvalidRequest(
            "the Authorization header has no token after Bearer".to_owned(),
        ));
    }
    if !is_token68(rest) {
        return Err(TokenProblem::BadCharacters.into());
    }
    Ok(Some(rest.to_owned()))
}

/// RFC 7235 token68: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_token68(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        })
}

/// An API key or a JWT, by prefix and shape.
pub fn classify(token: &str) -> Result<Presented<'_>, AuthError> {
    if token.starts_with(API_KEY_PREFIX) {
        return Ok(Presented::ApiKey(token));
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() == 3 && parts.iter().take(2).all(|p| !p.is_empty()) {
        return Ok(Presented::Jwt(token));
    }
    Err(TokenProblem::NotAToken.into())
}

/// Query parameter names that carry credentials in some clients.
const CREDENTIAL_PARAMETERS: [&str; 8] = [
    "access_token",
    "token",
    "id_token",
    "api_key",
    "apikey",
    "key",
    "auth",
    "authorization",
];

/// Whether a URL query carries a credential: a parameter named like one, or a value shaped like
/// a Manifold API key, a bearer header or a JWT.
pub fn query_carries_credential(query: &str) -> bool {
    url::form_urlencoded::parse(query.as_bytes()).any(|(name, value)| {
        let name = name.to_ascii_lowercase();
        let value = value.trim();
        CREDENTIAL_PARAMETERS.contains(&name.as_str())
            || value.starts_with(API_KEY_PREFIX)
            || value
                .get(..7)
                .is_some_and(|p| p.eq_ignore_ascii_case("bearer "))
            || (value.starts_with("eyJ") && value.matches('.').count() == 2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: &str) -> Result<Option<String>, AuthError> {
        bearer_token(&[v.as_bytes()])
    }

    #[test]
    fn the_scheme_is_case_insensitive_and_the_token_is_kept_verbatim() {
        assert_eq!(
            one("Bearer abc.def-_~+/=").unwrap().as_deref(),
            Some("abc.def-_~+/=")
        );
        assert_eq!(one("bEaReR   xyz  ").unwrap().as_deref(), Some("xyz"));
        assert_eq!(bearer_token(&[]).unwrap(), None);
    }

    #[test]
    fn malformed_headers_are_invalid_requests() {
        assert_eq!(
            bearer_token(&[b"Bearer a", b"Bearer b"]).unwrap_err(),
            AuthError::InvalidRequest(
                "send exactly one Authorization header; this request has 2".to_owned()
            )
        );
        assert_eq!(
            bearer_token(&["Bearer caf\u{e9}".as_bytes()]).unwrap_err(),
            AuthError::InvalidRequest(
                "the Authorization header holds bytes that are not printable ASCII".to_owned()
            )
        );
        let long = format!("Bearer {}", "a".repeat(MAX_AUTHORIZATION_BYTES));
        assert!(
            matches!(one(&long), Err(AuthError::InvalidRequest(m)) if m.contains("longer than 8192"))
        );
        assert_eq!(
            one("Bearer").unwrap_err(),
            AuthError::InvalidRequest(
                "the Authorization header has no token after Bearer".to_owned()
            )
        );
    }

    #[test]
    fn other_schemes_and_odd_characters_are_refused() {
        assert_eq!(
            one("Basic dXNlcjpwYXNz").unwrap_err(),
            AuthError::UnsupportedScheme("Basic".to_owned())
        );
        assert_eq!(
            one("Bearer a\"b").unwrap_err(),
            AuthError::InvalidToken(TokenProblem::BadCharacters)
        );
        assert_eq!(
            one("Bearer a b").unwrap_err(),
            AuthError::InvalidToken(TokenProblem::BadCharacters)
        );
    }

    #[test]
    fn tokens_are_told_apart_by_shape() {
        assert_eq!(classify("mfk_x").unwrap(), Presented::ApiKey("mfk_x"));
        assert_eq!(classify("a.b.c").unwrap(), Presented::Jwt("a.b.c"));
        assert_eq!(classify("a.b.").unwrap(), Presented::Jwt("a.b."));
        assert_eq!(
            classify("garbage").unwrap_err(),
            AuthError::InvalidToken(TokenProblem::NotAToken)
        );
        assert_eq!(
            classify("a..c").unwrap_err(),
            AuthError::InvalidToken(TokenProblem::NotAToken)
        );
    }

    #[test]
    fn credentials_in_queries_are_spotted() {
        assert!(query_carries_credential("access_token=abc"));
        assert!(query_carries_credential("sessionId=1&API_KEY=x"));
        assert!(query_carries_credential("x=mfk_0123"));
        assert!(query_carries_credential("x=Bearer%20abc"));
        assert!(query_carries_credential("x=eyJh.eyJi.sig"));
        assert!(!query_carries_credential("sessionId=0123456789abcdef"));
        assert!(!query_carries_credential(""));
    }
}
