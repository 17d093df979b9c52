//! `manifold check` and `manifold import` as a person runs them: exit statuses and what they print;
//! and `manifold serve` refusing a port that is taken.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn manifold(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    // No configuration of the machine's user and no MANIFOLD_CONFIG: only what a test writes.
    manifold_with(dir, args, &dir.join("no-user-config"), None)
}

/// `manifold ARGS` in `dir` with `XDG_CONFIG_HOME` = `xdg` and `MANIFOLD_CONFIG` = `named`.
fn manifold_with(
    dir: &std::path::Path,
    args: &[&str],
    xdg: &std::path::Path,
    named: Option<&std::path::Path>,
) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_manifold"));
    command
        .args(args)
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", xdg)
        .env_remove("MANIFOLD_CONFIG");
    if let Some(named) = named {
        command.env("MANIFOLD_CONFIG", named);
    }
    let out = command.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    manifold_testkit::fresh_dir(&format!("cli-config-{name}")).unwrap()
}

#[test]
fn check_reports_every_problem_with_its_line_and_exits_1() {
    let dir = temp_dir("bad");
    std::fs::write(
        dir.join("manifold.toml"),
        "[servers.git]\ncommand = \"mcp-server-git\"\ntimeout = \"sixty\"\n[servers.web]\nurl = \"ftp://example.com/mcp\"\n",
    )
    .unwrap();
    let (code, _, err) = manifold(&dir, &["check"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("manifold.toml:3:11: error: servers.git.timeout = \"sixty\": not a duration"),
        "{err}"
    );
    assert!(err.contains("manifold.toml:5:"), "{err}");
    assert!(err.contains("2 problems"), "{err}");
}

#[test]
fn check_without_a_file_says_how_to_get_one() {
    let dir = temp_dir("none");
    let (code, _, err) = manifold(&dir, &["check"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("neither ./manifold.toml nor")
            && err.contains("no-user-config/manifold/manifold.toml exists")
            && err.contains("manifold import"),
        "{err}"
    );
}

#[test]
fn commands_find_the_configuration_named_by_the_variable_then_here_then_the_users() {
    let dir = temp_dir("search-order");
    let xdg = dir.join("xdg");
    let here = dir.join("here");
    std::fs::create_dir_all(xdg.join("manifold")).unwrap();
    std::fs::create_dir_all(&here).unwrap();
    let server = |name: &str| format!("[servers.{name}]\ncommand = \"/bin/true\"\n");
    let user = xdg.join("manifold/manifold.toml");
    std::fs::write(&user, server("from_user")).unwrap();
    // Launched from a directory with no configuration (as a client launches `manifold stdio`).
    let (code, out, err) = manifold_with(&here, &["check"], &xdg, None);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("{}: ok", user.display())) && out.contains("stdio: from_user"),
        "{out}"
    );
    std::fs::write(here.join("manifold.toml"), server("from_here")).unwrap();
    let (_, out, _) = manifold_with(&here, &["check"], &xdg, None);
    assert!(out.contains("stdio: from_here"), "{out}");
    let named = dir.join("named.toml");
    std::fs::write(&named, server("from_variable")).unwrap();
    let (_, out, _) = manifold_with(&here, &["check"], &xdg, Some(&named));
    assert!(out.contains("stdio: from_variable"), "{out}");
    // `add` edits the file the others use: with no local file, the user's.
    std::fs::remove_file(here.join("manifold.toml")).unwrap();
    let (code, _, err) = manifold_with(&here, &["add", "added", "--", "/bin/true"], &xdg, None);
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::read_to_string(&user)
            .unwrap()
            .contains("[servers.added]")
    );
    assert!(!here.join("manifold.toml").exists());
}

#[test]
fn import_writes_toml_that_check_accepts() {
    let dir = temp_dir("import");
    std::fs::write(
        dir.join("claude.json"),
        r#"{"mcpServers":{"fs":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/tmp"]},"remote":{"url":"https://example.com/mcp"}}}"#,
    )
    .unwrap();
    let (code, toml, _) = manifold(&dir, &["import", "claude.json"]);
    assert_eq!(code, 0);
    assert!(
        toml.contains("[servers.fs]") && toml.contains("[servers.remote]"),
        "{toml}"
    );
    std::fs::write(dir.join("imported.toml"), &toml).unwrap();
    let (code, report, err) = manifold(&dir, &["check", "imported.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(report.contains("servers: 2 (1 stdio, 1 http)"), "{report}");
}

#[test]
fn serve_on_a_taken_port_says_so_once_and_how_to_pick_another() {
    let dir = temp_dir("port-taken");
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = holder.local_addr().unwrap().to_string();
    std::fs::write(
        dir.join("manifold.toml"),
        format!(
            "[gateway]\nlisten = \"{addr}\"\ndata_dir = \"{}\"\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let (code, _, err) = manifold(&dir, &["serve"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err.matches(&format!("could not listen on {addr}")).count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("Address already in use") && err.contains("pass --listen 127.0.0.1:PORT"),
        "{err}"
    );
}

#[test]
fn check_says_when_serve_would_refuse_an_address_without_authentication() {
    let dir = temp_dir("exposed");
    let write = |extra: &str| {
        std::fs::write(
            dir.join("manifold.toml"),
            format!("[gateway]\nlisten = \"0.0.0.0:7391\"\n{extra}"),
        )
        .unwrap();
    };
    write("");
    let (code, out, err) = manifold(&dir, &["check"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("note: manifold serve refuses to start with this: refusing to listen on 0.0.0.0:7391 without authentication")
            && out.contains("pass --insecure-no-auth"),
        "{out}"
    );
    // Saying that something in front authenticates is a choice serve accepts.
    write("[auth]\ninsecure_no_auth = true\n");
    let (_, out, _) = manifold(&dir, &["check"]);
    assert!(!out.contains("refuses to start"), "{out}");
}

#[test]
fn a_header_or_variable_that_does_not_parse_is_named_by_position_never_repeated() {
    let dir = temp_dir("secret-args");
    let (code, _, err) = manifold(
        &dir,
        &[
            "add",
            "remote",
            "https://mcp.example.com/mcp",
            "--header",
            "X-Team=core",
            "--header",
            "mfk_secret_value_0123",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the 2nd --header is not 'Name: value' or 'Name=value'")
            && !err.contains("mfk_secret"),
        "{err}"
    );
    let (code, _, err) = manifold(
        &dir,
        &[
            "call",
            "http://127.0.0.1:9/mcp",
            "echo",
            "--header",
            "Bearer mfk_secret_value_0123",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the 1st --header is not 'Name: value' or 'Name=value'")
            && !err.contains("mfk_secret"),
        "{err}"
    );
    let (code, _, err) = manifold(
        &dir,
        &[
            "call",
            "echo",
            "--env",
            "mfk_secret_value_0123",
            "--",
            "true",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the 1st --env is not NAME=VALUE") && !err.contains("mfk_secret"),
        "{err}"
    );
    // manifold add takes curl's form too.
    let (code, _, err) = manifold(
        &dir,
        &[
            "add",
            "remote",
            "https://mcp.example.com/mcp",
            "--header",
            "X-Team: core",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(dir.join("manifold.toml")).unwrap();
    assert!(text.contains(r#"headers = { X-Team = "core" }"#), "{text}");
}
