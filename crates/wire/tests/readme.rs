//! Keeps the crate README honest: its error-code table and its bounds table are written from
//! `codes.rs` and the named constants, and this test fails as soon as either drifts.

use manifold_wire::ErrorCode;
use manifold_wire::depth::MAX_JSON_DEPTH;
use manifold_wire::line::DEFAULT_MAX_LINE;
use manifold_wire::sse::DEFAULT_MAX_EVENT;

const README: &str = include_str!("../README.md");

/// The table rows of the README, each split into trimmed cells.
fn rows() -> Vec<Vec<&'static str>> {
    README
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|') && l.ends_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}

#[test]
fn readme_error_table_matches_codes() {
    let rows = rows();
    let code_rows: Vec<_> = rows
        .iter()
        .filter(|r| r.first().is_some_and(|c| c.parse::<i64>().is_ok()))
        .collect();
    assert_eq!(
        code_rows.len(),
        ErrorCode::ALL.len(),
        "the README lists {} codes, codes.rs has {}",
        code_rows.len(),
        ErrorCode::ALL.len()
    );
    for code in ErrorCode::ALL {
        let number = code.code().to_string();
        let row = code_rows
            .iter()
            .find(|r| r[0] == number)
            .unwrap_or_else(|| panic!("{code:?} ({number}) is missing from the README"));
        assert_eq!(row[1], format!("`{code:?}`"), "row for {number}");
        assert_eq!(row[2], format!("{:?}", code.owner()), "owner of {code:?}");
    }
}

#[test]
fn readme_bounds_match_the_constants() {
    let rows = rows();
    for (name, value) in [
        ("`DEFAULT_MAX_LINE`", format!("({DEFAULT_MAX_LINE} bytes)")),
        (
            "`DEFAULT_MAX_EVENT`",
            format!("({DEFAULT_MAX_EVENT} bytes)"),
        ),
        ("`MAX_JSON_DEPTH`", format!("{MAX_JSON_DEPTH} levels")),
    ] {
        let row = rows
            .iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("{name} is missing from the README's bounds"));
        assert!(
            row[1].contains(&value),
            "{name}: README says {:?}, code says {value}",
            row[1]
        );
    }
}
