//! The unit tests of `audit.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;

fn entry(record_json: &str) -> AuditEntry {
    AuditEntry::from_record_json(record_json.to_owned()).unwrap()
}

#[test]
fn genesis_is_64_zeros_and_the_hash_is_lowercase_hex_of_prev_newline_record() {
    assert_eq!(AUDIT_GENESIS.len(), 64);
    assert!(AUDIT_GENESIS.bytes().all(|b| b == b'0'));
    // sha256("abc\n{}"), computed independently with `printf 'abc\n{}' | sha256sum`.
    assert_eq!(
        audit_row_sha256("abc", "{}"),
        "b4157e40dd21db67528800eb46fe6641eaa5e321734b6890e43e9ce6ed37d91b"
    );
}

#[test]
fn an_entry_built_from_its_record_agrees_with_it() {
    let e = entry(
        r#"{"at_ms":5,"call_id":"c","principal":"p","server":"s","target":"t","outcome":"ok","extra":[1]}"#,
    );
    assert_eq!((e.at_ms, e.target.as_str()), (5, "t"));
    assert!(check_entry(&e).is_ok());
    let edited = AuditEntry {
        server: "other".to_owned(),
        ..e
    };
    let refused = check_entry(&edited).unwrap_err();
    assert!(
        matches!(&refused, StoreError::AuditRecordInvalid { call_id, reason } if call_id == "c" && reason.contains("server")),
        "{refused}"
    );
}

#[test]
fn the_typed_column_read_judges_as_the_map_does() {
    let escaped = entry(
        r#"{"at_ms":5,"call_id":"c","principal":"p\u00e9","server":"s","target":"t","outcome":"ok"}"#,
    );
    assert_eq!(escaped.principal, "p\u{e9}");
    assert!(
        record_fault(&escaped).is_none(),
        "an escaped column still agrees"
    );
    let e = entry(
        r#"{"at_ms":5,"call_id":"c","principal":"p","server":"s","target":"t","outcome":"ok"}"#,
    );
    // Records the typed read refuses: a duplicate key (the map keeps the last), a column of
    // another type, a fractional at_ms, and text that is not JSON at all.
    let records = [
        r#"{"at_ms":5,"call_id":"c","principal":"x","principal":"p","server":"s","target":"t","outcome":"ok"}"#,
        r#"{"at_ms":5,"call_id":"c","principal":"p","server":7,"target":"t","outcome":"ok"}"#,
        r#"{"at_ms":5.5,"call_id":"c","principal":"p","server":"s","target":"t","outcome":"ok"}"#,
        r#"{"at_ms":5,"call_id":"c""#,
    ];
    let judged: Vec<Option<String>> = records
        .iter()
        .map(|record| {
            let edited = AuditEntry {
                record_json: (*record).to_owned(),
                ..e.clone()
            };
            assert_eq!(
                record_fault(&edited).map(|f| f.reason()),
                slow_record_fault(&edited).map(|f| f.reason()),
                "{record}"
            );
            record_fault(&edited).map(|f| f.reason())
        })
        .collect();
    assert_eq!(judged.first(), Some(&None), "the last duplicate wins");
    assert!(
        judged
            .get(1)
            .is_some_and(|r| r.as_ref().is_some_and(|r| r.contains("server")))
    );
    assert!(
        judged
            .get(2)
            .is_some_and(|r| r.as_ref().is_some_and(|r| r.contains("at_ms")))
    );
    assert!(
        judged
            .get(3)
            .is_some_and(|r| r.as_ref().is_some_and(|r| r.contains("JSON")))
    );
}

