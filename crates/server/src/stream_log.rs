//! One SSE stream's events, kept in a bounded log that readers follow.
//!
//! Every reply stream and every legacy GET stream is a log first and an HTTP body second: writers
//! (a gateway call, session events) append without ever waiting on the network, and a reader (the
//! HTTP body) follows the log from a cursor. Resuming with `Last-Event-ID` is just a new reader
//! from that cursor; it replaces the old reader, so no event is ever sent on two connections.
//! The log is bounded in events and bytes; a reader that falls behind its bounds is ended rather
//! than shown a gap.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::Stream;
use manifold_wire::sse::{SseEvent, encode_comment};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Why a stream cannot be resumed from an event id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("no event with that id was sent on this stream")]
    Unknown,
    #[error("the events after that id are no longer kept (the resumption buffer overflowed)")]
    Gone,
}

#[derive(Debug, Default)]
struct Inner {
    /// (sequence number from 1, event data)
    events: VecDeque<(u64, Arc<str>)>,
    bytes: usize,
    next_seq: u64,
    finished_at: Option<Instant>,
    /// The reader allowed to deliver; earlier readers end.
    generation: u64,
    attached: bool,
}

/// A bounded, resumable event log.
#[derive(Debug)]
pub struct StreamLog {
    /// `<epoch>.<stream>` for legacy streams (event ids are `<prefix>.<seq>`); `None`: no ids.
    id_prefix: Option<String>,
    /// The SSE `event:` name (the HTTP+SSE transport names its events `message`).
    event_name: Option<&'static str>,
    max_events: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
    changed: Notify,
    /// What to cancel when the stream is abandoned (its call, for a reply stream).
    abandon: Mutex<Option<CancellationToken>>,
}

/// How a reader behaves.
pub struct ReaderOptions {
    pub keepalive: Duration,
    /// `retry:` of the priming event; a fresh reader of a stream with ids opens with one.
    pub retry_ms: Option<u64>,
    /// Events to send before the log (the HTTP+SSE `endpoint` event).
    pub preamble: Vec<String>,
    /// Ends the reader (server shutdown, session ended).
    pub stop: CancellationToken,
    /// Runs once when the reader goes away, with whether the log had finished by then and
    /// whether this reader was still the current one.
    pub on_detach: Option<Box<dyn FnOnce(Detached) + Send>>,
}

/// Where a reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Every event still kept (a reply stream's first reader).
    Beginning,
    /// Only events appended from now on (a GET stream opened without `Last-Event-ID`).
    Now,
    /// The events after this sequence number (`Last-Event-ID`).
    After(u64),
}

/// What a reader knew when it went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detached {
    pub finished: bool,
    pub current: bool,
}

impl StreamLog {
    pub fn new(
        id_prefix: Option<String>,
        event_name: Option<&'static str>,
        max_events: usize,
        max_bytes: usize,
    ) -> Arc<StreamLog> {
        Arc::new(StreamLog {
            id_prefix,
            event_name,
            max_events: max_events.max(1),
            max_bytes,
            inner: Mutex::new(Inner {
                next_seq: 1,
                ..Inner::default()
            }),
            changed: Notify::new(),
            abandon: Mutex::new(None),
        })
    }

    /// Names what to cancel when readers give up on this stream.
    pub fn set_abandon(&self, token: CancellationToken) {
        *self.abandon.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
    }

