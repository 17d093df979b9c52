//! The fixture's resources and resource template, and reading them.
//!
//! `test://static-text` and `test://static-binary` are what the read scenarios fetch;
//! `test://watched-resource` is what the subscribe scenarios watch (its text changes when
//! `test_trigger_resource_update` runs); `test://template/{id}/data` substitutes its parameter.

use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::catalog::media::RED_PIXEL_PNG;

pub const STATIC_TEXT: &str = "test://static-text";
pub const STATIC_BINARY: &str = "test://static-binary";
pub const WATCHED: &str = "test://watched-resource";
pub const TEMPLATE: &str = "test://template/{id}/data";

const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// `resources/list` entries.
pub fn listed() -> Vec<Value> {
    vec![
        json!({
            "uri": STATIC_TEXT,
            "name": "static-text",
            "title": "Static text",
            "description": "A text resource whose content never changes.",
            "mimeType": "text/plain",
        }),
        json!({
            "uri": STATIC_BINARY,
            "name": "static-binary",
            "title": "Static binary",
            "description": "A binary resource (a 1x1 red PNG).",
            "mimeType": "image/png",
        }),
        json!({
            "uri": WATCHED,
            "name": "watched-resource",
            "title": "Watched resource",
            "description": "Changes whenever test_trigger_resource_update runs; subscribe to hear about it.",
            "mimeType": "text/plain",
        }),
    ]
}

/// `resources/templates/list` entries.
pub fn templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": TEMPLATE,
        "name": "template-data",
        "title": "Template data",
        "description": "JSON data for any id; the id is substituted into the content.",
        "mimeType": "application/json",
    })]
}

/// Whether the content of `uri` never changes (it may be cached publicly for long).
pub fn is_static(uri: &str) -> bool {
    uri == STATIC_TEXT || uri == STATIC_BINARY || template_id(uri).is_some()
}

fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix(TEMPLATE_PREFIX)
        .and_then(|rest| rest.strip_suffix(TEMPLATE_SUFFIX))
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// The `contents` of `uri`, or `None` when no resource has that URI.
pub fn read(catalog: &Catalog, uri: &str) -> Option<Vec<Value>> {
    let contents = match uri {
        STATIC_TEXT => json!({
            "uri": uri,
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }),
        STATIC_BINARY => json!({ "uri": uri, "mimeType": "image/png", "blob": RED_PIXEL_PNG }),
        WATCHED => json!({
            "uri": uri,
            "mimeType": "text/plain",
            "text": format!("Watched resource, version {}.", catalog.watched_version()),
        }),
        _ => {
            let id = template_id(uri)?;
            let data =
                json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
            json!({ "uri": uri, "mimeType": "application/json", "text": data.to_string() })
        }
    };
    Some(vec![contents])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_substitutes_its_id_and_unknown_uris_are_not_found() {
        let catalog = Catalog::default();
        let contents = read(&catalog, "test://template/123/data").unwrap_or_default();
        assert_eq!(contents.len(), 1);
        assert_eq!(contents[0]["uri"], "test://template/123/data");
        assert_eq!(contents[0]["mimeType"], "application/json");
        let text = contents[0]["text"].as_str().unwrap_or_default();
        assert_eq!(
            serde_json::from_str::<Value>(text).ok(),
            Some(json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"}))
        );
        assert_eq!(read(&catalog, "test://template//data"), None);
        assert_eq!(read(&catalog, "test://template/1/2/data"), None);
        assert_eq!(read(&catalog, "test://nonexistent"), None);
    }

    #[test]
    fn the_watched_resource_reports_its_version() {
        let catalog = Catalog::default();
        catalog.bump_watched();
        let contents = read(&catalog, WATCHED).unwrap_or_default();
        assert_eq!(contents[0]["text"], "Watched resource, version 1.");
    }
}
