//! Why: issue 5 sets goals for Manifold (added latency, CPU per call, throughput against the
//! others and against direct, memory per session, fan-out listing). The report closes with each
//! goal beside the figure this run measured for it, so a reader never has to hunt for it; a goal
//! whose scenario did not run says so instead of passing silently. The audit trail's own goal
//! (at most 10% of throughput with SQLite) closes the list.

use crate::contenders::Kind;
use crate::report::{Cell, Column, Row, ScenarioReport, Status, column};

pub fn columns() -> Vec<Column> {
    vec![
        column("measured", "measured"),
        column("goal", "goal"),
        column("verdict", "verdict"),
    ]
}

fn find<'a>(scenarios: &'a [ScenarioReport], id: &str) -> Option<&'a ScenarioReport> {
    scenarios.iter().find(|s| s.id == id)
}

/// The value of `key` in a row that measured something.
fn figure(
    scenarios: &[ScenarioReport],
    id: &str,
    case: &str,
    contender: &str,
    key: &str,
) -> Option<f64> {
    let row = find(scenarios, id)?.row(case, contender)?;
    if matches!(row.status, Status::Failed | Status::NotApplicable) {
        return None;
    }
    row.value(key)
}

fn goal_row(
    what: &str,
    measured: Option<(f64, String)>,
    goal: &str,
    met: impl Fn(f64) -> bool,
) -> Row {
    let mut row = Row::new(what, Kind::Manifold.name());
    match measured {
        Some((value, shown)) => {
            row.set("measured", Cell::Text(shown));
            row.set(
                "verdict",
                Cell::Text(if met(value) { "met" } else { "not met" }.to_owned()),
            );
        }
        None => {
            row.set("measured", Cell::Text("-".to_owned()));
            row.set("verdict", Cell::Text("not measured".to_owned()));
        }
    }
    row.set("goal", Cell::Text(goal.to_owned()));
    row
}

/// The most throughput the audit trail may cost with SQLite (Manifold's default store and mode).
pub const AUDIT_COST_GOAL_PCT: f64 = 10.0;

