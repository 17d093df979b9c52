//! The store's behaviour on both backends: every generic test runs once on SQLite (a scratch
//! data dir) and once on a real, throwaway PostgreSQL server; the faults each backend has of its
//! own (a corrupt or locked file, a server that restarts) follow.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use manifold_store::{
    AUDIT_GENESIS, ApiKeyRecord, ApprovalRecord, AuditEntry, AuditFilter, AuditRow, BucketSpend,
    ChainBreak, ChangeWatch, DashboardSessionRecord, EVERY_REPLICA, LegacySessionRecord,
    MAX_API_KEY_GRANTS, MAX_APPROVAL_ID_LEN, MAX_APPROVAL_NAME_LEN, MAX_APPROVAL_NOTE_LEN,
    MAX_APPROVAL_PAGE, MAX_AUDIT_BATCH, MAX_AUDIT_PAGE, MAX_AUDIT_RECORD_BYTES, MAX_BUCKET_KEY_LEN,
    MAX_BUCKETS_PER_ROUND, MAX_LEDGER_ARGUMENTS_BYTES, MAX_LEGACY_LOG_LEVEL_LEN,
    MAX_LEGACY_SUBSCRIPTIONS, MAX_LEGACY_URI_BYTES, MAX_PIN_BATCH, MAX_PIN_DEFINITION_BYTES,
    MAX_PIN_NAME_LEN, MAX_RELAYED_MESSAGE_BYTES, PinChangeRecord, PinRecord, PinSnapshot,
    PinWriteRecord, Store, StoreError, StoreLocation, TOKEN_KEY_LEN, TokenKey, VerifyReport,
    audit_row_sha256, latest_version, migrator_for,
};
use manifold_testkit::{Postgres, is_root};

/// A database for one test, removed afterwards.
enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(Postgres),
}

const PASSWORD: &str = "pw-never-shown-7Qx";

impl Backend {
    fn sqlite() -> Backend {
        Backend::Sqlite(tempfile::tempdir().unwrap())
    }
    fn postgres() -> Backend {
        Backend::Postgres(Postgres::start().unwrap())
    }
    fn location(&self) -> StoreLocation {
        match self {
            Backend::Sqlite(dir) => StoreLocation::sqlite(dir.path().join("data")),
            Backend::Postgres(pg) => StoreLocation::postgres(pg.url_with_password(PASSWORD)),
        }
    }
    /// Runs `sql` outside the store (as an older Manifold or another tool would).
    async fn raw(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match self.location() {
            StoreLocation::Sqlite { data_dir } => {
                std::fs::create_dir_all(&data_dir).unwrap();
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(data_dir.join("store.sqlite"))
                    .create_if_missing(true);
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
            StoreLocation::Postgres { url } => {
                let pool = sqlx::PgPool::connect(&url).await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
        }
    }
    /// Applies this build's schema steps up to `version` only, as an earlier Manifold did.
    async fn migrate_to(&self, version: i64) {
        let location = self.location();
        let migrator = migrator_for(&location);
        match location {
            StoreLocation::Sqlite { data_dir } => {
                std::fs::create_dir_all(&data_dir).unwrap();
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(data_dir.join("store.sqlite"))
                    .create_if_missing(true);
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                migrator.run_to(version, &pool).await.unwrap();
                pool.close().await;
            }
            StoreLocation::Postgres { url } => {
                let pool = sqlx::PgPool::connect(&url).await.unwrap();
                migrator.run_to(version, &pool).await.unwrap();
                pool.close().await;
            }
        }
    }
}

fn key(id: &str) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.to_owned(),
        name: format!("{id} name"),
        principal: "alice".to_owned(),
        key_sha256: format!("{id:0>64}"),
        created_at_ms: 1_700_000_000_000,
        revoked_at_ms: None,
        scopes: vec!["mcp".to_owned(), "tools:read".to_owned()],
        groups: vec!["ops team".to_owned()],
    }
}

/// An audit entry as the gateway builds one: its record holds every field, the columns repeat some.
fn entry_at(
    call: &str,
    at_ms: i64,
    principal: &str,
    server: &str,
    target: &str,
    outcome: &str,
) -> AuditEntry {
    let record = serde_json::json!({
        "at_ms": at_ms,
        "call_id": call,
        "principal": principal,
        "server": server,
        "target": target,
        "outcome": outcome,
        "era": "modern",
    });
    AuditEntry::from_record_json(record.to_string()).unwrap()
}

fn audit_row(call: &str) -> AuditEntry {
    entry_at(
        call,
        1_700_000_000_001,
        "alice",
        "time",
        "get_current_time",
        "ok",
    )
}

fn calls(rows: &[AuditRow]) -> Vec<&str> {
    rows.iter().map(|r| r.entry.call_id.as_str()).collect()
}

/// Every row of the trail, oldest first.
async fn all_rows(store: &Store) -> Vec<AuditRow> {
    let mut rows = Vec::new();
    loop {
        let after = rows.last().map_or(0, |r: &AuditRow| r.seq);
        let page = store.audit().page(after, MAX_AUDIT_PAGE).await.unwrap();
        if page.is_empty() {
            return rows;
        }
        rows.extend(page);
    }
}

async fn migrates_from_empty(backend: Backend) {
    let location = backend.location();
    let store = Store::open(&location).await.unwrap();
    let debug = format!("{store:?}");
    assert!(
        !debug.contains(PASSWORD) && debug.contains("Store"),
        "{debug}"
    );
    let latest = latest_version(migrator_for(&location));
    assert_eq!(store.schema_version().await.unwrap(), latest);
    store.api_keys().insert(&key("k1")).await.unwrap();
    assert!(store.api_keys().revoke("k1", 5).await.unwrap());
    assert!(!store.api_keys().revoke("k1", 6).await.unwrap());
    let duplicate = store.api_keys().insert(&key("k1")).await.unwrap_err();
    assert!(
        matches!(duplicate, StoreError::AlreadyExists { .. }),
        "{duplicate}"
    );
    let seqs = store
        .audit()
        .append_batch(&[audit_row("c1"), audit_row("c2")])
        .await
        .unwrap();
    assert!(seqs[1] > seqs[0]);
    store.close().await;

    // Reopened: everything acknowledged is there, and migrating again changes nothing.
    let store = Store::open(&location).await.unwrap();
    let found = store
        .api_keys()
        .find_by_hash(&key("k1").key_sha256)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        found,
        ApiKeyRecord {
            revoked_at_ms: Some(5),
            ..key("k1")
        }
    );
    assert_eq!(store.api_keys().list().await.unwrap().len(), 1);
    let rows = store.audit().page(0, MAX_AUDIT_PAGE).await.unwrap();
    assert_eq!(calls(&rows), ["c1", "c2"]);
    assert_eq!(rows[1].entry, audit_row("c2"));
    assert!(store.audit().verify().await.unwrap().is_intact());
    store.close().await;
}

/// Rows an earlier schema's `audit_events` table held (step 2 added it); none is lost upgrading.
const OLD_AUDIT_EVENTS: &str = "INSERT INTO audit_events (at_ms, call_id, principal, server, tool, outcome, args_sha256, detail_json, prev_sha256, row_sha256) VALUES \
    (10, 'old-1', 'bob', 'fs', 'read_file', 'ok', 'aa', '{\"era\":\"v2\"}', 'p1', 'r1'), \
    (11, 'old-2', 'carol', 'time', 'now', 'tool_error', 'bb', 'not json', 'p2', 'r2')";

async fn migrates_from_every_earlier_schema(make: fn() -> Backend) {
    let latest = latest_version(migrator_for(&make().location()));
    for earlier in 0..latest {
        let backend = make();
        backend.migrate_to(earlier).await;
        if earlier >= 1 {
            backend
                .raw("INSERT INTO api_keys (id, name, principal, key_sha256, created_at_ms) VALUES ('old', 'n', 'p', 'h', 1)")
                .await;
        }
        let had_audit_events = (2..4).contains(&earlier);
        if had_audit_events {
            backend.raw(OLD_AUDIT_EVENTS).await;
        }
        let store = Store::open(&backend.location()).await.unwrap();
        assert_eq!(
            store.schema_version().await.unwrap(),
            latest,
            "from schema {earlier}"
        );
        let kept = store.api_keys().list().await.unwrap();
        assert_eq!(
            kept.len(),
            usize::from(earlier >= 1),
            "from schema {earlier}"
        );
        let adopted = all_rows(&store).await;
        if had_audit_events {
            assert_eq!(calls(&adopted), ["old-1", "old-2"], "from schema {earlier}");
            let old = &adopted[1];
            assert_eq!(
                (
                    old.entry.at_ms,
                    old.entry.principal.as_str(),
                    old.entry.server.as_str()
                ),
                (11, "carol", "time")
            );
            assert_eq!(
                (old.entry.target.as_str(), old.entry.outcome.as_str()),
                ("now", "tool_error")
            );
            let record: serde_json::Value = serde_json::from_str(&old.entry.record_json).unwrap();
            assert_eq!(record["args_sha256"], "bb");
            assert_eq!(record["detail"], "not json");
            assert_eq!(record["adopted_from"]["row_sha256"], "r2");
            let first: serde_json::Value =
                serde_json::from_str(&adopted[0].entry.record_json).unwrap();
            assert_eq!(first["detail"]["era"], "v2");
            assert_eq!(adopted[0].prev_sha256, AUDIT_GENESIS);
        } else {
            assert!(adopted.is_empty(), "from schema {earlier}");
        }
        store
            .audit()
            .append_batch(&[audit_row("after-upgrade")])
            .await
            .unwrap();
        let report = store.audit().verify().await.unwrap();
        assert!(report.is_intact(), "from schema {earlier}: {report:?}");
        assert_eq!(report.rows_checked, if had_audit_events { 3 } else { 1 });
        store.close().await;

        // Adopted once: reopening moves nothing again.
        let store = Store::open(&backend.location()).await.unwrap();
        assert_eq!(
            all_rows(&store).await.len(),
            if had_audit_events { 3 } else { 1 }
        );
        store.close().await;
    }
}

