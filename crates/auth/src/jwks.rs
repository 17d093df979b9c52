//! The issuer's signing keys (its JWKS), fetched when first needed and kept.
//!
//! Refetched when a token names a key id the cached set lacks (the issuer rotated its keys) or
//! when the set is older than [`MAX_AGE`]; such refreshes happen at most once per
//! [`MIN_REFRESH_INTERVAL`], so a flood of tokens with made-up key ids costs the issuer one
//! request per interval, not one per token. A failed refresh keeps the keys already held. When
//! no JWKS URL is configured it is discovered from the issuer's metadata (RFC 8414, then OpenID
//! Connect discovery), whose `issuer` must equal the configured one.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};

use crate::error::{SetupError, TokenProblem};

/// Shortest time between two refreshes of a set already held.
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(30);
/// Age after which the set is refreshed on its next use.
pub const MAX_AGE: Duration = Duration::from_secs(3600);
/// Shortest time between two attempts while no set could be fetched yet.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// Time allowed for one fetch.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest JWKS or metadata document read.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// Most keys kept from one set.
const MAX_KEYS: usize = 100;

/// Where the keys come from.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// A configured JWKS URL.
    Url(url::Url),
    /// Discovered from the issuer's metadata.
    Discover { issuer: String },
}

/// One usable public key of the set.
struct PublishedKey {
    kid: Option<String>,
    /// The algorithm the JWK is restricted to, when it names one.
    alg: Option<Algorithm>,
    curve: Option<EllipticCurve>,
    key: Arc<DecodingKey>,
}

impl PublishedKey {
    fn fits(&self, alg: Algorithm) -> bool {
        if self.key.family() != alg.family() || self.alg.is_some_and(|a| a != alg) {
            return false;
        }
        match (&self.curve, alg) {
            (Some(c), Algorithm::ES256) => *c == EllipticCurve::P256,
            (Some(c), Algorithm::ES384) => *c == EllipticCurve::P384,
            (Some(c), Algorithm::EdDSA) => *c == EllipticCurve::Ed25519,
            _ => true,
        }
    }
}

#[derive(Default)]
struct KeySet {
    keys: Vec<PublishedKey>,
}

#[derive(Default)]
struct FetchState {
    jwks_url: Option<url::Url>,
    loaded_at: Option<Instant>,
    last_attempt: Option<Instant>,
    last_refresh: Option<Instant>,
    last_error: Option<String>,
}

/// Why no key could be found for a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyLookupError {
    /// The token's fault (401).
    Refused(TokenProblem),
    /// The keys could not be fetched (503).
    Unavailable(String),
}

/// The cached JWKS of one issuer.
pub struct JwksCache {
    client: reqwest::Client,
    source: KeySource,
    keys: RwLock<Arc<KeySet>>,
    state: tokio::sync::Mutex<FetchState>,
    fetches: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksCache")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Whether a URL points at this machine (plain http is tolerated only there).
pub fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Parses a URL Manifold will fetch: https, or http to this machine.
pub fn fetchable_url(text: &str, field: &'static str) -> Result<url::Url, SetupError> {
    let url = url::Url::parse(text).map_err(|e| SetupError::BadUrl {
        field,
        reason: e.to_string(),
    })?;
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(SetupError::BadUrl {
            field,
            reason: "plain http is accepted only to this machine; use https".to_owned(),
        }),
        other => Err(SetupError::BadUrl {
            field,
            reason: format!("the scheme {other} is not http or https"),
        }),
    }
}

/// The metadata URLs to try for an issuer, in the order the MCP authorization spec gives.
pub fn metadata_urls(issuer: &url::Url) -> Vec<url::Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |p: String| {
        let mut u = issuer.clone();
        u.set_path(&p);
        u.set_query(None);
        u
    };
    if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server".to_owned()),
            at("/.well-known/openid-configuration".to_owned()),
        ]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// The signature algorithm a JWK's `alg` restricts it to; `None` for anything else.
fn signature_algorithm(k: KeyAlgorithm) -> Option<Algorithm> {
    Some(match k {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        // Unknown names restrict to nothing we verify; encryption and HMAC keys are not for us.
        _ => return None,
    })
}