/// The goals beside this run's figures; `memory_cap` is the most sessions the run tried to open.
pub fn evaluate(scenarios: &[ScenarioReport], memory_cap: usize) -> Vec<Row> {
    let manifold = Kind::Manifold.name();
    let mut rows = Vec::new();
    for case in ["http->stdio small", "http->http small"] {
        let added = figure(scenarios, "latency", case, manifold, "added_p50_us");
        rows.push(goal_row(
            &format!("added p50 over direct ({case})"),
            added.map(|v| (v, format!("{v:.1} us"))),
            "< 50 us",
            |v| v < 50.0,
        ));
    }
    for case in ["c=1", "c=64"] {
        let cpu = figure(scenarios, "cpu", case, manifold, "cpu_us_per_call");
        rows.push(goal_row(
            &format!("gateway CPU per forwarded call ({case})"),
            cpu.map(|v| (v, format!("{v:.1} us"))),
            "< 20 us",
            |v| v < 20.0,
        ));
    }
    for other in [Kind::Supergateway, Kind::McpProxyNpm, Kind::McpProxyPy] {
        let times = figure(scenarios, "throughput", "c=64", other.name(), "manifold_x");
        rows.push(goal_row(
            &format!("throughput at c=64 vs {}", other.name()),
            times.map(|v| (v, format!("{v:.1}x"))),
            ">= 10x",
            |v| v >= 10.0,
        ));
    }
    let of_direct = figure(scenarios, "throughput", "c=64", manifold, "of_direct_pct");
    rows.push(goal_row(
        "throughput at c=64 vs direct",
        of_direct.map(|v| (v, format!("{v:.0}%"))),
        ">= 80%",
        |v| v >= 80.0,
    ));
    let per_session = figure(
        scenarios,
        "memory",
        super::memory::CASE,
        manifold,
        "bytes_per_session",
    );
    rows.push(goal_row(
        "resident memory per idle legacy session",
        per_session.map(|v| (v, format!("{:.2} KiB", v / 1024.0))),
        "< 20 KiB",
        |v| v < 20.0 * 1024.0,
    ));
    let held = find(scenarios, "memory")
        .and_then(|s| s.row(super::memory::CASE, manifold))
        .filter(|r| r.status == Status::Ok)
        .and_then(|r| r.value("held"));
    let mut held_row = goal_row(
        "legacy sessions held (each answering afterwards)",
        held.map(|v| (v, format!("{v:.0}"))),
        ">= 10000",
        |v| v >= 10_000.0,
    );
    if held.is_some() && memory_cap < 10_000 {
        // A run that never tried 10,000 sessions cannot say whether they would be held.
        held_row.set(
            "verdict",
            Cell::Text(format!("not measured (this run stops at {memory_cap})")),
        );
    }
    rows.push(held_row);
    let listing = find(scenarios, "fanout").and_then(|s| {
        s.rows
            .iter()
            .find(|r| r.contender == manifold && r.status == Status::Ok)
            .and_then(|r| r.value("p50_ms"))
    });
    rows.push(goal_row(
        "tools/list over 10,000 tools, p50 (all pages)",
        listing.map(|v| (v, format!("{v:.2} ms"))),
        "< 5 ms",
        |v| v < 5.0,
    ));
    let change = figure(
        scenarios,
        "audit",
        super::audit::Variant::SqliteBestEffort.label(),
        manifold,
        "calls_per_s_vs_off_pct",
    );
    rows.push(goal_row(
        &format!(
            "audit trail's throughput cost at c={} (SQLite, best effort)",
            super::audit::CLIENTS
        ),
        change.map(|v| (-v, format!("{:.1}%", -v))),
        &format!("<= {AUDIT_COST_GOAL_PCT:.0}%"),
        |cost| cost <= AUDIT_COST_GOAL_PCT,
    ));
    rows
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn a_goal_without_a_figure_is_not_measured_rather_than_met() {
        let rows = evaluate(&[], 100_000);
        assert!(!rows.is_empty());
        assert!(
            rows.iter()
                .all(|r| r.values.get("verdict") == Some(&Cell::Text("not measured".to_owned())))
        );
    }

    #[test]
    fn a_figure_is_judged_against_its_goal() {
        let mut latency = ScenarioReport::new("latency", "t", Vec::new());
        let mut row = Row::new("http->stdio small", "manifold");
        row.set("added_p50_us", Cell::figure(42.0));
        latency.rows.push(row);
        let rows = evaluate(&[latency], 100_000);
        assert_eq!(
            rows[0].values.get("verdict"),
            Some(&Cell::Text("met".to_owned()))
        );
    }

    fn audit_verdict(change_pct: f64) -> (Cell, Cell) {
        let mut audit = ScenarioReport::new("audit", "t", Vec::new());
        let mut row = Row::new("sqlite best_effort", "manifold");
        row.set("calls_per_s_vs_off_pct", Cell::figure(change_pct));
        audit.rows.push(row);
        let rows = evaluate(&[audit], 100_000);
        let goal = rows
            .iter()
            .find(|r| r.case.starts_with("audit trail's throughput cost"))
            .unwrap();
        (
            goal.values.get("measured").unwrap().clone(),
            goal.values.get("verdict").unwrap().clone(),
        )
    }

    #[test]
    fn the_audit_trail_may_cost_at_most_ten_percent_of_throughput() {
        let text = |t: &str| Cell::Text(t.to_owned());
        assert_eq!(audit_verdict(-4.0), (text("4.0%"), text("met")));
        assert_eq!(
            audit_verdict(-AUDIT_COST_GOAL_PCT),
            (text("10.0%"), text("met"))
        );
        assert_eq!(audit_verdict(-10.5), (text("10.5%"), text("not met")));
        // Faster with the trail (noise) is a negative cost, and within the goal.
        assert_eq!(audit_verdict(2.0), (text("-2.0%"), text("met")));
    }
}
