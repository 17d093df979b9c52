//! Calls in flight, counted, so that a graceful shutdown can let them finish.
//!
//! Every downstream transport runs its calls through one place (`manifold_server::session::
//! run_call`), which holds a [`CallGuard`] for as long as the call runs and gives up on it when
//! the shutdown deadline cuts it off. The gateway owns the count because it is the one thing
//! every transport shares; the HTTP server reads `Gateway::is_draining` to refuse new work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::events::GatewayEvent;

/// How long calls that were cut off at the deadline get to deliver their error before the
/// drain reports them.
pub const CUT_OFF_SETTLE: Duration = Duration::from_secs(2);
/// The logger name of Manifold's own log lines to clients.
pub const LOGGER: &str = "manifold";

/// The count of calls in flight and the drain's state.
pub struct CallTracker {
    count: watch::Sender<usize>,
    draining: AtomicBool,
    /// The drain deadline, for the messages that name it.
    deadline: Mutex<Option<Duration>>,
    /// Fires when the drain deadline passes: calls still running give up.
    cut_off: CancellationToken,
}

impl Default for CallTracker {
    fn default() -> Self {
        CallTracker {
            count: watch::Sender::new(0),
            draining: AtomicBool::new(false),
            deadline: Mutex::new(None),
            cut_off: CancellationToken::new(),
        }
    }
}

/// Held while a call runs; dropping it counts the call as settled.
pub struct CallGuard {
    calls: Arc<CallTracker>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.calls.count.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// What a drain saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Calls in flight when the drain began.
    pub in_flight_at_start: usize,
    /// Calls still running when the deadline passed, which were cancelled with an error.
    pub cut_off: usize,
}

impl CallTracker {
    /// Counts a call as in flight until the guard is dropped.
    pub fn track_call(self: &Arc<Self>) -> CallGuard {
        self.count.send_modify(|n| *n += 1);
        CallGuard {
            calls: Arc::clone(self),
        }
    }

    /// Calls in flight now.
    pub fn calls_in_flight(&self) -> usize {
        *self.count.borrow()
    }

    /// Whether a drain has begun: new work is refused from then on.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Fires when the drain deadline passes; a call still running then gives up with
    /// [`CallTracker::cut_off_message`].
    pub fn shutdown_cut_off(&self) -> CancellationToken {
        self.cut_off.clone()
    }

    /// Why a call was cancelled at the drain deadline, for its client.
    pub fn cut_off_message(&self) -> String {
        let deadline = self.deadline.lock().map(|d| *d).unwrap_or(None);
        match deadline {
            Some(d) => format!(
                "Manifold is shutting down: this request was still running when the {} drain deadline passed, so Manifold cancelled it (its server was told); retry it once Manifold is back",
                seconds(d)
            ),
            None => "Manifold is shutting down: this request was cancelled (its server was told); retry it once Manifold is back".to_owned(),
        }
    }

    /// Why new work is refused during a drain, for its client.
    pub fn draining_message(&self) -> String {
        "Manifold is shutting down and takes no new requests; calls already running may finish. Retry against another instance, or once Manifold is back".to_owned()
    }

    /// Begins a drain: refuses new work from now on, tells legacy sessions (a warning log line
    /// on their streams), waits up to `deadline` for calls in flight, then cancels the rest,
    /// which answer with [`CallTracker::cut_off_message`].
    pub async fn drain(
        &self,
        deadline: Duration,
        events: &broadcast::Sender<GatewayEvent>,
    ) -> DrainReport {
        let calls = self;
        if let Ok(mut d) = calls.deadline.lock() {
            *d = Some(deadline);
        }
        calls.draining.store(true, Ordering::Release);
        let in_flight_at_start = self.calls_in_flight();
        let notice = format!(
            "Manifold is shutting down: calls already running have up to {} to finish, new requests are refused",
            seconds(deadline)
        );
        let _ = events.send(GatewayEvent::Log {
            server: LOGGER.to_owned(),
            params: serde_json::json!({"level": "warning", "logger": LOGGER, "data": notice})
                .to_string(),
        });
        let mut count = calls.count.subscribe();
        let finished = tokio::time::timeout(deadline, count.wait_for(|n| *n == 0))
            .await
            .is_ok();
        if finished {
            return DrainReport {
                in_flight_at_start,
                cut_off: 0,
            };
        }
        let cut_off = *count.borrow();
        calls.cut_off.cancel();
        let _ = tokio::time::timeout(CUT_OFF_SETTLE, count.wait_for(|n| *n == 0)).await;
        DrainReport {
            in_flight_at_start,
            cut_off,
        }
    }
}

/// "10s", "1.5s".
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Gateway, GatewaySettings};

    #[tokio::test]
    async fn a_drain_waits_for_calls_and_cuts_off_the_ones_that_outlive_it() {
        let g = Gateway::start(GatewaySettings::default(), Vec::new());
        let mut events = g.events();
        let quick = g.track_call();
        let slow = g.track_call();
        assert_eq!(g.calls_in_flight(), 2);
        let cut_off = g.shutdown_cut_off();
        let waiter = {
            let g = g.clone();
            tokio::spawn(async move { g.drain(Duration::from_millis(200)).await })
        };
        tokio::task::yield_now().await;
        drop(quick);
        // The slow call gives up only when told to, as run_call does.
        cut_off.cancelled().await;
        drop(slow);
        let report = waiter.await.unwrap();
        assert_eq!(
            report,
            DrainReport {
                in_flight_at_start: 2,
                cut_off: 1
            }
        );
        assert!(g.is_draining());
        assert!(g.cut_off_message().contains("0.2s drain deadline"));
        match events.recv().await.unwrap() {
            GatewayEvent::Log { server, params } => {
                assert_eq!(server, LOGGER);
                assert!(params.contains("\"level\":\"warning\""), "{params}");
                assert!(params.contains("Manifold is shutting down"), "{params}");
            }
            other => panic!("expected the shutdown notice, got {other:?}"),
        }
        g.shutdown().await;
    }

    #[tokio::test]
    async fn a_drain_with_nothing_in_flight_cuts_off_nothing() {
        let g = Gateway::start(GatewaySettings::default(), Vec::new());
        let report = g.drain(Duration::from_secs(30)).await;
        assert_eq!(
            report,
            DrainReport {
                in_flight_at_start: 0,
                cut_off: 0
            }
        );
        assert!(!g.shutdown_cut_off().is_cancelled());
        g.shutdown().await;
    }
}
