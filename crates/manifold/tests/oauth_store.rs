//! Upstream OAuth tokens in the store, through the real binary: `manifold login` against an
//! authorization server and a protected MCP server written here (axum on 127.0.0.1:0) stores the
//! tokens sealed (the token never appears in the database files), and `manifold serve` then uses
//! them without asking anyone; token files an earlier version kept in `data_dir/oauth` are
//! imported once by `manifold check` (the directory renamed, a second run importing nothing) and
//! used; a different key (`[store] token_key`) is refused with the message that names it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use manifold_testkit::{GatewayProcess, ServeCommand};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Generous bound on anything that should finish promptly: a hang guard, never a measurement.
const HANG_GUARD: Duration = Duration::from_secs(60);
/// Access tokens this authorization server issues start with this (distinct enough to search the
/// database files for).
const TOKEN_PREFIX: &str = "at-sealed-check-";

#[derive(Default)]
struct World {
    mcp_base: String,
    as_base: String,
    valid: HashMap<String, Vec<String>>,
    codes: HashMap<String, (String, Vec<String>, String)>,
    issued: u64,
    authorizations: usize,
    mcp_tokens: Vec<Option<String>>,
}

type Shared = Arc<Mutex<World>>;

async fn serve_app(app: Router) -> String {
    let addr = manifold_testkit::serve_router(app).await.unwrap();
    format!("http://{addr}")
}

async fn start_servers() -> Shared {
    let world: Shared = Arc::new(Mutex::new(World::default()));
    let mcp_app = Router::new()
        .route("/mcp", post(mcp))
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .with_state(Arc::clone(&world));
    let as_app = Router::new()
        .route("/.well-known/oauth-authorization-server", get(as_metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .with_state(Arc::clone(&world));
    let mcp_base = serve_app(mcp_app).await;
    let as_base = serve_app(as_app).await;
    {
        let mut w = world.lock().unwrap();
        w.mcp_base = mcp_base;
        w.as_base = as_base;
    }
    world
}

async fn prm(State(world): State<Shared>) -> Response {
    let w = world.lock().unwrap();
    axum::Json(json!({
        "resource": format!("{}/mcp", w.mcp_base),
        "authorization_servers": [w.as_base],
        "scopes_supported": ["mcp:read"],
    }))
    .into_response()
}

async fn mcp(State(world): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::to_owned);
    let mut w = world.lock().unwrap();
    w.mcp_tokens.push(token.clone());
    let Some(scopes) = token.as_deref().and_then(|t| w.valid.get(t)).cloned() else {
        let challenge = format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            w.mcp_base
        );
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
            "unauthorized",
        )
            .into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method.as_str() {
        "server/discover" => json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": { "tools": {} },
            "serverInfo": { "name": "protected", "version": "1.0.0" },
        }),
        "tools/list" => json!({
            "tools": [{ "name": "whoami", "inputSchema": { "type": "object" } }],
        }),
        "tools/call" => json!({
            "content": [{ "type": "text", "text": format!("whoami with {}", scopes.join(" ")) }],
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

async fn as_metadata(State(world): State<Shared>) -> Response {
    let base = world.lock().unwrap().as_base.clone();
    axum::Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "scopes_supported": ["mcp:read"],
    }))
    .into_response()
}

async fn register(body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": "dcr-1",
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
    w.authorizations += 1;
    let code = format!("code-{}", w.authorizations);
    let field = |k: &str| q.get(k).cloned().unwrap_or_default();
    let scopes = field("scope").split(' ').map(str::to_owned).collect();
    w.codes.insert(
        code.clone(),
        (field("code_challenge"), scopes, field("redirect_uri")),
    );
    let mut target = url::Url::parse(&field("redirect_uri")).unwrap();
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &field("state"))
        .append_pair("iss", &w.as_base);
    Redirect::to(target.as_str()).into_response()
}

async fn token(State(world): State<Shared>, Form(form): Form<HashMap<String, String>>) -> Response {
    let mut w = world.lock().unwrap();
    let field = |k: &str| form.get(k).cloned().unwrap_or_default();
    let refuse = || {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({ "error": "invalid_grant" })),
        )
            .into_response()
    };
    if field("grant_type") != "authorization_code" {
        return refuse();
    }
    let Some((challenge, scopes, redirect_uri)) = w.codes.remove(&field("code")) else {
        return refuse();
    };
    let s256 = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(field("code_verifier").as_bytes()));
    if s256 != challenge || field("redirect_uri") != redirect_uri {
        return refuse();
    }
    w.issued += 1;
    let access = format!("{TOKEN_PREFIX}{}", w.issued);
    w.valid.insert(access.clone(), scopes.clone());
    axum::Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": 3600,
        "scope": scopes.join(" "),
    }))
    .into_response()
}