async fn newer_schema_is_refused(backend: Backend) {
    let location = backend.location();
    let store = Store::open(&location).await.unwrap();
    store.api_keys().insert(&key("kept")).await.unwrap();
    store.close().await;
    backend
        .raw("INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) SELECT 99, 'from a newer Manifold', TRUE, checksum, 0 FROM _sqlx_migrations WHERE version = 1")
        .await;
    let err = Store::open(&location).await.unwrap_err();
    let known = latest_version(migrator_for(&location));
    let text = err.to_string();
    assert!(
        matches!(err, StoreError::NewerSchema { found: 99, known: k, .. } if k == known),
        "{text}"
    );
    assert!(text.contains(&location.shown()), "{text}");
    assert!(text.contains("upgrade Manifold"), "{text}");
    assert!(
        !text.contains(PASSWORD) && !format!("{err:?}").contains(PASSWORD),
        "{text}"
    );

    // Refused before anything changed: without the newer step, what was acknowledged is there.
    backend
        .raw("DELETE FROM _sqlx_migrations WHERE version = 99")
        .await;
    let store = Store::open(&location).await.unwrap();
    assert_eq!(store.api_keys().list().await.unwrap(), [key("kept")]);
    store.close().await;
}

/// How many writers race in [`concurrent_writes_all_land`].
const RACING_WRITERS: usize = 64;

/// SQLite's single writer queues concurrent writes instead of failing them with "database is locked".
async fn concurrent_writes_all_land(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let rows: Vec<AuditEntry> = (0..RACING_WRITERS)
        .map(|i| audit_row(&format!("c{i}")))
        .collect();
    let audit = store.audit();
    let appends = rows
        .iter()
        .map(|row| audit.append_batch(std::slice::from_ref(row)));
    let mut seqs: Vec<i64> = futures::future::join_all(appends)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), RACING_WRITERS);
    let report = store.audit().verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, RACING_WRITERS as u64);
    store.close().await;
}

/// Replicas starting together on one empty database: the migration runs once, both open.
#[tokio::test]
async fn postgres_replicas_starting_together_both_open() {
    let backend = Backend::postgres();
    let location = backend.location();
    let (a, b) = tokio::join!(Store::open(&location), Store::open(&location));
    let (a, b) = (a.unwrap(), b.unwrap());
    a.api_keys().insert(&key("from-a")).await.unwrap();
    assert_eq!(b.api_keys().list().await.unwrap(), [key("from-a")]);
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn sqlite_runs_in_wal_mode() {
    let backend = Backend::sqlite();
    let location = backend.location();
    let store = Store::open(&location).await.unwrap();
    store.api_keys().insert(&key("k")).await.unwrap();
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(location.sqlite_file().unwrap())
        .read_only(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    pool.close().await;
    store.close().await;
}

macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $name() { super::$name(super::Backend::sqlite()).await })*
            #[tokio::test]
            async fn migrates_from_every_earlier_schema() {
                super::migrates_from_every_earlier_schema(super::Backend::sqlite).await
            }
        }
        mod postgres {
            $(#[tokio::test] async fn $name() { super::$name(super::Backend::postgres()).await })*
            #[tokio::test]
            async fn migrates_from_every_earlier_schema() {
                super::migrates_from_every_earlier_schema(super::Backend::postgres).await
            }
        }
    };
}

/// What a key grants survives the round trip, bounded; one active key per name, as the key file had.
async fn api_keys_keep_grants_and_one_active_name(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let keys = store.api_keys();
    keys.insert(&key("a")).await.unwrap();
    let same_name = ApiKeyRecord {
        name: key("a").name,
        ..key("b")
    };
    let refused = keys.insert(&same_name).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::AlreadyExists { .. }),
        "{refused}"
    );
    assert!(keys.revoke("a", 7).await.unwrap());
    keys.insert(&same_name).await.unwrap();
    let listed = keys.list().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed
            .iter()
            .all(|k| k.scopes == key("a").scopes && k.groups == ["ops team"])
    );
    let too_many = ApiKeyRecord {
        scopes: vec!["s".to_owned(); MAX_API_KEY_GRANTS + 1],
        ..key("c")
    };
    let refused = keys.insert(&too_many).await.unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::Invalid {
                field: "scopes",
                ..
            }
        ),
        "{refused}"
    );
    store.close().await;
}

on_both_backends!(
    authored_tool_versions_append_once_and_list_the_newest,
    approvals_round_trip_and_settle_once,
    approvals_list_newest_first_and_abandon_only_the_holders_pending,
    approval_bounds_are_refused,
    oauth_tokens_are_sealed_and_bound_to_their_server,
    pins_are_written_under_conditions_and_approved,
    pin_bounds_are_refused,
    migrates_from_empty,
    newer_schema_is_refused,
    concurrent_writes_all_land,
    api_keys_keep_grants_and_one_active_name,
    rate_limit_buckets_add_every_spend_and_say_how_far_ahead,
    relayed_messages_reach_their_replica_in_order_and_are_pruned,
    legacy_session_state_follows_each_change_and_is_pruned,
    dashboard_sessions_are_found_touched_flashed_once_and_closed,
    audit_batches_chain_and_verify,
    audit_tampering_names_the_first_broken_row,
    audit_prune_keeps_an_anchor_the_rest_chains_on,
    audit_search_and_page_order,
    audit_bounds_are_refused,
);

