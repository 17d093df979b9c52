//! Why: Manifold writes an audit row per call and does so by default, so its figures in the
//! other scenarios include the trail. This scenario says what the trail costs: Manifold in front
//! of one stdio echo server at 64 clients in four variants started side by side (trail off; on
//! with SQLite best effort; SQLite required; PostgreSQL best effort on a throwaway server started
//! for the run), taking turns round by round as the contenders do, so machine noise falls on
//! every variant alike. Each variant's calls/s (median of the rounds) and gateway CPU per call
//! sit beside off's, with the rows the trail wrote read back from Manifold's `/metrics`, so a
//! best-effort variant cannot look cheap by dropping rows.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::client::{Connection, Endpoint, Era};
use crate::contenders::{Contender, Launcher, toml_string};
use crate::load::{Caller, open_callers, run_concurrently};
use crate::process_metrics::{clock_ticks_per_second, cpu_ticks, tree_cpu_ticks};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::{Plan, SMALL_MESSAGE, rotation};
use crate::stats::{Samples, median, spread_pct};
use crate::throwaway_postgres::ThrowawayPostgres;

/// Concurrent clients, each with its own legacy session and connection (the issue's figure).
pub const CLIENTS: usize = 64;
/// Parallel session opens while preparing a variant.
const OPEN_PARALLEL: usize = 32;
/// How long the last round's rows may take to reach the store before the counts are read.
const DRAIN_GUARD: Duration = Duration::from_secs(15);
/// How often `/metrics` is read while waiting for the queue to drain.
const DRAIN_POLL: Duration = Duration::from_millis(100);
/// The contender name of every row: each variant is Manifold.
const CONTENDER: &str = "manifold";

/// One way of running Manifold's audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `[audit] enabled = false`: the baseline.
    Off,
    /// Manifold's default: SQLite in the data dir, best effort.
    SqliteBestEffort,
    /// SQLite, answers wait for their row to commit.
    SqliteRequired,
    /// A PostgreSQL store, best effort.
    PostgresBestEffort,
}

/// Every variant, in table order (off first: the others are compared with it).
pub const VARIANTS: [Variant; 4] = [
    Variant::Off,
    Variant::SqliteBestEffort,
    Variant::SqliteRequired,
    Variant::PostgresBestEffort,
];

impl Variant {
    /// The row's case.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::SqliteBestEffort => "sqlite best_effort",
            Variant::SqliteRequired => "sqlite required",
            Variant::PostgresBestEffort => "postgres best_effort",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::SqliteBestEffort => "sqlite-best-effort",
            Variant::SqliteRequired => "sqlite-required",
            Variant::PostgresBestEffort => "postgres-best-effort",
        }
    }

    fn writes_rows(self) -> bool {
        self != Variant::Off
    }

    /// What this variant appends to Manifold's generated configuration; the PostgreSQL variant
    /// needs the throwaway server's URL.
    pub fn config(self, postgres_url: Option<&str>) -> Result<String, String> {
        Ok(match self {
            Variant::Off => "\n[audit]\nenabled = false\n".to_owned(),
            Variant::SqliteBestEffort => {
                "\n[audit]\nenabled = true\nmode = \"best_effort\"\n".to_owned()
            }
            Variant::SqliteRequired => {
                "\n[audit]\nenabled = true\nmode = \"required\"\n".to_owned()
            }
            Variant::PostgresBestEffort => {
                let url = postgres_url
                    .ok_or("the PostgreSQL variant has no server to write to".to_owned())?;
                format!(
                    "\n[audit]\nenabled = true\nmode = \"best_effort\"\n\n[store]\nurl = {}\n",
                    toml_string(url)
                )
            }
        })
    }
}

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "calls"),
        column("errors", "errors"),
        column("calls_per_s", "calls/s"),
        column("spread_pct", "spread %"),
        column("calls_per_s_vs_off_pct", "vs off %"),
        column("paired_vs_off_pct", "paired %"),
        column("p50_us", "p50 us"),
        column("p99_us", "p99 us"),
        column("cpu_us_per_call", "cpu us/call"),
        column("cpu_vs_off_pct", "cpu vs off %"),
        column("store_cpu_us_per_call", "store cpu us/call"),
        column("rows_written", "rows"),
        column("rows_per_call", "rows/call"),
        column("rows_dropped", "dropped"),
        column("rows_per_batch", "rows/batch"),
    ]
}

