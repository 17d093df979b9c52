//! Access tokens checked against a real JWKS served over HTTP on 127.0.0.1: every refusal the
//! resource server must make, named by its reason, and key rotation with its refresh limit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod issuer;

use issuer::{SigningKey, TestIssuer, claims, hs256, now, unsigned};
use jsonwebtoken::Algorithm;
use manifold_auth::jwks::KeySource;
use manifold_auth::{AuthError, JwtSettings, JwtValidator, TokenProblem};

const AUDIENCE: &str = "https://mcp.example.test/mcp";

fn validator(issuer: &TestIssuer, source: KeySource, required: &[&str]) -> JwtValidator {
    JwtValidator::new(
        JwtSettings {
            issuer: issuer.url.clone(),
            audience: AUDIENCE.to_owned(),
            algorithms: vec![Algorithm::RS256, Algorithm::ES256],
            required_scopes: required.iter().map(|s| (*s).to_owned()).collect(),
            groups_claim: "groups".to_owned(),
        },
        source,
    )
    .unwrap()
}

fn fixed(issuer: &TestIssuer) -> KeySource {
    KeySource::Url(url::Url::parse(&issuer.jwks_url).unwrap())
}

fn refused(p: TokenProblem) -> AuthError {
    AuthError::InvalidToken(p)
}

#[tokio::test]
async fn valid_tokens_of_both_families_prove_their_subject_scopes_and_groups() {
    let rsa = SigningKey::rsa("r1");
    let ec = SigningKey::ec("e1");
    let issuer = TestIssuer::start(&[&rsa, &ec]).await;
    let v = validator(&issuer, fixed(&issuer), &["mcp"]);
    let id = v
        .validate(&rsa.sign(&claims(&issuer.url, AUDIENCE, "alice", "mcp files:read")))
        .await
        .unwrap();
    assert_eq!(id.name, "alice");
    assert_eq!(id.scopes, ["mcp", "files:read"]);
    assert_eq!(id.groups, ["engineering"]);
    let id = v
        .validate(&ec.sign(&claims(&issuer.url, AUDIENCE, "bob", "mcp")))
        .await
        .unwrap();
    assert_eq!(id.name, "bob");
    assert_eq!(issuer.jwks_hits(), 1, "the set is fetched once and kept");
}

#[tokio::test]
async fn every_broken_token_is_refused_for_its_own_reason() {
    let rsa = SigningKey::rsa("r1");
    let other = SigningKey::rsa("r1");
    let issuer = TestIssuer::start(&[&rsa]).await;
    let v = validator(&issuer, fixed(&issuer), &[]);
    let good = claims(&issuer.url, AUDIENCE, "alice", "mcp");
    let with = |key: &str, value: serde_json::Value| {
        let mut c = good.clone();
        c[key] = value;
        c
    };
    let cases: Vec<(&str, String, AuthError)> = vec![
        (
            "signed by another key under the same kid",
            other.sign(&good),
            refused(TokenProblem::BadSignature),
        ),
        (
            "ES256 naming the issuer's RSA key",
            SigningKey::ec("r1").sign(&good),
            refused(TokenProblem::KeyMismatch {
                kid: "r1".into(),
                alg: "ES256".into(),
            }),
        ),
        (
            "alg none",
            unsigned("r1", &good),
            refused(TokenProblem::Unsigned),
        ),
        (
            "HS256 keyed with the RSA public key",
            hs256(&rsa.public_der, "r1", &good),
            refused(TokenProblem::AlgorithmNotAllowed {
                alg: "HS256".into(),
                allowed: "RS256, ES256".into(),
            }),
        ),
        (
            "expired beyond the leeway",
            rsa.sign(&with("exp", (now() - 120).into())),
            refused(TokenProblem::Expired),
        ),
        (
            "not valid yet beyond the leeway",
            rsa.sign(&with("nbf", (now() + 300).into())),
            refused(TokenProblem::NotYetValid),
        ),
        (
            "another issuer",
            rsa.sign(&with("iss", "https://elsewhere.example".into())),
            refused(TokenProblem::WrongIssuer(issuer.url.clone())),
        ),
        (
            "another audience",
            rsa.sign(&with("aud", "https://other.example/mcp".into())),
            refused(TokenProblem::WrongAudience(AUDIENCE.into())),
        ),
        (
            "no subject",
            {
                let mut c = good.clone();
                c.as_object_mut().unwrap().remove("sub");
                rsa.sign(&c)
            },
            refused(TokenProblem::MissingClaim("sub".into())),
        ),
        (
            "no expiry",
            {
                let mut c = good.clone();
                c.as_object_mut().unwrap().remove("exp");
                rsa.sign(&c)
            },
            refused(TokenProblem::MissingClaim("exp".into())),
        ),
    ];
    for (name, token, expected) in cases {
        assert_eq!(v.validate(&token).await.unwrap_err(), expected, "{name}");
    }
}

