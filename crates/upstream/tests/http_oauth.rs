//! Manifold as an OAuth client of a protected MCP server, end to end over real HTTP: a small
//! authorization server and a protected Streamable HTTP server, both written here (axum on
//! 127.0.0.1:0), record every request so each test asserts what crossed the wire: the 401 that
//! starts discovery, PKCE and `resource` on both legs, registration, refresh, step-up, and the
//! refusals (a mismatched resource, no PKCE) that must happen before any authorization request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use manifold_upstream::auth::passthrough::CallerToken;
use manifold_upstream::auth::{
    FileTokenStore, Grant, HeadlessConsent, HttpAuth, OAuthClient, OAuthSettings, TokenStore,
};
use manifold_upstream::{
    CallOptions, ConnectOptions, Connection, HttpSpec, HttpTransportChoice, Target, UpstreamError,
    connect,
};
use serde_json::{Value, json};

/// Generous bound on anything that should finish promptly: a hang guard, never a measurement.
const HANG_GUARD: Duration = Duration::from_secs(30);
const REDIRECT_URI: &str = "http://127.0.0.1:9/callback";
const CC_ID: &str = "cc-client";
const CC_SECRET: &str = "cc-secret";

/// What the two servers are told to do, and what they saw.
#[derive(Default)]
struct World {
    mcp_base: String,
    as_base: String,
    // Behaviour.
    prm_resource: Option<String>,
    challenge_scope: Option<String>,
    omit_pkce_methods: bool,
    first_expires_in: Option<u64>,
    issue_refresh: bool,
    accept_no_token: bool,
    reject_all_tokens: bool,
    refuse_refresh: bool,
    // Tokens in force: access token -> scopes.
    valid: HashMap<String, Vec<String>>,
    refresh: HashMap<String, Vec<String>>,
    codes: HashMap<String, Code>,
    issued: u64,
    // Records.
    mcp_requests: Vec<(String, Option<String>)>,
    registrations: Vec<Value>,
    authorizations: Vec<HashMap<String, String>>,
    token_requests: Vec<(HashMap<String, String>, Option<String>)>,
}

struct Code {
    challenge: String,
    scope: Vec<String>,
    redirect_uri: String,
}

type Shared = Arc<Mutex<World>>;

struct Servers {
    world: Shared,
}

impl Servers {
    async fn start(configure: impl FnOnce(&mut World)) -> Servers {
        let world: Shared = Arc::new(Mutex::new(World {
            issue_refresh: true,
            ..World::default()
        }));
        configure(&mut world.lock().unwrap());
        let mcp = Router::new()
            .route("/mcp", post(mcp).get(not_allowed).delete(not_allowed))
            .route("/.well-known/oauth-protected-resource/mcp", get(prm))
            .with_state(Arc::clone(&world));
        let auth = Router::new()
            .route("/.well-known/oauth-authorization-server", get(as_metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(Arc::clone(&world));
        let mcp_base = serve(mcp).await;
        let as_base = serve(auth).await;
        {
            let mut w = world.lock().unwrap();
            w.mcp_base = mcp_base;
            w.as_base = as_base;
        }
        Servers { world }
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.world.lock().unwrap().mcp_base)
    }

    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        f(&mut self.world.lock().unwrap())
    }

    fn grants(&self) -> Vec<String> {
        self.with(|w| {
            w.token_requests
                .iter()
                .map(|(f, _)| f.get("grant_type").cloned().unwrap_or_default())
                .collect()
        })
    }

    fn spec(&self, auth: HttpAuth) -> HttpSpec {
        HttpSpec {
            url: self.url(),
            transport: HttpTransportChoice::StreamableHttp,
            auth,
            ..HttpSpec::default()
        }
    }
}

