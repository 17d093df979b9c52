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

/// The mode of an elicitation the client cannot take: Manifold declares both modes to a shared
/// legacy upstream, so it checks here, per client, what the server would have checked itself.
/// An `elicitation` capability with neither mode named means form mode only.
fn elicitation_mode_refused(
    client: &ClientView,
    method: &str,
    params: Option<&str>,
) -> Option<&'static str> {
    if method != "elicitation/create" {
        return None;
    }
    let params = params.unwrap_or("{}");
    let asked_url = manifold_wire::patch::get(params, &["mode"])
        .ok()
        .flatten()
        .is_some_and(|m| m.trim() == "\"url\"");
    let declares = |mode: &str| {
        manifold_wire::patch::get(&client.capabilities, &["elicitation", mode])
            .ok()
            .flatten()
            .is_some_and(|v| v.trim() != "null")
    };
    let names_a_mode = declares("form") || declares("url");
    match asked_url {
        true if !declares("url") => Some("url"),
        false if names_a_mode && !declares("form") => Some("form"),
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
            if let Some(mode) =
                elicitation_mode_refused(&origin.client, &request.method, request.params.as_deref())
            {
                return Err(ErrorObject::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "the client did not declare {mode}-mode elicitation (capabilities.elicitation.{mode}), so it cannot answer this elicitation/create"
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
