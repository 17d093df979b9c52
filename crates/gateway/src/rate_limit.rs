//! How often a caller may ask: token buckets per identity and per identity and tool, in memory.
//!
//! One identity (or every unauthenticated caller together, as "anonymous") must not be able to
//! starve the upstreams for everyone else, and one expensive tool may deserve a tighter limit than
//! the rest. A bucket is kept as a single timestamp (the generic cell rate algorithm, which is a
//! token bucket in one number): a request is admitted while the bucket's debt stays within its
//! burst, and a refusal knows exactly how long until the next token.
//!
//! The maps are bounded ([`MAX_IDENTITY_BUCKETS`], [`MAX_TOOL_BUCKETS`]). When one is full, the
//! buckets that have refilled completely are dropped first (a full bucket is the same as no
//! bucket, so nothing is forgiven); if none has, the bucket owing the least time goes, which
//! forgives as little as possible. A restart or a reload starts every bucket full. Replicas that
//! share a store also share their buckets (`shared_limits.rs`): each bucket counts what it spent
//! since the last round, and a round adds that to the shared bucket and adopts its state.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::patterns::NamePatterns;

/// Most identities tracked at once.
pub const MAX_IDENTITY_BUCKETS: usize = 10_000;
/// Most (identity, tool) pairs tracked at once.
pub const MAX_TOOL_BUCKETS: usize = 100_000;

/// `count` requests per `period`, with bursts of up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub count: u32,
    pub period: Duration,
    pub burst: u32,
}

impl Limit {
    /// `count` per `period`, bursting up to `count`.
    pub fn per(count: u32, period: Duration) -> Limit {
        Limit {
            count,
            period,
            burst: count,
        }
    }

    /// The time one token takes to come back.
    fn interval(&self) -> Duration {
        self.period / self.count.max(1)
    }

    /// How far ahead of now a bucket's theoretical arrival time may run: `burst - 1` intervals.
    fn tolerance(&self) -> Duration {
        self.interval()
            .saturating_mul(self.burst.max(1).saturating_sub(1))
    }

    /// "5 requests per minute", "1 call of \"git__push\" per 10000 ms (bursts of 2)", for
    /// messages: `noun` is singular, `of` what the calls are of.
    pub fn describe(&self, noun: &str, of: Option<&str>) -> String {
        let period = match self.period.as_secs() {
            1 if self.period.subsec_nanos() == 0 => "second".to_owned(),
            60 if self.period.subsec_nanos() == 0 => "minute".to_owned(),
            3600 if self.period.subsec_nanos() == 0 => "hour".to_owned(),
            86_400 if self.period.subsec_nanos() == 0 => "day".to_owned(),
            _ => format!("{} ms", self.period.as_millis()),
        };
        let plural = if self.count == 1 { "" } else { "s" };
        let of = of.map(|o| format!(" of {o:?}")).unwrap_or_default();
        let mut out = format!("{} {noun}{plural}{of} per {period}", self.count);
        if self.burst != self.count {
            out.push_str(&format!(" (bursts of {})", self.burst));
        }
        out
    }
}

/// A tighter (or looser) limit for the tools some patterns match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLimitSpec {
    /// Glob patterns over exposed tool names.
    pub tools: Vec<String>,
    pub limit: Limit,
}

/// The limits as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitSpec {
    /// Every request of one identity except `ping` and the lists.
    pub per_identity: Option<Limit>,
    /// Calls of one identity to one server tool, unless a `tools` entry matches it.
    pub per_tool: Option<Limit>,
    /// First match wins over `per_tool`.
    pub tools: Vec<ToolLimitSpec>,
}

impl RateLimitSpec {
    /// Whether no limit is configured at all.
    pub fn is_empty(&self) -> bool {
        self.per_identity.is_none() && self.per_tool.is_none() && self.tools.is_empty()
    }
}

/// A pattern that is not a glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate_limits.tools[{index}]: {pattern:?} is not a valid pattern ({reason})")]
pub struct LimitPatternError {
    pub index: usize,
    pub pattern: String,
    pub reason: String,
}

/// Compiled limits: what the gateway consults.
#[derive(Debug, Clone, Default)]
pub struct RateLimits {
    spec: RateLimitSpec,
    tool_sets: Vec<NamePatterns>,
}

impl RateLimits {
    /// Compiles the tool patterns the way the configuration validated them.
    pub fn compile(spec: RateLimitSpec) -> Result<RateLimits, LimitPatternError> {
        let mut tool_sets = Vec::with_capacity(spec.tools.len());
        for (index, entry) in spec.tools.iter().enumerate() {
            let compiled =
                NamePatterns::compile(entry.tools.clone()).map_err(|bad| LimitPatternError {
                    index,
                    pattern: bad.pattern,
                    reason: bad.reason,
                })?;
            tool_sets.push(compiled);
        }
        Ok(RateLimits { spec, tool_sets })
    }

    /// Whether any limit is configured at all.
    pub fn is_empty(&self) -> bool {
        self.spec.is_empty()
    }

