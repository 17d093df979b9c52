//! Why: the reference servers people actually install (server-filesystem, server-memory from npm;
//! mcp-server-time, mcp-server-git from PyPI) are stdio-only, and the Python ones speak both eras.
//! Manifold's client side must drive each to a real effect (read a file, store and recall an entity,
//! tell the time, read a commit), in every era the server offers, and leave no process behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod peers_kit;

use std::sync::Arc;

use manifold_upstream::EraChoice;
use manifold_upstream::paginate::ListKind;
use manifold_wire::{Era, Revision};
use serde_json::{Value, json};

use peers_kit::*;

#[tokio::test]
async fn filesystem_reads_a_file_in_its_allowed_directory() {
    let dir = ScratchDir::new("filesystem");
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "first line\nsecond line, ünïcode\n").unwrap();
    let (conn, info) = open("filesystem", &filesystem_stdio(dir.path()), EraChoice::Auto).await;

    assert_eq!(info.era, Era::Legacy);
    assert_eq!(info.revision, Revision::V2025_11_25);
    let tools = names(&conn, ListKind::Tools).await;
    assert!(tools.iter().any(|t| t == "read_text_file"), "{tools:?}");

    let result = call_tool(
        &conn,
        "read_text_file",
        json!({ "path": file.to_string_lossy() }),
    )
    .await;
    assert_eq!(text_of(&result), "first line\nsecond line, ünïcode\n");

    // Outside the allowed directory the server refuses, as a tool error.
    let refused = call_tool(&conn, "read_text_file", json!({ "path": "/etc/hostname" })).await;
    assert_eq!(refused["isError"], json!(true), "{refused}");
    assert!(text_of(&refused).contains("Access denied"), "{refused}");

    close_stdio_and_check_gone(conn).await;
}