async fn serve(app: Router) -> String {
    let addr = manifold_testkit::serve_router(app).await.unwrap();
    format!("http://{addr}")
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

fn s256(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

// ------------------------------------------------------------------ the protected MCP server

async fn prm(State(world): State<Shared>) -> Response {
    let w = world.lock().unwrap();
    let resource = w
        .prm_resource
        .clone()
        .unwrap_or_else(|| format!("{}/mcp", w.mcp_base));
    axum::Json(json!({
        "resource": resource,
        "authorization_servers": [w.as_base],
        "scopes_supported": ["mcp:read"],
    }))
    .into_response()
}

fn challenge(w: &World, extra: &str) -> String {
    let mut value = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
        w.mcp_base
    );
    if let Some(s) = &w.challenge_scope {
        value.push_str(&format!(", scope=\"{s}\""));
    }
    value.push_str(extra);
    value
}

async fn mcp(State(world): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut w = world.lock().unwrap();
    w.mcp_requests.push((method.clone(), authorization.clone()));
    let token = authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::to_owned);
    let known = token
        .as_deref()
        .and_then(|t| w.valid.get(t))
        .filter(|_| !w.reject_all_tokens)
        .cloned();
    let scopes = match known {
        Some(s) => s,
        None if w.accept_no_token => vec!["passthrough".to_owned()],
        None => {
            let extra = if token.is_some() {
                ", error=\"invalid_token\""
            } else {
                ""
            };
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, challenge(&w, extra))],
                "unauthorized",
            )
                .into_response();
        }
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let tool = message["params"]["name"].as_str().unwrap_or_default();
    if method == "tools/call" && tool == "write" && !scopes.iter().any(|s| s == "mcp:write") {
        let value = format!(
            "Bearer error=\"insufficient_scope\", scope=\"mcp:write\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            w.mcp_base
        );
        return (
            StatusCode::FORBIDDEN,
            [(header::WWW_AUTHENTICATE, value)],
            "insufficient scope",
        )
            .into_response();
    }
    let result = match method.as_str() {
        "server/discover" => json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": { "tools": {} },
            "serverInfo": { "name": "protected", "version": "1.0.0" },
        }),
        "tools/list" => json!({
            "tools": [
                { "name": "whoami", "inputSchema": { "type": "object" } },
                { "name": "write", "inputSchema": { "type": "object" } },
            ],
        }),
        "tools/call" => json!({
            "content": [{ "type": "text", "text": format!("{tool} with {}", scopes.join(" ")) }],
        }),
        _ => {
            return axum::Json(json!({
                "jsonrpc": "2.0", "id": id,
                "error": { "code": -32601, "message": "Method not found" },
            }))
            .into_response();
        }
    };
    axum::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
}

// ------------------------------------------------------------------ the authorization server

async fn as_metadata(State(world): State<Shared>) -> Response {
    let w = world.lock().unwrap();
    let base = &w.as_base;
    let mut doc = json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
        "authorization_response_iss_parameter_supported": true,
        "scopes_supported": ["mcp:read", "mcp:write", "offline_access"],
    });
    if !w.omit_pkce_methods {
        doc["code_challenge_methods_supported"] = json!(["S256"]);
    }
    axum::Json(doc).into_response()
}

async fn register(State(world): State<Shared>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut w = world.lock().unwrap();
    w.registrations.push(request.clone());
    let id = format!("dcr-{}", w.registrations.len());
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": id,
            "redirect_uris": request["redirect_uris"],
            "token_endpoint_auth_method": "none",
        })),
    )
        .into_response()
}

async fn authorize(
    State(world): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut w = world.lock().unwrap();
    w.authorizations.push(q.clone());
    let code = format!("code-{}", w.authorizations.len());
    w.codes.insert(
        code.clone(),
        Code {
            challenge: q.get("code_challenge").cloned().unwrap_or_default(),
            scope: q
                .get("scope")
                .map(|s| s.split(' ').map(str::to_owned).collect())
                .unwrap_or_default(),
            redirect_uri: q.get("redirect_uri").cloned().unwrap_or_default(),
        },
    );
    let mut target = url::Url::parse(q.get("redirect_uri").map_or("", |s| s)).unwrap();
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", q.get("state").map_or("", |s| s))
        .append_pair("iss", &w.as_base);
    Redirect::to(target.as_str()).into_response()
}

