//! Legacy Streamable HTTP sessions held live on this replica, and the ended ones it remembers.
//!
//! The session itself is sealed into its id; what lives here is only what cannot be sealed:
//! open streams and their resumption buffers, calls in flight, server requests awaiting answers,
//! subscriptions and the log level. A session unknown here but sealed with our key is resumed
//! (another replica or an earlier process minted it). Deleted sessions are remembered in a
//! bounded tombstone set; with several replicas a DELETE is also recorded in the shared store and
//! announced, so every replica refuses the session (`shared_state.rs`).
//!
//! A session with no request and no open stream for `session_idle_ttl` expires: it is deleted
//! here as if the client had sent DELETE. Whenever a session ends for good here (DELETE, idle
//! expiry, eviction at the bound, server shutdown), its own upstream processes
//! (`scope = "session"` servers) are stopped with it.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use manifold_gateway::{ClientView, Gateway, GatewayEvent};
use tokio_util::sync::CancellationToken;

use crate::limits::Limits;
use crate::session::ClientSession;
use crate::session_key::{hex, random_bytes};
use crate::stream_log::StreamLog;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The number of the session's GET stream.
pub const STANDALONE_STREAM: u64 = 0;

type Streams = Arc<Mutex<HashMap<u64, Arc<StreamLog>, MintedKeys>>>;

/// The hasher of maps keyed by ids this replica minted (session ids, stream numbers), read on
/// every request: foldhash costs a fraction of std's SipHash for them, and as no caller chooses a
/// key that goes in, SipHash's defence against chosen collisions buys nothing (a caller's id is
/// only looked up).
type MintedKeys = foldhash::fast::RandomState;

/// One legacy session live on this replica.
pub(crate) struct LiveSession {
    pub id: String,
    pub core: Arc<ClientSession>,
    /// Random per live instance: event ids from another replica or an earlier process never
    /// match a stream here by accident.
    pub epoch: String,
    /// The binding of the identity that started the session (also sealed into its id), kept so
    /// that every request need not decrypt the id again to compare it.
    pub owner: Option<String>,
    next_stream: AtomicU64,
    streams: Streams,
    /// SSE connections open now (bounded per session).
    pub open_streams: Arc<AtomicUsize>,
    last_used: Mutex<Instant>,
    /// Fires when the session ends here (deleted, evicted, server shutdown).
    pub ended: CancellationToken,
    limits: Limits,
    /// Ends the session's own upstream connections when the session ends for good.
    gateway: Gateway,
}

impl LiveSession {
    /// Starts the live part of session `id`; `replica` names this replica in the ids of the
    /// server requests it sends, when replicas relay answers to each other.
    pub fn start(
        id: String,
        owner: Option<String>,
        view: ClientView,
        limits: Limits,
        gateway: &Gateway,
        stop: &CancellationToken,
        replica: Option<&str>,
    ) -> Arc<LiveSession> {
        let epoch = random_bytes::<4>()
            .map(|b| hex(&b))
            .unwrap_or_else(|_| format!("{:08x}", Instant::now().elapsed().subsec_nanos()));
        let core = Arc::new(ClientSession::new(
            view,
            Some(id.clone()),
            crate::relay::SessionRelay::request_prefix(replica, &epoch),
            limits.max_in_flight,
        ));
        let session = Arc::new(LiveSession {
            id,
            core,
            epoch,
            owner,
            next_stream: AtomicU64::new(STANDALONE_STREAM + 1),
            streams: Arc::new(Mutex::new(HashMap::default())),
            open_streams: Arc::new(AtomicUsize::new(0)),
            last_used: Mutex::new(Instant::now()),
            ended: stop.child_token(),
            limits,
            gateway: gateway.clone(),
        });
        tokio::spawn(forward_events(
            gateway.events(),
            Arc::clone(&session.core),
            Arc::clone(&session.streams),
            session.ended.clone(),
        ));
        session
    }

    pub fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    fn new_log(&self, number: u64) -> Arc<StreamLog> {
        StreamLog::new(
            Some(format!("{}.{number}", self.epoch)),
            None,
            self.limits.resume_buffer_events,
            self.limits.resume_buffer_bytes,
        )
    }

