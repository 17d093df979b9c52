//! `manifold serve` and `manifold stdio` end to end: the binary in front of real stdio servers,
//! reached by the binary's own client over Streamable HTTP (both eras) and over stdio.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use manifold_testkit::{GatewayProcess, ServeCommand};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

fn temp_dir(name: &str) -> std::path::PathBuf {
    manifold_testkit::fresh_dir(&format!("cli-serve-{name}")).unwrap()
}

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let peer = manifold_testkit::test_peer().unwrap();
    let path = dir.join("manifold.toml");
    std::fs::write(
        &path,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n[servers.peer]\ncommand = \"{}\"\nargs = [\"stdio\"]\n",
            dir.join("data").display(),
            peer.display()
        ),
    )
    .unwrap();
    path
}

fn serve(dir: &std::path::Path, args: &[&str]) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir).args(args).start().unwrap()
}

fn client(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(MANIFOLD).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn serve_puts_configured_servers_behind_one_url_for_both_eras() {
    let dir = temp_dir("both");
    let cfg = config(&dir);
    let s = serve(&dir, &["--config", cfg.to_str().unwrap()]);
    for era in ["legacy", "modern"] {
        let (code, out, err) = client(&[
            "call",
            s.url(),
            "peer__echo",
            "--arg",
            "message=hello",
            "--era",
            era,
        ]);
        assert_eq!((code, out.trim()), (0, "hello"), "era {era}: {err}");
    }
    let (code, out, _) = client(&["list", "tools", s.url()]);
    assert_eq!(code, 0);
    let names: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        &names[..3],
        [
            "manifold_health",
            "manifold_search_tools",
            "manifold_call_tool"
        ]
    );
    assert!(names.contains(&"peer__add"), "{names:?}");
}

#[test]
fn serve_without_configuration_offers_the_built_in_tools() {
    let dir = temp_dir("empty");
    let s = serve(&dir, &["--listen", "127.0.0.1:0"]);
    let (code, out, err) = client(&["call", s.url(), "manifold_health", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["structuredContent"]["status"], "healthy");
    assert_eq!(v["structuredContent"]["upstreams"], serde_json::json!([]));
}

#[test]
fn serve_refuses_to_listen_beyond_this_machine_without_authentication() {
    let dir = temp_dir("public");
    let out = Command::new(MANIFOLD)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .current_dir(&dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to listen on 0.0.0.0"), "{err}");
}

#[test]
fn stdio_mode_serves_one_client_over_stdin_and_stdout() {
    let dir = temp_dir("stdio");
    let cfg = config(&dir);
    let (code, out, err) = client(&[
        "call",
        "peer__echo",
        "--arg",
        "message=over-stdio",
        "--",
        MANIFOLD,
        "stdio",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!((code, out.trim()), (0, "over-stdio"), "{err}");
}

#[test]
fn log_format_json_writes_one_json_object_per_line_on_stderr() {
    let dir = temp_dir("jsonlogs");
    let mut child = Command::new(MANIFOLD)
        .args([
            "-v",
            "--log-format",
            "json",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .current_dir(&dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Lines before "listens" are possible (a start that sweeps processes another test's killed
    // gateway left behind warns first); each must be a JSON object all the same.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut listens = None;
    for _ in 0..20 {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let v: serde_json::Value =
            serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert!(v.is_object(), "{v}");
        if v["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("listens"))
        {
            listens = Some(v);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let v = listens.expect("a JSON line saying the gateway listens");
    assert_eq!(v["level"], "INFO", "{v}");
}

/// Reads `manifold stdio`'s answers on a thread, so that a test can bound each wait.
fn answer_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<serde_json::Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Ok(v) = serde_json::from_str(&line)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// The next answer, past notifications (a `list_changed` as a server comes up).
fn next_answer(
    answers: &std::sync::mpsc::Receiver<serde_json::Value>,
    within: std::time::Duration,
) -> serde_json::Value {
    loop {
        let v = answers.recv_timeout(within).unwrap();
        if v.get("id").is_some() {
            return v;
        }
    }
}

#[test]
fn stdio_greets_while_a_server_starts_and_lists_its_tools_once_it_has() {
    use std::io::Write as _;
    use std::time::Duration;
    // Shorter than the 30 s the gateway gives a first start: a greeting that waited for this
    // server would not come in time.
    const GREETING_GUARD: Duration = Duration::from_secs(20);
    let dir = temp_dir("slow-start");
    let go = dir.join("go");
    let peer = manifold_testkit::test_peer().unwrap();
    let cfg = dir.join("manifold.toml");
    std::fs::write(
        &cfg,
        format!(
            "[gateway]\ndata_dir = \"{}\"\n\n[servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", \"while [ ! -e '{}' ]; do sleep 0.05; done; exec '{}' stdio\"]\nsandbox = {{ profile = \"off\" }}\n",
            dir.join("data").display(),
            go.display(),
            peer.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(MANIFOLD)
        .args(["stdio", "--config", cfg.to_str().unwrap()])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let answers = answer_lines(child.stdout.take().unwrap());
    let mut send = |line: &str| writeln!(stdin, "{line}").unwrap();

    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    let greeting = next_answer(&answers, GREETING_GUARD);
    assert_eq!(greeting["id"], 1, "{greeting}");
    assert_eq!(greeting["result"]["protocolVersion"], "2025-06-18");
    assert!(!go.exists());

    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    send(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    // A ping does not read the catalog: it is answered while the list waits for the server.
    let pong = next_answer(&answers, GREETING_GUARD);
    assert_eq!(pong["id"], 3, "{pong}");

    std::fs::write(&go, "").unwrap();
    let listed = next_answer(&answers, Duration::from_secs(60));
    assert_eq!(listed["id"], 2, "{listed}");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"slow__echo"), "{names:?}");
    drop(stdin);
    let _ = child.wait();
}

#[test]
fn stdio_exits_when_its_client_leaves_while_a_request_waits_for_a_server() {
    use std::io::Write as _;
    use std::time::{Duration, Instant};
    // Shorter than the 30 s a request may wait for a first start: an exit that waited for the
    // deadline would not come in time.
    const EXIT_GUARD: Duration = Duration::from_secs(20);
    let dir = temp_dir("leave-while-starting");
    let cfg = dir.join("manifold.toml");
    std::fs::write(
        &cfg,
        format!(
            "[gateway]\ndata_dir = \"{}\"\n\n[servers.never]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 600\"]\nsandbox = {{ profile = \"off\" }}\n",
            dir.join("data").display(),
        ),
    )
    .unwrap();
    let mut child = Command::new(MANIFOLD)
        .args(["stdio", "--config", cfg.to_str().unwrap()])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let answers = answer_lines(child.stdout.take().unwrap());
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    assert_eq!(next_answer(&answers, EXIT_GUARD)["id"], 1);
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
    drop(stdin);
    let left = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if left.elapsed() > EXIT_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.is_some(),
        "manifold stdio still ran {EXIT_GUARD:?} after its client left"
    );
}
