//! Every bound of the downstream transports, as a named constant, and the `Limits` that carry them.
//!
//! The constants are the defaults; `Limits` exists so a test (or an operator with unusual clients)
//! can shrink or widen one bound without touching the others. Each bound has a test that hits it.

use std::time::Duration;

/// Largest HTTP request body (413 past it): the same as the longest stdio line, so a message
/// that fits one transport fits the others.
pub const MAX_BODY_BYTES: usize = manifold_wire::line::DEFAULT_MAX_LINE;
/// Live legacy sessions held in memory on one replica. Past it an idle session is evicted (its
/// state is sealed in its id, so it resumes on its next request); if none is idle, 503.
pub const MAX_SESSIONS: usize = 1024;
/// SSE streams one legacy session may hold open at once (POST replies, GET, resumptions); 429 past it.
pub const MAX_STREAMS_PER_SESSION: usize = 16;
/// Events kept per SSE stream for `Last-Event-ID` resumption.
pub const RESUME_BUFFER_EVENTS: usize = 1000;
/// Bytes of event data kept per SSE stream for resumption (the newest event is always kept,
/// whatever its size, so one large answer still reaches a resuming client).
pub const RESUME_BUFFER_BYTES: usize = 1024 * 1024;
/// How long a finished stream stays resumable.
pub const RESUME_RETENTION: Duration = Duration::from_secs(60);
/// Streams (live or finished) a session keeps for resumption; the oldest finished go first.
pub const MAX_RETAINED_STREAMS: usize = 32;
/// How long a legacy POST whose stream closed keeps running, waiting for the client to resume
/// it with `Last-Event-ID`, before it is cancelled.
pub const DISCONNECT_GRACE: Duration = Duration::from_secs(10);
/// The `retry:` (milliseconds) Manifold's priming events ask clients to wait before reconnecting.
pub const SSE_RETRY_MS: u64 = 1000;
/// Interval of `: keep-alive` comments on idle SSE streams.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);
/// Deleted session ids remembered (per replica) so they stay ended.
pub const MAX_TOMBSTONES: usize = 10_000;
/// How long a sealed session id is honoured after it was minted.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a legacy session may go without a request and without an open stream before it
/// expires here (its id then answers 404, its own server processes stop).
pub const SESSION_IDLE_TTL: Duration = Duration::from_secs(30 * 60);
/// Server-to-client requests awaiting an answer, per session or stdio connection.
pub const MAX_PENDING_SERVER_REQUESTS: usize = 64;
/// Requests in flight per legacy session, stdio connection or HTTP+SSE session; -32006 past it.
pub const MAX_IN_FLIGHT: usize = 256;
/// Resource URIs one session may subscribe to with `resources/subscribe`.
pub const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 1024;
/// Open `subscriptions/listen` streams across the server (modern era).
pub const MAX_LISTEN_STREAMS: usize = 1024;
/// Open legacy HTTP+SSE (2024-11-05) sessions.
pub const MAX_SSE_SESSIONS: usize = 256;
/// Largest sealed session state (capabilities and client info); larger capabilities are reduced
/// to their top-level keys.
pub const MAX_SEALED_STATE_BYTES: usize = 2048;

/// The bounds one server applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_sessions: usize,
    pub max_streams_per_session: usize,
    pub resume_buffer_events: usize,
    pub resume_buffer_bytes: usize,
    pub resume_retention: Duration,
    pub max_retained_streams: usize,
    pub disconnect_grace: Duration,
    pub sse_retry_ms: u64,
    pub keepalive_interval: Duration,
    pub max_tombstones: usize,
    pub session_lifetime: Duration,
    pub session_idle_ttl: Duration,
    pub max_in_flight: usize,
    pub max_listen_streams: usize,
    pub max_sse_sessions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: MAX_BODY_BYTES,
            max_sessions: MAX_SESSIONS,
            max_streams_per_session: MAX_STREAMS_PER_SESSION,
            resume_buffer_events: RESUME_BUFFER_EVENTS,
            resume_buffer_bytes: RESUME_BUFFER_BYTES,
            resume_retention: RESUME_RETENTION,
            max_retained_streams: MAX_RETAINED_STREAMS,
            disconnect_grace: DISCONNECT_GRACE,
            sse_retry_ms: SSE_RETRY_MS,
            keepalive_interval: KEEPALIVE_INTERVAL,
            max_tombstones: MAX_TOMBSTONES,
            session_lifetime: SESSION_LIFETIME,
            session_idle_ttl: SESSION_IDLE_TTL,
            max_in_flight: MAX_IN_FLIGHT,
            max_listen_streams: MAX_LISTEN_STREAMS,
            max_sse_sessions: MAX_SSE_SESSIONS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limits_are_the_named_constants() {
        let l = Limits::default();
        assert_eq!(l.max_body_bytes, 16 * 1024 * 1024);
        assert_eq!(l.max_sessions, MAX_SESSIONS);
        assert_eq!(l.max_streams_per_session, MAX_STREAMS_PER_SESSION);
        assert_eq!(l.resume_buffer_events, RESUME_BUFFER_EVENTS);
        assert_eq!(l.resume_buffer_bytes, RESUME_BUFFER_BYTES);
        assert_eq!(l.keepalive_interval, KEEPALIVE_INTERVAL);
        assert_eq!(l.max_tombstones, MAX_TOMBSTONES);
    }
}
