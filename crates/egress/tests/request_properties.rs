//! Properties of the proxy's request parser on arbitrary input, in the test suite (the libFuzzer
//! target in crates/egress/fuzz drives the same parser for longer, by hand): `parse` is total, and a
//! head it forwards is one origin-form request with CRLF line ends only, no proxy or hop-by-hop
//! header, and `Connection: close`.

#![allow(clippy::unwrap_used, clippy::panic)]

mod parsed_request;

use manifold_egress::request::parse;
use parsed_request::check_parsed;
use proptest::prelude::*;

/// Heads built from the pieces that matter (methods, targets, headers, stray control bytes), so
/// that many of them parse and the forwarded output is checked, not only the refusals.
fn head() -> impl Strategy<Value = Vec<u8>> {
    let method = prop::sample::select(vec!["GET", "POST", "CONNECT", "get", ""]);
    let target = prop::sample::select(vec![
        "http://a.test/x",
        "HTTP://B.test:8080?q",
        "http://[::1]:81/p",
        "a.test:443",
        "http://a.test/x\nX: 1",
        "http://u@a.test/",
        "/relative",
    ]);
    let header = (
        prop::sample::select(vec![
            "Host",
            "Proxy-Authorization",
            "Connection",
            "Keep-Alive",
            "Accept",
            "Bad Name",
        ]),
        "[ -~\t\r\n\u{0}]{0,12}",
    );
    (
        method,
        target,
        prop::sample::select(vec!["HTTP/1.1", "HTTP/1.0", "HTTP/2"]),
        prop::collection::vec(header, 0..6),
    )
        .prop_map(|(m, t, v, headers)| {
            let mut text = format!("{m} {t} {v}\r\n");
            for (name, value) in headers {
                text.push_str(&format!("{name}: {value}\r\n"));
            }
            text.push_str("\r\n");
            text.into_bytes()
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
        check_parsed(&bytes);
    }

    #[test]
    fn a_forwarded_head_is_one_clean_origin_request(head in head()) {
        check_parsed(&head);
    }
}