    /// What to cancel when readers give up on this stream, if anything.
    pub fn abandon_token(&self) -> Option<CancellationToken> {
        self.abandon
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn append(&self, inner: &mut Inner, data: &str) {
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.bytes += data.len();
        inner.events.push_back((seq, Arc::from(data)));
        // Keep at least the newest event, whatever its size: a reader must be able to get it.
        while inner.events.len() > 1
            && (inner.events.len() > self.max_events || inner.bytes > self.max_bytes)
        {
            if let Some((_, old)) = inner.events.pop_front() {
                inner.bytes -= old.len();
            }
        }
    }

    /// Appends an event; `false` when the stream has already finished.
    pub fn push(&self, data: &str) -> bool {
        {
            let mut inner = self.lock();
            if inner.finished_at.is_some() {
                return false;
            }
            self.append(&mut inner, data);
        }
        self.changed.notify_waiters();
        true
    }

    /// Appends the last event and finishes the stream in one step.
    pub fn push_final(&self, data: &str) {
        {
            let mut inner = self.lock();
            if inner.finished_at.is_some() {
                return;
            }
            self.append(&mut inner, data);
            inner.finished_at = Some(Instant::now());
        }
        self.changed.notify_waiters();
    }

    /// Ends the stream; readers deliver what is left and close.
    pub fn finish(&self) {
        {
            let mut inner = self.lock();
            if inner.finished_at.is_none() {
                inner.finished_at = Some(Instant::now());
            }
        }
        self.changed.notify_waiters();
    }

    pub fn finished_at(&self) -> Option<Instant> {
        self.lock().finished_at
    }

    pub fn is_attached(&self) -> bool {
        self.lock().attached
    }

    /// Events appended so far.
    pub fn appended(&self) -> u64 {
        self.lock().next_seq - 1
    }

    /// Waits until the stream has an event or has finished.
    pub async fn wait_for_output(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let inner = self.lock();
                if inner.next_seq > 1 || inner.finished_at.is_some() {
                    return;
                }
            }
            notified.await;
        }
    }

    /// The only event of a finished stream that no reader follows: the reply can be plain JSON.
    pub fn sole_event_if_finished(&self) -> Option<Arc<str>> {
        let inner = self.lock();
        match (inner.finished_at, inner.next_seq, inner.events.front()) {
            (Some(_), 2, Some((1, data))) if !inner.attached => Some(Arc::clone(data)),
            _ => None,
        }
    }

    /// Parses the sequence number out of one of this stream's event ids.
    pub fn seq_of(&self, event_id: &str) -> Option<u64> {
        let prefix = self.id_prefix.as_deref()?;
        event_id
            .strip_prefix(prefix)?
            .strip_prefix('.')?
            .parse()
            .ok()
    }

    fn encode(&self, seq: u64, data: &str) -> Bytes {
        Bytes::from(
            SseEvent {
                id: self.id_prefix.as_ref().map(|p| format!("{p}.{seq}")),
                event: self.event_name.map(str::to_owned),
                data: Some(data.to_owned()),
                retry: None,
            }
            .encode(),
        )
    }

    /// A reader of this stream; it becomes the stream's only reader.
    pub fn reader(
        self: &Arc<Self>,
        start: Start,
        options: ReaderOptions,
    ) -> Result<impl Stream<Item = Result<Bytes, Infallible>> + Send + use<>, ResumeError> {
        let generation;
        let cursor;
        {
            let mut inner = self.lock();
            let oldest_kept = inner.events.front().map_or(inner.next_seq, |(s, _)| *s);
            cursor = match start {
                Start::Beginning => oldest_kept - 1,
                Start::Now => inner.next_seq - 1,
                Start::After(n) => {
                    if n >= inner.next_seq {
                        return Err(ResumeError::Unknown);
                    }
                    if n + 1 < oldest_kept {
                        return Err(ResumeError::Gone);
                    }
                    n
                }
            };
            inner.generation += 1;
            inner.attached = true;
            generation = inner.generation;
        }
        // Wake the previous reader so it notices it was replaced.
        self.changed.notify_waiters();
        let mut pending = VecDeque::new();
        for p in options.preamble {
            pending.push_back(Bytes::from(p));
        }
        let fresh = !matches!(start, Start::After(_));
        if let (true, Some(prefix), Some(retry)) = (fresh, &self.id_prefix, options.retry_ms) {
            // Resuming from the priming event replays from the reader's first event.
            pending.push_back(Bytes::from(
                SseEvent {
                    id: Some(format!("{prefix}.{cursor}")),
                    event: None,
                    data: Some(String::new()),
                    retry: Some(retry),
                }
                .encode(),
            ));
        }
        let state = ReaderState {
            guard: DetachGuard {
                log: Arc::clone(self),
                generation,
                on_detach: options.on_detach,
            },
            cursor,
            pending,
            keepalive: options.keepalive,
            stop: options.stop,
            stopping: false,
        };
        Ok(futures::stream::unfold(state, next_chunk))
    }
}

