//! What one audit row costs the store alone: SQLite in a temporary data dir, the rows the audit
//! writer makes (`audit_entry`) of a forwarded call's facts, appended in batches as it does.
//! The end-to-end figure (`manifold-bench --only audit`) mixes this with the request path and
//! the machine's noise; this one isolates the part no change to the request path can reach.
//!
//! `cargo bench -p manifold-audit --bench audit_append [-- --batches N --rounds R --rows N]`
//!
//! `--rows` sets the rows per batch: 512 ([`MAX_AUDIT_BATCH`]) is what best effort writes under
//! load; `required` mode commits as soon as rows wait, in batches of about 15-25 at 64 clients.
//!
//! CPU is the whole process's (`getrusage`): the writer's side (the column check, the chain's
//! SHA-256, binding) and sqlx's SQLite thread (SQLite itself, its WAL and checkpoints).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use manifold_audit::audit_entry;
use manifold_store::{AuditEntry, MAX_AUDIT_BATCH, SQLITE_FILE_NAME, Store, StoreLocation};
use manifold_telemetry::audit::{AuditFacts, AuditOutcome};
use nix::sys::resource::{UsageWho, getrusage};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Batches each round appends, unless `--batches` says otherwise.
const DEFAULT_BATCHES: usize = 100;
/// Rounds, unless `--rounds` says otherwise; the table gives their median and range.
const DEFAULT_ROUNDS: usize = 5;

struct Settings {
    batches: usize,
    rounds: usize,
    rows: usize,
}

fn settings() -> Result<Settings, String> {
    let mut settings = Settings {
        batches: DEFAULT_BATCHES,
        rounds: DEFAULT_ROUNDS,
        rows: MAX_AUDIT_BATCH,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let slot = match arg.as_str() {
            "--batches" => &mut settings.batches,
            "--rounds" => &mut settings.rounds,
            "--rows" => &mut settings.rows,
            // cargo bench passes `--bench`; anything else is a mistake worth naming.
            "--bench" => continue,
            other => {
                return Err(format!(
                    "unknown argument {other}; takes --batches N and --rounds R"
                ));
            }
        };
        *slot = args
            .next()
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{arg} takes a positive number"))?;
    }
    if settings.rows > MAX_AUDIT_BATCH {
        return Err(format!(
            "--rows takes at most {MAX_AUDIT_BATCH} (MAX_AUDIT_BATCH)"
        ));
    }
    Ok(settings)
}

/// The facts of a forwarded `tools/call` as the gateway records it for `manifold-bench`'s
/// echo calls (no trace context, no recorded arguments): the same fields, the same lengths.
fn facts(n: u64, at_ms: i64) -> AuditFacts {
    let digest = |salt: u64| format!("{:016x}", n.wrapping_mul(salt)).repeat(4);
    AuditFacts {
        at_ms,
        call_id: format!("{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        principal: "anonymous".to_owned(),
        session: Some(format!("{:016x}", n / 1000)),
        client_name: Some("manifold-bench".to_owned()),
        client_version: Some("0.1.0".to_owned()),
        server: "echo".to_owned(),
        method: "tools/call".to_owned(),
        target: "echo".to_owned(),
        outcome: Some(AuditOutcome::Ok),
        args_sha256: Some(digest(0x2545_f491_4f6c_dd1d)),
        result_sha256: Some(digest(0x5851_f42d_4c95_7f2d)),
        duration_us: 900 + n % 300,
        bytes_in: 139,
        bytes_out: 183,
        ..AuditFacts::default()
    }
}

fn cpu_time() -> Result<Duration, String> {
    let usage = getrusage(UsageWho::RUSAGE_SELF).map_err(|e| format!("getrusage failed: {e}"))?;
    let micros = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    Ok(micros(usage.user_time()) + micros(usage.system_time()))
}

struct Round {
    cpu_us_per_row: f64,
    wall_us_per_row: f64,
}

async fn run(settings: &Settings) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let store = Store::open(&StoreLocation::sqlite(dir.path()))
        .await
        .map_err(|e| e.to_string())?;
    let mut next = 0u64;
    let mut at_ms = 1_765_000_000_000i64;
    let mut batch = || {
        (0..settings.rows)
            .map(|_| {
                next += 1;
                at_ms += 1;
                audit_entry(facts(next, at_ms))
            })
            .collect::<Vec<_>>()
    };
    // One batch first, so the statements are prepared and the file exists before timing.
    store
        .audit()
        .append_batch(&batch())
        .await
        .map_err(|e| e.to_string())?;
    let record_bytes = batch().first().map_or(0, |e| e.record_json.len());
    let mut rounds = Vec::with_capacity(settings.rounds);
    for _ in 0..settings.rounds {
        let batches: Vec<Vec<AuditEntry>> = (0..settings.batches).map(|_| batch()).collect();
        let rows = (settings.batches * settings.rows) as f64;
        let (cpu, wall) = (cpu_time()?, Instant::now());
        for b in &batches {
            store
                .audit()
                .append_batch(b)
                .await
                .map_err(|e| e.to_string())?;
        }
        let cpu = cpu_time()?.saturating_sub(cpu);
        rounds.push(Round {
            cpu_us_per_row: cpu.as_secs_f64() * 1e6 / rows,
            wall_us_per_row: wall.elapsed().as_secs_f64() * 1e6 / rows,
        });
    }
    let total_rows = (settings.rounds * settings.batches + 1) * settings.rows;
    let file_bytes = std::fs::metadata(dir.path().join(SQLITE_FILE_NAME)).map_or(0, |m| m.len());
    report(
        settings,
        &mut rounds,
        record_bytes,
        file_bytes as f64 / total_rows as f64,
    );
    store.close().await;
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn report(settings: &Settings, rounds: &mut [Round], record_bytes: usize, file_bytes_per_row: f64) {
    let mut cpu: Vec<f64> = rounds.iter().map(|r| r.cpu_us_per_row).collect();
    let mut wall: Vec<f64> = rounds.iter().map(|r| r.wall_us_per_row).collect();
    let (low, high) = (
        cpu.iter().copied().fold(f64::INFINITY, f64::min),
        cpu.iter().copied().fold(0.0, f64::max),
    );
    println!(
        "== Audit append, store alone: SQLite, {} rounds of {} batches of {} rows ==",
        settings.rounds, settings.batches, settings.rows
    );
    println!("backend  record bytes  cpu us/row  cpu range     wall us/row  file bytes/row");
    println!(
        "sqlite   {record_bytes:>12}  {:>10.2}  {low:>5.2}-{high:<5.2}  {:>11.2}  {file_bytes_per_row:>14.0}",
        median(&mut cpu),
        median(&mut wall)
    );
    println!(
        "  note: cpu us/row = this process's user+system time (getrusage) over the timed appends / rows, median of the rounds; it includes sqlx's SQLite thread; file bytes/row = the database file after the run / rows (the WAL aside)"
    );
}

fn main() -> ExitCode {
    let outcome = settings().and_then(|settings| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("could not start a runtime: {e}"))?
            .block_on(run(&settings))
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("audit_append: {why}");
            ExitCode::FAILURE
        }
    }
}
