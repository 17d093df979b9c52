//! OAuth 2.0 Protected Resource Metadata (RFC 9728): where the MCP server says which
//! authorization servers issue its tokens, and the checks that keep a server from asking for
//! tokens meant for someone else.
//!
//! The document comes from the `resource_metadata` URL of the server's challenge when it gave
//! one, else from the well-known locations in the specification's order (path-based, then root).
//! Its `resource` must name the MCP server itself or a parent of it on the same origin.

use serde::Deserialize;
use url::Url;

use super::error::AuthError;
use super::http::AuthHttp;

/// The well-known path prefix of RFC 9728.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// What a protected resource metadata document says, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// The resource identifier, exactly as the document wrote it (sent as `resource`).
    pub resource: String,
    /// Issuer identifiers, exactly as written.
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Option<Vec<String>>,
    /// Where the document was found.
    pub metadata_url: String,
}

#[derive(Deserialize)]
struct Document {
    resource: Option<String>,
    authorization_servers: Option<Vec<String>>,
    scopes_supported: Option<Vec<String>>,
}

/// The canonical URI of an MCP server (RFC 8707 §2, the specification's "canonical server URI"):
/// lower-case scheme and host, no fragment, no query, no trailing slash.
pub fn canonical_resource(server: &Url) -> String {
    let mut url = server.clone();
    url.set_fragment(None);
    url.set_query(None);
    let text = url.to_string();
    match text.strip_suffix('/') {
        Some(stripped) => stripped.to_owned(),
        None => text,
    }
}

/// The well-known metadata URLs for a server, in the order the specification gives: at the
/// path of the MCP endpoint, then at the root.
pub fn well_known_urls(server: &Url) -> Vec<Url> {
    let mut out = Vec::new();
    let path = server.path().trim_end_matches('/');
    let mut base = server.clone();
    base.set_query(None);
    base.set_fragment(None);
    if !path.is_empty() {
        let mut with_path = base.clone();
        with_path.set_path(&format!("{WELL_KNOWN}{path}"));
        out.push(with_path);
    }
    let mut root = base;
    root.set_path(WELL_KNOWN);
    out.push(root);
    out
}