    pub fn spec(&self) -> &RateLimitSpec {
        &self.spec
    }

    /// The limit for calls of `tool` and the configuration key it comes from.
    fn for_tool(&self, tool: &str) -> Option<(Limit, String)> {
        for (index, (entry, set)) in self.spec.tools.iter().zip(&self.tool_sets).enumerate() {
            if set.is_match(tool) {
                return Some((entry.limit, format!("rate_limits.tools[{index}]")));
            }
        }
        self.spec
            .per_tool
            .map(|l| (l, "rate_limits.per_tool".to_owned()))
    }
}

/// Whose bucket a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who<'a> {
    Anonymous,
    Identity(&'a str),
}

impl Who<'_> {
    /// `"alice"`, or `anonymous callers`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Who::Anonymous => "anonymous callers".to_owned(),
            Who::Identity(name) => format!("{name:?}"),
        }
    }

    /// The bucket key: a tag byte keeps every identity, whatever its name, apart from the
    /// anonymous callers.
    fn key(&self) -> String {
        match self {
            Who::Anonymous => "a".to_owned(),
            Who::Identity(name) => format!("i{name}"),
        }
    }
}

/// A refused request: which limit, and how long until it would pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// The configuration key of the limit (`rate_limits.per_identity`, `rate_limits.tools[0]`).
    pub limit_key: String,
    pub limit: Limit,
    pub retry_after: Duration,
}

impl Exceeded {
    /// Milliseconds until a retry can pass, rounded up (never 0: "now" already failed).
    pub fn retry_after_ms(&self) -> u64 {
        let ms = self.retry_after.as_nanos().div_ceil(1_000_000);
        u64::try_from(ms).unwrap_or(u64::MAX).max(1)
    }

    /// Whole seconds for an HTTP `Retry-After` header, rounded up.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after_ms().div_ceil(1000)
    }
}

/// For an HTTP transport: the whole seconds of a `Retry-After` header for a response that
/// refuses a request over a rate limit (-32006 with `data.retryAfterMs`); `None` for any other.
pub fn retry_after_secs_of(response: &manifold_wire::Message) -> Option<u64> {
    retry_after_secs_of_error(&response.error_object()?)
}

/// As [`retry_after_secs_of`], for the error itself.
pub fn retry_after_secs_of_error(error: &manifold_wire::ErrorObject) -> Option<u64> {
    if error.code != manifold_wire::ErrorCode::Overloaded.code() {
        return None;
    }
    let ms = manifold_wire::patch::get(error.data.as_ref()?.get(), &["retryAfterMs"])
        .ok()
        .flatten()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(ms.div_ceil(1000))
}

/// The wait before a retry, as people read it: rounded up to the unit it is counted in.
pub fn human_wait(wait: Duration) -> String {
    let ms = wait.as_millis().max(1);
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let secs = ms.div_ceil(1000);
    if secs < 60 {
        return format!("{secs} s");
    }
    if secs < 3600 {
        return format!("{} min", secs.div_ceil(60));
    }
    format!("{} h", secs.div_ceil(3600))
}

/// One bucket: the theoretical arrival time of the next request.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tat: Instant,
    /// Refill time this bucket's admissions cost since the last shared round.
    spent: Duration,
}

impl Bucket {
    /// Takes one token, or says how long until one is there.
    fn take(&mut self, limit: &Limit, now: Instant) -> Result<(), Duration> {
        let tat = self.tat.max(now);
        let ahead = tat.duration_since(now);
        let tolerance = limit.tolerance();
        if ahead > tolerance {
            return Err(ahead - tolerance);
        }
        self.tat = tat.checked_add(limit.interval()).unwrap_or(tat);
        self.spent = self.spent.saturating_add(limit.interval());
        Ok(())
    }

    /// Whether the bucket has refilled completely (forgetting it changes nothing).
    fn is_full(&self, now: Instant) -> bool {
        self.tat <= now
    }
}

/// A bounded map of buckets.
#[derive(Debug)]
struct Buckets {
    map: HashMap<String, Bucket>,
    max: usize,
}

impl Buckets {
    fn new(max: usize) -> Buckets {
        Buckets {
            map: HashMap::new(),
            max: max.max(1),
        }
    }

