//! W3C trace context as HTTP headers on requests to HTTP upstreams.
//!
//! The gateway puts the trace context a request should continue into its `params._meta`
//! (`traceparent`, `tracestate`), which every MCP peer can read. HTTP servers, proxies and
//! service meshes in between read it from the `traceparent` and `tracestate` headers instead, so
//! the same values go there too. Only a valid `traceparent` is copied: `_meta` is the client's
//! text, and must not become arbitrary headers.

use manifold_telemetry::trace_context::{TRACEPARENT, TRACESTATE, TraceContext};
use manifold_wire::Message;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

fn meta_string(message: &Message, key: &str) -> Option<String> {
    message
        .params_raw(&["_meta", key])
        .and_then(|raw| serde_json::from_str::<String>(raw).ok())
}

/// Adds `traceparent` (and `tracestate`) headers for the trace context in the message's
/// `_meta`, when it carries a valid one.
pub fn copy_from_meta(message: &Message, headers: &mut HeaderMap) {
    let Some(parent) = meta_string(message, TRACEPARENT) else {
        return;
    };
    let state = meta_string(message, TRACESTATE);
    let Some(trace) = TraceContext::from_parts(&parent, state.as_deref()) else {
        return;
    };
    if let Ok(v) = HeaderValue::from_str(&trace.parent.to_string()) {
        headers.insert(HeaderName::from_static(TRACEPARENT), v);
    }
    if let Some(v) = trace.state.and_then(|s| HeaderValue::from_str(&s).ok()) {
        headers.insert(HeaderName::from_static(TRACESTATE), v);
    }
}

/// The trace headers for a message, as a map of their own.
pub fn from_meta(message: &Message) -> HeaderMap {
    let mut headers = HeaderMap::new();
    copy_from_meta(message, &mut headers);
    headers
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use manifold_wire::Id;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_meta_trace_becomes_headers() {
        let m = Message::request(
            &Id::Num(1),
            "tools/call",
            Some(&format!(
                r#"{{"name":"x","_meta":{{"traceparent":"{PARENT}","tracestate":"v=1"}}}}"#
            )),
        );
        let h = from_meta(&m);
        assert_eq!(h.get("traceparent").unwrap(), PARENT);
        assert_eq!(h.get("tracestate").unwrap(), "v=1");
    }

    #[test]
    fn an_invalid_or_absent_trace_adds_no_header() {
        for params in [
            r#"{"name":"x"}"#,
            r#"{"_meta":{"traceparent":"00-zz"}}"#,
            r#"{"_meta":{"traceparent":7,"tracestate":"v=1"}}"#,
        ] {
            let m = Message::request(&Id::Num(1), "tools/call", Some(params));
            assert!(from_meta(&m).is_empty(), "{params}");
        }
    }
}
