//! JSON-RPC request ids.
//!
//! MCP allows integer and string ids (never null, never fractional). Ids are map keys on every hot
//! path (pending requests, progress routing), so they are a small hashable enum rather than raw JSON.

use std::fmt;
use std::sync::Arc;

/// A request id: an integer or a string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    Num(i64),
    Str(Arc<str>),
}

/// Why a JSON value is not a usable id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("the id is null; MCP ids must be an integer or a string")]
    Null,
    #[error("the id is not an integer (fractions and exponents are not allowed): {0}")]
    NotInteger(String),
    #[error("the id is out of the 64-bit integer range: {0}")]
    OutOfRange(String),
    #[error("the id must be an integer or a string, found {0}")]
    WrongType(&'static str),
}

impl Id {
    /// Reads an id from its raw JSON text.
    pub fn from_raw(raw: &str) -> Result<Id, IdError> {
        let t = raw.trim();
        match t.as_bytes().first() {
            Some(b'"') => serde_json::from_str::<String>(t)
                .map(|s| Id::Str(Arc::from(s)))
                .map_err(|_| IdError::WrongType("a malformed string")),
            Some(b'-' | b'0'..=b'9') => {
                if t.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
                    return Err(IdError::NotInteger(t.to_owned()));
                }
                t.parse::<i64>()
                    .map(Id::Num)
                    .map_err(|_| IdError::OutOfRange(t.to_owned()))
            }
            Some(b'n') => Err(IdError::Null),
            Some(b't' | b'f') => Err(IdError::WrongType("a boolean")),
            Some(b'{') => Err(IdError::WrongType("an object")),
            Some(b'[') => Err(IdError::WrongType("an array")),
            _ => Err(IdError::WrongType("nothing readable")),
        }
    }

    /// The id as JSON text, ready to splice into a message.
    pub fn to_json(&self) -> String {
        match self {
            Id::Num(n) => n.to_string(),
            Id::Str(s) => json_string(s),
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{}", json_string(s)),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Num(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(Arc::from(s))
    }
}

/// Encodes a string as a JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_string(&mut out, s);
    out
}

/// Appends `s` as a JSON string literal. Names, ids and URIs seldom need an escape: those are
/// copied between quotes as they are, the rest go through serde_json.
pub fn push_json_string(out: &mut String, s: &str) {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        // Serialising a &str cannot fail; the fallback keeps the function total anyway.
        out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\"")));
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_integer_and_string_ids() {
        assert_eq!(Id::from_raw("7"), Ok(Id::Num(7)));
        assert_eq!(Id::from_raw("-3"), Ok(Id::Num(-3)));
        assert_eq!(Id::from_raw(r#""a\"b""#), Ok(Id::from("a\"b")));
    }

    #[test]
    fn refuses_null_fraction_and_other_types() {
        assert_eq!(Id::from_raw("null"), Err(IdError::Null));
        assert_eq!(Id::from_raw("1.0"), Err(IdError::NotInteger("1.0".into())));
        assert_eq!(Id::from_raw("1e3"), Err(IdError::NotInteger("1e3".into())));
        assert!(matches!(Id::from_raw("true"), Err(IdError::WrongType(_))));
        assert!(matches!(Id::from_raw("[1]"), Err(IdError::WrongType(_))));
        assert!(matches!(
            Id::from_raw("99999999999999999999"),
            Err(IdError::OutOfRange(_))
        ));
    }

    proptest::proptest! {
        /// The fast path writes what serde_json writes, for every string.
        #[test]
        fn json_string_writes_what_serde_json_writes(s in proptest::prelude::any::<String>()) {
            proptest::prop_assert_eq!(json_string(&s), serde_json::to_string(&s).unwrap_or_default());
        }
    }

    #[test]
    fn json_string_escapes_quotes_backslashes_and_controls() {
        for s in [
            "plain",
            "",
            "é/ü \u{2028}",
            "a\"b",
            "a\\b",
            "line\nnext",
            "\u{1f}",
            "\u{7f}",
        ] {
            assert_eq!(
                json_string(s),
                serde_json::to_string(s).unwrap_or_default(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn json_text_round_trips() {
        for id in [Id::Num(-1), Id::from("x\u{1}y"), Id::from("é")] {
            assert_eq!(Id::from_raw(&id.to_json()), Ok(id));
        }
    }
}