    /// A new reply stream and its number, kept for resumption; old finished streams are let go.
    pub fn new_stream(&self) -> (u64, Arc<StreamLog>) {
        let number = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let log = self.new_log(number);
        let mut streams = lock(&self.streams);
        let retention = self.limits.resume_retention;
        streams.retain(|n, s| {
            *n == STANDALONE_STREAM || s.finished_at().is_none_or(|t| t.elapsed() < retention)
        });
        while streams.len() >= self.limits.max_retained_streams {
            let oldest_finished = streams
                .iter()
                .filter(|(n, s)| **n != STANDALONE_STREAM && s.finished_at().is_some())
                .map(|(n, _)| *n)
                .min();
            match oldest_finished {
                Some(n) => {
                    streams.remove(&n);
                }
                None => break,
            }
        }
        streams.insert(number, Arc::clone(&log));
        (number, log)
    }

    /// Lets go of a reply stream nobody can resume: its answer went out as a JSON body, so the
    /// client holds no event id of it. Most calls end this way, and keeping their streams made
    /// every later call prune them.
    pub fn release_stream(&self, number: u64) {
        if number != STANDALONE_STREAM {
            lock(&self.streams).remove(&number);
        }
    }

    /// The GET stream, created on first use.
    pub fn standalone(&self) -> Arc<StreamLog> {
        let mut streams = lock(&self.streams);
        Arc::clone(
            streams
                .entry(STANDALONE_STREAM)
                .or_insert_with(|| self.new_log(STANDALONE_STREAM)),
        )
    }

    /// The GET stream if a client has it open now.
    pub fn attached_standalone(&self) -> Option<Arc<StreamLog>> {
        lock(&self.streams)
            .get(&STANDALONE_STREAM)
            .filter(|s| s.is_attached())
            .cloned()
    }

    /// Whether `event_id` names an event of this session's GET stream as another replica (or an
    /// earlier process, or this replica before the session was evicted) sent it: its events are
    /// not kept here, but a new GET stream can stand in for it.
    pub fn is_foreign_standalone_event(&self, event_id: &str) -> bool {
        let mut parts = event_id.splitn(3, '.');
        let (Some(epoch), Some(number), Some(_)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        epoch != self.epoch && number.parse::<u64>().ok() == Some(STANDALONE_STREAM)
    }

    /// A kept stream by the event id a client resumes from: (stream, sequence number).
    pub fn resumable(&self, event_id: &str) -> Option<(Arc<StreamLog>, u64)> {
        let rest = event_id.strip_prefix(&self.epoch)?.strip_prefix('.')?;
        let (number, _) = rest.split_once('.')?;
        let log = lock(&self.streams)
            .get(&number.parse::<u64>().ok()?)
            .cloned()?;
        let seq = log.seq_of(event_id)?;
        Some((log, seq))
    }

    fn evictable(&self) -> bool {
        self.open_streams.load(Ordering::Relaxed) == 0 && !self.core.busy()
    }

    fn last_used(&self) -> Instant {
        *lock(&self.last_used)
    }

    /// How long the session has been idle (no request, no open stream, nothing in flight);
    /// `None` while it is in use, which counts as use (idleness restarts from now).
    fn idle_for(&self) -> Option<Duration> {
        if self.evictable() {
            Some(self.last_used().elapsed())
        } else {
            self.touch();
            None
        }
    }

    /// Ends the session for good: as [`LiveSession::end`], and its own upstream processes stop.
    pub fn end_for_good(&self) {
        self.end();
        let gateway = self.gateway.clone();
        let id = self.id.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { gateway.end_session(&id).await });
            }
            Err(_) => {
                tracing::warn!(
                    "a session ended outside the runtime; its own server processes stop with the gateway"
                );
            }
        }
    }

    /// Ends the session here: streams close, calls are cancelled, events stop.
    pub fn end(&self) {
        self.ended.cancel();
        self.core.cancel_all();
        for s in lock(&self.streams).values() {
            s.finish();
        }
    }
}

