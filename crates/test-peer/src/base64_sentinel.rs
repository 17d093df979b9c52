//! Decoding the `=?base64?...?=` form that modern Streamable HTTP uses for header values that
//! are not plain ASCII (`Mcp-Name`, `Mcp-Param-*`), so the peer can compare them with the body.
//!
//! Hand-written to keep the peer's dependency list short; standard alphabet, padding optional.

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// The header value as the body would spell it: decoded when it uses the sentinel, as is
/// otherwise. `None` when the sentinel wraps something that is not base64 of UTF-8.
pub fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
    {
        Some(encoded) => String::from_utf8(decode(encoded)?).ok(),
        None => Some(value.to_owned()),
    }
}

fn sextet(byte: u8) -> Option<u32> {
    let value = match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(value))
}

fn decode(text: &str) -> Option<Vec<u8>> {
    let symbols = text.trim_end_matches('=').as_bytes();
    if symbols.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(symbols.len() * 3 / 4);
    for group in symbols.chunks(4) {
        let mut bits: u32 = 0;
        for (position, symbol) in group.iter().enumerate() {
            bits |= sextet(*symbol)? << (18 - 6 * position);
        }
        let bytes = bits.to_be_bytes();
        let keep = group.len() - 1;
        out.extend(bytes.iter().skip(1).take(keep));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn decodes_the_spec_examples() {
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(),
            Some("Hello, 世界")
        );
        assert_eq!(
            decode_header_value("=?base64?IHBhZGRlZCA=?=").as_deref(),
            Some(" padded ")
        );
        assert_eq!(decode_header_value("us-west1").as_deref(), Some("us-west1"));
    }

    #[test]
    fn rejects_broken_base64() {
        assert_eq!(decode_header_value("=?base64?A?="), None);
        assert_eq!(decode_header_value("=?base64?!!!!?="), None);
    }
}
