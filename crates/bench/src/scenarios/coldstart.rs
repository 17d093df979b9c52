//! Why: scenario 6 asks how long a gateway with 20 stdio upstreams takes from being started to
//! answering `tools/list` with every upstream's tools: the wait after a restart or a scale-out.
//! The clock starts before the process is spawned and stops when a listing (a modern request: no
//! handshake) holds all the tools. The direct row is one echo server starting with as many tools.

use std::time::{Duration, Instant};

use crate::child_process::ChildProcess;
use crate::client::{Connection, Endpoint, Era, Session, list_all_tools};
use crate::contenders::{Kind, Launcher, Upstream};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::{Member, Plan, absent_row, rotation};
use crate::stats::Samples;

/// How long one start may take before it counts as failed.
const START_HANG_GUARD: Duration = Duration::from_secs(90);

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "starts"),
        column("errors", "errors"),
        column("tools", "tools"),
        column("p50_ms", "p50 ms"),
        column("max_ms", "max ms"),
        column("spread_pct", "spread %"),
    ]
}

/// A contender's starts so far and the tools its last start listed, or why it sits out.
type Lane = Result<(Samples, usize), Row>;

pub fn case_label(plan: &Plan) -> String {
    format!("{} stdio upstreams", plan.coldstart_servers)
}

pub async fn measure(launcher: &Launcher, kinds: &[Kind], plan: &Plan) -> Vec<Row> {
    let case = case_label(plan);
    let servers = plan.coldstart_servers;
    let upstream = Upstream::Many { servers, tools: 1 };
    let mut lanes: Vec<(Kind, Lane)> = kinds
        .iter()
        .map(|kind| {
            let lane = match upstream.unsupported_by(*kind) {
                Some(why) => Err(absent_row(&case, *kind, &Member::NotApplicable(why))
                    .unwrap_or_else(|| Row::failed(&case, kind.name(), why))),
                None => Ok((Samples::default(), 0)),
            };
            (*kind, lane)
        })
        .collect();
    for round in 0..plan.rounds {
        for index in rotation(round, lanes.len()) {
            let Some((kind, Ok((samples, tools)))) = lanes.get_mut(index) else {
                continue;
            };
            samples.start_round();
            match start_once(launcher, *kind, upstream, servers).await {
                Ok((elapsed, listed)) => {
                    samples.record(elapsed);
                    *tools = listed;
                }
                Err(e) => samples.record_error(e),
            }
        }
    }
    lanes
        .into_iter()
        .map(|(kind, lane)| match lane {
            Err(row) => row,
            Ok((samples, tools)) => {
                let mut row = Row::new(&case, kind.name());
                let summary = samples.summary();
                row.set_calls(
                    summary.map_or(0, |s| s.calls),
                    samples.errors(),
                    samples.first_error(),
                );
                row.set("tools", Cell::Int(tools as u64));
                if let Some(s) = summary {
                    row.set("p50_ms", Cell::figure(s.p50_us / 1000.0));
                    row.set("max_ms", Cell::maybe(samples.max_us().map(|m| m / 1000.0)));
                    row.set("spread_pct", Cell::maybe(s.spread_pct));
                }
                row
            }
        })
        .collect()
}

/// Starts one process, waits for a complete listing, stops it: the time taken and tools listed.
async fn start_once(
    launcher: &Launcher,
    kind: Kind,
    upstream: Upstream,
    servers: usize,
) -> Result<(Duration, usize), String> {
    let started = Instant::now();
    let mut process: ChildProcess = match kind {
        Kind::Direct => launcher.spawn_echo_http(u32::try_from(servers).unwrap_or(u32::MAX))?,
        Kind::Manifold => launcher.spawn_manifold(upstream, None)?,
        other => return Err(format!("{} cannot be cold-started here", other.name())),
    };
    let outcome = async {
        let url = process.first_stdout_line(START_HANG_GUARD).await?;
        let endpoint = Endpoint::parse(&url).map_err(|e| e.to_string())?;
        loop {
            match listing(&endpoint).await {
                Ok(tools) if tools >= servers => return Ok((started.elapsed(), tools)),
                Ok(_) | Err(_) if started.elapsed() < START_HANG_GUARD => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Ok(tools) => {
                    return Err(format!(
                        "listed {tools} tools after {START_HANG_GUARD:?}, expected {servers}"
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

/// How many tools one complete listing on a fresh modern session holds.
pub async fn listing(endpoint: &Endpoint) -> Result<usize, crate::client::ClientError> {
    let mut connection = Connection::open(endpoint).await?;
    let session = Session::open(&mut connection, Era::Modern).await?;
    let mut next_id = 0;
    let pages = list_all_tools(&mut connection, &session, &mut next_id).await?;
    Ok(pages.iter().map(|p| p.tools).sum())
}
