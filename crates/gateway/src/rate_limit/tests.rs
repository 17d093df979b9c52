//! The unit tests of `rate_limit.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;

fn limiter(spec: RateLimitSpec) -> RateLimiter {
    RateLimiter::new(RateLimits::compile(spec).unwrap())
}

const SEC: Duration = Duration::from_secs(1);

#[test]
fn a_bucket_admits_its_burst_then_one_per_interval() {
    let l = limiter(RateLimitSpec {
        per_identity: Some(Limit::per(3, SEC)),
        ..RateLimitSpec::default()
    });
    let t0 = Instant::now();
    let alice = Who::Identity("alice");
    for _ in 0..3 {
        assert!(l.check_identity(alice, t0).is_ok());
    }
    let refused = l.check_identity(alice, t0).unwrap_err();
    assert_eq!(refused.limit_key, "rate_limits.per_identity");
    // The next token is one third of a second away.
    assert_eq!(refused.retry_after, SEC / 3);
    assert_eq!(refused.retry_after_ms(), 334);
    assert_eq!(refused.retry_after_secs(), 1);
    // Just before that, still refused; at that moment, admitted once.
    assert!(
        l.check_identity(alice, t0 + SEC / 3 - Duration::from_nanos(1))
            .is_err()
    );
    assert!(l.check_identity(alice, t0 + SEC / 3).is_ok());
    assert!(l.check_identity(alice, t0 + SEC / 3).is_err());
}

#[test]
fn identities_and_anonymous_callers_have_their_own_buckets() {
    let l = limiter(RateLimitSpec {
        per_identity: Some(Limit::per(1, SEC)),
        ..RateLimitSpec::default()
    });
    let t0 = Instant::now();
    assert!(l.check_identity(Who::Identity("alice"), t0).is_ok());
    assert!(l.check_identity(Who::Identity("alice"), t0).is_err());
    assert!(l.check_identity(Who::Identity("bob"), t0).is_ok());
    assert!(l.check_identity(Who::Anonymous, t0).is_ok());
    assert!(l.check_identity(Who::Anonymous, t0).is_err());
    // An identity named like anonymous callers is still someone else.
    assert!(l.check_identity(Who::Identity("anonymous"), t0).is_ok());
    assert!(l.check_identity(Who::Identity(""), t0).is_ok());
    assert!(l.check_identity(Who::Identity("a"), t0).is_ok());
}

#[test]
fn a_burst_smaller_than_the_count_spaces_requests_out() {
    let limit = Limit {
        count: 60,
        period: Duration::from_secs(60),
        burst: 2,
    };
    let l = limiter(RateLimitSpec {
        per_identity: Some(limit),
        ..RateLimitSpec::default()
    });
    let t0 = Instant::now();
    let who = Who::Identity("a");
    assert!(l.check_identity(who, t0).is_ok());
    assert!(l.check_identity(who, t0).is_ok());
    assert_eq!(l.check_identity(who, t0).unwrap_err().retry_after, SEC);
    assert_eq!(
        limit.describe("request", None),
        "60 requests per minute (bursts of 2)"
    );
    assert_eq!(
        Limit::per(1, Duration::from_secs(10)).describe("call", Some("a__b")),
        "1 call of \"a__b\" per 10000 ms"
    );
}

#[test]
fn tool_limits_take_the_first_matching_pattern_then_the_default() {
    let l = limiter(RateLimitSpec {
        per_tool: Some(Limit::per(2, SEC)),
        tools: vec![
            ToolLimitSpec {
                tools: vec!["git__push*".into()],
                limit: Limit::per(1, Duration::from_secs(60)),
            },
            ToolLimitSpec {
                tools: vec!["git__*".into()],
                limit: Limit::per(5, SEC),
            },
        ],
        ..RateLimitSpec::default()
    });
    let t0 = Instant::now();
    let a = Who::Identity("a");
    assert!(l.check_tool(a, "git__push", t0).is_ok());
    let e = l.check_tool(a, "git__push", t0).unwrap_err();
    assert_eq!(e.limit_key, "rate_limits.tools[0]");
    assert_eq!(e.retry_after, Duration::from_secs(60));
    // Another tool, another bucket; another identity, another bucket.
    assert!(l.check_tool(a, "git__push_force", t0).is_ok());
    assert!(l.check_tool(Who::Identity("b"), "git__push", t0).is_ok());
    for _ in 0..5 {
        assert!(l.check_tool(a, "git__status", t0).is_ok());
    }
    assert_eq!(
        l.check_tool(a, "git__status", t0).unwrap_err().limit_key,
        "rate_limits.tools[1]"
    );
    assert!(l.check_tool(a, "time__now", t0).is_ok());
    assert!(l.check_tool(a, "time__now", t0).is_ok());
    assert_eq!(
        l.check_tool(a, "time__now", t0).unwrap_err().limit_key,
        "rate_limits.per_tool"
    );
    // Identity limits are not configured: never refused.
    assert!(l.check_identity(a, t0).is_ok());
}

