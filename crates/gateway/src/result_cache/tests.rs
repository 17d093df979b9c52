//! The cache alone: keys, freshness, what is kept, and its bounds.

#![allow(clippy::unwrap_used)]

use super::*;

fn answer(result: &str) -> Message {
    Message::decode(format!(r#"{{"jsonrpc":"2.0","id":7,"result":{result}}}"#).as_bytes()).unwrap()
}

const OK: &str = r#"{"content":[{"type":"text","text":"12:00"}]}"#;
const TTL: Duration = Duration::from_secs(60);

#[test]
fn a_key_tells_callers_servers_tools_and_arguments_apart_but_not_spellings_of_one_argument_set() {
    let key = |caller, server, tool, args| CacheKey::of(caller, server, tool, args).unwrap();
    let base = key(Some("alice"), "time", "now", r#"{"tz":"UTC","fmt":1}"#);
    assert_eq!(
        base,
        key(
            Some("alice"),
            "time",
            "now",
            r#"{ "fmt": 1.0, "tz": "UTC" }"#
        )
    );
    assert_ne!(
        base,
        key(Some("bob"), "time", "now", r#"{"tz":"UTC","fmt":1}"#)
    );
    assert_ne!(base, key(None, "time", "now", r#"{"tz":"UTC","fmt":1}"#));
    assert_ne!(
        base,
        key(Some("alice"), "clock", "now", r#"{"tz":"UTC","fmt":1}"#)
    );
    assert_ne!(
        base,
        key(Some("alice"), "time", "later", r#"{"tz":"UTC","fmt":1}"#)
    );
    assert_ne!(
        base,
        key(Some("alice"), "time", "now", r#"{"tz":"CET","fmt":1}"#)
    );
    // Length-prefixed parts: moving a boundary makes another key.
    assert_ne!(
        key(Some("ab"), "c", "t", "{}"),
        key(Some("a"), "bc", "t", "{}")
    );
    assert!(CacheKey::of(None, "s", "t", "{not json").is_none());
    let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(MAX_CACHED_ARGUMENT_BYTES));
    assert!(CacheKey::of(None, "s", "t", &big).is_none());
}

#[test]
fn an_answer_is_given_again_until_its_time_is_up_with_its_age() {
    let cache = ResultCache::default();
    let key = CacheKey::of(None, "s", "t", "{}").unwrap();
    let t0 = Instant::now();
    assert!(cache.get(&key, t0).is_none());
    assert!(cache.put(key, &answer(OK), (TTL, t0, 0)));
    let (hit, age) = cache.get(&key, t0 + Duration::from_secs(59)).unwrap();
    assert_eq!(hit.result_raw(), Some(OK));
    assert_eq!(age, Duration::from_secs(59));
    assert!(cache.get(&key, t0 + TTL).is_none());
    assert!(cache.is_empty(), "an expired entry is dropped when found");
}

#[test]
fn errors_tool_errors_and_unfinished_exchanges_are_never_kept() {
    let cache = ResultCache::default();
    let key = CacheKey::of(None, "s", "t", "{}").unwrap();
    let now = Instant::now();
    let error =
        Message::decode(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"down"}}"#)
            .unwrap();
    assert!(!cache.put(key, &error, (TTL, now, 0)));
    for result in [
        r#"{"content":[],"isError":true}"#,
        r#"{"resultType":"input_required","inputRequests":{}}"#,
        r#"{"task":{"taskId":"t1","status":"working"}}"#,
    ] {
        assert!(!cache.put(key, &answer(result), (TTL, now, 0)), "{result}");
    }
    assert!(cache.put(
        key,
        &answer(r#"{"resultType":"complete","content":[]}"#),
        (TTL, now, 0)
    ));
    assert!(cache.put(
        key,
        &answer(r#"{"content":[],"isError":false}"#),
        (TTL, now, 0)
    ));
    let big = format!(
        r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#,
        "x".repeat(MAX_CACHED_RESULT_BYTES)
    );
    let other = CacheKey::of(None, "s", "t", r#"{"a":1}"#).unwrap();
    assert!(!cache.put(other, &answer(&big), (TTL, now, 0)));
    assert_eq!(cache.len(), 1);
}

#[test]
fn past_the_entry_bound_the_entries_nearest_their_end_go_first() {
    let cache = ResultCache::default();
    let now = Instant::now();
    let key = |i: usize| CacheKey::of(None, "s", "t", &format!(r#"{{"i":{i}}}"#)).unwrap();
    for i in 0..MAX_CACHED_RESULTS {
        // Entry i lives i seconds longer than entry 0.
        let ttl = TTL + Duration::from_secs(i as u64);
        assert!(cache.put(key(i), &answer(OK), (ttl, now, 0)));
    }
    assert_eq!(cache.len(), MAX_CACHED_RESULTS);
    assert!(cache.put(key(MAX_CACHED_RESULTS), &answer(OK), (TTL * 100, now, 0)));
    assert_eq!(cache.len(), MAX_CACHED_RESULTS);
    assert!(cache.get(&key(0), now).is_none(), "the soonest to end went");
    assert!(cache.get(&key(1), now).is_some());
    assert!(cache.get(&key(MAX_CACHED_RESULTS), now).is_some());
    cache.clear();
    assert!(cache.is_empty());
}

#[test]
fn past_the_byte_bound_the_entries_nearest_their_end_go_first() {
    let cache = ResultCache::default();
    let now = Instant::now();
    let text = "x".repeat(200 * 1024);
    let big = answer(&format!(
        r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#
    ));
    let each = big.result_raw().unwrap().len();
    let fit = MAX_CACHED_BYTES / each;
    let key = |i: usize| CacheKey::of(None, "s", "t", &format!(r#"{{"i":{i}}}"#)).unwrap();
    for i in 0..fit + 3 {
        let ttl = TTL + Duration::from_secs(i as u64);
        assert!(cache.put(key(i), &big, (ttl, now, 0)));
        assert!(
            cache.bytes() <= MAX_CACHED_BYTES,
            "{} after {i}",
            cache.bytes()
        );
    }
    assert_eq!(cache.len(), fit);
    assert_eq!(cache.bytes(), fit * each);
    for gone in 0..3 {
        assert!(cache.get(&key(gone), now).is_none(), "{gone}");
    }
    assert!(cache.get(&key(3), now).is_some());
    assert!(cache.get(&key(fit + 2), now).is_some());
}

#[test]
fn an_answer_asked_for_before_the_cache_was_emptied_is_not_kept_after() {
    let cache = ResultCache::default();
    let key = CacheKey::of(None, "s", "t", "{}").unwrap();
    let now = Instant::now();
    let asked = cache.generation();
    cache.clear();
    assert!(!cache.put(key, &answer(OK), (TTL, now, asked)));
    assert!(cache.put(key, &answer(OK), (TTL, now, cache.generation())));
}