/// A dashboard session is found by its hash, touched, shows a flash once, ends by sign-out or by
/// its key's revocation, and the table is pruned of idle ones and bounded.
async fn dashboard_sessions_are_found_touched_flashed_once_and_closed(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let sessions = store.dashboard_sessions();
    let record = |id: &str, key: Option<&str>, seen: i64| DashboardSessionRecord {
        id_sha256: id.to_owned(),
        operator_json: format!(r#"{{"name":"{id}"}}"#),
        key_id: key.map(str::to_owned),
        last_seen_ms: seen,
        ends_ms: None,
    };
    sessions
        .open(&record("s1", Some("k1"), 100), 0, 10)
        .await
        .unwrap();
    sessions
        .open(&record("s2", Some("k1"), 200), 0, 10)
        .await
        .unwrap();
    sessions
        .open(&record("s3", None, 300), 0, 10)
        .await
        .unwrap();
    assert_eq!(
        sessions.get("s1").await.unwrap(),
        Some(record("s1", Some("k1"), 100))
    );
    assert_eq!(sessions.get("nope").await.unwrap(), None);
    sessions.touch("s1", 150).await.unwrap();
    assert_eq!(sessions.get("s1").await.unwrap().unwrap().last_seen_ms, 150);
    sessions.set_flash("s3", Some("done")).await.unwrap();
    assert_eq!(
        sessions.take_flash("s3").await.unwrap().as_deref(),
        Some("done")
    );
    assert_eq!(sessions.take_flash("s3").await.unwrap(), None);
    assert_eq!(sessions.close_for_key("k1").await.unwrap(), 2);
    assert_eq!(sessions.get("s2").await.unwrap(), None);
    sessions.close("s3").await.unwrap();
    assert_eq!(sessions.get("s3").await.unwrap(), None);
    // Idle ones are forgotten at the next sign-in; past the bound, the least recently seen.
    sessions
        .open(&record("old", None, 10), 0, 10)
        .await
        .unwrap();
    sessions
        .open(&record("a", None, 1_000), 500, 10)
        .await
        .unwrap();
    assert_eq!(sessions.get("old").await.unwrap(), None);
    sessions
        .open(&record("b", None, 1_001), 500, 2)
        .await
        .unwrap();
    sessions
        .open(&record("c", None, 1_002), 500, 2)
        .await
        .unwrap();
    assert_eq!(sessions.get("a").await.unwrap(), None);
    assert!(
        sessions.get("b").await.unwrap().is_some() && sessions.get("c").await.unwrap().is_some()
    );
    store.close().await;
}

/// A message written for one replica is read by it (and one for every replica by all), after
/// the reader's last seq, in order; others' are not; old rows are pruned; on PostgreSQL a write
/// wakes a listener, and bounds are refused.
async fn relayed_messages_reach_their_replica_in_order_and_are_pruned(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let relay = store.session_relay();
    let mut listener = relay.listen().await.unwrap();
    assert_eq!(listener.is_some(), matches!(backend, Backend::Postgres(_)));
    let start = relay.latest_seq().await.unwrap();
    let one = relay
        .send("r-a", "s1", r#"{"id":"mf-r-a.1-1"}"#, 1_000)
        .await
        .unwrap();
    if let Some(listener) = listener.as_mut() {
        tokio::time::timeout(std::time::Duration::from_secs(10), listener.woken())
            .await
            .expect("the write woke the listener")
            .unwrap();
    }
    relay.send("r-b", "s2", "for b", 2_000).await.unwrap();
    let three = relay
        .send(EVERY_REPLICA, "s1", "for all", 3_000)
        .await
        .unwrap();
    assert!(one > start && three > one);
    let for_a = relay.since(start, "r-a", 10).await.unwrap();
    let seen: Vec<(&str, &str)> = for_a
        .iter()
        .map(|m| (m.session_id.as_str(), m.message.as_str()))
        .collect();
    assert_eq!(seen, [("s1", r#"{"id":"mf-r-a.1-1"}"#), ("s1", "for all")]);
    assert_eq!(relay.since(one, "r-a", 10).await.unwrap().len(), 1);
    assert_eq!(
        relay.since(start, "r-b", 1).await.unwrap()[0].message,
        "for b"
    );
    assert_eq!(relay.latest_seq().await.unwrap(), three);
    assert_eq!(relay.prune(2_500).await.unwrap(), 2);
    assert_eq!(relay.since(start, "r-a", 10).await.unwrap().len(), 1);
    for (to, session, message, field) in [
        ("", "s", "m".to_owned(), "to_replica"),
        ("r", "", "m".to_owned(), "session_id"),
        (
            "r",
            "s",
            "m".repeat(MAX_RELAYED_MESSAGE_BYTES + 1),
            "message",
        ),
    ] {
        let refused = relay.send(to, session, &message, 1).await.unwrap_err();
        assert!(
            matches!(refused, StoreError::Invalid { field: f, .. } if f == field),
            "{refused}"
        );
    }
    // A listener holds a connection of the pool, which closing waits for.
    drop(listener);
    store.close().await;
}

/// A legacy session's subscriptions, log level and end are read back as written, each change its
/// own (two writers lose neither), a session nobody wrote is `None`, old sessions are pruned with
/// their subscriptions, and bounds are refused.
async fn legacy_session_state_follows_each_change_and_is_pruned(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let sessions = store.legacy_sessions();
    let (s1, s2) = ("a".repeat(64), "B".repeat(64));
    assert_eq!(sessions.get(&s1).await.unwrap(), None);
    sessions.subscribe(&s1, "fx+test://b", 1_000).await.unwrap();
    sessions.subscribe(&s1, "fx+test://a", 1_001).await.unwrap();
    sessions.subscribe(&s1, "fx+test://a", 1_002).await.unwrap();
    // Two replicas changing the session at once: both changes stay.
    let (x, y) = tokio::join!(
        sessions.subscribe(&s1, "fx+test://c", 1_003),
        sessions.set_log_level(&s1, "warning", 1_003)
    );
    x.unwrap();
    y.unwrap();
    sessions
        .unsubscribe(&s1, "fx+test://b", 1_004)
        .await
        .unwrap();
    sessions
        .unsubscribe(&s1, "never-subscribed", 1_005)
        .await
        .unwrap();
    assert_eq!(
        sessions.get(&s1).await.unwrap(),
        Some(LegacySessionRecord {
            subscriptions: vec!["fx+test://a".to_owned(), "fx+test://c".to_owned()],
            log_level: Some("warning".to_owned()),
            ended: false,
        })
    );
    sessions.end(&s2, 2_000).await.unwrap();
    let ended = sessions.get(&s2).await.unwrap().unwrap();
    assert!(ended.ended && ended.subscriptions.is_empty(), "{ended:?}");
    // s1 was last changed at 1_005: pruning before 1_500 takes it and its subscriptions.
    assert_eq!(sessions.prune(1_500).await.unwrap(), 1);
    assert_eq!(sessions.get(&s1).await.unwrap(), None);
    sessions.subscribe(&s1, "fx+test://z", 3_000).await.unwrap();
    assert_eq!(
        sessions.get(&s1).await.unwrap().unwrap().subscriptions,
        ["fx+test://z"],
        "no subscription of the pruned session came back"
    );
    assert!(sessions.get(&s2).await.unwrap().unwrap().ended);

    let field_of = |e: StoreError| match e {
        StoreError::Invalid { field, .. } => field,
        other => panic!("{other}"),
    };
    assert_eq!(
        field_of(sessions.get("not-a-digest").await.unwrap_err()),
        "id_sha256"
    );
    let long_uri = "u".repeat(MAX_LEGACY_URI_BYTES + 1);
    assert_eq!(
        field_of(sessions.subscribe(&s1, &long_uri, 1).await.unwrap_err()),
        "uri"
    );
    assert_eq!(
        field_of(sessions.subscribe(&s1, "", 1).await.unwrap_err()),
        "uri"
    );
    let at_the_bound = "u".repeat(MAX_LEGACY_URI_BYTES);
    sessions.subscribe(&s1, &at_the_bound, 4_000).await.unwrap();
    let long_level = "l".repeat(MAX_LEGACY_LOG_LEVEL_LEN + 1);
    assert_eq!(
        field_of(
            sessions
                .set_log_level(&s1, &long_level, 1)
                .await
                .unwrap_err()
        ),
        "log_level"
    );
    let s3 = "c".repeat(64);
    for n in 0..MAX_LEGACY_SUBSCRIPTIONS {
        sessions
            .subscribe(&s3, &format!("r://{n:05}"), 5_000)
            .await
            .unwrap();
    }
    let over = sessions
        .subscribe(&s3, "r://one-more", 5_001)
        .await
        .unwrap_err();
    assert!(matches!(over, StoreError::OverLimit { .. }), "{over}");
    // A subscription already kept is no new one, even at the bound.
    sessions.subscribe(&s3, "r://00000", 5_002).await.unwrap();
    assert_eq!(
        sessions
            .get(&s3)
            .await
            .unwrap()
            .unwrap()
            .subscriptions
            .len(),
        MAX_LEGACY_SUBSCRIPTIONS
    );
    store.close().await;
}

/// Spends from every round (every replica) add up in one bucket, a refilled bucket starts from
/// now, the answer says how far ahead each bucket is, and bad rounds are refused whole.
async fn rate_limit_buckets_add_every_spend_and_say_how_far_ahead(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let buckets = store.rate_limit_buckets();
    let spend = |key: &str, spent_us: i64| BucketSpend {
        key: key.to_owned(),
        spent_us,
    };
    const SECOND: i64 = 1_000_000;
    // Generous for a slow machine: the round trips between two answers take less than this.
    const SLACK: i64 = SECOND / 2;
    let first = buckets.share(&[spend("i:alice", SECOND)]).await.unwrap();
    assert!((SECOND - SLACK..=SECOND).contains(&first[0]), "{first:?}");
    // A second replica's round: alice's bucket now holds both spends; bob's is new and full.
    let second = buckets
        .share(&[spend("i:bob", 0), spend("i:alice", SECOND / 2)])
        .await
        .unwrap();
    assert!(
        (SECOND + SECOND / 2 - SLACK..=SECOND + SECOND / 2).contains(&second[1]),
        "{second:?}"
    );
    assert!((-SLACK..=0).contains(&second[0]), "{second:?}");
    // Reading without spending changes nothing.
    let read = buckets.share(&[spend("i:alice", 0)]).await.unwrap();
    assert!(read[0] <= second[1] && read[0] > SECOND, "{read:?}");
    // A bucket that refilled long ago starts again from now, not from its old debt.
    let old = buckets.share(&[spend("i:carol", 1)]).await.unwrap();
    assert!(old[0] <= 1, "{old:?}");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let again = buckets.share(&[spend("i:carol", SECOND)]).await.unwrap();
    assert!((SECOND - SLACK..=SECOND).contains(&again[0]), "{again:?}");
    // Prune forgets full buckets (bob) and keeps those still owing (alice, carol).
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(buckets.prune(0).await.unwrap(), 1);
    let kept = buckets
        .share(&[spend("i:alice", 0), spend("i:bob", 0)])
        .await
        .unwrap();
    assert!(kept[0] > SECOND / 2 && kept[1] <= 0, "{kept:?}");
    // Bad rounds: nothing of them is applied.
    for (bad, field) in [
        (vec![spend("", 1)], "key"),
        (vec![spend("tool/a\0b", 1)], "key"),
        (vec![spend(&"k".repeat(MAX_BUCKET_KEY_LEN + 1), 1)], "key"),
        (vec![spend("i:alice", -1)], "spent_us"),
        (
            (0..=MAX_BUCKETS_PER_ROUND)
                .map(|i| spend(&format!("k{i}"), 0))
                .collect(),
            "keys",
        ),
    ] {
        let refused = buckets.share(&bad).await.unwrap_err();
        assert!(
            matches!(refused, StoreError::Invalid { field: f, .. } if f == field),
            "{refused}"
        );
    }
    assert_eq!(buckets.share(&[]).await.unwrap(), Vec::<i64>::new());
    store.close().await;
}

/// A short command (`manifold keys`) writes beside a gateway holding the SQLite store, and the
/// gateway reads what it wrote; a second full open is still refused.
/// Writes the key `from-command` as a `manifold keys` command beside a gateway does.
async fn insert_from_a_command(location: &StoreLocation) {
    let command = Store::open_for_command(location).await.unwrap();
    command
        .api_keys()
        .insert(&key("from-command"))
        .await
        .unwrap();
    command.close().await;
}

#[tokio::test]
async fn sqlite_command_opens_beside_the_holder() {
    let backend = Backend::sqlite();
    let location = backend.location();
    let held = Store::open(&location).await.unwrap();
    let refused = Store::open(&location).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::HeldByAnotherProcess { .. }),
        "{refused}"
    );
    insert_from_a_command(&location).await;
    assert_eq!(held.api_keys().list().await.unwrap(), [key("from-command")]);
    held.close().await;
}

/// A poll of an unchanged SQLite store reads nothing; a write by another process (a command
/// beside the gateway), or by the holder itself, is seen at the next poll.
#[tokio::test]
async fn sqlite_change_watch_reads_only_after_a_write() {
    let backend = Backend::sqlite();
    let location = backend.location();
    let held = Store::open(&location).await.unwrap();
    let watch = ChangeWatch::new();
    assert!(watch.should_read(&held), "the first poll reads");
    assert!(!watch.should_read(&held), "nothing was written since");
    insert_from_a_command(&location).await;
    assert!(watch.should_read(&held), "another process wrote");
    assert!(!watch.should_read(&held));
    for n in 0..20 {
        held.api_keys()
            .insert(&key(&format!("own-{n}")))
            .await
            .unwrap();
        assert!(watch.should_read(&held), "write {n} of this process");
    }
    watch.forget();
    assert!(watch.should_read(&held), "a forgotten stamp reads again");
    held.close().await;
}

#[tokio::test]
async fn postgres_change_watch_always_reads() {
    let backend = Backend::postgres();
    let store = Store::open(&backend.location()).await.unwrap();
    assert_eq!(store.change_stamp(), None);
    let watch = ChangeWatch::new();
    assert!(watch.should_read(&store));
    assert!(
        watch.should_read(&store),
        "PostgreSQL has no files to look at"
    );
    store.close().await;
}

#[tokio::test]
async fn sqlite_corrupt_file_is_refused_naming_it() {
    let backend = Backend::sqlite();
    let location = backend.location();
    let file = location.sqlite_file().unwrap();
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let garbage =
        b"this is not a SQLite database, it is a text file someone saved over it\n".repeat(100);
    std::fs::write(&file, &garbage).unwrap();
    let err = Store::open(&location).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{text}");
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(text.contains("restore it from a backup"), "{text}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        garbage,
        "the damaged file must be left as it was"
    );
}

/// Set in a child test process: the data dir it opens the store in.
const CHILD_DATA_DIR_ENV: &str = "MANIFOLD_STORE_TEST_CHILD_DATA_DIR";

fn child_test(name: &str, data_dir: &std::path::Path) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", name, "--ignored", "--nocapture"])
        .env(CHILD_DATA_DIR_ENV, data_dir);
    command
}

#[tokio::test]
#[ignore = "run by sqlite_second_process_is_refused as its child process"]
async fn child_holds_the_store_until_stdin_closes() {
    let dir = std::env::var_os(CHILD_DATA_DIR_ENV).expect("only run as a child");
    let store = Store::open(&StoreLocation::sqlite(dir)).await.unwrap();
    println!("HOLDING");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    store.close().await;
}

#[tokio::test]
async fn sqlite_second_process_is_refused() {
    let backend = Backend::sqlite();
    let StoreLocation::Sqlite { data_dir } = backend.location() else {
        unreachable!()
    };
    let mut child = child_test("child_holds_the_store_until_stdin_closes", &data_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("HOLDING") {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the child ended without holding the store"
        );
    }
    let err = Store::open(&backend.location()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, StoreError::HeldByAnotherProcess { pid, .. } if *pid == child.id().to_string()),
        "{text}"
    );
    assert!(
        text.contains("several replicas of one gateway need PostgreSQL")
            && text.contains("a separate gateway beside it needs a [gateway] data_dir of its own"),
        "{text}"
    );
    assert!(text.contains(&backend.location().shown()), "{text}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // The lock went with the process.
    Store::open(&backend.location())
        .await
        .unwrap()
        .close()
        .await;
}

#[tokio::test]
#[ignore = "run by sqlite_read_only_data_dir_is_refused_naming_it as its child process"]
async fn child_opens_a_read_only_store() {
    let dir = std::path::PathBuf::from(
        std::env::var_os(CHILD_DATA_DIR_ENV).expect("only run as a child"),
    );
    let err = Store::open(&StoreLocation::sqlite(&dir)).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{text}");
    assert!(text.contains(&dir.display().to_string()), "{text}");
    assert!(text.contains("make it writable"), "{text}");
}

#[tokio::test]
async fn sqlite_read_only_data_dir_is_refused_naming_it() {
    let backend = Backend::sqlite();
    let location = backend.location();
    let StoreLocation::Sqlite { data_dir } = &location else {
        unreachable!()
    };
    let store = Store::open(&location).await.unwrap();
    store.api_keys().insert(&key("acknowledged")).await.unwrap();
    store.close().await;

    // Root writes through permission bits, so as root the directory is made read-only by a
    // read-only bind mount in a mount namespace of the child's own.
    let status = if is_root() {
        let script = "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && exec \"$0\" --exact child_opens_a_read_only_store --ignored --nocapture";
        Command::new("unshare")
            .args(["-m", "sh", "-c", script])
            .arg(std::env::current_exe().unwrap())
            .arg(data_dir)
            .env(CHILD_DATA_DIR_ENV, data_dir)
            .status()
            .unwrap()
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let status = child_test("child_opens_a_read_only_store", data_dir)
            .status()
            .unwrap();
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        status
    };
    assert!(
        status.success(),
        "the child did not see the read-only refusal"
    );
    let store = Store::open(&location).await.unwrap();
    assert_eq!(
        store.api_keys().list().await.unwrap(),
        [key("acknowledged")]
    );
    store.close().await;
}

#[tokio::test]
async fn postgres_restart_reconnects_and_keeps_acknowledged_writes() {
    let pg = Postgres::start().unwrap();
    let location = StoreLocation::postgres(pg.url_with_password(PASSWORD));
    let store = Store::open(&location).await.unwrap();
    store.api_keys().insert(&key("before")).await.unwrap();
    pg.stop().unwrap();
    let err = store
        .api_keys()
        .insert(&key("while-down"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Unavailable { .. }), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{}", pg.port())), "{text}");
    assert!(
        !text.contains(PASSWORD) && !format!("{err:?}").contains(PASSWORD),
        "{text}"
    );
    pg.start_again().unwrap();
    let ids: Vec<_> = store
        .api_keys()
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(ids, ["before"]);
    store.api_keys().insert(&key("after")).await.unwrap();
    store.close().await;
}

#[tokio::test]
async fn postgres_password_never_appears_in_errors() {
    let pg = Postgres::start().unwrap();
    let port = pg.port();
    pg.stop().unwrap();
    let location = StoreLocation::postgres(format!(
        "postgres://mf:{PASSWORD}@127.0.0.1:{port}/manifold"
    ));
    let err = Store::open(&location).await.unwrap_err();
    for shown in [
        err.to_string(),
        format!("{err:?}"),
        format!("{location:?}"),
        location.to_string(),
    ] {
        assert!(!shown.contains(PASSWORD), "{shown}");
    }
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    let not_pg = Store::open(&StoreLocation::postgres(format!(
        "mysql://u:{PASSWORD}@h/db"
    )))
    .await
    .unwrap_err();
    assert!(
        matches!(not_pg, StoreError::NotPostgres { .. }) && !not_pg.to_string().contains(PASSWORD),
        "{not_pg}"
    );
}

// ------------------------------------------------------------------ OAuth tokens (step 5)

/// The ciphertext column of `server`'s row, read outside the store.
async fn raw_ciphertext(backend: &Backend, server: &str) -> Vec<u8> {
    let sql = "SELECT ciphertext FROM oauth_tokens WHERE server = $1";
    match backend.location() {
        StoreLocation::Sqlite { data_dir } => {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(data_dir.join("store.sqlite"))
                .read_only(true);
            let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
            let bytes = sqlx::query_scalar(sql)
                .bind(server)
                .fetch_one(&pool)
                .await
                .unwrap();
            pool.close().await;
            bytes
        }
        StoreLocation::Postgres { url } => {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            let bytes = sqlx::query_scalar(sql)
                .bind(server)
                .fetch_one(&pool)
                .await
                .unwrap();
            pool.close().await;
            bytes
        }
    }
}

const TOKENS_PLAINTEXT: &[u8] =
    br#"{"access_token":"at-never-stored-plain-9Zk","refresh_token":"rt-x"}"#;

/// Tokens round-trip sealed (the row holds no plaintext, each write a fresh nonce); another key
/// and a row moved to another server's name are refused with the message that says what to do.
async fn oauth_tokens_are_sealed_and_bound_to_their_server(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let tokens = store.oauth_tokens();
    let key = TokenKey::from_bytes(&[7u8; TOKEN_KEY_LEN], "key A").unwrap();
    assert_eq!(tokens.get("srv").await.unwrap(), None);
    tokens
        .put(&key.seal("srv", TOKENS_PLAINTEXT, 10).unwrap())
        .await
        .unwrap();
    let first_cipher = raw_ciphertext(&backend, "srv").await;
    assert!(
        !first_cipher
            .windows(b"at-never-stored-plain".len())
            .any(|w| w == b"at-never-stored-plain"),
        "the row holds the token in the clear"
    );
    let stored = tokens.get("srv").await.unwrap().unwrap();
    assert_eq!(stored.server(), "srv");
    assert_eq!(stored.updated_at_ms(), 10);
    assert_eq!(key.open(&stored).unwrap(), TOKENS_PLAINTEXT);

    // A write replaces the row under a new nonce; an import never replaces it.
    tokens
        .put(&key.seal("srv", TOKENS_PLAINTEXT, 11).unwrap())
        .await
        .unwrap();
    assert_ne!(raw_ciphertext(&backend, "srv").await, first_cipher);
    let imported = key.seal("srv", b"older", 1).unwrap();
    assert!(!tokens.insert_new(&imported).await.unwrap());
    assert_eq!(
        key.open(&tokens.get("srv").await.unwrap().unwrap())
            .unwrap(),
        TOKENS_PLAINTEXT
    );

    let other_key = TokenKey::from_bytes(&[8u8; TOKEN_KEY_LEN], "key B").unwrap();
    let wrong = other_key
        .open(&tokens.get("srv").await.unwrap().unwrap())
        .unwrap_err();
    assert!(
        matches!(&wrong, StoreError::Undecryptable { server, key_source } if server == "srv" && key_source == "key B"),
        "{wrong}"
    );
    assert_eq!(
        wrong.to_string(),
        "the stored OAuth tokens of server \"srv\" cannot be decrypted with the key from key B; run `manifold login srv` again or restore the key"
    );

    // A row moved under another server's name does not open, even with the right key.
    backend
        .raw("UPDATE oauth_tokens SET server = 'elsewhere' WHERE server = 'srv'")
        .await;
    assert_eq!(tokens.get("srv").await.unwrap(), None);
    let moved = key
        .open(&tokens.get("elsewhere").await.unwrap().unwrap())
        .unwrap_err();
    assert!(
        matches!(&moved, StoreError::Undecryptable { server, .. } if server == "elsewhere"),
        "{moved}"
    );

    assert!(
        tokens
            .insert_new(&key.seal("second", b"{}", 12).unwrap())
            .await
            .unwrap()
    );
    assert_eq!(tokens.servers().await.unwrap(), ["elsewhere", "second"]);
    assert!(tokens.delete("elsewhere").await.unwrap());
    assert!(!tokens.delete("elsewhere").await.unwrap());
    assert_eq!(tokens.servers().await.unwrap(), ["second"]);
    store.close().await;
}

/// Rows one `append_batch` call chains on the one before, across batches and pages; verify walks
/// every page and finds nothing broken.
async fn audit_batches_chain_and_verify(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let audit = store.audit();
    assert_eq!(audit.head().await.unwrap(), None);
    let empty = audit.verify().await.unwrap();
    assert_eq!(
        (empty.rows_checked, empty.first_row, empty.first_broken),
        (0, None, None)
    );
    // More rows than one verify page, so verify must page on.
    let sizes = [MAX_AUDIT_BATCH, MAX_AUDIT_BATCH, 100];
    let mut seqs = Vec::new();
    for (b, size) in sizes.into_iter().enumerate() {
        let batch: Vec<_> = (0..size).map(|i| audit_row(&format!("b{b}-{i}"))).collect();
        seqs.extend(audit.append_batch(&batch).await.unwrap());
    }
    assert!(audit.append_batch(&[]).await.unwrap().is_empty());
    let total = sizes.iter().sum::<usize>();
    assert!(total > MAX_AUDIT_PAGE as usize);
    let rows = all_rows(&store).await;
    assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), seqs);
    let mut prev = AUDIT_GENESIS.to_owned();
    for row in &rows {
        assert_eq!(row.prev_sha256, prev, "row {}", row.seq);
        assert_eq!(
            row.row_sha256,
            audit_row_sha256(&prev, &row.entry.record_json)
        );
        prev = row.row_sha256.clone();
    }
    assert_eq!(audit.head().await.unwrap(), Some((seqs[total - 1], prev)));
    let report = audit.verify().await.unwrap();
    assert_eq!(
        report,
        VerifyReport {
            rows_checked: total as u64,
            first_row: Some(seqs[0]),
            last_row: Some(seqs[total - 1]),
            pruned: None,
            first_broken: None,
        }
    );
    store.close().await;
}

/// Changing a row behind the store's back (its record, a column, a record and its hash, or
/// deleting rows) is found by verify, which names the first broken row.
async fn audit_tampering_names_the_first_broken_row(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let batch: Vec<_> = (0..10).map(|i| audit_row(&format!("t{i}"))).collect();
    let seqs = store.audit().append_batch(&batch).await.unwrap();
    let rows = all_rows(&store).await;
    let broken = |report: VerifyReport| report.first_broken;

    backend
        .raw(&format!("UPDATE audit_trail SET record_json = replace(record_json, 'alice', 'mallory') WHERE seq = {}", seqs[3]))
        .await;
    let found = broken(store.audit().verify().await.unwrap());
    assert!(
        matches!(&found, Some((seq, ChainBreak::RowHash { stored, .. })) if *seq == seqs[3] && *stored == rows[3].row_sha256),
        "{found:?}"
    );
    backend
        .raw(&format!("UPDATE audit_trail SET record_json = replace(record_json, 'mallory', 'alice') WHERE seq = {}", seqs[3]))
        .await;
    assert!(store.audit().verify().await.unwrap().is_intact());

    backend
        .raw(&format!(
            "UPDATE audit_trail SET principal = 'mallory' WHERE seq = {}",
            seqs[5]
        ))
        .await;
    let found = broken(store.audit().verify().await.unwrap());
    assert_eq!(
        found,
        Some((
            seqs[5],
            ChainBreak::Column {
                column: "principal"
            }
        ))
    );
    let text = found.unwrap().1.to_string();
    assert!(text.contains("principal"), "{text}");
    backend
        .raw(&format!(
            "UPDATE audit_trail SET principal = 'alice' WHERE seq = {}",
            seqs[5]
        ))
        .await;

    // A record rewritten with a matching hash: the next row's link no longer holds.
    let forged = rows[2].entry.record_json.replace("alice", "eve");
    let forged_sha = audit_row_sha256(&rows[2].prev_sha256, &forged);
    backend
        .raw(&format!(
            "UPDATE audit_trail SET record_json = '{forged}', principal = 'eve', row_sha256 = '{forged_sha}' WHERE seq = {}",
            seqs[2]
        ))
        .await;
    let found = broken(store.audit().verify().await.unwrap());
    assert_eq!(
        found,
        Some((
            seqs[3],
            ChainBreak::PrevLink {
                expected: forged_sha,
                found: rows[2].row_sha256.clone()
            }
        ))
    );
    backend
        .raw(&format!(
            "UPDATE audit_trail SET record_json = '{}', principal = 'alice', row_sha256 = '{}' WHERE seq = {}",
            rows[2].entry.record_json, rows[2].row_sha256, seqs[2]
        ))
        .await;
    assert!(store.audit().verify().await.unwrap().is_intact());

    backend
        .raw(&format!("DELETE FROM audit_trail WHERE seq = {}", seqs[6]))
        .await;
    let report = store.audit().verify().await.unwrap();
    assert_eq!(report.rows_checked, 9);
    assert_eq!(
        report.first_broken,
        Some((
            seqs[7],
            ChainBreak::PrevLink {
                expected: rows[5].row_sha256.clone(),
                found: rows[6].row_sha256.clone()
            }
        ))
    );
    // Deleting the first row too: that is now the first break.
    backend
        .raw(&format!("DELETE FROM audit_trail WHERE seq = {}", seqs[0]))
        .await;
    let found = broken(store.audit().verify().await.unwrap());
    assert_eq!(
        found,
        Some((
            seqs[1],
            ChainBreak::PrevLink {
                expected: AUDIT_GENESIS.to_owned(),
                found: rows[0].row_sha256.clone()
            }
        ))
    );
    store.close().await;
}

/// A prune removes a prefix of the chain and records its anchor; verify still passes from the
/// anchor, and appends after it (even after a prune of everything) chain on.
async fn audit_prune_keeps_an_anchor_the_rest_chains_on(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let audit = store.audit();
    // p4 is older than p3: a replica's clock behind the others'.
    let at = [1, 2, 3, 10, 4, 11];
    let batch: Vec<_> = at
        .iter()
        .enumerate()
        .map(|(i, at_ms)| entry_at(&format!("p{i}"), *at_ms, "alice", "fs", "read", "ok"))
        .collect();
    let seqs = audit.append_batch(&batch).await.unwrap();
    let rows = all_rows(&store).await;
    assert_eq!(audit.anchor().await.unwrap(), None);
    assert_eq!(audit.prune_before(1).await.unwrap(), None);

    let anchor = audit.prune_before(5).await.unwrap().unwrap();
    assert_eq!(
        (
            anchor.through_seq,
            anchor.rows,
            anchor.anchor_sha256.as_str()
        ),
        (seqs[2], 3, rows[2].row_sha256.as_str())
    );
    assert_eq!(audit.anchor().await.unwrap(), Some(anchor.clone()));
    assert_eq!(calls(&all_rows(&store).await), ["p3", "p4", "p5"]);
    let report = audit.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        (report.rows_checked, report.first_row, report.pruned),
        (3, Some(seqs[3]), Some(anchor))
    );

    let p6 = audit
        .append_batch(&[entry_at("p6", 12, "alice", "fs", "read", "ok")])
        .await
        .unwrap()[0];
    assert_eq!(audit.verify().await.unwrap().rows_checked, 4);
    let p6_sha = audit.head().await.unwrap().unwrap().1;

    let everything = audit.prune_before(i64::MAX).await.unwrap().unwrap();
    assert_eq!(
        (
            everything.through_seq,
            everything.rows,
            everything.anchor_sha256.as_str()
        ),
        (p6, 4, p6_sha.as_str())
    );
    assert!(all_rows(&store).await.is_empty());
    assert_eq!(audit.head().await.unwrap(), Some((p6, p6_sha.clone())));
    let empty = audit.verify().await.unwrap();
    assert!(empty.is_intact() && empty.rows_checked == 0);
    assert_eq!(empty.pruned, Some(everything.clone()));

    let p7 = audit
        .append_batch(&[entry_at("p7", 20, "alice", "fs", "read", "ok")])
        .await
        .unwrap()[0];
    assert!(p7 > p6);
    assert_eq!(all_rows(&store).await[0].prev_sha256, p6_sha);
    let report = audit.verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!((report.rows_checked, report.pruned), (1, Some(everything)));
    assert_eq!(audit.prune_before(5).await.unwrap(), None);
    store.close().await;
}

