//! The hand-over from a transport's reader to its connection, without a task between them.
//!
//! A transport reads messages (a stdio child's stdout, an HTTP reply stream) and its connection
//! routes each one: a response settles its call, a notification goes to its call or to the
//! connection's listeners, a server request starts its handler. Routing is a few map lookups and
//! never waits, so once the connection exists the reader routes each message itself: a channel
//! and a routing task in between cost every answer one more task wake-up and hand-off, which on
//! a busy gateway is a measurable share of a forwarded call.
//!
//! A transport starts reading before its connection exists (the connection is built from the
//! transport), so what arrives first is queued, up to [`INBOUND_QUEUE`] messages (a reader that
//! meets a full queue waits for the connection), and routed in order when the connection attaches.
//! When the last sender is dropped the connection is told that the transport stopped, as a
//! closed channel told it before.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::Inbound;

/// How many messages may wait for the connection to attach before a reader waits.
pub const INBOUND_QUEUE: usize = 1024;

/// What routes one message; `false` when nothing more will be taken (the transport closed, or
/// the connection is gone), so later sends fail and the reader stops.
pub type Route = Box<dyn FnMut(Inbound) -> bool + Send>;

/// The receiving side was dropped, or the connection closed: nothing more will be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the connection no longer takes messages from this transport")]
pub struct Gone;

enum State {
    /// No connection yet: messages wait here in order.
    Waiting(VecDeque<Inbound>),
    /// The connection routes each message as it comes.
    Routing(Route),
    /// Nothing more is taken.
    Gone,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes readers waiting on a full queue when the connection attaches or goes.
    attached: Notify,
    senders: AtomicUsize,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A transport's side: hands each message to the connection.
pub struct InboundTx {
    shared: Arc<Shared>,
}

/// The connection's side: attaches the route once the connection exists.
pub struct InboundRx {
    shared: Arc<Shared>,
}

/// A linked pair; messages sent before [`InboundRx::attach`] wait in order.
pub fn inbound_channel() -> (InboundTx, InboundRx) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::Waiting(VecDeque::new())),
        attached: Notify::new(),
        senders: AtomicUsize::new(1),
    });
    (
        InboundTx {
            shared: Arc::clone(&shared),
        },
        InboundRx { shared },
    )
}

impl InboundTx {
    /// Hands `item` to the connection (routing it here, on the reader's task, once attached).
    pub async fn send(&self, item: Inbound) -> Result<(), Gone> {
        let mut item = Some(item);
        loop {
            let notified = self.shared.attached.notified();
            {
                let mut state = lock(&self.shared.state);
                match &mut *state {
                    State::Gone => return Err(Gone),
                    State::Routing(route) => {
                        let more = item.take().is_some_and(route);
                        if !more {
                            *state = State::Gone;
                        }
                        return Ok(());
                    }
                    State::Waiting(queue) if queue.len() < INBOUND_QUEUE => {
                        if let Some(i) = item.take() {
                            queue.push_back(i);
                        }
                        return Ok(());
                    }
                    State::Waiting(_) => {}
                }
            }
            notified.await;
        }
    }
}

impl Clone for InboundTx {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        InboundTx {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for InboundTx {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // The last sender: the transport has stopped handing anything up.
        let mut state = lock(&self.shared.state);
        match &mut *state {
            State::Routing(route) => {
                route(Inbound::Closed {
                    cause: "the transport stopped".to_owned(),
                });
                *state = State::Gone;
            }
            State::Waiting(queue) => queue.push_back(Inbound::Closed {
                cause: "the transport stopped".to_owned(),
            }),
            State::Gone => {}
        }
    }
}

impl InboundRx {
    /// Routes what waited, in order, then every later message as it is sent.
    pub fn attach(self, mut route: Route) {
        let mut state = lock(&self.shared.state);
        let waiting = match std::mem::replace(&mut *state, State::Gone) {
            State::Waiting(queue) => queue,
            State::Routing(_) | State::Gone => VecDeque::new(),
        };
        let mut open = true;
        for item in waiting {
            if open {
                open = route(item);
            }
        }
        if open {
            *state = State::Routing(route);
        }
        drop(state);
        self.shared.attached.notify_waiters();
    }
}

impl Drop for InboundRx {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        if matches!(*state, State::Waiting(_)) {
            // Never attached: nobody will take anything.
            *state = State::Gone;
            drop(state);
            self.shared.attached.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests;
