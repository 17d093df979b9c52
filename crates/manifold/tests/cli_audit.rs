//! `manifold audit verify|tail|search|export` through the real binary, over rows the test appends
//! with the store's own API (as the gateway does): verify passes an intact trail and names the
//! first row an SQL edit broke; search honours each filter; tail shows the newest rows and, with
//! `--follow`, one appended after it started; an export recomputes its chain offline. One run
//! reads a trail in a real PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use manifold_store::{
    AUDIT_GENESIS, AuditEntry, MAX_AUDIT_BATCH, MAX_AUDIT_PAGE, PruneAnchor, Store, StoreLocation,
};
use manifold_testkit::{Postgres, ScratchDir};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// How long `tail --follow` may take to print a row in these tests: its poll is 500 ms; the
/// rest is slack for a loaded machine. Only a bound on waiting, never asserted.
const FOLLOW_PATIENCE: Duration = Duration::from_secs(30);
/// 2025-11-29T12:04:05Z, a fixed time for the RFC 3339 searches.
const FIXED_MS: i64 = 1_764_417_845_000;
const MINUTE_MS: i64 = 60_000;

/// A configuration and the store it names, removed afterwards.
struct Trail {
    scratch: ScratchDir,
    config: PathBuf,
    location: StoreLocation,
}

impl Trail {
    fn sqlite(name: &str) -> Trail {
        let scratch = ScratchDir::new(&format!("cli-audit-{name}")).unwrap();
        let data = scratch.path().join("data");
        let config = scratch.path().join("manifold.toml");
        std::fs::write(
            &config,
            format!("[gateway]\ndata_dir = \"{}\"\n", data.display()),
        )
        .unwrap();
        Trail {
            config,
            location: StoreLocation::sqlite(data),
            scratch,
        }
    }

