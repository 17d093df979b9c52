//! Server-Sent Events as the peer writes them, byte for byte.
//!
//! Field order is fixed (`event`, `id`, `retry`, `data`) so the README can quote exact events.

use bytes::Bytes;

/// Reconnection delay announced in priming events, in milliseconds.
pub const RETRY_MS: u64 = 1000;

/// The comment `sse-comments` writes before every event.
pub const KEEP_ALIVE_COMMENT: &[u8] = b": keep-alive\n\n";

/// `event: message`, optionally `id: ..`, then one `data:` line per line of `data`.
pub fn message_event(id: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 48);
    out.extend_from_slice(b"event: message\n");
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    push_data(&mut out, data);
    Bytes::from(out)
}

/// The event a legacy Streamable HTTP stream opens with: an id to resume from and no data.
pub fn priming_event(id: &str) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: {RETRY_MS}\ndata: \n\n"))
}

/// The first event of the legacy HTTP+SSE transport: where to POST messages.
pub fn endpoint_event(path: &str) -> Bytes {
    let mut out = b"event: endpoint\n".to_vec();
    push_data(&mut out, path.as_bytes());
    Bytes::from(out)
}

/// A bare `retry:` field, sent when a resumed stream has events to replay (they carry their ids).
pub fn retry_only() -> Bytes {
    Bytes::from(format!("retry: {RETRY_MS}\n\n"))
}

fn push_data(out: &mut Vec<u8>, data: &[u8]) {
    for line in data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// Prepends the keep-alive comment when `sse-comments` is on.
pub fn with_comment(enabled: bool, event: Bytes) -> Bytes {
    if !enabled {
        return event;
    }
    let mut out = Vec::with_capacity(KEEP_ALIVE_COMMENT.len() + event.len());
    out.extend_from_slice(KEEP_ALIVE_COMMENT);
    out.extend_from_slice(&event);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn message_event_has_fixed_field_order() {
        let event = message_event(Some("3-1"), br#"{"a":1}"#);
        assert_eq!(&event[..], b"event: message\nid: 3-1\ndata: {\"a\":1}\n\n");
    }

    #[test]
    fn embedded_newlines_become_separate_data_lines() {
        let event = message_event(None, b"a\nb");
        assert_eq!(&event[..], b"event: message\ndata: a\ndata: b\n\n");
    }

    #[test]
    fn priming_event_has_id_retry_and_empty_data() {
        assert_eq!(
            &priming_event("1-0")[..],
            b"id: 1-0\nretry: 1000\ndata: \n\n"
        );
    }
}
