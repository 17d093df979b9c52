//! Why: `manifold-bench run` is one invocation that measures everything: it finds the binaries,
//! installs the pinned contenders when they are missing, starts each set of contenders once per
//! upstream kind, runs the scenarios asked for, and turns their rows into the report (table on
//! stdout, JSON on request). A contender that fails is a row that says so, never an abort.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;

use crate::client::Era;
use crate::contenders::{ALL, Kind, Launcher, Upstream};
use crate::machine::{Machine, load_average, version_of, workspace_commit};
use crate::report::{Report, ScenarioReport, Status};
use crate::scenarios::latency::Case;
use crate::scenarios::{
    ALL_SCENARIOS, Fleet, Plan, SMALL_MESSAGE, ScenarioId, audit, authored, callgrind, coldstart,
    cpu, default_scenario, fanout, large_message, latency, memory, replicas, sandbox, targets,
    throughput,
};
use crate::setup;

/// What `run` measures and how much.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// A short run (under two minutes on two cores once contenders are installed): fewer rounds
    /// and calls, 1,000 sessions in the memory scenario.
    #[arg(long)]
    pub quick: bool,
    /// Only these scenarios (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<ScenarioId>,
    /// Only these contenders (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub contenders: Vec<Kind>,
    /// Timed sequential calls per case and contender (latency and eras), over all rounds.
    #[arg(long)]
    pub calls: Option<u64>,
    /// Rounds each contender takes its turn in.
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The manifold binary (default: next to this one).
    #[arg(long, value_name = "PATH")]
    pub manifold: Option<PathBuf>,
    /// The manifold-echo binary (default: next to this one).
    #[arg(long, value_name = "PATH")]
    pub echo: Option<PathBuf>,
    /// Where contenders are installed (default: $MANIFOLD_BENCH_CACHE, else ~/.cache/manifold/bench).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Never install contenders; ones not installed are reported as failed.
    #[arg(long)]
    pub no_setup: bool,
}

/// A binary given on the command line, or the one beside this executable.
fn sibling_binary(given: Option<&Path>, name: &str, flag: &str) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!("{flag} {}: no such file", path.display()))
        };
    }
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .ok_or_else(|| format!("cannot tell where manifold-bench lives; pass {flag} PATH"))?;
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{name} is not next to manifold-bench (in {}); build all three with `cargo build --release -p manifold -p manifold-bench -p manifold-echo`, or pass {flag} PATH",
            dir.display()
        ))
    }
}

/// The run's scratch directory (generated configurations, contenders' logs). Removed when dropped,
/// also when a run is interrupted, unless `keep` was called to leave logs for a failure.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl WorkDir {
    fn create() -> Result<WorkDir, String> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("manifold-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| {
            format!(
                "could not create the work directory {}: {e}",
                path.display()
            )
        })?;
        Ok(WorkDir { path, keep: false })
    }

    fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Installs (or only finds, with `--no-setup`) the contenders `kinds` need.
async fn prepare_contenders(
    args: &RunArgs,
    kinds: &[Kind],
) -> (
    Option<Result<setup::NodeContenders, String>>,
    Option<Result<setup::PythonContender, String>>,
) {
    let wants_node = kinds
        .iter()
        .any(|k| matches!(k, Kind::Supergateway | Kind::McpProxyNpm));
    let wants_python = kinds.contains(&Kind::McpProxyPy);
    if !wants_node && !wants_python {
        return (None, None);
    }
    let cache = match setup::cache_dir(args.cache_dir.as_deref()) {
        Ok(dir) => dir,
        Err(e) => {
            let e = e.to_string();
            return (
                wants_node.then(|| Err(e.clone())),
                wants_python.then_some(Err(e)),
            );
        }
    };
    let install = !args.no_setup;
    let node = if wants_node {
        let cache = cache.clone();
        Some(
            tokio::task::spawn_blocking(move || setup::ensure_node(&cache, false, install))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string())),
        )
    } else {
        None
    };
    let python = if wants_python {
        Some(
            tokio::task::spawn_blocking(move || setup::ensure_python(&cache, false, install))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string())),
        )
    } else {
        None
    };
    (node, python)
}