    fn postgres(name: &str, pg: &Postgres) -> Trail {
        let scratch = ScratchDir::new(&format!("cli-audit-{name}")).unwrap();
        let url = pg.url_with_password("audit-pw");
        let config = scratch.path().join("manifold.toml");
        std::fs::write(
            &config,
            format!(
                "[gateway]\ndata_dir = \"{}\"\n\n[store]\nurl = \"{url}\"\n",
                scratch.path().join("data").display()
            ),
        )
        .unwrap();
        Trail {
            config,
            location: StoreLocation::postgres(url),
            scratch,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(MANIFOLD);
        command
            .arg("audit")
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .current_dir(self.scratch.path())
            .env("XDG_DATA_HOME", self.scratch.path().join("xdg"))
            .env_remove("RUST_LOG");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Appends `entries` in order, as the gateway's writer does (batches of at most
    /// `MAX_AUDIT_BATCH`), from a store opened beside whatever else has it open.
    async fn append(&self, entries: &[AuditEntry]) {
        let store = Store::open_for_command(&self.location).await.unwrap();
        for batch in entries.chunks(MAX_AUDIT_BATCH) {
            store.audit().append_batch(batch).await.unwrap();
        }
        store.close().await;
    }

    async fn prune_before(&self, at_ms: i64) -> PruneAnchor {
        let store = Store::open_for_command(&self.location).await.unwrap();
        let anchor = store.audit().prune_before(at_ms).await.unwrap().unwrap();
        store.close().await;
        anchor
    }

    /// Runs `sql` on the store's database directly, as someone with access to it could.
    async fn tamper(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match &self.location {
            StoreLocation::Sqlite { data_dir } => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(data_dir.join(manifold_store::SQLITE_FILE_NAME));
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
            StoreLocation::Postgres { url } => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
        }
    }
}

fn now_ms() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

/// One call's row as the gateway records it (sorted keys, the fields the brief names).
fn call(
    at_ms: i64,
    call_id: &str,
    caller: &str,
    server: &str,
    tool: &str,
    outcome: &str,
) -> AuditEntry {
    let record = json!({
        "v": 1, "at_ms": at_ms, "call_id": call_id, "principal": caller, "groups": ["ops"],
        "client_name": "cli-audit", "server": server, "method": "tools/call", "target": tool,
        "outcome": outcome, "args_sha256": "a".repeat(64), "duration_us": 1500,
        "bytes_in": 10, "bytes_out": 20, "retries": 0,
    });
    AuditEntry::from_record_json(record.to_string()).unwrap()
}

/// Calls `c1..=cN` by alice to fs/read, a second apart from `start_ms`.
fn calls(start_ms: i64, n: usize) -> Vec<AuditEntry> {
    (1..=n)
        .map(|i| {
            let at = start_ms + i64::try_from(i).unwrap() * 1000;
            call(at, &format!("c{i}"), "alice", "fs", "read", "ok")
        })
        .collect()
}

fn stdout_of(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

/// The call ids of `search --json` or `tail --json` output, in the order printed.
fn call_ids(trail: &Trail, args: &[&str]) -> Vec<String> {
    json_lines(&stdout_of(&trail.run(args)))
        .iter()
        .map(|row| row["call_id"].as_str().unwrap().to_owned())
        .collect()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks `export --jsonl` lines as an auditor would, with nothing but SHA-256: every row's hash
/// is SHA-256(prev_sha256 + "\n" + record_json) and every row's prev is the row before's hash.
/// Returns the seqs.
fn recompute_chain(lines: &[Value], first_prev: Option<&str>) -> Vec<i64> {
    let mut prev: Option<String> = first_prev.map(str::to_owned);
    let mut seqs = Vec::new();
    for line in lines {
        let row_prev = line["prev_sha256"].as_str().unwrap();
        let record_json = line["record_json"].as_str().unwrap();
        if let Some(prev) = &prev {
            assert_eq!(row_prev, prev, "link broken at {line}");
        }
        let computed = sha256_hex(&format!("{row_prev}\n{record_json}"));
        assert_eq!(
            computed,
            line["row_sha256"].as_str().unwrap(),
            "hash of {line}"
        );
        prev = Some(computed);
        seqs.push(line["seq"].as_i64().unwrap());
    }
    seqs
}

#[tokio::test]
async fn verify_says_an_intact_trail_is_intact_and_exits_0() {
    let trail = Trail::sqlite("intact");
    trail.append(&calls(FIXED_MS, 3)).await;
    let out = stdout_of(&trail.run(&["verify"]));
    assert!(out.contains("checked 3 rows"), "{out}");
    assert!(out.contains("(seq 1 to 3)"), "{out}");
    assert!(
        out.trim_end().ends_with("the audit trail is intact"),
        "{out}"
    );
}

#[tokio::test]
async fn verify_names_the_first_tampered_row_and_exits_1() {
    let trail = Trail::sqlite("tampered");
    trail.append(&calls(FIXED_MS, 4)).await;
    trail
        .tamper(r#"UPDATE audit_trail SET record_json = replace(record_json, '"duration_us":1500', '"duration_us":15') WHERE seq = 2"#)
        .await;
    let out = trail.run(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), stderr_of(&out));
    assert!(stderr.contains("broken at seq 2:"), "{stderr}");
    assert!(stderr.contains("the row was edited"), "{stderr}");
    assert!(stdout.contains("checked 4 rows"), "{stdout}");
    assert!(!stdout.contains("intact"), "{stdout}");

    // A deleted row shows as the next row's broken link.
    let trail = Trail::sqlite("deleted");
    trail.append(&calls(FIXED_MS, 4)).await;
    trail.tamper("DELETE FROM audit_trail WHERE seq = 3").await;
    let out = trail.run(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let stderr = stderr_of(&out);
    assert!(stderr.contains("broken at seq 4:"), "{stderr}");
    assert!(stderr.contains("a row before it was deleted"), "{stderr}");
}

#[tokio::test]
async fn verify_reports_the_pruned_prefix_and_its_anchor() {
    let trail = Trail::sqlite("pruned");
    trail.append(&calls(FIXED_MS, 4)).await;
    // c1 and c2 are older than c3's time.
    let anchor = trail.prune_before(FIXED_MS + 3000).await;
    assert_eq!(anchor.through_seq, 2);
    let out = stdout_of(&trail.run(&["verify"]));
    assert!(out.contains("checked 2 rows"), "{out}");
    assert!(out.contains("(seq 3 to 4)"), "{out}");
    assert!(out.contains("rows 1..2 were pruned"), "{out}");
    assert!(
        out.contains(&format!(
            "the chain starts from their anchor {}",
            anchor.anchor_sha256
        )),
        "{out}"
    );
    assert!(out.contains("the audit trail is intact"), "{out}");
}

#[tokio::test]
async fn search_filters_by_caller_tool_server_outcome_and_time() {
    let trail = Trail::sqlite("search");
    let now = now_ms();
    trail
        .append(&[
            call(FIXED_MS, "c0", "dave", "web", "fetch", "ok"),
            call(now - 120 * MINUTE_MS, "c1", "alice", "fs", "read", "ok"),
            call(
                now - 30 * MINUTE_MS,
                "c2",
                "bob",
                "fs",
                "write",
                "tool_error",
            ),
            call(
                now - 10 * MINUTE_MS,
                "c3",
                "alice",
                "git",
                "status",
                "rpc_error",
            ),
            call(
                now - 5 * MINUTE_MS,
                "c4",
                "carol",
                "git",
                "read",
                "refused_by_policy",
            ),
        ])
        .await;
    let search = |args: &[&str]| {
        let mut all = vec!["search", "--json"];
        all.extend_from_slice(args);
        call_ids(&trail, &all)
    };
    assert_eq!(search(&["--caller", "alice"]), ["c3", "c1"]);
    assert_eq!(search(&["--tool", "read"]), ["c4", "c1"]);
    assert_eq!(search(&["--server", "git"]), ["c4", "c3"]);
    assert_eq!(search(&["--outcome", "tool_error"]), ["c2"]);
    assert_eq!(search(&["--caller", "alice", "--outcome", "ok"]), ["c1"]);
    assert_eq!(search(&["--since", "1h"]), ["c4", "c3", "c2"]);
    assert_eq!(search(&["--since", "1d", "--until", "1h"]), ["c1"]);
    assert_eq!(search(&["--until", "2025-11-30"]), ["c0"]);
    assert_eq!(
        search(&[
            "--since",
            "2025-11-29T12:04:05Z",
            "--until",
            "2025-11-29T13:04:06+01:00"
        ]),
        ["c0"]
    );
    assert!(search(&["--caller", "dave", "--since", "2025-11-29T12:04:05.001Z"]).is_empty());
    assert!(search(&["--caller", "nobody"]).is_empty());

    let limited = trail.run(&["search", "--json", "--limit", "2"]);
    let ids: Vec<String> = json_lines(&stdout_of(&limited))
        .iter()
        .map(|r| r["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["c4", "c3"]);
    assert!(stderr_of(&limited).contains("showing the newest 2"));

    // The table: a header, then newest first, with the columns the brief names.
    let table = stdout_of(&trail.run(&["search", "--caller", "alice"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    for column in [
        "TIME (UTC)",
        "SEQ",
        "CALLER",
        "SERVER",
        "TARGET",
        "OUTCOME",
        "DURATION",
        "CALL ID",
    ] {
        assert!(lines[0].contains(column), "{table}");
    }
    assert!(
        lines[1].contains("alice") && lines[1].contains("git") && lines[1].contains("rpc_error"),
        "{table}"
    );
    assert!(
        lines[1].contains("1.5ms") && lines[1].trim_end().ends_with("c3"),
        "{table}"
    );
    assert!(lines[2].trim_end().ends_with("c1"), "{table}");
    assert_eq!(lines[0].find("CALLER"), lines[1].find("alice"), "{table}");
}

#[tokio::test]
async fn search_by_a_name_as_clients_see_it_finds_what_the_server_was_asked() {
    let trail = Trail::sqlite("clients-names");
    let mut config = std::fs::read_to_string(&trail.config).unwrap();
    config.push_str(
        "\n[servers.fs]\ncommand = \"fs-server\"\n\n[servers.git]\ncommand = \"git-server\"\nprefix = \"g\"\n",
    );
    std::fs::write(&trail.config, config).unwrap();
    let now = now_ms();
    trail
        .append(&[
            call(now - 3000, "c1", "alice", "fs", "read", "ok"),
            call(now - 2000, "c2", "alice", "git", "read", "ok"),
            call(now - 1000, "c3", "alice", "fs", "file:///notes/a.md", "ok"),
        ])
        .await;
    let search = |args: &[&str]| {
        let mut all = vec!["search", "--json"];
        all.extend_from_slice(args);
        let out = trail.run(&all);
        assert!(out.status.success(), "{}", stderr_of(&out));
        let ids: Vec<String> = json_lines(&stdout_of(&out))
            .iter()
            .map(|r| r["call_id"].as_str().unwrap().to_owned())
            .collect();
        (ids, stderr_of(&out))
    };
    let (ids, note) = search(&["--tool", "fs__read"]);
    assert_eq!(ids, ["c1"]);
    assert!(
        note.contains("fs__read is \"fs\"'s \"read\" as clients see it")
            && note.contains("--server fs --tool read"),
        "{note}"
    );
    assert_eq!(search(&["--tool", "g__read"]).0, ["c2"]);
    assert_eq!(search(&["--tool", "fs+file:///notes/a.md"]).0, ["c3"]);
    // The name as the server knows it matches as it is, with no note.
    let (ids, note) = search(&["--tool", "read"]);
    assert_eq!(
        (ids, note.as_str()),
        (vec!["c2".to_owned(), "c1".to_owned()], "")
    );
    // A --server that disagrees with the prefix is kept: nothing matches.
    let (ids, note) = search(&["--tool", "fs__read", "--server", "git"]);
    assert!(ids.is_empty() && note.contains("no audit rows"), "{note}");
}

#[tokio::test]
async fn search_pages_on_with_before_the_smallest_seq_it_showed() {
    let trail = Trail::sqlite("search-pages");
    trail.append(&calls(FIXED_MS, 7)).await;
    let first = trail.run(&["search", "--json", "--limit", "3"]);
    let ids = |out: &Output| -> Vec<String> {
        json_lines(&stdout_of(out))
            .iter()
            .map(|r| r["call_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first), ["c7", "c6", "c5"]);
    let hint = stderr_of(&first);
    assert!(hint.contains("--before 5 for the next page"), "{hint}");
    let second = trail.run(&["search", "--json", "--limit", "3", "--before", "5"]);
    assert_eq!(ids(&second), ["c4", "c3", "c2"]);
    assert!(
        stderr_of(&second).contains("--before 2"),
        "{}",
        stderr_of(&second)
    );
    let last = trail.run(&["search", "--json", "--limit", "3", "--before", "2"]);
    assert_eq!(ids(&last), ["c1"]);
    assert!(
        !stderr_of(&last).contains("--before"),
        "the last page says there is no more: {}",
        stderr_of(&last)
    );
    // Other filters still apply on a later page.
    let filtered = trail.run(&["search", "--json", "--caller", "nobody", "--before", "5"]);
    assert!(ids(&filtered).is_empty());
    let refused = trail.run(&["search", "--before", "0"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("seqs start at 1"),
        "{}",
        stderr_of(&refused)
    );
}

#[tokio::test]
async fn commands_refuse_a_data_dir_without_a_store_rather_than_create_one() {
    let trail = Trail::sqlite("no-store");
    for args in [
        &["verify"][..],
        &["tail"],
        &["search"],
        &["export", "--jsonl"],
    ] {
        let out = trail.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = stderr_of(&out);
        assert!(
            stderr.contains("there is no store at"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("data_dir"), "{args:?}: {stderr}");
    }
    let StoreLocation::Sqlite { data_dir } = &trail.location else {
        panic!("a SQLite trail")
    };
    assert!(!data_dir.exists(), "nothing was created");
}

#[tokio::test]
async fn search_refuses_an_unknown_outcome_listing_the_valid_ones() {
    let trail = Trail::sqlite("bad-outcome");
    let out = trail.run(&["search", "--outcome", "okay"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("--outcome \"okay\" is not an outcome"),
        "{stderr}"
    );
    for valid in [
        "ok",
        "tool_error",
        "rpc_error",
        "transport_failure",
        "refused_by_policy",
        "rate_limited",
        "cancelled",
        "input_required",
        "audit_unavailable",
    ] {
        assert!(stderr.contains(valid), "{valid}: {stderr}");
    }
    let out = trail.run(&["search", "--since", "last tuesday"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("neither an RFC 3339 time nor a duration ago"));
    let out = trail.run(&["tail", "-n", &(MAX_AUDIT_PAGE + 1).to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("audit export"),
        "{}",
        stderr_of(&out)
    );
}

#[tokio::test]
async fn tail_shows_the_newest_rows_oldest_first() {
    let trail = Trail::sqlite("tail");
    trail.append(&calls(FIXED_MS, 5)).await;
    let table = stdout_of(&trail.run(&["tail", "-n", "2"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("TIME (UTC)"), "{table}");
    assert!(lines[1].trim_end().ends_with("c4"), "{table}");
    assert!(lines[2].trim_end().ends_with("c5"), "{table}");
    let rows = json_lines(&stdout_of(&trail.run(&["tail", "-n", "3", "--json"])));
    let seqs: Vec<i64> = rows.iter().map(|r| r["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [3, 4, 5]);
    assert_eq!(rows[0]["call_id"], "c3");
    assert_eq!(rows[0]["method"], "tools/call");
    // Twenty by default.
    trail.append(&calls(FIXED_MS + 10_000, 30)).await;
    assert_eq!(call_ids(&trail, &["tail", "--json"]).len(), 20);
}

#[tokio::test]
async fn tail_follow_prints_a_row_appended_after_it_started() {
    let trail = Trail::sqlite("follow");
    trail.append(&calls(FIXED_MS, 2)).await;
    let mut child = trail
        .command(&["tail", "-n", "1", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(child.stdout.take().unwrap());
    let next_row = || -> Value {
        let line = rx.recv_timeout(FOLLOW_PATIENCE).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    // The newest row first: tail has read the trail, so what follows is appended after.
    let first = next_row();
    assert_eq!(
        (first["seq"].as_i64(), first["call_id"].as_str()),
        (Some(2), Some("c2"))
    );
    trail
        .append(&[call(FIXED_MS + 9000, "late", "erin", "fs", "read", "ok")])
        .await;
    let late = next_row();
    assert_eq!(
        (late["seq"].as_i64(), late["call_id"].as_str()),
        (Some(3), Some("late"))
    );
    assert_eq!(late["principal"], "erin");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn export_jsonl_rows_recompute_the_chain_offline() {
    let trail = Trail::sqlite("export");
    // More than one page of the store, so the export has to page on.
    let total = usize::try_from(MAX_AUDIT_PAGE).unwrap() + 100;
    trail.append(&calls(FIXED_MS, total)).await;
    let out = trail.run(&["export", "--jsonl"]);
    let lines = json_lines(&stdout_of(&out));
    assert_eq!(lines.len(), total);
    let seqs = recompute_chain(&lines, Some(AUDIT_GENESIS));
    let expected: Vec<i64> = (1..=i64::try_from(total).unwrap()).collect();
    assert_eq!(seqs, expected);
    let record: Value = serde_json::from_str(lines[0]["record_json"].as_str().unwrap()).unwrap();
    assert_eq!(record["call_id"], "c1");
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(&format!("exported {total} audit rows")),
        "{stderr}"
    );
    assert!(stderr.contains("chains on the genesis"), "{stderr}");

    // A time slice: c1001 on, at 12:04:05 + 1001 s = 12:20:46, linked among themselves and to
    // the row before the slice.
    let slice = trail.run(&["export", "--jsonl", "--since", "2025-11-29T12:20:46Z"]);
    let sliced = json_lines(&stdout_of(&slice));
    assert_eq!(sliced.len(), total - 1000);
    assert_eq!(recompute_chain(&sliced, None).first(), Some(&1001));
    assert_eq!(sliced[0]["prev_sha256"], lines[999]["row_sha256"]);

    // A tampered row no longer recomputes: what an auditor's check would catch.
    let mut edited = lines[5].clone();
    edited["record_json"] = Value::String(
        edited["record_json"]
            .as_str()
            .unwrap()
            .replace("alice", "mallory"),
    );
    let recomputed = sha256_hex(&format!(
        "{}\n{}",
        edited["prev_sha256"].as_str().unwrap(),
        edited["record_json"].as_str().unwrap()
    ));
    assert_ne!(recomputed, edited["row_sha256"].as_str().unwrap());
}

#[tokio::test]
async fn postgres_verify_and_search_read_the_trail_in_postgresql() {
    let pg = Postgres::start().unwrap();
    let trail = Trail::postgres("postgres", &pg);
    trail
        .append(&[
            call(FIXED_MS, "p1", "alice", "fs", "read", "ok"),
            call(FIXED_MS + 1000, "p2", "bob", "git", "status", "tool_error"),
            call(FIXED_MS + 2000, "p3", "alice", "git", "log", "ok"),
        ])
        .await;
    let out = stdout_of(&trail.run(&["verify"]));
    assert!(out.contains("checked 3 rows"), "{out}");
    assert!(out.contains("the audit trail is intact"), "{out}");
    assert!(
        !out.contains("audit-pw"),
        "the password is never shown: {out}"
    );
    assert_eq!(
        call_ids(&trail, &["search", "--json", "--caller", "alice"]),
        ["p3", "p1"]
    );
    assert_eq!(
        call_ids(
            &trail,
            &[
                "search",
                "--json",
                "--server",
                "git",
                "--outcome",
                "tool_error"
            ]
        ),
        ["p2"]
    );

    trail
        .tamper("UPDATE audit_trail SET principal = 'mallory' WHERE seq = 2")
        .await;
    let out = trail.run(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let stderr = stderr_of(&out);
    assert!(stderr.contains("broken at seq 2:"), "{stderr}");
    assert!(stderr.contains("principal column"), "{stderr}");
}

/// Lines from a child's pipe, read on a thread, so a test can wait for the next one.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[tokio::test]
async fn tail_follow_waits_out_a_postgres_restart_and_goes_on() {
    let pg = Postgres::start().unwrap();
    let trail = Trail::postgres("follow-restart", &pg);
    trail.append(&calls(FIXED_MS, 1)).await;
    let mut child = trail
        .command(&["tail", "-n", "1", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let first: Value =
        serde_json::from_str(&stdout.recv_timeout(FOLLOW_PATIENCE).unwrap()).unwrap();
    assert_eq!(first["call_id"], "c1");

    pg.stop().unwrap();
    let said = stderr.recv_timeout(FOLLOW_PATIENCE).unwrap();
    assert!(said.contains("could not read the audit trail in"), "{said}");
    assert!(said.contains("trying again every 500 ms"), "{said}");
    assert!(
        !said.contains("audit-pw"),
        "the password is never shown: {said}"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "tail -f is still running while the store is down"
    );

    pg.start_again().unwrap();
    trail
        .append(&[call(FIXED_MS + 9000, "after", "erin", "fs", "read", "ok")])
        .await;
    let next: Value = serde_json::from_str(&stdout.recv_timeout(FOLLOW_PATIENCE).unwrap()).unwrap();
    assert_eq!(
        (next["seq"].as_i64(), next["call_id"].as_str()),
        (Some(2), Some("after"))
    );
    // The command says it is back on stderr before it writes the row to stdout, but each pipe
    // has its own reader thread here, so the stderr line may reach the test second.
    let mut back = Vec::new();
    while let Ok(line) = stderr.recv_timeout(FOLLOW_PATIENCE) {
        let said_again = line.contains("reading the audit trail in") && line.ends_with("again");
        back.push(line);
        if said_again {
            break;
        }
    }
    assert!(
        back.last()
            .is_some_and(|l| l.contains("reading the audit trail in") && l.ends_with("again")),
        "{back:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
