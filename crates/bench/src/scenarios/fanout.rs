//! Why: scenario 5 asks how long a client waits for the whole tool list when a gateway aggregates
//! 100 upstreams of 100 tools (10,000 tools), following every cursor. The direct row is one echo
//! server offering all 10,000 tools itself: the cost of the bytes alone.

use std::time::{Duration, Instant};

use crate::client::{Connection, Era, Session, list_all_tools};
use crate::contenders::{Kind, Launcher, Upstream};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::{Member, Plan, absent_row, rotation};
use crate::stats::Samples;

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "lists"),
        column("errors", "errors"),
        column("tools", "tools"),
        column("pages", "pages"),
        column("p50_ms", "p50 ms"),
        column("p99_ms", "p99 ms"),
        column("first_page_p50_ms", "page 1 p50 ms"),
        column("spread_pct", "spread %"),
        column("ready_s", "start s"),
    ]
}

struct Lane {
    contender: crate::contenders::Contender,
    session: Session,
    ready: Duration,
    full: Samples,
    first_page: Samples,
    tools: usize,
    pages: usize,
}

pub fn case_label(plan: &Plan) -> String {
    format!(
        "{} tools ({} x {})",
        plan.fanout_servers * plan.fanout_tools as usize,
        plan.fanout_servers,
        plan.fanout_tools
    )
}

pub async fn measure(launcher: &Launcher, kinds: &[Kind], plan: &Plan) -> Vec<Row> {
    let case = case_label(plan);
    let upstream = Upstream::Many {
        servers: plan.fanout_servers,
        tools: plan.fanout_tools,
    };
    let expected = plan.fanout_servers * plan.fanout_tools as usize;
    let mut lanes: Vec<(Kind, Result<Lane, Row>)> = Vec::new();
    for kind in kinds {
        let lane = match upstream.unsupported_by(*kind) {
            Some(why) => Err(absent_row(&case, *kind, &Member::NotApplicable(why))
                .unwrap_or_else(|| Row::failed(&case, kind.name(), why))),
            None => {
                let started = Instant::now();
                match launcher.start(*kind, upstream).await {
                    Err(e) => Err(Row::failed(
                        &case,
                        kind.name(),
                        format!("did not start: {e}"),
                    )),
                    Ok(contender) => {
                        let ready = started.elapsed();
                        let opened = async {
                            let mut connection = Connection::open(&contender.endpoint).await?;
                            Session::open(&mut connection, Era::Legacy).await
                        }
                        .await;
                        match opened {
                            Ok(session) => Ok(Lane {
                                contender,
                                session,
                                ready,
                                full: Samples::default(),
                                first_page: Samples::default(),
                                tools: 0,
                                pages: 0,
                            }),
                            Err(e) => {
                                contender.stop().await;
                                Err(Row::failed(
                                    &case,
                                    kind.name(),
                                    format!("could not open a legacy session: {e}"),
                                ))
                            }
                        }
                    }
                }
            }
        };
        lanes.push((*kind, lane));
    }
    // Warm-up: two untimed listings each.
    for (_, lane) in &mut lanes {
        if let Ok(lane) = lane {
            for _ in 0..2 {
                list_round(lane, 1, expected, false).await;
            }
        }
    }
    for round in 0..plan.rounds {
        for index in rotation(round, lanes.len()) {
            if let Some((_, Ok(lane))) = lanes.get_mut(index) {
                lane.full.start_round();
                lane.first_page.start_round();
                list_round(lane, plan.fanout_lists, expected, true).await;
            }
        }
    }
    let mut rows = Vec::new();
    for (kind, lane) in lanes {
        let lane = match lane {
            Ok(lane) => lane,
            Err(row) => {
                rows.push(row);
                continue;
            }
        };
        let mut row = Row::new(&case, kind.name());
        let summary = lane.full.summary();
        row.set_calls(
            summary.map_or(0, |s| s.calls),
            lane.full.errors(),
            lane.full.first_error(),
        );
        row.set("tools", Cell::Int(lane.tools as u64));
        row.set("pages", Cell::Int(lane.pages as u64));
        if let Some(s) = summary {
            row.set("p50_ms", Cell::figure(s.p50_us / 1000.0));
            row.set("p99_ms", Cell::figure(s.p99_us / 1000.0));
            row.set("spread_pct", Cell::maybe(s.spread_pct));
        }
        if let Some(s) = lane.first_page.summary() {
            row.set("first_page_p50_ms", Cell::figure(s.p50_us / 1000.0));
        }
        row.set("ready_s", Cell::figure(lane.ready.as_secs_f64()));
        rows.push(row);
        lane.contender.stop().await;
    }
    rows
}

/// `lists` full listings on a fresh connection; timed ones go into the lane's samples.
async fn list_round(lane: &mut Lane, lists: u32, expected: usize, timed: bool) {
    let mut connection = match Connection::open(&lane.contender.endpoint).await {
        Ok(c) => c,
        Err(e) => {
            if timed {
                lane.full.record_error(e);
            }
            return;
        }
    };
    let mut next_id = 0;
    for _ in 0..lists {
        match list_all_tools(&mut connection, &lane.session, &mut next_id).await {
            Ok(pages) => {
                let tools: usize = pages.iter().map(|p| p.tools).sum();
                if tools < expected {
                    if timed {
                        lane.full.record_error(format!(
                            "listed {tools} tools, expected at least {expected}"
                        ));
                    }
                    continue;
                }
                lane.tools = tools;
                lane.pages = pages.len();
                if timed {
                    lane.full.record(pages.iter().map(|p| p.elapsed).sum());
                    if let Some(first) = pages.first() {
                        lane.first_page.record(first.elapsed);
                    }
                }
            }
            Err(e) => {
                if timed {
                    lane.full.record_error(e);
                }
                match Connection::open(&lane.contender.endpoint).await {
                    Ok(fresh) => connection = fresh,
                    Err(_) => return,
                }
            }
        }
    }
}
