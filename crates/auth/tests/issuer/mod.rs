//! A stand-in OAuth issuer for tests: signing keys made fresh in the test (RSA and P-256), a
//! JWKS and authorization-server metadata served on 127.0.0.1:0, and counters of how often
//! each was fetched. Shared by this crate's tests and `manifold`'s attack matrix (included there
//! by path), so both exercise the same real signatures.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn trimmed(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

/// A private key the test signs with, and its public JWK.
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    encoding: EncodingKey,
    pub jwk: Value,
    /// The public key in DER (what an attacker would use as an HMAC secret).
    pub public_der: Vec<u8>,
}

impl SigningKey {
    /// A fresh 2048-bit RSA key for RS256.
    pub fn rsa(kid: &str) -> SigningKey {
        use rsa::pkcs1::{EncodeRsaPrivateKey, EncodeRsaPublicKey};
        use rsa::traits::PublicKeyParts;
        let private = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048).unwrap();
        let public = private.to_public_key();
        let n = public.n().to_be_bytes();
        let e = public.e().to_be_bytes();
        SigningKey {
            kid: kid.to_owned(),
            alg: Algorithm::RS256,
            encoding: EncodingKey::from_rsa_der(private.to_pkcs1_der().unwrap().as_bytes()),
            jwk: json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(trimmed(&n)), "e": b64(trimmed(&e))}),
            public_der: public.to_pkcs1_der().unwrap().as_bytes().to_vec(),
        }
    }

    /// A fresh P-256 key for ES256.
    pub fn ec(kid: &str) -> SigningKey {
        use p256::elliptic_curve::Generate as _;
        use p256::pkcs8::EncodePrivateKey as _;
        let secret = p256::SecretKey::generate();
        let point = secret.public_key().to_sec1_bytes();
        SigningKey {
            kid: kid.to_owned(),
            alg: Algorithm::ES256,
            encoding: EncodingKey::from_ec_der(secret.to_pkcs8_der().unwrap().as_bytes()),
            jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "x": b64(&point[1..33]), "y": b64(&point[33..65])}),
            public_der: point.to_vec(),
        }
    }

    /// A token with these claims, signed by this key, naming it by `kid`.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }

    /// As [`SigningKey::sign`], naming another key id.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// A token with `alg: none` and no signature.
pub fn unsigned(kid: &str, claims: &Value) -> String {
    let header = json!({"alg": "none", "typ": "JWT", "kid": kid});
    format!(
        "{}.{}.",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

/// A token "signed" with HS256 using `secret` (e.g. the issuer's public key) under `kid`.
pub fn hs256(secret: &[u8], kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret).unwrap()).unwrap()
}

/// Claims valid from a minute ago for ten minutes.
pub fn claims(issuer: &str, audience: &str, subject: &str, scope: &str) -> Value {
    let now = now();
    json!({
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "scope": scope,
        "groups": ["engineering"],
        "iat": now - 60,
        "nbf": now - 60,
        "exp": now + 600,
    })
}

#[derive(Default)]
struct Published {
    jwks: Mutex<Value>,
    jwks_hits: AtomicU64,
    metadata_hits: AtomicU64,
    issuer: Mutex<String>,
}

/// The issuer's HTTP side.
pub struct TestIssuer {
    /// The issuer identifier (`http://127.0.0.1:PORT`), also its base URL.
    pub url: String,
    pub jwks_url: String,
    published: Arc<Published>,
    task: tokio::task::JoinHandle<()>,
}

async fn jwks(State(p): State<Arc<Published>>) -> axum::Json<Value> {
    p.jwks_hits.fetch_add(1, Ordering::SeqCst);
    axum::Json(p.jwks.lock().unwrap().clone())
}

async fn metadata(State(p): State<Arc<Published>>) -> axum::Json<Value> {
    p.metadata_hits.fetch_add(1, Ordering::SeqCst);
    let issuer = p.issuer.lock().unwrap().clone();
    axum::Json(
        json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks"), "code_challenge_methods_supported": ["S256"]}),
    )
}

impl TestIssuer {
    /// Serves the keys' JWKS on 127.0.0.1, port 0, on the current runtime.
    pub async fn start(keys: &[&SigningKey]) -> TestIssuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let published = Arc::new(Published::default());
        *published.issuer.lock().unwrap() = url.clone();
        let app = axum::Router::new()
            .route("/jwks", get(jwks))
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .with_state(Arc::clone(&published));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        let issuer = TestIssuer {
            jwks_url: format!("{url}/jwks"),
            url,
            published,
            task,
        };
        issuer.publish(keys);
        issuer
    }

    /// Replaces the published key set (a rotation).
    pub fn publish(&self, keys: &[&SigningKey]) {
        let set: Vec<Value> = keys.iter().map(|k| k.jwk.clone()).collect();
        *self.published.jwks.lock().unwrap() = json!({ "keys": set });
    }

    /// Makes the metadata claim another issuer (a mix-up attempt).
    pub fn claim_issuer(&self, issuer: &str) {
        *self.published.issuer.lock().unwrap() = issuer.to_owned();
    }

    pub fn jwks_hits(&self) -> u64 {
        self.published.jwks_hits.load(Ordering::SeqCst)
    }

    pub fn metadata_hits(&self) -> u64 {
        self.published.metadata_hits.load(Ordering::SeqCst)
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