fn issue(w: &mut World, scopes: Vec<String>) -> Response {
    w.issued += 1;
    let access = format!("at-{}", w.issued);
    let expires_in = match (w.issued, w.first_expires_in) {
        (1, Some(e)) => e,
        _ => 3600,
    };
    w.valid.insert(access.clone(), scopes.clone());
    let mut body = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": expires_in,
        "scope": scopes.join(" "),
    });
    if w.issue_refresh {
        let refresh = format!("rt-{}", w.issued);
        w.refresh.insert(refresh.clone(), scopes);
        body["refresh_token"] = json!(refresh);
    }
    axum::Json(body).into_response()
}

fn refuse(error: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": error })),
    )
        .into_response()
}

async fn token(
    State(world): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut w = world.lock().unwrap();
    w.token_requests.push((form.clone(), basic.clone()));
    let field = |k: &str| form.get(k).cloned().unwrap_or_default();
    match field("grant_type").as_str() {
        "authorization_code" => {
            let Some(code) = w.codes.remove(&field("code")) else {
                return refuse("invalid_grant");
            };
            if s256(&field("code_verifier")) != code.challenge
                || field("redirect_uri") != code.redirect_uri
            {
                return refuse("invalid_grant");
            }
            issue(&mut w, code.scope)
        }
        "refresh_token" if w.refuse_refresh => refuse("invalid_grant"),
        "refresh_token" => match w.refresh.remove(&field("refresh_token")) {
            Some(scopes) => issue(&mut w, scopes),
            None => refuse("invalid_grant"),
        },
        "client_credentials" => {
            let expected = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{CC_ID}:{CC_SECRET}"))
            );
            if basic.as_deref() != Some(expected.as_str()) {
                return refuse("invalid_client");
            }
            let scopes = field("scope").split(' ').map(str::to_owned).collect();
            issue(&mut w, scopes)
        }
        _ => refuse("unsupported_grant_type"),
    }
}

// ------------------------------------------------------------------ the client side

fn user_client() -> OAuthClient {
    OAuthClient::new(OAuthSettings::default())
        .with_consent(Arc::new(HeadlessConsent::new(REDIRECT_URI).unwrap()))
}

async fn open(spec: HttpSpec) -> Result<Connection, UpstreamError> {
    let options = ConnectOptions::new("srv");
    tokio::time::timeout(HANG_GUARD, connect(&Target::Http(spec), &options))
        .await
        .expect("connect hung")
        .map(|(conn, _)| conn)
}

async fn call_tool(conn: &Connection, tool: &str) -> Result<String, UpstreamError> {
    let params = json!({ "name": tool, "arguments": {} }).to_string();
    let response = tokio::time::timeout(
        HANG_GUARD,
        conn.call("tools/call", Some(&params), CallOptions::default()),
    )
    .await
    .expect("call hung")?;
    let result: Value = serde_json::from_str(response.result_raw().unwrap()).unwrap();
    Ok(result["content"][0]["text"].as_str().unwrap().to_owned())
}

fn auth_detail(e: UpstreamError) -> String {
    match e {
        UpstreamError::Auth { server, detail } => {
            assert_eq!(server, "srv");
            detail
        }
        other => panic!("expected an authorization failure, got {other:?}"),
    }
}

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn client_credentials_follow_a_401_through_discovery_and_retry() {
    let servers = Servers::start(|w| {
        w.challenge_scope = Some("mcp:read".to_owned());
        w.issue_refresh = false;
    })
    .await;
    let client = OAuthClient::new(OAuthSettings {
        grant: Grant::ClientCredentials,
        client_id: Some(CC_ID.to_owned()),
        client_secret: Some(CC_SECRET.to_owned()),
        ..OAuthSettings::default()
    });
    let conn = open(servers.spec(HttpAuth::OAuth(client))).await.unwrap();
    assert_eq!(
        call_tool(&conn, "whoami").await.unwrap(),
        "whoami with mcp:read"
    );
    servers.with(|w| {
        // Before negotiating, one unauthenticated request learns that a token is needed; every
        // request after it carries one.
        assert_eq!(w.mcp_requests[0], ("ping".to_owned(), None));
        assert!(
            w.mcp_requests
                .iter()
                .skip(1)
                .all(|(_, a)| a.as_deref() == Some("Bearer at-1"))
        );
        assert!(w.registrations.is_empty() && w.authorizations.is_empty());
        let (form, _) = &w.token_requests[0];
        assert_eq!(form["grant_type"], "client_credentials");
        assert_eq!(form["scope"], "mcp:read");
        assert_eq!(form["resource"], format!("{}/mcp", w.mcp_base));
        assert!(
            !form.contains_key("client_secret"),
            "the secret travels in the Basic header only"
        );
        // The server forgets the token: the next call's 401 starts discovery again.
        w.valid.clear();
        w.mcp_requests.clear();
    });
    assert_eq!(
        call_tool(&conn, "whoami").await.unwrap(),
        "whoami with mcp:read"
    );
    conn.close().await;
    assert_eq!(
        servers.grants(),
        vec!["client_credentials", "client_credentials"]
    );
    servers.with(|w| {
        let calls: Vec<(&str, Option<&str>)> = w
            .mcp_requests
            .iter()
            .map(|(m, a)| (m.as_str(), a.as_deref()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("tools/call", Some("Bearer at-1")),
                ("tools/call", Some("Bearer at-2")),
            ]
        );
    });
}

