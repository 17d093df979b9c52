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
    // The programs are found on the PATH the servers get, so no note is added for them.
    let bin = programs_dir("summary", &["uvx", "npx"]);
    let config = Config::from_str_with(
        &format!(
            r#"
[servers.git]
command = "uvx"
args = ["mcp-server-git", "--token", "${{TOKEN}}"]
env = {{ PATH = "{bin}" }}

[servers.memory]
command = "npx"
env = {{ PATH = "{bin}" }}

[servers.remote]
url = "https://SEKRIT.example.com/mcp"
headers = {{ Authorization = "Bearer ${{TOKEN}}" }}

[servers.old]
command = "old"
enabled = false
"#,
            bin = bin.display()
        ),
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

/// A fresh dir holding an executable file for each of `names`.
fn programs_dir(label: &str, names: &[&str]) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!(
        "manifold-config-programs-{label}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for name in names {
        let program = dir.join(name);
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

#[test]
fn a_program_that_cannot_be_found_is_noted_by_name_without_its_arguments() {
    let bin = programs_dir("missing", &["npx"]);
    let config = Config::from_str_with(
        &format!(
            r#"
[servers.time]
command = "uvx"
args = ["mcp-server-time", "--token", "${{TOKEN}}"]
env = {{ PATH = "{bin}" }}

[servers.found]
command = "npx"
env = {{ PATH = "{bin}" }}

[servers.local]
command = "./no-such-server"
args = ["${{TOKEN}}"]
cwd = "{bin}"
"#,
            bin = bin.display()
        ),
        "m.toml",
        None,
        &env(),
    )
    .unwrap();
    let report = check_report(&config);
    let notes: Vec<&str> = report.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(
        notes,
        [
            format!(
                "note: servers.local: \"./no-such-server\" does not exist (relative to {}), so it cannot start; install it, or write its full path as command",
                bin.display()
            ),
            format!(
                "note: servers.time: \"uvx\" is not an executable file in any dir of the PATH it gets ({}), so it cannot start; install it, or write its full path as command",
                bin.display()
            ),
        ]
    );
    assert!(
        !report.contains("SEKRIT") && !report.contains("--token"),
        "{report}"
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
