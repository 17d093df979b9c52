//! Why: issue 14's target is that a sandboxed stdio child costs under 20 ms to start and nothing
//! measurable per call. This scenario says whether it does: Manifold in front of one stdio echo
//! server with `[servers.echo.sandbox] profile = "strict"` against the same with `profile = "off"`
//! (both written out, so a change of the default cannot move either row), the two taking turns
//! round by round as the contenders do. Cold start is gateway spawn to the first `tools/list`
//! holding the echo tool; calls are sequential `tools/call`s with the CPU of the gateway and of
//! every process below it (the launcher and the sandboxed child included) read around each batch.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::contenders::{Contender, Launcher, Upstream, toml_string};
use crate::load::Caller;
use crate::process_metrics::{clock_ticks_per_second, cpu_ticks, tree_cpu_ticks};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::coldstart::listing;
use crate::scenarios::{Plan, SMALL_MESSAGE, rotation};
use crate::stats::Samples;

/// How long one cold start may take before it counts as failed (a sandboxed child that cannot
/// start never shows its tool, so this is also how long such a failure takes to be seen).
const START_HANG_GUARD: Duration = Duration::from_secs(30);
/// The work-directory folder holding the echo binary both variants run.
const ECHO_COPY_DIR: &str = "sandbox-bin";
/// How long to wait between listings while the child is still starting.
const LISTING_RETRY: Duration = Duration::from_millis(1);
/// The contender name of every row: each variant is Manifold.
const CONTENDER: &str = "manifold";

/// How the echo server is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `profile = "off"`: the baseline.
    Off,
    /// `profile = "strict"`: every control, no network.
    Strict,
}

/// Every variant, in table order (off first: strict is compared with it).
pub const VARIANTS: [Variant; 2] = [Variant::Off, Variant::Strict];

impl Variant {
    pub fn label(self) -> &'static str {
        match self {
            Variant::Off => "sandbox off",
            Variant::Strict => "sandbox strict",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Variant::Off => "sandbox-off",
            Variant::Strict => "sandbox-strict",
        }
    }

    /// The server's sandbox table. Strict adds the echo binary's directory read-only: besides
    /// the system libraries the strict root already holds, the binary is all the server needs.
    pub fn config(self, echo: &Path) -> String {
        match self {
            Variant::Off => "\n[servers.echo.sandbox]\nprofile = \"off\"\n".to_owned(),
            Variant::Strict => {
                let dir = echo.parent().unwrap_or(echo);
                format!(
                    "\n[servers.echo.sandbox]\nprofile = \"strict\"\nread_only = [{}]\n",
                    toml_string(&dir.to_string_lossy())
                )
            }
        }
    }
}

pub fn columns() -> Vec<Column> {
    vec![
        column("starts", "starts"),
        column("start_p50_ms", "start p50 ms"),
        column("start_max_ms", "start max ms"),
        column("added_start_ms", "added start ms"),
        column("calls", "calls"),
        column("errors", "errors"),
        column("p50_us", "p50 us"),
        column("p99_us", "p99 us"),
        column("spread_pct", "spread %"),
        column("added_p50_us", "added p50 us"),
        column("added_p99_us", "added p99 us"),
        column("cpu_us_per_call", "cpu us/call"),
        column("gateway_cpu_us_per_call", "gateway cpu us/call"),
    ]
}

/// One variant's figures so far.
#[derive(Default)]
struct Lane {
    starts: Samples,
    calls: Samples,
    /// Clock ticks of the gateway and its descendants over the timed batches.
    tree_ticks: u64,
    /// Clock ticks of the gateway process alone.
    gateway_ticks: u64,
    timed_calls: u64,
}