async fn forward_events(
    mut events: tokio::sync::broadcast::Receiver<GatewayEvent>,
    core: Arc<ClientSession>,
    streams: Streams,
    ended: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            _ = ended.cancelled() => return,
            e = events.recv() => e,
        };
        let Some(messages) = core.messages_for_received(event) else {
            return;
        };
        // Only once the client has opened its GET stream: before that nobody asked for events.
        let standalone = lock(&streams).get(&STANDALONE_STREAM).cloned();
        if let Some(log) = standalone {
            for m in messages {
                log.push(m.as_str());
            }
        }
    }
}

#[derive(Default)]
struct Tombstones {
    set: HashSet<String>,
    order: VecDeque<String>,
}

/// The live sessions of this replica and the ids deleted here.
#[derive(Default)]
pub(crate) struct SessionTable {
    live: Mutex<HashMap<String, Arc<LiveSession>, MintedKeys>>,
    tombstones: Mutex<Tombstones>,
}

/// Why a session could not be added.
#[derive(Debug)]
pub(crate) struct Full;

/// What identifies a session among its tombstones: key id and nonce (unique per session),
/// so a tombstone stays small however large the sealed state is.
fn tombstone_key(id: &str) -> Cow<'_, str> {
    let Some(dot) = id.find('.') else {
        return Cow::Owned(format!(".{}", id.chars().take(16).collect::<String>()));
    };
    // `kid.` and the nonce's first 16 characters: a prefix of the id, taken without a copy.
    let rest = id.get(dot + 1..).unwrap_or_default();
    let nonce = rest.char_indices().nth(16).map_or(rest.len(), |(at, _)| at);
    Cow::Borrowed(id.get(..dot + 1 + nonce).unwrap_or(id))
}

impl SessionTable {
    /// The revision of every live session (for the sessions gauge at scrape time).
    pub fn revisions(&self) -> Vec<manifold_wire::Revision> {
        lock(&self.live)
            .values()
            .map(|s| s.core.view().revision)
            .collect()
    }

    pub fn get(&self, id: &str) -> Option<Arc<LiveSession>> {
        lock(&self.live).get(id).cloned()
    }

    /// Adds a session; at the bound the least recently used idle session is let go (it resumes
    /// from its id when it comes back), and if none is idle the new one is refused.
    pub fn insert_or_get(
        &self,
        session: Arc<LiveSession>,
        max: usize,
    ) -> Result<Arc<LiveSession>, Full> {
        let mut live = lock(&self.live);
        if let Some(existing) = live.get(&session.id) {
            // Two requests resumed the same sealed id at once: keep the first.
            session.end();
            return Ok(Arc::clone(existing));
        }
        while live.len() >= max {
            let victim = live
                .values()
                .filter(|s| s.evictable())
                .min_by_key(|s| s.last_used())
                .map(|s| s.id.clone());
            match victim.and_then(|id| live.remove(&id)) {
                Some(evicted) => {
                    tracing::debug!("evicted an idle session to make room; it resumes from its id");
                    evicted.end_for_good();
                }
                None => {
                    session.end();
                    return Err(Full);
                }
            }
        }
        live.insert(session.id.clone(), Arc::clone(&session));
        Ok(session)
    }

    pub fn is_ended(&self, id: &str) -> bool {
        let tombstones = lock(&self.tombstones);
        !tombstones.set.is_empty() && tombstones.set.contains(tombstone_key(id).as_ref())
    }

    /// Ends a session for good on this replica.
    pub fn delete(&self, id: &str, max_tombstones: usize) {
        if let Some(s) = lock(&self.live).remove(id) {
            s.end_for_good();
        }
        let key = tombstone_key(id).into_owned();
        let mut t = lock(&self.tombstones);
        if t.set.insert(key.clone()) {
            t.order.push_back(key);
        }
        while t.order.len() > max_tombstones {
            if let Some(old) = t.order.pop_front() {
                t.set.remove(&old);
            }
        }
    }

    pub fn end_all(&self) {
        for (_, s) in lock(&self.live).drain() {
            s.end_for_good();
        }
    }

