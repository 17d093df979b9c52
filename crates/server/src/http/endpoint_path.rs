//! What an HTTP path names: which MCP endpoint it is (the REST view's paths, `/rest/...`, are
//! one), and the tool set `/mcp/NAME`, `/sse/NAME` or `/message/NAME` puts a request in. Pure functions of the path, below the
//! middlewares and transports that ask.

/// The paths whose traffic is MCP traffic (probes and scrapes are not counted).
pub(crate) const MCP_PATHS: [&str; 5] = ["/mcp", "/sse", "/message", "/rpc", "/rest"];

/// The endpoint a path is, with its tool set taken off: `/mcp/NAME` is `/mcp`, and every
/// `/rest/...` is `/rest` (tool names stay out of metric labels).
pub(crate) fn endpoint_of(path: &str) -> &str {
    if path.starts_with("/rest/") {
        return "/rest";
    }
    match toolset_in_path(path) {
        Some(name) => &path[..path.len() - name.len() - 1],
        None => path,
    }
}

/// The set an endpoint's path names: `/mcp/NAME`, `/sse/NAME`, `/message/NAME`.
pub(crate) fn toolset_in_path(path: &str) -> Option<&str> {
    ["/mcp/", "/sse/", "/message/"]
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix))
        .filter(|name| !name.is_empty() && !name.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sets_endpoint_is_read_from_its_path_and_counts_as_its_endpoint() {
        assert_eq!(toolset_in_path("/mcp/coding"), Some("coding"));
        assert_eq!(toolset_in_path("/sse/coding"), Some("coding"));
        assert_eq!(toolset_in_path("/message/coding"), Some("coding"));
        for none in [
            "/mcp",
            "/mcp/",
            "/mcp/a/b",
            "/sse",
            "/ui/coding",
            "/healthz",
        ] {
            assert_eq!(toolset_in_path(none), None, "{none}");
        }
        assert_eq!(endpoint_of("/mcp/coding"), "/mcp");
        assert_eq!(endpoint_of("/message/x"), "/message");
        assert_eq!(endpoint_of("/mcp"), "/mcp");
        assert_eq!(endpoint_of("/metrics"), "/metrics");
        assert_eq!(endpoint_of("/rest/openapi.json"), "/rest");
        assert_eq!(endpoint_of("/rest/py__echo"), "/rest");
    }
}
