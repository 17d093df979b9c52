//! What the HTTP edge learned about one request before any handler ran: who it was
//! authenticated as (`authn.rs`), the tool set it works in, and the trace context its headers
//! carried (`metering.rs`). The middlewares put these in the request's extensions; a handler
//! takes them as one value ([`EdgeFacts`], an extractor) and hands it down explicitly to where
//! it builds the gateway's `RequestContext` or mints a session, so no function reads a request
//! fact its signature does not show.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use manifold_gateway::{Caller, TraceHeaders};

/// Who a request was authenticated as; empty when authentication is off. Put in the request's
/// extensions by the authentication middleware.
#[derive(Debug, Clone, Default)]
pub(crate) struct Authenticated {
    pub caller: Option<Arc<Caller>>,
    /// Digest of the principal (see `Identity::binding`), sealed into sessions it starts.
    pub binding: Option<String>,
    /// The tool set the request works in (`/mcp/NAME`, or the caller's own).
    pub toolset: Option<Arc<str>>,
}

/// The W3C trace context of a request's HTTP headers, put in its extensions by the metering
/// middleware.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpTrace(pub Option<TraceHeaders>);

/// Everything the edge established about a request, as its handler receives it.
#[derive(Debug, Clone, Default)]
pub(crate) struct EdgeFacts {
    pub authenticated: Authenticated,
    pub trace: Option<TraceHeaders>,
}

impl EdgeFacts {
    pub(crate) fn caller(&self) -> Option<Arc<Caller>> {
        self.authenticated.caller.clone()
    }

    pub(crate) fn toolset(&self) -> Option<Arc<str>> {
        self.authenticated.toolset.clone()
    }

    /// The binding sealed into sessions this request starts and compared on every later use.
    pub(crate) fn binding(&self) -> Option<String> {
        self.authenticated.binding.clone()
    }

    /// The facts in a request's extensions (a part the middlewares did not add is empty).
    pub(crate) fn of(extensions: &axum::http::Extensions) -> EdgeFacts {
        EdgeFacts {
            authenticated: extensions
                .get::<Authenticated>()
                .cloned()
                .unwrap_or_default(),
            trace: extensions.get::<HttpTrace>().and_then(|t| t.0.clone()),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for EdgeFacts {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<EdgeFacts, Infallible> {
        Ok(EdgeFacts::of(&parts.extensions))
    }
}
