//! Results that would show a caller a resource the rules hide from it: a `resource_link` or an
//! embedded `resource` in a tool result's `content`, or an entry of a `resources/read` result's
//! `contents`, that names a hidden URI. Such an element is taken out of its array, and every other
//! byte of the result stays as the upstream wrote it: hidden means unknown, so nothing is put in
//! its place that would say something was there (docs/security.md, "What a result may name").

use std::borrow::Cow;
use std::ops::Range;

use manifold_wire::patch::PatchError;
use manifold_wire::patch::decoded::{self, array_elements};

use crate::policy::{CallerRules, ItemKind};

/// The exposed URI an element of `content` or `contents` names, if it names one.
fn named_uri(element: &str) -> Result<Option<String>, PatchError> {
    let path: &[&str] = match decoded::get_str(element, &["type"])?.as_deref() {
        Some("resource_link") => &["uri"],
        Some("resource") => &["resource", "uri"],
        // A `resources/read` entry has no type, only its URI.
        None => &["uri"],
        Some(_) => return Ok(None),
    };
    decoded::get_str(element, path)
}

/// `json` without the elements of the array at `path` that name a resource `view` does not let
/// the caller see (as `server`'s); borrowed, with no copy on the call path, when no rule applies
/// or nothing is hidden.
pub(crate) fn without_hidden_resources<'a>(
    json: &'a str,
    path: &[&str],
    view: &CallerRules<'_>,
    server: &str,
) -> Result<Cow<'a, str>, PatchError> {
    if view.is_unrestricted() {
        return Ok(Cow::Borrowed(json));
    }
    without_elements(json, path, |element| {
        Ok(named_uri(element)?
            .is_some_and(|uri| !view.sees(ItemKind::Resource, Some(server), &uri)))
    })
}

/// `json` without the elements of the array at `path` for which `drop` says so, each taken out
/// with the comma that separated it, so the array stays valid and the rest byte for byte.
pub(crate) fn without_elements<'a>(
    json: &'a str,
    path: &[&str],
    mut drop: impl FnMut(&str) -> Result<bool, PatchError>,
) -> Result<Cow<'a, str>, PatchError> {
    let Some(array) = decoded::locate(json, path)? else {
        return Ok(Cow::Borrowed(json));
    };
    let inner = json.get(array.clone()).unwrap_or_default();
    let spans = array_elements(inner)?;
    let mut kept: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    let mut dropped = false;
    for span in &spans {
        if drop(inner.get(span.clone()).unwrap_or_default())? {
            dropped = true;
        } else {
            kept.push(span.clone());
        }
    }
    if !dropped {
        return Ok(Cow::Borrowed(json));
    }
    // The kept elements with what stood between each and the one before it (a comma and any
    // whitespace), so that only the dropped elements and their separators go.
    let open = inner.find('[').map_or(0, |i| i + 1);
    let close = inner.rfind(']').unwrap_or(inner.len());
    let mut out = String::with_capacity(json.len());
    out.push_str(json.get(..array.start).unwrap_or_default());
    out.push_str(inner.get(..open).unwrap_or_default());
    for (n, span) in kept.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(inner.get(span.clone()).unwrap_or_default());
    }
    out.push_str(inner.get(close..).unwrap_or_default());
    out.push_str(json.get(array.end..).unwrap_or_default());
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::policy::{Effect, Policy, RuleSpec};

    #[test]
    fn only_the_dropped_elements_and_their_commas_go() {
        let j = r#"{"content":[{"n":1},{"n":2.50},{"n":3}],"isError":false}"#;
        let drop_n =
            |n: &'static str| move |el: &str| Ok(decoded::get(el, &["n"])?.is_some_and(|v| v == n));
        assert_eq!(
            without_elements(j, &["content"], drop_n("2.50")).unwrap(),
            r#"{"content":[{"n":1},{"n":3}],"isError":false}"#
        );
        assert_eq!(
            without_elements(j, &["content"], drop_n("1")).unwrap(),
            r#"{"content":[{"n":2.50},{"n":3}],"isError":false}"#
        );
        assert_eq!(
            without_elements(j, &["content"], drop_n("3")).unwrap(),
            r#"{"content":[{"n":1},{"n":2.50}],"isError":false}"#
        );
        let all = without_elements(j, &["content"], |_| Ok(true)).unwrap();
        assert_eq!(all, r#"{"content":[],"isError":false}"#);
        // Nothing dropped: the very same bytes, spacing included.
        let spaced = "{\"content\": [ {\"n\":1} ,\n {\"n\":2} ] }";
        assert_eq!(
            without_elements(spaced, &["content"], |_| Ok(false)).unwrap(),
            spaced
        );
        assert_eq!(
            without_elements("{}", &["content"], |_| Ok(true)).unwrap(),
            "{}"
        );
    }

    #[test]
    fn links_and_embedded_resources_naming_hidden_uris_are_dropped() {
        let policy = Policy::compile(vec![RuleSpec {
            resources: vec!["e+demo://secret/*".to_owned()],
            ..RuleSpec::new(0, Effect::Deny)
        }])
        .unwrap();
        let view = policy.for_caller(None);
        let result = r#"{"content":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"e+demo://secret/1","name":"s"},{"type":"resource","resource":{"uri":"e+DEMO://secret/./2","text":"x"}},{"type":"resource_link","uri":"e+demo://public/3","name":"p"}]}"#;
        assert_eq!(
            without_hidden_resources(result, &["content"], &view, "e").unwrap(),
            r#"{"content":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"e+demo://public/3","name":"p"}]}"#
        );
        let read = r#"{"contents":[{"uri":"e+demo://secret/1","text":"x"},{"uri":"e+demo://public/1","text":"y"}]}"#;
        assert_eq!(
            without_hidden_resources(read, &["contents"], &view, "e").unwrap(),
            r#"{"contents":[{"uri":"e+demo://public/1","text":"y"}]}"#
        );
        let open = Policy::default();
        assert_eq!(
            without_hidden_resources(result, &["content"], &open.for_caller(None), "e").unwrap(),
            result
        );
    }
}
