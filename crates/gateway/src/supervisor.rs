//! The task that keeps one upstream connected, in explicit phases: await demand (a lazy
//! upstream, or one stopped for idleness, waits for a call), connect, serve until the connection
//! ends (reloading lists on change notifications, passing other notifications on, stopping when
//! idle), and back off after a failure. How long to back off, and when failures make a crash
//! loop, is decided by [`CrashLoop`], a pure counter that tests drive with their own clock.
//!
//! The supervisor sees its upstream only through the narrow interface `Upstream` offers it
//! (state changes and the demand signal), and reports to the core through [`UpstreamEvent`]s.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use manifold_upstream::paginate::ListKind;
use manifold_upstream::{
    CallEvent, CallOptions, ConnectOptions, Connection, PeerInfo, ServerRequestHandler, connect,
};
use manifold_wire::meta;
use tokio::sync::watch;

use crate::upstream::{IDLE_CHECK_MAX, RestartPolicy, Upstream, UpstreamEvent};

/// How long a `subscriptions/listen` stream may stay open (it is meant to stay open).
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

const ALL_LISTS: [ListKind; 4] = [
    ListKind::Tools,
    ListKind::Resources,
    ListKind::Templates,
    ListKind::Prompts,
];

/// The lists a `notifications/*/list_changed` asks to reload.
fn lists_changed_by(method: &str) -> Option<&'static [ListKind]> {
    match method {
        "notifications/tools/list_changed" => Some(&[ListKind::Tools]),
        "notifications/prompts/list_changed" => Some(&[ListKind::Prompts]),
        "notifications/resources/list_changed" => Some(&[ListKind::Resources, ListKind::Templates]),
        _ => None,
    }
}

/// The delay before reconnection attempt `failures` (1-based): doubling, capped, with jitter.
pub fn backoff(policy: &RestartPolicy, failures: u32) -> Duration {
    let doubled = policy
        .backoff_base
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let capped = doubled.min(policy.backoff_max);
    // Jitter of up to a fifth, from the clock: spreads restarts of many upstreams apart.
    let nanos = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0),
    );
    let fifth = u64::try_from(capped.as_millis()).unwrap_or(u64::MAX) / 5;
    let jitter = if fifth == 0 { 0 } else { nanos % fifth };
    capped + Duration::from_millis(jitter)
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Try again after [`backoff`] for this many failures in a row.
    BackOff { failures: u32 },
    /// Too many failures too close together: withdraw the upstream's lists and try again after
    /// the policy's crash-loop wait.
    CrashLoop { retry_in: Duration },
}

/// Counts an upstream's failures: in a row (for the backoff) and within the policy's window
/// (for the crash loop). Pure: it reads no clock but the instants it is given.
#[derive(Debug, Clone)]
pub struct CrashLoop {
    policy: RestartPolicy,
    in_a_row: u32,
    recent: VecDeque<Instant>,
}

impl CrashLoop {
    pub fn new(policy: RestartPolicy) -> CrashLoop {
        CrashLoop {
            policy,
            in_a_row: 0,
            recent: VecDeque::new(),
        }
    }

    /// A failure at `now` (a connection that ended, or a start that failed).
    pub fn failed(&mut self, now: Instant) -> AfterFailure {
        self.in_a_row = self.in_a_row.saturating_add(1);
        self.recent.push_back(now);
        while self.recent.len() > self.policy.crash_loop_failures {
            self.recent.pop_front();
        }
        let looping = self.recent.len() == self.policy.crash_loop_failures
            && self.recent.front().is_some_and(|first| {
                now.saturating_duration_since(*first) <= self.policy.crash_loop_window
            });
        if looping {
            self.recent.clear();
            AfterFailure::CrashLoop {
                retry_in: self.policy.crash_loop_retry,
            }
        } else {
            AfterFailure::BackOff {
                failures: self.in_a_row,
            }
        }
    }

    /// A connection came up: the next failure backs off from the start again (failures in the
    /// window still count towards a crash loop).
    pub fn came_up(&mut self) {
        self.in_a_row = 0;
    }

    /// The upstream was stopped for idleness, not for a fault: nothing before counts.
    pub fn forget(&mut self) {
        self.in_a_row = 0;
        self.recent.clear();
    }
}