/// Search matches each filter field and the time range, newest first; pages run oldest first.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
async fn audit_search_and_page_order(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let audit = store.audit();
    let batch = [
        entry_at("s0", 100, "alice", "fs", "read_file", "ok"),
        entry_at("s1", 200, "bob", "fs", "write_file", "tool_error"),
        entry_at("s2", 300, "alice", "time", "now", "ok"),
        entry_at(
            "s3",
            400,
            "alice",
            "fs",
            "resources/read file:///x",
            "refused",
        ),
        entry_at("s4", 500, "bob", "time", "now", "ok"),
    ];
    let seqs = audit.append_batch(&batch).await.unwrap();
    let search = |filter: AuditFilter, limit: u32| async move {
        calls(&audit.search(&filter, limit).await.unwrap())
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        search(
            AuditFilter {
                principal: some("alice"),
                ..Default::default()
            },
            10
        )
        .await,
        ["s3", "s2", "s0"]
    );
    assert_eq!(
        search(
            AuditFilter {
                server: some("fs"),
                ..Default::default()
            },
            10
        )
        .await,
        ["s3", "s1", "s0"]
    );
    assert_eq!(
        search(
            AuditFilter {
                target: some("now"),
                ..Default::default()
            },
            10
        )
        .await,
        ["s4", "s2"]
    );
    assert_eq!(
        search(
            AuditFilter {
                target: some("resources/read file:///x"),
                ..Default::default()
            },
            10
        )
        .await,
        ["s3"]
    );
    assert_eq!(
        search(
            AuditFilter {
                outcome: some("ok"),
                ..Default::default()
            },
            10
        )
        .await,
        ["s4", "s2", "s0"]
    );
    assert_eq!(
        search(
            AuditFilter {
                since_ms: Some(200),
                until_ms: Some(400),
                ..Default::default()
            },
            10
        )
        .await,
        ["s2", "s1"]
    );
    assert_eq!(
        search(
            AuditFilter {
                principal: some("alice"),
                server: some("fs"),
                since_ms: Some(200),
                ..Default::default()
            },
            10
        )
        .await,
        ["s3"]
    );
    assert_eq!(search(AuditFilter::default(), 2).await, ["s4", "s3"]);
    // The next page starts before the smallest seq shown, and keeps the other filters.
    assert_eq!(
        search(
            AuditFilter {
                before_seq: Some(seqs[3]),
                ..Default::default()
            },
            2
        )
        .await,
        ["s2", "s1"]
    );
    assert_eq!(
        search(
            AuditFilter {
                principal: some("alice"),
                before_seq: Some(seqs[2]),
                ..Default::default()
            },
            10
        )
        .await,
        ["s0"]
    );
    assert!(search(AuditFilter::default(), 0).await.is_empty());
    assert!(
        search(
            AuditFilter {
                principal: some("nobody"),
                ..Default::default()
            },
            10
        )
        .await
        .is_empty()
    );

    assert_eq!(calls(&audit.page(0, 2).await.unwrap()), ["s0", "s1"]);
    assert_eq!(calls(&audit.page(seqs[1], 2).await.unwrap()), ["s2", "s3"]);
    assert!(audit.page(seqs[4], 10).await.unwrap().is_empty());
    store.close().await;
}

