//! The unit and property tests of `shallow.rs`, kept beside it so the file reads as the code it
//! tests.

#![allow(clippy::unwrap_used)]
use proptest::prelude::*;
use serde_json::Value;

use super::*;

#[test]
fn finds_a_member_after_deeply_nested_ones() {
    let deep = format!(
        r#"{{"jsonrpc":"2.0","result":{}"x{{"{},"id":42}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert_eq!(top_level_member(&deep, "id"), Some("42"));
    assert_eq!(
        top_level_member(r#"{"a":"}","id":"s\"x"}"#, "id"),
        Some(r#""s\"x""#)
    );
    assert_eq!(top_level_member(r#"{"i\u0064":7}"#, "id"), Some("7"));
}

#[test]
fn gives_up_quietly_on_broken_input() {
    for text in [
        "",
        "[",
        "{",
        r#"{"id"}"#,
        r#"{"a":[1,"id":2"#,
        r#"{"a":1 "id":2}"#,
        "{\"\\",
        r#"{"a":}"#,
        r#"{,"id":1}"#,
    ] {
        assert_eq!(top_level_member(text, "id"), None, "{text}");
        assert!(member_span(text, "id").is_err(), "{text}");
    }
}

fn value_of<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    member_span(text, key)
        .unwrap()
        .and_then(|span| text.get(span))
}

#[test]
fn a_member_is_found_at_its_level_only() {
    let text = r#" { "a" : {"name":"inner"} , "name" : "outer" , "b":[{"name":1}] } "#;
    assert_eq!(value_of(text, "name"), Some(r#""outer""#));
    assert_eq!(value_of(text, "a"), Some(r#"{"name":"inner"}"#));
    assert_eq!(value_of(text, "b"), Some(r#"[{"name":1}]"#));
    assert_eq!(value_of(text, "missing"), None);
    assert_eq!(value_of("{}", "a"), None);
    assert_eq!(value_of(r#"{"n":-1.5e3,"t":true}"#, "n"), Some("-1.5e3"));
    assert_eq!(value_of(r#"{"s":"a\\\"}b"}"#, "s"), Some(r#""a\\\"}b""#));
}

#[test]
fn keys_written_with_escapes_are_read_as_they_say() {
    assert_eq!(value_of(r#"{"n\u0061me":"x"}"#, "name"), Some(r#""x""#));
    assert_eq!(
        members_present(r#"{"n\u0061me":1,"b":2}"#, &["b", "name", "c"]).unwrap(),
        [true, true, false]
    );
}

#[test]
fn a_key_written_twice_is_refused_however_it_is_spelled() {
    assert_eq!(
        member_span(r#"{"name":1,"n\u0061me":2}"#, "name"),
        Err(ScanError::DuplicateKey("name".into()))
    );
    // Another key written twice is not this lookup's business.
    assert_eq!(value_of(r#"{"a":1,"a":2,"name":3}"#, "name"), Some("3"));
}

#[test]
fn what_is_not_an_object_is_said_to_be_so() {
    for text in ["[1]", "\"x\"", "3", ""] {
        assert_eq!(
            member_span(text, "a"),
            Err(ScanError::NotAnObject),
            "{text}"
        );
    }
}

/// JSON values of a few levels, with keys that need escaping and strings holding brackets.
/// (Numbers are integers: a float read back may differ in its last digit, which says nothing
/// about the walk.)
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z{}\\[\\]\"\\\\,: ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c\"\\\\]{0,3}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn an_arrays_elements_are_found_at_its_level_only() {
    let text = r#" [ {"a":[1,2]} , "x]" ,3,[[]] ] "#;
    let found: Vec<&str> = element_spans(text)
        .unwrap()
        .into_iter()
        .map(|s| text.get(s).unwrap())
        .collect();
    assert_eq!(found, [r#"{"a":[1,2]}"#, r#""x]""#, "3", "[[]]"]);
    assert!(element_spans("[ ]").unwrap().is_empty());
    assert_eq!(element_spans("{}"), Err(ScanError::NotAnArray));
    assert!(element_spans("[1,").is_err());
    assert!(element_spans("[1 2]").is_err());
}

proptest! {
    /// On valid JSON the elements are the ones a full parse finds.
    #[test]
    fn elements_agree_with_a_full_parse(items in prop::collection::vec(json_value(), 0..6), pretty in any::<bool>()) {
        let array = Value::Array(items.clone());
        let text = if pretty {
            serde_json::to_string_pretty(&array).unwrap()
        } else {
            serde_json::to_string(&array).unwrap()
        };
        let spans = element_spans(&text).unwrap();
        prop_assert_eq!(spans.len(), items.len());
        for (span, item) in spans.into_iter().zip(&items) {
            prop_assert_eq!(&serde_json::from_str::<Value>(text.get(span).unwrap()).unwrap(), item);
        }
    }

    /// On valid JSON the walk agrees with a full parse: every key's value is the same value, and
    /// a key the object lacks is not found.
    #[test]
    fn agrees_with_a_full_parse(
        members in prop::collection::btree_map("[a-c\"\\\\]{0,3}", json_value(), 0..6),
        pretty in any::<bool>(),
        probe in "[a-d]{0,2}",
    ) {
        let object = Value::Object(members.clone().into_iter().collect());
        let text = if pretty {
            serde_json::to_string_pretty(&object).unwrap()
        } else {
            serde_json::to_string(&object).unwrap()
        };
        for (key, value) in &members {
            let raw = value_of(&text, key).unwrap();
            prop_assert_eq!(&serde_json::from_str::<Value>(raw).unwrap(), value);
        }
        if !members.contains_key(&probe) {
            prop_assert_eq!(member_span(&text, &probe).unwrap(), None);
        }
    }

    /// Whatever the bytes, the walk ends without a panic, and a span it gives lies inside them.
    #[test]
    fn is_total_on_any_text(text in "[{}\\[\\]\",:a-c0-9 \\\\]{0,40}", key in "[a-c]{0,2}") {
        if let Ok(Some(span)) = member_span(&text, &key) {
            prop_assert!(text.get(span).is_some());
        }
        let _ = members_present(&text, &[key.as_str()]);
        let _ = top_level_member(&text, &key);
        if let Ok(spans) = element_spans(&text) {
            prop_assert!(spans.into_iter().all(|s| text.get(s).is_some()));
        }
    }
}

#[test]
fn strings_are_crossed_alike_whether_short_or_long() {
    // Escapes at every place in strings short and long.
    for before in 0..40 {
        for escape in [r#"\""#, r"\\", r"\u0041"] {
            let value = format!("\"{}{escape}x}}\"", "a".repeat(before));
            let text = format!(r#"{{"s":{value},"after":1}}"#);
            assert_eq!(value_of(&text, "s"), Some(value.as_str()), "{text}");
            assert_eq!(value_of(&text, "after"), Some("1"), "{text}");
        }
    }
}

#[test]
fn a_key_whose_escapes_do_not_decode_is_malformed_as_a_full_parse_says() {
    let text = r#"{"\ud800":1,"name":2}"#;
    assert!(serde_json::from_str::<std::collections::HashMap<String, i64>>(text).is_err());
    assert!(matches!(
        member_span(text, "name"),
        Err(ScanError::Malformed(_))
    ));
    assert!(members_present(text, &["name"]).is_err());
}

/// Every object's member names, at any depth.
fn names_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            for (name, inner) in members {
                out.push(name.clone());
                names_in(inner, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| names_in(v, out)),
        _ => {}
    }
}

/// One probe reused across every generated text, as the router keeps its own.
static PROBE_AB: std::sync::LazyLock<NameProbe> = std::sync::LazyLock::new(|| NameProbe::new("ab"));

proptest! {
    /// `may_name` says no only where no object, at any depth, has a member of that name.
    #[test]
    fn may_name_is_false_only_where_no_object_has_the_name(value in json_value(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        let mut names = Vec::new();
        names_in(&value, &mut names);
        for key in ["a", "b", "ab", "abc", "c"] {
            if !may_name(&text, key) {
                prop_assert!(!names.iter().any(|n| n == key), "{} in {}", key, text);
            }
        }
        // A probe kept and used on many texts says no only where no object has the name either.
        if !PROBE_AB.may_be_named_in(&text) {
            prop_assert!(!names.iter().any(|n| n == "ab"), "ab in {}", text);
        }
    }
}

#[test]
fn may_name_looks_for_the_quoted_name_or_an_escape_that_could_spell_it() {
    let plain = r#"{"content":[{"type":"text","text":"security, url"}],"isError":false}"#;
    assert!(!may_name(plain, "uri"));
    assert!(!may_name(plain, "taskId"));
    assert!(may_name(plain, "type"));
    assert!(may_name(r#"{"x":[{"uri":"a://b"}]}"#, "uri"));
    // Spelled with an escape, the name is still there.
    assert!(may_name(r#"{"x":{"\u0075ri":"a://b"}}"#, "uri"));
    // Other escapes cannot spell a letter.
    assert!(!may_name(r#"{"text":"line\nnext \"q\" \\ done"}"#, "uri"));
    // A string value that reads the name is a yes too: the caller's walk then says no.
    assert!(may_name(r#"{"text":"uri"}"#, "uri"));
    let is_error = NameProbe::new("isError");
    assert!(is_error.may_be_named_in(plain));
    assert!(!is_error.may_be_named_in(r#"{"content":[]}"#));
    assert!(is_error.may_be_named_in(r#"{"\u0069sError":true}"#));
}