fn describe_contenders(launcher: &Launcher, kinds: &[Kind]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for kind in kinds {
        let version = match kind {
            Kind::Direct => version_of(&launcher.echo, &["--version"]),
            Kind::Manifold => {
                let version = version_of(&launcher.manifold, &["--version"]);
                let commit = launcher
                    .manifold
                    .parent()
                    .and_then(workspace_commit)
                    .map(|c| format!(", commit {c}"))
                    .unwrap_or_default();
                format!("{version}{commit}")
            }
            Kind::Supergateway | Kind::McpProxyNpm => match &launcher.node {
                Some(Ok(node)) if *kind == Kind::Supergateway => {
                    format!(
                        "supergateway {} (npm), node {}",
                        node.supergateway_version,
                        node_version()
                    )
                }
                Some(Ok(node)) => {
                    format!(
                        "mcp-proxy {} (npm), node {}",
                        node.mcp_proxy_version,
                        node_version()
                    )
                }
                Some(Err(e)) => format!("not available: {e}"),
                None => "not installed".to_owned(),
            },
            Kind::McpProxyPy => match &launcher.python {
                Some(Ok(python)) => format!("mcp-proxy {} (PyPI)", python.version),
                Some(Err(e)) => format!("not available: {e}"),
                None => "not installed".to_owned(),
            },
        };
        out.insert(
            kind.name().to_owned(),
            format!("{version}; runs as: {}", launcher.describe(*kind)),
        );
    }
    out
}