/// A record of exactly `bytes` bytes for call `call`.
fn padded(call: &str, bytes: usize) -> AuditEntry {
    let record = |pad: &str| {
        serde_json::json!({
            "at_ms": 7, "call_id": call, "principal": "alice", "server": "fs",
            "target": "read_file", "outcome": "ok", "pad": pad,
        })
        .to_string()
    };
    let base = record("").len();
    let record = record(&"x".repeat(bytes - base));
    assert_eq!(record.len(), bytes);
    AuditEntry {
        at_ms: 7,
        call_id: call.to_owned(),
        principal: "alice".to_owned(),
        server: "fs".to_owned(),
        target: "read_file".to_owned(),
        outcome: "ok".to_owned(),
        record_json: record,
    }
}

/// Each bound is taken at its limit and refused one past it, with an error naming the bound (or
/// the call), and a refused batch writes nothing.
async fn audit_bounds_are_refused(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let audit = store.audit();
    let full: Vec<_> = (0..MAX_AUDIT_BATCH)
        .map(|i| audit_row(&format!("f{i}")))
        .collect();
    assert_eq!(
        audit.append_batch(&full).await.unwrap().len(),
        MAX_AUDIT_BATCH
    );
    let head = audit.head().await.unwrap();

    let over: Vec<_> = (0..=MAX_AUDIT_BATCH)
        .map(|i| audit_row(&format!("o{i}")))
        .collect();
    let err = audit.append_batch(&over).await.unwrap_err();
    assert!(matches!(err, StoreError::OverLimit { .. }), "{err}");
    assert!(
        err.to_string().contains("MAX_AUDIT_BATCH") && err.to_string().contains("split"),
        "{err}"
    );
    assert_eq!(
        audit.head().await.unwrap(),
        head,
        "a refused batch wrote rows"
    );

    audit
        .append_batch(&[padded("at-limit", MAX_AUDIT_RECORD_BYTES)])
        .await
        .unwrap();
    let head = audit.head().await.unwrap();
    let err = audit
        .append_batch(&[
            audit_row("fine"),
            padded("too-big", MAX_AUDIT_RECORD_BYTES + 1),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::AuditRecordTooLarge { call_id, .. } if call_id == "too-big"),
        "{err}"
    );
    assert!(err.to_string().contains("\"too-big\""), "{err}");
    let disagreeing = AuditEntry {
        principal: "mallory".to_owned(),
        ..audit_row("liar")
    };
    let err = audit.append_batch(&[disagreeing]).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::AuditRecordInvalid { call_id, .. } if call_id == "liar"),
        "{err}"
    );
    assert!(err.to_string().contains("principal"), "{err}");
    assert_eq!(
        audit.head().await.unwrap(),
        head,
        "a refused batch wrote rows"
    );

    // Enough rows for a full page.
    audit.append_batch(&full).await.unwrap();
    assert_eq!(
        audit.page(0, MAX_AUDIT_PAGE).await.unwrap().len(),
        MAX_AUDIT_PAGE as usize
    );
    for err in [
        audit.page(0, MAX_AUDIT_PAGE + 1).await.unwrap_err(),
        audit
            .search(&AuditFilter::default(), MAX_AUDIT_PAGE + 1)
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, StoreError::OverLimit { .. }), "{err}");
        assert!(err.to_string().contains("MAX_AUDIT_PAGE"), "{err}");
    }
    assert_eq!(
        audit
            .search(&AuditFilter::default(), MAX_AUDIT_PAGE)
            .await
            .unwrap()
            .len(),
        MAX_AUDIT_PAGE as usize
    );
    assert!(audit.verify().await.unwrap().is_intact());
    store.close().await;
}

