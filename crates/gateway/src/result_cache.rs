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

    /// Keeps `response` for `ttl` from `now` if it is a whole, successful tool result of a
    /// keepable size; says whether it was kept.
    pub fn put(&self, key: CacheKey, response: &Message, ttl: Duration, now: Instant) -> bool {
        let Some(result) = response.result_raw() else {
            return false;
        };
        if result.len() > MAX_CACHED_RESULT_BYTES || !is_complete_success(result) {
            return false;
        }
        let bytes = result.len();
        let mut entries = self.entries();
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
    }

    /// Entries kept now (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.entries().map.len()
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
pub(crate) struct Cacheable {
    pub(crate) key: CacheKey,
    pub(crate) ttl: Duration,
    /// When the cache was asked: a fresh answer is kept from then, never longer than `ttl`.
    pub(crate) asked: Instant,
}

/// What a call to a tool is, for the cache.
pub(crate) struct ToolCallFacts<'a> {
    pub(crate) server: &'a str,
    /// The tool's name on its server.
    pub(crate) original: &'a str,
    /// The tool's exposed name.
    pub(crate) name: &'a str,
    /// Whether a person approved this call (an approved call is never answered from here).
    pub(crate) approved: bool,
}

impl crate::state::Core {
    /// Whether this call may be answered from, and kept in, the cache: its server has a
    /// `cache_ttl` and shares its connection between callers' sessions (a session's own server
    /// may answer from that session's state), the call needed no approval, and the tool is
    /// read-only and idempotent by its definition as shown (overrides included) or by the
    /// server's `idempotent_tools`.
    pub(crate) fn cacheable(
        &self,
        ctx: &crate::context::RequestContext,
        catalog: &crate::catalog::build::Catalog,
        request: &Message,
        upstream: &crate::upstream::Upstream,
        call: &ToolCallFacts<'_>,
    ) -> Option<Cacheable> {
        let ttl = upstream.def.result_cache_ttl?;
        if call.approved || upstream.def.scope == crate::upstream::Scope::Session {
            return None;
        }
        let raw = &catalog.tool_entry(call.name)?.raw;
        let hint = |name: &str| {
            manifold_wire::patch::get(raw, &["annotations", name])
                .ok()
                .flatten()
                .is_some_and(|v| v.trim() == "true")
        };
        if !hint("readOnlyHint") || !self.idempotent(catalog, call.server, call.original, call.name)
        {
            return None;
        }
        let arguments = request.params_raw(&["arguments"]).unwrap_or("{}");
        let caller = ctx.caller.as_deref().map(|c| c.name.as_str());
        let key = CacheKey::of(caller, call.server, call.original, arguments)?;
        Some(Cacheable {
            key,
            ttl,
            asked: Instant::now(),
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