/// For a modern upstream that announces list changes, opens the `subscriptions/listen` stream the
/// 2026-07-28 revision uses instead of unsolicited notifications.
async fn listen_for_changes(conn: &Connection, info: &PeerInfo) -> Option<manifold_upstream::Call> {
    if info.era != manifold_wire::Era::Modern {
        return None;
    }
    let announces = |cap: &str| {
        manifold_wire::patch::get(&info.capabilities, &[cap, "listChanged"])
            .ok()
            .flatten()
            .is_some_and(|v| v.trim() == "true")
    };
    let params = format!(
        r#"{{"notifications":{{"toolsListChanged":{},"promptsListChanged":{},"resourcesListChanged":{}}}}}"#,
        announces("tools"),
        announces("prompts"),
        announces("resources")
    );
    if !(announces("tools") || announces("prompts") || announces("resources")) {
        return None;
    }
    let options = CallOptions {
        timeout: LISTEN_TIMEOUT,
        reset_on_progress: false,
        max_total: None,
    };
    match conn
        .request("subscriptions/listen", Some(&params), options)
        .await
    {
        Ok(call) => Some(call),
        Err(e) => {
            tracing::debug!(server = %conn.server(), error = %e, "could not listen for list changes");
            None
        }
    }
}

/// How often to look at whether an upstream has been idle for `limit`.
fn idle_check_interval(limit: Duration) -> Duration {
    (limit / 4).clamp(Duration::from_millis(10), IDLE_CHECK_MAX)
}

/// How serving a connection ended.
enum Served {
    /// It closed (crashed, exited, broke the protocol): restart with backoff.
    Closed(String),
    /// It was stopped for idleness: wait for the next call.
    Idle,
    /// Shutdown was asked for.
    Stopped,
}

/// One upstream's supervisor: what its phases share.
struct Supervisor {
    upstream: Arc<Upstream>,
    handler: Arc<dyn ServerRequestHandler>,
    events: tokio::sync::mpsc::UnboundedSender<UpstreamEvent>,
    shutdown: watch::Receiver<bool>,
    crashes: CrashLoop,
}

/// Keeps one upstream connected until shutdown.
pub async fn supervise(
    upstream: Arc<Upstream>,
    handler: Arc<dyn ServerRequestHandler>,
    events: tokio::sync::mpsc::UnboundedSender<UpstreamEvent>,
    shutdown: watch::Receiver<bool>,
) {
    let crashes = CrashLoop::new(upstream.def.restart);
    let mut supervisor = Supervisor {
        upstream,
        handler,
        events,
        shutdown,
        crashes,
    };
    supervisor.run().await;
}

impl Supervisor {
    async fn run(&mut self) {
        if self.upstream.def.lazy && !self.upstream.is_demanded() && !self.await_demand().await {
            return;
        }
        loop {
            if *self.shutdown.borrow() {
                return;
            }
            let (cause, crashed) = match self.connect().await {
                None => return,
                Some(Ok((conn, info))) => match self.serve(&conn, &info).await {
                    Served::Stopped => return,
                    Served::Idle => {
                        if !self.await_demand_after_idle().await {
                            return;
                        }
                        self.crashes.forget();
                        continue;
                    }
                    Served::Closed(cause) => {
                        self.upstream.set_listening(false);
                        self.upstream.count_restart();
                        tracing::warn!(server = %self.upstream.def.name, cause = %cause, "upstream went down; restarting");
                        (cause, true)
                    }
                },
                Some(Err(e)) => {
                    tracing::warn!(server = %self.upstream.def.name, error = %e, "could not start upstream");
                    (e.to_string(), false)
                }
            };
            if !self.back_off(cause, crashed).await {
                return;
            }
        }
    }

    /// Resolves once shutdown is asked for.
    async fn stopped(shutdown: &mut watch::Receiver<bool>) {
        let _ = shutdown.wait_for(|s| *s).await;
    }

    /// Waits for the first call that needs the upstream; `false`: shut down meanwhile.
    async fn await_demand(&mut self) -> bool {
        tokio::select! {
            () = self.upstream.demand_notified() => true,
            () = Self::stopped(&mut self.shutdown) => false,
        }
    }