#[tokio::test]
async fn authorization_code_with_pkce_registers_and_sends_resource_on_both_legs() {
    let servers = Servers::start(|_| {}).await;
    let conn = open(servers.spec(HttpAuth::OAuth(user_client())))
        .await
        .unwrap();
    assert_eq!(
        call_tool(&conn, "whoami").await.unwrap(),
        "whoami with mcp:read offline_access"
    );
    conn.close().await;

    servers.with(|w| {
        let resource = format!("{}/mcp", w.mcp_base);
        let reg = &w.registrations[0];
        assert_eq!(reg["redirect_uris"], json!([REDIRECT_URI]));
        assert_eq!(reg["application_type"], "native");
        assert_eq!(reg["token_endpoint_auth_method"], "none");
        assert_eq!(
            reg["grant_types"],
            json!(["authorization_code", "refresh_token"])
        );

        assert_eq!(w.authorizations.len(), 1);
        let a = &w.authorizations[0];
        assert_eq!(a["client_id"], "dcr-1");
        assert_eq!(a["response_type"], "code");
        assert_eq!(a["code_challenge_method"], "S256");
        assert_eq!(a["code_challenge"].len(), 43);
        assert_eq!(a["resource"], resource);
        // No scope in the challenge: the resource's scopes_supported, plus offline_access, which
        // the authorization server lists.
        assert_eq!(a["scope"], "mcp:read offline_access");
        assert!(!a["state"].is_empty());

        let (form, basic) = &w.token_requests[0];
        assert_eq!(form["grant_type"], "authorization_code");
        assert_eq!(form["code"], "code-1");
        assert_eq!(form["client_id"], "dcr-1");
        assert_eq!(form["redirect_uri"], REDIRECT_URI);
        assert_eq!(form["resource"], resource);
        assert_eq!(s256(&form["code_verifier"]), a["code_challenge"]);
        assert_eq!(*basic, None);
        assert_eq!(
            w.token_requests.len(),
            1,
            "the code was exchanged once, and accepted"
        );
    });
}

#[tokio::test]
async fn a_token_about_to_expire_is_refreshed_before_it_is_sent() {
    let servers = Servers::start(|w| w.first_expires_in = Some(5)).await;
    let conn = open(servers.spec(HttpAuth::OAuth(user_client())))
        .await
        .unwrap();
    call_tool(&conn, "whoami").await.unwrap();
    conn.close().await;
    assert_eq!(
        servers.grants(),
        vec!["authorization_code", "refresh_token"]
    );
    servers.with(|w| {
        let (form, _) = &w.token_requests[1];
        assert_eq!(form["refresh_token"], "rt-1");
        assert_eq!(form["resource"], format!("{}/mcp", w.mcp_base));
        assert_eq!(form["client_id"], "dcr-1");
        // The expiring token was never sent; its replacement was.
        let sent: Vec<&str> = w
            .mcp_requests
            .iter()
            .filter_map(|(_, a)| a.as_deref())
            .collect();
        assert!(!sent.contains(&"Bearer at-1"), "{sent:?}");
        assert!(sent.contains(&"Bearer at-2"), "{sent:?}");
    });
}

