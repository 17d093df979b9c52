//! The writer against real stores: rows land chained and in order, each mode keeps its promise
//! while the store is down (a real PostgreSQL stopped and started again), and a shutdown flush
//! writes what is queued.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use manifold_audit::{
    AuditWriter, FAILING_PROBE_INTERVAL, MAX_AUDIT_BATCH_BYTES, REQUIRED_ACK_TIMEOUT,
};
use manifold_store::{Store, StoreLocation};
use manifold_telemetry::Metrics;
use manifold_telemetry::audit::AuditMode;
use manifold_telemetry::audit::{AuditFacts, AuditOutcome, AuditSink};
use manifold_testkit::Postgres;

fn facts(n: usize) -> AuditFacts {
    AuditFacts {
        at_ms: 1_700_000_000_000 + i64::try_from(n).unwrap(),
        call_id: format!("call-{n}"),
        principal: "alice".to_owned(),
        server: "fs".to_owned(),
        method: "tools/call".to_owned(),
        target: "read_file".to_owned(),
        outcome: Some(AuditOutcome::Ok),
        args_sha256: Some("ab".repeat(32)),
        ..AuditFacts::default()
    }
}

async fn sqlite() -> (tempfile::TempDir, Arc<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&StoreLocation::sqlite(dir.path()))
        .await
        .unwrap();
    (dir, Arc::new(store))
}

/// A best-effort writer over `store`, with the metrics it counts into.
fn best_effort_writer(store: &Arc<Store>, record_arguments: bool) -> (Metrics, AuditWriter) {
    let metrics = Metrics::new();
    let writer = AuditWriter::start(
        Arc::clone(store),
        AuditMode::BestEffort,
        record_arguments,
        metrics.audit(),
    );
    (metrics, writer)
}

async fn call_ids(store: &Store) -> Vec<String> {
    let rows = store.audit().page(0, 1000).await.unwrap();
    rows.into_iter().map(|r| r.entry.call_id).collect()
}

#[tokio::test]
async fn best_effort_rows_land_in_order_chained_and_flush_waits_for_them() {
    let (_dir, store) = sqlite().await;
    let (_metrics, writer) = best_effort_writer(&store, false);
    for n in 0..300 {
        // Best effort: the ack is ready at once, written or not.
        writer.record(facts(n)).await.unwrap();
    }
    assert!(writer.flush().await, "the flush finished in time");
    let expected: Vec<String> = (0..300).map(|n| format!("call-{n}")).collect();
    assert_eq!(call_ids(&store).await, expected);
    let report = store.audit().verify().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 300);
    let status = writer.status();
    assert_eq!(
        (status.written, status.dropped, status.queue_depth),
        (300, 0, 0)
    );
    let first = store.audit().page(0, 1).await.unwrap();
    let record: serde_json::Value = serde_json::from_str(&first[0].entry.record_json).unwrap();
    assert_eq!(record["target"], "read_file");
    assert_eq!(record["outcome"], "ok");
    assert_eq!(record["v"], 1);
}

/// Rows with large recorded arguments fill a batch by bytes long before its row count: more than
/// two batches' worth of record bytes, all queued at once, go in three transactions or more.
#[tokio::test]
async fn a_batch_stops_taking_rows_at_its_byte_bound() {
    const ROWS: usize = 300;
    const ARGUMENT_BYTES: usize = 30_000;
    let (_dir, store) = sqlite().await;
    let (metrics, writer) = best_effort_writer(&store, true);
    for n in 0..ROWS {
        let large = AuditFacts {
            arguments: Some(format!("{{\"text\":\"{}\"}}", "x".repeat(ARGUMENT_BYTES))),
            ..facts(n)
        };
        writer.record(large).await.unwrap();
    }
    assert!(writer.flush().await, "the flush finished in time");
    let text = metrics.encode(&manifold_telemetry::metrics::Snapshot::default());
    let count = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in {text}"))
    };
    let batches = count("manifold_audit_write_seconds_count ");
    let record_bytes = ROWS * ARGUMENT_BYTES;
    assert!(record_bytes > 2 * MAX_AUDIT_BATCH_BYTES);
    assert!(batches >= 3.0, "{batches} batches for {record_bytes} bytes");
    assert_eq!(writer.status().written, ROWS as u64);
    assert_eq!(call_ids(&store).await.len(), ROWS);
}

#[tokio::test]
async fn a_required_ack_comes_only_once_the_row_is_readable_from_the_store() {
    let (_dir, store) = sqlite().await;
    let writer = AuditWriter::start(
        Arc::clone(&store),
        AuditMode::Required,
        false,
        Metrics::new().audit(),
    );
    assert!(writer.answers_wait());
    writer.admit().unwrap();
    let acks: Vec<_> = (0..50).map(|n| writer.record(facts(n))).collect();
    for (n, ack) in acks.into_iter().enumerate() {
        ack.await.unwrap();
        let ids = call_ids(&store).await;
        assert!(
            ids.contains(&format!("call-{n}")),
            "row {n} is durable when acked"
        );
    }
}