// ------------------------------------------------------------------ the binary

fn write_config(path: &Path, data_dir: &Path, world: &Shared, store_extra: &str) {
    let mcp_url = format!("{}/mcp", world.lock().unwrap().mcp_base);
    std::fs::write(
        path,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n{store_extra}\n[servers.prot]\nurl = \"{mcp_url}\"\nera = \"modern\"\ntransport = \"streamable-http\"\n\n[servers.prot.oauth]\n",
            data_dir.display()
        ),
    )
    .unwrap();
}

fn setup(name: &str, world: &Shared) -> (PathBuf, PathBuf) {
    let dir = manifold_testkit::fresh_dir(&format!("oauth-store-{name}")).unwrap();
    let config = dir.join("manifold.toml");
    write_config(&config, &dir.join("data"), world, "");
    (dir, config)
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(MANIFOLD);
    c.args(args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env_remove("RUST_LOG");
    c
}

fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = command(dir, args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `manifold serve` with `env` added, its stderr in `RUN_NAME.stderr`.
fn serve(dir: &Path, config: &Path, run_name: &str, env: &[(&str, &str)]) -> GatewayProcess {
    let mut serve = ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .log(&format!("{run_name}.stderr"));
    for (k, v) in env {
        serve = serve.env(k, v);
    }
    serve.start().unwrap()
}

/// `manifold login prot`, with this test as the browser: the authorization URL it prints is
/// fetched, and the redirect followed to its loopback listener.
async fn login(dir: &Path, config: &Path) -> (i32, String, String) {
    let mut child = command(
        dir,
        &["login", "prot", "--config", config.to_str().unwrap()],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let authorization_url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "login ended without an authorization URL: {seen}"
        );
        seen.push_str(&line);
        let trimmed = line.trim();
        if trimmed.starts_with("http://") && trimmed.contains("/authorize?") {
            break trimmed.to_owned();
        }
    };
    let answer = tokio::time::timeout(HANG_GUARD, {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::get(&authorization_url)
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(answer.status(), reqwest::StatusCode::OK);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (code, stdout, seen + &rest)
}

/// Calls `prot__whoami` through the gateway, retrying while the server is still connecting.
fn whoami(url: &str, dir: &Path) -> (i32, String, String) {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let got = run(dir, &["call", url, "prot__whoami"]);
        if got.0 == 0 || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `needle` appears in any file of the SQLite store (the database and its WAL).
fn in_database_files(data_dir: &Path, needle: &str) -> bool {
    std::fs::read_dir(data_dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("store.sqlite"))
        .any(|e| {
            std::fs::read(e.path())
                .unwrap_or_default()
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
        })
}

#[tokio::test(flavor = "multi_thread")]
async fn login_stores_sealed_tokens_that_serve_then_uses_without_asking() {
    let world = start_servers().await;
    let (dir, config) = setup("login", &world);
    let (code, out, err) = login(&dir, &config).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let data = dir.join("data");
    assert!(out.contains("logged in to \"prot\""), "{out}");
    assert!(
        out.contains(&format!(
            "stored in the store ({}), sealed with the key from {}",
            data.join("store.sqlite").display(),
            data.join("store.key").display()
        )),
        "{out}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(data.join("store.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(
        !data.join("oauth").exists(),
        "no token file is written any more"
    );
    let issued = format!("{TOKEN_PREFIX}1");
    assert!(
        !in_database_files(&data, &issued),
        "the token is in the database in the clear"
    );

    let s = serve(&dir, &config, "serve", &[]);
    let (code, out, err) = whoami(s.url(), &dir);
    assert_eq!(code, 0, "{err}\n{}", s.log());
    assert!(out.starts_with("whoami with mcp:read"), "{out}");
    let w = world.lock().unwrap();
    assert_eq!(w.authorizations, 1, "the gateway did not authorize again");
    assert!(w.mcp_tokens.iter().any(|t| t.as_deref() == Some(&issued)));
}

async fn seed_token_file(data_dir: &Path, world: &Shared, access: &str) {
    use manifold_upstream::auth::registration::{
        ClientAuthMethod, ClientOrigin, ClientRegistration,
    };
    use manifold_upstream::auth::store::STORE_VERSION;
    use manifold_upstream::auth::token::TokenSet;
    use manifold_upstream::auth::{FileTokenStore, StoredCredentials, TOKEN_STORE_DIR, TokenStore};
    let credentials = {
        let mut w = world.lock().unwrap();
        w.valid
            .insert(access.to_owned(), vec!["mcp:read".to_owned()]);
        StoredCredentials {
            version: STORE_VERSION,
            resource: format!("{}/mcp", w.mcp_base),
            issuer: w.as_base.clone(),
            token_endpoint: format!("{}/token", w.as_base),
            client: ClientRegistration {
                issuer: w.as_base.clone(),
                client_id: "dcr-1".to_owned(),
                client_secret: None,
                auth_method: ClientAuthMethod::None,
                origin: ClientOrigin::Registered,
                redirect_uris: vec!["http://127.0.0.1:9/callback".to_owned()],
            },
            tokens: TokenSet {
                access_token: access.to_owned(),
                refresh_token: None,
                expires_at: Some(manifold_upstream::auth::token::now() + 3600),
                scope: Some("mcp:read".to_owned()),
                requested_scope: Some("mcp:read".to_owned()),
            },
        }
    };
    FileTokenStore::new(data_dir.join(TOKEN_STORE_DIR))
        .save("prot", &credentials)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn old_token_files_are_imported_once_by_check_and_used_by_serve() {
    let world = start_servers().await;
    let (dir, config) = setup("import", &world);
    let data = dir.join("data");
    seed_token_file(&data, &world, "at-from-an-old-file").await;
    let cfg = config.to_str().unwrap();

    let (code, out, err) = run(&dir, &["check", cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "Imported the OAuth tokens of 1 server(s) from {} into the store (prot); 0 already there (none); the old directory is now {}.",
            data.join("oauth").display(),
            data.join("oauth.imported").display()
        )),
        "{out}"
    );
    assert!(!data.join("oauth").exists());
    assert!(data.join("oauth.imported/prot.json").exists());
    assert!(!in_database_files(&data, "at-from-an-old-file"));
    let (code, out, err) = run(&dir, &["check", cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("Imported"),
        "a second run imports nothing: {out}"
    );

    let s = serve(&dir, &config, "serve", &[]);
    let (code, out, err) = whoami(s.url(), &dir);
    assert_eq!(code, 0, "{err}\n{}", s.log());
    assert_eq!(out.trim(), "whoami with mcp:read");
    assert_eq!(world.lock().unwrap().authorizations, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_sealed_with_another_key_are_refused_naming_the_key() {
    let world = start_servers().await;
    let (dir, config) = setup("wrong-key", &world);
    let data = dir.join("data");
    seed_token_file(&data, &world, "at-sealed-with-store-key").await;
    let (code, _, err) = run(&dir, &["check", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(data.join("store.key").exists());

    // The same data, now with a configured key that is not the one the tokens were sealed with.
    let other = dir.join("other-key.toml");
    write_config(
        &other,
        &data,
        &world,
        "[store]\ntoken_key = \"env:MANIFOLD_TEST_TOKEN_KEY\"\n",
    );
    let key = "ef".repeat(32);
    let s = serve(
        &dir,
        &other,
        "serve",
        &[("MANIFOLD_TEST_TOKEN_KEY", key.as_str())],
    );
    let (code, _, err) = run(&dir, &["call", s.url(), "prot__whoami"]);
    assert_ne!(code, 0, "{err}");
    let deadline = Instant::now() + HANG_GUARD;
    let expected = "the stored OAuth tokens of server \\\"prot\\\" cannot be decrypted with the key from the environment variable MANIFOLD_TEST_TOKEN_KEY ([store] token_key); run `manifold login prot` again or restore the key";
    let plain = expected.replace("\\\"", "\"");
    while !(s.log().contains(expected) || s.log().contains(&plain)) {
        assert!(Instant::now() < deadline, "{}", s.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        world.lock().unwrap().mcp_tokens.iter().all(|t| t.is_none()),
        "no token reached the server"
    );
}
