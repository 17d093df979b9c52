//! A legacy Streamable HTTP session: the engine connection behind an `Mcp-Session-Id`, and the
//! logged SSE streams that make `Last-Event-ID` resumption possible.
//!
//! Every SSE event the session sends is appended to the log of its stream before it is offered
//! to the live connection, so a client that lost the connection can come back with the last id
//! it saw and get the rest. Event ids are `<stream>-<seq>`; stream 0 is the GET stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::engine::Connection;
use crate::poison_free::lock;
use crate::sse_event;

/// The stream that carries messages tied to no request (opened with GET).
pub const STANDALONE_STREAM: u64 = 0;

#[derive(Debug, Default)]
struct StreamLog {
    events: Vec<(u64, Bytes)>,
    next_seq: u64,
    /// Highest sequence number handed to a live connection.
    sent_upto: Option<u64>,
    live: Option<mpsc::UnboundedSender<Bytes>>,
    finished: bool,
}

impl StreamLog {
    fn has_live(&self) -> bool {
        self.live.as_ref().is_some_and(|live| !live.is_closed())
    }

    fn offer(&mut self, seq: u64, event: &Bytes) {
        if let Some(live) = &self.live {
            if live.send(event.clone()).is_ok() {
                self.sent_upto = Some(seq);
            } else {
                self.live = None;
            }
        }
    }

    fn events_after(&self, after: Option<u64>) -> Vec<(u64, Bytes)> {
        self.events
            .iter()
            .filter(|(seq, _)| after.is_none_or(|after| *seq > after))
            .cloned()
            .collect()
    }
}

#[derive(Debug)]
struct StreamTable {
    next_stream: u64,
    logs: HashMap<u64, StreamLog>,
}

/// Why a GET could not attach to a stream.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("another GET stream is already open for this session")]
    Conflict,
    #[error("Last-Event-ID {0:?} is not an event id this session issued (expected <stream>-<seq>)")]
    UnknownEvent(String),
}

#[derive(Debug)]
pub struct HttpSession {
    pub id: String,
    pub connection: Arc<Connection>,
    streams: Mutex<StreamTable>,
    uses: AtomicU64,
}

impl HttpSession {
    pub fn new(id: String, connection: Arc<Connection>) -> Arc<Self> {
        let mut logs = HashMap::new();
        logs.insert(STANDALONE_STREAM, StreamLog::default());
        Arc::new(Self {
            id,
            connection,
            streams: Mutex::new(StreamTable {
                next_stream: STANDALONE_STREAM + 1,
                logs,
            }),
            uses: AtomicU64::new(0),
        })
    }