/// What the trail reported on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrailCounts {
    pub written: f64,
    pub dropped: f64,
    pub batches: f64,
    pub queued: f64,
}

/// The value of the sample named exactly `key` (name and labels) in Prometheus text.
pub fn sample(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

fn trail_counts(text: &str) -> Option<TrailCounts> {
    Some(TrailCounts {
        written: sample(text, r#"manifold_audit_rows_total{result="written"}"#)?,
        dropped: sample(text, r#"manifold_audit_rows_total{result="dropped"}"#).unwrap_or(0.0),
        batches: sample(text, "manifold_audit_write_seconds_count").unwrap_or(0.0),
        queued: sample(text, "manifold_audit_queue_depth").unwrap_or(0.0),
    })
}

pub async fn read_metrics(endpoint: &Endpoint) -> Result<String, String> {
    let metrics = endpoint.with_path("/metrics");
    let mut connection = Connection::open(&metrics)
        .await
        .map_err(|e| format!("could not reach {}: {e}", metrics.url()))?;
    let reply = connection
        .get()
        .await
        .map_err(|e| format!("GET {} failed: {e}", metrics.url()))?;
    if reply.status != 200 {
        return Err(format!(
            "GET {} answered HTTP {}",
            metrics.url(),
            reply.status
        ));
    }
    Ok(String::from_utf8_lossy(&reply.body).into_owned())
}

/// The trail's counts once its queue is empty (or after [`DRAIN_GUARD`], flagged).
pub async fn drained_counts(endpoint: &Endpoint) -> Result<(TrailCounts, bool), String> {
    let started = Instant::now();
    loop {
        let text = read_metrics(endpoint).await?;
        let counts = trail_counts(&text).ok_or_else(|| {
            format!(
                "{} has no manifold_audit_rows_total: this build does not report its audit trail",
                endpoint.with_path("/metrics").url()
            )
        })?;
        if counts.queued <= 0.0 {
            return Ok((counts, true));
        }
        if started.elapsed() > DRAIN_GUARD {
            return Ok((counts, false));
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
}

struct Lane {
    variant: Variant,
    contender: Contender,
    callers: Vec<Caller>,
    /// The throwaway PostgreSQL's postmaster, whose process tree is this variant's store.
    store_pid: Option<u32>,
    samples: Samples,
    per_round: Vec<f64>,
    calls: u64,
    /// Every tools/call answered, timed or not (warm-up batch, each batch's first calls).
    served: u64,
    seconds: f64,
    ticks: u64,
    store_ticks: u64,
    unreadable: Option<String>,
}

impl Lane {
    async fn batch(&mut self, duration: Duration) -> crate::load::BatchOutcome {
        let callers = std::mem::take(&mut self.callers);
        let workers = callers.len() as u64;
        let (callers, outcome) = run_concurrently(callers, duration).await;
        self.callers = callers;
        if outcome.errors == 0 {
            // Each worker's first call on its fresh connection is answered too, untimed.
            self.served += workers;
        }
        self.served += outcome.latencies.len() as u64;
        outcome
    }
}

/// A variant that could not be measured: its row says why.
fn failed(variant: Variant, why: impl Into<String>) -> Row {
    Row::failed(variant.label(), CONTENDER, why)
}

/// Starts the throwaway PostgreSQL in `dir` (blocking work, off the runtime's workers).
pub async fn start_postgres(dir: &Path) -> Result<ThrowawayPostgres, String> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || ThrowawayPostgres::start(&dir))
        .await
        .map_err(|e| format!("starting PostgreSQL failed: {e}"))?
        .map_err(|e| e.to_string())
}

pub async fn stop_postgres(postgres: Option<ThrowawayPostgres>) {
    if let Some(mut postgres) = postgres {
        let _ = tokio::task::spawn_blocking(move || postgres.stop()).await;
    }
}

/// Runs the scenario: rows in [`VARIANTS`] order and notes on how it went.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub async fn measure(launcher: &Launcher, plan: &Plan) -> (Vec<Row>, Vec<String>) {
    let mut notes = Vec::new();
    if !launcher.manifold_has_audit_trail() {
        let why = format!(
            "{} does not accept an [audit] section: this build keeps no audit trail",
            launcher.manifold.display()
        );
        return (
            VARIANTS.iter().map(|v| failed(*v, why.clone())).collect(),
            notes,
        );
    }
    let postgres = start_postgres(&launcher.workdir.join("audit-postgres")).await;
    let postgres = match postgres {
        Ok(server) => {
            notes.push(format!(
                "postgres: {}, started for this run on 127.0.0.1 with PostgreSQL's durability defaults (fsync and synchronous_commit on); store cpu = its whole process tree (postmaster, backends, WAL writer, checkpointer)",
                server.version()
            ));
            Ok(server)
        }
        Err(why) => Err(why),
    };
    let hz = clock_ticks_per_second() as f64;
    let mut lanes: Vec<Result<Lane, Row>> = Vec::with_capacity(VARIANTS.len());
    for variant in VARIANTS {
        lanes.push(start_lane(launcher, variant, postgres.as_ref()).await);
    }
    // One untimed batch each first: the store's first pages and the connection pools, so the
    // first timed round is not the one that pays for them.
    for lane in lanes.iter_mut().flatten() {
        let _ = lane.batch(plan.concurrent_batch).await;
    }
    for round in 0..plan.timed_rounds {
        for index in rotation(round, lanes.len()) {
            let Some(Ok(lane)) = lanes.get_mut(index) else {
                continue;
            };
            let pid = lane.contender.gateway_pid();
            let before = cpu_ticks(pid);
            let store_before = lane.store_pid.map(tree_cpu_ticks);
            let outcome = lane.batch(plan.concurrent_batch).await;
            let after = cpu_ticks(pid);
            let store_after = lane.store_pid.map(tree_cpu_ticks);
            match (before, after) {
                (Some(b), Some(a)) => lane.ticks += a.saturating_sub(b),
                _ => {
                    lane.unreadable
                        .get_or_insert_with(|| format!("/proc/{pid}/stat could not be read"));
                }
            }
            match (store_before, store_after) {
                (Some(Some(b)), Some(Some(a))) => lane.store_ticks += a.saturating_sub(b),
                (None, None) => {}
                _ => {
                    lane.unreadable.get_or_insert_with(|| {
                        "the PostgreSQL processes' /proc/PID/stat could not be read".to_owned()
                    });
                }
            }
            lane.per_round.push(outcome.calls_per_second());
            lane.calls += outcome.latencies.len() as u64;
            lane.seconds += outcome.elapsed.as_secs_f64();
            lane.samples
                .record_errors(outcome.errors, outcome.first_error.clone());
            lane.samples.push_round(outcome.latencies);
        }
    }

    let mut rows = Vec::with_capacity(lanes.len());
    let mut baseline: Option<(f64, Option<f64>, Vec<f64>)> = None;
    for lane in lanes {
        let lane = match lane {
            Ok(lane) => lane,
            Err(row) => {
                rows.push(row);
                continue;
            }
        };
        let mut row = Row::new(lane.variant.label(), CONTENDER);
        row.set_calls(
            lane.calls,
            lane.samples.errors(),
            lane.samples.first_error(),
        );
        let cps = median(&lane.per_round).unwrap_or(0.0);
        row.set("calls_per_s", Cell::figure(cps));
        row.set("spread_pct", Cell::maybe(spread_pct(&lane.per_round, cps)));
        if let Some(s) = lane.samples.summary() {
            row.set("p50_us", Cell::figure(s.p50_us));
            row.set("p99_us", Cell::figure(s.p99_us));
        }
        row.set("calls_served", Cell::Int(lane.served));
        let mut cpu = None;
        if let Some(why) = &lane.unreadable {
            row.note.get_or_insert_with(|| why.clone());
        } else if lane.calls > 0 {
            let per_call = lane.ticks as f64 / hz * 1e6 / lane.calls as f64;
            row.set("cpu_us_per_call", Cell::figure(per_call));
            cpu = Some(per_call);
            if lane.store_pid.is_some() {
                row.set(
                    "store_cpu_us_per_call",
                    Cell::figure(lane.store_ticks as f64 / hz * 1e6 / lane.calls as f64),
                );
            }
        }
        match (lane.variant, &baseline) {
            (Variant::Off, _) if lane.calls > 0 => {
                baseline = Some((cps, cpu, lane.per_round.clone()));
            }
            (_, Some((off_cps, off_cpu, off_rounds))) if *off_cps > 0.0 => {
                let (off_cps, off_cpu) = (*off_cps, *off_cpu);
                row.set(
                    "calls_per_s_vs_off_pct",
                    Cell::figure(change_pct(cps, off_cps)),
                );
                row.set(
                    "paired_vs_off_pct",
                    Cell::maybe(paired_change_pct(&lane.per_round, off_rounds)),
                );
                if let (Some(cpu), Some(off_cpu)) = (cpu, off_cpu.filter(|c| *c > 0.0)) {
                    row.set("cpu_vs_off_pct", Cell::figure(change_pct(cpu, off_cpu)));
                }
            }
            _ => {}
        }
        match drained_counts(&lane.contender.endpoint).await {
            Ok((counts, drained)) => {
                row.set("rows_written", count(counts.written));
                row.set("rows_dropped", count(counts.dropped));
                if lane.served > 0 {
                    row.set(
                        "rows_per_call",
                        Cell::Float(counts.written / lane.served as f64, 3),
                    );
                }
                if counts.batches > 0.0 {
                    row.set(
                        "rows_per_batch",
                        Cell::figure(counts.written / counts.batches),
                    );
                }
                if counts.dropped > 0.0 && lane.served > 0 {
                    notes.push(format!(
                        "{}: {} rows dropped ({:.1}% of the calls answered): the trail's writer fell behind and its queue filled, so this row's throughput and CPU are those of a trail that recorded only part of the calls",
                        lane.variant.label(),
                        counts.dropped,
                        counts.dropped / lane.served as f64 * 100.0
                    ));
                }
                if !drained {
                    notes.push(format!(
                        "{}: {} rows were still queued {} s after the last round",
                        lane.variant.label(),
                        counts.queued,
                        DRAIN_GUARD.as_secs()
                    ));
                }
            }
            // With the trail off Manifold may report no audit counters at all: nothing written.
            Err(_) if !lane.variant.writes_rows() => {
                row.set("rows_written", Cell::Int(0));
            }
            Err(why) => {
                row.note.get_or_insert(why);
            }
        }
        rows.push(row);
        lane.contender.stop().await;
    }
    stop_postgres(postgres.ok()).await;
    (rows, notes)
}

/// A counter's value as the whole number it is.
fn count(value: f64) -> Cell {
    if value.is_finite() && value >= 0.0 {
        Cell::Int(value.round() as u64)
    } else {
        Cell::Empty
    }
}

/// The median over rounds of each round's change against off in the same round: both ran
/// within seconds of each other, so a drift of the machine between rounds (on this kind of
/// machine the same build's "vs off" ranged from -0.3% to -40% run by run) falls on both halves
/// of each pair. `None` unless both ran every round.
pub fn paired_change_pct(rounds: &[f64], off_rounds: &[f64]) -> Option<f64> {
    if rounds.is_empty() || rounds.len() != off_rounds.len() {
        return None;
    }
    let changes: Vec<f64> = rounds
        .iter()
        .zip(off_rounds)
        .filter(|(_, off)| **off > 0.0)
        .map(|(on, off)| change_pct(*on, *off))
        .collect();
    if changes.len() != rounds.len() {
        return None;
    }
    median(&changes)
}

/// (value - baseline) / baseline in percent: negative when the variant is lower.
pub fn change_pct(value: f64, baseline: f64) -> f64 {
    (value - baseline) / baseline * 100.0
}

async fn start_lane(
    launcher: &Launcher,
    variant: Variant,
    postgres: Result<&ThrowawayPostgres, &String>,
) -> Result<Lane, Row> {
    let (url, store_pid) = match (variant, postgres) {
        (Variant::PostgresBestEffort, Ok(server)) => (Some(server.url()), server.postmaster_pid()),
        (Variant::PostgresBestEffort, Err(why)) => {
            return Err(failed(variant, format!("no PostgreSQL to write to: {why}")));
        }
        _ => (None, None),
    };
    if variant == Variant::PostgresBestEffort && store_pid.is_none() {
        return Err(failed(
            variant,
            "PostgreSQL started but its postmaster.pid could not be read, so its CPU cannot be counted",
        ));
    }
    let extra = variant
        .config(url.as_deref())
        .map_err(|why| failed(variant, why))?;
    let data_dir = launcher.workdir.join(format!("audit-{}", variant.slug()));
    let contender = launcher
        .start_manifold_with(&data_dir, &extra)
        .await
        .map_err(|why| failed(variant, format!("did not start: {why}")))?;
    let callers = match open_callers(
        &contender.endpoint,
        Era::Legacy,
        &contender.tool,
        SMALL_MESSAGE,
        CLIENTS,
        OPEN_PARALLEL,
    )
    .await
    {
        Ok(callers) => callers,
        Err((opened, e)) => {
            contender.stop().await;
            return Err(failed(
                variant,
                format!(
                    "could not open {CLIENTS} legacy sessions ({} opened): {e}",
                    opened.len()
                ),
            ));
        }
    };
    Ok(Lane {
        variant,
        contender,
        callers,
        store_pid,
        samples: Samples::default(),
        per_round: Vec::new(),
        calls: 0,
        served: 0,
        seconds: 0.0,
        ticks: 0,
        store_ticks: 0,
        unreadable: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_paired_change_is_the_median_of_each_rounds_own_change() {
        // Round 2 ran on a slow machine for both: its pair still says -10%.
        let off = [100.0, 50.0, 100.0];
        let on = [90.0, 45.0, 80.0];
        let paired = paired_change_pct(&on, &off).unwrap();
        assert!((paired - -10.0).abs() < 1e-9, "{paired}");
        assert_eq!(paired_change_pct(&on[..2], &off), None);
        assert_eq!(paired_change_pct(&[], &[]), None);
        assert_eq!(paired_change_pct(&[1.0], &[0.0]), None);
    }

    #[test]
    fn each_variant_configures_its_own_trail() {
        assert!(
            Variant::Off
                .config(None)
                .unwrap()
                .contains("enabled = false")
        );
        let best = Variant::SqliteBestEffort.config(None).unwrap();
        assert!(best.contains("mode = \"best_effort\"") && !best.contains("[store]"));
        let required = Variant::SqliteRequired.config(None).unwrap();
        assert!(required.contains("mode = \"required\"") && !required.contains("[store]"));
        assert!(Variant::PostgresBestEffort.config(None).is_err());
        let pg = Variant::PostgresBestEffort
            .config(Some("postgres://postgres@127.0.0.1:5433/postgres"))
            .unwrap();
        assert!(pg.contains("[store]\nurl = \"postgres://postgres@127.0.0.1:5433/postgres\""));
        assert_eq!(VARIANTS.first(), Some(&Variant::Off), "off is the baseline");
        assert_eq!(CLIENTS, 64);
    }

    #[test]
    fn trail_counts_come_from_the_exact_samples() {
        let text = "# TYPE manifold_audit_rows counter\n\
manifold_audit_rows_total{result=\"written\"} 1200\n\
manifold_audit_rows_total{result=\"dropped\"} 3\n\
manifold_audit_write_seconds_count 40\n\
manifold_audit_write_seconds_sum 0.5\n\
manifold_audit_queue_depth 0\n";
        let counts = trail_counts(text).unwrap();
        assert_eq!(
            counts,
            TrailCounts {
                written: 1200.0,
                dropped: 3.0,
                batches: 40.0,
                queued: 0.0
            }
        );
        assert_eq!(sample(text, "manifold_audit_write_seconds"), None);
        assert_eq!(trail_counts("manifold_tool_calls_total 5\n"), None);
    }

    #[test]
    fn the_change_against_off_is_negative_when_slower() {
        assert!((change_pct(90.0, 100.0) + 10.0).abs() < 1e-9);
        assert!((change_pct(110.0, 100.0) - 10.0).abs() < 1e-9);
    }
}