#[tokio::test]
async fn a_revoked_token_is_refreshed_on_401_without_asking_the_user_again() {
    let servers = Servers::start(|_| {}).await;
    let conn = open(servers.spec(HttpAuth::OAuth(user_client())))
        .await
        .unwrap();
    call_tool(&conn, "whoami").await.unwrap();
    servers.with(|w| {
        w.valid.clear();
    });
    call_tool(&conn, "whoami").await.unwrap();
    conn.close().await;
    assert_eq!(
        servers.grants(),
        vec!["authorization_code", "refresh_token"]
    );
    servers.with(|w| {
        assert_eq!(w.authorizations.len(), 1);
        assert_eq!(w.registrations.len(), 1);
        let last_two: Vec<Option<&str>> = w
            .mcp_requests
            .iter()
            .rev()
            .take(2)
            .map(|(_, a)| a.as_deref())
            .collect();
        assert_eq!(last_two, vec![Some("Bearer at-2"), Some("Bearer at-1")]);
    });
}

#[tokio::test]
async fn a_refused_refresh_falls_back_to_a_new_authorization() {
    let servers = Servers::start(|w| {
        w.first_expires_in = Some(5);
        w.refuse_refresh = true;
    })
    .await;
    let conn = open(servers.spec(HttpAuth::OAuth(user_client())))
        .await
        .unwrap();
    call_tool(&conn, "whoami").await.unwrap();
    conn.close().await;
    assert_eq!(
        servers.grants(),
        vec!["authorization_code", "refresh_token", "authorization_code"]
    );
    servers.with(|w| {
        assert_eq!(w.authorizations.len(), 2);
        assert_eq!(w.registrations.len(), 1, "the registration is reused");
        let sent: Vec<&str> = w
            .mcp_requests
            .iter()
            .filter_map(|(_, a)| a.as_deref())
            .collect();
        assert!(!sent.contains(&"Bearer at-1"), "{sent:?}");
        assert!(sent.iter().all(|a| *a == "Bearer at-2"), "{sent:?}");
    });
}

#[tokio::test]
async fn insufficient_scope_steps_up_with_the_union_of_scopes() {
    let servers = Servers::start(|w| w.challenge_scope = Some("mcp:read".to_owned())).await;
    let conn = open(servers.spec(HttpAuth::OAuth(user_client())))
        .await
        .unwrap();
    assert_eq!(
        call_tool(&conn, "whoami").await.unwrap(),
        "whoami with mcp:read offline_access"
    );
    assert_eq!(
        call_tool(&conn, "write").await.unwrap(),
        "write with mcp:read offline_access mcp:write"
    );
    conn.close().await;
    servers.with(|w| {
        let scopes: Vec<&str> = w
            .authorizations
            .iter()
            .map(|a| a["scope"].as_str())
            .collect();
        assert_eq!(
            scopes,
            vec![
                "mcp:read offline_access",
                "mcp:read offline_access mcp:write"
            ]
        );
        // One client, registered once, for both authorizations.
        assert_eq!(w.registrations.len(), 1);
    });
}

#[tokio::test]
async fn a_resource_the_server_is_not_is_refused_before_any_authorization() {
    let servers = Servers::start(|w| {
        w.prm_resource = Some("https://evil.example.com/mcp".to_owned());
    })
    .await;
    let detail = auth_detail(
        open(servers.spec(HttpAuth::OAuth(user_client())))
            .await
            .unwrap_err(),
    );
    assert!(
        detail.contains("\"https://evil.example.com/mcp\""),
        "{detail}"
    );
    assert!(
        detail.contains("refusing to ask for tokens for another resource"),
        "{detail}"
    );
    servers.with(|w| {
        assert!(w.registrations.is_empty());
        assert!(w.authorizations.is_empty());
        assert!(w.token_requests.is_empty());
    });
}

#[tokio::test]
async fn an_authorization_server_without_s256_is_refused() {
    let servers = Servers::start(|w| w.omit_pkce_methods = true).await;
    let detail = auth_detail(
        open(servers.spec(HttpAuth::OAuth(user_client())))
            .await
            .unwrap_err(),
    );
    assert!(
        detail.contains("does not advertise PKCE with S256"),
        "{detail}"
    );
    servers.with(|w| assert!(w.authorizations.is_empty() && w.token_requests.is_empty()));
}

