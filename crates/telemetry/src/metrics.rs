//! The Prometheus registry Manifold serves at `/metrics`, and the handles its hot paths use.
//!
//! A tool call touches only handles resolved once per (upstream, tool): one read lock and hash
//! lookup, then atomic increments. State that already lives elsewhere (upstream status and
//! restarts, live sessions) is not mirrored on every change: the scraper hands a [`Snapshot`] to
//! [`Metrics::encode`], which writes it into gauges just before encoding.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use manifold_wire::{Era, Revision};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::labels::{self, CallOutcome, RejectReason, RequestOutcome};

/// The `Content-Type` of what [`Metrics::encode`] returns (OpenMetrics text, which Prometheus
/// scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds (seconds) of the tool-call latency histogram: half a millisecond (a call that
/// never left the gateway) to five minutes (the longest sensible `max_timeout`).
pub const CALL_DURATION_BUCKETS: [f64; 18] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0, 300.0,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    era: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCallLabels {
    upstream: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    upstream: String,
    tool: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EgressLabels {
    upstream: String,
    decision: &'static str,
}

/// One decision of a sandboxed server's egress proxy, as `manifold_sandbox_egress_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressDecision {
    Allowed,
    RefusedHost,
    RefusedAddress,
    BadRequest,
    /// An allowed tunnel or forwarded exchange closed after no bytes moved for the idle bound.
    IdleTimeout,
}

impl EgressDecision {
    pub const ALL: [EgressDecision; 5] = [
        EgressDecision::Allowed,
        EgressDecision::RefusedHost,
        EgressDecision::RefusedAddress,
        EgressDecision::BadRequest,
        EgressDecision::IdleTimeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EgressDecision::Allowed => "allowed",
            EgressDecision::RefusedHost => "refused_host",
            EgressDecision::RefusedAddress => "refused_address",
            EgressDecision::BadRequest => "bad_request",
            EgressDecision::IdleTimeout => "idle_timeout",
        }
    }
}

/// The egress proxies run inside upstream transports, which hold no `Metrics`; they count into
/// this one process-wide family, which every `Metrics` registry exposes (a family clone shares
/// its series).
fn egress_family() -> &'static Family<EgressLabels, Counter> {
    static FAMILY: OnceLock<Family<EgressLabels, Counter>> = OnceLock::new();
    FAMILY.get_or_init(Family::default)
}

/// Counts one egress decision for `upstream` (a configured server name, so the labels stay bounded).
pub fn count_egress(upstream: &str, decision: EgressDecision) {
    egress_family()
        .get_or_create(&EgressLabels {
            upstream: upstream.to_owned(),
            decision: decision.as_str(),
        })
        .inc();
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApprovalLabels {
    upstream: String,
    channel: &'static str,
    outcome: &'static str,
}

/// The approval stage runs inside the gateway's call path, which holds no `Metrics`; like egress
/// decisions, its outcomes count into one process-wide family every registry exposes.
fn approval_family() -> &'static Family<ApprovalLabels, Counter> {
    static FAMILY: OnceLock<Family<ApprovalLabels, Counter>> = OnceLock::new();
    FAMILY.get_or_init(Family::default)
}

