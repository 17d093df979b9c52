//! manifold-gateway: the core of the gateway, with no knowledge of HTTP or stdio framing.
//!
//! Downstream transports (manifold-server) hand it decoded requests with their context; it merges
//! the catalogs of every upstream under stable names, routes each call to its upstream through
//! manifold-upstream, and answers with patched raw messages.

pub mod catalog;
