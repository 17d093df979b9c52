//! Why: scenario 3 asks what forwarding one call costs the gateway in CPU time: user+system time
//! of the gateway process (`/proc/PID/stat`, all threads, its upstream excluded) read before and
//! after each timed batch, summed over the rounds and divided by the calls it forwarded.

use crate::client::Era;
use crate::load::{Caller, open_callers, run_concurrently};
use crate::process_metrics::{clock_ticks_per_second, cpu_ticks};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::{Fleet, Member, Plan, SMALL_MESSAGE, absent_row, rotation};

/// Concurrency levels CPU is measured at: one client, and many.
pub const LEVELS: [usize; 2] = [1, 64];

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "calls"),
        column("errors", "errors"),
        column("cpu_us_per_call", "cpu us/call"),
        column("cpu_pct", "cpu %"),
        column("calls_per_s", "calls/s"),
    ]
}

struct Lane {
    pid: u32,
    callers: Vec<Caller>,
    ticks: u64,
    calls: u64,
    errors: u64,
    first_error: Option<String>,
    seconds: f64,
    unreadable: bool,
}

pub async fn measure(fleet: &Fleet, plan: &Plan) -> Vec<Row> {
    let hz = clock_ticks_per_second() as f64;
    let mut rows = Vec::new();
    for level in LEVELS {
        let case = format!("c={level}");
        let mut lanes: Vec<Result<Lane, Row>> = Vec::new();
        for (kind, member) in &fleet.members {
            let lane = match member {
                Member::Up(contender) => match open_callers(
                    &contender.endpoint,
                    Era::Legacy,
                    &contender.tool,
                    SMALL_MESSAGE,
                    level,
                    32,
                )
                .await
                {
                    Ok(callers) => Ok(Lane {
                        pid: contender.gateway_pid(),
                        callers,
                        ticks: 0,
                        calls: 0,
                        errors: 0,
                        first_error: None,
                        seconds: 0.0,
                        unreadable: false,
                    }),
                    Err((_, e)) => Err(Row::failed(
                        &case,
                        kind.name(),
                        format!("could not open {level} legacy sessions: {e}"),
                    )),
                },
                absent => Err(absent_row(&case, *kind, absent)
                    .unwrap_or_else(|| Row::failed(&case, kind.name(), "not started"))),
            };
            lanes.push(lane);
        }
        for round in 0..plan.timed_rounds {
            for index in rotation(round, lanes.len()) {
                let Some(Ok(lane)) = lanes.get_mut(index) else {
                    continue;
                };
                let before = cpu_ticks(lane.pid);
                let callers = std::mem::take(&mut lane.callers);
                let (callers, outcome) = run_concurrently(callers, plan.concurrent_batch).await;
                let after = cpu_ticks(lane.pid);
                lane.callers = callers;
                match (before, after) {
                    (Some(b), Some(a)) => lane.ticks += a.saturating_sub(b),
                    _ => lane.unreadable = true,
                }
                lane.calls += outcome.latencies.len() as u64;
                lane.errors += outcome.errors;
                lane.seconds += outcome.elapsed.as_secs_f64();
                if lane.first_error.is_none() {
                    lane.first_error = outcome.first_error;
                }
            }
        }
        for ((kind, _), lane) in fleet.members.iter().zip(lanes) {
            let lane = match lane {
                Ok(lane) => lane,
                Err(row) => {
                    rows.push(row);
                    continue;
                }
            };
            let mut row = Row::new(&case, kind.name());
            row.set_calls(lane.calls, lane.errors, lane.first_error.as_deref());
            if lane.unreadable {
                row.note = Some(format!("/proc/{}/stat could not be read", lane.pid));
            } else if lane.calls > 0 {
                let cpu_seconds = lane.ticks as f64 / hz;
                row.set(
                    "cpu_us_per_call",
                    Cell::figure(cpu_seconds * 1e6 / lane.calls as f64),
                );
                if lane.seconds > 0.0 {
                    row.set("cpu_pct", Cell::figure(cpu_seconds / lane.seconds * 100.0));
                    row.set(
                        "calls_per_s",
                        Cell::figure(lane.calls as f64 / lane.seconds),
                    );
                }
            }
            rows.push(row);
        }
    }
    rows
}