struct DetachGuard {
    log: Arc<StreamLog>,
    generation: u64,
    on_detach: Option<Box<dyn FnOnce(Detached) + Send>>,
}

impl Drop for DetachGuard {
    fn drop(&mut self) {
        let detached = {
            let mut inner = self.log.lock();
            let current = inner.generation == self.generation;
            if current {
                inner.attached = false;
            }
            Detached {
                finished: inner.finished_at.is_some(),
                current,
            }
        };
        if let Some(f) = self.on_detach.take() {
            f(detached);
        }
    }
}

struct ReaderState {
    guard: DetachGuard,
    cursor: u64,
    pending: VecDeque<Bytes>,
    keepalive: Duration,
    stop: CancellationToken,
    /// The stop fired: deliver what the log already holds, then end.
    stopping: bool,
}

enum Step {
    Deliver(Bytes),
    End,
    Wait,
}

async fn next_chunk(mut state: ReaderState) -> Option<(Result<Bytes, Infallible>, ReaderState)> {
    loop {
        if let Some(chunk) = state.pending.pop_front() {
            return Some((Ok(chunk), state));
        }
        let log = Arc::clone(&state.guard.log);
        let notified = log.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let step = {
            let inner = log.lock();
            if inner.generation != state.guard.generation {
                Step::End
            } else if let Some((seq, data)) =
                inner.events.iter().find(|(seq, _)| *seq > state.cursor)
            {
                if *seq > state.cursor + 1 {
                    // The bounds dropped events this reader never saw: end rather than skip them.
                    tracing::warn!(
                        "an SSE reader fell behind the resumption buffer; closing its stream"
                    );
                    Step::End
                } else {
                    state.cursor = *seq;
                    Step::Deliver(log.encode(*seq, data))
                }
            } else if inner.finished_at.is_some() {
                Step::End
            } else {
                Step::Wait
            }
        };
        match step {
            Step::Deliver(chunk) => return Some((Ok(chunk), state)),
            Step::End => return None,
            Step::Wait if state.stopping => return None,
            Step::Wait => {}
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(state.keepalive) => {
                return Some((Ok(Bytes::from(encode_comment("keep-alive"))), state));
            }
            // An answer pushed just before a shutdown's stop still reaches its client.
            _ = state.stop.cancelled() => state.stopping = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;

    fn options() -> ReaderOptions {
        ReaderOptions {
            keepalive: Duration::from_secs(3600),
            retry_ms: Some(1000),
            preamble: Vec::new(),
            stop: CancellationToken::new(),
            on_detach: None,
        }
    }

    async fn all(s: impl Stream<Item = Result<Bytes, Infallible>>) -> String {
        let chunks: Vec<_> = s.collect().await;
        chunks
            .into_iter()
            .map(|c| String::from_utf8(c.unwrap().to_vec()).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_fresh_reader_primes_then_delivers_every_event_with_ids() {
        let log = StreamLog::new(Some("e.1".to_owned()), None, 10, 1000);
        log.push("a");
        log.push_final("b");
        let text = all(log.reader(Start::Beginning, options()).unwrap()).await;
        assert_eq!(
            text,
            "id: e.1.0\nretry: 1000\ndata:\n\nid: e.1.1\ndata: a\n\nid: e.1.2\ndata: b\n\n"
        );
    }

    #[tokio::test]
    async fn resuming_replays_only_what_came_after_and_replaces_the_old_reader() {
        let log = StreamLog::new(Some("e.1".to_owned()), None, 10, 1000);
        log.push("a");
        let mut first = Box::pin(log.reader(Start::Beginning, options()).unwrap());
        assert!(first.next().await.is_some()); // priming
        assert!(first.next().await.is_some()); // a
        log.push("b");
        let second = log
            .reader(Start::After(log.seq_of("e.1.1").unwrap()), options())
            .unwrap();
        assert!(first.next().await.is_none(), "the replaced reader ends");
        log.push_final("c");
        assert_eq!(
            all(second).await,
            "id: e.1.2\ndata: b\n\nid: e.1.3\ndata: c\n\n"
        );
        assert_eq!(
            log.reader(Start::After(9), options()).err(),
            Some(ResumeError::Unknown)
        );
    }

    #[tokio::test]
    async fn the_bounds_drop_the_oldest_events_and_refuse_resuming_into_the_gap() {
        let log = StreamLog::new(Some("e.1".to_owned()), None, 2, 1000);
        for d in ["1", "2", "3"] {
            log.push(d);
        }
        assert_eq!(
            log.reader(Start::After(0), options()).err(),
            Some(ResumeError::Gone)
        );
        log.finish();
        assert_eq!(
            all(log.reader(Start::After(1), options()).unwrap()).await,
            "id: e.1.2\ndata: 2\n\nid: e.1.3\ndata: 3\n\n"
        );
        let bytes = StreamLog::new(None, None, 100, 4);
        bytes.push("abc");
        bytes.push("de");
        bytes.finish();
        assert_eq!(
            all(bytes.reader(Start::Beginning, options()).unwrap()).await,
            "data: de\n\n"
        );
    }

    #[tokio::test]
    async fn a_single_finished_event_can_be_answered_as_json() {
        let log = StreamLog::new(None, None, 10, 1000);
        log.push_final("{}");
        assert_eq!(log.sole_event_if_finished().as_deref(), Some("{}"));
        let log = StreamLog::new(None, None, 10, 1000);
        log.push("note");
        log.push_final("{}");
        assert_eq!(log.sole_event_if_finished(), None);
    }

    #[tokio::test]
    async fn what_was_pushed_before_a_stop_is_delivered_before_the_stream_ends() {
        use futures::FutureExt as _;
        // The reader waits when both wake-ups land; either may be seen first, so try often.
        for _ in 0..32 {
            let log = StreamLog::new(None, None, 10, 1000);
            let stop = CancellationToken::new();
            let mut opts = options();
            opts.stop = stop.clone();
            let mut r = Box::pin(log.reader(Start::Beginning, opts).unwrap());
            assert!(r.next().now_or_never().is_none(), "nothing to read yet");
            log.push_final("{\"answer\":1}");
            stop.cancel();
            let chunk = r.next().await.unwrap().unwrap();
            assert!(
                String::from_utf8_lossy(&chunk).contains("{\"answer\":1}"),
                "{chunk:?}"
            );
            assert!(r.next().await.is_none());
        }
    }

    #[tokio::test]
    async fn idle_readers_send_keep_alive_comments_and_stop_on_request() {
        let log = StreamLog::new(None, None, 10, 1000);
        let stop = CancellationToken::new();
        let mut opts = options();
        opts.keepalive = Duration::from_millis(10);
        opts.stop = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        opts.on_detach = Some(Box::new(move |d| {
            let _ = tx.send(d);
        }));
        let mut r = Box::pin(log.reader(Start::Beginning, opts).unwrap());
        let chunk = r.next().await.unwrap().unwrap();
        assert_eq!(&chunk[..], b": keep-alive\n");
        stop.cancel();
        assert!(r.next().await.is_none());
        drop(r);
        assert_eq!(
            rx.recv().unwrap(),
            Detached {
                finished: false,
                current: true
            }
        );
        assert!(!log.is_attached());
    }
}
