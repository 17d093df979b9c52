//! What an operator shows of an upstream tool instead of what the upstream says
//! (`[servers.NAME.overrides.TOOL]`): its exposed name, title, description and annotations. They
//! apply to the catalog entry, after the upstream's own text was cleaned (`hygiene.rs`), never to
//! what is pinned (`pins.rs` compares the upstream's definition), so a changed upstream is still
//! caught; rules judge the entry, so an overridden annotation can bring a tool under an ask rule.

use std::collections::BTreeMap;

use manifold_wire::patch;

/// One tool's override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOverride {
    /// The exposed name, exactly (no prefix is added).
    pub name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Annotation hints set; the upstream's others stay.
    pub annotations: BTreeMap<String, bool>,
}

/// One upstream's overrides, by the upstream's tool name.
pub type ToolOverrides = BTreeMap<String, ToolOverride>;

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The raw tool definition `raw` with `o`'s title, description and annotations in place of the
/// upstream's (the name is the naming table's to give). A definition the patch cannot edit is
/// left as it was.
pub fn apply(raw: &str, o: &ToolOverride) -> String {
    let mut out = raw.to_owned();
    let mut set = |path: &[&str], value: String| {
        if let Ok(patched) = patch::set(&out, path, &value) {
            out = patched;
        }
    };
    if let Some(title) = &o.title {
        set(&["title"], json_string(title));
    }
    if let Some(description) = &o.description {
        set(&["description"], json_string(description));
    }
    for (hint, on) in &o.annotations {
        set(&["annotations", hint], on.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn title_description_and_hints_replace_the_upstreams_and_the_rest_stays() {
        let raw = r#"{"name":"push","description":"up","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"}}"#;
        let o = ToolOverride {
            title: Some("Push".into()),
            description: Some("Push \"main\"".into()),
            annotations: BTreeMap::from([
                ("destructiveHint".to_owned(), true),
                ("readOnlyHint".to_owned(), false),
            ]),
            ..ToolOverride::default()
        };
        let v: serde_json::Value = serde_json::from_str(&apply(raw, &o)).unwrap();
        assert_eq!(v["title"], "Push");
        assert_eq!(v["description"], "Push \"main\"");
        assert_eq!(v["annotations"]["destructiveHint"], true);
        assert_eq!(v["annotations"]["readOnlyHint"], false);
        assert_eq!(v["inputSchema"]["type"], "object");
        assert_eq!(v["name"], "push");
        let none = apply(raw, &ToolOverride::default());
        assert_eq!(none, raw);
    }
}
