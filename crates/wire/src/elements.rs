//! Rewriting each element of a JSON array in place.
//!
//! Some things Manifold owns live inside arrays it does not own: the `uri` of every entry of a
//! `resources/read` result's `contents`, or of every `resource_link` in a tool result's `content`.
//! This finds the elements by their byte spans and splices only the ones a rewrite changes.

use std::ops::Range;

use serde_json::value::RawValue;

use crate::depth::{MAX_JSON_DEPTH, max_depth};
use crate::patch::{PatchError, Source, locate_in};

/// The byte spans of the elements of the JSON array `json`.
pub fn array_elements(json: &str) -> Result<Vec<Range<usize>>, PatchError> {
    array_elements_in(json, Source::Unchecked)
}

pub(crate) fn array_elements_in(
    json: &str,
    source: Source,
) -> Result<Vec<Range<usize>>, PatchError> {
    if source == Source::Decoded {
        return crate::shallow::element_spans(json)
            .map_err(|e| PatchError::Malformed(e.to_string()));
    }
    if max_depth(json.as_bytes(), MAX_JSON_DEPTH) > MAX_JSON_DEPTH {
        return Err(PatchError::Malformed(format!(
            "nesting deeper than {MAX_JSON_DEPTH}"
        )));
    }
    let items: Vec<&RawValue> =
        serde_json::from_str(json).map_err(|e| PatchError::Malformed(e.to_string()))?;
    let base = json.as_ptr() as usize;
    Ok(items
        .iter()
        .map(|r| {
            let start = (r.get().as_ptr() as usize).saturating_sub(base);
            start..start + r.get().len()
        })
        .collect())
}

/// Applies `rewrite` to each element of the array at `path` inside `json`. `rewrite` returns the
/// new text of an element, or `None` to keep it. A missing array leaves `json` unchanged.
pub fn rewrite_elements(
    json: &str,
    path: &[&str],
    rewrite: impl FnMut(&str) -> Result<Option<String>, PatchError>,
) -> Result<String, PatchError> {
    rewrite_elements_in(json, path, Source::Unchecked, rewrite)
}

pub(crate) fn rewrite_elements_in(
    json: &str,
    path: &[&str],
    source: Source,
    mut rewrite: impl FnMut(&str) -> Result<Option<String>, PatchError>,
) -> Result<String, PatchError> {
    let Some(array) = locate_in(json, path, source)? else {
        return Ok(json.to_owned());
    };
    let inner = json.get(array.clone()).unwrap_or_default();
    let mut edits = Vec::new();
    for span in array_elements_in(inner, source)? {
        let text = inner.get(span.clone()).unwrap_or_default();
        if let Some(new) = rewrite(text)? {
            edits.push(((array.start + span.start)..(array.start + span.end), new));
        }
    }
    let mut out = String::with_capacity(json.len());
    let mut at = 0;
    for (span, new) in edits {
        out.push_str(json.get(at..span.start).unwrap_or_default());
        out.push_str(&new);
        at = span.end;
    }
    out.push_str(json.get(at..).unwrap_or_default());
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::patch::{get_str, set};

    #[test]
    fn rewrites_only_the_chosen_elements() {
        let j = r#"{"contents":[{"uri":"a://1","text":"x"}, {"n":1.0},{"uri":"a://2"}],"z":1e2}"#;
        let out = rewrite_elements(j, &["contents"], |el| {
            Ok(match get_str(el, &["uri"])? {
                Some(u) => Some(set(el, &["uri"], &format!("\"p+{u}\""))?),
                None => None,
            })
        })
        .unwrap();
        assert_eq!(
            out,
            r#"{"contents":[{"uri":"p+a://1","text":"x"}, {"n":1.0},{"uri":"p+a://2"}],"z":1e2}"#
        );
    }

    #[test]
    fn a_missing_array_is_left_alone_and_a_non_array_is_an_error() {
        assert_eq!(
            rewrite_elements(r#"{"a":1}"#, &["b"], |_| Ok(None)).unwrap(),
            r#"{"a":1}"#
        );
        assert!(rewrite_elements(r#"{"a":1}"#, &["a"], |_| Ok(None)).is_err());
    }
}
