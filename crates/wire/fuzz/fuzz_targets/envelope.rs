//! Fuzzes `Message::decode`, the first code to touch every byte a peer sends.
//!
//! Beyond "never panics", it pins what forwarding relies on: a decoded message is its input byte
//! for byte and re-decodes to itself; moving it to another id changes only the id; and every fault
//! turns into an error response that itself decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use manifold_wire::{Id, Kind, Message};

/// Ids derived from the input so that span shifts of every size and string escapes get exercised.
fn ids_for(data: &[u8]) -> [Id; 3] {
    let lossy = String::from_utf8_lossy(data);
    let short: String = lossy.chars().rev().take(12).collect();
    [
        Id::Num(i64::MIN),
        Id::Num(data.len() as i64 % 10),
        Id::from(short.as_str()),
    ]
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn common_suffix(a: &[u8], b: &[u8], prefix: usize) -> usize {
    let room = a.len().min(b.len()) - prefix;
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count()
}

fn check_decoded(data: &[u8], m: &Message) {
    assert_eq!(
        m.as_str().as_bytes(),
        data,
        "decoding must keep the text as received"
    );
    let again = Message::decode_str(m.as_str()).expect("a decoded message must re-decode");
    assert_eq!(&again, m);
    match m.kind() {
        Kind::Request => assert!(m.id().is_some() && m.method().is_some()),
        Kind::Notification => assert!(m.id().is_none() && m.method().is_some()),
        Kind::Result => assert!(m.result_raw().is_some() && m.error_raw().is_none()),
        Kind::Error => {
            assert!(m.error_raw().is_some() && m.result_raw().is_none());
            assert!(
                m.error_object().is_some(),
                "a decoded error response has a readable error"
            );
        }
    }

    let ids = ids_for(data);
    for id in &ids {
        let moved = m.with_id(id);
        assert_eq!(moved.kind(), m.kind());
        assert_eq!(moved.method(), m.method());
        assert_eq!(moved.params(), m.params());
        assert_eq!(moved.result_raw(), m.result_raw());
        assert_eq!(moved.error_raw(), m.error_raw());
        if m.kind() == Kind::Notification {
            assert_eq!(&moved, m, "a notification has no id to move");
            continue;
        }
        assert_eq!(moved.id(), Some(id));
        let redecoded = Message::decode_str(moved.as_str()).expect("a moved message must decode");
        assert_eq!(redecoded, moved);
        // Only a window no longer than the new id's text may differ from the original.
        let (old, new) = (m.as_str().as_bytes(), moved.as_str().as_bytes());
        let p = common_prefix(old, new);
        let s = common_suffix(old, new, p);
        assert!(
            new.len() - p - s <= id.to_json().len(),
            "bytes outside the id changed"
        );
    }
    // Moving twice is the same as moving once: the id span is tracked across moves.
    let twice = m.with_id(&ids[0]).with_id(&ids[2]);
    assert_eq!(twice.as_str(), m.with_id(&ids[2]).as_str());
}

fuzz_target!(|data: &[u8]| {
    match Message::decode(data) {
        Ok(m) => check_decoded(data, &m),
        Err(fault) => {
            let reply = fault.to_response();
            assert_eq!(reply.kind(), Kind::Error);
            assert_eq!(reply.id(), fault.id.as_ref());
            let back = Message::decode_str(reply.as_str()).expect("a fault's reply must decode");
            assert_eq!(back, reply);
            let object = back
                .error_object()
                .expect("the reply carries an error object");
            assert_eq!(object.code, fault.code().code());
            assert_eq!(object.message, fault.kind.to_string());
        }
    }
});
