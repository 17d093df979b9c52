//! Why: scenario 2 asks how many calls per second each gateway forwards when many clients call
//! at once (concurrency 1, 16, 64, 256, one legacy session and connection per client), and what
//! that does to p99; each level is a fresh set of sessions and every contender takes its turn
//! in each round.

use crate::client::Era;
use crate::contenders::Kind;
use crate::load::{Caller, open_callers, run_concurrently};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::{Fleet, Member, Plan, SMALL_MESSAGE, absent_row, rotation};
use crate::stats::{Samples, spread_pct};

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "calls"),
        column("errors", "errors"),
        column("calls_per_s", "calls/s"),
        column("p50_us", "p50 us"),
        column("p99_us", "p99 us"),
        column("spread_pct", "spread %"),
        column("of_direct_pct", "% of direct"),
        column("manifold_x", "manifold x"),
    ]
}

/// Parallel session opens while preparing a level.
const OPEN_PARALLEL: usize = 32;

struct Lane {
    callers: Vec<Caller>,
    samples: Samples,
    calls: u64,
    seconds: f64,
    per_round: Vec<f64>,
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub async fn measure(fleet: &Fleet, plan: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for &level in &plan.concurrency_levels {
        let case = format!("c={level}");
        let mut lanes: Vec<Result<Lane, Row>> = Vec::with_capacity(fleet.members.len());
        for (kind, member) in &fleet.members {
            let lane = match member {
                Member::Up(contender) => {
                    match open_callers(
                        &contender.endpoint,
                        Era::Legacy,
                        &contender.tool,
                        SMALL_MESSAGE,
                        level,
                        OPEN_PARALLEL,
                    )
                    .await
                    {
                        Ok(callers) => Ok(Lane {
                            callers,
                            samples: Samples::default(),
                            calls: 0,
                            seconds: 0.0,
                            per_round: Vec::new(),
                        }),
                        Err((opened, e)) => Err(Row::failed(
                            &case,
                            kind.name(),
                            format!(
                                "could not open {level} legacy sessions ({} opened): {e}",
                                opened.len()
                            ),
                        )),
                    }
                }
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
                let callers = std::mem::take(&mut lane.callers);
                let (callers, outcome) = run_concurrently(callers, plan.concurrent_batch).await;
                lane.callers = callers;
                lane.per_round.push(outcome.calls_per_second());
                lane.calls += outcome.latencies.len() as u64;
                lane.seconds += outcome.elapsed.as_secs_f64();
                lane.samples
                    .record_errors(outcome.errors, outcome.first_error.clone());
                lane.samples.push_round(outcome.latencies);
            }
        }
        let rate = |lane: &Lane| {
            if lane.seconds > 0.0 {
                lane.calls as f64 / lane.seconds
            } else {
                0.0
            }
        };
        let rate_of = |wanted: Kind| {
            fleet
                .members
                .iter()
                .zip(&lanes)
                .find(|((kind, _), _)| *kind == wanted)
                .and_then(|(_, lane)| lane.as_ref().ok().map(rate))
                .filter(|r| *r > 0.0)
        };
        let direct = rate_of(Kind::Direct);
        let manifold = rate_of(Kind::Manifold);
        for ((kind, _), lane) in fleet.members.iter().zip(lanes) {
            let lane = match lane {
                Ok(lane) => lane,
                Err(row) => {
                    rows.push(row);
                    continue;
                }
            };
            let mut row = Row::new(&case, kind.name());
            row.set_calls(
                lane.calls,
                lane.samples.errors(),
                lane.samples.first_error(),
            );
            let cps = rate(&lane);
            row.set("calls_per_s", Cell::figure(cps));
            if let Some(s) = lane.samples.summary() {
                row.set("p50_us", Cell::figure(s.p50_us));
                row.set("p99_us", Cell::figure(s.p99_us));
            }
            row.set("spread_pct", Cell::maybe(spread_pct(&lane.per_round, cps)));
            if let Some(d) = direct
                && *kind != Kind::Direct
            {
                row.set("of_direct_pct", Cell::figure(cps / d * 100.0));
            }
            if let Some(m) = manifold
                && *kind != Kind::Manifold
                && *kind != Kind::Direct
                && cps > 0.0
            {
                row.set("manifold_x", Cell::figure(m / cps));
            }
            rows.push(row);
        }
    }
    rows
}