/// server-filesystem asks a client that declares `roots` for them right after `initialized`, and
/// then serves the roots instead of its command-line directories.
#[tokio::test]
async fn filesystem_takes_its_directories_from_the_client_roots() {
    let started_with = ScratchDir::new("filesystem-argument");
    let root = ScratchDir::new("filesystem-root");
    let file = root.path().join("from-root.txt");
    std::fs::write(&file, "served because it is under a root\n").unwrap();
    let handler = Arc::new(AnsweringHandler::with_roots(vec![root.path().to_owned()]));
    let (conn, _) = open_with_handler(
        "filesystem",
        &filesystem_stdio(started_with.path()),
        EraChoice::Legacy,
        r#"{"roots":{"listChanged":false}}"#,
        Arc::clone(&handler),
    )
    .await;

    // The server applies the roots asynchronously after `initialized`; poll (within the hang
    // guard) until it reports them.
    let wanted = root.path().to_string_lossy().into_owned();
    let allowed = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let listed = text_of(&call_tool(&conn, "list_allowed_directories", json!({})).await);
            if listed.contains(&wanted) {
                return listed;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("server-filesystem never adopted the client's roots");
    assert!(
        !allowed.contains(&*started_with.path().to_string_lossy()),
        "{allowed}"
    );
    assert_eq!(
        handler
            .seen()
            .iter()
            .filter(|r| r.method == "roots/list")
            .count(),
        1
    );
    let read = call_tool(
        &conn,
        "read_text_file",
        json!({ "path": file.to_string_lossy() }),
    )
    .await;
    assert_eq!(text_of(&read), "served because it is under a root\n");

    close_stdio_and_check_gone(conn).await;
}

#[tokio::test]
async fn memory_stores_an_entity_and_reads_the_graph_back() {
    let dir = ScratchDir::new("memory");
    let store = dir.path().join("memory.jsonl");
    let (conn, info) = open("memory", &memory_stdio(&store), EraChoice::Auto).await;

    assert_eq!(info.era, Era::Legacy);
    assert_eq!(info.revision, Revision::V2025_11_25);

    let entity = json!({
        "name": "Ada",
        "entityType": "person",
        "observations": ["wrote the first program"]
    });
    let created = call_tool(
        &conn,
        "create_entities",
        json!({ "entities": [entity.clone()] }),
    )
    .await;
    assert_ne!(created["isError"], json!(true), "{created}");

    let graph = call_tool(&conn, "read_graph", json!({})).await;
    assert_eq!(
        graph["structuredContent"],
        json!({ "entities": [entity], "relations": [] })
    );
    // The text content says the same thing as the structured content.
    let from_text: Value = serde_json::from_str(&text_of(&graph)).unwrap();
    assert_eq!(from_text, graph["structuredContent"]);
    // MEMORY_FILE_PATH reached the child: the graph is in the file the test chose.
    let stored = std::fs::read_to_string(&store).unwrap();
    assert!(stored.contains("wrote the first program"), "{stored}");

    close_stdio_and_check_gone(conn).await;
}

async fn time_tells_the_time(era: EraChoice, expected: Revision) {
    let (conn, info) = open("time", &time_stdio(), era).await;
    assert_eq!(info.revision, expected);
    assert_eq!(info.era, expected.era());
    if info.era == Era::Legacy {
        assert_eq!(info.server_name.as_deref(), Some("mcp-time"));
    }

    assert_eq!(
        names(&conn, ListKind::Tools).await,
        vec!["get_current_time".to_owned(), "convert_time".to_owned()]
    );
    let now = call_tool(&conn, "get_current_time", json!({ "timezone": "UTC" })).await;
    assert_eq!(now["isError"], json!(false), "{now}");
    assert_eq!(now["structuredContent"]["timezone"], "UTC");
    let datetime = now["structuredContent"]["datetime"].as_str().unwrap();
    assert!(datetime.ends_with("+00:00"), "{datetime}");
    let from_text: Value = serde_json::from_str(&text_of(&now)).unwrap();
    assert_eq!(from_text, now["structuredContent"]);

    let converted = call_tool(
        &conn,
        "convert_time",
        json!({ "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo" }),
    )
    .await;
    assert_eq!(converted["isError"], json!(false), "{converted}");
    let target = &converted["structuredContent"]["target"];
    assert_eq!(target["timezone"], "Asia/Tokyo", "{converted}");
    assert!(
        target["datetime"]
            .as_str()
            .unwrap()
            .contains("T21:00:00+09:00"),
        "{converted}"
    );

    close_stdio_and_check_gone(conn).await;
}

#[tokio::test]
async fn time_in_the_legacy_era() {
    time_tells_the_time(EraChoice::Legacy, Revision::V2025_11_25).await;
}

#[tokio::test]
async fn time_in_the_modern_era() {
    time_tells_the_time(EraChoice::Modern, Revision::V2026_07_28).await;
}

/// `Auto` probes `server/discover` for 5 s, then falls back to `initialize`. A modern stdio server
/// that starts slower than that (a cold Python start on a busy machine does) reads the probe late,
/// answers it, and then refuses the `initialize` that followed with -32022: the connection fails
/// although the server speaks the modern era. The shell's sleep makes that start deterministic.
#[tokio::test]
async fn auto_era_survives_a_slow_starting_modern_server() {
    let command = format!(
        "sleep 6; exec '{}'",
        manifold_testkit::venv_bin("mcp-server-time")
            .unwrap()
            .to_string_lossy()
    );
    let target = stdio("sh", &["-c", &command], &[]);
    let (conn, info) = open("slow-time", &target, EraChoice::Auto).await;
    assert_eq!(info.revision, Revision::V2026_07_28);
    let now = call_tool(&conn, "get_current_time", json!({ "timezone": "UTC" })).await;
    assert_eq!(now["structuredContent"]["timezone"], "UTC");
    close_stdio_and_check_gone(conn).await;
}

async fn git_reads_the_log_and_status(era: EraChoice, expected: Revision) {
    let repo = ScratchDir::new("git");
    let commit = git_repo_with_one_commit(repo.path(), "first commit, made by manifold's tests");
    let (conn, info) = open("git", &git_stdio(repo.path()), era).await;
    assert_eq!(info.revision, expected);
    assert_eq!(info.era, expected.era());

    let tools = names(&conn, ListKind::Tools).await;
    for tool in ["git_status", "git_log", "git_show"] {
        assert!(
            tools.iter().any(|t| t == tool),
            "{tool} missing from {tools:?}"
        );
    }
    let repo_path = repo.path().to_string_lossy().into_owned();
    let log = call_tool(&conn, "git_log", json!({ "repo_path": repo_path })).await;
    assert_eq!(log["isError"], json!(false), "{log}");
    let text = text_of(&log);
    assert!(text.contains(&format!("Commit: {commit}")), "{text}");
    assert!(
        text.contains("Message: first commit, made by manifold's tests"),
        "{text}"
    );
    assert!(text.contains("Author: Manifold Test"), "{text}");

    std::fs::write(repo.path().join("untracked.txt"), "new\n").unwrap();
    let status = call_tool(&conn, "git_status", json!({ "repo_path": repo_path })).await;
    let text = text_of(&status);
    assert!(text.contains("On branch main"), "{text}");
    assert!(text.contains("untracked.txt"), "{text}");

    close_stdio_and_check_gone(conn).await;
}

#[tokio::test]
async fn git_in_the_legacy_era() {
    git_reads_the_log_and_status(EraChoice::Legacy, Revision::V2025_11_25).await;
}

#[tokio::test]
async fn git_in_the_modern_era() {
    git_reads_the_log_and_status(EraChoice::Modern, Revision::V2026_07_28).await;
}