/// Batches each of two replicas appends in one race.
const REPLICA_BATCHES: usize = 25;
/// Rows per racing batch.
const REPLICA_BATCH_ROWS: usize = 4;

/// Two gateway replicas on one PostgreSQL append at once: the chain lock keeps one unbroken
/// chain (without it both would chain on the same tip and fork), and each batch stays contiguous.
#[tokio::test]
async fn postgres_replicas_append_one_chain() {
    let backend = Backend::postgres();
    let a = Store::open(&backend.location()).await.unwrap();
    let b = Store::open(&backend.location()).await.unwrap();
    let batches: Vec<Vec<AuditEntry>> = (0..2 * REPLICA_BATCHES)
        .map(|i| {
            (0..REPLICA_BATCH_ROWS)
                .map(|j| audit_row(&format!("r{i}-{j}")))
                .collect()
        })
        .collect();
    let appends = batches.iter().enumerate().map(|(i, batch)| {
        let replica = if i % 2 == 0 { &a } else { &b };
        async move { replica.audit().append_batch(batch).await.unwrap() }
    });
    let seqs = futures::future::join_all(appends).await;
    let report = a.audit().verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        report.rows_checked,
        (2 * REPLICA_BATCHES * REPLICA_BATCH_ROWS) as u64
    );
    let order: Vec<i64> = all_rows(&b).await.iter().map(|r| r.seq).collect();
    for batch in seqs {
        let at = order.iter().position(|s| *s == batch[0]).unwrap();
        assert_eq!(order[at..at + batch.len()], batch[..]);
    }
    a.close().await;
    b.close().await;
}

/// A full disk fails the append with an error naming the file and saying to free space; the
/// batch leaves nothing behind, what was acknowledged before stays, and once there is room again
/// appends chain on.
#[tokio::test]
async fn sqlite_full_disk_is_named_and_keeps_acknowledged_rows() {
    let backend = Backend::sqlite();
    let location = backend.location();
    let file = location.sqlite_file().unwrap();
    let store = Store::open(&location).await.unwrap();
    let acknowledged = [audit_row("kept-1"), audit_row("kept-2")];
    store.audit().append_batch(&acknowledged).await.unwrap();
    store.cap_sqlite_growth_for_tests(0).await.unwrap();
    let big: Vec<_> = (0..16)
        .map(|i| padded(&format!("big-{i}"), MAX_AUDIT_RECORD_BYTES / 2))
        .collect();
    let err = store.audit().append_batch(&big).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Full { .. }), "{text}");
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(text.contains("free space"), "{text}");
    assert_eq!(calls(&all_rows(&store).await), ["kept-1", "kept-2"]);
    assert!(store.audit().verify().await.unwrap().is_intact());

    store.cap_sqlite_growth_for_tests(100_000).await.unwrap();
    store.audit().append_batch(&big).await.unwrap();
    store.close().await;
    let store = Store::open(&location).await.unwrap();
    let report = store.audit().verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 18);
    store.close().await;
}

// ------------------------------------------------------------------ tool pins (step 6)

fn pin(tool: &str, sha: &str) -> PinRecord {
    PinRecord {
        server: "srv".to_owned(),
        tool: tool.to_owned(),
        sha256: sha.repeat(64),
        parts: [("description".to_owned(), sha.repeat(16))].into(),
        definition_json: Some(format!("{{\"name\":\"{tool}\",\"v\":\"{sha}\"}}")),
        pinned_at_ms: 1_000,
        approved_at_ms: None,
        change: None,
    }
}

