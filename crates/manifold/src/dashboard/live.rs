//! The parts of pages that refresh themselves: an SSE stream per open page, which renders its
//! part every [`LIVE_TICK`] and sends it when it changed (or, for a growing list, sends what is
//! new). A stream ends when its session does (signed out, idle, key revoked) and when the gateway
//! drains, so a graceful shutdown never waits on an open dashboard tab.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;

use super::signin::{Operator, still_valid};
use super::state::DashboardState;

/// How often a live part is rendered again.
pub const LIVE_TICK: Duration = Duration::from_secs(1);

/// Sends what `next` returns each tick, when it returns something.
pub fn stream<F, Fut>(
    state: Arc<DashboardState>,
    operator: Arc<Operator>,
    next: F,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Option<String>> + Send,
{
    let mut ticks = tokio::time::interval(LIVE_TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stream = futures::stream::unfold(
        (ticks, next, state, operator),
        |(mut ticks, mut next, state, operator)| async move {
            loop {
                ticks.tick().await;
                if state.gateway.is_draining() || state.gateway.is_shutting_down() {
                    return None;
                }
                let operator = still_valid(&state, Arc::clone(&operator)).await?;
                if let Some(html) = next().await {
                    let event = Event::default().data(html);
                    return Some((Ok(event), (ticks, next, state, operator)));
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// As [`stream`], for a part rendered whole: sent only when it differs from what was sent last.
pub fn changes<F, Fut>(
    state: Arc<DashboardState>,
    operator: Arc<Operator>,
    mut render: F,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = String> + Send + 'static,
{
    let last = Arc::new(std::sync::Mutex::new(String::new()));
    stream(state, operator, move || {
        let rendered = render();
        let last = Arc::clone(&last);
        async move {
            let now = rendered.await;
            let mut sent = last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *sent == now {
                return None;
            }
            sent.clone_from(&now);
            Some(now)
        }
    })
}
