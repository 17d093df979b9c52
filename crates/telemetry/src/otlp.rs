//! OTLP trace export: Manifold's spans ([`crate::spans`]) sent to an OpenTelemetry collector over
//! OTLP/HTTP with protobuf bodies.
//!
//! The SDK's batch processor exports from its own thread with a blocking HTTP client, so export
//! never competes with request handling on the async runtime and works before and after it runs
//! (flushing at shutdown happens after the runtime is gone). Only spans under
//! [`TRACE_TARGET`] are exported; log events are not.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{Filtered, Targets};
use tracing_subscriber::registry::LookupSpan;

/// The `tracing` target of Manifold's spans (the only target the OTLP layer takes).
pub const TRACE_TARGET: &str = "manifold::trace";

/// The path OTLP/HTTP collectors take traces at.
pub const TRACES_PATH: &str = "/v1/traces";
/// The service name spans carry unless configured otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "manifold";

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are being exported (so span contexts are worth computing).
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Lets tests of span propagation run with an in-memory exporter instead of OTLP.
#[cfg(test)]
pub(crate) fn set_exporting(on: bool) {
    EXPORTING.store(on, Ordering::Relaxed);
}

/// Where and as whom to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// The collector's base URL (`http://127.0.0.1:4318`) or its full traces URL.
    pub endpoint: String,
    pub service_name: String,
}

/// Why export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error(
        "the OTLP endpoint {endpoint:?} is not usable: {reason}; write an http:// or https:// URL such as \"http://127.0.0.1:4318\""
    )]
    Endpoint { endpoint: String, reason: String },
    #[error("could not set up OTLP trace export to {url}: {reason}")]
    Exporter { url: String, reason: String },
}

/// The URL traces are POSTed to: the endpoint itself when it already ends in `/v1/traces`, else
/// that path appended (as for `OTEL_EXPORTER_OTLP_ENDPOINT`).
pub fn traces_url(endpoint: &str) -> Result<String, OtlpError> {
    let bad = |reason: String| OtlpError::Endpoint {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let url = url::Url::parse(endpoint.trim()).map_err(|e| bad(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(format!(
            "the scheme {:?} is not http or https",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host".to_owned()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("it has a query or fragment".to_owned()));
    }
    let text = url.as_str();
    if url.path().ends_with(TRACES_PATH) {
        return Ok(text.to_owned());
    }
    Ok(format!("{}{TRACES_PATH}", text.trim_end_matches('/')))
}

/// A running exporter. Dropping it flushes what is buffered and stops export.
pub struct TraceExport {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    url: String,
}

impl std::fmt::Debug for TraceExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceExport")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl TraceExport {
    /// Sets up export; spans flow once [`TraceExport::layer`] is part of the subscriber. The
    /// standard `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_TIMEOUT` variables apply
    /// (headers for a collector that wants a key; the timeout of one export, 10 s by default).
    pub fn start(settings: &OtlpSettings) -> Result<TraceExport, OtlpError> {
        let url = traces_url(&settings.endpoint)?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url.clone())
            .build()
            .map_err(|e| OtlpError::Exporter {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("manifold");
        EXPORTING.store(true, Ordering::Relaxed);
        Ok(TraceExport {
            provider,
            tracer,
            url,
        })
    }

    /// Where traces go.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `tracing` layer that turns Manifold's spans into exported spans.
    pub fn layer<S>(
        &self,
    ) -> Filtered<tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>, Targets, S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_filter(Targets::new().with_target(TRACE_TARGET, tracing::Level::INFO))
    }
}

impl Drop for TraceExport {
    fn drop(&mut self) {
        EXPORTING.store(false, Ordering::Relaxed);
        if let Err(e) = self.provider.shutdown() {
            // Already shut down, or the last export failed: nothing more can be done.
            tracing::debug!(error = %e, "OTLP export ended with an error");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_to_a_base_url_once() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://otel.example/otlp/").unwrap(),
            "https://otel.example/otlp/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/v1/traces").unwrap(),
            "http://collector:4318/v1/traces"
        );
    }

    #[test]
    fn endpoints_that_are_not_http_urls_are_refused() {
        for bad in [
            "127.0.0.1:4318",
            "grpc://collector:4317",
            "http://",
            "http://h/?x=1",
        ] {
            assert!(
                matches!(traces_url(bad), Err(OtlpError::Endpoint { .. })),
                "{bad}"
            );
        }
    }
}
