//! Answers of read-only, idempotent tools kept for a while (`[servers.NAME] cache_ttl`), so that
//! the same call by the same caller within that time is answered without the server. Opt-in per
//! server, and only for tools whose definition says `readOnlyHint` and `idempotentHint` (or that
//! the server's `idempotent_tools` names): a tool that changes something, or whose answer may
//! differ for the same arguments, is never answered from here.
//!
//! A cached answer is the upstream's own answer, before it is patched back for a client: links,
//! hidden resources and the size cap are applied for the caller who asks each time, and the
//! caller's rules are checked before the cache is asked. Entries are keyed by the caller (a
//! caller never gets another's answer), the server, the tool and the canonical form of the
//! arguments. The cache is emptied when a tool list changes or a reload changes the rules.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use manifold_wire::Message;
use sha2::{Digest, Sha256};

/// Entries kept at most; past it the entries nearest their end are dropped first.
pub const MAX_CACHED_RESULTS: usize = 4096;
/// Bytes of answers kept at most, all entries together.
pub const MAX_CACHED_BYTES: usize = 32 * 1024 * 1024;
/// A larger answer is not kept.
pub const MAX_CACHED_RESULT_BYTES: usize = 256 * 1024;
/// Calls whose arguments are larger are not looked up or kept.
pub const MAX_CACHED_ARGUMENT_BYTES: usize = 64 * 1024;

/// What identifies one call for the cache: a digest of the caller, the server, the tool and
/// the arguments' canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The key of a call; `None` when its arguments are too large or not JSON to canonicalize.
    pub fn of(caller: Option<&str>, server: &str, tool: &str, arguments: &str) -> Option<CacheKey> {
        if arguments.len() > MAX_CACHED_ARGUMENT_BYTES {
            return None;
        }
        let canonical = crate::pins::canonical_form(arguments).ok()?;
        let mut digest = Sha256::new();
        // Each part is length-prefixed, so no two different calls share a byte string.
        for part in [
            caller.map_or("\u{0}anonymous", |c| c),
            server,
            tool,
            &canonical,
        ] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part.as_bytes());
        }
        Some(CacheKey(digest.finalize().into()))
    }
}

struct Entry {
    response: Message,
    stored: Instant,
    expires: Instant,
    bytes: usize,
}

#[derive(Default)]
struct Entries {
    map: HashMap<CacheKey, Entry, foldhash::fast::RandomState>,
    bytes: usize,
    /// Counts the clears: an answer asked for before one (under the old tools or rules) is not
    /// kept after it.
    generation: u64,
}

impl Entries {
    fn remove(&mut self, key: &CacheKey) {
        if let Some(e) = self.map.remove(key) {
            self.bytes -= e.bytes;
        }
    }

    fn full(&self, room: usize) -> bool {
        self.map.len() >= MAX_CACHED_RESULTS || self.bytes + room > MAX_CACHED_BYTES
    }

    /// Drops expired entries, then those nearest their end, until `room` more bytes and one
    /// more entry fit. Below the bounds nothing is scanned: an expired entry waits to be found
    /// or to be in the way.
    fn make_room(&mut self, room: usize, now: Instant) {
        if !self.full(room) {
            return;
        }
        let expired: Vec<CacheKey> = self
            .map
            .iter()
            .filter(|(_, e)| e.expires <= now)
            .map(|(k, _)| *k)
            .collect();
        for k in &expired {
            self.remove(k);
        }
        while !self.map.is_empty() && self.full(room) {
            let Some(soonest) = self
                .map
                .iter()
                .min_by_key(|(_, e)| e.expires)
                .map(|(k, _)| *k)
            else {
                return;
            };
            self.remove(&soonest);
        }
    }
}

/// The kept answers of one gateway.
#[derive(Default)]
pub struct ResultCache {
    entries: Mutex<Entries>,
}

impl ResultCache {
    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept answer of this call and its age, if one is still fresh at `now`.
    pub fn get(&self, key: &CacheKey, now: Instant) -> Option<(Message, Duration)> {
        let mut entries = self.entries();
        let entry = entries.map.get(key)?;
        if entry.expires <= now {
            entries.remove(key);
            return None;
        }
        Some((
            entry.response.clone(),
            now.saturating_duration_since(entry.stored),
        ))
    }

    /// What [`ResultCache::put`] is given with an answer: the cache as it was when the call
    /// was asked for.
    pub fn generation(&self) -> u64 {
        self.entries().generation
    }