fn change(pinned: &str, seen: &str) -> PinChangeRecord {
    PinChangeRecord {
        pinned_sha256: pinned.repeat(64),
        seen_sha256: seen.repeat(64),
        parts: [("description".to_owned(), seen.repeat(16))].into(),
        fields: vec!["description".to_owned()],
        definition_json: Some(format!("{{\"v\":\"{seen}\"}}")),
        seen_at_ms: 2_000,
    }
}

fn record_change(tool: &str, pinned: &str, seen: &str) -> PinWriteRecord {
    PinWriteRecord::RecordChange {
        server: "srv".to_owned(),
        tool: tool.to_owned(),
        change: change(pinned, seen),
    }
}

async fn pin_of(store: &Store, tool: &str) -> Option<PinRecord> {
    let snapshot = store.pins().snapshot().await.unwrap();
    snapshot.pins.into_iter().find(|p| p.tool == tool)
}

/// Pins round-trip; every write is conditional on what it was decided against (a first sight never
/// replaces a pin, a change against a pin that moved is dropped), approval moves the seen definition
/// into the pin, and each write bumps the revision that another process (a `manifold pins approve`
/// opened beside the gateway) makes visible.
async fn pins_are_written_under_conditions_and_approved(backend: Backend) {
    let location = backend.location();
    let store = Store::open(&location).await.unwrap();
    let pins = store.pins();
    assert_eq!(pins.snapshot().await.unwrap(), PinSnapshot::default());
    let r1 = pins
        .apply(&[
            PinWriteRecord::Pin(pin("echo", "a")),
            PinWriteRecord::Pin(pin("add", "b")),
        ])
        .await
        .unwrap();
    assert_eq!(r1, 1);
    let snapshot = pins.snapshot().await.unwrap();
    assert_eq!(snapshot.revision, 1);
    assert_eq!(snapshot.pins, [pin("add", "b"), pin("echo", "a")]);

    // A first sight of an already pinned tool (another replica saw it first) changes nothing.
    pins.apply(&[PinWriteRecord::Pin(pin("echo", "x"))])
        .await
        .unwrap();
    assert_eq!(pin_of(&store, "echo").await.unwrap(), pin("echo", "a"));

    // A change against the pin in force is recorded; one against another pin is not.
    let r3 = pins
        .apply(&[
            record_change("echo", "a", "c"),
            record_change("add", "z", "y"),
        ])
        .await
        .unwrap();
    assert_eq!(r3, 3);
    assert_eq!(
        pin_of(&store, "echo").await.unwrap().change,
        Some(change("a", "c"))
    );
    assert_eq!(pin_of(&store, "add").await.unwrap().change, None);

    // Approval from a second process opened beside this one: the holder sees a new revision.
    let command = Store::open_for_command(&location).await.unwrap();
    assert_eq!(
        command.pins().approve("srv", 5_000).await.unwrap(),
        ["echo"]
    );
    assert_eq!(
        command.pins().approve("srv", 6_000).await.unwrap(),
        Vec::<String>::new()
    );
    command.close().await;
    assert_eq!(
        pins.revision().await.unwrap(),
        4,
        "an empty approval writes nothing"
    );
    let approved = pin_of(&store, "echo").await.unwrap();
    assert_eq!(approved.sha256, "c".repeat(64));
    assert_eq!(approved.definition_json.as_deref(), Some("{\"v\":\"c\"}"));
    assert_eq!(approved.parts, change("a", "c").parts);
    assert_eq!(
        (approved.pinned_at_ms, approved.approved_at_ms),
        (5_000, Some(5_000))
    );
    assert_eq!(approved.change, None);

    // A gateway that saw the old change just before the approval cannot undo it.
    pins.apply(&[record_change("echo", "a", "c")])
        .await
        .unwrap();
    assert_eq!(pin_of(&store, "echo").await.unwrap().change, None);

    // Back to the pin clears a change, but only against the pin in force.
    pins.apply(&[record_change("echo", "c", "d")])
        .await
        .unwrap();
    let clear = |pinned: &str| PinWriteRecord::ClearChange {
        server: "srv".to_owned(),
        tool: "echo".to_owned(),
        pinned_sha256: pinned.repeat(64),
    };
    pins.apply(&[clear("a")]).await.unwrap();
    assert!(pin_of(&store, "echo").await.unwrap().change.is_some());
    pins.apply(&[clear("c")]).await.unwrap();
    assert_eq!(pin_of(&store, "echo").await.unwrap().change, None);

    // An import stores whole rows, changes included, only where nothing is pinned.
    let imported = PinRecord {
        change: Some(change("e", "f")),
        definition_json: None,
        ..pin("imported", "e")
    };
    let before = pins.revision().await.unwrap();
    assert_eq!(
        pins.import(&[pin("echo", "q"), imported.clone()])
            .await
            .unwrap(),
        1
    );
    assert_eq!(pin_of(&store, "imported").await.unwrap(), imported);
    assert_eq!(pin_of(&store, "echo").await.unwrap().sha256, "c".repeat(64));
    assert_eq!(pins.import(&[imported]).await.unwrap(), 0);
    assert_eq!(pins.revision().await.unwrap(), before + 1);
    store.close().await;
}

/// `MAX_PIN_BATCH`, `MAX_PIN_DEFINITION_BYTES` and `MAX_PIN_NAME_LEN` hold at the limit and are
/// refused one past it, before anything is written.
async fn pin_bounds_are_refused(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let pins = store.pins();
    let many: Vec<PinWriteRecord> = (0..=MAX_PIN_BATCH)
        .map(|i| PinWriteRecord::Pin(pin(&format!("t{i}"), "a")))
        .collect();
    let refused = pins.apply(&many).await.unwrap_err();
    assert!(matches!(refused, StoreError::OverLimit { .. }), "{refused}");
    assert!(refused.to_string().contains("MAX_PIN_BATCH"), "{refused}");
    assert_eq!(pins.revision().await.unwrap(), 0);
    pins.apply(&many[..MAX_PIN_BATCH]).await.unwrap();
    assert_eq!(pins.snapshot().await.unwrap().pins.len(), MAX_PIN_BATCH);

    let big = PinRecord {
        definition_json: Some("x".repeat(MAX_PIN_DEFINITION_BYTES + 1)),
        ..pin("big", "a")
    };
    let refused = pins.apply(&[PinWriteRecord::Pin(big)]).await.unwrap_err();
    assert!(
        matches!(
            refused,
            StoreError::Invalid {
                field: "definition",
                ..
            }
        ),
        "{refused}"
    );
    let at_limit = PinRecord {
        definition_json: Some("x".repeat(MAX_PIN_DEFINITION_BYTES)),
        ..pin(&"n".repeat(MAX_PIN_NAME_LEN), "a")
    };
    pins.apply(&[PinWriteRecord::Pin(at_limit)]).await.unwrap();
    let long = pin(&"n".repeat(MAX_PIN_NAME_LEN + 1), "a");
    let refused = pins.apply(&[PinWriteRecord::Pin(long)]).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Invalid { field: "tool", .. }),
        "{refused}"
    );
    store.close().await;
}

// ------------------------------------------------------------------ approvals (step 8)

fn approval(id: &str, created_at_ms: i64, holder: &str) -> ApprovalRecord {
    ApprovalRecord {
        id: id.to_owned(),
        state: "pending".to_owned(),
        caller: Some("alice".to_owned()),
        server: "fs".to_owned(),
        tool: "delete_file".to_owned(),
        arguments_sha256: "a".repeat(64),
        definition_sha256: "d".repeat(64),
        arguments_json: Some("{\"path\":\"/tmp/x\"}".to_owned()),
        approvers: vec!["group:ops".to_owned(), "identity:bob".to_owned()],
        channel: "out_of_band".to_owned(),
        rule: "rules[2]".to_owned(),
        holder: holder.to_owned(),
        created_at_ms,
        expires_at_ms: created_at_ms + 60_000,
        answered_by: None,
        answered_at_ms: None,
        note: None,
    }
}

