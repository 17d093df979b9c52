//! manifold-upstream: connections to MCP servers.