    /// Keeps `response` for `ttl` from `now` if it is a whole, successful tool result of a
    /// keepable size, and the cache was not emptied since `generation`; says whether it was
    /// kept.
    pub fn put(
        &self,
        key: CacheKey,
        response: &Message,
        (ttl, now, generation): (Duration, Instant, u64),
    ) -> bool {
        let Some(result) = response.result_raw() else {
            return false;
        };
        if result.len() > MAX_CACHED_RESULT_BYTES || !is_complete_success(result) {
            return false;
        }
        let bytes = result.len();
        let mut entries = self.entries();
        if entries.generation != generation {
            return false;
        }
        entries.remove(&key);
        entries.make_room(bytes, now);
        entries.bytes += bytes;
        entries.map.insert(
            key,
            Entry {
                response: response.clone(),
                stored: now,
                expires: now + ttl,
                bytes,
            },
        );
        true
    }

    /// Forgets every answer (a tool list changed; the rules changed).
    pub fn clear(&self) {
        let mut entries = self.entries();
        entries.map.clear();
        entries.bytes = 0;
        entries.generation += 1;
    }

    /// Entries kept now (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.entries().map.len()
    }

    /// Bytes of answers kept now.
    pub fn bytes(&self) -> usize {
        self.entries().bytes
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `_meta` member of a result given again from the cache: `{"ageMs": N}`.
pub const CACHED_META: &str = "io.manifold/cached";

/// A kept answer as it is given again: its result's `_meta` says so, and how old it is.
pub fn marked_as_kept(kept: &Message, age: Duration) -> Message {
    let (Some(id), Some(result)) = (kept.id(), kept.result_raw()) else {
        return kept.clone();
    };
    let age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
    let note = format!(r#"{{"ageMs":{age_ms}}}"#);
    match manifold_wire::patch::decoded::set(result, &["_meta", CACHED_META], &note) {
        Ok(marked) => Message::result(id, &marked),
        Err(_) => kept.clone(),
    }
}

/// Where a call that may be answered from the cache is kept, and for how long.
pub struct Cacheable {
    pub key: CacheKey,
    pub ttl: Duration,
    /// When the cache was asked: a fresh answer is kept from then, never longer than `ttl`.
    pub asked: Instant,
    /// The cache's generation then (`ResultCache::generation`).
    pub generation: u64,
}

/// What a call to a tool of a server with a `cache_ttl` is, for the cache.
pub struct ToolCall<'a> {
    /// The server's `cache_ttl`.
    pub ttl: Duration,
    /// Whether each session has its own connection to the server (its answers may come from
    /// that session's state).
    pub session_scoped: bool,
    /// Whether a person approved this call.
    pub approved: bool,
    /// Who calls (`None`: authentication is off).
    pub caller: Option<&'a str>,
    pub server: &'a str,
    /// The tool's name on its server.
    pub original: &'a str,
    /// The tool's definition as shown (overrides included): its annotations decide.
    pub definition: Option<&'a str>,
    /// The call's `params.arguments`, raw.
    pub arguments: &'a str,
}

impl ResultCache {
    /// Whether this call may be answered from, and kept in, the cache: the call needed no
    /// approval, its server shares one connection between sessions, and the tool is read-only
    /// (`readOnlyHint`) and `idempotent` (its `idempotentHint`, or the server's
    /// `idempotent_tools`: asked last, as it reads the definition again).
    pub fn cacheable(
        &self,
        call: &ToolCall<'_>,
        idempotent: impl FnOnce() -> bool,
    ) -> Option<Cacheable> {
        if call.approved || call.session_scoped {
            return None;
        }
        let read_only =
            manifold_wire::patch::get(call.definition?, &["annotations", "readOnlyHint"])
                .ok()
                .flatten()
                .is_some_and(|v| v.trim() == "true");
        if !read_only || !idempotent() {
            return None;
        }
        let key = CacheKey::of(call.caller, call.server, call.original, call.arguments)?;
        Some(Cacheable {
            key,
            ttl: call.ttl,
            asked: Instant::now(),
            generation: self.generation(),
        })
    }
}

/// A result that is neither a tool error nor a step of a longer exchange (`input_required`, a
/// task): only those may be given again.
fn is_complete_success(result: &str) -> bool {
    let field = |name: &str| {
        manifold_wire::patch::get(result, &[name])
            .ok()
            .flatten()
            .map(str::trim)
    };
    field("isError") != Some("true")
        && field("resultType").is_none_or(|t| t == "\"complete\"")
        && field("task").is_none()
}

#[cfg(test)]
mod tests;
