//! Server-initiated requests from upstreams, delivered to the downstream client that caused them.
//!
//! Every upstream call carries a [`CallOrigin`] as its context, so an upstream's elicitation,
//! sampling or roots request reaches the session whose call caused it and never another. A client
//! that did not declare the capability gets the request refused, as it would have directly.

use std::sync::Arc;

use futures::future::BoxFuture;
use manifold_upstream::{ServerRequest, ServerRequestHandler};
use manifold_wire::{ErrorCode, ErrorObject};

use crate::context::{ClientView, DownstreamPeer};

/// Who an upstream call was made for.
pub struct CallOrigin {
    pub client: ClientView,
    pub peer: Arc<dyn DownstreamPeer>,
}

/// The capability a server request needs from the client.
pub fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Routes upstream server requests to the right downstream client.
#[derive(Debug, Default, Clone, Copy)]
pub struct ToOriginatingClient;

impl ServerRequestHandler for ToOriginatingClient {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        Box::pin(async move {
            let origin = request
                .context
                .and_then(|c| c.downcast::<CallOrigin>().ok())
                .ok_or_else(|| {
                    ErrorObject::new(
                        ErrorCode::InternalError,
                        format!(
                            "Manifold cannot tell which client this {} is for (no call of this server is in flight, or several are); give the server scope = \"session\" to make it exact",
                            request.method
                        ),
                    )
                })?;
            if let Some(cap) = capability_for(&request.method)
                && !origin.client.declares(cap)
            {
                return Err(ErrorObject::new(
                    ErrorCode::MethodNotFound,
                    format!(
                        "the client did not declare the {cap} capability, so it cannot answer {}",
                        request.method
                    ),
                ));
            }
            match origin.peer.request(&request.method, request.params) {
                Some(answer) => answer.await,
                None => Err(ErrorObject::new(
                    ErrorCode::InternalError,
                    format!(
                        "the client speaks the stateless era and cannot receive {}; translating it to input_required is not supported yet",
                        request.method
                    ),
                )),
            }
        })
    }
}
