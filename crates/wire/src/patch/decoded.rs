//! Reading and patching text that a decoder has already checked.
//!
//! The functions beside this module parse every value they pass and bound the depth first, which
//! is right for text from anywhere. Text cut from a decoded [`Message`](crate::Message) (its
//! params, its result, an element of a result's array, a catalog entry) has been through that
//! already; these walk only the levels on the key path (`shallow.rs`), which made the two dozen
//! lookups of a forwarded call several times cheaper. Given text that is not JSON they stay total
//! but may misread, so give them only decoded text. Duplicate keys on the path are refused here
//! too.

use std::ops::Range;

use super::{PatchError, Source, locate_in, set_in, set_missing_in};

/// The span of the value at `path`, if every key on the way exists.
pub fn locate(json: &str, path: &[&str]) -> Result<Option<Range<usize>>, PatchError> {
    locate_in(json, path, Source::Decoded)
}

/// The raw value at `path`, if present.
pub fn get<'a>(json: &'a str, path: &[&str]) -> Result<Option<&'a str>, PatchError> {
    Ok(locate_in(json, path, Source::Decoded)?.and_then(|r| json.get(r)))
}

/// The string at `path`, decoded, if present and a string.
pub fn get_str(json: &str, path: &[&str]) -> Result<Option<String>, PatchError> {
    Ok(get(json, path)?.and_then(|raw| serde_json::from_str::<String>(raw).ok()))
}

/// Sets the value at `path` to the raw JSON `value` (which is checked), creating missing objects
/// on the way; see [`super::set`].
pub fn set(json: &str, path: &[&str], value: &str) -> Result<String, PatchError> {
    set_in(json, path, value, Source::Decoded)
}

/// Adds each of `members` that the object at `path` lacks, in one splice; see
/// [`super::set_missing`].
pub fn set_missing(
    json: &str,
    path: &[&str],
    members: &[(&str, &str)],
) -> Result<Option<String>, PatchError> {
    set_missing_in(json, path, members, Source::Decoded)
}

/// The byte spans of the elements of the array `json`; see [`crate::elements::array_elements`].
pub fn array_elements(json: &str) -> Result<Vec<Range<usize>>, PatchError> {
    crate::elements::array_elements_in(json, Source::Decoded)
}

/// Applies `rewrite` to each element of the array at `path`; see
/// [`crate::elements::rewrite_elements`].
pub fn rewrite_elements(
    json: &str,
    path: &[&str],
    rewrite: impl FnMut(&str) -> Result<Option<String>, PatchError>,
) -> Result<String, PatchError> {
    crate::elements::rewrite_elements_in(json, path, Source::Decoded, rewrite)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The same answers as the checked functions on decoded text, for the paths a call reads.
    #[test]
    fn agrees_with_the_checked_functions_on_decoded_text() {
        let text = r#"{"content":[{"type":"text","text":"}{"}],"isError":true,"task":{"taskId":"a:1"},"_meta":{"k":[1,{"x":2}]}}"#;
        for path in [
            &["isError"][..],
            &["task", "taskId"],
            &["_meta", "k"],
            &["content"],
            &["missing"],
            &["task", "missing"],
        ] {
            assert_eq!(get(text, path), super::super::get(text, path), "{path:?}");
            assert_eq!(
                get_str(text, path),
                super::super::get_str(text, path),
                "{path:?}"
            );
            assert_eq!(
                set(text, path, "0"),
                super::super::set(text, path, "0"),
                "{path:?}"
            );
            assert_eq!(
                set_missing(text, path, &[("k", "1"), ("n", "2")]),
                super::super::set_missing(text, path, &[("k", "1"), ("n", "2")]),
                "{path:?}"
            );
        }
    }

    #[test]
    fn rewrites_the_same_elements_as_the_checked_function() {
        let text = r#"{"content":[{"type":"resource_link","uri":"a://1"}, {"type":"text","text":"]"},{"uri":"b"}],"z":[1]}"#;
        let rewrite = |el: &str| -> Result<Option<String>, PatchError> {
            Ok(match get_str(el, &["uri"])? {
                Some(u) => Some(set(el, &["uri"], &format!("\"p+{u}\""))?),
                None => None,
            })
        };
        assert_eq!(
            rewrite_elements(text, &["content"], rewrite),
            crate::elements::rewrite_elements(text, &["content"], rewrite)
        );
        assert_eq!(
            array_elements(r#"[1, {"a":"]"}]"#),
            crate::elements::array_elements(r#"[1, {"a":"]"}]"#)
        );
        assert!(rewrite_elements(r#"{"a":1}"#, &["a"], rewrite).is_err());
    }

    #[test]
    fn refuses_what_the_checked_functions_refuse_on_the_key_path() {
        assert_eq!(
            set(r#"{"name":1,"name":2}"#, &["name"], "3"),
            Err(PatchError::DuplicateKey("name".into()))
        );
        assert!(matches!(
            set(r#"{"a":[1]}"#, &["a", "b"], "3"),
            Err(PatchError::NotAnObject(..))
        ));
        assert!(matches!(
            set("{}", &["a"], "nope"),
            Err(PatchError::BadReplacement(_))
        ));
        assert!(matches!(
            get(r#"{"a":"#, &["a"]),
            Err(PatchError::Malformed(_))
        ));
    }
}
