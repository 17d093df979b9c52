//! The unit tests of `metrics.rs`, kept beside it so the file reads as the code it tests.

use super::*;

/// The value of one sample line (`name{labels} value`) in an encoding.
fn sample(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_owned))
}

#[test]
fn requests_are_counted_by_bounded_method_era_and_outcome() {
    let m = Metrics::new();
    m.request("tools/list", Era::Modern, RequestOutcome::Ok);
    m.request("tools/list", Era::Modern, RequestOutcome::Ok);
    m.request("x/made-up-by-a-client", Era::Legacy, RequestOutcome::Error);
    let text = m.encode(&Snapshot::default());
    assert_eq!(
        sample(
            &text,
            r#"manifold_requests_total{method="tools/list",era="modern",outcome="ok"}"#
        )
        .as_deref(),
        Some("2")
    );
    assert_eq!(
        sample(
            &text,
            r#"manifold_requests_total{method="other",era="legacy",outcome="error"}"#
        )
        .as_deref(),
        Some("1")
    );
    assert!(!text.contains("made-up"), "{text}");
}

#[test]
fn approval_outcomes_are_counted_by_upstream_channel_and_outcome() {
    let m = Metrics::new();
    count_approval("approval-test-upstream", "out_of_band", "approved");
    count_approval("approval-test-upstream", "elicitation", "rejected");
    count_approval("approval-test-upstream", "elicitation", "rejected");
    let text = m.encode(&Snapshot::default());
    assert_eq!(
            sample(
                &text,
                r#"manifold_approvals_total{upstream="approval-test-upstream",channel="elicitation",outcome="rejected"}"#
            )
            .as_deref(),
            Some("2")
        );
    assert_eq!(
            sample(
                &text,
                r#"manifold_approvals_total{upstream="approval-test-upstream",channel="out_of_band",outcome="approved"}"#
            )
            .as_deref(),
            Some("1")
        );
}

#[test]
fn egress_decisions_are_counted_by_upstream_and_decision() {
    let m = Metrics::new();
    count_egress("egress-test-upstream", EgressDecision::Allowed);
    count_egress("egress-test-upstream", EgressDecision::RefusedHost);
    count_egress("egress-test-upstream", EgressDecision::RefusedHost);
    let text = m.encode(&Snapshot::default());
    assert_eq!(
            sample(
                &text,
                r#"manifold_sandbox_egress_total{upstream="egress-test-upstream",decision="refused_host"}"#
            )
            .as_deref(),
            Some("2")
        );
    assert_eq!(
        sample(
            &text,
            r#"manifold_sandbox_egress_total{upstream="egress-test-upstream",decision="allowed"}"#
        )
        .as_deref(),
        Some("1")
    );
    let names: Vec<&str> = EgressDecision::ALL.iter().map(|d| d.as_str()).collect();
    assert_eq!(
        names,
        [
            "allowed",
            "refused_host",
            "refused_address",
            "bad_request",
            "idle_timeout"
        ]
    );
}

