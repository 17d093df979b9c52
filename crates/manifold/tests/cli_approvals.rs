//! `manifold approvals list|show|approve|deny` through the real binary, over rows the test writes
//! into the store of a temporary configuration with the store's own API (as a gateway asking
//! would): the listing shows pending rows and hides answered ones, answers are recorded with who
//! gave them, and every refusal (unknown, settled, expired, not an approver, a caller approving
//! their own call) exits 2 saying why, changing nothing but an expired row's state.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use manifold_store::{ApiKeyRecord, ApprovalRecord, Store, StoreLocation};
use manifold_testkit::ScratchDir;

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
const MINUTE_MS: i64 = 60_000;

/// A configuration and the SQLite store in its data_dir, removed afterwards.
struct Ledger {
    scratch: ScratchDir,
    config: PathBuf,
    location: StoreLocation,
}

impl Ledger {
    fn new(name: &str) -> Ledger {
        let scratch = ScratchDir::new(&format!("cli-approvals-{name}")).unwrap();
        let data = scratch.path().join("data");
        let config = scratch.path().join("manifold.toml");
        std::fs::write(
            &config,
            format!("[gateway]\ndata_dir = \"{}\"\n", data.display()),
        )
        .unwrap();
        Ledger {
            config,
            location: StoreLocation::sqlite(data),
            scratch,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(MANIFOLD)
            .arg("approvals")
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .current_dir(self.scratch.path())
            .env("XDG_DATA_HOME", self.scratch.path().join("xdg"))
            .env("USER", "tester")
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    }

    async fn insert(&self, rows: &[ApprovalRecord]) {
        let store = Store::open_for_command(&self.location).await.unwrap();
        for r in rows {
            store.approvals().insert(r).await.unwrap();
        }
        store.close().await;
    }

    async fn add_key(&self, principal: &str, groups: &[&str]) {
        let store = Store::open_for_command(&self.location).await.unwrap();
        let key = ApiKeyRecord {
            id: format!("key-{principal}"),
            name: principal.to_owned(),
            principal: principal.to_owned(),
            key_sha256: format!("{principal:0>64}"),
            created_at_ms: 1,
            revoked_at_ms: None,
            scopes: Vec::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        };
        store.api_keys().insert(&key).await.unwrap();
        store.close().await;
    }

    async fn get(&self, id: &str) -> ApprovalRecord {
        let store = Store::open_for_command(&self.location).await.unwrap();
        let row = store.approvals().get(id).await.unwrap().unwrap();
        store.close().await;
        row
    }
}

fn now_ms() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

/// A question asked a minute ago, open for another ten.
fn pending(id: &str, approvers: &[&str]) -> ApprovalRecord {
    let now = now_ms();
    ApprovalRecord {
        id: id.to_owned(),
        state: "pending".to_owned(),
        caller: Some("alice".to_owned()),
        server: "fs".to_owned(),
        tool: "delete_file".to_owned(),
        arguments_sha256: "a".repeat(64),
        definition_sha256: "d".repeat(64),
        arguments_json: Some("{\"path\":\"/srv/report.txt\",\"recursive\":false}".to_owned()),
        approvers: approvers.iter().map(|a| (*a).to_owned()).collect(),
        channel: "out_of_band".to_owned(),
        rule: "rules[1]".to_owned(),
        holder: "gw-host:4242".to_owned(),
        created_at_ms: now - MINUTE_MS,
        expires_at_ms: now + 10 * MINUTE_MS,
        answered_by: None,
        answered_at_ms: None,
        note: None,
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_refused(o: &Output, needles: &[&str]) {
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout {}\nstderr {}",
        stdout(o),
        stderr(o)
    );
    let err = stderr(o);
    for n in needles {
        assert!(err.contains(n), "missing {n:?} in {err}");
    }
}

#[tokio::test]
async fn list_shows_pending_rows_and_hides_answered_ones() {
    let ledger = Ledger::new("list");
    let answered = ApprovalRecord {
        state: "approved".to_owned(),
        answered_by: Some("bob".to_owned()),
        answered_at_ms: Some(now_ms()),
        tool: "answered_tool".to_owned(),
        ..pending("apr_answered", &["identity:bob"])
    };
    ledger
        .insert(&[pending("apr_waiting", &["identity:bob"]), answered])
        .await;
    let out = ledger.run(&["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("apr_waiting"), "{text}");
    assert!(text.contains("fs/delete_file"), "{text}");
    assert!(
        text.contains("alice") && text.contains("out_of_band"),
        "{text}"
    );
    assert!(text.contains("EXPIRES IN"), "{text}");
    assert!(!text.contains("apr_answered"), "{text}");

    let all = stdout(&ledger.run(&["list", "--all"]));
    assert!(
        all.contains("apr_answered") && all.contains("approved"),
        "{all}"
    );
    assert!(all.contains("apr_waiting"), "{all}");

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&ledger.run(&["list", "--json"]))).unwrap();
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], "apr_waiting");
    assert_eq!(rows[0]["arguments"]["path"], "/srv/report.txt");
}