/// Runs the cold starts, then the calls, each variant taking its turn every round.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub async fn measure(launcher: &Launcher, plan: &Plan) -> (Vec<Row>, Vec<String>) {
    let launcher = match reachable_echo(launcher) {
        Ok(echo) => launcher.with_echo(echo),
        Err(e) => {
            let rows = VARIANTS
                .iter()
                .map(|v| Row::failed(v.label(), CONTENDER, e.clone()))
                .collect();
            return (rows, Vec::new());
        }
    };
    let launcher = &launcher;
    let mut lanes: Vec<Lane> = VARIANTS.iter().map(|_| Lane::default()).collect();
    let mut notes = Vec::new();

    let mut contenders: Vec<Result<(Contender, Caller), String>> = Vec::new();
    for variant in VARIANTS {
        contenders.push(start_caller(launcher, variant).await);
    }
    // The unsandboxed gateway's full listing is what a cold start waits for: the echo tool
    // plus whatever the gateway lists of its own.
    let expected = match contenders.first() {
        Some(Ok((contender, _))) => listing(&contender.endpoint).await.unwrap_or(1).max(1),
        _ => 1,
    };

    for round in 0..plan.rounds {
        for index in rotation(round, VARIANTS.len()) {
            let (Some(variant), Some(lane)) = (VARIANTS.get(index), lanes.get_mut(index)) else {
                continue;
            };
            lane.starts.start_round();
            let data_dir = launcher
                .workdir
                .join(format!("{}-start-{round}", variant.slug()));
            match start_once(launcher, *variant, &data_dir, expected).await {
                Ok(elapsed) => lane.starts.record(elapsed),
                Err(e) => lane.starts.record_error(e),
            }
        }
    }

    for slot in contenders.iter_mut().flatten() {
        slot.1
            .sequential(plan.warmup_calls, plan.batch_time_cap, None)
            .await;
    }
    let ticks = clock_ticks_per_second();
    for round in 0..plan.rounds {
        let calls = plan.batch_calls(round);
        if calls == 0 {
            continue;
        }
        for index in rotation(round, VARIANTS.len()) {
            let (Some(Ok((contender, caller))), Some(lane)) =
                (contenders.get_mut(index), lanes.get_mut(index))
            else {
                continue;
            };
            let pid = contender.gateway_pid();
            let tree_before = tree_cpu_ticks(pid);
            let own_before = cpu_ticks(pid);
            let before = lane.calls.summary().map_or(0, |s| s.calls);
            lane.calls.start_round();
            caller
                .sequential(calls, plan.batch_time_cap, Some(&mut lane.calls))
                .await;
            let after = lane.calls.summary().map_or(0, |s| s.calls);
            if let (Some(t0), Some(t1), Some(o0), Some(o1)) =
                (tree_before, tree_cpu_ticks(pid), own_before, cpu_ticks(pid))
            {
                lane.tree_ticks += t1.saturating_sub(t0);
                lane.gateway_ticks += o1.saturating_sub(o0);
                lane.timed_calls += after.saturating_sub(before);
            }
        }
    }

    let baseline_start = lanes
        .first()
        .and_then(|l| l.starts.summary())
        .map(|s| s.p50_us);
    let baseline_calls = lanes.first().and_then(|l| l.calls.summary());
    let mut rows = Vec::new();
    for ((variant, lane), contender) in VARIANTS.iter().zip(&lanes).zip(&contenders) {
        let mut row = Row::new(variant.label(), CONTENDER);
        let starts = lane.starts.summary();
        row.set("starts", Cell::Int(starts.map_or(0, |s| s.calls)));
        if let Some(s) = starts {
            row.set("start_p50_ms", Cell::figure(s.p50_us / 1000.0));
            row.set(
                "start_max_ms",
                Cell::maybe(lane.starts.max_us().map(|m| m / 1000.0)),
            );
            if let Some(base) = baseline_start
                && *variant != Variant::Off
            {
                row.set("added_start_ms", Cell::figure((s.p50_us - base) / 1000.0));
            }
        }
        if let Some(e) = lane.starts.first_error() {
            notes.push(format!("{}: a cold start failed: {e}", variant.label()));
        }
        match contender {
            Err(e) => {
                let mut failed =
                    Row::failed(variant.label(), CONTENDER, format!("did not start: {e}"));
                failed.values.append(&mut row.values);
                row = failed;
            }
            Ok(_) => {
                let summary = lane.calls.summary();
                row.set_calls(
                    summary.map_or(0, |s| s.calls),
                    lane.calls.errors() + lane.starts.errors(),
                    lane.calls.first_error().or(lane.starts.first_error()),
                );
                if let Some(s) = summary {
                    row.set("p50_us", Cell::figure(s.p50_us));
                    row.set("p99_us", Cell::figure(s.p99_us));
                    row.set("spread_pct", Cell::maybe(s.spread_pct));
                    if let Some(base) = baseline_calls
                        && *variant != Variant::Off
                    {
                        row.set("added_p50_us", Cell::figure(s.p50_us - base.p50_us));
                        row.set("added_p99_us", Cell::figure(s.p99_us - base.p99_us));
                    }
                }
                if lane.timed_calls > 0 {
                    let per_call = |t: u64| t as f64 * 1e6 / ticks as f64 / lane.timed_calls as f64;
                    row.set("cpu_us_per_call", Cell::figure(per_call(lane.tree_ticks)));
                    row.set(
                        "gateway_cpu_us_per_call",
                        Cell::figure(per_call(lane.gateway_ticks)),
                    );
                }
            }
        }
        rows.push(row);
    }
    for (contender, _) in contenders.into_iter().flatten() {
        contender.stop().await;
    }
    (rows, notes)
}