    /// Deletes every session idle for longer than `ttl`; returns how many.
    pub fn expire_idle(&self, ttl: Duration, max_tombstones: usize) -> usize {
        let expired: Vec<String> = lock(&self.live)
            .values()
            .filter(|s| s.idle_for().is_some_and(|idle| idle > ttl))
            .map(|s| s.id.clone())
            .collect();
        for id in &expired {
            self.delete(id, max_tombstones);
        }
        expired.len()
    }
}

/// How often idle sessions are looked for.
fn expiry_interval(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
}

/// Expires idle sessions until the server stops.
pub(crate) async fn expire_idle_sessions(state: Weak<super::AppState>) {
    let Some((ttl, stop)) = state
        .upgrade()
        .map(|s| (s.settings.limits.session_idle_ttl, s.stop.clone()))
    else {
        return;
    };
    let mut ticks = tokio::time::interval(expiry_interval(ttl));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(state) = state.upgrade() else {
            return;
        };
        let expired = state
            .sessions
            .expire_idle(ttl, state.settings.limits.max_tombstones);
        if expired > 0 {
            tracing::info!(expired, idle_ttl = ?ttl, "legacy sessions expired after being idle");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_gateway::GatewaySettings;
    use manifold_wire::Revision;

    #[test]
    fn a_tombstone_is_the_key_id_and_the_nonces_first_sixteen_characters() {
        assert_eq!(
            tombstone_key("k1.0123456789abcdefXYZ"),
            "k1.0123456789abcdef"
        );
        assert_eq!(tombstone_key("k1.short"), "k1.short");
        assert_eq!(tombstone_key("k1.ééééééééééééééééé"), "k1.éééééééééééééééé");
        assert_eq!(
            tombstone_key("no-dot-0123456789abcdef"),
            ".no-dot-012345678"
        );
        assert_eq!(tombstone_key(""), ".");
        assert!(matches!(tombstone_key("k1.x"), Cow::Borrowed(_)));
    }

    #[test]
    fn deleted_ids_are_remembered_up_to_the_bound() {
        let table = SessionTable::default();
        for n in 0..5 {
            table.delete(&format!("k1.{n:016}-rest-of-the-sealed-id"), 3);
        }
        assert!(!table.is_ended("k1.0000000000000000-rest-of-the-sealed-id"));
        assert!(!table.is_ended("k1.0000000000000001-rest-of-the-sealed-id"));
        assert!(table.is_ended("k1.0000000000000004-rest-of-the-sealed-id"));
        assert!(
            table.is_ended("k1.0000000000000004-another-tail"),
            "keyed by key id and nonce"
        );
    }

    #[tokio::test]
    async fn a_session_keeps_at_most_the_bound_of_streams_letting_finished_ones_go_first() {
        let gateway = Gateway::start(GatewaySettings::default(), Vec::new());
        let limits = Limits {
            max_retained_streams: 3,
            ..Limits::default()
        };
        let view = ClientView {
            revision: Revision::V2025_11_25,
            capabilities: "{}".to_owned(),
            info: None,
        };
        let session = LiveSession::start(
            "k1.x".to_owned(),
            None,
            view,
            limits,
            &gateway,
            &CancellationToken::new(),
            None,
        );
        let (_, live) = session.new_stream();
        for _ in 0..5 {
            session.new_stream().1.finish();
        }
        let kept = lock(&session.streams).len();
        assert_eq!(kept, 3);
        assert!(
            lock(&session.streams)
                .values()
                .any(|s| Arc::ptr_eq(s, &live)),
            "an unfinished stream is never let go"
        );
        let (answered_as_json, _) = session.new_stream();
        session.release_stream(answered_as_json);
        session.release_stream(STANDALONE_STREAM);
        assert!(!lock(&session.streams).contains_key(&answered_as_json));
        // Making room for it let one more finished stream go; the live one stays.
        assert_eq!(lock(&session.streams).len(), 2);
        assert!(
            lock(&session.streams)
                .values()
                .any(|s| Arc::ptr_eq(s, &live))
        );
        session.end();
        gateway.shutdown().await;
    }
}