/// Counts how one approval question ended: `channel` is `elicitation`, `input_required`,
/// `out_of_band` or `none`; `outcome` is `approved`, `rejected`, `timed_out`, `cancelled` or
/// `not_configured` (static names, and a configured server name, so the labels stay bounded).
pub fn count_approval(upstream: &str, channel: &'static str, outcome: &'static str) {
    approval_family()
        .get_or_create(&ApprovalLabels {
            upstream: upstream.to_owned(),
            channel,
            outcome,
        })
        .inc();
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamStateLabels {
    upstream: String,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SandboxLabels {
    upstream: String,
    control: &'static str,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    transport: &'static str,
    era: &'static str,
    revision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuditRowLabels {
    result: &'static str,
}

/// Upper bounds (seconds) of the audit batch write histogram: a tenth of a millisecond (a small
/// batch on SQLite in memory) to ten seconds (a store that hangs until its acquire timeout).
pub const AUDIT_WRITE_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
];

/// The audit writer's metrics: clones share their values with the registry.
#[derive(Debug, Clone)]
pub struct AuditMetrics {
    queue_depth: Gauge,
    write: Histogram,
    written: Counter,
    dropped: Counter,
}

impl AuditMetrics {
    /// The audit queue's depth now.
    pub fn queue_depth(&self, rows: usize) {
        self.queue_depth
            .set(i64::try_from(rows).unwrap_or(i64::MAX));
    }

    /// One batch of `rows` audit rows written in `took`.
    pub fn batch_written(&self, rows: usize, took: Duration) {
        self.write.observe(took.as_secs_f64());
        self.written.inc_by(u64::try_from(rows).unwrap_or(u64::MAX));
    }

    /// `rows` audit rows dropped (best effort).
    pub fn dropped(&self, rows: u64) {
        self.dropped.inc_by(rows);
    }
}

type DurationFamily = Family<ToolLabels, Histogram, fn() -> Histogram>;
type TimestampGauge = Gauge<f64, AtomicU64>;

fn call_histogram() -> Histogram {
    Histogram::new(CALL_DURATION_BUCKETS)
}

/// Where an upstream stands, as the scraper reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamState {
    Idle,
    Starting,
    Up,
    Down,
    CrashLoop,
}

impl UpstreamState {
    pub const ALL: [UpstreamState; 5] = [
        UpstreamState::Idle,
        UpstreamState::Starting,
        UpstreamState::Up,
        UpstreamState::Down,
        UpstreamState::CrashLoop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamState::Idle => "idle",
            UpstreamState::Starting => "starting",
            UpstreamState::Up => "up",
            UpstreamState::Down => "down",
            UpstreamState::CrashLoop => "crash_loop",
        }
    }
}

/// One upstream at scrape time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSnapshot {
    pub name: String,
    pub state: UpstreamState,
    /// Times its connection went down and was restarted.
    pub restarts: u32,
    /// How long the current connection has been up, while it is.
    pub up_for: Option<Duration>,
    /// Each sandbox control of the running process; empty when it is not sandboxed or not
    /// running.
    pub sandbox: Vec<SandboxControlSnapshot>,
}

/// One sandbox control of a running upstream, as `manifold_sandbox_enforced` shows it. Both are
/// names from fixed sets (the sandbox's controls and states), so the labels stay bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxControlSnapshot {
    /// `namespaces`, `filesystem`, `network`, ...
    pub control: &'static str,
    /// `enforced`, `partial`, `missing` or `off`.
    pub state: &'static str,
}

/// The live sessions of one transport and revision at scrape time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCount {
    /// `streamable_http` or `sse`.
    pub transport: &'static str,
    pub revision: Revision,
    pub count: usize,
}

/// What the scraper reads from the gateway and the server just before encoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub upstreams: Vec<UpstreamSnapshot>,
    pub sessions: Vec<SessionCount>,
}

/// The handles of one (upstream, tool) label pair, resolved once.
pub struct ToolHandles {
    upstream: String,
    tool: String,
    family: Family<ToolCallLabels, Counter>,
    /// One counter per [`CallOutcome`], created on first use so unused outcomes add no series.
    calls: [OnceLock<Counter>; CallOutcome::ALL.len()],
    duration: Histogram,
    in_flight: Gauge,
}

impl ToolHandles {
    /// The tool label these handles count under (the name, or [`labels::OTHER_TOOL`]).
    pub fn tool_label(&self) -> &str {
        &self.tool
    }

    /// A call began: counted in flight until [`ToolHandles::call_finished`].
    pub fn call_started(&self) {
        self.in_flight.inc();
    }

    /// A call ended: no longer in flight, counted by outcome, its duration observed.
    pub fn call_finished(&self, outcome: CallOutcome, elapsed: Duration) {
        self.in_flight.dec();
        if let Some(slot) = self.calls.get(outcome.index()) {
            slot.get_or_init(|| {
                self.family.get_or_create_owned(&ToolCallLabels {
                    upstream: self.upstream.clone(),
                    tool: self.tool.clone(),
                    outcome: outcome.as_str(),
                })
            })
            .inc();
        }
        self.duration.observe(elapsed.as_secs_f64());
    }
}

