//! Why: scenarios 1 (latency, HTTP->stdio and HTTP->HTTP) and 7 (the same for both eras) are the
//! same measurement on different cases: sequential `tools/call`s on one keep-alive connection,
//! every case and contender interleaved round by round, compared with the direct connection.

use crate::client::Era;
use crate::load::Caller;
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::{Fleet, Member, Plan, absent_row, rotation};
use crate::stats::Samples;

/// One thing to time: an era and a message.
pub struct Case {
    pub label: String,
    pub era: Era,
    pub message: String,
}

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "calls"),
        column("errors", "errors"),
        column("p50_us", "p50 us"),
        column("p99_us", "p99 us"),
        column("spread_pct", "spread %"),
        column("added_p50_us", "added p50 us"),
        column("added_p99_us", "added p99 us"),
    ]
}

enum Slot {
    Live(Box<Caller>, Samples),
    Gone(Row),
}

/// Times every case on every contender of `fleet` that is up.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub async fn measure(fleet: &Fleet, cases: &[Case], plan: &Plan) -> Vec<Row> {
    let mut slots: Vec<Vec<Slot>> = Vec::with_capacity(cases.len());
    for case in cases {
        let mut row_slots = Vec::with_capacity(fleet.members.len());
        for (kind, member) in &fleet.members {
            let slot = match member {
                Member::Up(contender) => {
                    match Caller::open(
                        &contender.endpoint,
                        case.era,
                        &contender.tool,
                        &case.message,
                    )
                    .await
                    {
                        Ok(mut caller) => match caller.probe().await {
                            Ok(()) => Slot::Live(Box::new(caller), Samples::default()),
                            Err(e) if case.era == Era::Modern => Slot::Gone(Row::not_applicable(
                                &case.label,
                                kind.name(),
                                &format!("does not serve the 2026-07-28 era: {e}"),
                            )),
                            Err(e) => Slot::Gone(Row::failed(
                                &case.label,
                                kind.name(),
                                format!("the first call failed: {e}"),
                            )),
                        },
                        Err(e) => Slot::Gone(Row::failed(
                            &case.label,
                            kind.name(),
                            format!("could not open a {} session: {e}", case.era.name()),
                        )),
                    }
                }
                absent => match absent_row(&case.label, *kind, absent) {
                    Some(row) => Slot::Gone(row),
                    None => Slot::Gone(Row::failed(&case.label, kind.name(), "not started")),
                },
            };
            row_slots.push(slot);
        }
        slots.push(row_slots);
    }

    for case_slots in &mut slots {
        for slot in case_slots.iter_mut() {
            if let Slot::Live(caller, _) = slot {
                caller
                    .sequential(plan.warmup_calls, plan.batch_time_cap, None)
                    .await;
            }
        }
    }

    let members = fleet.members.len();
    for round in 0..plan.rounds {
        let calls = plan.batch_calls(round);
        if calls == 0 {
            continue;
        }
        for case_slots in &mut slots {
            for index in rotation(round, members) {
                if let Some(Slot::Live(caller, samples)) = case_slots.get_mut(index) {
                    samples.start_round();
                    caller
                        .sequential(calls, plan.batch_time_cap, Some(samples))
                        .await;
                }
            }
        }
    }

    let mut rows = Vec::new();
    for (case, case_slots) in cases.iter().zip(slots) {
        let direct = fleet
            .members
            .iter()
            .position(|(kind, _)| *kind == crate::contenders::Kind::Direct)
            .and_then(|i| match case_slots.get(i) {
                Some(Slot::Live(_, samples)) => samples.summary(),
                _ => None,
            });
        for ((kind, _), slot) in fleet.members.iter().zip(case_slots) {
            let row = match slot {
                Slot::Gone(row) => row,
                Slot::Live(_, samples) => {
                    let mut row = Row::new(&case.label, kind.name());
                    let summary = samples.summary();
                    row.set_calls(
                        summary.map_or(0, |s| s.calls),
                        samples.errors(),
                        samples.first_error(),
                    );
                    if let Some(s) = summary {
                        row.set("p50_us", Cell::figure(s.p50_us));
                        row.set("p99_us", Cell::figure(s.p99_us));
                        row.set("spread_pct", Cell::maybe(s.spread_pct));
                        if let Some(d) = direct
                            && *kind != crate::contenders::Kind::Direct
                        {
                            row.set("added_p50_us", Cell::figure(s.p50_us - d.p50_us));
                            row.set("added_p99_us", Cell::figure(s.p99_us - d.p99_us));
                        }
                    }
                    row
                }
            };
            rows.push(row);
        }
    }
    rows
}