#[test]
fn the_maps_stay_bounded_and_forget_full_buckets_first() {
    let spec = RateLimitSpec {
        per_identity: Some(Limit::per(1, Duration::from_secs(10))),
        ..RateLimitSpec::default()
    };
    let l = RateLimiter::with_bounds(RateLimits::compile(spec).unwrap(), 3, 3);
    let t0 = Instant::now();
    for name in ["a", "b", "c"] {
        assert!(l.check_identity(Who::Identity(name), t0).is_ok());
    }
    assert_eq!(l.tracked().0, 3);
    // 11 s later a, b and c have refilled: they are dropped to make room, not anyone owing.
    let t1 = t0 + Duration::from_secs(11);
    assert!(l.check_identity(Who::Identity("d"), t1).is_ok());
    assert_eq!(l.tracked().0, 1);
    let ms = Duration::from_millis(1);
    assert!(l.check_identity(Who::Identity("e"), t1 + ms).is_ok());
    assert!(l.check_identity(Who::Identity("f"), t1 + ms * 2).is_ok());
    // Everyone owes now; the one owing least ("d", first in) goes to make room for "g".
    assert!(l.check_identity(Who::Identity("g"), t1 + ms * 3).is_ok());
    assert_eq!(l.tracked().0, 3);
    assert!(
        l.check_identity(Who::Identity("e"), t1 + ms * 3).is_err(),
        "e is still counted"
    );
    assert!(
        l.check_identity(Who::Identity("d"), t1 + ms * 4).is_ok(),
        "d was forgotten"
    );
}

#[test]
fn bad_tool_patterns_are_refused_with_their_index() {
    let e = RateLimits::compile(RateLimitSpec {
        tools: vec![
            ToolLimitSpec {
                tools: vec!["ok".into()],
                limit: Limit::per(1, SEC),
            },
            ToolLimitSpec {
                tools: vec!["[bad".into()],
                limit: Limit::per(1, SEC),
            },
        ],
        ..RateLimitSpec::default()
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "rate_limits.tools[1]: \"[bad\" is not a valid pattern (unclosed character class; missing ']')"
    );
}

#[test]
fn only_rate_limit_refusals_carry_a_retry_after() {
    let refused = manifold_wire::Message::decode_str(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32006,"message":"rate limit exceeded","data":{"retryAfterMs":1001,"limit":"rate_limits.per_identity"}}}"#,
        )
        .unwrap();
    assert_eq!(retry_after_secs_of(&refused), Some(2));
    let busy = manifold_wire::Message::decode_str(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32006,"message":"too many streams"}}"#,
    )
    .unwrap();
    assert_eq!(retry_after_secs_of(&busy), None);
    let other = manifold_wire::Message::decode_str(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x","data":{"retryAfterMs":5}}}"#,
        )
        .unwrap();
    assert_eq!(retry_after_secs_of(&other), None);
}

#[test]
fn waits_read_in_the_unit_they_are_counted_in() {
    assert_eq!(human_wait(Duration::from_micros(10)), "1 ms");
    assert_eq!(human_wait(Duration::from_millis(999)), "999 ms");
    assert_eq!(human_wait(Duration::from_millis(1001)), "2 s");
    assert_eq!(human_wait(Duration::from_secs(61)), "2 min");
    assert_eq!(human_wait(Duration::from_secs(86_399)), "24 h");
}
