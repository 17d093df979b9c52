//! Why: an operator overrides what an upstream says of a tool (`[servers.NAME.overrides.TOOL]`) to
//! give it a short name, better words, or annotations the upstream forgot. Through `manifold serve`
//! in front of the Python SDK server, listed with `manifold list` and called with `manifold call`:
//! the tool appears under its new name with the new words, is called by it, and an annotation set
//! here brings it under an ask rule, while a tool without it runs at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::{ChildGuard, ScratchDir, ServeCommand, peers_dir, python};
use serde_json::Value;

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Bounds a wait for the held call; never a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Runs `manifold ARGS`; fails the test, with its stderr, when it does not succeed.
fn manifold(args: &[&str]) -> String {
    let out = Command::new(MANIFOLD).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "manifold {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asks `look` until it answers, within the hang guard.
fn until<T>(what: &str, mut look: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(found) = look() {
            return found;
        }
        assert!(started.elapsed() < HANG_GUARD, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn an_overridden_tool_is_listed_and_called_by_its_new_name_and_its_annotation_feeds_the_rules() {
    let dir = ScratchDir::new("overrides").unwrap();
    let config = dir.path().join("manifold.toml");
    std::fs::write(
        &config,
        format!(
            r#"[gateway]
listen = "127.0.0.1:0"
data_dir = {data}

[servers.py]
command = {python}
args = [{server}, "stdio"]

[servers.py.overrides.echo]
name = "say"
title = "Say it back"
description = "Repeats the message, word for word."
annotations = {{ destructiveHint = true }}

[servers.py.overrides.add]
description = "Adds two numbers."

[[rules]]
name = "destructive-asks"
effect = "ask"
annotations = ["destructiveHint"]
"#,
            data = toml_string(&dir.path().join("data").to_string_lossy()),
            python = toml_string(&python().unwrap().to_string_lossy()),
            server = toml_string(
                &peers_dir()
                    .unwrap()
                    .join("python_server.py")
                    .to_string_lossy()
            ),
        ),
    )
    .unwrap();
    let gateway = ServeCommand::new(MANIFOLD, dir.path())
        .config(&config)
        .log("gateway.log")
        .start()
        .unwrap();
    let url = gateway.url().to_owned();

    let listed = manifold(&["list", "tools", &url, "--json"]);
    let listed: Value = serde_json::from_str(&listed).unwrap_or_else(|e| panic!("{e}: {listed}"));
    let tools = listed["tools"].as_array().unwrap();
    let find = |name: &str| tools.iter().find(|t| t["name"] == name).cloned();
    let say = find("say").unwrap_or_else(|| panic!("no tool \"say\" in {listed}"));
    assert_eq!(say["title"], "Say it back");
    assert_eq!(say["description"], "Repeats the message, word for word.");
    assert_eq!(say["annotations"]["destructiveHint"], true);
    assert!(
        find("py__echo").is_none(),
        "the upstream's name is gone: {listed}"
    );
    assert_eq!(find("py__add").unwrap()["description"], "Adds two numbers.");

    // The pin is the server's own definition, under its own name and words.
    let config_text = config.to_string_lossy().into_owned();
    let (pins, pinned) = until("the server's tools were not pinned", || {
        let text = manifold(&["pins", "list", "py", "--json", "--config", &config_text]);
        let pins: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let definition = pins["pins"]["py"]["echo"]["definition"]
            .as_str()?
            .to_owned();
        Some((pins, serde_json::from_str::<Value>(&definition).unwrap()))
    });
    assert_eq!(pinned["name"], "echo");
    assert_ne!(pinned["description"], "Repeats the message, word for word.");
    assert!(pins["pins"]["py"].get("say").is_none(), "{pins}");

    // Not destructive: runs at once.
    let sum = manifold(&["call", &url, "py__add", "--arg", "a=2", "--arg", "b=3"]);
    assert_eq!(sum.trim(), "5");

    // Marked destructive here: held for approval, then run by its new name.
    let mut command = Command::new(MANIFOLD);
    command
        .args(["call", &url, "say", "--arg", "message=hello"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut call = ChildGuard::spawn(command).unwrap();
    let config = config.to_string_lossy().into_owned();
    let id = until("the call was not held", || {
        let rows: Value = serde_json::from_str(&manifold(&[
            "approvals",
            "list",
            "--json",
            "--config",
            &config,
        ]))
        .unwrap();
        let row = rows.as_array()?.first()?.clone();
        assert_eq!(row["tool"], "say");
        Some(row["id"].as_str()?.to_owned())
    });
    manifold(&["approvals", "approve", &id, "--config", &config]);
    let status = until("the approved call did not end", || call.try_wait().unwrap());
    let mut text = String::new();
    std::io::Read::read_to_string(&mut call.child_mut().stdout.take().unwrap(), &mut text).unwrap();
    assert!(status.success(), "{text}");
    assert_eq!(text.trim(), "hello");
}
