//! W3C Trace Context (`traceparent`, `tracestate`) as it reaches Manifold in HTTP headers and in
//! `params._meta`, and as Manifold passes it on.
//!
//! Parsing is total and strict, because both places are written by whoever sends the request: a
//! value that is not a valid `traceparent` is ignored (the specification's rule), never forwarded
//! as Manifold's own, and never allowed to make a header or a log line out of arbitrary text.

use std::fmt;

/// Longest `tracestate` passed on. The specification allows 32 list members and suggests
/// propagating at least 512 characters; longer values are dropped whole rather than cut, since a
/// cut list member would be corrupt.
pub const MAX_TRACESTATE_LEN: usize = 512;

/// The `_meta` key and HTTP header name of the parent.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key and HTTP header name of the vendor state.
pub const TRACESTATE: &str = "tracestate";

/// A parsed `traceparent` (version 00 fields; later versions are read by their first four fields,
/// as the specification asks, and passed on as version 00).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
    pub flags: u8,
}

/// Why a `traceparent` value was ignored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceParentError {
    #[error("a traceparent is version-traceid-parentid-flags (55 characters), not {0} characters")]
    Length(usize),
    #[error("a traceparent field is not lowercase hex, or a separator is not '-'")]
    Malformed,
    #[error("traceparent version ff is forbidden by the specification")]
    ForbiddenVersion,
    #[error("a traceparent's trace id and parent id must not be all zeros")]
    ZeroId,
}

/// Decodes lowercase hex into `out`; `None` on any other character or length.
fn hex_into(text: &str, out: &mut [u8]) -> Option<()> {
    let bytes = text.as_bytes();
    if bytes.len() != out.len() * 2 {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let (hi, lo) = (pair.first().copied()?, pair.get(1).copied()?);
        *slot = (digit(hi)? << 4) | digit(lo)?;
    }
    Some(())
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

impl TraceParent {
    /// Parses a `traceparent` value, surrounding whitespace allowed.
    pub fn parse(value: &str) -> Result<TraceParent, TraceParentError> {
        let value = value.trim_matches([' ', '\t']);
        let len = value.len();
        if len < 55 {
            return Err(TraceParentError::Length(len));
        }
        let field =
            |range: std::ops::Range<usize>| value.get(range).ok_or(TraceParentError::Malformed);
        let mut version = [0u8; 1];
        hex_into(field(0..2)?, &mut version).ok_or(TraceParentError::Malformed)?;
        if version[0] == 0xff {
            return Err(TraceParentError::ForbiddenVersion);
        }
        // Version 00 is exactly 55 characters; a later version may append fields after a '-'.
        if version[0] == 0 && len != 55 {
            return Err(TraceParentError::Length(len));
        }
        if len > 55 && field(55..56)? != "-" {
            return Err(TraceParentError::Malformed);
        }
        if field(2..3)? != "-" || field(35..36)? != "-" || field(52..53)? != "-" {
            return Err(TraceParentError::Malformed);
        }
        let mut parsed = TraceParent {
            trace_id: [0; 16],
            parent_id: [0; 8],
            flags: 0,
        };
        hex_into(field(3..35)?, &mut parsed.trace_id).ok_or(TraceParentError::Malformed)?;
        hex_into(field(36..52)?, &mut parsed.parent_id).ok_or(TraceParentError::Malformed)?;
        let mut flags = [0u8; 1];
        hex_into(field(53..55)?, &mut flags).ok_or(TraceParentError::Malformed)?;
        parsed.flags = flags[0];
        if parsed.trace_id == [0; 16] || parsed.parent_id == [0; 8] {
            return Err(TraceParentError::ZeroId);
        }
        Ok(parsed)
    }

    /// Whether the caller recorded (sampled) its span.
    pub fn sampled(&self) -> bool {
        self.flags & 0x01 == 0x01
    }

    /// The trace id as 32 lowercase hex digits (as log lines and trace backends show it).
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }
}

impl fmt::Display for TraceParent {
    /// The version 00 form: `00-<trace id>-<parent id>-<flags>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{}",
            hex(&self.trace_id),
            hex(&self.parent_id),
            hex(&[self.flags])
        )
    }
}

