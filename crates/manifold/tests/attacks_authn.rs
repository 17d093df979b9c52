//! The attacker's view of inbound authentication: the real `manifold serve`, a real OAuth issuer
//! (keys made here, JWKS served on 127.0.0.1:0), and raw HTTP requests that try every way in.
//! Each case asserts the exact status, `WWW-Authenticate` value and error text.
//!
//! Non-loopback listening: the refusal is tested with `--listen 0.0.0.0:0`, which exits before
//! binding. The opt-out's warning is tested on 127.0.0.1 (tests bind loopback only); that the
//! opt-out admits a non-loopback address is pinned by `exposure::tests` in the binary's unit
//! tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../auth/tests/issuer/mod.rs"]
mod issuer;

use std::path::{Path, PathBuf};
use std::process::Command;

use issuer::{SigningKey, TestIssuer, claims, hs256, now, unsigned};
use manifold_testkit::{GatewayProcess, ServeCommand};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
const RESOURCE: &str = "https://mcp.example.test/mcp";
const METADATA: &str = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp";

fn temp_dir(name: &str) -> PathBuf {
    manifold_testkit::fresh_dir(&format!("attacks-authn-{name}")).unwrap()
}

/// A configuration with API keys and the test issuer, requiring scope `mcp`.
fn write_config(dir: &Path, issuer: &TestIssuer) -> PathBuf {
    let path = dir.join("manifold.toml");
    std::fs::write(
        &path,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n[auth]\napi_keys = true\nresource_url = \"{RESOURCE}\"\n\n[auth.oauth]\nissuer = \"{}\"\njwks_url = \"{}\"\nrequired_scopes = [\"mcp\"]\n",
            dir.join("data").display(),
            issuer.url,
            issuer.jwks_url
        ),
    )
    .unwrap();
    path
}