#[tokio::test]
async fn expiry_and_not_before_allow_sixty_seconds_of_clock_skew() {
    let rsa = SigningKey::rsa("r1");
    let issuer = TestIssuer::start(&[&rsa]).await;
    let v = validator(&issuer, fixed(&issuer), &[]);
    let mut c = claims(&issuer.url, AUDIENCE, "alice", "");
    c["exp"] = (now() - 30).into();
    c["nbf"] = (now() + 30).into();
    assert!(v.validate(&rsa.sign(&c)).await.is_ok());
}

#[tokio::test]
async fn missing_required_scopes_are_insufficient_scope_not_invalid() {
    let rsa = SigningKey::rsa("r1");
    let issuer = TestIssuer::start(&[&rsa]).await;
    let v = validator(&issuer, fixed(&issuer), &["mcp", "mcp:tools"]);
    let token = rsa.sign(&claims(&issuer.url, AUDIENCE, "alice", "mcp"));
    assert_eq!(
        v.validate(&token).await.unwrap_err(),
        AuthError::InsufficientScope {
            missing: vec!["mcp:tools".into()]
        }
    );
}

#[tokio::test]
async fn an_unknown_kid_refetches_once_then_waits_out_the_interval() {
    let old = SigningKey::rsa("old");
    let new = SigningKey::ec("new");
    let issuer = TestIssuer::start(&[&old]).await;
    let v = validator(&issuer, fixed(&issuer), &[]);
    let c = claims(&issuer.url, AUDIENCE, "alice", "");
    v.validate(&old.sign(&c)).await.unwrap();
    assert_eq!(issuer.jwks_hits(), 1);
    issuer.publish(&[&old, &new]);
    v.validate(&new.sign(&c)).await.unwrap();
    assert_eq!(issuer.jwks_hits(), 2, "the rotated key was fetched");
    let made_up = new.sign_as("made-up", &c);
    for _ in 0..5 {
        assert_eq!(
            v.validate(&made_up).await.unwrap_err(),
            refused(TokenProblem::UnknownKid("made-up".into()))
        );
    }
    assert_eq!(
        issuer.jwks_hits(),
        2,
        "unknown key ids do not refetch again within the interval"
    );
}

#[tokio::test]
async fn the_jwks_is_discovered_from_the_issuers_metadata_and_a_mix_up_is_refused() {
    let rsa = SigningKey::rsa("r1");
    let issuer = TestIssuer::start(&[&rsa]).await;
    let discovering = validator(
        &issuer,
        KeySource::Discover {
            issuer: issuer.url.clone(),
        },
        &[],
    );
    let token = rsa.sign(&claims(&issuer.url, AUDIENCE, "alice", ""));
    assert_eq!(discovering.validate(&token).await.unwrap().name, "alice");
    assert_eq!((issuer.metadata_hits(), issuer.jwks_hits()), (1, 1));

    let mixed_up = TestIssuer::start(&[&rsa]).await;
    mixed_up.claim_issuer("https://someone-else.example");
    let v = validator(
        &mixed_up,
        KeySource::Discover {
            issuer: mixed_up.url.clone(),
        },
        &[],
    );
    let token = rsa.sign(&claims(&mixed_up.url, AUDIENCE, "alice", ""));
    match v.validate(&token).await.unwrap_err() {
        AuthError::Unavailable(why) => assert!(
            why.contains("describes issuer \"https://someone-else.example\""),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        mixed_up.jwks_hits(),
        0,
        "no key is fetched for a mixed-up issuer"
    );
}
