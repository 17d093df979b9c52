//! What every parse of a proxy request head must satisfy, shared by the property tests
//! (`tests/request_properties.rs`) and the libFuzzer target (`fuzz/fuzz_targets/request_head.rs`):
//! a parsed target has a non-empty lowercase host and a non-zero port; a forwarded head is one
//! origin-form request with CRLF line ends only and no control byte but tab, no proxy or
//! hop-by-hop header, `Connection: close`, and its target written back as an absolute URI parses
//! to the same target.

#![allow(clippy::unwrap_used, clippy::panic, dead_code)]

use manifold_egress::ProxyRequest;
use manifold_egress::request::parse;

/// Parses `head` and panics, naming the fault, if the outcome breaks a property above.
pub fn check_parsed(head: &[u8]) {
    match parse(head) {
        Ok(ProxyRequest::Connect { target }) => {
            assert!(!target.host.is_empty() && target.port != 0, "{target:?}");
            assert_eq!(target.host, target.host.to_ascii_lowercase());
        }
        Ok(ProxyRequest::Forward {
            target,
            head: forwarded,
        }) => {
            assert!(!target.host.is_empty() && target.port != 0, "{target:?}");
            let text = std::str::from_utf8(&forwarded).unwrap();
            assert!(text.ends_with("Connection: close\r\n\r\n"), "{text:?}");
            assert_eq!(text.matches("\r\n\r\n").count(), 1, "{text:?}");
            let bytes = text.as_bytes();
            for (i, b) in bytes.iter().enumerate() {
                let crlf = (*b == b'\r' && bytes.get(i + 1) == Some(&b'\n'))
                    || (*b == b'\n' && i > 0 && bytes.get(i - 1) == Some(&b'\r'));
                assert!(
                    !b.is_ascii_control() || *b == b'\t' || crlf,
                    "a bare control byte {b:#x} in {text:?}"
                );
            }
            let mut lines = text.split("\r\n");
            let line = lines.next().unwrap_or_default();
            let mut parts = line.split(' ');
            let (method, path, version) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            assert!(path.starts_with('/'), "{line:?}");
            for header in lines.filter(|l| !l.is_empty()) {
                let name = header
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                assert!(
                    !name.starts_with("proxy-") && name != "keep-alive",
                    "{header:?}"
                );
                assert!(
                    name != "connection" || header == "Connection: close",
                    "{header:?}"
                );
            }
            let host = if target.host.contains(':') {
                format!("[{}]", target.host)
            } else {
                target.host.clone()
            };
            let again = format!(
                "{method} http://{host}:{}{path} {version}\r\n\r\n",
                target.port
            );
            match parse(again.as_bytes()) {
                Ok(ProxyRequest::Forward { target: back, .. }) => {
                    assert_eq!(back, target, "{again:?}")
                }
                other => panic!("{again:?} parsed to {other:?}"),
            }
        }
        Err(_) => {}
    }
}
