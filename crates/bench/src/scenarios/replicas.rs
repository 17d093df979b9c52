//! Why: issue 18 asks what running Manifold as several replicas behind a load balancer gives and
//! costs: calls/s, p50 and p99 through HAProxy with one replica and with three, and what the
//! features replicas share (the PostgreSQL store with the session key, the audit trail on it,
//! rate limits, the approvals rules) cost one replica against a single gateway without
//! PostgreSQL. Every lane (a route to a set of Manifold processes) is up at once and the lanes
//! take turns round by round, as the contenders of the other scenarios do, so machine noise falls
//! on all of them alike. CPU is read per process from the kernel for the gateways, HAProxy,
//! PostgreSQL and the client, and machine-wide, so the tables can say where the time went and
//! what one replica could serve with a core of its own.

use std::time::Duration;

use crate::client::{Endpoint, Era};
use crate::contenders::{Contender, Launcher, toml_string};
use crate::haproxy::{self, Frontend, Haproxy};
use crate::load::{BatchOutcome, Caller, open_callers, run_concurrently};
use crate::machine::version_of;
use crate::process_metrics::{
    clock_ticks_per_second, cpu_ticks, machine_busy_ticks, tree_cpu_ticks,
};
use crate::report::{Cell, Column, Row, column};
use crate::scenarios::audit::{
    change_pct, drained_counts, read_metrics, start_postgres, stop_postgres,
};
use crate::scenarios::{Plan, SMALL_MESSAGE, rotation};
use crate::stats::{Samples, median, spread_pct};
use crate::throwaway_postgres::ThrowawayPostgres;

/// Concurrent clients of each level, each with its own legacy session and connection.
pub const LEVELS: [usize; 2] = [16, 64];
/// Parallel session opens while preparing a lane.
const OPEN_PARALLEL: usize = 32;
/// The contender name of every row: each lane is Manifold.
const CONTENDER: &str = "manifold";
/// The key every PostgreSQL-backed gateway seals legacy sessions with (64 hex digits), so a
/// session opened on one replica goes on on another. Made up for the benchmark.
const SESSION_KEY: &str = "6d616e69666f6c642d62656e63683a207265706c696361732073686172652121";
/// Limits no lane comes near: the bucket is consulted on every call and never refuses.
const NEVER_REFUSING_LIMIT: &str = "{ rate = \"1000000/second\", burst = 1000000 }";
/// The exposed name the ask rule covers: the echo server offers no such tool, so every call is
/// judged against the rule and goes on.
const UNMATCHED_TOOL: &str = "echo__never_called";

/// How one Manifold process is configured, each adding to the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// SQLite in its data dir, audit off, no rate limits, no rules, no session key: one gateway
    /// without anything replicas share.
    Baseline,
    /// The PostgreSQL store and the shared session key; audit off.
    Store,
    /// The audit trail on, best effort, on the PostgreSQL store.
    Audit,
    /// Rate limits that never refuse and an ask rule that does not cover the called tool: a
    /// replica as issue 18 deploys it.
    Replica,
}

impl Setup {
    fn slug(self) -> &'static str {
        match self {
            Setup::Baseline => "baseline",
            Setup::Store => "store",
            Setup::Audit => "audit",
            Setup::Replica => "replica",
        }
    }

    fn uses_postgres(self) -> bool {
        self != Setup::Baseline
    }

    fn writes_audit_rows(self) -> bool {
        matches!(self, Setup::Audit | Setup::Replica)
    }

    /// What goes inside `[gateway]`.
    pub fn gateway_lines(self) -> String {
        if self.uses_postgres() {
            format!("session_key = \"{SESSION_KEY}\"\n")
        } else {
            String::new()
        }
    }

    /// What is appended to Manifold's generated configuration; every setup but the baseline
    /// needs the throwaway PostgreSQL's URL.
    pub fn config(self, postgres_url: Option<&str>) -> Result<String, String> {
        if self == Setup::Baseline {
            return Ok("\n[audit]\nenabled = false\n".to_owned());
        }
        let url = postgres_url.ok_or("no PostgreSQL to use as the store".to_owned())?;
        let store = format!("\n[store]\nurl = {}\n", toml_string(url));
        Ok(match self {
            Setup::Baseline | Setup::Store => format!("{store}\n[audit]\nenabled = false\n"),
            Setup::Audit => format!("{store}\n[audit]\nenabled = true\nmode = \"best_effort\"\n"),
            Setup::Replica => format!(
                "{store}\n[audit]\nenabled = true\nmode = \"best_effort\"\n\n[rate_limits]\nper_identity = {NEVER_REFUSING_LIMIT}\nper_tool = {NEVER_REFUSING_LIMIT}\n\n[[rules]]\nname = \"bench-ask-unmatched\"\neffect = \"ask\"\ntools = [\"{UNMATCHED_TOOL}\"]\n"
            ),
        })
    }
}