/// Starts `manifold serve` for `variant` and opens a session on it.
async fn start_caller(
    launcher: &Launcher,
    variant: Variant,
) -> Result<(Contender, Caller), String> {
    let data_dir = launcher.workdir.join(format!("{}-calls", variant.slug()));
    let contender = launcher
        .start_manifold_with(&data_dir, &variant.config(&launcher.echo))
        .await?;
    let mut caller = match Caller::open(
        &contender.endpoint,
        crate::client::Era::Legacy,
        &contender.tool,
        SMALL_MESSAGE,
    )
    .await
    {
        Ok(caller) => caller,
        Err(e) => {
            contender.stop().await;
            return Err(format!("could not open a session: {e}"));
        }
    };
    if let Err(e) = caller.probe().await {
        contender.stop().await;
        return Err(format!("the first call failed: {e}"));
    }
    Ok((contender, caller))
}

/// Copies the echo binary into the run's work directory (world-searchable, unlike a home under
/// /root) so a sandboxed uid can execute it; both variants run this same copy.
fn reachable_echo(launcher: &Launcher) -> Result<PathBuf, String> {
    let dir = launcher.workdir.join(ECHO_COPY_DIR);
    let copy = dir.join("manifold-echo");
    let fail = |what: &str, path: &Path, e: std::io::Error| {
        format!(
            "could not {what} {} for the sandboxed echo server: {e}; check the work directory is writable",
            path.display()
        )
    };
    std::fs::create_dir_all(&dir).map_err(|e| fail("create", &dir, e))?;
    std::fs::copy(&launcher.echo, &copy).map_err(|e| fail("copy the echo binary to", &copy, e))?;
    for (path, mode) in [(&dir, 0o755), (&copy, 0o755)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| fail("open up", path, e))?;
    }
    Ok(copy)
}

/// Spawns one gateway, waits until a listing holds `expected` tools, stops it: the time taken.
async fn start_once(
    launcher: &Launcher,
    variant: Variant,
    data_dir: &Path,
    expected: usize,
) -> Result<Duration, String> {
    let started = Instant::now();
    let mut process = launcher.spawn_manifold_with(
        Upstream::Stdio,
        None,
        data_dir,
        &variant.config(&launcher.echo),
    )?;
    let outcome = async {
        let url = process.first_stdout_line(START_HANG_GUARD).await?;
        let endpoint = crate::client::Endpoint::parse(&url).map_err(|e| e.to_string())?;
        loop {
            match listing(&endpoint).await {
                Ok(tools) if tools >= expected => return Ok(started.elapsed()),
                Ok(_) | Err(_) if started.elapsed() < START_HANG_GUARD => {
                    tokio::time::sleep(LISTING_RETRY).await;
                }
                Ok(tools) => {
                    return Err(format!(
                        "listed {tools} tools after {START_HANG_GUARD:?}, expected {expected}: the echo server did not start"
                    ));
                }
                Err(e) => return Err(format!("tools/list failed: {e}")),
            }
        }
    }
    .await;
    process.stop().await;
    outcome
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn both_variants_write_their_profile_explicitly() {
        let echo = Path::new("/opt/bench/manifold-echo");
        let off = Variant::Off.config(echo);
        assert!(off.contains("[servers.echo.sandbox]\nprofile = \"off\""));
        let strict = Variant::Strict.config(echo);
        assert!(strict.contains("profile = \"strict\""));
        assert!(strict.contains("read_only = [\"/opt/bench\"]"));
    }
}
