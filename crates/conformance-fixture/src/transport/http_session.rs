//! Legacy-era Streamable HTTP sessions and their resumable SSE streams.
//!
//! A session is created by `initialize` and named by the `Mcp-Session-Id` header afterwards; a
//! DELETE ends it, after which its id gets 404. Every SSE response of a session is written into a
//! [`StreamLog`] before it reaches the wire, so that a client whose stream broke (or was closed on
//! purpose, as `test_reconnection` does) can come back with `GET` and `Last-Event-ID` and receive
//! what it missed, including a response produced while it was away. Event ids are
//! `<stream>-<sequence>`; sequence 0 is the priming event (an id and empty data).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures::Stream;
use manifold_wire::sse::SseEvent;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::sync::{mpsc, watch};

use crate::outbox::Outgoing;
use crate::session::LegacyState;

/// The most sessions kept at once; the oldest is dropped to make room.
pub const MAX_SESSIONS: usize = 1024;

/// The most SSE streams a session keeps for resumption; the oldest are forgotten first.
pub const MAX_STREAMS_PER_SESSION: usize = 64;

/// The most events one stream keeps; later events (except the response) are dropped.
pub const MAX_EVENTS_PER_STREAM: usize = 4096;

/// The reconnection delay (ms) announced in every priming event.
pub const RETRY_MS: u64 = 1000;

/// One legacy session.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    pub legacy: Arc<LegacyState>,
    streams: Mutex<VecDeque<Arc<StreamLog>>>,
    next_stream: AtomicU64,
    serial: u64,
}

impl Session {
    /// A new stream log, primed.
    pub fn open_stream(&self) -> Arc<StreamLog> {
        let log = Arc::new(StreamLog {
            stream: self.next_stream.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(LogState {
                events: vec![Logged::Priming],
                done: false,
            }),
            version: watch::channel(0).0,
        });
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if streams.len() >= MAX_STREAMS_PER_SESSION {
            streams.pop_front();
        }
        streams.push_back(log.clone());
        log
    }

    /// The stream an event id belongs to, and the sequence number after which to resume.
    pub fn resume_point(&self, last_event_id: &str) -> Option<(Arc<StreamLog>, usize)> {
        let (stream, seq) = last_event_id.trim().split_once('-')?;
        let stream: u64 = stream.parse().ok()?;
        let seq: usize = seq.parse().ok()?;
        let streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let log = streams.iter().find(|s| s.stream == stream)?.clone();
        Some((log, seq.saturating_add(1)))
    }
}

#[derive(Debug, Clone)]
enum Logged {
    Priming,
    Data(String),
    /// The live connection was closed here on purpose; resuming readers skip it.
    Close,
}

#[derive(Debug)]
struct LogState {
    events: Vec<Logged>,
    done: bool,
}

/// Everything sent on one SSE stream of a session.
#[derive(Debug)]
pub struct StreamLog {
    stream: u64,
    state: Mutex<LogState>,
    version: watch::Sender<u64>,
}