/// A row round-trips with every field; a transition from a state the row is not in changes
/// nothing; of two answers racing from pending (another process each), exactly one wins.
async fn approvals_round_trip_and_settle_once(backend: Backend) {
    let location = backend.location();
    let store = Store::open(&location).await.unwrap();
    let approvals = store.approvals();
    let row = approval("apr_1", 1_000, "host:1");
    approvals.insert(&row).await.unwrap();
    assert_eq!(approvals.get("apr_1").await.unwrap(), Some(row.clone()));
    assert_eq!(approvals.get("apr_none").await.unwrap(), None);
    let bare = ApprovalRecord {
        caller: None,
        arguments_json: None,
        approvers: Vec::new(),
        ..approval("apr_bare", 1_001, "host:1")
    };
    approvals.insert(&bare).await.unwrap();
    assert_eq!(approvals.get("apr_bare").await.unwrap(), Some(bare));
    let duplicate = approvals.insert(&row).await.unwrap_err();
    assert!(
        matches!(duplicate, StoreError::AlreadyExists { .. }),
        "{duplicate}"
    );

    // From the wrong state: nothing changes.
    let moved = approvals
        .transition("apr_1", "approved", "used", None, 2_000, Some("ran"))
        .await
        .unwrap();
    assert!(!moved);
    assert_eq!(approvals.get("apr_1").await.unwrap(), Some(row.clone()));
    assert!(
        !approvals
            .transition("apr_none", "pending", "approved", Some("bob"), 2_000, None)
            .await
            .unwrap()
    );

    // Approve and deny race from pending, from two openings: exactly one wins.
    let other = Store::open_for_command(&location).await.unwrap();
    let other_approvals = other.approvals();
    let (approved, denied) = tokio::join!(
        approvals.transition("apr_1", "pending", "approved", Some("bob"), 3_000, None),
        other_approvals.transition(
            "apr_1",
            "pending",
            "rejected",
            Some("carol"),
            3_001,
            Some("not today")
        ),
    );
    let (approved, denied) = (approved.unwrap(), denied.unwrap());
    assert!(approved ^ denied, "approved {approved}, denied {denied}");
    let settled = approvals.get("apr_1").await.unwrap().unwrap();
    if approved {
        assert_eq!(settled.state, "approved");
        assert_eq!(settled.answered_by.as_deref(), Some("bob"));
        assert_eq!(settled.answered_at_ms, Some(3_000));
        assert_eq!(settled.note, None);
    } else {
        assert_eq!(settled.state, "rejected");
        assert_eq!(settled.answered_by.as_deref(), Some("carol"));
        assert_eq!(settled.answered_at_ms, Some(3_001));
        assert_eq!(settled.note.as_deref(), Some("not today"));
    }
    other.close().await;

    // A transition without an answerer keeps the answer and adds the note.
    if approved {
        assert!(
            approvals
                .transition("apr_1", "approved", "used", None, 4_000, Some("ran"))
                .await
                .unwrap()
        );
        let used = approvals.get("apr_1").await.unwrap().unwrap();
        assert_eq!(
            (
                used.state.as_str(),
                used.answered_by.as_deref(),
                used.answered_at_ms
            ),
            ("used", Some("bob"), Some(3_000))
        );
        assert_eq!(used.note.as_deref(), Some("ran"));
    }
    store.close().await;
}

/// Listing is newest first, bounded, and filters pending rows; abandoning touches only the
/// pending rows of that holder.
async fn approvals_list_newest_first_and_abandon_only_the_holders_pending(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let approvals = store.approvals();
    for (id, at, holder) in [
        ("apr_a", 10, "host:1"),
        ("apr_b", 30, "host:1"),
        ("apr_c", 20, "host:2"),
        ("apr_d", 40, "host:1"),
    ] {
        approvals.insert(&approval(id, at, holder)).await.unwrap();
    }
    assert!(
        approvals
            .transition("apr_d", "pending", "approved", Some("bob"), 50, None)
            .await
            .unwrap()
    );
    let ids = |rows: Vec<ApprovalRecord>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(approvals.list(false, 10).await.unwrap()),
        ["apr_d", "apr_b", "apr_c", "apr_a"]
    );
    assert_eq!(
        ids(approvals.list(false, 2).await.unwrap()),
        ["apr_d", "apr_b"]
    );
    assert_eq!(
        ids(approvals.list(true, 10).await.unwrap()),
        ["apr_b", "apr_c", "apr_a"]
    );
    approvals.list(true, MAX_APPROVAL_PAGE).await.unwrap();
    let refused = approvals
        .list(true, MAX_APPROVAL_PAGE + 1)
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::OverLimit { .. }), "{refused}");

    assert_eq!(approvals.abandon_held_by("host:1", 60).await.unwrap(), 2);
    assert_eq!(approvals.abandon_held_by("host:1", 70).await.unwrap(), 0);
    let state = |rows: &[ApprovalRecord], id: &str| {
        let r = rows.iter().find(|r| r.id == id).unwrap();
        (r.state.clone(), r.answered_at_ms)
    };
    let rows = approvals.list(false, 10).await.unwrap();
    assert_eq!(state(&rows, "apr_a"), ("abandoned".to_owned(), Some(60)));
    assert_eq!(state(&rows, "apr_b"), ("abandoned".to_owned(), Some(60)));
    assert_eq!(state(&rows, "apr_c"), ("pending".to_owned(), None));
    assert_eq!(state(&rows, "apr_d"), ("approved".to_owned(), Some(50)));
    assert_eq!(ids(approvals.list(true, 10).await.unwrap()), ["apr_c"]);
    store.close().await;
}

/// Each bound holds at its limit and is refused one past it, before anything is written.
async fn approval_bounds_are_refused(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let approvals = store.approvals();
    let field_of = |e: StoreError| match e {
        StoreError::Invalid { field, .. } => field,
        other => panic!("{other}"),
    };
    let at_limit = ApprovalRecord {
        arguments_json: Some("x".repeat(MAX_LEDGER_ARGUMENTS_BYTES)),
        server: "s".repeat(MAX_APPROVAL_NAME_LEN),
        note: Some("n".repeat(MAX_APPROVAL_NOTE_LEN)),
        ..approval(&"i".repeat(MAX_APPROVAL_ID_LEN), 1, "host:1")
    };
    approvals.insert(&at_limit).await.unwrap();
    let cases = [
        (
            "id",
            ApprovalRecord {
                id: "i".repeat(MAX_APPROVAL_ID_LEN + 1),
                ..approval("x", 1, "h")
            },
        ),
        (
            "tool",
            ApprovalRecord {
                tool: "t".repeat(MAX_APPROVAL_NAME_LEN + 1),
                ..approval("apr_t", 1, "h")
            },
        ),
        (
            "caller",
            ApprovalRecord {
                caller: Some("c".repeat(MAX_APPROVAL_NAME_LEN + 1)),
                ..approval("apr_c", 1, "h")
            },
        ),
        (
            "arguments_json",
            ApprovalRecord {
                arguments_json: Some("x".repeat(MAX_LEDGER_ARGUMENTS_BYTES + 1)),
                ..approval("apr_a", 1, "h")
            },
        ),
        (
            "note",
            ApprovalRecord {
                note: Some("n".repeat(MAX_APPROVAL_NOTE_LEN + 1)),
                ..approval("apr_n", 1, "h")
            },
        ),
        (
            "approvers",
            ApprovalRecord {
                approvers: vec!["a".repeat(MAX_APPROVAL_NAME_LEN + 1)],
                ..approval("apr_p", 1, "h")
            },
        ),
    ];
    for (field, record) in cases {
        let refused = approvals.insert(&record).await.unwrap_err();
        assert_eq!(field_of(refused), field);
    }
    let long_note = "n".repeat(MAX_APPROVAL_NOTE_LEN + 1);
    let refused = approvals
        .transition(
            &at_limit.id,
            "pending",
            "rejected",
            Some("bob"),
            2,
            Some(&long_note),
        )
        .await
        .unwrap_err();
    assert_eq!(field_of(refused), "note");
    let long_name = "b".repeat(MAX_APPROVAL_NAME_LEN + 1);
    let refused = approvals
        .transition(
            &at_limit.id,
            "pending",
            "rejected",
            Some(&long_name),
            2,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(field_of(refused), "answered_by");
    // Nothing refused was written, and the row at the limit is unchanged.
    let rows = approvals.list(false, 10).await.unwrap();
    assert_eq!(rows, [at_limit]);
    store.close().await;
}

fn authored(
    name: &str,
    version: i64,
    at: i64,
    deleted: bool,
) -> manifold_store::AuthoredToolVersion {
    manifold_store::AuthoredToolVersion {
        name: name.to_owned(),
        version,
        action: if version == 1 { "create" } else { "update" }.to_owned(),
        definition_json: format!("{{\"name\":\"{name}\",\"v\":{version}}}"),
        author: "alice".to_owned(),
        created_at_ms: at,
        enabled: true,
        deleted,
    }
}

/// Versions append once each (a racing writer's same version is refused), `latest` gives the
/// newest row of every name, newest change first, and history is newest first, bounded.
async fn authored_tool_versions_append_once_and_list_the_newest(backend: Backend) {
    let store = Store::open(&backend.location()).await.unwrap();
    let tools = store.authored_tools();
    tools.append(&authored("a", 1, 10, false)).await.unwrap();
    tools.append(&authored("b", 1, 20, false)).await.unwrap();
    tools.append(&authored("a", 2, 30, false)).await.unwrap();
    tools.append(&authored("b", 2, 25, true)).await.unwrap();
    let refused = tools
        .append(&authored("a", 2, 40, false))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, StoreError::AlreadyExists { .. }),
        "{refused}"
    );
    let latest = tools.latest().await.unwrap();
    let names: Vec<(&str, i64, bool)> = latest
        .iter()
        .map(|v| (v.name.as_str(), v.version, v.deleted))
        .collect();
    assert_eq!(names, [("a", 2, false), ("b", 2, true)]);
    assert_eq!(latest[0].definition_json, "{\"name\":\"a\",\"v\":2}");
    let history = tools.history("a", 10).await.unwrap();
    assert_eq!(
        history.iter().map(|v| v.version).collect::<Vec<_>>(),
        [2, 1]
    );
    assert_eq!(tools.history("a", 1).await.unwrap().len(), 1);
    assert!(matches!(
        tools
            .history("a", manifold_store::MAX_AUTHORED_HISTORY + 1)
            .await
            .unwrap_err(),
        StoreError::OverLimit { .. }
    ));
    let empty_name = manifold_store::AuthoredToolVersion {
        name: String::new(),
        ..authored("c", 1, 1, false)
    };
    assert!(matches!(
        tools.append(&empty_name).await.unwrap_err(),
        StoreError::Invalid { field: "name", .. }
    ));
    let too_big = manifold_store::AuthoredToolVersion {
        definition_json: "x".repeat(manifold_store::MAX_AUTHORED_DEFINITION_BYTES + 1),
        ..authored("c", 1, 1, false)
    };
    assert!(matches!(
        tools.append(&too_big).await.unwrap_err(),
        StoreError::Invalid {
            field: "definition_json",
            ..
        }
    ));
    store.close().await;
}