/// The usable keys of a JWKS document; keys Manifold cannot or must not use are skipped.
fn parse_set(body: &[u8]) -> Result<KeySet, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let Some(entries) = doc.get("keys").and_then(serde_json::Value::as_array) else {
        return Err("no \"keys\" array".to_owned());
    };
    let mut keys = Vec::new();
    for entry in entries.iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            tracing::debug!("skipped a JWKS entry that is not a JWK Manifold reads");
            continue;
        };
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        let curve = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => None,
            AlgorithmParameters::EllipticCurve(p) => Some(p.curve.clone()),
            AlgorithmParameters::OctetKeyPair(p) => Some(p.curve.clone()),
            // A shared secret in a public key set can only be a mistake or an attack.
            AlgorithmParameters::OctetKey(_) | AlgorithmParameters::Other(_) => continue,
            _ => continue,
        };
        let alg = match jwk.common.key_algorithm {
            None => None,
            Some(k) => match signature_algorithm(k) {
                Some(a) => Some(a),
                None => continue,
            },
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            tracing::debug!("skipped a JWKS entry whose key material does not decode");
            continue;
        };
        if key.family() == AlgorithmFamily::Hmac {
            continue;
        }
        keys.push(PublishedKey {
            kid: jwk.common.key_id.clone(),
            alg,
            curve,
            key: Arc::new(key),
        });
    }
    Ok(KeySet { keys })
}

/// Why a fetch needed now is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Initial,
    Refresh,
}