impl StreamLog {
    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, event: Logged, last: bool) {
        let mut state = self.lock();
        if state.done {
            return;
        }
        if state.events.len() < MAX_EVENTS_PER_STREAM || last {
            state.events.push(event);
        }
        state.done |= last;
        drop(state);
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn finish(&self) {
        self.lock().done = true;
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Writes one outgoing item into the log.
    pub fn record(&self, item: Outgoing) {
        match item {
            Outgoing::Message(m) => self.push(Logged::Data(m.as_str().to_owned()), false),
            Outgoing::CloseStream => self.push(Logged::Close, false),
            Outgoing::Final(m) => self.push(Logged::Data(m.as_str().to_owned()), true),
        }
    }

    /// Copies a request's outbox into the log until its response (or its end).
    pub async fn pump(self: Arc<Self>, mut rx: mpsc::Receiver<Outgoing>) {
        while let Some(item) = rx.recv().await {
            let last = matches!(item, Outgoing::Final(_));
            self.record(item);
            if last {
                return;
            }
        }
        self.finish();
    }

    /// The SSE bytes from sequence `from` on. A `live` reader stops at a deliberate close; a
    /// resuming one skips it. Both stop once the response was sent.
    pub fn reader(
        self: Arc<Self>,
        from: usize,
        live: bool,
    ) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
        let changes = self.version.subscribe();
        futures::stream::unfold(
            (self, from, changes),
            move |(log, mut next, mut changes)| async move {
                loop {
                    let step = {
                        let state = log.lock();
                        match state.events.get(next).cloned() {
                            Some(event) => Some(Some(event)),
                            None if state.done => Some(None),
                            None => None,
                        }
                    };
                    match step {
                        Some(Some(event)) => {
                            let seq = next;
                            next += 1;
                            let id = Some(format!("{}-{seq}", log.stream));
                            let frame = match event {
                                Logged::Priming => SseEvent {
                                    id,
                                    data: Some(String::new()),
                                    retry: Some(RETRY_MS),
                                    event: None,
                                },
                                Logged::Data(data) => SseEvent {
                                    id,
                                    data: Some(data),
                                    retry: None,
                                    event: None,
                                },
                                Logged::Close if live => return None,
                                Logged::Close => continue,
                            };
                            return Some((Ok(Bytes::from(frame.encode())), (log, next, changes)));
                        }
                        Some(None) => return None,
                        None => {
                            if changes.changed().await.is_err() {
                                return None;
                            }
                        }
                    }
                }
            },
        )
    }
}

/// Every live session.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    serial: AtomicU64,
    rng: SystemRandom,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            serial: AtomicU64::new(0),
            rng: SystemRandom::new(),
        }
    }
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a session for an initialized connection.
    pub fn create(&self, legacy: Arc<LegacyState>) -> Arc<Session> {
        let mut bytes = [0u8; 16];
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        if self.rng.fill(&mut bytes).is_err() {
            bytes = u128::from(serial).to_be_bytes();
        }
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let session = Arc::new(Session {
            id: id.clone(),
            legacy,
            streams: Mutex::new(VecDeque::new()),
            next_stream: AtomicU64::new(1),
            serial,
        });
        let mut map = self.lock();
        if map.len() >= MAX_SESSIONS {
            let oldest = map.values().min_by_key(|s| s.serial).map(|s| s.id.clone());
            if let Some(oldest) = oldest
                && let Some(gone) = map.remove(&oldest)
            {
                gone.legacy.cancel_all();
            }
        }
        map.insert(id, session.clone());
        session
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().get(id).cloned()
    }

    /// Ends a session; false when it did not exist.
    pub fn remove(&self, id: &str) -> bool {
        match self.lock().remove(id) {
            Some(session) => {
                session.legacy.cancel_all();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use futures::StreamExt;
    use manifold_wire::{Id, Message, Revision};
    use serde_json::json;

    fn text(chunks: Vec<Result<Bytes, Infallible>>) -> String {
        chunks
            .into_iter()
            .map(|c| String::from_utf8(c.unwrap().to_vec()).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_closed_stream_resumes_with_what_it_missed() {
        let sessions = Sessions::default();
        let session = sessions.create(Arc::new(LegacyState::new(Revision::V2025_11_25, json!({}))));
        let log = session.open_stream();
        log.record(Outgoing::CloseStream);
        let live: Vec<_> = log.clone().reader(0, true).collect().await;
        assert_eq!(text(live), "id: 1-0\nretry: 1000\ndata:\n\n");
        log.record(Outgoing::Final(Message::result(&Id::from(1), "{}")));
        let (resumed, from) = session.resume_point("1-0").unwrap();
        let rest: Vec<_> = resumed.reader(from, false).collect().await;
        assert_eq!(
            text(rest),
            "id: 1-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
        );
        assert!(session.resume_point("9-0").is_none());
        assert!(session.resume_point("garbage").is_none());
    }

    #[test]
    fn deleted_sessions_are_gone() {
        let sessions = Sessions::default();
        let session = sessions.create(Arc::new(LegacyState::new(Revision::V2025_11_25, json!({}))));
        assert!(session.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert!(sessions.get(&session.id).is_some());
        assert!(sessions.remove(&session.id));
        assert!(sessions.get(&session.id).is_none());
        assert!(!sessions.remove(&session.id));
    }
}
