//! The unit tests of `envelope.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used, clippy::panic)]
use super::*;

fn kind_of(s: &str) -> Result<Kind, FaultKind> {
    Message::decode_str(s).map(|m| m.kind()).map_err(|f| f.kind)
}

#[test]
fn decodes_the_four_kinds() {
    assert_eq!(
        kind_of(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        Ok(Kind::Request)
    );
    assert_eq!(
        kind_of(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Ok(Kind::Notification)
    );
    assert_eq!(
        kind_of(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
        Ok(Kind::Result)
    );
    assert_eq!(
        kind_of(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
        Ok(Kind::Error)
    );
}

#[test]
fn envelope_faults_are_typed() {
    use FaultKind::*;
    let cases: &[(&str, FaultKind)] = &[
        (r#"{"id":1,"method":"x"}"#, MissingVersion),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            WrongVersion("\"1.0\"".into()),
        ),
        (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, MethodNotString),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            ResultAndError,
        ),
        (r#"{"jsonrpc":"2.0","id":1}"#, NeitherResultNorError),
        (r#"{"jsonrpc":"2.0","result":{}}"#, ResponseWithoutId),
        (
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            ResultWithNullId,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
            ParamsNotStructured,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#,
            RequestWithOutcome,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
            DuplicateMember("id"),
        ),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#, Batch),
        (r#""hello""#, NotAnObject),
    ];
    for (text, want) in cases {
        assert_eq!(kind_of(text).as_ref(), Err(want), "for {text}");
    }
}

#[test]
fn escaped_spellings_of_the_envelope_are_read_as_written() {
    // "2\u002e0" is the string "2.0"; it used to be refused as a wrong version because the
    // check borrowed the string, which fails whenever the JSON text holds an escape.
    let text = r#"{"json\u0072pc":"2\u002e0","\u0069d":"\u0041","method":"m\/x"}"#;
    let m = Message::decode_str(text).unwrap();
    assert_eq!(m.kind(), Kind::Request);
    assert_eq!(m.id(), Some(&Id::from("A")));
    assert_eq!(m.method(), Some("m/x"));
    assert_eq!(
        kind_of(r#"{"jsonrpc":"2\u002e1","id":1,"method":"x"}"#),
        Err(FaultKind::WrongVersion(r#""2\u002e1""#.into()))
    );
}

#[test]
fn a_malformed_message_with_a_readable_id_keeps_it() {
    let f = Message::decode_str(r#"{"jsonrpc":"1.0","id":42,"method":"x"}"#).unwrap_err();
    assert_eq!(f.id, Some(Id::Num(42)));
    let reply = f.to_response();
    assert_eq!(reply.id(), Some(&Id::Num(42)));
    assert_eq!(reply.error_object().unwrap().code, -32600);
}

#[test]
fn invalid_utf8_is_a_parse_error_that_keeps_the_id() {
    let mut bytes = br#"{"jsonrpc":"2.0","id":5,"method":"x","params":{"a":""#.to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(br#""}}"#);
    let f = Message::decode(&bytes).unwrap_err();
    assert!(matches!(f.kind, FaultKind::InvalidUtf8(_)));
    assert_eq!(f.id, Some(Id::Num(5)));
    assert_eq!(f.code(), ErrorCode::ParseError);
}

#[test]
fn float_and_null_ids_are_refused() {
    assert!(matches!(
        kind_of(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
        Err(FaultKind::BadId(IdError::NotInteger(_)))
    ));
    assert!(matches!(
        kind_of(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
        Err(FaultKind::BadId(IdError::Null))
    ));
}

#[test]
fn depth_bombs_and_garbage_are_faults() {
    let bomb = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(matches!(kind_of(&bomb), Err(FaultKind::TooDeep { .. })));
    assert!(matches!(kind_of("not json"), Err(FaultKind::NotJson(_))));
    assert!(matches!(
        kind_of("{\"jsonrpc\":"),
        Err(FaultKind::NotJson(_))
    ));
    assert!(matches!(kind_of(""), Err(FaultKind::NotJson(_))));
}

#[test]
fn content_crosses_byte_for_byte() {
    let text = r#"{"jsonrpc":"2.0","id":9,"result":{"z":1,"a":1.0,"s":"\u00e9\n","x-vendor":{"k":[1e2]}}}"#;
    let m = Message::decode_str(text).unwrap();
    assert_eq!(m.as_str(), text);
    assert_eq!(
        m.result_raw(),
        Some(r#"{"z":1,"a":1.0,"s":"\u00e9\n","x-vendor":{"k":[1e2]}}"#)
    );
    let moved = m.with_id(&Id::from("gw-1"));
    assert_eq!(moved.as_str(), text.replace("\"id\":9", "\"id\":\"gw-1\""));
    assert_eq!(moved.result_raw(), m.result_raw());
    assert_eq!(Message::decode_str(moved.as_str()).unwrap(), moved);
}

#[test]
fn built_messages_decode_to_themselves() {
    let id = Id::Num(3);
    let built = [
        Message::request(&id, "tools/call", Some(r#"{"name":"x"}"#)),
        Message::notification("notifications/initialized", None),
        Message::result(&id, "{}"),
        Message::error(None, &ErrorObject::new(ErrorCode::ParseError, "bad \"x\"")),
        Message::error(
            Some(id.clone()),
            &ErrorObject::new(ErrorCode::InternalError, "e"),
        ),
    ];
    for m in built {
        let again = Message::decode_str(m.as_str()).unwrap();
        assert_eq!(again, m, "{}", m.as_str());
    }
}

/// Lookups through a message's member index answer as a walk of its params or result does,
/// for present, missing, nested, escaped and doubled keys, on first use and after.
#[test]
fn indexed_lookups_agree_with_walking_the_part() {
    let params = r#"{"name":"echo","arguments":{"a":[1,{"b":2}]},"\u005fmeta":{"k":"v"},"n":1,"n":2,"s":"x\"y"}"#;
    let request = Message::decode_str(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}"#
    ))
    .unwrap();
    let result =
        r#"{"content":[{"type":"text","text":"}"}],"isError":true,"resultType":"complete"}"#;
    let response =
        Message::decode_str(&format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#)).unwrap();
    let paths: [&[&str]; 11] = [
        &["name"],
        &["arguments", "a"],
        &["arguments", "missing"],
        &["_meta", "k"],
        &["n"],
        &["s"],
        &["missing"],
        &["isError"],
        &["content"],
        &["resultType"],
        &[],
    ];
    for round in 0..2 {
        for path in paths {
            assert_eq!(
                request.params_raw(path),
                crate::patch::decoded::get(params, path).ok().flatten(),
                "params {path:?}, round {round}"
            );
            assert_eq!(
                response.result_at(path),
                crate::patch::decoded::get(result, path).ok().flatten(),
                "result {path:?}, round {round}"
            );
        }
    }
    assert_eq!(request.params_str(&["name"]).as_deref(), Some("echo"));
    assert_eq!(request.params_str(&["s"]).as_deref(), Some("x\"y"));
    assert_eq!(
        request.params_raw(&["n"]),
        None,
        "a doubled key is read as neither"
    );
    assert_eq!(
        response.result_str(&["resultType"]).as_deref(),
        Some("complete")
    );
    // A patched message indexes its own text, not the one it came from.
    let renamed = request.with_name("other").unwrap();
    assert_eq!(renamed.params_str(&["name"]).as_deref(), Some("other"));
    assert_eq!(request.params_str(&["name"]).as_deref(), Some("echo"));
    assert_eq!(renamed.clone().params_raw(&["_meta", "k"]), Some(r#""v""#));
}