/// The Manifold processes of the scenario, in start order.
const GATEWAYS: [(&str, Setup); 6] = [
    ("baseline", Setup::Baseline),
    ("store", Setup::Store),
    ("audit", Setup::Audit),
    ("r0", Setup::Replica),
    ("r1", Setup::Replica),
    ("r2", Setup::Replica),
];
const BASELINE: usize = 0;
const STORE: usize = 1;
const AUDIT: usize = 2;
/// The replica the one-replica lanes use (direct and through HAProxy): one process for both, so
/// the two differ only in the route.
const R0: usize = 3;
const REPLICAS: [usize; 3] = [R0, 4, 5];

/// HAProxy's frontends: a name and the gateways (indexes into [`GATEWAYS`]) it balances over.
const FRONTENDS: [(&str, &[usize]); 3] = [
    ("baseline", &[BASELINE]),
    ("one", &[R0]),
    ("three", &REPLICAS),
];

/// A route from the clients to a set of gateways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneId {
    OneReplica,
    ThreeReplicas,
    BaselineHaproxy,
    BaselineDirect,
    StoreDirect,
    AuditDirect,
    ReplicaDirect,
}

/// Every lane, in table (and first round's) order.
pub const LANES: [LaneId; 7] = [
    LaneId::OneReplica,
    LaneId::ThreeReplicas,
    LaneId::BaselineHaproxy,
    LaneId::BaselineDirect,
    LaneId::StoreDirect,
    LaneId::AuditDirect,
    LaneId::ReplicaDirect,
];

impl LaneId {
    pub fn label(self) -> &'static str {
        match self {
            LaneId::OneReplica => "1 replica, haproxy",
            LaneId::ThreeReplicas => "3 replicas, haproxy",
            LaneId::BaselineHaproxy => "baseline, haproxy",
            LaneId::BaselineDirect => "baseline, direct",
            LaneId::StoreDirect => "+pg store, direct",
            LaneId::AuditDirect => "+audit, direct",
            LaneId::ReplicaDirect => "1 replica, direct",
        }
    }

    /// The lane this one is compared with: what differs between the two is one thing.
    fn reference(self) -> Option<LaneId> {
        match self {
            LaneId::ThreeReplicas => Some(LaneId::OneReplica),
            LaneId::OneReplica => Some(LaneId::BaselineHaproxy),
            LaneId::BaselineHaproxy
            | LaneId::StoreDirect
            | LaneId::AuditDirect
            | LaneId::ReplicaDirect => Some(LaneId::BaselineDirect),
            LaneId::BaselineDirect => None,
        }
    }

    /// The gateways the lane's calls reach.
    fn gateways(self) -> &'static [usize] {
        match self {
            LaneId::OneReplica | LaneId::ReplicaDirect => &[R0],
            LaneId::ThreeReplicas => &REPLICAS,
            LaneId::BaselineHaproxy | LaneId::BaselineDirect => &[BASELINE],
            LaneId::StoreDirect => &[STORE],
            LaneId::AuditDirect => &[AUDIT],
        }
    }

    /// The HAProxy frontend (index into [`FRONTENDS`]) the lane goes through, if any.
    fn frontend(self) -> Option<usize> {
        match self {
            LaneId::BaselineHaproxy => Some(0),
            LaneId::OneReplica => Some(1),
            LaneId::ThreeReplicas => Some(2),
            _ => None,
        }
    }

    fn uses_postgres(self) -> bool {
        self.gateways()
            .iter()
            .any(|g| GATEWAYS.get(*g).is_some_and(|(_, s)| s.uses_postgres()))
    }
}

