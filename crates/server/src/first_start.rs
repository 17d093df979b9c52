//! How long a stdio client's requests wait for the upstreams' first start.
//!
//! `manifold stdio` is started by its client, which sends `initialize` at once and gives up on a
//! server that does not answer within its own timeout; with a slow upstream (a package fetched
//! by `npx` or `uvx`) behind it, waiting for every first start before answering would make the
//! whole gateway look dead where, direct, only that one server would be. So `initialize` (and
//! `server/discover`) wait only briefly, and the requests that read the catalog or call through
//! it wait for the first start up to a deadline, so that the first `tools/list` still sees every
//! server that starts in time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use manifold_gateway::Gateway;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Bounds on waiting for the upstreams' first start, shared by one connection's requests.
#[derive(Debug)]
pub struct FirstStart {
    /// The longest `initialize` or `server/discover` waits: their capabilities say whether any
    /// upstream offers tasks, which is known once it has started.
    greeting_wait: Duration,
    /// When requests stop waiting, started or not.
    deadline: Instant,
    /// Set once every upstream has started or the deadline has passed: later requests go
    /// straight through.
    settled: AtomicBool,
}

impl FirstStart {
    /// Greetings wait up to `greeting_wait`; other requests until `whole_wait` from now.
    pub fn new(greeting_wait: Duration, whole_wait: Duration) -> Self {
        Self {
            greeting_wait,
            deadline: Instant::now() + whole_wait,
            settled: AtomicBool::new(false),
        }
    }

    /// Nothing waits: the caller has already waited for the first start, or does not want to.
    pub fn settled() -> Self {
        Self {
            greeting_wait: Duration::ZERO,
            deadline: Instant::now(),
            settled: AtomicBool::new(true),
        }
    }

    /// Waits, as a greeting may, for the first start.
    pub(crate) async fn before_greeting(&self, gateway: &Gateway) {
        self.wait(gateway, Some(self.greeting_wait)).await;
    }

    /// Waits, as a request that reads the catalog must, for the first start; `false` when the
    /// request was cancelled meanwhile (by the client, or by its closing the connection), which
    /// then ends unanswered at once rather than holding the connection open until the deadline.
    pub(crate) async fn before_request(
        &self,
        gateway: &Gateway,
        cancel: &CancellationToken,
    ) -> bool {
        tokio::select! {
            () = self.wait(gateway, None) => true,
            () = cancel.cancelled() => false,
        }
    }

    async fn wait(&self, gateway: &Gateway, at_most: Option<Duration>) {
        if self.settled.load(Ordering::Acquire) {
            return;
        }
        let now = Instant::now();
        let left = self.deadline.saturating_duration_since(now);
        let limit = at_most.map_or(left, |m| m.min(left));
        let started = gateway.wait_started(limit).await;
        if started || Instant::now() >= self.deadline {
            self.settled.store(true, Ordering::Release);
        }
    }
}
