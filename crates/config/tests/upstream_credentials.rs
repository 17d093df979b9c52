//! `[servers.NAME.oauth]` and `token_passthrough`: what loads, and the exact message (with its
//! position) for each mistake.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use manifold_config::{Config, ConfigErrors, FixedEnvironment, ServerKind};
use manifold_upstream::auth::{Grant, HttpAuth};

fn env() -> FixedEnvironment {
    FixedEnvironment::new()
        .with_var("HOME", "/home/ada")
        .with_var("CLIENT_SECRET", "s3cret-from-env")
}

fn load(text: &str) -> Result<Config, ConfigErrors> {
    Config::from_str_with(text, "m.toml", Some(Path::new("/etc/manifold")), &env())
}

fn auth_of(text: &str) -> HttpAuth {
    let config = match load(text) {
        Ok(c) => c,
        Err(e) => panic!("expected the config to load, got:\n{e}"),
    };
    match &config.server("s").unwrap().kind {
        ServerKind::Http { spec, .. } => spec.auth.clone(),
        ServerKind::Stdio { .. } => panic!("not an HTTP server"),
    }
}

/// Every rendered error (with file:line:col).
fn rendered(text: &str) -> Vec<String> {
    match load(text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e.iter().map(|e| e.render()).collect(),
    }
}

#[test]
fn a_full_oauth_table_loads() {
    let auth = auth_of(
        r#"
[servers.s]
url = "https://mcp.example.com/mcp"
[servers.s.oauth]
grant = "client_credentials"
client_id = "manifold"
client_secret = "${CLIENT_SECRET}"
scopes = ["read", "write"]
"#,
    );
    let settings = auth.oauth_client().unwrap().settings().clone();
    assert_eq!(settings.grant, Grant::ClientCredentials);
    assert_eq!(settings.client_id.as_deref(), Some("manifold"));
    assert_eq!(settings.client_secret.as_deref(), Some("s3cret-from-env"));
    assert_eq!(
        settings.scopes,
        Some(vec!["read".to_owned(), "write".to_owned()])
    );
    assert_eq!(settings.client_name, "Manifold");
}

#[test]
fn an_empty_oauth_table_means_the_authorization_code_grant_with_discovery() {
    let auth = auth_of(
        "[servers.s]\nurl = \"https://mcp.example.com/mcp\"\n[servers.s.oauth]\nredirect_uri = \"http://127.0.0.1:8976/callback\"\nclient_metadata_url = \"https://example.com/manifold.json\"\n",
    );
    let settings = auth.oauth_client().unwrap().settings().clone();
    assert_eq!(settings.grant, Grant::AuthorizationCode);
    assert_eq!(settings.client_id, None);
    assert_eq!(
        settings.redirect_uri.as_deref(),
        Some("http://127.0.0.1:8976/callback")
    );
    assert_eq!(
        settings.client_metadata_url.as_deref(),
        Some("https://example.com/manifold.json")
    );
}

#[test]
fn token_passthrough_is_an_explicit_choice() {
    assert!(matches!(
        auth_of("[servers.s]\nurl = \"https://h/mcp\"\ntoken_passthrough = true\n"),
        HttpAuth::Passthrough
    ));
    assert!(matches!(
        auth_of("[servers.s]\nurl = \"https://h/mcp\"\ntoken_passthrough = false\n"),
        HttpAuth::None
    ));
    assert!(matches!(
        auth_of("[servers.s]\nurl = \"https://h/mcp\"\n"),
        HttpAuth::None
    ));
}

#[test]
fn the_secret_never_shows_when_a_server_is_printed() {
    let config = load(
        "[servers.s]\nurl = \"https://h/mcp\"\n[servers.s.oauth]\nclient_id = \"${CLIENT_SECRET}\"\nclient_secret = \"literal-secret\"\n",
    )
    .unwrap();
    let shown = format!("{:?}", config.server("s").unwrap());
    assert!(!shown.contains("literal-secret"), "{shown}");
    assert!(!shown.contains("s3cret-from-env"), "{shown}");
    assert!(shown.contains("OAuth"), "{shown}");
}