pub fn columns() -> Vec<Column> {
    vec![
        column("calls", "calls"),
        column("errors", "errors"),
        column("calls_per_s", "calls/s"),
        column("spread_pct", "spread %"),
        column("reference", "vs"),
        column("calls_per_s_vs_pct", "calls/s vs %"),
        column("p50_us", "p50 us"),
        column("p99_us", "p99 us"),
        column("gateway_cpu_us_per_call", "gw cpu us/call"),
        column("core_ceiling_calls_per_s", "gw calls/s per core"),
        column("haproxy_cpu_us_per_call", "haproxy us/call"),
        column("store_cpu_us_per_call", "pg us/call"),
        column("client_cpu_us_per_call", "client us/call"),
        column("machine_cpu_us_per_call", "machine us/call"),
    ]
}

/// A Manifold process of the scenario.
struct Gateway {
    name: &'static str,
    setup: Setup,
    contender: Contender,
}

/// CPU ticks counted over a lane's timed batches.
#[derive(Debug, Default, Clone, Copy)]
struct Ticks {
    gateways: u64,
    haproxy: u64,
    store: u64,
    client: u64,
    machine: u64,
}

/// A reading of every counter a batch is measured with.
struct Reading {
    gateways: Option<u64>,
    haproxy: Option<u64>,
    store: Option<u64>,
    client: Option<u64>,
    machine: Option<u64>,
}

struct Lane {
    id: LaneId,
    /// Process ids of the lane's gateways.
    gateway_pids: Vec<u32>,
    /// Where each gateway's `/metrics` is (the share of calls each replica answered).
    metrics: Vec<Endpoint>,
    callers: Vec<Caller>,
    samples: Samples,
    per_round: Vec<f64>,
    calls: u64,
    ticks: Ticks,
    unreadable: Option<String>,
    /// tools/call requests each of the lane's gateways answered during its timed batches.
    answered: Vec<u64>,
}

impl Lane {
    async fn batch(&mut self, duration: Duration) -> BatchOutcome {
        let callers = std::mem::take(&mut self.callers);
        let (callers, outcome) = run_concurrently(callers, duration).await;
        self.callers = callers;
        outcome
    }

    fn read(&self, haproxy_pid: Option<u32>, store_pid: Option<u32>) -> Reading {
        let gateways = self
            .gateway_pids
            .iter()
            .map(|pid| cpu_ticks(*pid))
            .sum::<Option<u64>>();
        Reading {
            gateways,
            haproxy: haproxy_pid.and_then(cpu_ticks),
            store: store_pid.and_then(tree_cpu_ticks),
            client: cpu_ticks(std::process::id()),
            machine: machine_busy_ticks(),
        }
    }

    fn add_ticks(&mut self, before: &Reading, after: &Reading, haproxy: bool, store: bool) {
        let delta = |b: Option<u64>, a: Option<u64>| match (b, a) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b)),
            _ => None,
        };
        let mut missing = |what: &str| {
            self.unreadable
                .get_or_insert_with(|| format!("the CPU time of {what} could not be read"));
        };
        match delta(before.gateways, after.gateways) {
            Some(t) => self.ticks.gateways += t,
            None => missing("a gateway (/proc/PID/stat)"),
        }
        if haproxy {
            match delta(before.haproxy, after.haproxy) {
                Some(t) => self.ticks.haproxy += t,
                None => missing("HAProxy"),
            }
        }
        if store {
            match delta(before.store, after.store) {
                Some(t) => self.ticks.store += t,
                None => missing("PostgreSQL's processes"),
            }
        }
        match delta(before.client, after.client) {
            Some(t) => self.ticks.client += t,
            None => missing("the benchmark itself"),
        }
        match delta(before.machine, after.machine) {
            Some(t) => self.ticks.machine += t,
            None => missing("the machine (/proc/stat)"),
        }
    }
}

/// How many tools/call requests a gateway has answered, from its `/metrics`.
fn tools_calls_answered(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("manifold_requests_total{") && l.contains("method=\"tools/call\"")
        })
        .filter_map(|l| l.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()))
        .sum()
}