#[test]
fn audit_queue_writes_and_drops_are_exposed() {
    let m = Metrics::new();
    let audit = m.audit();
    audit.queue_depth(7);
    audit.batch_written(3, Duration::from_micros(300));
    audit.batch_written(2, Duration::from_micros(300));
    audit.dropped(4);
    let text = m.encode(&Snapshot::default());
    assert_eq!(
        sample(&text, "manifold_audit_queue_depth").as_deref(),
        Some("7")
    );
    assert_eq!(
        sample(&text, r#"manifold_audit_rows_total{result="written"}"#).as_deref(),
        Some("5")
    );
    assert_eq!(
        sample(&text, r#"manifold_audit_rows_total{result="dropped"}"#).as_deref(),
        Some("4")
    );
    assert_eq!(
        sample(&text, "manifold_audit_write_seconds_count").as_deref(),
        Some("2")
    );
}

#[test]
fn tool_names_past_the_cap_share_the_other_label() {
    let m = Metrics::new();
    for n in 0..labels::MAX_TOOL_LABELS_PER_UPSTREAM + 50 {
        let h = m.tool("hostile", &format!("tool_{n:05}"));
        h.call_started();
        h.call_finished(CallOutcome::Ok, Duration::from_millis(1));
    }
    let long = "x".repeat(labels::MAX_LABEL_VALUE_LEN + 1);
    assert_eq!(m.tool("hostile", &long).tool_label(), labels::OTHER_TOOL);
    assert_eq!(
        m.tool("other-server", &long).tool_label(),
        labels::OTHER_TOOL
    );
    assert_eq!(m.tool("other-server", "echo").tool_label(), "echo");
    let text = m.encode(&Snapshot::default());
    let series = text
        .lines()
        .filter(|l| l.starts_with("manifold_tool_calls_total{upstream=\"hostile\""))
        .count();
    assert_eq!(series, labels::MAX_TOOL_LABELS_PER_UPSTREAM + 1);
    assert_eq!(
        sample(
            &text,
            r#"manifold_tool_calls_total{upstream="hostile",tool="(other)",outcome="ok"}"#
        )
        .as_deref(),
        Some("50")
    );
    assert_eq!(
        sample(
            &text,
            r#"manifold_tool_calls_total{upstream="hostile",tool="tool_00000",outcome="ok"}"#
        )
        .as_deref(),
        Some("1")
    );
    assert!(!text.contains(&format!("tool_{:05}", labels::MAX_TOOL_LABELS_PER_UPSTREAM)));
}

#[test]
fn a_call_is_in_flight_until_it_finishes_and_its_duration_is_observed() {
    let m = Metrics::new();
    let h = m.tool("peer", "slow");
    h.call_started();
    h.call_started();
    let text = m.encode(&Snapshot::default());
    assert_eq!(
        sample(&text, r#"manifold_tool_calls_in_flight{upstream="peer"}"#).as_deref(),
        Some("2")
    );
    h.call_finished(CallOutcome::Cancelled, Duration::from_millis(3));
    h.call_finished(CallOutcome::ToolError, Duration::from_secs(2));
    let text = m.encode(&Snapshot::default());
    assert_eq!(
        sample(&text, r#"manifold_tool_calls_in_flight{upstream="peer"}"#).as_deref(),
        Some("0")
    );
    assert_eq!(
        sample(
            &text,
            r#"manifold_tool_call_duration_seconds_count{upstream="peer",tool="slow"}"#
        )
        .as_deref(),
        Some("2")
    );
    assert_eq!(
        sample(
            &text,
            r#"manifold_tool_call_duration_seconds_bucket{le="0.005",upstream="peer",tool="slow"}"#
        )
        .as_deref(),
        Some("1")
    );
    assert_eq!(
        sample(
            &text,
            r#"manifold_tool_calls_total{upstream="peer",tool="slow",outcome="cancelled"}"#
        )
        .as_deref(),
        Some("1")
    );
    assert!(
        !text.contains(r#"outcome="ok""#),
        "unused outcomes add no series"
    );
}

#[test]
fn sandbox_series_follow_the_snapshot_and_vanish_with_it() {
    let m = Metrics::new();
    let mut snapshot = Snapshot {
        upstreams: vec![UpstreamSnapshot {
            name: "boxed".to_owned(),
            state: UpstreamState::Up,
            restarts: 0,
            up_for: None,
            sandbox: vec![SandboxControlSnapshot {
                control: "filesystem",
                state: "partial",
            }],
        }],
        sessions: Vec::new(),
    };
    let series =
        r#"manifold_sandbox_enforced{upstream="boxed",control="filesystem",state="partial"}"#;
    assert_eq!(sample(&m.encode(&snapshot), series).as_deref(), Some("0"));
    snapshot.upstreams[0].sandbox[0].state = "enforced";
    let text = m.encode(&snapshot);
    assert_eq!(
        sample(&text, series),
        None,
        "the old state's series is gone"
    );
    assert_eq!(
        sample(
            &text,
            r#"manifold_sandbox_enforced{upstream="boxed",control="filesystem",state="enforced"}"#
        )
        .as_deref(),
        Some("1")
    );
    snapshot.upstreams[0].sandbox.clear();
    assert!(!m.encode(&snapshot).contains("manifold_sandbox_enforced{"));
}

#[test]
fn upstream_state_restarts_and_sessions_come_from_the_snapshot() {
    let m = Metrics::new();
    let snapshot = Snapshot {
        upstreams: vec![
            UpstreamSnapshot {
                name: "a".to_owned(),
                state: UpstreamState::Up,
                restarts: 2,
                up_for: Some(Duration::from_secs(10)),
                sandbox: vec![
                    SandboxControlSnapshot {
                        control: "namespaces",
                        state: "missing",
                    },
                    SandboxControlSnapshot {
                        control: "seccomp",
                        state: "enforced",
                    },
                ],
            },
            UpstreamSnapshot {
                name: "b".to_owned(),
                state: UpstreamState::CrashLoop,
                restarts: 0,
                up_for: None,
                sandbox: Vec::new(),
            },
        ],
        sessions: vec![SessionCount {
            transport: "streamable_http",
            revision: Revision::V2025_11_25,
            count: 3,
        }],
    };
    let text = m.encode(&snapshot);
    for (series, value) in [
        (r#"manifold_upstream_state{upstream="a",state="up"}"#, "1"),
        (r#"manifold_upstream_state{upstream="a",state="down"}"#, "0"),
        (
            r#"manifold_upstream_state{upstream="b",state="crash_loop"}"#,
            "1",
        ),
        (r#"manifold_upstream_restarts_total{upstream="a"}"#, "2"),
        (
            r#"manifold_sandbox_enforced{upstream="a",control="namespaces",state="missing"}"#,
            "0",
        ),
        (
            r#"manifold_sandbox_enforced{upstream="a",control="seccomp",state="enforced"}"#,
            "1",
        ),
        (r#"manifold_upstream_restarts_total{upstream="b"}"#, "0"),
        (
            r#"manifold_sessions{transport="streamable_http",era="legacy",revision="2025-11-25"}"#,
            "3",
        ),
    ] {
        assert_eq!(
            sample(&text, series).as_deref(),
            Some(value),
            "{series}\n{text}"
        );
    }
    let at: f64 = sample(
        &text,
        r#"manifold_upstream_last_restart_timestamp_seconds{upstream="a"}"#,
    )
    .unwrap()
    .parse()
    .unwrap();
    assert!(at > 1.7e9, "a Unix time: {at}");
    assert!(
        sample(
            &text,
            r#"manifold_upstream_last_restart_timestamp_seconds{upstream="b"}"#
        )
        .is_none()
    );
    // Down again: the restart time stays what it was; a removed upstream disappears.
    let down = Snapshot {
        upstreams: vec![UpstreamSnapshot {
            name: "a".to_owned(),
            state: UpstreamState::Down,
            restarts: 3,
            up_for: None,
            sandbox: Vec::new(),
        }],
        sessions: Vec::new(),
    };
    let text = m.encode(&down);
    assert_eq!(
        sample(
            &text,
            r#"manifold_upstream_last_restart_timestamp_seconds{upstream="a"}"#
        )
        .and_then(|v| v.parse::<f64>().ok()),
        Some(at)
    );
    assert!(!text.contains(r#"upstream="b""#));
    assert!(!text.contains("manifold_sessions{"));
}

#[test]
fn rejections_and_bytes_are_counted() {
    let m = Metrics::new();
    m.rejected(RejectReason::Origin);
    m.rejected(RejectReason::Origin);
    m.bytes_in(10);
    m.bytes_out(7);
    m.bytes_out(5);
    let text = m.encode(&Snapshot::default());
    assert_eq!(
        sample(
            &text,
            r#"manifold_rejected_requests_total{reason="origin"}"#
        )
        .as_deref(),
        Some("2")
    );
    assert_eq!(
        sample(&text, r#"manifold_rejected_requests_total{reason="host"}"#).as_deref(),
        Some("0")
    );
    assert_eq!(
        sample(&text, r#"manifold_http_bytes_total{direction="in"}"#).as_deref(),
        Some("10")
    );
    assert_eq!(
        sample(&text, r#"manifold_http_bytes_total{direction="out"}"#).as_deref(),
        Some("12")
    );
    assert!(text.ends_with("# EOF\n"));
}
