//! What a log line may say about a call: argument names but not their values, session tags but
//! not session ids, error text with every configured secret cut out.
//!
//! Tool arguments carry whatever a user typed or a model produced (tokens, file contents,
//! personal data); a legacy session id is a bearer credential; configured secrets (`${...}`
//! values) may echo back in an upstream's error. None of them belongs in a log collector.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use sha2::{Digest, Sha256};

/// What replaces a hidden value.
pub const REDACTED: &str = "<redacted>";
/// Secrets shorter than this are not searched for: replacing every `a` or `1` in a line would
/// destroy it and hide nothing (such a value is no secret).
pub const MIN_SECRET_LEN: usize = 4;
/// Argument names shown per call.
pub const MAX_ARGUMENT_NAMES: usize = 32;
/// Longest argument name shown as it is.
pub const MAX_ARGUMENT_NAME_LEN: usize = 64;
/// Longest argument text logged when values are logged (`log_arguments = "full"`).
pub const MAX_LOGGED_ARGUMENTS: usize = 2048;
/// Longest error text logged per call.
pub const MAX_LOGGED_ERROR: usize = 512;

/// Cuts configured secrets out of text.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret containing another is cut whole.
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// The text with every secret replaced by [`REDACTED`]; borrowed when there was none.
    pub fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }
}

/// At most `max` bytes of `text`, cut at a character boundary, with `…` when cut.
pub fn capped(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", text.get(..end).unwrap_or_default()))
}

/// A short, stable tag for a session id: the first 8 bytes of its SHA-256, in hex. Lines of one
/// session share it; the id itself (a bearer credential) cannot be recovered from it.
pub fn session_tag(session_id: &str) -> String {
    let digest = Sha256::digest(session_id.as_bytes());
    crate::trace_context::hex(digest.get(..8).unwrap_or_default())
}

struct ArgumentNames(Vec<String>, usize);

impl<'de> serde::Deserialize<'de> for ArgumentNames {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Names;
        impl<'de> Visitor<'de> for Names {
            type Value = ArgumentNames;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ArgumentNames, A::Error> {
                let mut names = Vec::new();
                let mut total = 0usize;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    total += 1;
                    if names.len() < MAX_ARGUMENT_NAMES {
                        names.push(capped(&key, MAX_ARGUMENT_NAME_LEN).into_owned());
                    }
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(ArgumentNames(names, total))
            }
        }
        d.deserialize_map(Names)
    }
}

/// The arguments of a call with every value hidden: `{"path":"<redacted>","mode":"<redacted>"}`
/// (names in the order sent, at most [`MAX_ARGUMENT_NAMES`], then `"…":"N more"`). Anything
/// that is not a JSON object is just [`REDACTED`].
pub fn argument_names(raw_arguments: &str) -> String {
    let Ok(ArgumentNames(names, total)) = serde_json::from_str::<ArgumentNames>(raw_arguments)
    else {
        return REDACTED.to_owned();
    };
    let mut out = String::from("{");
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::from(name.as_str()).to_string());
        out.push(':');
        out.push_str(&serde_json::Value::from(REDACTED).to_string());
    }
    if total > names.len() {
        out.push_str(&format!(",\"…\":\"{} more\"", total - names.len()));
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_cut_out_longest_first_and_short_values_are_ignored() {
        let r = Redactor::new([
            "tok".to_owned(),
            "s3cr3t-token".to_owned(),
            "s3cr3t".to_owned(),
        ]);
        assert_eq!(
            r.scrub("connect to https://x/?key=s3cr3t-token failed (s3cr3t), tok"),
            "connect to https://x/?key=<redacted> failed (<redacted>), tok"
        );
        assert!(matches!(r.scrub("nothing here"), Cow::Borrowed(_)));
        assert_eq!(Redactor::default().scrub("s3cr3t"), "s3cr3t");
    }

    #[test]
    fn argument_values_never_appear_only_names_do() {
        let shown = argument_names(
            r#"{"path":"/home/ada/secret.txt","token":"sk-live-123","n":42,"nested":{"deep":"value"}}"#,
        );
        assert_eq!(
            shown,
            r#"{"path":"<redacted>","token":"<redacted>","n":"<redacted>","nested":"<redacted>"}"#
        );
        for value in ["/home/ada", "sk-live-123", "42", "deep", "value"] {
            assert!(!shown.contains(value), "{value} leaked: {shown}");
        }
        assert_eq!(argument_names("[1,2]"), REDACTED);
        assert_eq!(argument_names("\"just a string\""), REDACTED);
        assert_eq!(argument_names("not json"), REDACTED);
        assert_eq!(argument_names("{}"), "{}");
    }

    #[test]
    fn argument_names_are_bounded_in_number_and_length() {
        let many: String = (0..40)
            .map(|i| format!("\"k{i}\":{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let shown = argument_names(&format!("{{{many}}}"));
        let v: serde_json::Value = serde_json::from_str(&shown).unwrap();
        let map = v.as_object().unwrap();
        assert_eq!(map.len(), MAX_ARGUMENT_NAMES + 1);
        assert_eq!(map["…"], "8 more");
        let long = "n".repeat(300);
        let shown = argument_names(&format!("{{\"{long}\":1}}"));
        assert!(shown.len() < 100, "{shown}");
        let escaped = argument_names(r#"{"a\"b\n":1}"#);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&escaped).unwrap(),
            serde_json::json!({"a\"b\n": "<redacted>"})
        );
    }

    #[test]
    fn session_tags_are_stable_short_and_do_not_contain_the_id() {
        let id = "k1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.sealed-state";
        let tag = session_tag(id);
        assert_eq!(tag.len(), 16);
        assert_eq!(tag, session_tag(id));
        assert_ne!(tag, session_tag("k1.other"));
        assert!(!id.contains(&tag));
        assert_eq!(session_tag("abc"), "ba7816bf8f01cfea", "SHA-256 of \"abc\"");
    }

    #[test]
    fn long_text_is_capped_at_a_character_boundary() {
        assert_eq!(capped("short", 10), "short");
        assert_eq!(capped("ééé", 3), "é…");
        assert_eq!(capped("abcdef", 3), "abc…");
    }
}