/// Whether `advertised` names `server` or a parent of it: same origin, and its path a prefix of
/// the server's path on segment boundaries.
pub fn resource_covers(advertised: &str, server: &Url) -> bool {
    let Ok(resource) = Url::parse(advertised) else {
        return false;
    };
    if resource.fragment().is_some() || resource.origin() != server.origin() {
        return false;
    }
    let parent = resource.path().trim_end_matches('/');
    let child = server.path().trim_end_matches('/');
    parent.is_empty()
        || child == parent
        || child
            .strip_prefix(parent)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Finds and validates the server's protected resource metadata. `None` when the server
/// publishes none at all (a 2025-03-26 server, whose authorization server is its own origin).
pub async fn discover(
    http: &AuthHttp,
    server: &Url,
    from_challenge: Option<&str>,
) -> Result<Option<ProtectedResource>, AuthError> {
    if let Some(raw) = from_challenge {
        let url = http.url(
            raw,
            "the protected resource metadata named by WWW-Authenticate",
        )?;
        let answer = http.get_json(&url, "protected resource metadata").await?;
        if !answer.is_success() {
            return Err(AuthError::BadDocument {
                what: "the protected resource metadata named by WWW-Authenticate".to_owned(),
                url: url.to_string(),
                detail: format!("it answered HTTP {}: {}", answer.status, answer.text),
            });
        }
        return validate(answer.json, &url, server).map(Some);
    }
    for url in well_known_urls(server) {
        let answer = http.get_json(&url, "protected resource metadata").await?;
        if answer.is_success() && answer.json.is_some() {
            return validate(answer.json, &url, server).map(Some);
        }
        tracing::debug!(url = %url, status = answer.status, "no protected resource metadata here");
    }
    Ok(None)
}

fn validate(
    json: Option<serde_json::Value>,
    url: &Url,
    server: &Url,
) -> Result<ProtectedResource, AuthError> {
    let bad = |detail: &str| AuthError::BadDocument {
        what: "protected resource metadata".to_owned(),
        url: url.to_string(),
        detail: detail.to_owned(),
    };
    let doc: Document = json
        .and_then(|j| serde_json::from_value(j).ok())
        .ok_or_else(|| bad("it is not a protected resource metadata document (JSON object)"))?;
    let resource = doc
        .resource
        .filter(|r| !r.is_empty())
        .ok_or_else(|| bad("it has no \"resource\""))?;
    if !resource_covers(&resource, server) {
        return Err(AuthError::ResourceMismatch {
            advertised: resource,
            expected: canonical_resource(server),
        });
    }
    let authorization_servers: Vec<String> = doc
        .authorization_servers
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    if authorization_servers.is_empty() {
        return Err(bad(
            "it names no authorization server (\"authorization_servers\")",
        ));
    }
    Ok(ProtectedResource {
        resource,
        authorization_servers,
        scopes_supported: doc.scopes_supported,
        metadata_url: url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn well_known_urls_try_the_path_then_the_root() {
        let got: Vec<String> = well_known_urls(&u("https://h.example:8443/public/mcp?x=1"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            got,
            vec![
                "https://h.example:8443/.well-known/oauth-protected-resource/public/mcp",
                "https://h.example:8443/.well-known/oauth-protected-resource",
            ]
        );
        let root: Vec<String> = well_known_urls(&u("https://h.example/"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            root,
            vec!["https://h.example/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn canonical_resources_drop_fragment_query_and_trailing_slash() {
        assert_eq!(
            canonical_resource(&u("HTTPS://MCP.Example.com/mcp/?t=1#f")),
            "https://mcp.example.com/mcp"
        );
        assert_eq!(
            canonical_resource(&u("https://mcp.example.com")),
            "https://mcp.example.com"
        );
        assert_eq!(
            canonical_resource(&u("https://mcp.example.com:8443/")),
            "https://mcp.example.com:8443"
        );
    }

    #[test]
    fn a_resource_covers_itself_and_its_children_on_the_same_origin_only() {
        let server = u("https://h.example/api/mcp");
        for ok in [
            "https://h.example/api/mcp",
            "https://h.example/api/mcp/",
            "https://h.example/api",
            "https://h.example",
            "https://H.EXAMPLE/",
        ] {
            assert!(resource_covers(ok, &server), "{ok}");
        }
        for refused in [
            "https://evil.example.com/api/mcp",
            "http://h.example/api/mcp",
            "https://h.example:444/api/mcp",
            "https://h.example/ap",
            "https://h.example/api/mcp/other",
            "https://h.example/api/mcp#frag",
            "not a url",
        ] {
            assert!(!resource_covers(refused, &server), "{refused}");
        }
    }

    #[test]
    fn validation_refuses_mismatched_or_incomplete_documents() {
        let url = u("https://h.example/.well-known/oauth-protected-resource/mcp");
        let server = u("https://h.example/mcp");
        let ok = validate(
            Some(serde_json::json!({
                "resource": "https://h.example/mcp",
                "authorization_servers": ["https://as.example/tenant"],
                "scopes_supported": ["a", "b"]
            })),
            &url,
            &server,
        )
        .unwrap();
        assert_eq!(ok.authorization_servers, vec!["https://as.example/tenant"]);
        assert_eq!(
            ok.scopes_supported,
            Some(vec!["a".to_owned(), "b".to_owned()])
        );

        let mismatch = validate(
            Some(serde_json::json!({
                "resource": "https://evil.example.com/mcp",
                "authorization_servers": ["https://as.example"]
            })),
            &url,
            &server,
        );
        assert!(matches!(mismatch, Err(AuthError::ResourceMismatch { .. })));

        let no_as = validate(
            Some(serde_json::json!({ "resource": "https://h.example/mcp" })),
            &url,
            &server,
        );
        assert!(matches!(no_as, Err(AuthError::BadDocument { .. })));
        assert!(validate(None, &url, &server).is_err());
        assert!(validate(Some(serde_json::json!([1])), &url, &server).is_err());
    }
}