#[tokio::test]
async fn show_prints_every_field_and_the_arguments() {
    let ledger = Ledger::new("show");
    ledger.insert(&[pending("apr_show", &["group:ops"])]).await;
    let out = ledger.run(&["show", "apr_show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "apr_show",
        "pending",
        "alice",
        "delete_file",
        "rules[1]",
        "group:ops",
        "gw-host:4242",
        &"a".repeat(64),
        "\"path\": \"/srv/report.txt\"",
        "\"recursive\": false",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in {text}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&ledger.run(&["show", "apr_show", "--json"]))).unwrap();
    assert_eq!(json["approvers"][0], "group:ops");
    assert_eq!(json["arguments"]["recursive"], false);
}

#[tokio::test]
async fn approve_records_the_name_and_a_second_approve_is_refused_naming_the_state() {
    let ledger = Ledger::new("approve");
    ledger.insert(&[pending("apr_ok", &["identity:bob"])]).await;
    let out = ledger.run(&["approve", "apr_ok", "--as", "bob"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "approved apr_ok (fs/delete_file for alice) as bob"
    );
    let row = ledger.get("apr_ok").await;
    assert_eq!(row.state, "approved");
    assert_eq!(row.answered_by.as_deref(), Some("bob"));
    assert!(row.answered_at_ms.is_some());

    let again = ledger.run(&["approve", "apr_ok", "--as", "bob"]);
    assert_refused(&again, &["not pending", "approved by bob"]);
    assert_eq!(ledger.get("apr_ok").await, row);
}

#[tokio::test]
async fn approve_defaults_to_the_user_name() {
    let ledger = Ledger::new("default-name");
    ledger
        .insert(&[pending("apr_user", &["identity:tester"])])
        .await;
    let out = ledger.run(&["approve", "apr_user"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("as tester"), "{}", stdout(&out));
    assert_eq!(
        ledger.get("apr_user").await.answered_by.as_deref(),
        Some("tester")
    );
}

#[tokio::test]
async fn deny_records_the_reason() {
    let ledger = Ledger::new("deny");
    ledger.insert(&[pending("apr_no", &["identity:bob"])]).await;
    let out = ledger.run(&["deny", "apr_no", "--as", "bob", "--reason", "wrong file"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("denied apr_no (fs/delete_file for alice) as bob"));
    let row = ledger.get("apr_no").await;
    assert_eq!(row.state, "rejected");
    assert_eq!(row.answered_by.as_deref(), Some("bob"));
    assert_eq!(row.note.as_deref(), Some("wrong file"));
}

#[tokio::test]
async fn an_expired_row_is_refused_and_becomes_timed_out() {
    let ledger = Ledger::new("expired");
    let now = now_ms();
    let expired = ApprovalRecord {
        created_at_ms: now - 20 * MINUTE_MS,
        expires_at_ms: now - 10 * MINUTE_MS,
        ..pending("apr_late", &["identity:bob"])
    };
    ledger.insert(&[expired]).await;
    let out = ledger.run(&["approve", "apr_late", "--as", "bob"]);
    assert_refused(&out, &["apr_late", "expired", "timed_out"]);
    let row = ledger.get("apr_late").await;
    assert_eq!(row.state, "timed_out");
    assert_eq!(row.answered_by, None);
}

#[tokio::test]
async fn an_unknown_id_is_refused() {
    let ledger = Ledger::new("unknown");
    let out = ledger.run(&["approve", "apr_nothing", "--as", "bob"]);
    assert_refused(
        &out,
        &["no approval \"apr_nothing\"", "manifold approvals list"],
    );
    assert_refused(&ledger.run(&["show", "apr_nothing"]), &["no approval"]);
}

#[tokio::test]
async fn a_caller_may_not_approve_their_own_call_but_a_group_member_may() {
    let ledger = Ledger::new("groups");
    ledger.insert(&[pending("apr_ops", &["group:ops"])]).await;
    ledger.add_key("alice", &["ops"]).await;
    ledger.add_key("dana", &["ops"]).await;
    ledger.add_key("eve", &["dev"]).await;

    let own = ledger.run(&["approve", "apr_ops", "--as", "alice"]);
    assert_refused(
        &own,
        &[
            "a caller may not approve their own call under this rule",
            "group:ops",
        ],
    );
    let outsider = ledger.run(&["approve", "apr_ops", "--as", "eve"]);
    assert_refused(&outsider, &["eve may not answer", "--as NAME"]);
    assert_eq!(ledger.get("apr_ops").await.state, "pending");

    let member = ledger.run(&["approve", "apr_ops", "--as", "dana"]);
    assert!(member.status.success(), "{}", stderr(&member));
    assert_eq!(
        stdout(&member).trim(),
        "approved apr_ops (fs/delete_file for alice) as dana"
    );
    let row = ledger.get("apr_ops").await;
    assert_eq!(
        (row.state.as_str(), row.answered_by.as_deref()),
        ("approved", Some("dana"))
    );
}
