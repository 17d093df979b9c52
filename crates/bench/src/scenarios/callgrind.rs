//! Why: wall-clock and CPU-time figures swing with whatever else runs on a shared machine;
//! instructions counted by valgrind's callgrind do not. This scenario (issue 12) counts the
//! instructions a `manifold serve` spends per forwarded `tools/call` to one stdio echo server,
//! with the audit trail off and at its default (on): the gateway starts under callgrind with
//! instrumentation off, is warmed up untimed, and only the measured calls are counted
//! (`callgrind_control -i on/off`). The profiles stay for `callgrind_annotate`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::child_process::ChildProcess;
use crate::client::{Endpoint, Era};
use crate::contenders::{Launcher, Upstream};
use crate::load::{Caller, open_callers};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::SMALL_MESSAGE;
use crate::stats::Samples;

/// Legacy sessions the calls come from, one after another each, all at once: a few concurrent
/// sessions keep the batching paths (the audit writer) realistic.
pub const SESSIONS: usize = 4;
/// Measured calls over all sessions (each session's warm-up call on its connection included).
pub const MEASURED_CALLS: u64 = 1_000;
/// Untimed calls over all sessions before instrumentation starts: caches, pools, lazy statics.
pub const WARMUP_CALLS: u64 = 200;
/// How long the measured calls' after-effects (the trail's batch write) get before
/// instrumentation stops, so the trail's work is counted with the calls that caused it.
const SETTLE: Duration = Duration::from_secs(1);
/// How long after the warm-up the measured calls wait, so one-time work of a starting gateway
/// is not counted with them: Manifold releases its start-up code pages 3 s after listening
/// (`STARTUP_SETTLE`), about 2.4 million instructions, once.
const START_SETTLE: Duration = Duration::from_secs(5);
/// Under valgrind Manifold starts tens of times slower than natively.
const START_HANG_GUARD: Duration = Duration::from_secs(120);
/// A sequential batch is not cut short: every measured call must be made.
const NO_TIME_CAP: Duration = Duration::from_secs(3_600);
/// Time the gateway gets after SIGTERM to shut down and callgrind to write its profile.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// The contender name of every row.
const CONTENDER: &str = "manifold";
/// What a reader without valgrind is told.
pub const INSTALL_HINT: &str = "apt-get install valgrind";

/// One way of running Manifold under callgrind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `[audit] enabled = false`: the forwarding alone.
    TrailOff,
    /// Manifold's default: SQLite in the data dir, best effort.
    TrailOn,
}

/// Every variant, in table order (off first: on's share of the trail is against it).
pub const VARIANTS: [Variant; 2] = [Variant::TrailOff, Variant::TrailOn];

impl Variant {
    pub fn label(self) -> &'static str {
        match self {
            Variant::TrailOff => "trail off",
            Variant::TrailOn => "trail on (default)",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Variant::TrailOff => "off",
            Variant::TrailOn => "on",
        }
    }

    fn config(self) -> &'static str {
        match self {
            Variant::TrailOff => "\n[audit]\nenabled = false\n",
            Variant::TrailOn => "",
        }
    }
}

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "calls"),
        column("errors", "errors"),
        column("instructions", "instructions"),
        column("instructions_per_call", "instr/call"),
        column("trail_share", "trail share/call"),
    ]
}

/// valgrind and callgrind_control, found on the search path.
#[derive(Debug, Clone)]
pub struct Valgrind {
    pub valgrind: PathBuf,
    pub control: PathBuf,
}