/// Each gateway's answered tools/call count, or why one could not be read.
async fn answered_counts(metrics: &[Endpoint]) -> Result<Vec<u64>, String> {
    let mut counts = Vec::with_capacity(metrics.len());
    for endpoint in metrics {
        let text = read_metrics(endpoint).await?;
        counts.push(tools_calls_answered(&text).round() as u64);
    }
    Ok(counts)
}

/// Every row's case, in report order.
pub fn case_labels() -> Vec<String> {
    let mut labels = Vec::with_capacity(LEVELS.len() * LANES.len());
    for level in LEVELS {
        for lane in LANES {
            labels.push(case_label(level, lane));
        }
    }
    labels
}

/// Every lane's row failed for the same reason.
fn all_failed(why: &str) -> Vec<Row> {
    case_labels()
        .into_iter()
        .map(|case| Row::failed(case, CONTENDER, why.to_owned()))
        .collect()
}

pub fn case_label(level: usize, lane: LaneId) -> String {
    format!("c={level} {}", lane.label())
}

async fn start_gateways(
    launcher: &Launcher,
    postgres: Option<&ThrowawayPostgres>,
) -> Vec<Result<Gateway, String>> {
    let url = postgres.map(ThrowawayPostgres::url);
    let mut gateways = Vec::with_capacity(GATEWAYS.len());
    // One after another: each migrates the shared schema at start.
    for (name, setup) in GATEWAYS {
        gateways.push(start_gateway(launcher, name, setup, url.as_deref()).await);
    }
    gateways
}

async fn start_gateway(
    launcher: &Launcher,
    name: &'static str,
    setup: Setup,
    postgres_url: Option<&str>,
) -> Result<Gateway, String> {
    let extra = setup.config(postgres_url)?;
    let data_dir = launcher.workdir.join(format!("replicas-{name}"));
    let contender = launcher
        .start_manifold_in(&data_dir, &setup.gateway_lines(), &extra)
        .await
        .map_err(|why| format!("{name} ({}) did not start: {why}", setup.slug()))?;
    Ok(Gateway {
        name,
        setup,
        contender,
    })
}

/// `IP:PORT` of a gateway, as HAProxy's backend line names it.
fn backend_address(endpoint: &Endpoint) -> Result<String, String> {
    endpoint
        .url()
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .map(str::to_owned)
        .ok_or_else(|| format!("{} is not an http://IP:PORT URL", endpoint.url()))
}

async fn start_haproxy(
    launcher: &Launcher,
    gateways: &[Result<Gateway, String>],
) -> Result<Haproxy, String> {
    let mut frontends = Vec::with_capacity(FRONTENDS.len());
    for (name, members) in FRONTENDS {
        let mut backends = Vec::with_capacity(members.len());
        for index in members {
            // A gateway that did not start is left out; the lanes through it fail on their own.
            if let Some(Ok(gateway)) = gateways.get(*index) {
                backends.push(backend_address(&gateway.contender.endpoint)?);
            }
        }
        frontends.push(Frontend {
            name: name.to_owned(),
            backends,
        });
    }
    Haproxy::start(&launcher.workdir.join("replicas-haproxy"), &frontends).await
}

/// Opens the lane's sessions on its route, or the row that says why it cannot run.
async fn open_lane(
    level: usize,
    id: LaneId,
    gateways: &[Result<Gateway, String>],
    haproxy: &Result<Haproxy, String>,
) -> Result<Lane, Row> {
    let failed = |why: String| Row::failed(case_label(level, id), CONTENDER, why);
    let mut members = Vec::with_capacity(id.gateways().len());
    for index in id.gateways() {
        match gateways.get(*index) {
            Some(Ok(gateway)) => members.push(gateway),
            Some(Err(why)) => return Err(failed(why.clone())),
            None => return Err(failed(format!("no gateway {index}"))),
        }
    }
    let first = members
        .first()
        .ok_or_else(|| failed("the lane reaches no gateway".to_owned()))?;
    let endpoint = match id.frontend() {
        None => first.contender.endpoint.clone(),
        Some(frontend) => match haproxy {
            Ok(haproxy) => haproxy.endpoint(frontend).map_err(failed)?,
            Err(why) => return Err(failed(format!("HAProxy did not start: {why}"))),
        },
    };
    let callers = open_callers(
        &endpoint,
        Era::Legacy,
        &first.contender.tool,
        SMALL_MESSAGE,
        level,
        OPEN_PARALLEL,
    )
    .await
    .map_err(|(opened, e)| {
        failed(format!(
            "could not open {level} legacy sessions through {} ({} opened): {e}",
            endpoint.url(),
            opened.len()
        ))
    })?;
    Ok(Lane {
        id,
        gateway_pids: members.iter().map(|g| g.contender.gateway_pid()).collect(),
        metrics: members
            .iter()
            .map(|g| g.contender.endpoint.with_path("/metrics"))
            .collect(),
        callers,
        samples: Samples::default(),
        per_round: Vec::new(),
        calls: 0,
        ticks: Ticks::default(),
        unreadable: None,
        answered: vec![0; members.len()],
    })
}