impl JwksCache {
    pub fn new(source: KeySource) -> Result<JwksCache, SetupError> {
        // Another part of the process may have installed a provider already; either way one is set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("manifold/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SetupError::HttpClient(e.to_string()))?;
        let jwks_url = match &source {
            KeySource::Url(u) => Some(u.clone()),
            KeySource::Discover { .. } => None,
        };
        Ok(JwksCache {
            client,
            source,
            keys: RwLock::new(Arc::new(KeySet::default())),
            state: tokio::sync::Mutex::new(FetchState {
                jwks_url,
                ..FetchState::default()
            }),
            fetches: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// How many times a JWKS document was requested (for tests and logs).
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn set(&self) -> Arc<KeySet> {
        match self.keys.read() {
            Ok(k) => Arc::clone(&k),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    fn matching(set: &KeySet, kid: Option<&str>, alg: Algorithm) -> Vec<Arc<DecodingKey>> {
        set.keys
            .iter()
            .filter(|k| kid.is_none_or(|kid| k.kid.as_deref() == Some(kid)))
            .filter(|k| k.fits(alg))
            .map(|k| Arc::clone(&k.key))
            .collect()
    }

    fn miss(set: &KeySet, kid: Option<&str>, alg: Algorithm) -> KeyLookupError {
        KeyLookupError::Refused(match kid {
            Some(kid) if set.keys.iter().any(|k| k.kid.as_deref() == Some(kid)) => {
                TokenProblem::KeyMismatch {
                    kid: printable(kid),
                    alg: format!("{alg:?}"),
                }
            }
            Some(kid) => TokenProblem::UnknownKid(printable(kid)),
            None => TokenProblem::NoMatchingKey(format!("{alg:?}")),
        })
    }

    /// Whether the set has a key under this id (of whatever type): then a refetch cannot help.
    fn knows(set: &KeySet, kid: Option<&str>) -> bool {
        kid.is_some_and(|kid| set.keys.iter().any(|k| k.kid.as_deref() == Some(kid)))
    }

    /// The keys that may have signed a token with this key id and algorithm.
    pub async fn keys_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Vec<Arc<DecodingKey>>, KeyLookupError> {
        let seen = self.set();
        {
            let found = Self::matching(&seen, kid, alg);
            // Fast path without the fetch lock: a fresh set that has the key.
            if !found.is_empty() && !self.stale() {
                return Ok(found);
            }
            // The key id is known but of another kind (an algorithm confusion attempt).
            if found.is_empty() && Self::knows(&seen, kid) {
                return Err(Self::miss(&seen, kid, alg));
            }
        }
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let current = self.set();
        if !Arc::ptr_eq(&seen, &current) {
            // Someone fetched while this request waited for the lock.
            let found = Self::matching(&current, kid, alg);
            if !found.is_empty() {
                return Ok(found);
            }
        }
        let need = if state.loaded_at.is_none() {
            Need::Initial
        } else {
            Need::Refresh
        };
        let allowed = match need {
            Need::Initial => state
                .last_attempt
                .is_none_or(|t| now.duration_since(t) >= RETRY_AFTER_FAILURE),
            Need::Refresh => state
                .last_refresh
                .is_none_or(|t| now.duration_since(t) >= MIN_REFRESH_INTERVAL),
        };
        if allowed {
            state.last_attempt = Some(now);
            if need == Need::Refresh {
                state.last_refresh = Some(now);
            }
            match self.fetch(&mut state).await {
                Ok(set) => {
                    tracing::info!(keys = set.keys.len(), "fetched the issuer's signing keys");
                    state.loaded_at = Some(Instant::now());
                    state.last_error = None;
                    match self.keys.write() {
                        Ok(mut k) => *k = Arc::new(set),
                        Err(p) => *p.into_inner() = Arc::new(set),
                    }
                }
                Err(why) => {
                    tracing::warn!(error = %why, "could not fetch the issuer's signing keys");
                    state.last_error = Some(why);
                }
            }
        }
        if state.loaded_at.is_none() {
            return Err(KeyLookupError::Unavailable(
                state
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "no attempt succeeded yet".to_owned()),
            ));
        }
        let set = self.set();
        let found = Self::matching(&set, kid, alg);
        if found.is_empty() {
            Err(Self::miss(&set, kid, alg))
        } else {
            Ok(found)
        }
    }

    fn stale(&self) -> bool {
        // Uncontended in the common case; when a fetch holds the lock, the set is being renewed.
        match self.state.try_lock() {
            Ok(s) => s.loaded_at.is_some_and(|t| t.elapsed() >= MAX_AGE),
            Err(_) => false,
        }
    }

    async fn fetch(&self, state: &mut FetchState) -> Result<KeySet, String> {
        let url = match &state.jwks_url {
            Some(u) => u.clone(),
            None => {
                let u = self.discover().await?;
                state.jwks_url = Some(u.clone());
                u
            }
        };
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = self.get(&url).await?;
        let set = parse_set(&body).map_err(|e| format!("the JWKS at {url} is unusable: {e}"))?;
        if set.keys.is_empty() {
            return Err(format!(
                "the JWKS at {url} holds no signature key Manifold can use"
            ));
        }
        Ok(set)
    }

    async fn get(&self, url: &url::Url) -> Result<Vec<u8>, String> {
        let mut response = self
            .client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("GET {url} failed: {}", describe(&e)))?;
        if !response.status().is_success() {
            return Err(format!("GET {url} answered {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading {url} failed: {}", describe(&e)))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!(
                    "{url} is larger than {} KiB",
                    MAX_DOCUMENT_BYTES / 1024
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    async fn discover(&self) -> Result<url::Url, String> {
        let KeySource::Discover { issuer } = &self.source else {
            return Err("no JWKS URL is configured".to_owned());
        };
        let issuer_url = url::Url::parse(issuer)
            .map_err(|e| format!("the issuer {issuer} is not a URL: {e}"))?;
        let mut tried = Vec::new();
        for candidate in metadata_urls(&issuer_url) {
            let body = match self.get(&candidate).await {
                Ok(b) => b,
                Err(why) => {
                    tried.push(why);
                    continue;
                }
            };
            let doc: serde_json::Value = match serde_json::from_slice(&body) {
                Ok(d) => d,
                Err(e) => {
                    tried.push(format!("{candidate} is not JSON: {e}"));
                    continue;
                }
            };
            let stated = doc.get("issuer").and_then(serde_json::Value::as_str);
            if stated != Some(issuer.as_str()) {
                // RFC 8414 section 3.3: metadata for another issuer must not be used.
                tried.push(format!(
                    "{candidate} describes issuer {:?}, not {issuer}",
                    stated.unwrap_or_default()
                ));
                continue;
            }
            let Some(jwks) = doc.get("jwks_uri").and_then(serde_json::Value::as_str) else {
                tried.push(format!("{candidate} has no jwks_uri"));
                continue;
            };
            return fetchable_url(jwks, "jwks_uri")
                .map_err(|e| format!("{candidate} names an unusable jwks_uri: {e}"));
        }
        Err(format!(
            "the issuer's metadata could not be discovered: {}; set auth.oauth.jwks_url",
            tried.join("; ")
        ))
    }
}

/// An error and its causes in one line.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// A client-supplied value made safe to echo: printable ASCII, bounded.
pub(crate) fn printable(value: &str) -> String {
    value
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' && c != '\'' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `body` at `/doc` on 127.0.0.1:0; the task ends with the test's runtime.
    async fn serve_document(body: Vec<u8>) -> url::Url {
        let app = axum::Router::new().route(
            "/doc",
            axum::routing::get(move || {
                let body = body.clone();
                async move { body }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        url::Url::parse(&format!("http://{addr}/doc")).unwrap()
    }

    #[tokio::test]
    async fn a_document_at_the_cap_is_read_and_one_byte_more_is_refused_naming_the_cap() {
        let at_cap = serve_document(vec![b' '; MAX_DOCUMENT_BYTES]).await;
        let cache = JwksCache::new(KeySource::Url(at_cap.clone())).unwrap();
        assert_eq!(cache.get(&at_cap).await.unwrap().len(), MAX_DOCUMENT_BYTES);
        let over = serve_document(vec![b' '; MAX_DOCUMENT_BYTES + 1]).await;
        let refused = cache.get(&over).await.unwrap_err();
        assert_eq!(refused, format!("{over} is larger than 1024 KiB"));
    }

    #[test]
    fn metadata_urls_follow_the_spec_order() {
        let with_path = url::Url::parse("https://auth.example.com/tenant1").unwrap();
        let urls: Vec<String> = metadata_urls(&with_path)
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(
            urls,
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        let root = url::Url::parse("https://auth.example.com").unwrap();
        let urls: Vec<String> = metadata_urls(&root).iter().map(|u| u.to_string()).collect();
        assert_eq!(
            urls,
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    /// The x and y coordinates (base64url) of a fresh P-256 public key.
    fn p256_coordinates() -> (String, String) {
        use base64::Engine as _;
        use p256::elliptic_curve::Generate as _;
        let secret = p256::SecretKey::generate();
        let point = secret.public_key().to_sec1_bytes();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        (
            b64(point.get(1..33).unwrap()),
            b64(point.get(33..65).unwrap()),
        )
    }

    #[test]
    fn shared_secrets_and_encryption_keys_in_a_set_are_skipped() {
        let (x, y) = p256_coordinates();
        let doc = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "EC", "crv": "P-256", "use": "enc", "kid": "enc", "x": x, "y": y},
            {"kty": "EC", "crv": "P-256", "kid": "sig", "x": x, "y": y},
            {"kty": "EC", "crv": "P-256", "alg": "ECDH-ES", "kid": "agree", "x": x, "y": y},
            {"kty": "weird"}
        ]});
        let set = parse_set(doc.to_string().as_bytes()).unwrap();
        let kids: Vec<_> = set.keys.iter().map(|k| k.kid.clone()).collect();
        assert_eq!(kids, [Some("sig".to_owned())]);
        let key = set.keys.first().unwrap();
        assert!(key.fits(Algorithm::ES256));
        assert!(!key.fits(Algorithm::ES384));
        assert!(!key.fits(Algorithm::RS256));
        assert!(!key.fits(Algorithm::HS256));
    }

    #[test]
    fn only_https_or_this_machine_is_fetched() {
        assert!(fetchable_url("https://a.example/jwks", "f").is_ok());
        assert!(fetchable_url("http://127.0.0.1:9/jwks", "f").is_ok());
        assert!(fetchable_url("http://localhost/jwks", "f").is_ok());
        assert!(fetchable_url("http://a.example/jwks", "f").is_err());
        assert!(fetchable_url("file:///etc/passwd", "f").is_err());
    }

    #[test]
    fn echoed_values_are_printable_and_short() {
        assert_eq!(printable("k\"1\u{e9}\n"), "k?1??");
        assert_eq!(printable(&"x".repeat(100)).len(), 64);
    }
}