fn node_version() -> String {
    version_of(Path::new("node"), &["--version"])
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
fn scenario(id: ScenarioId, plan: &Plan) -> ScenarioReport {
    match id {
        ScenarioId::Latency => {
            let mut s = ScenarioReport::new(
                "latency",
                "1. Latency: sequential tools/call on a legacy session (HTTP client -> gateway -> echo)",
                latency::columns(),
            );
            s.notes.push("p50/p99 over every timed call; spread = range of the per-round medians in % of the overall median; added = this contender minus direct in the same case; small = a 25-byte message, 32KiB = a 32,768-byte message echoed back".to_owned());
            s
        }
        ScenarioId::Throughput => {
            let mut s = ScenarioReport::new(
                "throughput",
                "2. Throughput: concurrent clients, one legacy session and connection each (gateway -> stdio echo), small payload",
                throughput::columns(),
            );
            s.notes.push("calls/s = successful calls / wall time of the timed batches; spread = range of per-round calls/s in %; manifold x = Manifold's calls/s divided by this contender's".to_owned());
            s
        }
        ScenarioId::Cpu => {
            let mut s = ScenarioReport::new(
                "cpu",
                "3. CPU: gateway user+system time per forwarded call (gateway -> stdio echo)",
                cpu::columns(),
            );
            s.notes.push(format!(
                "from /proc/PID/stat of the gateway process only (its stdio server excluded), in clock ticks of {:.0} ms; direct = the echo server's own CPU per call; cpu % = CPU time / wall time (100% = one core)",
                1000.0 / crate::process_metrics::clock_ticks_per_second() as f64
            ));
            s
        }
        ScenarioId::Memory => {
            let mut s = ScenarioReport::new(
                "memory",
                "4. Memory: gateway resident memory with open legacy sessions (initialize + notifications/initialized, kept)",
                memory::columns(),
            );
            s.notes.push(format!(
                "VmRSS of the gateway process; checkpoints {:?}, at most {} sessions, {:?} per contender; B/session = the larger of (RSS at 1k - idle) / 1,000 and (RSS at 10k - RSS at 1k) / 9,000 (the first alone when 10k was not reached); incl. children adds the processes the gateway started (its stdio servers); held = sessions open at the end",
                plan.memory_checkpoints, plan.memory_cap, plan.memory_budget
            ));
            s
        }
        ScenarioId::Fanout => {
            let mut s = ScenarioReport::new(
                "fanout",
                "5. Fan-out: tools/list of every tool, following cursors (legacy session)",
                fanout::columns(),
            );
            s.notes.push("p50/p99 of a whole listing (sum of its pages' times); direct = one echo server offering all the tools itself; start s = from spawn to answering HTTP".to_owned());
            s
        }
        ScenarioId::Coldstart => {
            let mut s = ScenarioReport::new(
                "coldstart",
                "6. Cold start: from spawning the gateway to a complete tools/list (modern request)",
                coldstart::columns(),
            );
            s.notes
                .push("direct = one echo server starting with as many tools".to_owned());
            s
        }
        ScenarioId::Eras => {
            let mut s = ScenarioReport::new(
                "eras",
                "7. Both eras: scenario 1 (gateway -> stdio echo) for a legacy session and a modern 2026-07-28 client",
                latency::columns(),
            );
            s.notes
                .push("added = this contender minus direct in the same era and payload".to_owned());
            s
        }
        ScenarioId::Audit => {
            let mut s = ScenarioReport::new(
                "audit",
                format!(
                    "8. Audit trail: Manifold (gateway -> stdio echo) at {} clients with the trail off and on, variants alternating round by round",
                    audit::CLIENTS
                ),
                audit::columns(),
            );
            s.notes.push(format!(
                "calls/s = median of the {} rounds' calls/s; vs off = change against the off row in %; paired = median over rounds of each round's change against off in the same round (less sensitive to the machine drifting between rounds); cpu us/call = gateway user+system time / timed calls over all rounds (clock ticks of {:.0} ms; SQLite writes happen in the gateway process, so they are included); store cpu = the PostgreSQL server's processes, outside the gateway; rows = audit rows written (Manifold's /metrics, read once its queue drained), rows/call = rows / every tools/call answered (timed and untimed), 1.000 = every call on the record; rows/batch = rows per store transaction",
                plan.timed_rounds,
                1000.0 / crate::process_metrics::clock_ticks_per_second() as f64
            ));
            s
        }
        ScenarioId::Sandbox => {
            let mut s = ScenarioReport::new(
                "sandbox",
                "9. Sandbox: Manifold (gateway -> one stdio echo) with the server's sandbox profile \"strict\" against \"off\", variants alternating round by round",
                sandbox::columns(),
            );
            s.notes.push(format!(
                "start = manifold serve spawned to the first tools/list holding the echo tool (a fresh gateway and data dir each time), p50 over {} starts per variant; calls = sequential tools/call on one legacy session, small payload; added = strict minus off; cpu us/call = user+system time of the gateway and every process below it (launcher and echo child included) / timed calls, gateway cpu = the gateway process alone (clock ticks of {:.0} ms)",
                plan.rounds,
                1000.0 / crate::process_metrics::clock_ticks_per_second() as f64
            ));
            s
        }
        ScenarioId::Authored => {
            let mut s = ScenarioReport::new(
                "authored",
                "11. Authored tools: Manifold with one stdio echo server and two authored echo tools ([tools.NAME], sh and python), each called sequentially on its own legacy session, variants alternating round by round",
                authored::columns(),
            );
            s.notes.push(format!(
                "every authored call starts a strict sandbox and the interpreter; at most {} timed calls per variant and round; cpu us/call = user+system time of the gateway and every process below it, the ended ones included (cutime/cstime), / timed calls; gateway cpu = the gateway process alone (clock ticks of {:.0} ms)",
                authored::MAX_CALLS_PER_ROUND,
                1000.0 / crate::process_metrics::clock_ticks_per_second() as f64
            ));
            s
        }
        ScenarioId::Replicas => {
            let mut s = ScenarioReport::new(
                "replicas",
                format!(
                    "12. Replicas: Manifold (gateway -> stdio echo) on one PostgreSQL, 1 and 3 replicas behind HAProxy, and the shared features' cost on one replica, at {:?} clients, lanes alternating round by round",
                    replicas::LEVELS
                ),
                replicas::columns(),
            );
            s.notes.push(format!(
                "lanes: baseline = SQLite store, audit off, no rate limits, no rules, no session key; +pg store = PostgreSQL store and a shared session_key, audit off; +audit = and the audit trail on it, best effort; replica = and [rate_limits] per_identity and per_tool of 1,000,000/s (never refusing) and an ask rule covering a tool nobody calls: 1 replica and 3 replicas are such replicas (r0; r0, r1, r2), the 1-replica lanes the same process. direct = the client talks to the gateway; haproxy = through one HAProxy. calls/s = median of the {} rounds' calls/s; vs = the lane compared with and the change in %; gw cpu = user+system time of the lane's gateway processes (their echo children excluded) / timed calls, clock ticks of {:.0} ms; gw calls/s per core = 1e6 / gw cpu, what one gateway would serve with a core to itself and nothing else short; haproxy, pg (the PostgreSQL server's process tree), client (the benchmark process) and machine (every CPU's busy time, /proc/stat, other users of the machine included) the same way",
                plan.timed_rounds,
                1000.0 / crate::process_metrics::clock_ticks_per_second() as f64
            ));
            s
        }
        ScenarioId::Callgrind => {
            let mut s = ScenarioReport::new(
                "callgrind",
                format!(
                    "10. Instructions per forwarded call: Manifold (gateway -> one stdio echo) under valgrind's callgrind, {} calls from {} legacy sessions after {} untimed",
                    callgrind::MEASURED_CALLS,
                    callgrind::SESSIONS,
                    callgrind::WARMUP_CALLS
                ),
                callgrind::columns(),
            );
            s.notes.push("instructions = callgrind's Ir total of the gateway process (its echo child excluded) with instrumentation on only for the measured calls and a settle second after them (callgrind_control -i on/off); instr/call = instructions / calls; trail share/call = on minus off. Under valgrind the CPU's SHA extensions are not offered, so the trail's hashing weighs several times more than natively".to_owned());
            s
        }
    }
}

/// Runs the scenarios asked for and returns the report.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub async fn run(args: RunArgs, command: String) -> Result<Report, String> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let manifold = sibling_binary(args.manifold.as_deref(), "manifold", "--manifold")?;
    let echo = sibling_binary(args.echo.as_deref(), "manifold-echo", "--echo")?;
    let kinds: Vec<Kind> = if args.contenders.is_empty() {
        ALL.to_vec()
    } else {
        ALL.iter()
            .copied()
            .filter(|k| args.contenders.contains(k))
            .collect()
    };
    let wanted: Vec<ScenarioId> = if args.only.is_empty() {
        ALL_SCENARIOS
            .iter()
            .copied()
            .filter(|s| default_scenario(*s))
            .collect()
    } else {
        ALL_SCENARIOS
            .iter()
            .copied()
            .filter(|s| args.only.contains(s))
            .collect()
    };
    let plan = Plan::new(args.quick, args.calls, args.rounds);
    let mut machine = Machine::observe();
    let (node, python) = prepare_contenders(&args, &kinds).await;
    let mut workdir = WorkDir::create()?;
    let launcher = Launcher::new(manifold, echo, workdir.path.clone(), node, python);
    let contenders = describe_contenders(&launcher, &kinds);
    let mut reports: BTreeMap<ScenarioId, ScenarioReport> = BTreeMap::new();
    let wants = |id: ScenarioId| wanted.contains(&id);
    let small = SMALL_MESSAGE.to_owned();
    let large = large_message();
    let case = |label: &str, era: Era, message: &str| Case {
        label: label.to_owned(),
        era,
        message: message.to_owned(),
    };

    let stdio_scenarios = [
        ScenarioId::Latency,
        ScenarioId::Eras,
        ScenarioId::Cpu,
        ScenarioId::Throughput,
    ];
    if stdio_scenarios.iter().any(|s| wants(*s)) {
        eprintln!("manifold-bench: starting contenders in front of a stdio echo server");
        let fleet = Fleet::start(&launcher, &kinds, Upstream::Stdio).await;
        for id in stdio_scenarios.into_iter().filter(|s| wants(*s)) {
            eprintln!("manifold-bench: scenario {id:?}");
            let clock = Instant::now();
            let mut report = scenario(id, &plan);
            report.rows = match id {
                ScenarioId::Latency => {
                    let cases = [
                        case("http->stdio small", Era::Legacy, &small),
                        case("http->stdio 32KiB", Era::Legacy, &large),
                    ];
                    latency::measure(&fleet, &cases, &plan).await
                }
                ScenarioId::Eras => {
                    let cases = [
                        case("legacy small", Era::Legacy, &small),
                        case("modern small", Era::Modern, &small),
                        case("legacy 32KiB", Era::Legacy, &large),
                        case("modern 32KiB", Era::Modern, &large),
                    ];
                    latency::measure(&fleet, &cases, &plan).await
                }
                ScenarioId::Cpu => cpu::measure(&fleet, &plan).await,
                _ => throughput::measure(&fleet, &plan).await,
            };
            report.seconds = clock.elapsed().as_secs_f64();
            reports.insert(id, report);
        }
        fleet.stop().await;
    }
    if wants(ScenarioId::Latency) {
        eprintln!("manifold-bench: scenario Latency, HTTP upstream");
        let clock = Instant::now();
        let fleet = Fleet::start(&launcher, &kinds, Upstream::Http).await;
        let cases = [
            case("http->http small", Era::Legacy, &small),
            case("http->http 32KiB", Era::Legacy, &large),
        ];
        let rows = latency::measure(&fleet, &cases, &plan).await;
        fleet.stop().await;
        if let Some(report) = reports.get_mut(&ScenarioId::Latency) {
            report.rows.extend(rows);
            report.seconds += clock.elapsed().as_secs_f64();
        }
    }
    if wants(ScenarioId::Memory) {
        eprintln!("manifold-bench: scenario Memory");
        let clock = Instant::now();
        let mut report = scenario(ScenarioId::Memory, &plan);
        let (rows, notes) = memory::measure(&launcher, &kinds, &plan).await;
        report.rows = rows;
        report.notes.extend(notes);
        report.seconds = clock.elapsed().as_secs_f64();
        reports.insert(ScenarioId::Memory, report);
    }
    if wants(ScenarioId::Fanout) {
        eprintln!("manifold-bench: scenario Fanout");
        let clock = Instant::now();
        let mut report = scenario(ScenarioId::Fanout, &plan);
        report.rows = fanout::measure(&launcher, &kinds, &plan).await;
        report.seconds = clock.elapsed().as_secs_f64();
        reports.insert(ScenarioId::Fanout, report);
    }
    if wants(ScenarioId::Coldstart) {
        eprintln!("manifold-bench: scenario Coldstart");
        let clock = Instant::now();
        let mut report = scenario(ScenarioId::Coldstart, &plan);
        report.rows = coldstart::measure(&launcher, &kinds, &plan).await;
        report.seconds = clock.elapsed().as_secs_f64();
        reports.insert(ScenarioId::Coldstart, report);
    }

    // Scenarios only Manifold takes part in: without it among --contenders each variant's row
    // says so, and nothing is started.
    let manifold_runs = kinds.contains(&Kind::Manifold);
    if wants(ScenarioId::Audit) {
        let labels = audit::VARIANTS.iter().map(|v| v.label());
        let measured = manifold_only(manifold_runs, labels, || audit::measure(&launcher, &plan));
        run_manifold_only(ScenarioId::Audit, &plan, &mut reports, measured).await;
    }
    if wants(ScenarioId::Sandbox) {
        let labels = sandbox::VARIANTS.iter().map(|v| v.label());
        let measured = manifold_only(manifold_runs, labels, || sandbox::measure(&launcher, &plan));
        run_manifold_only(ScenarioId::Sandbox, &plan, &mut reports, measured).await;
    }
    if wants(ScenarioId::Authored) {
        let labels = authored::VARIANTS.iter().map(|v| v.label());
        let measured = manifold_only(manifold_runs, labels, || {
            authored::measure(&launcher, &plan)
        });
        run_manifold_only(ScenarioId::Authored, &plan, &mut reports, measured).await;
    }
    if wants(ScenarioId::Replicas) {
        let labels = replicas::case_labels().into_iter();
        let measured = manifold_only(manifold_runs, labels, || {
            replicas::measure(&launcher, &plan)
        });
        run_manifold_only(ScenarioId::Replicas, &plan, &mut reports, measured).await;
    }
    if wants(ScenarioId::Callgrind) {
        let labels = callgrind::VARIANTS.iter().map(|v| v.label());
        let measured = manifold_only(manifold_runs, labels, || callgrind::measure(&launcher));
        run_manifold_only(ScenarioId::Callgrind, &plan, &mut reports, measured).await;
    }

    let mut scenarios: Vec<ScenarioReport> = reports.into_values().collect();
    if kinds.contains(&Kind::Manifold) {
        let mut goals = ScenarioReport::new(
            "targets",
            "Targets (issue 5) for Manifold",
            targets::columns(),
        );
        goals.rows = targets::evaluate(&scenarios, plan.memory_cap);
        scenarios.push(goals);
    }
    let any_failure = scenarios
        .iter()
        .flat_map(|s| &s.rows)
        .any(|r| matches!(r.status, Status::Failed | Status::Errors));
    if any_failure {
        eprintln!(
            "manifold-bench: some rows failed; the contenders' logs are kept in {}",
            workdir.path.display()
        );
        workdir.keep();
    }
    machine.load_after = load_average();
    Ok(Report {
        tool: format!("manifold-bench {}", env!("CARGO_PKG_VERSION")),
        command,
        mode: if plan.quick { "quick" } else { "full" },
        started_unix,
        seconds: started.elapsed().as_secs_f64(),
        machine,
        contenders,
        scenarios,
    })
}

