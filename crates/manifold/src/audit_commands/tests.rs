//! The unit tests of `audit_commands.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used, clippy::panic)]
use super::*;
use manifold_store::{AuditEntry, ChainBreak};

const NOW: i64 = 1_764_417_845_000;

fn search_action(outcome: Option<&str>, since: Option<&str>, until: Option<&str>) -> AuditAction {
    AuditAction::Search {
        caller: Some("alice".to_owned()),
        tool: Some("read".to_owned()),
        server: Some("fs".to_owned()),
        outcome: outcome.map(str::to_owned),
        since: since.map(str::to_owned),
        until: until.map(str::to_owned),
        before: Some(42),
        limit: DEFAULT_SEARCH_ROWS,
        json: false,
        config: None,
    }
}

fn row(seq: i64, record: Value) -> AuditRow {
    AuditRow {
        seq,
        entry: AuditEntry::from_record_json(record.to_string()).unwrap(),
        prev_sha256: AUDIT_GENESIS.to_owned(),
        row_sha256: "f".repeat(64),
    }
}

fn record(target: &str) -> Value {
    json!({"at_ms": NOW, "call_id": "c1", "principal": "alice", "server": "fs",
               "target": target, "outcome": "ok", "duration_us": 12_345})
}

#[test]
fn search_flags_become_the_store_filter() {
    let job = prepare(
        &search_action(Some("tool_error"), Some("1h"), Some("2025-11-29T12:04:05Z")),
        NOW,
    )
    .unwrap();
    assert_eq!(
        job,
        Job::Search {
            filter: AuditFilter {
                principal: Some("alice".to_owned()),
                server: Some("fs".to_owned()),
                target: Some("read".to_owned()),
                outcome: Some("tool_error".to_owned()),
                since_ms: Some(NOW - 3_600_000),
                until_ms: Some(NOW),
                before_seq: Some(42),
            },
            limit: DEFAULT_SEARCH_ROWS,
            json: false,
        }
    );
}

#[test]
fn an_unknown_outcome_is_refused_listing_every_valid_one() {
    let refused = prepare(&search_action(Some("okay"), None, None), NOW).unwrap_err();
    assert!(refused.message.contains("\"okay\""), "{refused}");
    let hint = refused.hint.unwrap();
    for outcome in AuditOutcome::ALL {
        assert!(hint.contains(outcome.as_str()), "{hint}");
    }
}

#[test]
fn times_are_rfc3339_or_durations_ago_within_the_lookback() {
    assert_eq!(
        parse_time("--since", "7d", NOW).unwrap(),
        NOW - 7 * 86_400_000
    );
    assert_eq!(
        parse_time("--since", "2025-11-29", NOW).unwrap(),
        1_764_374_400_000
    );
    let max_days = MAX_LOOKBACK.as_secs() / SECONDS_PER_DAY;
    assert!(parse_time("--since", &format!("{max_days}d"), NOW).is_ok());
    let too_far = parse_time("--since", &format!("{}d", max_days + 1), NOW).unwrap_err();
    assert!(too_far.message.contains("reaches back"), "{too_far}");
    let neither = parse_time("--until", "yesterday", NOW).unwrap_err();
    assert!(
        neither.message.contains("--until \"yesterday\" is neither"),
        "{neither}"
    );
    assert!(neither.hint.unwrap().contains("2026-12-01T09:30:00Z"));
}

#[test]
fn since_must_come_before_until() {
    let refused = prepare(&search_action(None, Some("1h"), Some("2h")), NOW).unwrap_err();
    assert!(refused.message.contains("is not before"), "{refused}");
}

#[test]
fn row_counts_are_bounded_by_one_store_page() {
    assert_eq!(MAX_ROWS_SHOWN, MAX_AUDIT_PAGE);
    const { assert!(DEFAULT_TAIL_ROWS <= MAX_ROWS_SHOWN && DEFAULT_SEARCH_ROWS <= MAX_ROWS_SHOWN) };
    let tail = |rows| AuditAction::Tail {
        rows,
        follow: false,
        json: false,
        config: None,
    };
    assert!(prepare(&tail(MAX_ROWS_SHOWN), NOW).is_ok());
    assert!(prepare(&tail(0), NOW).is_ok());
    let refused = prepare(&tail(MAX_ROWS_SHOWN + 1), NOW).unwrap_err();
    assert!(refused.message.contains("-n 1001"), "{refused}");
    assert!(refused.hint.unwrap().contains("audit export"));
    let mut zero = search_action(None, None, None);
    if let AuditAction::Search { limit, .. } = &mut zero {
        *limit = 0;
    }
    assert!(prepare(&zero, NOW).is_err());
}

#[test]
fn cells_escape_control_characters_and_stop_at_the_bound() {
    assert_eq!(cell("read\u{1b}[31m\n"), "read\\u{1b}[31m\\n");
    assert_eq!(cell(""), "-");
    let exact = "x".repeat(MAX_CELL_CHARS);
    assert_eq!(cell(&exact), exact);
    let long = cell(&"y".repeat(MAX_CELL_CHARS + 1));
    assert_eq!(long.chars().count(), MAX_CELL_CHARS);
    assert!(long.ends_with('…'));
}

#[test]
fn a_row_renders_its_time_duration_and_columns() {
    let cells = row_cells(&row(7, record("read")));
    assert_eq!(cells[0], "2025-11-29T12:04:05Z");
    assert_eq!(
        &cells[1..],
        ["7", "alice", "fs", "read", "ok", "12.3ms", "c1"]
    );
    assert_eq!(shown_duration(850), "850us");
    assert_eq!(shown_duration(4_204_000), "4.20s");
    let table = Table::fitting(std::slice::from_ref(&cells));
    let header = table.header();
    let line = table.line(&cells);
    assert!(header.starts_with("TIME (UTC)            SEQ"), "{header}");
    assert_eq!(header.find("CALLER"), line.find("alice"));
}

#[test]
fn json_lines_carry_the_record_and_its_seq() {
    let line: Value = serde_json::from_str(&record_line(&row(9, record("read")))).unwrap();
    assert_eq!(line["seq"], 9);
    assert_eq!(line["duration_us"], 12_345);
    let exported: Value = serde_json::from_str(&export_line(&row(9, record("read")))).unwrap();
    assert_eq!(exported["record_json"], record("read").to_string());
    assert_eq!(exported["prev_sha256"], AUDIT_GENESIS);
}

#[test]
fn verify_describes_the_pruned_prefix_and_an_intact_trail() {
    let report = VerifyReport {
        rows_checked: 3,
        first_row: Some(41),
        last_row: Some(43),
        pruned: Some(PruneAnchor {
            pruned_at_ms: NOW,
            through_seq: 40,
            rows: 40,
            anchor_sha256: "a".repeat(64),
        }),
        first_broken: None,
    };
    let text = describe_verify(&report, "store.sqlite");
    assert!(text.contains("checked 3 rows"), "{text}");
    assert!(text.contains("(seq 41 to 43)"), "{text}");
    assert!(
            text.contains(&format!(
                "rows 1..40 were pruned (the latest prune, on 2025-11-29T12:04:05Z, removed 40 of them); the chain starts from their anchor {}",
                "a".repeat(64)
            )),
            "{text}"
        );
    assert!(text.ends_with("the audit trail is intact\n"), "{text}");
    let broken = VerifyReport {
        first_broken: Some((42, ChainBreak::Column { column: "server" })),
        ..report
    };
    assert!(!describe_verify(&broken, "store.sqlite").contains("intact"));
}