#[test]
fn contradictions_are_refused_at_their_position() {
    assert_eq!(
        rendered(
            "[servers.s]\nurl = \"https://h/mcp\"\ntoken_passthrough = true\nheaders = { Authorization = \"Bearer x\" }\n[servers.s.oauth]\nclient_id = \"c\"\n"
        ),
        vec![
            "m.toml:3:1: error: servers.s.token_passthrough: a server takes either Manifold's own OAuth token or the caller's, not both; remove token_passthrough, or remove the [oauth] table",
            "m.toml:4:13: error: servers.s.headers.Authorization: is set by the OAuth client configured for this server; remove it",
        ]
    );
    assert_eq!(
        rendered(
            "[servers.s]\nurl = \"https://h/mcp\"\ntoken_passthrough = true\nheaders = { authorization = \"Bearer x\" }\n"
        ),
        vec![
            "m.toml:4:13: error: servers.s.headers.authorization: is the caller's token with token_passthrough = true; remove it"
        ]
    );
}

#[test]
fn grants_need_what_they_use() {
    assert_eq!(
        rendered(
            "[servers.s]\nurl = \"https://h/mcp\"\n[servers.s.oauth]\ngrant = \"client_credentials\"\nclient_id = \"c\"\n"
        ),
        vec![
            "m.toml:4:1: error: servers.s.oauth.grant: the client_credentials grant needs client_id and client_secret; add client_id = \"...\" and client_secret = \"${ENV_VAR}\""
        ]
    );
    assert_eq!(
        rendered(
            "[servers.s]\nurl = \"https://h/mcp\"\n[servers.s.oauth]\nclient_secret = \"x\"\n"
        ),
        vec![
            "m.toml:4:17: error: servers.s.oauth.client_secret: is a client secret without a client_id; add client_id = \"...\" (the id the secret belongs to)"
        ]
    );
    assert_eq!(
        rendered("[servers.s]\nurl = \"https://h/mcp\"\n[servers.s.oauth]\ngrant = \"implicit\"\n"),
        vec![
            "m.toml:4:9: error: servers.s.oauth.grant = \"implicit\": is not one of authorization_code, client_credentials; write one of \"authorization_code\", \"client_credentials\""
        ]
    );
}

#[test]
fn urls_and_scopes_are_checked() {
    let errors = rendered(
        "[servers.s]\nurl = \"https://h/mcp\"\n[servers.s.oauth]\nclient_metadata_url = \"http://example.com/m.json\"\nredirect_uri = \"http://example.com:80/cb\"\nscopes = [\"read write\", \"\"]\nscope = \"x\"\n",
    );
    assert_eq!(
        errors,
        vec![
            "m.toml:4:23: error: servers.s.oauth.client_metadata_url = \"http://example.com/m.json\": is not an https:// URL with a path (a client ID metadata document is served over HTTPS at a path, e.g. /manifold.json); write e.g. \"https://example.com/oauth/manifold.json\"",
            "m.toml:5:16: error: servers.s.oauth.redirect_uri = \"http://example.com:80/cb\": is not a loopback http:// URL with a port (manifold login listens on this machine for the redirect); write e.g. \"http://127.0.0.1:8976/callback\" (the port registered with the authorization server)",
            "m.toml:6:11: error: servers.s.oauth.scopes[0] = \"read write\": is not one scope (empty, or holds spaces); write each scope as its own string, e.g. [\"read\", \"write\"]",
            "m.toml:6:25: error: servers.s.oauth.scopes[1] = \"\": is not one scope (empty, or holds spaces); write each scope as its own string, e.g. [\"read\", \"write\"]",
            "m.toml:7:1: error: servers.s.oauth.scope: unknown key; write scopes = [\"read\", \"write\"]",
        ]
    );
}

#[test]
fn stdio_servers_take_no_credentials_of_this_kind() {
    assert_eq!(
        rendered("[servers.s]\ncommand = \"srv\"\ntoken_passthrough = true\n"),
        vec![
            "m.toml:3:1: error: servers.s.token_passthrough: only applies to servers with a url; remove it (this server has command, so it runs over stdio)"
        ]
    );
}