    /// Counts one HTTP request that named this session; returns the count so far.
    pub fn count_use(&self) -> u64 {
        self.uses.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Opens a new POST reply stream with a live connection attached.
    pub fn open_stream(&self) -> (u64, mpsc::UnboundedReceiver<Bytes>) {
        let (live, receiver) = mpsc::unbounded_channel();
        let mut table = lock(&self.streams);
        let stream = table.next_stream;
        table.next_stream += 1;
        table.logs.insert(
            stream,
            StreamLog {
                live: Some(live),
                ..StreamLog::default()
            },
        );
        (stream, receiver)
    }

    /// Appends one event, built from its id, to `stream` and offers it to the live connection.
    pub fn append(&self, stream: u64, build: impl FnOnce(&str) -> Bytes) {
        let mut table = lock(&self.streams);
        let Some(log) = table.logs.get_mut(&stream) else {
            return;
        };
        let seq = log.next_seq;
        log.next_seq += 1;
        let event = build(&format!("{stream}-{seq}"));
        log.offer(seq, &event);
        log.events.push((seq, event));
    }

    /// Drops the live connection of `stream` without finishing it (the client must resume).
    pub fn detach(&self, stream: u64) {
        if let Some(log) = lock(&self.streams).logs.get_mut(&stream) {
            log.live = None;
        }
    }

    /// The stream got its last event: close the live connection once it has drained.
    pub fn finish(&self, stream: u64) {
        if let Some(log) = lock(&self.streams).logs.get_mut(&stream) {
            log.finished = true;
            log.live = None;
        }
    }

    /// Ends every stream, for DELETE and expiry.
    pub fn close_all(&self) {
        for log in lock(&self.streams).logs.values_mut() {
            log.finished = true;
            log.live = None;
        }
    }

    /// GET without `Last-Event-ID`: attaches to the standalone stream and first delivers what
    /// no earlier GET received; with nothing pending, opens with a priming event.
    pub fn attach_standalone(&self) -> Result<mpsc::UnboundedReceiver<Bytes>, AttachError> {
        let mut table = lock(&self.streams);
        let log = table.logs.entry(STANDALONE_STREAM).or_default();
        if log.has_live() {
            return Err(AttachError::Conflict);
        }
        let (live, receiver) = mpsc::unbounded_channel();
        let pending = log.events_after(log.sent_upto);
        if pending.is_empty() {
            let seq = log.next_seq;
            log.next_seq += 1;
            let event = sse_event::priming_event(&format!("{STANDALONE_STREAM}-{seq}"));
            log.events.push((seq, event.clone()));
            let _ = live.send(event);
            log.sent_upto = Some(seq);
        } else {
            let _ = live.send(sse_event::retry_only());
            for (seq, event) in pending {
                let _ = live.send(event);
                log.sent_upto = Some(seq);
            }
        }
        log.live = Some(live);
        log.finished = false;
        Ok(receiver)
    }

    /// GET with `Last-Event-ID`: replays the events after it on the stream it belongs to, then
    /// stays attached if that stream is still running.
    pub fn resume(
        &self,
        last_event_id: &str,
    ) -> Result<mpsc::UnboundedReceiver<Bytes>, AttachError> {
        let unknown = || AttachError::UnknownEvent(last_event_id.to_owned());
        let (stream, seq) = last_event_id.split_once('-').ok_or_else(unknown)?;
        let stream: u64 = stream.parse().map_err(|_| unknown())?;
        let seq: u64 = seq.parse().map_err(|_| unknown())?;
        let mut table = lock(&self.streams);
        let log = table.logs.get_mut(&stream).ok_or_else(unknown)?;
        if seq >= log.next_seq {
            return Err(unknown());
        }
        let (live, receiver) = mpsc::unbounded_channel();
        let _ = live.send(sse_event::retry_only());
        for (replayed, event) in log.events_after(Some(seq)) {
            let _ = live.send(event);
            log.sent_upto = Some(replayed);
        }
        if !log.finished {
            log.live = Some(live);
        }
        Ok(receiver)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::behaviour::{Behaviour, EraChoice, ReplyMode, Settings};
    use crate::engine::Peer;

    fn session() -> Arc<HttpSession> {
        let peer = Peer::new(Settings {
            behaviour: Behaviour::Normal,
            era: EraChoice::Both,
            count: None,
            delay_ms: None,
            page_size: 1000,
            reply_mode: ReplyMode::Auto,
        });
        let (sink, _) = mpsc::unbounded_channel();
        HttpSession::new("s".to_owned(), Connection::new(peer, sink))
    }

    fn drain(receiver: &mut mpsc::UnboundedReceiver<Bytes>) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Ok(event) = receiver.try_recv() {
            out.push(event);
        }
        out
    }

    #[test]
    fn resume_replays_only_events_after_the_given_id() {
        let session = session();
        let (stream, mut live) = session.open_stream();
        session.append(stream, sse_event::priming_event);
        session.detach(stream);
        session.append(stream, |id| sse_event::message_event(Some(id), b"one"));
        session.append(stream, |id| sse_event::message_event(Some(id), b"two"));
        assert_eq!(drain(&mut live).len(), 1);
        let mut resumed = session.resume(&format!("{stream}-1")).unwrap();
        let events = drain(&mut resumed);
        assert_eq!(events.len(), 2);
        assert_eq!(
            &events[1][..],
            format!("event: message\nid: {stream}-2\ndata: two\n\n").as_bytes()
        );
    }

    #[test]
    fn unknown_last_event_ids_are_refused() {
        let session = session();
        assert!(session.resume("9-0").is_err());
        assert!(session.resume("0-5").is_err());
        assert!(session.resume("garbage").is_err());
    }

    #[test]
    fn a_second_get_stream_conflicts() {
        let session = session();
        let _first = session.attach_standalone().unwrap();
        assert!(matches!(
            session.attach_standalone(),
            Err(AttachError::Conflict)
        ));
    }
}
