//! HTTP transports (Streamable HTTP in both eras, legacy HTTP+SSE): being written.

use crate::connect::{ConnectOptions, HttpSpec};
use crate::connection::Connection;
use crate::error::UpstreamError;
use crate::negotiate::PeerInfo;

/// Connects to an HTTP server, walking the era and transport fallbacks.
pub async fn connect(
    spec: &HttpSpec,
    _options: &ConnectOptions,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    Err(UpstreamError::BadUrl {
        url: spec.url.clone(),
        reason: "HTTP transports are not available in this build".to_owned(),
    })
}