/// A parent and the vendor state that travels with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub parent: TraceParent,
    pub state: Option<String>,
}

/// A `tracestate` worth passing on: printable ASCII, within [`MAX_TRACESTATE_LEN`], not empty.
pub fn usable_tracestate(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let printable = value.bytes().all(|b| (0x20..=0x7e).contains(&b));
    (printable && !value.is_empty() && value.len() <= MAX_TRACESTATE_LEN).then_some(value)
}

impl TraceContext {
    /// A context from raw `traceparent` / `tracestate` values; `None` when the parent is invalid
    /// (the state alone means nothing without it).
    pub fn from_parts(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let parent = TraceParent::parse(traceparent).ok()?;
        Some(TraceContext {
            parent,
            state: tracestate.and_then(usable_tracestate).map(str::to_owned),
        })
    }

    /// The context a request carries: its `_meta` one when valid (the protocol's own carrier,
    /// set by the MCP client), else the HTTP headers' one.
    pub fn resolve(
        meta: (Option<&str>, Option<&str>),
        headers: (Option<&str>, Option<&str>),
    ) -> Option<TraceContext> {
        meta.0
            .and_then(|p| TraceContext::from_parts(p, meta.1))
            .or_else(|| {
                headers
                    .0
                    .and_then(|p| TraceContext::from_parts(p, headers.1))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_version_00_traceparent_parses_and_formats_back_identically() {
        let p = TraceParent::parse(EXAMPLE).unwrap();
        assert_eq!(p.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&p.parent_id), "00f067aa0ba902b7");
        assert_eq!(p.flags, 1);
        assert!(p.sampled());
        assert_eq!(p.to_string(), EXAMPLE);
        assert_eq!(TraceParent::parse(&format!(" {EXAMPLE}\t")).unwrap(), p);
    }

    #[test]
    fn unsampled_flags_are_kept() {
        let p =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!p.sampled());
        assert!(p.to_string().ends_with("-00"));
    }

    #[test]
    fn invalid_traceparents_are_refused_with_the_reason() {
        use TraceParentError::*;
        let cases = [
            ("", Length(0)),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
                Length(54),
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
                Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                Length(61),
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ForbiddenVersion,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                ZeroId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                ZeroId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
                Malformed,
            ),
            (
                "0é-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
                Malformed,
            ),
        ];
        for (value, reason) in cases {
            assert_eq!(TraceParent::parse(value), Err(reason), "{value:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_fields_and_passed_on_as_version_00() {
        let p = TraceParent::parse(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future-field",
        )
        .unwrap();
        assert_eq!(p.to_string(), EXAMPLE);
        assert_eq!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01xfuture"),
            Err(TraceParentError::Malformed)
        );
    }

    #[test]
    fn meta_wins_over_headers_and_an_invalid_meta_falls_back_to_headers() {
        let other = "00-11111111111111111111111111111111-2222222222222222-01";
        let both = TraceContext::resolve((Some(EXAMPLE), Some("m=1")), (Some(other), Some("h=1")))
            .unwrap();
        assert_eq!(both.parent.to_string(), EXAMPLE);
        assert_eq!(both.state.as_deref(), Some("m=1"));
        let fallback =
            TraceContext::resolve((Some("garbage"), Some("m=1")), (Some(other), Some("h=1")))
                .unwrap();
        assert_eq!(fallback.parent.to_string(), other);
        assert_eq!(fallback.state.as_deref(), Some("h=1"));
        assert_eq!(
            TraceContext::resolve((None, None), (None, Some("h=1"))),
            None
        );
    }

    #[test]
    fn tracestate_is_dropped_when_unprintable_empty_or_too_long() {
        assert_eq!(
            usable_tracestate("congo=t61rcWkgMzE"),
            Some("congo=t61rcWkgMzE")
        );
        assert_eq!(usable_tracestate(""), None);
        assert_eq!(usable_tracestate("a=b\r\nx: y"), None);
        assert_eq!(usable_tracestate(&"a".repeat(MAX_TRACESTATE_LEN + 1)), None);
        assert!(usable_tracestate(&"a".repeat(MAX_TRACESTATE_LEN)).is_some());
    }
}