    /// After an idle stop, waits for a call: a wake-up left over from the first demand is not
    /// one, only a demand that cleared the idle stop counts. `false`: shut down meanwhile.
    async fn await_demand_after_idle(&mut self) -> bool {
        loop {
            if !self.await_demand().await {
                return false;
            }
            if !self.upstream.is_idle_stopped() {
                return true;
            }
        }
    }

    /// Connects and handshakes; `None`: shut down meanwhile.
    async fn connect(
        &mut self,
    ) -> Option<Result<(Connection, PeerInfo), manifold_upstream::UpstreamError>> {
        self.upstream.set_starting();
        let def = &self.upstream.def;
        let mut options = ConnectOptions::new(def.name.clone());
        options.era = def.era;
        options.handler = Arc::clone(&self.handler);
        options.client.capabilities = def.client_capabilities.clone();
        tokio::select! {
            c = connect(&def.target, &options) => Some(c),
            () = Self::stopped(&mut self.shutdown) => None,
        }
    }

    /// Loads the lists, puts the connection in service, and serves it until it ends.
    async fn serve(&mut self, conn: &Connection, info: &PeerInfo) -> Served {
        let upstream = Arc::clone(&self.upstream);
        let name = &upstream.def.name;
        upstream.reload(conn, info, &ALL_LISTS).await;
        upstream.set_up(conn, info);
        self.crashes.came_up();
        tracing::info!(server = %name, era = ?info.era, revision = %info.revision, "upstream is up");
        let _ = self.events.send(UpstreamEvent::CatalogChanged);
        let mut notes = conn.take_notifications();
        let mut listening = listen_for_changes(conn, info).await;
        upstream.set_listening(listening.is_some());
        upstream.touch();
        let idle_limit = upstream.def.idle_limit();
        // An interval, not a sleep per turn: busy notification traffic must not keep postponing
        // the look.
        let mut idle_ticks = idle_limit.map(|limit| {
            let mut t = tokio::time::interval(idle_check_interval(limit));
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        let served = loop {
            let idle_check = async {
                match idle_ticks.as_mut() {
                    Some(t) => {
                        t.tick().await;
                    }
                    None => futures::future::pending().await,
                }
            };
            let note = async {
                match notes.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => futures::future::pending().await,
                }
            };
            let heard = async {
                match listening.as_mut() {
                    Some(call) => match call.next().await {
                        Some(Ok(CallEvent::Notification(n))) => Some(n),
                        // The stream ended or failed: stop listening, keep serving.
                        _ => None,
                    },
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                n = heard => match n {
                    Some(n) => {
                        if let Some(kinds) = lists_changed_by(n.method().unwrap_or_default()) {
                            upstream.reload(conn, info, kinds).await;
                            let _ = self.events.send(UpstreamEvent::CatalogChanged);
                        }
                    }
                    None => {
                        listening = None;
                        upstream.set_listening(false);
                    }
                },
                cause = conn.closed() => break Served::Closed(cause),
                () = idle_check => {
                    if let Some(idle) = idle_limit.and_then(|limit| upstream.take_if_idle(limit)) {
                        drop(listening.take());
                        upstream.set_listening(false);
                        idle.close().await;
                        break Served::Idle;
                    }
                }
                () = Self::stopped(&mut self.shutdown) => {
                    conn.close().await;
                    break Served::Stopped;
                }
                Some(n) = note => {
                    let method = n.method().unwrap_or_default();
                    if let Some(kinds) = lists_changed_by(method) {
                        upstream.reload(conn, info, kinds).await;
                        let _ = self.events.send(UpstreamEvent::CatalogChanged);
                    } else if method != meta::method::PROGRESS {
                        let _ = self.events.send(UpstreamEvent::Notification { server: name.clone(), message: Box::new(n) });
                    }
                }
            }
        };
        if matches!(served, Served::Idle) {
            tracing::info!(server = %name, idle_shutdown = ?idle_limit, "stopped an idle upstream; its next call starts it again");
            let _ = self.events.send(UpstreamEvent::CatalogChanged);
        }
        served
    }

    /// Records the failure and waits before the next attempt; `false`: shut down meanwhile.
    async fn back_off(&mut self, cause: String, crashed: bool) -> bool {
        let upstream = &self.upstream;
        // The status changes once per failure, with the wait already known, so a call refused
        // meanwhile can say when the next attempt is.
        let wait = match self.crashes.failed(Instant::now()) {
            AfterFailure::CrashLoop { retry_in } => {
                tracing::error!(server = %upstream.def.name, cause = %cause, retry_in = ?retry_in, "upstream is in a crash loop; its tools are withdrawn until it is up again");
                upstream.set_crash_loop(cause, crashed, retry_in);
                retry_in
            }
            AfterFailure::BackOff { failures } => {
                let wait = backoff(&upstream.def.restart, failures);
                upstream.set_down(cause, crashed, wait);
                wait
            }
        };
        let _ = self.events.send(UpstreamEvent::CatalogChanged);
        tokio::select! {
            () = tokio::time::sleep(wait) => true,
            () = Self::stopped(&mut self.shutdown) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{RESTART_BACKOFF_BASE, RESTART_BACKOFF_MAX};

    #[test]
    fn backoff_doubles_then_caps_with_bounded_jitter() {
        let p = RestartPolicy::default();
        let first = backoff(&p, 1);
        assert!(first >= RESTART_BACKOFF_BASE && first <= RESTART_BACKOFF_BASE * 6 / 5);
        let third = backoff(&p, 3);
        assert!(third >= RESTART_BACKOFF_BASE * 4 && third <= RESTART_BACKOFF_BASE * 24 / 5);
        let late = backoff(&p, 40);
        assert!(late >= RESTART_BACKOFF_MAX && late <= RESTART_BACKOFF_MAX * 6 / 5);
    }

    #[test]
    fn list_change_notifications_name_the_lists_to_reload() {
        assert_eq!(
            lists_changed_by("notifications/tools/list_changed"),
            Some(&[ListKind::Tools][..])
        );
        assert_eq!(lists_changed_by("notifications/message"), None);
    }

    fn policy() -> RestartPolicy {
        RestartPolicy {
            crash_loop_failures: 3,
            crash_loop_window: Duration::from_secs(60),
            crash_loop_retry: Duration::from_secs(300),
            ..RestartPolicy::default()
        }
    }

    #[test]
    fn failures_in_a_row_back_off_further_until_the_window_holds_a_crash_loop() {
        let t0 = Instant::now();
        let mut crashes = CrashLoop::new(policy());
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(crashes.failed(at(0)), AfterFailure::BackOff { failures: 1 });
        assert_eq!(
            crashes.failed(at(10)),
            AfterFailure::BackOff { failures: 2 }
        );
        assert_eq!(
            crashes.failed(at(20)),
            AfterFailure::CrashLoop {
                retry_in: Duration::from_secs(300)
            }
        );
        // The crash loop starts the window afresh; the backoff keeps counting.
        assert_eq!(
            crashes.failed(at(400)),
            AfterFailure::BackOff { failures: 4 }
        );
    }

    #[test]
    fn failures_spread_wider_than_the_window_never_make_a_crash_loop() {
        let t0 = Instant::now();
        let mut crashes = CrashLoop::new(policy());
        for n in 0..10u64 {
            let verdict = crashes.failed(t0 + Duration::from_secs(31 * n));
            assert!(
                matches!(verdict, AfterFailure::BackOff { .. }),
                "failure {n}: {verdict:?}"
            );
        }
    }

    #[test]
    fn coming_up_restarts_the_backoff_but_not_the_window_and_an_idle_stop_forgets_both() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut crashes = CrashLoop::new(policy());
        crashes.failed(at(0));
        crashes.failed(at(1));
        crashes.came_up();
        // Up again, then down within the window: the backoff starts over, the loop is seen.
        assert_eq!(
            crashes.failed(at(2)),
            AfterFailure::CrashLoop {
                retry_in: Duration::from_secs(300)
            }
        );
        crashes.failed(at(3));
        crashes.failed(at(4));
        crashes.forget();
        assert_eq!(crashes.failed(at(5)), AfterFailure::BackOff { failures: 1 });
        assert_eq!(crashes.failed(at(6)), AfterFailure::BackOff { failures: 2 });
    }
}
