//! HTTP transports: Streamable HTTP (both eras) and the legacy HTTP+SSE transport, and the walk
//! between them the specification prescribes for a URL whose server is of unknown age.
//!
//! Auto mode tries Streamable HTTP (where negotiation itself tries the modern era first, then
//! `initialize`); only when `initialize` is refused with HTTP 400/404/405 and no JSON-RPC body
//! does it fall back to HTTP+SSE, which speaks the legacy era only.

pub mod headers;
pub mod legacy_sse;
pub mod sse_stream;
pub mod streamable;
pub mod trace_headers;

use std::sync::Arc;

use url::Url;

use crate::auth::RequestAuthorizer;
use crate::connect_options::ConnectOptions;
use crate::connection::Connection;
use crate::error::UpstreamError;
use crate::http_client as client;
use crate::http_spec::{HttpSpec, HttpTransportChoice};
use crate::negotiate::{EraChoice, PeerInfo};
use crate::transport::{Transport, inbound_channel};

pub use legacy_sse::LegacySseTransport;
pub use streamable::StreamableHttpTransport;

/// Connects to an HTTP server, walking the era and transport fallbacks. On failure nothing is
/// left running.
pub async fn connect(
    spec: &HttpSpec,
    options: &ConnectOptions,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    let url = client::check_url(&spec.url, spec.allow_insecure_http)?;
    let http = client::build_client(spec, &options.server)?;
    let auth = RequestAuthorizer::for_spec(spec, &url, &options.server)?;
    auth.prepare(&http).await?;
    match spec.transport {
        HttpTransportChoice::Sse => connect_legacy_sse(http, url, auth, options).await,
        HttpTransportChoice::StreamableHttp => connect_streamable(http, url, auth, options).await,
        HttpTransportChoice::Auto => {
            let first = connect_streamable(http.clone(), url.clone(), auth.clone(), options).await;
            match first {
                Err(e) if options.era != EraChoice::Modern && means_old_transport(&e) => {
                    tracing::debug!(server = %options.server, error = %e, "Streamable HTTP refused; trying the HTTP+SSE transport");
                    connect_legacy_sse(http, url, auth, options)
                        .await
                        .map_err(|sse| UpstreamError::Connect {
                            server: options.server.clone(),
                            reason: format!(
                                "Streamable HTTP failed ({e}), and so did the HTTP+SSE fallback ({sse}); check the URL"
                            ),
                        })
                }
                other => other,
            }
        }
    }
}

/// The specification's signal that a URL serves the 2024-11-05 HTTP+SSE transport: a POST
/// refused with 400, 404 or 405 and no JSON-RPC error body (a body would have become an `Rpc`).
fn means_old_transport(error: &UpstreamError) -> bool {
    matches!(
        error,
        UpstreamError::Http {
            status: 400 | 404 | 405,
            ..
        }
    )
}

async fn start_and_negotiate(
    transport: Arc<dyn Transport>,
    inbound: crate::transport::InboundRx,
    era: EraChoice,
    options: &ConnectOptions,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    let conn = Connection::start(
        options.server.clone(),
        transport,
        inbound,
        Arc::clone(&options.handler),
    );
    match conn.negotiate(era, &options.client).await {
        Ok(info) => Ok((conn, info)),
        Err(e) => {
            conn.close().await;
            Err(e)
        }
    }
}

async fn connect_streamable(
    http: reqwest::Client,
    url: Url,
    auth: RequestAuthorizer,
    options: &ConnectOptions,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    let (tx, rx) = inbound_channel();
    let transport = Arc::new(StreamableHttpTransport::with_auth(
        &options.server,
        http,
        url,
        tx,
        auth,
    ));
    start_and_negotiate(transport, rx, options.era, options).await
}

async fn connect_legacy_sse(
    http: reqwest::Client,
    url: Url,
    auth: RequestAuthorizer,
    options: &ConnectOptions,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    if options.era == EraChoice::Modern {
        return Err(UpstreamError::Negotiation {
            server: options.server.clone(),
            detail: "the HTTP+SSE transport carries only the legacy era, but the modern era was required; use era auto or legacy, or a Streamable HTTP URL".to_owned(),
        });
    }
    let (tx, rx) = inbound_channel();
    let transport = legacy_sse::open_with_auth(&options.server, http, url, tx, auth).await?;
    start_and_negotiate(Arc::new(transport), rx, EraChoice::Legacy, options).await
}