fn manifold(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(MANIFOLD)
        .args(args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn create_key(dir: &Path, config: &Path, name: &str, scopes: &str) -> String {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .create_key(name, &["--scopes", scopes])
        .unwrap()
}

/// Starts `manifold -vv serve ARGS`, its logs in a file; returns once it printed its URL.
fn serve(dir: &Path, args: &[&str]) -> GatewayProcess {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    ServeCommand::new(MANIFOLD, dir)
        .global_args(["-vv"])
        .args(args)
        .log(&format!("serve-{n}.log"))
        .start()
        .unwrap()
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}"#;

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    h
}

/// What came back: status, `WWW-Authenticate`, body as JSON (Null when not JSON), and headers.
struct Answer {
    status: StatusCode,
    challenge: Option<String>,
    body: Value,
    headers: HeaderMap,
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let challenge = headers
        .get(WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer {
        status,
        challenge,
        body,
        headers,
    }
}

async fn initialize(http: &reqwest::Client, url: &str, headers: HeaderMap) -> Answer {
    send(
        http.post(url)
            .headers(headers)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE),
    )
    .await
}

fn rpc_error(code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
}

/// The challenge of a 401/400/403 with an error code, as this gateway's configuration words it.
fn challenge_with(error: &str, description: &str) -> String {
    format!(
        "Bearer realm=\"manifold\", error=\"{error}\", error_description=\"{description}\", scope=\"mcp\", resource_metadata=\"{METADATA}\""
    )
}

fn assert_refused(answer: &Answer, status: u16, error: &str, description: &str, case: &str) {
    assert_eq!(answer.status.as_u16(), status, "{case}: {:?}", answer.body);
    assert_eq!(
        answer.challenge.as_deref(),
        Some(challenge_with(error, description).as_str()),
        "{case}"
    );
    let reason = match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        _ => "?",
    };
    let code = if status == 400 { -32600 } else { -32007 };
    assert_eq!(
        answer.body,
        rpc_error(code, &format!("{reason}: {description}")),
        "{case}"
    );
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_credential_is_refused_with_its_exact_challenge() {
    let rsa = SigningKey::rsa("rsa-1");
    let impostor = SigningKey::rsa("rsa-1");
    let issuer = TestIssuer::start(&[&rsa]).await;
    let dir = temp_dir("matrix");
    let config = write_config(&dir, &issuer);
    let key = create_key(&dir, &config, "alice", "mcp");
    let revoked = create_key(&dir, &config, "mallory", "mcp");
    let out = manifold(
        &dir,
        &[
            "keys",
            "revoke",
            "mallory",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let s = serve(&dir, &["--config", config.to_str().unwrap()]);
    let http = client();
    let good = claims(&issuer.url, RESOURCE, "alice@example.test", "mcp");
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let mut presented = vec![key.clone(), revoked.clone()];

    // No credentials: a bare challenge, no error code (RFC 6750 section 3).
    let a = initialize(&http, s.url(), HeaderMap::new()).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        a.challenge.as_deref(),
        Some(
            format!("Bearer realm=\"manifold\", scope=\"mcp\", resource_metadata=\"{METADATA}\"")
                .as_str()
        )
    );
    assert_eq!(
        a.body,
        rpc_error(
            -32007,
            "Unauthorized: this gateway requires authentication; send Authorization: Bearer <API key or access token>"
        )
    );

    let cases: Vec<(&str, String, u16, &str, String)> = vec![
        (
            "garbage token",
            "garbage".to_owned(),
            401,
            "invalid_token",
            "the token is neither a Manifold API key (mfk_...) nor a JWT".to_owned(),
        ),
        (
            "bad signature (another key under the issuer's key id)",
            impostor.sign(&good),
            401,
            "invalid_token",
            "the token's signature does not verify".to_owned(),
        ),
        (
            "ES256 naming the issuer's RSA key",
            SigningKey::ec("rsa-1").sign(&good),
            401,
            "invalid_token",
            "the issuer's key 'rsa-1' cannot verify ES256 signatures".to_owned(),
        ),
        (
            "bad signature (tampered claims)",
            {
                let t = rsa.sign(&good);
                let mut parts: Vec<&str> = t.split('.').collect();
                let forged = base64_json(&with("sub", "admin".into()));
                parts[1] = &forged;
                parts.join(".")
            },
            401,
            "invalid_token",
            "the token's signature does not verify".to_owned(),
        ),
        (
            "alg none",
            unsigned("rsa-1", &good),
            401,
            "invalid_token",
            "unsigned tokens (alg none) are refused".to_owned(),
        ),
        (
            "HS256 signed with the RSA public key",
            hs256(&rsa.public_der, "rsa-1", &good),
            401,
            "invalid_token",
            "the token's algorithm HS256 is not allowed here (allowed: RS256, ES256)".to_owned(),
        ),
        (
            "expired",
            rsa.sign(&with("exp", (now() - 300).into())),
            401,
            "invalid_token",
            "the token expired".to_owned(),
        ),
        (
            "not yet valid",
            rsa.sign(&with("nbf", (now() + 300).into())),
            401,
            "invalid_token",
            "the token is not valid yet (its nbf is in the future)".to_owned(),
        ),
        (
            "wrong issuer",
            rsa.sign(&with("iss", "https://evil.example".into())),
            401,
            "invalid_token",
            format!("the token was issued by another issuer than {}", issuer.url),
        ),
        (
            "wrong audience",
            rsa.sign(&with("aud", "https://other-gateway.example/mcp".into())),
            401,
            "invalid_token",
            format!("the token was not issued for this gateway (its aud does not include {RESOURCE})"),
        ),
        (
            "missing required scope",
            rsa.sign(&with("scope", "files:read".into())),
            403,
            "insufficient_scope",
            "the token lacks the required scope(s) mcp; ask the authorization server for a token that grants them".to_owned(),
        ),
        (
            "revoked API key",
            revoked.clone(),
            401,
            "invalid_token",
            "the API key was revoked; ask for a new one".to_owned(),
        ),
        (
            "unknown API key",
            format!("mfk_{}_{}", "0".repeat(16), "1".repeat(64)),
            401,
            "invalid_token",
            "the API key is not known to this gateway (mistyped, or made for another gateway)".to_owned(),
        ),
    ];
    for (case, token, status, error, description) in cases {
        let a = initialize(&http, s.url(), bearer(&token)).await;
        assert_refused(&a, status, error, &description, case);
        presented.push(token);
    }

    // Valid credentials of both kinds are let through.
    let a = initialize(&http, s.url(), bearer(&key)).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
    assert_eq!(a.body["result"]["protocolVersion"], "2025-11-25");
    let jwt = rsa.sign(&good);
    let a = initialize(&http, s.url(), bearer(&jwt)).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
    assert_eq!(a.body["result"]["protocolVersion"], "2025-11-25");
    presented.push(jwt.clone());

    // A token in the query string is refused even beside a valid header.
    let a = send(
        http.post(format!("{}?access_token={jwt}", s.url()))
            .headers(bearer(&key))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE),
    )
    .await;
    assert_refused(
        &a,
        400,
        "invalid_request",
        "credentials in the URL query are refused (URLs end up in logs); send them in the Authorization header",
        "token in the query",
    );

    // Two Authorization headers: one could be read by a proxy, the other by Manifold.
    let mut two = bearer(&key);
    two.append(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {jwt}")).unwrap(),
    );
    let a = initialize(&http, s.url(), two).await;
    assert_refused(
        &a,
        400,
        "invalid_request",
        "send exactly one Authorization header; this request has 2",
        "two Authorization headers",
    );

    // Bytes outside printable ASCII.
    let mut odd = HeaderMap::new();
    odd.insert(
        AUTHORIZATION,
        HeaderValue::from_bytes(b"Bearer caf\xe9-\xff-token").unwrap(),
    );
    let a = initialize(&http, s.url(), odd).await;
    assert_refused(
        &a,
        400,
        "invalid_request",
        "the Authorization header holds bytes that are not printable ASCII",
        "non-ASCII Authorization header",
    );

    // The legacy SSE endpoint is behind the same door.
    let a = send(
        http.get(format!("{}/sse", s.base()))
            .header("accept", "text/event-stream"),
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);

    // Tokens are never logged, even at debug level.
    let log = s.log();
    assert!(log.contains("refused a request's credentials"), "{log}");
    for token in &presented {
        let secret_part = token.rsplit(['.', '_']).next().unwrap();
        assert!(
            !log.contains(token.as_str()) && (secret_part.len() < 20 || !log.contains(secret_part)),
            "a credential reached the log"
        );
    }
}

fn base64_json(v: &Value) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_answers_only_to_the_identity_that_started_it() {
    let rsa = SigningKey::rsa("rsa-1");
    let issuer = TestIssuer::start(&[&rsa]).await;
    let dir = temp_dir("sessions");
    let config = write_config(&dir, &issuer);
    let alice = create_key(&dir, &config, "alice", "mcp");
    let bob = create_key(&dir, &config, "bob", "mcp");
    // A token whose subject is "alice" is still someone else than the API key named alice.
    let alice_token = rsa.sign(&claims(&issuer.url, RESOURCE, "alice", "mcp"));
    let s = serve(&dir, &["--config", config.to_str().unwrap()]);
    let http = client();

    let started = initialize(&http, s.url(), bearer(&alice)).await;
    assert_eq!(started.status, StatusCode::OK);
    let sid = started
        .headers
        .get("mcp-session-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let list = |who: &str| {
        http.post(s.url())
            .headers(bearer(who))
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-11-25")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
    };
    let gone = rpc_error(
        -32008,
        "Not Found: this MCP session has ended or was not minted by this gateway; start a new one with initialize",
    );
    for (who, label) in [
        (&bob, "another API key"),
        (&alice_token, "a token with the same name"),
    ] {
        let a = send(list(who)).await;
        assert_eq!(
            (a.status, &a.body),
            (StatusCode::NOT_FOUND, &gone),
            "{label}"
        );
        let a = send(
            http.get(s.url())
                .headers(bearer(who))
                .header("mcp-session-id", &sid)
                .header("accept", "text/event-stream"),
        )
        .await;
        assert_eq!(
            (a.status, &a.body),
            (StatusCode::NOT_FOUND, &gone),
            "GET, {label}"
        );
        let a = send(
            http.delete(s.url())
                .headers(bearer(who))
                .header("mcp-session-id", &sid),
        )
        .await;
        assert_eq!(
            (a.status, &a.body),
            (StatusCode::NOT_FOUND, &gone),
            "DELETE, {label}"
        );
    }
    // The owner's session survived the attempts, DELETE included.
    let a = send(list(&alice)).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
    let names: Vec<&str> = a.body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"manifold_health"), "{names:?}");
    assert!(
        s.log()
            .contains("refused a session id presented by another identity")
    );

    // The legacy HTTP+SSE transport: the stream's session id is bound the same way.
    let mut stream = http
        .get(format!("{}/sse", s.base()))
        .headers(bearer(&alice))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let mut seen = String::new();
    let endpoint = loop {
        let chunk = stream
            .chunk()
            .await
            .unwrap()
            .expect("the stream ended early");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen
            .lines()
            .find(|l| l.starts_with("data: /message?sessionId="))
        {
            break line.trim_start_matches("data: ").to_owned();
        }
    };
    let post = |who: &str| {
        http.post(format!("{}{endpoint}", s.base()))
            .headers(bearer(who))
            .header("content-type", "application/json")
            .body(INITIALIZE)
    };
    let a = send(post(&bob)).await;
    assert_eq!(
        (a.status, &a.body),
        (
            StatusCode::NOT_FOUND,
            &rpc_error(
                -32008,
                "Not Found: no open SSE session has this id; open GET /sse again"
            )
        )
    );
    let a = send(post(&alice)).await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protected_resource_metadata_names_the_issuer_and_is_public() {
    let rsa = SigningKey::rsa("rsa-1");
    let issuer = TestIssuer::start(&[&rsa]).await;
    let dir = temp_dir("metadata");
    let config = write_config(&dir, &issuer);
    let s = serve(&dir, &["--config", config.to_str().unwrap()]);
    let http = client();
    let expected = json!({
        "resource": RESOURCE,
        "authorization_servers": [issuer.url],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Manifold",
    });
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let a = send(http.get(format!("{}{path}", s.base()))).await;
        assert_eq!(a.status, StatusCode::OK, "{path}");
        assert_eq!(a.body, expected, "{path}");
        assert_eq!(
            a.headers.get("content-type").unwrap(),
            "application/json",
            "{path}"
        );
        assert_eq!(
            a.headers.get("access-control-allow-origin").unwrap(),
            "*",
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_key_id_triggers_one_jwks_refetch_so_rotation_works() {
    let old = SigningKey::rsa("old");
    let new = SigningKey::ec("new");
    let issuer = TestIssuer::start(&[&old]).await;
    let dir = temp_dir("rotation");
    let config = write_config(&dir, &issuer);
    let s = serve(&dir, &["--config", config.to_str().unwrap()]);
    let http = client();
    let c = claims(&issuer.url, RESOURCE, "alice", "mcp");

    let a = initialize(&http, s.url(), bearer(&old.sign(&c))).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
    assert_eq!(issuer.jwks_hits(), 1);

    issuer.publish(&[&old, &new]);
    let a = initialize(&http, s.url(), bearer(&new.sign(&c))).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.body);
    assert_eq!(issuer.jwks_hits(), 2, "the rotated-in key was fetched once");

    for _ in 0..3 {
        let a = initialize(&http, s.url(), bearer(&new.sign_as("made-up", &c))).await;
        assert_refused(
            &a,
            401,
            "invalid_token",
            "the token names signing key 'made-up', which the issuer does not publish",
            "made-up kid",
        );
    }
    assert_eq!(
        issuer.jwks_hits(),
        2,
        "made-up key ids do not refetch again within 30 s"
    );
}

#[test]
fn listening_beyond_this_machine_without_authentication_is_refused_before_binding() {
    let dir = temp_dir("public");
    let out = manifold(&dir, &["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing was served");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "refusing to listen on 0.0.0.0:0 without authentication: that address is reachable from other machines"
        ),
        "{err}"
    );
    assert!(err.contains("--insecure-no-auth"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explicit_opt_out_starts_without_authentication_and_warns_at_every_start() {
    let dir = temp_dir("insecure");
    let http = client();
    // The flag, then the configuration's equivalent; each start logs the warning again.
    // Not ./manifold.toml, which the flag-only start would pick up.
    let config = dir.join("insecure.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n[auth]\ninsecure_no_auth = true\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let starts: [&[&str]; 2] = [
        &["--listen", "127.0.0.1:0", "--insecure-no-auth"],
        &["--config", config.to_str().unwrap()],
    ];
    for args in starts {
        let s = serve(&dir, args);
        let a = initialize(&http, s.url(), HeaderMap::new()).await;
        assert_eq!(a.status, StatusCode::OK, "{args:?}: no credentials needed");
        assert!(
            s.log().contains(
                "authentication is OFF (insecure_no_auth): anyone who can reach 127.0.0.1:0 (this machine only) can use every configured server"
            ),
            "{args:?}: {}",
            s.log()
        );
        assert!(s.log().contains("WARN"), "{}", s.log());
    }
}