/// `name` in the directories of `search_path` (a `PATH` value).
fn find_in(search_path: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(search_path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Finds valgrind's tools in `search_path`, or says what to install.
pub fn find_valgrind(search_path: &OsStr) -> Result<Valgrind, String> {
    let missing = |name: &str| {
        format!("{name} is not on PATH, so instructions cannot be counted: {INSTALL_HINT}")
    };
    let valgrind = find_in(search_path, "valgrind").ok_or_else(|| missing("valgrind"))?;
    let control =
        find_in(search_path, "callgrind_control").ok_or_else(|| missing("callgrind_control"))?;
    Ok(Valgrind { valgrind, control })
}

/// The instruction count of a callgrind profile: its `totals:` line, else its `summary:` line
/// (the first event, Ir, is the instructions).
pub fn total_instructions(profile: &str) -> Option<u64> {
    let first_event = |prefix: &str| {
        profile
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    first_event("totals:").or_else(|| first_event("summary:"))
}

/// Where the profiles go: outside the run's work directory, which is removed at the end, so
/// they stay for `callgrind_annotate`.
fn profile_dir() -> PathBuf {
    std::env::temp_dir().join("manifold-callgrind")
}

/// Runs the scenario: a row per variant (none without valgrind) and notes.
pub async fn measure(launcher: &Launcher) -> (Vec<Row>, Vec<String>) {
    let search_path = std::env::var_os("PATH").unwrap_or_default();
    measure_with(launcher, &search_path).await
}

async fn measure_with(launcher: &Launcher, search_path: &OsStr) -> (Vec<Row>, Vec<String>) {
    let mut notes = Vec::new();
    let tools = match find_valgrind(search_path) {
        Ok(tools) => tools,
        Err(why) => {
            notes.push(why);
            return (Vec::new(), notes);
        }
    };
    if !launcher.manifold_has_audit_trail() {
        notes.push(format!(
            "{} does not accept an [audit] section, so the trail cannot be switched off: this build keeps no audit trail",
            launcher.manifold.display()
        ));
        return (Vec::new(), notes);
    }
    let dir = profile_dir();
    if let Err(e) = std::fs::create_dir_all(&dir) {
        notes.push(format!(
            "could not create {} for the profiles: {e}; set TMPDIR to a writable directory",
            dir.display()
        ));
        return (Vec::new(), notes);
    }
    let mut rows = Vec::with_capacity(VARIANTS.len());
    let mut off_per_call = None;
    let mut profiles = Vec::new();
    for variant in VARIANTS {
        let profile = dir.join(format!("callgrind.out.{}", variant.slug()));
        let mut row = Row::new(variant.label(), CONTENDER);
        match run_variant(launcher, &tools, variant, &profile).await {
            Ok(counted) => {
                row.set_calls(
                    counted.calls,
                    counted.errors,
                    counted.first_error.as_deref(),
                );
                row.set("instructions", Cell::Int(counted.instructions));
                if counted.calls > 0 {
                    let per_call = counted.instructions as f64 / counted.calls as f64;
                    row.set("instructions_per_call", Cell::Float(per_call, 0));
                    match variant {
                        Variant::TrailOff => off_per_call = Some(per_call),
                        Variant::TrailOn => {
                            if let Some(off) = off_per_call {
                                row.set("trail_share", Cell::Float(per_call - off, 0));
                            }
                        }
                    }
                }
                profiles.push(profile.display().to_string());
            }
            Err(why) => {
                row = Row::failed(variant.label(), CONTENDER, why);
            }
        }
        rows.push(row);
    }
    if !profiles.is_empty() {
        notes.push(format!(
            "profiles: {}; read them with `callgrind_annotate --inclusive=yes FILE`",
            profiles.join(", ")
        ));
    }
    (rows, notes)
}

/// What one variant's measured calls cost.
struct Counted {
    calls: u64,
    errors: u64,
    first_error: Option<String>,
    instructions: u64,
}

async fn run_variant(
    launcher: &Launcher,
    tools: &Valgrind,
    variant: Variant,
    profile: &Path,
) -> Result<Counted, String> {
    let data_dir = launcher
        .workdir
        .join(format!("callgrind-{}", variant.slug()));
    let config =
        launcher.write_manifold_config(Upstream::Stdio, None, &data_dir, variant.config())?;
    // A profile left by an earlier run must not be read as this one's.
    let _ = std::fs::remove_file(profile);
    let mut gateway = ChildProcess::spawn(
        "manifold serve under callgrind",
        &tools.valgrind,
        &[
            "--tool=callgrind".to_owned(),
            "--instr-atstart=no".to_owned(),
            format!("--callgrind-out-file={}", profile.display()),
            launcher.manifold.to_string_lossy().into_owned(),
        ]
        .into_iter()
        .chain(crate::contenders::serve_args(&config))
        .collect::<Vec<_>>(),
        &[],
        &config.with_extension("log"),
    )?;
    let measured = drive(&mut gateway, tools).await;
    gateway.stop_within(STOP_GRACE).await;
    let (calls, errors, first_error) = measured?;
    let text = std::fs::read_to_string(profile).map_err(|e| {
        format!(
            "callgrind wrote no readable profile {}: {e}; the gateway's log is {}",
            profile.display(),
            config.with_extension("log").display()
        )
    })?;
    let instructions = total_instructions(&text).ok_or_else(|| {
        format!(
            "{} has neither a totals: nor a summary: line; is it a callgrind profile?",
            profile.display()
        )
    })?;
    Ok(Counted {
        calls,
        errors,
        first_error,
        instructions,
    })
}

/// Warms the gateway up, counts the measured calls, and returns (calls answered, errors, first).
async fn drive(
    gateway: &mut ChildProcess,
    tools: &Valgrind,
) -> Result<(u64, u64, Option<String>), String> {
    let url = gateway.first_stdout_line(START_HANG_GUARD).await?;
    let endpoint = Endpoint::parse(&url).map_err(|e| e.to_string())?;
    let callers = open_callers(
        &endpoint,
        Era::Legacy,
        "echo__echo",
        SMALL_MESSAGE,
        SESSIONS,
        SESSIONS,
    )
    .await
    .map_err(|(opened, e)| {
        format!(
            "could not open {SESSIONS} legacy sessions ({} opened): {e}",
            opened.len()
        )
    })?;
    let (callers, warm) = calls_from(callers, WARMUP_CALLS).await;
    if warm.errors() > 0 {
        return Err(format!(
            "a warm-up call failed: {}",
            warm.first_error().unwrap_or("no message")
        ));
    }
    tokio::time::sleep(START_SETTLE).await;
    instrumentation(tools, gateway.pid(), true).await?;
    let (_, measured) = calls_from(callers, MEASURED_CALLS).await;
    tokio::time::sleep(SETTLE).await;
    instrumentation(tools, gateway.pid(), false).await?;
    let answered = measured.summary().map_or(0, |s| s.calls);
    // Each session's call that warms its fresh connection is answered and counted too.
    let warmers = if answered > 0 { SESSIONS as u64 } else { 0 };
    Ok((
        answered + warmers,
        measured.errors(),
        measured.first_error().map(str::to_owned),
    ))
}

/// `total` calls spread over the callers, which call at the same time, each one after another.
async fn calls_from(callers: Vec<Caller>, total: u64) -> (Vec<Caller>, Samples) {
    let sessions = callers.len().max(1) as u64;
    // Each session's first call warms its connection and is made on top of its share.
    let per_session = (total / sessions).saturating_sub(1).max(1);
    let mut handles = Vec::with_capacity(callers.len());
    for mut caller in callers {
        handles.push(tokio::spawn(async move {
            let mut samples = Samples::default();
            caller
                .sequential(per_session, NO_TIME_CAP, Some(&mut samples))
                .await;
            (caller, samples)
        }));
    }
    let mut all = Samples::default();
    let mut callers = Vec::with_capacity(handles.len());
    for handle in handles {
        match handle.await {
            Ok((caller, samples)) => {
                all.merge(samples);
                callers.push(caller);
            }
            Err(e) => all.record_error(format!("a session's task failed: {e}")),
        }
    }
    (callers, all)
}

/// `callgrind_control -i on|off PID`.
async fn instrumentation(tools: &Valgrind, pid: u32, on: bool) -> Result<(), String> {
    let switch = if on { "on" } else { "off" };
    let output = tokio::process::Command::new(&tools.control)
        .args(["-i", switch, &pid.to_string()])
        .output()
        .await
        .map_err(|e| format!("could not run {}: {e}", tools.control.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{} -i {switch} {pid}` failed ({}): {}",
            tools.control.display(),
            output.status,
            crate::client::excerpt(&output.stderr)
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn totals_come_from_the_profile_header() {
        let profile = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 4242\n\
cmd:  /bin/manifold serve\npart: 1\n\npositions: line\nevents: Ir\nsummary: 999\n\
totals: 213456789\n\nfl=(1) a.rs\nfn=(1) main\n3 7\n";
        assert_eq!(total_instructions(profile), Some(213_456_789));
        // With several events Ir comes first.
        assert_eq!(
            total_instructions("events: Ir Dr\ntotals: 12 34\n"),
            Some(12)
        );
        assert_eq!(total_instructions("events: Ir\nsummary: 77\n"), Some(77));
        assert_eq!(total_instructions("events: Ir\n3 7\n"), None);
        assert_eq!(total_instructions("totals: many\n"), None);
    }

    #[test]
    fn without_valgrind_on_path_the_reader_is_told_to_install_it() {
        let empty = tempdir_without_tools();
        let why = find_valgrind(empty.as_os_str()).unwrap_err();
        assert!(why.contains("valgrind is not on PATH"), "{why}");
        assert!(why.contains(INSTALL_HINT), "{why}");
    }

    #[test]
    fn the_measurement_is_the_issues() {
        assert_eq!((SESSIONS, MEASURED_CALLS, WARMUP_CALLS), (4, 1_000, 200));
        assert_eq!(
            VARIANTS.first(),
            Some(&Variant::TrailOff),
            "off is the baseline"
        );
        assert!(Variant::TrailOff.config().contains("enabled = false"));
        assert_eq!(Variant::TrailOn.config(), "", "on is Manifold's default");
        assert_eq!(SETTLE, Duration::from_secs(1));
        assert!(
            START_SETTLE > Duration::from_secs(3),
            "past Manifold's STARTUP_SETTLE"
        );
        assert_eq!(START_HANG_GUARD, Duration::from_secs(120));
        assert_eq!(STOP_GRACE, Duration::from_secs(30));
        assert!(NO_TIME_CAP >= Duration::from_secs(3_600));
    }

    fn tempdir_without_tools() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("callgrind-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
