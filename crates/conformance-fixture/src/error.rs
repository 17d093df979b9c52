//! The two ways the fixture fails: a JSON-RPC error a peer receives ([`RpcError`]), and a failure
//! of the process itself ([`FixtureError`]).
//!
//! Both eras and every transport build their error replies from one type, so that a code, its
//! message and its `data` are decided once, where the fault is found, and only the HTTP status is
//! left to the transport.

use manifold_wire::{ErrorCode, ErrorObject, Id, Message};
use serde_json::{Value, json};

/// A JSON-RPC error, ready to become a response.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::InvalidParams, message)
    }

    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(
            ErrorCode::MethodNotFound,
            format!("Method not found: {method}"),
        )
        .with_data(json!({ "method": method }))
    }

    pub fn header_mismatch(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::HeaderMismatch, message)
    }

    /// The client did not declare a capability this request needs; `required` is a
    /// `ClientCapabilities` object naming what is missing (e.g. `{"sampling":{}}`).
    pub fn missing_capability(required: Value, what: &str) -> RpcError {
        RpcError::new(
            ErrorCode::MissingRequiredClientCapability,
            format!(
                "{what} needs a client capability the request did not declare in \
                 io.modelcontextprotocol/clientCapabilities; declare it and retry"
            ),
        )
        .with_data(json!({ "requiredCapabilities": required }))
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(ErrorCode::InternalError, message)
    }

    /// The error as a JSON object (for inlining, e.g. in a failed task).
    pub fn to_value(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let (Some(data), Some(obj)) = (&self.data, error.as_object_mut()) {
            obj.insert("data".to_owned(), data.clone());
        }
        error
    }

    /// The error response to the request `id` (`None` for an unreadable id).
    pub fn to_response(&self, id: Option<Id>) -> Message {
        let mut object = ErrorObject {
            code: self.code,
            message: self.message.clone(),
            data: None,
        };
        if let Some(data) = &self.data {
            object.data = serde_json::value::to_raw_value(data).ok();
        }
        Message::error(id, &object)
    }
}

/// Why the fixture process could not start or keep serving.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("could not listen on 127.0.0.1:{port}: {source}; pick another port or use 0")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("the HTTP server stopped: {0}")]
    Serve(#[source] std::io::Error),
    #[error("reading stdin or writing stdout failed: {0}")]
    Stdio(#[source] std::io::Error),
    #[error(
        "the system random number generator failed, so no key for sealing requestState could be made"
    )]
    NoRandomKey,
}
