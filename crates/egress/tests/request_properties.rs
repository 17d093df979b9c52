//! Properties of the proxy's request parser on arbitrary input, in the test suite (the libFuzzer
//! target in crates/egress/fuzz drives the same parser for longer, by hand): `parse` is total, and a
//! head it forwards is one origin-form request with CRLF line ends only, no proxy or hop-by-hop
//! header, and `Connection: close`.

#![allow(clippy::unwrap_used, clippy::panic)]

use manifold_egress::ProxyRequest;
use manifold_egress::request::parse;
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

fn check_forwarded(head: &[u8]) {
    if let Ok(ProxyRequest::Forward { target, head }) = parse(head) {
        assert!(!target.host.is_empty() && target.port != 0);
        let text = String::from_utf8(head).unwrap();
        assert!(text.ends_with("Connection: close\r\n\r\n"), "{text:?}");
        assert_eq!(text.matches("\r\n\r\n").count(), 1, "{text:?}");
        let bytes = text.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            let crlf = (*b == b'\r' && bytes.get(i + 1) == Some(&b'\n'))
                || (*b == b'\n' && i > 0 && bytes.get(i - 1) == Some(&b'\r'));
            assert!(
                !b.is_ascii_control() || *b == b'\t' || crlf,
                "bare control byte {b:#x} forwarded in {text:?}"
            );
        }
        for header in text.split("\r\n").skip(1).filter(|l| !l.is_empty()) {
            let name = header.split(':').next().unwrap().to_ascii_lowercase();
            assert!(
                !name.starts_with("proxy-") && name != "keep-alive",
                "{header:?}"
            );
            assert!(
                name != "connection" || header == "Connection: close",
                "{header:?}"
            );
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
        check_forwarded(&bytes);
    }

    #[test]
    fn a_forwarded_head_is_one_clean_origin_request(head in head()) {
        check_forwarded(&head);
    }
}
