//! What kind of failure a gateway error is, read from its code and data. The HTTP views that
//! speak a dialect other than MCP (`/rpc`, `/rest`) each tell their callers in their own terms;
//! the reading is one.

use manifold_wire::ErrorObject;
use serde_json::Value;

/// A gateway error, as a caller outside MCP needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// No such tool for this caller (`unknown tool ...`).
    NotFound,
    /// The arguments did not fit the tool's input schema, or the request was malformed.
    InvalidArguments,
    /// An `ask` rule holds the call for a person, and no one could be asked in band.
    ApprovalRequired,
    /// A rule, a tool set or a scope refused the call.
    Forbidden,
    /// A rate limit or the in-flight bound refused the call.
    RateLimited,
    /// The gateway's deadline for the call passed.
    Timeout,
    /// The tool needs its caller to answer questions (elicitation, sampling, roots) that the
    /// caller cannot answer (-32021, or a result that is `input_required`).
    NeedsInput,
    /// The call was cancelled before it settled.
    Cancelled,
    /// The gateway failed in itself.
    Internal,
    /// The server behind the tool failed or could not be reached.
    Upstream,
}

impl FailureClass {
    pub(crate) fn of(e: &ErrorObject) -> FailureClass {
        match e.code {
            -32602 if e.message.starts_with("unknown tool") => FailureClass::NotFound,
            -32602 => FailureClass::InvalidArguments,
            -32007 if approval_required(e) => FailureClass::ApprovalRequired,
            -32007 => FailureClass::Forbidden,
            -32006 => FailureClass::RateLimited,
            -32001 => FailureClass::Timeout,
            -32021 => FailureClass::NeedsInput,
            -32003 => FailureClass::Cancelled,
            -32603 | -32700 | -32600 => FailureClass::Internal,
            _ => FailureClass::Upstream,
        }
    }

    /// The class as a word (`not_found`, `rate_limited`, ...), as error bodies name it.
    pub(crate) fn word(self) -> &'static str {
        match self {
            FailureClass::NotFound => "not_found",
            FailureClass::InvalidArguments => "invalid_arguments",
            FailureClass::ApprovalRequired => "approval_required",
            FailureClass::Forbidden => "forbidden",
            FailureClass::RateLimited => "rate_limited",
            FailureClass::Timeout => "timeout",
            FailureClass::NeedsInput => "input_required",
            FailureClass::Cancelled => "cancelled",
            FailureClass::Internal => "internal",
            FailureClass::Upstream => "upstream_error",
        }
    }
}

fn approval_required(e: &ErrorObject) -> bool {
    e.data
        .as_ref()
        .and_then(|d| serde_json::from_str::<Value>(d.get()).ok())
        .is_some_and(|d| d.get("code").and_then(Value::as_str) == Some("approval_required"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn error(code: i64, message: &str, data: Option<&str>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.to_owned(),
            data: data.map(|d| serde_json::value::RawValue::from_string(d.to_owned()).unwrap()),
        }
    }

    #[test]
    fn gateway_errors_are_read_into_their_classes() {
        let class = |code, message, data| FailureClass::of(&error(code, message, data));
        assert_eq!(
            class(-32602, "unknown tool \"x\"; ...", None),
            FailureClass::NotFound
        );
        assert_eq!(
            class(-32602, "arguments: ...", None),
            FailureClass::InvalidArguments
        );
        assert_eq!(
            class(-32007, "held", Some(r#"{"code":"approval_required"}"#)),
            FailureClass::ApprovalRequired
        );
        assert_eq!(class(-32007, "rule x", None), FailureClass::Forbidden);
        assert_eq!(class(-32006, "slow down", None), FailureClass::RateLimited);
        assert_eq!(class(-32001, "deadline", None), FailureClass::Timeout);
        assert_eq!(
            class(-32021, "no elicitation", None),
            FailureClass::NeedsInput
        );
        assert_eq!(class(-32003, "cancelled", None), FailureClass::Cancelled);
        assert_eq!(class(-32603, "oops", None), FailureClass::Internal);
        assert_eq!(
            class(-32000, "server said no", None),
            FailureClass::Upstream
        );
        assert_eq!(FailureClass::Upstream.word(), "upstream_error");
    }
}