    fn take(&mut self, key: String, limit: &Limit, now: Instant) -> Result<(), Duration> {
        if let Some(bucket) = self.map.get_mut(&key) {
            return bucket.take(limit, now);
        }
        if self.map.len() >= self.max {
            self.map.retain(|_, b| !b.is_full(now));
        }
        if self.map.len() >= self.max
            && let Some(least) = self
                .map
                .iter()
                .min_by_key(|(_, b)| b.tat)
                .map(|(k, _)| k.clone())
        {
            self.map.remove(&least);
        }
        let mut bucket = Bucket {
            tat: now,
            spent: Duration::ZERO,
        };
        let taken = bucket.take(limit, now);
        self.map.insert(key, bucket);
        taken
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    /// What a shared round sends: every bucket that spent since the last round or is still
    /// refilling (others may have spent on it), with its spend, which starts again from zero.
    fn spends(&mut self, now: Instant, tag: &str, out: &mut Vec<(String, Duration)>) {
        for (key, bucket) in &mut self.map {
            if bucket.spent > Duration::ZERO || !bucket.is_full(now) {
                out.push((format!("{tag}{key}"), std::mem::take(&mut bucket.spent)));
            }
        }
    }

    /// Takes in the shared state of `key`: its next arrival is `ahead` of `now`, counting this
    /// bucket's spend up to the round; what it admitted since still comes on top.
    fn adopt(&mut self, key: &str, ahead: Duration, now: Instant) {
        if let Some(bucket) = self.map.get_mut(key) {
            let shared = now.checked_add(ahead.saturating_add(bucket.spent));
            if let Some(shared) = shared {
                bucket.tat = bucket.tat.max(shared);
            }
        }
    }

    /// Gives back a spend a failed round could not share, so the next round sends it.
    fn restore(&mut self, key: &str, spent: Duration) {
        if let Some(bucket) = self.map.get_mut(key) {
            bucket.spent = bucket.spent.saturating_add(spent);
        }
    }
}

/// The tags that keep the two maps' keys apart in a shared store.
const IDENTITY_TAG: &str = "id/";
const TOOL_TAG: &str = "tool/";

/// The buckets of one gateway.
#[derive(Debug)]
pub struct RateLimiter {
    limits: RateLimits,
    identities: Mutex<Buckets>,
    tools: Mutex<Buckets>,
}

impl RateLimiter {
    pub fn new(limits: RateLimits) -> RateLimiter {
        RateLimiter::with_bounds(limits, MAX_IDENTITY_BUCKETS, MAX_TOOL_BUCKETS)
    }

    /// With other bounds on the maps (tests of eviction).
    pub fn with_bounds(limits: RateLimits, identities: usize, tools: usize) -> RateLimiter {
        RateLimiter {
            limits,
            identities: Mutex::new(Buckets::new(identities)),
            tools: Mutex::new(Buckets::new(tools)),
        }
    }

    pub fn limits(&self) -> &RateLimits {
        &self.limits
    }

    /// Whether no limit is configured (every check passes without locking).
    pub fn is_off(&self) -> bool {
        self.limits.is_empty()
    }

    /// Counts one request of `who` against `rate_limits.per_identity`.
    pub fn check_identity(&self, who: Who<'_>, now: Instant) -> Result<(), Exceeded> {
        let Some(limit) = self.limits.spec.per_identity else {
            return Ok(());
        };
        let mut buckets = self
            .identities
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        buckets
            .take(who.key(), &limit, now)
            .map_err(|retry_after| Exceeded {
                limit_key: "rate_limits.per_identity".to_owned(),
                limit,
                retry_after,
            })
    }

    /// Counts one call of the server tool `tool` by `who`.
    pub fn check_tool(&self, who: Who<'_>, tool: &str, now: Instant) -> Result<(), Exceeded> {
        let Some((limit, limit_key)) = self.limits.for_tool(tool) else {
            return Ok(());
        };
        // Exposed tool names hold no NUL, so the last NUL splits the key unambiguously.
        let mut key = who.key();
        key.push('\0');
        key.push_str(tool);
        let mut buckets = self
            .tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        buckets
            .take(key, &limit, now)
            .map_err(|retry_after| Exceeded {
                limit_key,
                limit,
                retry_after,
            })
    }

    /// One round's spends of both maps, keyed as the shared store keeps them; each bucket's
    /// spend starts again from zero.
    pub(crate) fn take_spends(&self, now: Instant) -> Vec<(String, Duration)> {
        let mut out = Vec::new();
        for (map, tag) in [(&self.identities, IDENTITY_TAG), (&self.tools, TOOL_TAG)] {
            map.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .spends(now, tag, &mut out);
        }
        out
    }

    /// Takes in the shared state of a bucket, keyed as [`RateLimiter::take_spends`] gave it.
    pub(crate) fn adopt(&self, key: &str, ahead: Duration, now: Instant) {
        if let Some((map, key)) = self.map_of(key) {
            map.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .adopt(key, ahead, now);
        }
    }

    /// Gives a spend back after a failed round.
    pub(crate) fn restore(&self, key: &str, spent: Duration) {
        if let Some((map, key)) = self.map_of(key) {
            map.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .restore(key, spent);
        }
    }

    fn map_of<'k>(&self, key: &'k str) -> Option<(&Mutex<Buckets>, &'k str)> {
        if let Some(rest) = key.strip_prefix(IDENTITY_TAG) {
            return Some((&self.identities, rest));
        }
        key.strip_prefix(TOOL_TAG).map(|rest| (&self.tools, rest))
    }

    /// Buckets held now: (identities, identity-and-tool pairs).
    pub fn tracked(&self) -> (usize, usize) {
        let count = |m: &Mutex<Buckets>| {
            m.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len()
        };
        (count(&self.identities), count(&self.tools))
    }
}

#[cfg(test)]
mod tests;
