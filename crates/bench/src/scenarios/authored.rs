//! Why: an authored tool runs in a fresh strict sandbox for every call, so its cost is a process
//! start, not a forwarded message. This scenario says how much: one Manifold with the stdio echo
//! server and two authored echo tools from its configuration file (`[tools.NAME]`, `sh` and
//! `python`), each called sequentially on its own legacy session, the three taking turns round by
//! round. CPU is the gateway's and every process below it, the ended ones included (launchers and
//! tool processes leave theirs in the gateway's cutime/cstime once reaped).

use crate::contenders::{Contender, Launcher};
use crate::load::Caller;
use crate::process_metrics::{
    clock_ticks_per_second, cpu_ticks, reaped_children_ticks, tree_cpu_ticks,
};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::{Plan, SMALL_MESSAGE, rotation};
use crate::stats::Samples;

/// The contender name of every row: each variant is Manifold.
const CONTENDER: &str = "manifold";
/// At most this many timed calls per round: each one starts a sandbox (milliseconds).
pub const MAX_CALLS_PER_ROUND: u64 = 200;
/// Untimed calls per variant before the first round.
const WARMUP_CALLS: u64 = 10;

/// The authored tools, as the configuration file holds them: both print their `message` back,
/// as the echo server does (the bench checks the answer).
pub const TOOLS: &str = r#"
[tools.echo_sh]
description = "Prints its message back"
language = "sh"
code = '''sed -e 's/^.*"message":"//' -e 's/".*$//' | tr -d '\n' '''

[tools.echo_py]
description = "Prints its message back"
language = "python"
code = "import json, sys\nsys.stdout.write(json.load(sys.stdin)['message'])\n"
"#;

/// What is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The stdio echo server's tool: the baseline, a forwarded call.
    Server,
    AuthoredSh,
    AuthoredPython,
}

pub const VARIANTS: [Variant; 3] = [
    Variant::Server,
    Variant::AuthoredSh,
    Variant::AuthoredPython,
];

impl Variant {
    pub fn label(self) -> &'static str {
        match self {
            Variant::Server => "server tool (stdio echo)",
            Variant::AuthoredSh => "authored sh tool",
            Variant::AuthoredPython => "authored python tool",
        }
    }

    fn tool(self, contender: &Contender) -> String {
        match self {
            Variant::Server => contender.tool.clone(),
            Variant::AuthoredSh => "echo_sh".to_owned(),
            Variant::AuthoredPython => "echo_py".to_owned(),
        }
    }
}

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "calls"),
        column("errors", "errors"),
        column("p50_us", "p50 us"),
        column("p99_us", "p99 us"),
        column("spread_pct", "spread %"),
        column("cpu_us_per_call", "cpu us/call"),
        column("gateway_cpu_us_per_call", "gateway cpu us/call"),
    ]
}

#[derive(Default)]
struct Lane {
    calls: Samples,
    tree_ticks: u64,
    gateway_ticks: u64,
    timed_calls: u64,
}

/// Runs the three variants against one gateway.
pub async fn measure(launcher: &Launcher, plan: &Plan) -> (Vec<Row>, Vec<String>) {
    let data_dir = launcher.workdir.join("authored-data");
    let contender = match launcher.start_manifold_with(&data_dir, TOOLS).await {
        Ok(c) => c,
        Err(e) => {
            let rows = VARIANTS
                .iter()
                .map(|v| Row::failed(v.label(), CONTENDER, format!("did not start: {e}")))
                .collect();
            return (rows, Vec::new());
        }
    };
    let mut callers = Vec::new();
    for variant in VARIANTS {
        let opened = Caller::open(
            &contender.endpoint,
            crate::client::Era::Legacy,
            &variant.tool(&contender),
            SMALL_MESSAGE,
        )
        .await
        .map_err(|e| e.to_string());
        let probed = match opened {
            Ok(mut caller) => match caller.probe().await {
                Ok(()) => Ok(caller),
                Err(e) => Err(format!("the first call failed: {e}")),
            },
            Err(e) => Err(format!("could not open a session: {e}")),
        };
        callers.push(probed);
    }
    for caller in callers.iter_mut().flatten() {
        caller
            .sequential(WARMUP_CALLS, plan.batch_time_cap, None)
            .await;
    }
    let mut lanes: Vec<Lane> = VARIANTS.iter().map(|_| Lane::default()).collect();
    let pid = contender.gateway_pid();
    for round in 0..plan.rounds {
        let calls = plan.batch_calls(round).min(MAX_CALLS_PER_ROUND);
        if calls == 0 {
            continue;
        }
        for index in rotation(round, VARIANTS.len()) {
            let (Some(Ok(caller)), Some(lane)) = (callers.get_mut(index), lanes.get_mut(index))
            else {
                continue;
            };
            let tree = || Some(tree_cpu_ticks(pid)?.saturating_add(reaped_children_ticks(pid)?));
            let (tree_before, own_before) = (tree(), cpu_ticks(pid));
            let before = lane.calls.summary().map_or(0, |s| s.calls);
            lane.calls.start_round();
            caller
                .sequential(calls, plan.batch_time_cap, Some(&mut lane.calls))
                .await;
            let after = lane.calls.summary().map_or(0, |s| s.calls);
            if let (Some(t0), Some(t1), Some(o0), Some(o1)) =
                (tree_before, tree(), own_before, cpu_ticks(pid))
            {
                lane.tree_ticks += t1.saturating_sub(t0);
                lane.gateway_ticks += o1.saturating_sub(o0);
                lane.timed_calls += after.saturating_sub(before);
            }
        }
    }
    let ticks = clock_ticks_per_second();
    let mut rows = Vec::new();
    for ((variant, lane), caller) in VARIANTS.iter().zip(&lanes).zip(&callers) {
        let mut row = Row::new(variant.label(), CONTENDER);
        if let Err(e) = caller {
            rows.push(Row::failed(variant.label(), CONTENDER, e.clone()));
            continue;
        }
        let summary = lane.calls.summary();
        row.set_calls(
            summary.map_or(0, |s| s.calls),
            lane.calls.errors(),
            lane.calls.first_error(),
        );
        if let Some(s) = summary {
            row.set("p50_us", Cell::figure(s.p50_us));
            row.set("p99_us", Cell::figure(s.p99_us));
            row.set("spread_pct", Cell::maybe(s.spread_pct));
        }
        if lane.timed_calls > 0 {
            let per_call = |t: u64| t as f64 * 1e6 / ticks as f64 / lane.timed_calls as f64;
            row.set("cpu_us_per_call", Cell::figure(per_call(lane.tree_ticks)));
            row.set(
                "gateway_cpu_us_per_call",
                Cell::figure(per_call(lane.gateway_ticks)),
            );
        }
        rows.push(row);
    }
    contender.stop().await;
    (rows, Vec::new())
}