#[test]
fn a_record_missing_a_column_or_not_an_object_is_refused() {
    let missing =
        AuditEntry::from_record_json(r#"{"at_ms":5,"call_id":"c9"}"#.to_owned()).unwrap_err();
    assert!(missing.to_string().contains("\"c9\""), "{missing}");
    assert!(missing.to_string().contains("principal"), "{missing}");
    let array = AuditEntry::from_record_json("[1]".to_owned()).unwrap_err();
    assert!(
        matches!(array, StoreError::AuditRecordInvalid { .. }),
        "{array}"
    );
}

#[test]
fn a_record_over_the_bound_is_refused_naming_the_call() {
    let record = format!(
        r#"{{"at_ms":5,"call_id":"big","principal":"p","server":"s","target":"t","outcome":"ok","pad":"{}"}}"#,
        "x".repeat(MAX_AUDIT_RECORD_BYTES)
    );
    let refused = AuditEntry::from_record_json(record).unwrap_err();
    assert!(
        matches!(&refused, StoreError::AuditRecordTooLarge { call_id, max, .. } if call_id == "big" && *max == MAX_AUDIT_RECORD_BYTES),
        "{refused}"
    );
}

#[test]
fn check_row_names_each_kind_of_break() {
    let e = entry(
        r#"{"at_ms":5,"call_id":"c","principal":"p","server":"s","target":"t","outcome":"ok"}"#,
    );
    let row = AuditRow {
        seq: 7,
        row_sha256: audit_row_sha256(AUDIT_GENESIS, &e.record_json),
        prev_sha256: AUDIT_GENESIS.to_owned(),
        entry: e,
    };
    assert_eq!(check_row(&row, AUDIT_GENESIS, None), None);
    assert!(matches!(
        check_row(&row, &"1".repeat(64), None),
        Some(ChainBreak::PrevLink { .. })
    ));
    let anchor = PruneAnchor {
        pruned_at_ms: 0,
        through_seq: 7,
        rows: 1,
        anchor_sha256: AUDIT_GENESIS.to_owned(),
    };
    assert_eq!(
        check_row(&row, AUDIT_GENESIS, Some(&anchor)),
        Some(ChainBreak::BeforeAnchor { through_seq: 7 })
    );
    let mut edited = row.clone();
    edited.entry.record_json = edited.entry.record_json.replace("\"p\"", "\"q\"");
    assert!(matches!(
        check_row(&edited, AUDIT_GENESIS, None),
        Some(ChainBreak::RowHash { .. })
    ));
    let mut column = row;
    column.entry.principal = "q".to_owned();
    assert_eq!(
        check_row(&column, AUDIT_GENESIS, None),
        Some(ChainBreak::Column {
            column: "principal"
        })
    );
}

#[test]
fn bounds_are_sane() {
    const { assert!(MAX_AUDIT_BATCH >= 1 && MAX_AUDIT_PAGE >= 1) };
    const { assert!(MAX_AUDIT_RECORD_BYTES >= 1024) };
    assert!(check_limit(MAX_AUDIT_PAGE).is_ok());
    assert!(matches!(
        check_limit(MAX_AUDIT_PAGE + 1),
        Err(StoreError::OverLimit { .. })
    ));
}

#[test]
fn a_batch_goes_in_few_inserts_of_few_sizes() {
    // A small batch is one insert; a larger one whole chunks of the largest size, then powers of
    // two down to 32, then one insert of the rest.
    let most_inserts = |rows: usize| rows / MAX_INSERT_CHUNK_ROWS + 4;
    let mut sizes_seen = std::collections::BTreeSet::new();
    for rows in 0..=MAX_AUDIT_BATCH {
        let sizes: Vec<usize> = insert_chunk_sizes(rows).collect();
        assert_eq!(sizes.iter().sum::<usize>(), rows, "{rows} rows");
        assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
        assert!(
            sizes.len() <= most_inserts(rows),
            "{rows} rows took {} inserts",
            sizes.len()
        );
        if (1..=MAX_EXACT_INSERT_ROWS).contains(&rows) {
            assert_eq!(sizes, [rows]);
        }
        sizes_seen.extend(sizes);
    }
    let expected: Vec<usize> = (1..=MAX_EXACT_INSERT_ROWS).chain([64, 128, 256]).collect();
    assert_eq!(sizes_seen.into_iter().collect::<Vec<_>>(), expected);
    assert_eq!(expected.len(), INSERT_SIZES);
    assert_eq!(
        insert_chunk_sizes(240).collect::<Vec<_>>(),
        [128, 64, 32, 16]
    );
    assert_eq!(insert_chunk_sizes(24).collect::<Vec<_>>(), [24]);
    assert_eq!(insert_chunk_sizes(40).collect::<Vec<_>>(), [32, 8]);
}

#[test]
fn every_insert_size_has_a_slot_of_its_own() {
    let slots: Vec<usize> = (0..INSERT_SIZES).collect();
    let sizes: Vec<usize> = slots.iter().map(|&slot| insert_slot_size(slot)).collect();
    assert_eq!(
        sizes
            .iter()
            .map(|&size| insert_size_slot(size))
            .collect::<Vec<_>>(),
        slots
    );
    assert_eq!(sizes.last(), Some(&MAX_INSERT_CHUNK_ROWS));
}

#[test]
fn each_insert_text_has_one_tuple_of_nine_placeholders_per_row() {
    for size in (0..INSERT_SIZES).map(insert_slot_size) {
        let sqlite = insert_sql(size, Placeholders::Sqlite);
        assert!(sqlite.starts_with(INSERT_HEAD_SQL));
        assert_eq!(sqlite.matches('(').count(), size + 1, "{size} rows");
        assert_eq!(sqlite.matches('?').count(), size * INSERT_ROW_VALUES);
        let postgres = insert_sql(size, Placeholders::Postgres);
        let numbers: Vec<usize> = postgres
            .split('$')
            .skip(1)
            .map(|n| n.trim_end_matches([',', ' ', ')', '(']).parse().unwrap())
            .collect();
        assert_eq!(numbers, (1..=size * INSERT_ROW_VALUES).collect::<Vec<_>>());
        assert_eq!(postgres.matches('(').count(), size + 1, "{size} rows");
    }
    // The same text each time: built once, kept.
    assert!(std::ptr::eq(
        insert_sql(8, Placeholders::Sqlite),
        insert_sql(8, Placeholders::Sqlite)
    ));
}
