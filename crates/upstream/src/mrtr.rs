//! Multi round-trip requests (modern era): answering `input_required` results.
//!
//! A modern server that needs elicitation, sampling or roots answers with `resultType:
//! "input_required"`, a map of input requests and an opaque `requestState`. The client asks its
//! handler for each input, then retries the same request (new id) with `inputResponses` and the
//! `requestState` verbatim. The loop is bounded so a server cannot keep a caller forever.

use manifold_wire::patch;
use manifold_wire::{Kind, Message};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

use crate::connection::{CallOptions, Connection, ServerRequest};
use crate::error::UpstreamError;
use crate::negotiate::is_input_required;

/// Rounds of input a single request may ask for before the client gives up.
pub const MAX_INPUT_ROUNDS: usize = 8;

#[derive(Deserialize)]
struct InputRequired<'a> {
    #[serde(rename = "inputRequests", borrow, default)]
    input_requests: BTreeMap<String, InputRequest<'a>>,
    #[serde(rename = "requestState", borrow)]
    request_state: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct InputRequest<'a> {
    method: String,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

impl Connection {
    /// Sends a request and, while the server answers `input_required`, answers its input
    /// requests through the connection's handler and retries. Returns the final response.
    pub async fn call_resolving_input(
        &self,
        method: &str,
        params: Option<&str>,
        options: CallOptions,
    ) -> Result<Message, UpstreamError> {
        let original = params.unwrap_or("{}").to_owned();
        let mut next_params = original.clone();
        for _ in 0..=MAX_INPUT_ROUNDS {
            let response = self.call(method, Some(&next_params), options).await?;
            match self.input_retry(&original, &response).await? {
                Some(retry) => next_params = retry,
                None => return Ok(response),
            }
        }
        Err(self.too_many_rounds(method))
    }

    /// The error for a request that keeps asking for input.
    pub fn too_many_rounds(&self, method: &str) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.server().to_owned(),
            detail: format!(
                "{method} still asked for input after {MAX_INPUT_ROUNDS} rounds; giving up"
            ),
        }
    }

    /// When `response` is `input_required`, answers its input requests through the handler and
    /// returns the params of the retry (`original` plus `inputResponses` and `requestState`).
    /// Returns `None` for any other response.
    pub async fn input_retry(
        &self,
        original: &str,
        response: &Message,
    ) -> Result<Option<String>, UpstreamError> {
        if response.kind() != Kind::Result || !is_input_required(response) {
            return Ok(None);
        }
        let raw = response.result_raw().unwrap_or("{}");
        let protocol = |detail: String| UpstreamError::Protocol {
            server: self.server().to_owned(),
            detail,
        };
        let view: InputRequired<'_> = serde_json::from_str(raw)
            .map_err(|e| protocol(format!("its input_required result is malformed: {e}")))?;
        let handler = self.inner.handler_for_input();
        let mut answers = String::from("{");
        for (i, (key, req)) in view.input_requests.iter().enumerate() {
            let answer = handler
                .handle(ServerRequest {
                    method: req.method.clone(),
                    params: req.params.map(|p| p.get().to_owned()),
                    related: None,
                    context: None,
                })
                .await
                .map_err(|error| UpstreamError::Rpc {
                    server: self.server().to_owned(),
                    method: req.method.clone(),
                    error,
                })?;
            if i > 0 {
                answers.push(',');
            }
            answers.push_str(&manifold_wire::id::json_string(key));
            answers.push(':');
            answers.push_str(&answer);
        }
        answers.push('}');
        let patch_err = |e: patch::PatchError| protocol(format!("could not build the retry: {e}"));
        let mut retry = patch::set(original, &["inputResponses"], &answers).map_err(patch_err)?;
        if let Some(state) = view.request_state {
            retry = patch::set(&retry, &["requestState"], state.get()).map_err(patch_err)?;
        }
        Ok(Some(retry))
    }
}

/// The keys and methods an `input_required` result asks for (for logs and the gateway).
pub fn input_requests_of(message: &Message) -> Vec<(String, String)> {
    message
        .result_raw()
        .and_then(|r| serde_json::from_str::<InputRequired<'_>>(r).ok())
        .map(|v| {
            v.input_requests
                .into_iter()
                .map(|(k, r)| (k, r.method))
                .collect()
        })
        .unwrap_or_default()
}
