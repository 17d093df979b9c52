//! The store's behaviour on both backends: every generic test runs once on SQLite (a scratch
//! data dir) and once on a real, throwaway PostgreSQL server; the faults each backend has of its
//! own (a corrupt or locked file, a server that restarts) follow.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use manifold_store::{
    ApiKeyRecord, AuditEvent, MAX_API_KEY_GRANTS, MAX_AUDIT_PAGE, Store, StoreError, StoreLocation,
    latest_version, migrator_for,
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
    async fn raw(&self, sql: &'static str) {
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

fn audit_row(call: &str) -> AuditEvent {
    AuditEvent {
        at_ms: 1_700_000_000_001,
        call_id: call.to_owned(),
        principal: "alice".to_owned(),
        server: "time".to_owned(),
        tool: "get_current_time".to_owned(),
        outcome: "ok".to_owned(),
        args_sha256: "a".repeat(64),
        detail_json: "{\"era\":\"modern\"}".to_owned(),
        prev_sha256: "0".repeat(64),
        row_sha256: "b".repeat(64),
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
    let seq1 = store.audit().append(&audit_row("c1")).await.unwrap();
    let seq2 = store.audit().append(&audit_row("c2")).await.unwrap();
    assert!(seq2 > seq1);
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
    let recent = store.audit().recent(MAX_AUDIT_PAGE + 1).await.unwrap();
    let calls: Vec<_> = recent.iter().map(|(_, e)| e.call_id.as_str()).collect();
    assert_eq!(calls, ["c1", "c2"]);
    assert_eq!(store.audit().recent(1).await.unwrap()[0].1, audit_row("c2"));
    store.close().await;
}

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
        store
            .audit()
            .append(&audit_row("after-upgrade"))
            .await
            .unwrap();
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
    let rows: Vec<AuditEvent> = (0..RACING_WRITERS)
        .map(|i| audit_row(&format!("c{i}")))
        .collect();
    let audit = store.audit();
    let appends = rows.iter().map(|row| audit.append(row));
    let mut seqs: Vec<i64> = futures::future::join_all(appends)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), RACING_WRITERS);
    let stored = store.audit().recent(MAX_AUDIT_PAGE).await.unwrap();
    assert_eq!(stored.len(), RACING_WRITERS);
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
    migrates_from_empty,
    newer_schema_is_refused,
    concurrent_writes_all_land,
    api_keys_keep_grants_and_one_active_name
);

/// A short command (`manifold keys`) writes beside a gateway holding the SQLite store, and the
/// gateway reads what it wrote; a second full open is still refused.
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
    let command = Store::open_for_command(&location).await.unwrap();
    command
        .api_keys()
        .insert(&key("from-command"))
        .await
        .unwrap();
    command.close().await;
    assert_eq!(held.api_keys().list().await.unwrap(), [key("from-command")]);
    held.close().await;
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
    assert!(text.contains("several replicas need PostgreSQL"), "{text}");
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
