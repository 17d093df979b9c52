//! OAuth 2.0 Protected Resource Metadata (RFC 9728): the document that tells an MCP client
//! which authorization server issues tokens for this gateway, and where that document lives.

use serde::Serialize;

/// The well-known path prefix of RFC 9728.
pub const WELL_KNOWN_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// The metadata document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtectedResourceMetadata {
    /// The gateway's resource identifier (the public URL of `/mcp`).
    pub resource: String,
    pub authorization_servers: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// Only the header: tokens in URLs or bodies are refused.
    pub bearer_methods_supported: Vec<String>,
    pub resource_name: String,
}

impl ProtectedResourceMetadata {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// Where the metadata of a resource is published: the well-known prefix inserted between the
/// host and the resource's path (RFC 9728 section 3.1), e.g. `https://h/mcp` ->
/// `https://h/.well-known/oauth-protected-resource/mcp`.
pub fn metadata_url(resource: &url::Url) -> String {
    let path = resource.path().trim_end_matches('/');
    let mut u = resource.clone();
    u.set_path(&format!("{WELL_KNOWN_PREFIX}{path}"));
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_prefix_before_the_path() {
        let r = url::Url::parse("https://mcp.example.com/mcp").unwrap();
        assert_eq!(
            metadata_url(&r),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        let root = url::Url::parse("https://mcp.example.com/").unwrap();
        assert_eq!(
            metadata_url(&root),
            "https://mcp.example.com/.well-known/oauth-protected-resource"
        );
        let port = url::Url::parse("http://127.0.0.1:8080/team/mcp").unwrap();
        assert_eq!(
            metadata_url(&port),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource/team/mcp"
        );
    }

    #[test]
    fn the_document_names_resource_servers_scopes_and_header_only() {
        let m = ProtectedResourceMetadata {
            resource: "https://m/mcp".into(),
            authorization_servers: vec!["https://i".into()],
            scopes_supported: vec![],
            bearer_methods_supported: vec!["header".into()],
            resource_name: "Manifold".into(),
        };
        assert_eq!(
            m.to_json(),
            r#"{"resource":"https://m/mcp","authorization_servers":["https://i"],"bearer_methods_supported":["header"],"resource_name":"Manifold"}"#
        );
    }
}