#[derive(Default)]
struct UpstreamTools {
    by_name: HashMap<String, Arc<ToolHandles>>,
    overflow: Option<Arc<ToolHandles>>,
}

/// Manifold's metrics. One per process (or per test); share it in an `Arc`.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    tool_calls: Family<ToolCallLabels, Counter>,
    tool_duration: DurationFamily,
    in_flight: Family<UpstreamLabels, Gauge>,
    sessions: Family<SessionLabels, Gauge>,
    upstream_state: Family<UpstreamStateLabels, Gauge>,
    sandbox_enforced: Family<SandboxLabels, Gauge>,
    upstream_restarts: Family<UpstreamLabels, Counter>,
    upstream_last_restart: Family<UpstreamLabels, TimestampGauge>,
    tool_call_retries: Family<UpstreamLabels, Counter>,
    result_cache_hits: Family<UpstreamLabels, Counter>,
    bytes_in: Counter,
    bytes_out: Counter,
    rejected: Vec<Counter>,
    audit: AuditMetrics,
    tools: RwLock<HashMap<String, UpstreamTools>>,
    /// When each upstream last came back after a restart, as last seen by a scrape.
    last_restart_seen: Mutex<HashMap<String, f64>>,
    /// Scrapes write the snapshot gauges and then encode: one at a time.
    scrape: Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    /// A fresh registry with every Manifold metric registered.
    #[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "manifold_requests",
            "MCP requests answered or cancelled, by method (known MCP methods, else \"other\"), protocol era and outcome",
            requests.clone(),
        );
        let tool_calls = Family::<ToolCallLabels, Counter>::default();
        registry.register(
            "manifold_tool_calls",
            "tools/call requests by upstream, tool and outcome",
            tool_calls.clone(),
        );
        let tool_duration: DurationFamily = Family::new_with_constructor(call_histogram);
        registry.register(
            "manifold_tool_call_duration_seconds",
            "Time from a tools/call request to its answer, by upstream and tool",
            tool_duration.clone(),
        );
        let in_flight = Family::<UpstreamLabels, Gauge>::default();
        registry.register(
            "manifold_tool_calls_in_flight",
            "Tool calls started and not yet answered, by upstream",
            in_flight.clone(),
        );
        let sessions = Family::<SessionLabels, Gauge>::default();
        registry.register(
            "manifold_sessions",
            "Legacy-era client sessions live on this replica, by transport, era and revision",
            sessions.clone(),
        );
        let upstream_state = Family::<UpstreamStateLabels, Gauge>::default();
        registry.register(
            "manifold_upstream_state",
            "1 for the state each upstream is in, 0 for the others",
            upstream_state.clone(),
        );
        let sandbox_enforced = Family::<SandboxLabels, Gauge>::default();
        registry.register(
            "manifold_sandbox_enforced",
            "1 when a running sandboxed upstream's control is enforced, 0 when it is partial, missing or off (the state label says which)",
            sandbox_enforced.clone(),
        );
        let upstream_restarts = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "manifold_upstream_restarts",
            "Times an upstream's connection went down and was restarted",
            upstream_restarts.clone(),
        );
        let upstream_last_restart = Family::<UpstreamLabels, TimestampGauge>::default();
        registry.register(
            "manifold_upstream_last_restart_timestamp_seconds",
            "Unix time at which an upstream last came back up after a restart",
            upstream_last_restart.clone(),
        );
        let tool_call_retries = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "manifold_tool_call_retries",
            "Idempotent tool calls tried again after their upstream died, refused or timed out, by upstream",
            tool_call_retries.clone(),
        );
        let result_cache_hits = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "manifold_result_cache_hits",
            "Tool calls answered from the result cache (cache_ttl) without their upstream, by upstream",
            result_cache_hits.clone(),
        );
        let bytes = Family::<DirectionLabels, Counter>::default();
        registry.register(
            "manifold_http_bytes",
            "HTTP body bytes received from (in) and sent to (out) clients",
            bytes.clone(),
        );
        let bytes_in = bytes.get_or_create_owned(&DirectionLabels { direction: "in" });
        let bytes_out = bytes.get_or_create_owned(&DirectionLabels { direction: "out" });
        let rejected_family = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "manifold_rejected_requests",
            "HTTP requests refused before they reached the gateway, by reason",
            rejected_family.clone(),
        );
        let rejected = RejectReason::ALL
            .iter()
            .map(|r| rejected_family.get_or_create_owned(&ReasonLabels { reason: r.as_str() }))
            .collect();
        let audit_queue_depth = Gauge::default();
        registry.register(
            "manifold_audit_queue_depth",
            "Audit rows queued and not yet written to the store",
            audit_queue_depth.clone(),
        );
        let audit_write = Histogram::new(AUDIT_WRITE_BUCKETS);
        registry.register(
            "manifold_audit_write_seconds",
            "Time to write one batch of audit rows to the store",
            audit_write.clone(),
        );
        let audit_rows = Family::<AuditRowLabels, Counter>::default();
        registry.register(
            "manifold_audit_rows",
            "Audit rows written to the store, and dropped (best_effort mode, queue full or store failing)",
            audit_rows.clone(),
        );
        registry.register(
            "manifold_sandbox_egress",
            "Requests from sandboxed servers to their egress proxy, by upstream and decision (allowed, refused_host, refused_address, bad_request, idle_timeout)",
            egress_family().clone(),
        );
        registry.register(
            "manifold_approvals",
            "Approval questions of ask rules, by upstream, channel (elicitation, input_required, out_of_band, none) and outcome (approved, rejected, timed_out, cancelled, not_configured)",
            approval_family().clone(),
        );
        let audit = AuditMetrics {
            queue_depth: audit_queue_depth,
            write: audit_write,
            written: audit_rows.get_or_create_owned(&AuditRowLabels { result: "written" }),
            dropped: audit_rows.get_or_create_owned(&AuditRowLabels { result: "dropped" }),
        };
        Metrics {
            registry,
            requests,
            tool_calls,
            tool_duration,
            in_flight,
            sessions,
            upstream_state,
            sandbox_enforced,
            upstream_restarts,
            upstream_last_restart,
            tool_call_retries,
            result_cache_hits,
            bytes_in,
            bytes_out,
            rejected,
            audit,
            tools: RwLock::new(HashMap::new()),
            last_restart_seen: Mutex::new(HashMap::new()),
            scrape: Mutex::new(()),
        }
    }

    /// The audit trail's handles, for its writer (which lives outside this crate).
    pub fn audit(&self) -> AuditMetrics {
        self.audit.clone()
    }

    /// Counts one retry of an idempotent tool call to `upstream` (a configured name: bounded).
    pub fn retried(&self, upstream: &str) {
        self.tool_call_retries
            .get_or_create(&UpstreamLabels {
                upstream: upstream.to_owned(),
            })
            .inc();
    }

    /// Counts one tool call answered from the result cache (`upstream`: a configured name).
    pub fn result_cache_hit(&self, upstream: &str) {
        self.result_cache_hits
            .get_or_create(&UpstreamLabels {
                upstream: upstream.to_owned(),
            })
            .inc();
    }

    /// Counts one request by method, era and outcome.
    pub fn request(&self, method: &str, era: Era, outcome: RequestOutcome) {
        self.requests
            .get_or_create(&RequestLabels {
                method: labels::method(method),
                era: labels::era(era),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// Counts one refused HTTP request.
    pub fn rejected(&self, reason: RejectReason) {
        if let Some(c) = self.rejected.get(reason.index()) {
            c.inc();
        }
    }

    /// Counts body bytes received from clients.
    pub fn bytes_in(&self, n: u64) {
        self.bytes_in.inc_by(n);
    }

    /// Counts body bytes sent to clients.
    pub fn bytes_out(&self, n: u64) {
        self.bytes_out.inc_by(n);
    }

    /// The handles of a tool call's labels. The first [`labels::MAX_TOOL_LABELS_PER_UPSTREAM`]
    /// distinct names of an upstream get their own; later ones (and names too long for a label)
    /// share [`labels::OTHER_TOOL`].
    pub fn tool(&self, upstream: &str, tool: &str) -> Arc<ToolHandles> {
        let usable = labels::usable_tool_name(tool);
        {
            let tools = read(&self.tools);
            if let Some(per) = tools.get(upstream) {
                if usable && let Some(h) = per.by_name.get(tool) {
                    return Arc::clone(h);
                }
                let full = per.by_name.len() >= labels::MAX_TOOL_LABELS_PER_UPSTREAM;
                if (full || !usable)
                    && let Some(h) = &per.overflow
                {
                    return Arc::clone(h);
                }
            }
        }
        let mut tools = write(&self.tools);
        let per = tools.entry(upstream.to_owned()).or_default();
        if usable && let Some(h) = per.by_name.get(tool) {
            return Arc::clone(h);
        }
        if !usable || per.by_name.len() >= labels::MAX_TOOL_LABELS_PER_UPSTREAM {
            if let Some(h) = &per.overflow {
                return Arc::clone(h);
            }
            let h = Arc::new(self.handles(upstream, labels::OTHER_TOOL));
            per.overflow = Some(Arc::clone(&h));
            return h;
        }
        let h = Arc::new(self.handles(upstream, tool));
        per.by_name.insert(tool.to_owned(), Arc::clone(&h));
        h
    }

    fn handles(&self, upstream: &str, tool: &str) -> ToolHandles {
        let labels = ToolLabels {
            upstream: upstream.to_owned(),
            tool: tool.to_owned(),
        };
        ToolHandles {
            upstream: upstream.to_owned(),
            tool: tool.to_owned(),
            family: self.tool_calls.clone(),
            calls: Default::default(),
            duration: self.tool_duration.get_or_create_owned(&labels),
            in_flight: self.in_flight.get_or_create_owned(&UpstreamLabels {
                upstream: upstream.to_owned(),
            }),
        }
    }

    /// Writes the snapshot into the state gauges and encodes every metric (OpenMetrics text,
    /// [`CONTENT_TYPE`]).
    pub fn encode(&self, snapshot: &Snapshot) -> String {
        let _one_at_a_time = lock(&self.scrape);
        self.write_snapshot(snapshot);
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "could not encode the metrics");
        }
        out
    }

    fn write_snapshot(&self, snapshot: &Snapshot) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        // Upstreams may have been removed (hot reload): rebuilt from the snapshot each time.
        self.upstream_state.clear();
        self.sandbox_enforced.clear();
        self.upstream_restarts.clear();
        self.upstream_last_restart.clear();
        let mut seen = lock(&self.last_restart_seen);
        seen.retain(|name, _| snapshot.upstreams.iter().any(|u| &u.name == name));
        for u in &snapshot.upstreams {
            for state in UpstreamState::ALL {
                self.upstream_state
                    .get_or_create(&UpstreamStateLabels {
                        upstream: u.name.clone(),
                        state: state.as_str(),
                    })
                    .set(i64::from(state == u.state));
            }
            for c in &u.sandbox {
                self.sandbox_enforced
                    .get_or_create(&SandboxLabels {
                        upstream: u.name.clone(),
                        control: c.control,
                        state: c.state,
                    })
                    .set(i64::from(c.state == "enforced"));
            }
            let labels = UpstreamLabels {
                upstream: u.name.clone(),
            };
            self.upstream_restarts
                .get_or_create(&labels)
                .inc_by(u64::from(u.restarts));
            if u.restarts > 0
                && let Some(up_for) = u.up_for
            {
                seen.insert(u.name.clone(), now - up_for.as_secs_f64());
            }
            if let Some(at) = seen.get(&u.name) {
                self.upstream_last_restart.get_or_create(&labels).set(*at);
            }
        }
        self.sessions.clear();
        for s in &snapshot.sessions {
            let gauge = self.sessions.get_or_create(&SessionLabels {
                transport: s.transport,
                era: labels::era(s.revision.era()),
                revision: labels::revision(s.revision),
            });
            gauge.inc_by(i64::try_from(s.count).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests;