/// A writer in `mode` on the store at a fresh PostgreSQL's `url`.
async fn postgres_writer(url: &str, mode: AuditMode) -> (Arc<Store>, AuditWriter) {
    let store = Arc::new(
        Store::open(&StoreLocation::postgres(url.to_owned()))
            .await
            .unwrap(),
    );
    let writer = AuditWriter::start(Arc::clone(&store), mode, false, Metrics::new().audit());
    (store, writer)
}

#[tokio::test]
async fn required_mode_refuses_while_postgres_is_down_and_serves_again_when_it_is_back() {
    let pg = Postgres::start().unwrap();
    let (store, writer) = postgres_writer(&pg.url_with_password("pw"), AuditMode::Required).await;
    writer.record(facts(0)).await.unwrap();
    pg.stop().unwrap();
    // The call that meets the outage is refused its answer once its row cannot be written.
    let during = writer.record(facts(1)).await;
    assert!(during.is_err(), "the row could not be written: {during:?}");
    let refused = writer.admit().unwrap_err();
    assert!(
        refused.to_string().contains("mode = \"required\""),
        "{refused}"
    );
    assert!(writer.status().failing.is_some());
    pg.start_again().unwrap();
    let mut admitted = false;
    for _ in 0..60 {
        if writer.admit().is_ok() {
            admitted = true;
            break;
        }
        tokio::time::sleep(FAILING_PROBE_INTERVAL / 2).await;
    }
    assert!(admitted, "serving again after the store came back");
    writer.record(facts(2)).await.unwrap();
    let ids = call_ids(&store).await;
    assert!(ids.contains(&"call-0".to_owned()) && ids.contains(&"call-2".to_owned()));
    assert!(store.audit().verify().await.unwrap().is_intact());
}

/// A store that neither answers nor fails (another client holds a lock on the trail's table):
/// the call waiting for its row is refused after `REQUIRED_ACK_TIMEOUT` with a message that
/// says so, and the row, kept in the batch, is written once the lock goes.
#[tokio::test]
async fn a_required_ack_that_hangs_is_refused_after_its_timeout_and_the_row_still_lands() {
    use sqlx::Connection;
    let pg = Postgres::start().unwrap();
    let url = pg.url_with_password("pw");
    let (store, writer) = postgres_writer(&url, AuditMode::Required).await;
    writer.record(facts(0)).await.unwrap();
    let mut locker = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE audit_trail IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let refused = writer.record(facts(1)).await.unwrap_err();
    assert!(
        started.elapsed() >= REQUIRED_ACK_TIMEOUT,
        "refused only once the timeout passed"
    );
    let why = refused.to_string();
    assert!(
        why.contains(&format!(
            "not written within {}s",
            REQUIRED_ACK_TIMEOUT.as_secs()
        )),
        "{why}"
    );
    sqlx::raw_sql("COMMIT").execute(&mut locker).await.unwrap();
    assert!(
        writer.flush().await,
        "the flush finished once the lock went"
    );
    assert_eq!(call_ids(&store).await, ["call-0", "call-1"]);
    assert!(store.audit().verify().await.unwrap().is_intact());
}

#[tokio::test]
async fn best_effort_keeps_serving_while_postgres_is_down_and_counts_what_it_drops() {
    let pg = Postgres::start().unwrap();
    let location = StoreLocation::postgres(pg.url_with_password("pw"));
    let store = Arc::new(Store::open(&location).await.unwrap());
    let (metrics, writer) = best_effort_writer(&store, false);
    pg.stop().unwrap();
    for n in 0..5 {
        writer.admit().unwrap();
        writer.record(facts(n)).await.unwrap();
    }
    let mut dropped = 0;
    for _ in 0..120 {
        dropped = writer.status().dropped;
        if dropped == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(dropped, 5, "every row that could not be written is counted");
    let text = metrics.encode(&manifold_telemetry::Snapshot::default());
    assert!(
        text.contains("manifold_audit_rows_total{result=\"dropped\"} 5"),
        "{text}"
    );
    pg.start_again().unwrap();
}

/// On this test's one-thread runtime the writer cannot run between `record` calls, so the queue
/// fills exactly at its capacity.
#[tokio::test]
async fn a_full_queue_drops_and_counts_in_best_effort_and_refuses_in_required_mode() {
    let (_dir, store) = sqlite().await;
    let best = AuditWriter::start(
        Arc::clone(&store),
        AuditMode::BestEffort,
        false,
        Metrics::new().audit(),
    );
    for n in 0..manifold_audit::AUDIT_QUEUE_CAPACITY + 10 {
        best.admit().unwrap();
        best.record(facts(n)).await.unwrap();
    }
    assert_eq!(
        best.status().dropped,
        10,
        "exactly the rows past the capacity"
    );
    let required = AuditWriter::start(
        Arc::clone(&store),
        AuditMode::Required,
        false,
        Metrics::new().audit(),
    );
    let mut acks = Vec::new();
    for n in 0..manifold_audit::AUDIT_QUEUE_CAPACITY {
        acks.push(required.record(facts(n)));
    }
    let refused = required.admit().unwrap_err();
    assert!(refused.reason.contains("is full"), "{refused}");
    assert!(
        required.record(facts(0)).await.is_err(),
        "a row past the capacity is refused"
    );
    for ack in acks.drain(..64) {
        ack.await.unwrap();
    }
    required.admit().unwrap();
}