/// Runs the scenario: rows per level in [`LANES`] order, and notes on how it went.
pub async fn measure(launcher: &Launcher, plan: &Plan) -> (Vec<Row>, Vec<String>) {
    let mut notes = Vec::new();
    if !launcher.manifold_has_audit_trail() {
        let why = format!(
            "{} does not accept an [audit] section: this build has no shared store features to measure",
            launcher.manifold.display()
        );
        return (all_failed(&why), notes);
    }
    let postgres = match start_postgres(&launcher.workdir.join("replicas-postgres")).await {
        Ok(server) => server,
        Err(why) => return (all_failed(&format!("no PostgreSQL: {why}")), notes),
    };
    let store_pid = postgres.postmaster_pid();
    notes.push(format!(
        "postgres: {}, one server for every PostgreSQL-backed gateway, started for this run on 127.0.0.1 with its durability defaults; pg us/call = its whole process tree",
        postgres.version()
    ));
    let gateways = start_gateways(launcher, Some(&postgres)).await;
    let haproxy = start_haproxy(launcher, &gateways).await;
    match &haproxy {
        Ok(_) => notes.push(format!(
            "haproxy: {} ({}), balance roundrobin per request over client keep-alive connections, health checks of /readyz every second",
            version_of(&haproxy::binary(), &["-v"]),
            haproxy::binary().display()
        )),
        Err(why) => notes.push(format!("haproxy did not start: {why}")),
    }
    let haproxy_pid = haproxy.as_ref().ok().map(Haproxy::pid);
    let hz = clock_ticks_per_second() as f64;

    let mut rows = Vec::new();
    for level in LEVELS {
        let mut lanes: Vec<Result<Lane, Row>> = Vec::with_capacity(LANES.len());
        for id in LANES {
            lanes.push(open_lane(level, id, &gateways, &haproxy).await);
        }
        // One untimed batch each first: connection pools, the store's first pages, HAProxy's
        // server connections.
        for lane in lanes.iter_mut().flatten() {
            let _ = lane.batch(plan.concurrent_batch).await;
        }
        for round in 0..plan.timed_rounds {
            for index in rotation(round, lanes.len()) {
                let Some(Ok(lane)) = lanes.get_mut(index) else {
                    continue;
                };
                let via_haproxy = lane.id.frontend().is_some();
                let uses_store = lane.id.uses_postgres();
                let counts_shares = lane.metrics.len() > 1;
                let answered_before = if counts_shares {
                    Some(answered_counts(&lane.metrics).await)
                } else {
                    None
                };
                let before = lane.read(
                    haproxy_pid.filter(|_| via_haproxy),
                    store_pid.filter(|_| uses_store),
                );
                let outcome = lane.batch(plan.concurrent_batch).await;
                let after = lane.read(
                    haproxy_pid.filter(|_| via_haproxy),
                    store_pid.filter(|_| uses_store),
                );
                lane.add_ticks(&before, &after, via_haproxy, uses_store);
                if let Some(before) = answered_before {
                    match (before, answered_counts(&lane.metrics).await) {
                        (Ok(before), Ok(after)) => {
                            for ((total, b), a) in lane.answered.iter_mut().zip(before).zip(after) {
                                *total += a.saturating_sub(b);
                            }
                        }
                        (Err(why), _) | (_, Err(why)) => {
                            lane.unreadable.get_or_insert(why);
                        }
                    }
                }
                lane.per_round.push(outcome.calls_per_second());
                lane.calls += outcome.latencies.len() as u64;
                lane.samples
                    .record_errors(outcome.errors, outcome.first_error.clone());
                lane.samples.push_round(outcome.latencies);
            }
        }
        rows.extend(level_rows(level, &lanes, hz, &mut notes));
    }

    notes.extend(audit_notes(&gateways).await);
    for gateway in gateways.into_iter().flatten() {
        gateway.contender.stop().await;
    }
    if let Ok(haproxy) = haproxy {
        haproxy.stop().await;
    }
    stop_postgres(Some(postgres)).await;
    (rows, notes)
}

