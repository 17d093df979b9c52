//! The unit tests of `patch.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used)]
#[test]
fn without_members_drops_the_named_members_and_keeps_the_rest_byte_for_byte() {
    let json = r#"{"name":"t","requestState":"s","arguments":{"b":1.50,"a":[ 1 ]},"inputResponses":{"k":{}}}"#;
    let out = super::without_members(json, &["requestState", "inputResponses"]).unwrap();
    assert_eq!(out, r#"{"name":"t","arguments":{"b":1.50,"a":[ 1 ]}}"#);
    assert_eq!(super::without_members("{}", &["x"]).unwrap(), "{}");
    assert!(super::without_members("[1]", &["x"]).is_err());
    assert!(super::without_members(r#"{"a":"#, &["x"]).is_err());
}

use super::*;

#[test]
fn replaces_a_nested_member_and_nothing_else() {
    let j = r#"{"name":"a__echo","arguments":{"n":1.0,"name":"keep"},"x":"\u00e9"}"#;
    let out = set(j, &["name"], r#""echo""#).unwrap();
    assert_eq!(
        out,
        r#"{"name":"echo","arguments":{"n":1.0,"name":"keep"},"x":"\u00e9"}"#
    );
}

#[test]
fn inserts_missing_objects_on_the_way() {
    let out = set(r#"{"name":"t"}"#, &["_meta", "progressToken"], "7").unwrap();
    assert_eq!(out, r#"{"_meta":{"progressToken":7},"name":"t"}"#);
    let out = set(r#"{ }"#, &["a"], "1").unwrap();
    assert_eq!(out, r#"{"a":1 }"#);
    let out = set(r#"{"_meta":{}}"#, &["_meta", "k"], "true").unwrap();
    assert_eq!(out, r#"{"_meta":{"k":true}}"#);
}

#[test]
fn finds_keys_written_with_escapes() {
    let j = r#"{"n\u0061me":"x"}"#;
    assert_eq!(get_str(j, &["name"]).unwrap(), Some("x".to_owned()));
}

#[test]
fn refuses_ambiguous_and_malformed_input() {
    assert_eq!(
        set(r#"{"name":1,"name":2}"#, &["name"], "3"),
        Err(PatchError::DuplicateKey("name".into()))
    );
    assert!(matches!(
        set(r#"{"name":"#, &["name"], "3"),
        Err(PatchError::Malformed(_))
    ));
    assert!(matches!(
        set(r#"{"a":[1]}"#, &["a", "b"], "3"),
        Err(PatchError::NotAnObject(..))
    ));
    assert!(matches!(
        set(r#"{}"#, &["a"], "nope"),
        Err(PatchError::BadReplacement(_))
    ));
}

#[test]
fn message_patches_keep_content_bytes() {
    let m = Message::decode_str(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"srv__t","arguments":{"big":1e400,"f":1.50}}}"#,
        )
        .unwrap();
    let m2 = m
        .with_name("t")
        .unwrap()
        .with_progress_token("\"p-1\"")
        .unwrap();
    assert_eq!(
        m2.as_str(),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p-1"},"name":"t","arguments":{"big":1e400,"f":1.50}}}"#
    );
    assert_eq!(m2.params_str(&["name"]).as_deref(), Some("t"));
    assert_eq!(m2.params_raw(&["_meta", "progressToken"]), Some("\"p-1\""));
    let bare = Message::decode_str(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).unwrap();
    let with_meta = bare.with_progress_token("3").unwrap();
    assert_eq!(with_meta.params(), Some(r#"{"_meta":{"progressToken":3}}"#));
}

#[test]
fn a_patch_that_nests_past_the_depth_guard_is_refused() {
    // A value at the replacement limit of 128 levels, set two objects down inside params,
    // used to give an Ok message whose own text no longer decoded (TooDeep).
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let m = Message::decode_str(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#).unwrap();
    let err = m
        .patch(Part::Params, &["a", "b"], &deep(MAX_JSON_DEPTH))
        .unwrap_err();
    assert!(matches!(
        err,
        PatchError::Broken(Fault {
            kind: crate::envelope::FaultKind::TooDeep { .. },
            ..
        })
    ));
    let fits = m
        .patch(Part::Params, &["a", "b"], &deep(MAX_JSON_DEPTH - 3))
        .unwrap();
    assert_eq!(Message::decode_str(fits.as_str()).unwrap(), fits);
}

#[test]
fn a_patch_whose_reach_is_within_the_guard_is_not_scanned_and_still_decodes() {
    // A message at the guard already (an argument 125 levels deep, 128 with the envelope,
    // the params and `arguments`): a renamed tool reaches 3 levels, so nothing is scanned, and
    // the patched text still decodes.
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let text = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"a","arguments":{}}}}}"#,
        deep(MAX_JSON_DEPTH - 3)
    );
    let m = Message::decode_str(&text).unwrap();
    let renamed = m.with_name("b").unwrap();
    assert_eq!(Message::decode_str(renamed.as_str()).unwrap(), renamed);
    // Members added inside `_meta` reach exactly as deep as they nest: 125 levels fit, 126 do not.
    let fits = m
        .patch_missing(
            Part::Params,
            &["_meta"],
            &[("k", &deep(MAX_JSON_DEPTH - 3))],
        )
        .unwrap();
    assert_eq!(Message::decode_str(fits.as_str()).unwrap(), fits);
    assert!(
        m.patch_missing(
            Part::Params,
            &["_meta"],
            &[("k", &deep(MAX_JSON_DEPTH - 2))]
        )
        .is_err()
    );
}

#[test]
fn a_patched_message_is_the_message_its_text_decodes_to() {
    // Patching moves the spans of the members after the patched one instead of decoding
    // again; the message must still equal a fresh decode of its own text.
    let texts = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__t","arguments":{}}}"#,
        r#"{"params":{"name":"a__t"},"method":"tools/call","id":"k","jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"},"id":7,"z":[1]}"#,
    ];
    for t in texts {
        let m = Message::decode_str(t).unwrap();
        for patched in [
            m.with_name("a-much-longer-name-than-before").unwrap(),
            m.with_name("").unwrap(),
            m.with_progress_token("\"tok\"").unwrap(),
            m.patch_missing(Part::Params, &["_meta"], &[("a", "1"), ("b", "{}")])
                .unwrap(),
        ] {
            assert_eq!(Message::decode_str(patched.as_str()).unwrap(), patched);
            assert_eq!(patched.id(), m.id());
            assert_eq!(
                patched.with_id(&crate::id::Id::from("n")).id(),
                Some(&crate::id::Id::from("n"))
            );
        }
    }
    let r = Message::decode_str(r#"{"result":{"content":[]},"id":3,"jsonrpc":"2.0"}"#).unwrap();
    let patched = r.patch(Part::Result, &["isError"], "true").unwrap();
    assert_eq!(
        patched.as_str(),
        r#"{"result":{"isError":true,"content":[]},"id":3,"jsonrpc":"2.0"}"#
    );
    assert_eq!(Message::decode_str(patched.as_str()).unwrap(), patched);
}

#[test]
fn set_missing_adds_only_what_is_absent_in_one_splice() {
    let members = [("v", "\"2026\""), ("caps", "{}"), ("info", r#"{"n":1}"#)];
    let out = set_missing(r#"{"_meta":{"caps":{"x":1}},"a":1}"#, &["_meta"], &members)
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        r#"{"_meta":{"v":"2026","info":{"n":1},"caps":{"x":1}},"a":1}"#
    );
    let out = set_missing(r#"{"a":1}"#, &["_meta"], &members)
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        r#"{"_meta":{"v":"2026","caps":{},"info":{"n":1}},"a":1}"#
    );
    let all_there = r#"{"_meta":{"info":0,"caps":0,"v":0}}"#;
    assert_eq!(set_missing(all_there, &["_meta"], &members).unwrap(), None);
    assert!(matches!(
        set_missing(r#"{"_meta":[]}"#, &["_meta"], &members),
        Err(PatchError::NotAnObject(..))
    ));
    assert!(matches!(
        set_missing(r#"{}"#, &["_meta"], &[("k", "nope")]),
        Err(PatchError::BadReplacement(_))
    ));
    let bare = Message::decode_str(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).unwrap();
    let with = bare
        .patch_missing(Part::Params, &["_meta"], &members)
        .unwrap();
    assert_eq!(
        with.params(),
        Some(r#"{"_meta":{"v":"2026","caps":{},"info":{"n":1}}}"#)
    );
}

#[test]
fn checked_members_patch_as_unchecked_ones_do_and_refuse_bad_values_up_front() {
    let members = [
        ("protocolVersion", "\"2026-07-28\""),
        ("clientInfo", r#"{"name":"m"}"#),
    ];
    let checked = CheckedMembers::new(&members).unwrap();
    for text in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"clientInfo":{"name":"c"}}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    ] {
        let m = Message::decode_str(text).unwrap();
        assert_eq!(
            m.patch_missing_checked(Part::Params, &["_meta"], &checked)
                .unwrap()
                .as_str(),
            m.patch_missing(Part::Params, &["_meta"], &members)
                .unwrap()
                .as_str()
        );
    }
    assert!(matches!(
        CheckedMembers::new(&[("a", "{")]),
        Err(PatchError::BadReplacement(_))
    ));
}

#[test]
fn replacing_the_whole_params_with_a_scalar_is_refused_and_the_message_stays_valid() {
    // Found by the `patch` fuzz target: `[]` params patched at the empty path with `null`.
    let m = Message::decode_str(r#"{"jsonrpc":"2.0","id":7,"method":"m","params":[]}"#).unwrap();
    assert!(matches!(
        m.patch(Part::Params, &[], "null"),
        Err(PatchError::Broken(Fault {
            kind: crate::envelope::FaultKind::ParamsNotStructured,
            ..
        }))
    ));
    let replaced = m.patch(Part::Params, &[], " {\"a\":1}\n").unwrap();
    assert_eq!(Message::decode_str(replaced.as_str()).unwrap(), replaced);
    assert_eq!(replaced.params(), Some(r#"{"a":1}"#));
}
