//! What `manifold check` prints for a good configuration, and that a bad one yields its errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use manifold_config::{Config, FixedEnvironment, check, check_report};

fn env() -> FixedEnvironment {
    FixedEnvironment::new()
        .with_var("HOME", "/home/ada")
        .with_var("TOKEN", "tok-SEKRIT")
}

#[test]
fn the_report_summarises_without_values() {
    let config = Config::from_str_with(
        r#"
[servers.git]
command = "uvx"
args = ["mcp-server-git", "--token", "${TOKEN}"]

[servers.memory]
command = "npx"

[servers.remote]
url = "https://SEKRIT.example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }

[servers.old]
command = "old"
enabled = false
"#,
        "manifold.toml",
        None,
        &env(),
    )
    .unwrap();
    assert_eq!(
        check_report(&config),
        "\
manifold.toml: ok
listen: 127.0.0.1:7391 (this machine only)
naming: always, tool names up to 64 characters; discovery: full
store: SQLite, /home/ada/.local/share/manifold/store.sqlite (one Manifold process)
servers: 3 (2 stdio, 1 http)
  stdio: git, memory
  http: remote
  disabled: old
"
    );
}

#[test]
fn the_report_notes_what_deserves_a_second_look() {
    let config = Config::from_str_with(
        r#"
[gateway]
listen = "0.0.0.0:7391"
naming = "conditional"
discovery = "search"
allowed_origins = ["*"]

[servers.lan]
url = "http://10.0.0.5/mcp"
allow_insecure_http = true
"#,
        "m.toml",
        None,
        &env(),
    )
    .unwrap();
    assert_eq!(
        check_report(&config),
        "\
m.toml: ok
listen: 0.0.0.0:7391 (reachable from other machines)
naming: conditional, tool names up to 64 characters; discovery: search
store: SQLite, /home/ada/.local/share/manifold/store.sqlite (one Manifold process)
servers: 1 (0 stdio, 1 http)
  http: lan
note: listening on 0.0.0.0:7391 accepts connections from other machines; allowed_hosts is localhost, 127.0.0.1, ::1
note: allowed_origins contains \"*\": any web page this machine's browser opens can call Manifold
note: servers.lan uses plain http:// (allow_insecure_http = true)
"
    );
}

#[test]
fn no_servers_is_said_plainly() {
    let config = Config::from_str_with("", "m.toml", None, &env()).unwrap();
    assert!(check_report(&config).contains("\nservers: none enabled\n"));
}

#[test]
fn check_on_a_bad_file_returns_every_error() {
    let dir = std::env::temp_dir().join(format!("manifold-config-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("manifold.toml");
    std::fs::write(
        &path,
        "[servers.a]\ncommand = \"a\"\ntimeout = \"soon\"\n[servers.b]\nurl = \"ws://b\"\n",
    )
    .unwrap();
    let errors = check(&path).unwrap_err();
    assert_eq!(errors.len(), 2);
    assert_eq!(errors.errors[0].line, 3);
    assert_eq!(errors.errors[1].line, 5);
    std::fs::write(&path, "[servers.a]\ncommand = \"a\"\n").unwrap();
    let report = check(&path).unwrap();
    assert!(report.starts_with(&format!("{}: ok\n", path.display())));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_report_names_a_postgres_store_without_its_credentials() {
    let config = Config::from_str_with(
        "[store]\nurl = \"postgres://mf:${TOKEN}@db.internal:5432/manifold?sslmode=require\"\n",
        "m.toml",
        None,
        &env(),
    )
    .unwrap();
    let report = check_report(&config);
    assert!(
        report.contains("\nstore: PostgreSQL at db.internal:5432/manifold\n"),
        "{report}"
    );
    assert!(
        !report.contains("SEKRIT") && !report.contains("mf:"),
        "{report}"
    );
}