/// The rows and notes of a scenario only Manifold takes part in, or, when it is not among
/// `--contenders`, one "not applicable" row per variant (named by `labels`).
async fn manifold_only<F, Fut>(
    manifold_runs: bool,
    labels: impl Iterator<Item = impl Into<String>>,
    measure: F,
) -> (Vec<crate::report::Row>, Vec<String>)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = (Vec<crate::report::Row>, Vec<String>)>,
{
    if manifold_runs {
        return measure().await;
    }
    let rows = labels
        .map(|label| {
            crate::report::Row::not_applicable(
                label,
                Kind::Manifold.name(),
                "manifold is not among --contenders",
            )
        })
        .collect();
    (rows, Vec::new())
}

/// Times `measured` and files its rows and notes as scenario `id`'s report.
async fn run_manifold_only(
    id: ScenarioId,
    plan: &Plan,
    reports: &mut BTreeMap<ScenarioId, ScenarioReport>,
    measured: impl std::future::Future<Output = (Vec<crate::report::Row>, Vec<String>)>,
) {
    eprintln!("manifold-bench: scenario {id:?}");
    let clock = Instant::now();
    let mut report = scenario(id, plan);
    let (rows, notes) = measured.await;
    report.rows = rows;
    report.notes.extend(notes);
    report.seconds = clock.elapsed().as_secs_f64();
    reports.insert(id, report);
}