/// Calls/s of a lane: the median of its rounds.
fn lane_rate(lane: &Lane) -> f64 {
    median(&lane.per_round).unwrap_or(0.0)
}

fn level_rows(
    level: usize,
    lanes: &[Result<Lane, Row>],
    hz: f64,
    notes: &mut Vec<String>,
) -> Vec<Row> {
    let rate_of = |wanted: LaneId| {
        lanes
            .iter()
            .flatten()
            .find(|lane| lane.id == wanted && lane.calls > 0)
            .map(lane_rate)
            .filter(|r| *r > 0.0)
    };
    let mut rows = Vec::with_capacity(lanes.len());
    for lane in lanes {
        let lane = match lane {
            Ok(lane) => lane,
            Err(row) => {
                rows.push(row.clone());
                continue;
            }
        };
        let mut row = Row::new(case_label(level, lane.id), CONTENDER);
        row.set_calls(
            lane.calls,
            lane.samples.errors(),
            lane.samples.first_error(),
        );
        let cps = lane_rate(lane);
        row.set("calls_per_s", Cell::figure(cps));
        row.set("spread_pct", Cell::maybe(spread_pct(&lane.per_round, cps)));
        if let Some(reference) = lane.id.reference() {
            row.set("reference", Cell::Text(reference.label().to_owned()));
            if let Some(base) = rate_of(reference) {
                row.set("calls_per_s_vs_pct", Cell::figure(change_pct(cps, base)));
            }
        }
        if let Some(s) = lane.samples.summary() {
            row.set("p50_us", Cell::figure(s.p50_us));
            row.set("p99_us", Cell::figure(s.p99_us));
        }
        if let Some(why) = &lane.unreadable {
            row.note.get_or_insert_with(|| why.clone());
        } else if lane.calls > 0 {
            let per_call = |ticks: u64| ticks as f64 / hz * 1e6 / lane.calls as f64;
            let gateway = per_call(lane.ticks.gateways);
            row.set("gateway_cpu_us_per_call", Cell::figure(gateway));
            if gateway > 0.0 {
                row.set("core_ceiling_calls_per_s", Cell::figure(1e6 / gateway));
            }
            if lane.id.frontend().is_some() {
                row.set(
                    "haproxy_cpu_us_per_call",
                    Cell::figure(per_call(lane.ticks.haproxy)),
                );
            }
            if lane.id.uses_postgres() {
                row.set(
                    "store_cpu_us_per_call",
                    Cell::figure(per_call(lane.ticks.store)),
                );
            }
            row.set(
                "client_cpu_us_per_call",
                Cell::figure(per_call(lane.ticks.client)),
            );
            row.set(
                "machine_cpu_us_per_call",
                Cell::figure(per_call(lane.ticks.machine)),
            );
        }
        let total: u64 = lane.answered.iter().sum();
        if lane.answered.len() > 1 && total > 0 {
            let shares: Vec<String> = lane
                .answered
                .iter()
                .enumerate()
                .map(|(i, n)| format!("r{i} {n} ({:.0}%)", *n as f64 / total as f64 * 100.0))
                .collect();
            notes.push(format!(
                "{}: tools/call answered per replica during the timed rounds (each replica's /metrics): {}",
                case_label(level, lane.id),
                shares.join(", ")
            ));
        }
        rows.push(row);
    }
    rows
}