#[tokio::test]
async fn a_token_refused_right_after_it_was_issued_ends_the_attempt() {
    let servers = Servers::start(|w| {
        w.issue_refresh = false;
        w.reject_all_tokens = true;
    })
    .await;
    let detail = auth_detail(
        open(servers.spec(HttpAuth::OAuth(user_client())))
            .await
            .unwrap_err(),
    );
    assert!(detail.contains("the server rejected the token"), "{detail}");
    servers.with(|w| assert_eq!(w.authorizations.len(), 1));
}

#[tokio::test]
async fn without_a_way_to_ask_the_user_the_error_says_to_log_in() {
    let servers = Servers::start(|_| {}).await;
    let client = OAuthClient::new(OAuthSettings::default());
    let detail = auth_detail(
        open(servers.spec(HttpAuth::OAuth(client)))
            .await
            .unwrap_err(),
    );
    assert!(detail.contains("run `manifold login srv`"), "{detail}");
    servers.with(|w| assert!(w.authorizations.is_empty()));
}

#[tokio::test]
async fn login_stores_credentials_that_a_later_client_uses_without_the_user() {
    let servers = Servers::start(|_| {}).await;
    let dir = std::env::temp_dir().join(format!("manifold-http-oauth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store: Arc<dyn TokenStore> = Arc::new(FileTokenStore::new(dir.join("oauth")));

    let login = user_client().with_store(Arc::clone(&store), "srv");
    let summary = tokio::time::timeout(
        HANG_GUARD,
        login.login(&servers.spec(HttpAuth::None), "srv"),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(summary.resource, servers.url());
    assert!(summary.refreshable);
    assert_eq!(
        summary.stored_at.as_deref(),
        Some(dir.join("oauth/srv.json").to_str().unwrap())
    );
    let stored = store.load("srv").await.unwrap().unwrap();
    assert_eq!(stored.tokens.access_token, "at-1");

    // A new process: fresh state, the store, and nobody to ask.
    let gateway = OAuthClient::new(OAuthSettings::default()).with_store(store, "srv");
    let conn = open(servers.spec(HttpAuth::OAuth(gateway))).await.unwrap();
    call_tool(&conn, "whoami").await.unwrap();
    conn.close().await;
    servers.with(|w| {
        assert_eq!(
            w.authorizations.len(),
            1,
            "the gateway did not authorize again"
        );
        assert!(
            w.mcp_requests
                .iter()
                .skip(1)
                .all(|(_, a)| a.as_deref() == Some("Bearer at-1"))
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn passthrough_sends_the_callers_token_and_only_within_its_request() {
    let servers = Servers::start(|w| w.accept_no_token = true).await;
    let conn = open(servers.spec(HttpAuth::Passthrough)).await.unwrap();
    let params = json!({ "name": "whoami", "arguments": {} }).to_string();
    let as_caller = conn.request_in_context(
        "tools/call",
        Some(&params),
        CallOptions::default(),
        None,
        Some(CallerToken(Arc::from("caller-token"))),
    );
    let answered = tokio::time::timeout(HANG_GUARD, async { as_caller.await?.response().await })
        .await
        .expect("call hung");
    assert!(answered.unwrap().result_raw().is_some());
    call_tool(&conn, "whoami").await.unwrap();
    conn.close().await;
    servers.with(|w| {
        let calls: Vec<Option<&str>> = w
            .mcp_requests
            .iter()
            .filter(|(m, _)| m == "tools/call")
            .map(|(_, a)| a.as_deref())
            .collect();
        assert_eq!(calls, vec![Some("Bearer caller-token"), None]);
        // Negotiation happened outside any caller's request: no token.
        assert_eq!(w.mcp_requests[0], ("server/discover".to_owned(), None));
        assert!(
            !w.mcp_requests.iter().any(|(m, _)| m == "ping"),
            "no OAuth probe without OAuth"
        );
        assert!(w.token_requests.is_empty());
    });
}