/// What each gateway's audit trail wrote and dropped, once its queue drained: a best-effort
/// trail that dropped rows would look cheaper than one that kept them all.
async fn audit_notes(gateways: &[Result<Gateway, String>]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut dropped_any = false;
    for gateway in gateways.iter().flatten() {
        if !gateway.setup.writes_audit_rows() {
            continue;
        }
        match drained_counts(&gateway.contender.endpoint).await {
            Ok((counts, drained)) => {
                dropped_any |= counts.dropped > 0.0;
                parts.push(format!(
                    "{} {} written, {} dropped{}",
                    gateway.name,
                    counts.written,
                    counts.dropped,
                    if drained { "" } else { " (queue not drained)" }
                ));
            }
            Err(why) => parts.push(format!("{} unreadable: {why}", gateway.name)),
        }
    }
    if parts.is_empty() {
        return Vec::new();
    }
    let mut notes = vec![format!(
        "audit rows over the whole scenario (warm-up and session opens included): {}",
        parts.join("; ")
    )];
    if dropped_any {
        notes.push("some best-effort rows were dropped: the rows with a trail measured a trail that did not record every call".to_owned());
    }
    notes
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    const URL: &str = "postgres://postgres@127.0.0.1:5433/postgres";

    #[test]
    fn each_setup_adds_one_shared_feature() {
        let baseline = Setup::Baseline.config(None).unwrap();
        assert!(baseline.contains("enabled = false") && !baseline.contains("[store]"));
        assert!(Setup::Baseline.gateway_lines().is_empty());
        assert!(Setup::Store.config(None).is_err());
        let store = Setup::Store.config(Some(URL)).unwrap();
        assert!(store.contains(&format!("[store]\nurl = \"{URL}\"")));
        assert!(store.contains("enabled = false"));
        assert!(Setup::Store.gateway_lines().contains(SESSION_KEY));
        let audit = Setup::Audit.config(Some(URL)).unwrap();
        assert!(audit.contains("mode = \"best_effort\"") && !audit.contains("[rate_limits]"));
        let replica = Setup::Replica.config(Some(URL)).unwrap();
        assert!(replica.contains("mode = \"best_effort\""));
        assert!(replica.contains("per_identity = { rate = \"1000000/second\""));
        assert!(replica.contains("per_tool = {"));
        assert!(replica.contains("effect = \"ask\"\ntools = [\"echo__never_called\"]"));
        assert_eq!(SESSION_KEY.len(), 64);
        assert!(SESSION_KEY.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn lanes_compare_with_a_lane_that_differs_in_one_thing() {
        assert_eq!(LaneId::ThreeReplicas.reference(), Some(LaneId::OneReplica));
        assert_eq!(LaneId::ThreeReplicas.gateways(), &REPLICAS);
        assert_eq!(
            LaneId::OneReplica.gateways(),
            LaneId::ReplicaDirect.gateways()
        );
        for lane in LANES {
            if let Some(frontend) = lane.frontend() {
                assert_eq!(FRONTENDS[frontend].1, lane.gateways(), "{lane:?}");
            }
            if let Some(reference) = lane.reference() {
                assert!(LANES.contains(&reference));
            }
        }
        assert!(!LaneId::BaselineDirect.uses_postgres());
        assert!(LaneId::StoreDirect.uses_postgres());
        assert!(REPLICAS.iter().all(|g| GATEWAYS[*g].1 == Setup::Replica));
    }

    #[test]
    fn answered_calls_are_summed_over_the_tools_call_samples_only() {
        let text = "manifold_requests_total{method=\"tools/call\",era=\"legacy\",outcome=\"ok\"} 120\n\
manifold_requests_total{method=\"tools/call\",era=\"legacy\",outcome=\"error\"} 3\n\
manifold_requests_total{method=\"initialize\",era=\"legacy\",outcome=\"ok\"} 64\n\
manifold_tool_calls_total{method=\"tools/call\"} 999\n";
        assert!((tools_calls_answered(text) - 123.0).abs() < 1e-9);
    }

    #[test]
    fn a_backend_is_named_by_its_address() {
        let endpoint = Endpoint::parse("http://127.0.0.1:4321/mcp").unwrap();
        assert_eq!(backend_address(&endpoint).unwrap(), "127.0.0.1:4321");
    }
}
