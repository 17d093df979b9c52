//! Every label value Manifold puts on a metric comes from a bounded set: a fixed list, the
//! configured upstream names, or at most [`MAX_TOOL_LABELS_PER_UPSTREAM`] tool names per upstream.
//!
//! Label values are what a time-series database indexes; one value per distinct method name a
//! client invents, or per tool name a hostile server lists, would let anyone on the wire exhaust
//! the metrics backend. So what is not on a known list becomes [`OTHER_METHOD`] or
//! [`OTHER_TOOL`], and argument values never become labels at all.

use manifold_wire::{Era, Revision};

/// The method label of a method not on [`KNOWN_METHODS`].
pub const OTHER_METHOD: &str = "other";
/// The tool label once an upstream has used up its distinct tool names (or for a name too long
/// to be a label). In parentheses: the protocol's tool name rule (`[A-Za-z0-9_.-]`) keeps a real
/// tool from being called that.
pub const OTHER_TOOL: &str = "(other)";
/// The upstream label of Manifold's own tools (`manifold_health`, ...): parentheses keep it apart
/// from any configured server name (`[A-Za-z0-9_-]`).
pub const BUILTIN_UPSTREAM: &str = "(builtin)";
/// The `upstream` label of tools users authored in Manifold (`manifold_create_tool`).
pub const AUTHORED_UPSTREAM: &str = "(authored)";
/// Distinct tool names counted per upstream; later names share [`OTHER_TOOL`].
pub const MAX_TOOL_LABELS_PER_UPSTREAM: usize = 200;
/// Longest label value taken as it is (the protocol's longest tool name).
pub const MAX_LABEL_VALUE_LEN: usize = 128;

/// The MCP methods counted under their own name, both eras.
pub const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/update",
    "tasks/cancel",
];

/// The label of a request method: itself when known, else [`OTHER_METHOD`].
pub fn method(name: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|m| **m == name)
        .copied()
        .unwrap_or(OTHER_METHOD)
}

/// The label of a protocol era.
pub fn era(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::Modern => "modern",
    }
}

/// The label of a protocol revision (its date).
pub fn revision(revision: Revision) -> &'static str {
    revision.as_str()
}

/// Whether a tool name may be a label value as it is.
pub fn usable_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_LABEL_VALUE_LEN
}

/// How a request ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestOutcome {
    /// A JSON-RPC result.
    Ok,
    /// A JSON-RPC error.
    Error,
    /// Cancelled (by the client, a closed stream or shutdown): never answered.
    Cancelled,
}

impl RequestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Ok => "ok",
            RequestOutcome::Error => "error",
            RequestOutcome::Cancelled => "cancelled",
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// A result without `isError`.
    Ok,
    /// The tool ran and reported failure (`isError: true`).
    ToolError,
    /// The upstream could not run it (down, crashed, timed out, broke the protocol): an
    /// `isError` result Manifold wrote.
    UpstreamError,
    /// A JSON-RPC error (unknown tool, invalid arguments, an upstream's error response).
    Error,
    /// Cancelled before it finished.
    Cancelled,
    /// A modern-era `input_required` result: the call goes on in the client's retry.
    InputRequired,
}

impl CallOutcome {
    pub const ALL: [CallOutcome; 6] = [
        CallOutcome::Ok,
        CallOutcome::ToolError,
        CallOutcome::UpstreamError,
        CallOutcome::Error,
        CallOutcome::Cancelled,
        CallOutcome::InputRequired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::UpstreamError => "upstream_error",
            CallOutcome::Error => "error",
            CallOutcome::Cancelled => "cancelled",
            CallOutcome::InputRequired => "input_required",
        }
    }

    /// Position in [`CallOutcome::ALL`].
    pub fn index(self) -> usize {
        match self {
            CallOutcome::Ok => 0,
            CallOutcome::ToolError => 1,
            CallOutcome::UpstreamError => 2,
            CallOutcome::Error => 3,
            CallOutcome::Cancelled => 4,
            CallOutcome::InputRequired => 5,
        }
    }
}

/// Why an HTTP request was refused before it reached the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// A browser `Origin` not on `allowed_origins` (403).
    Origin,
    /// A `Host` not on `allowed_hosts` (403).
    Host,
    /// Refused for another permission reason (403).
    Forbidden,
    /// No valid credentials (401).
    Unauthenticated,
    /// A body over the size bound (413).
    BodyTooLarge,
    /// Not a JSON-RPC message (-32700).
    ParseError,
    /// A request the transport cannot take: no session, bad version header, ... (-32600).
    InvalidRequest,
    /// A modern request without the `_meta` it needs (-32602).
    InvalidParams,
    /// Headers that disagree with the body (-32020).
    HeaderMismatch,
    /// A revision Manifold does not speak (-32022).
    UnsupportedVersion,
    /// A legacy session that ended or was never minted here (404).
    SessionNotFound,
    /// A method Manifold does not serve in that era (404, -32601).
    UnknownMethod,
    /// An `Accept` header that allows nothing Manifold answers with (406).
    NotAcceptable,
    /// An HTTP method the endpoint does not take (405).
    MethodNotAllowed,
    /// A POST whose `Content-Type` is not `application/json` (415).
    UnsupportedMediaType,
    /// A bound on sessions or streams was reached (429, 503).
    Overloaded,
    /// Any other refusal (4xx or 5xx).
    Other,
}

impl RejectReason {
    pub const ALL: [RejectReason; 17] = [
        RejectReason::Origin,
        RejectReason::Host,
        RejectReason::Forbidden,
        RejectReason::Unauthenticated,
        RejectReason::BodyTooLarge,
        RejectReason::ParseError,
        RejectReason::InvalidRequest,
        RejectReason::InvalidParams,
        RejectReason::HeaderMismatch,
        RejectReason::UnsupportedVersion,
        RejectReason::SessionNotFound,
        RejectReason::UnknownMethod,
        RejectReason::NotAcceptable,
        RejectReason::MethodNotAllowed,
        RejectReason::UnsupportedMediaType,
        RejectReason::Overloaded,
        RejectReason::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Origin => "origin",
            RejectReason::Host => "host",
            RejectReason::Forbidden => "forbidden",
            RejectReason::Unauthenticated => "unauthenticated",
            RejectReason::BodyTooLarge => "body_too_large",
            RejectReason::ParseError => "parse_error",
            RejectReason::InvalidRequest => "invalid_request",
            RejectReason::InvalidParams => "invalid_params",
            RejectReason::HeaderMismatch => "header_mismatch",
            RejectReason::UnsupportedVersion => "unsupported_version",
            RejectReason::SessionNotFound => "session_not_found",
            RejectReason::UnknownMethod => "unknown_method",
            RejectReason::NotAcceptable => "not_acceptable",
            RejectReason::MethodNotAllowed => "method_not_allowed",
            RejectReason::UnsupportedMediaType => "unsupported_media_type",
            RejectReason::Overloaded => "overloaded",
            RejectReason::Other => "other",
        }
    }

    /// The reason for a refusal, from its HTTP status and JSON-RPC error code (when the body had
    /// one): the status decides where it is unambiguous, the code otherwise.
    pub fn classify(status: u16, code: Option<i64>) -> RejectReason {
        match (status, code) {
            (413, _) => RejectReason::BodyTooLarge,
            (406, _) => RejectReason::NotAcceptable,
            (405, _) => RejectReason::MethodNotAllowed,
            (415, _) => RejectReason::UnsupportedMediaType,
            (429 | 503, _) => RejectReason::Overloaded,
            (403, _) => RejectReason::Forbidden,
            (401, _) => RejectReason::Unauthenticated,
            (_, Some(-32700)) => RejectReason::ParseError,
            (_, Some(-32600)) => RejectReason::InvalidRequest,
            (_, Some(-32602)) => RejectReason::InvalidParams,
            (_, Some(-32020)) => RejectReason::HeaderMismatch,
            (_, Some(-32022)) => RejectReason::UnsupportedVersion,
            (_, Some(-32601)) => RejectReason::UnknownMethod,
            (404, _) => RejectReason::SessionNotFound,
            _ => RejectReason::Other,
        }
    }

    /// Position in [`RejectReason::ALL`].
    pub fn index(self) -> usize {
        RejectReason::ALL
            .iter()
            .position(|r| *r == self)
            .unwrap_or(RejectReason::ALL.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_methods_keep_their_name() {
        assert_eq!(method("tools/call"), "tools/call");
        assert_eq!(method("server/discover"), "server/discover");
        assert_eq!(method("tools/call2"), OTHER_METHOD);
        assert_eq!(method("x".repeat(10_000).as_str()), OTHER_METHOD);
        assert_eq!(method(""), OTHER_METHOD);
    }

    #[test]
    fn refusals_are_classified_by_status_then_code() {
        assert_eq!(
            RejectReason::classify(413, Some(-32005)),
            RejectReason::BodyTooLarge
        );
        assert_eq!(
            RejectReason::classify(400, Some(-32700)),
            RejectReason::ParseError
        );
        assert_eq!(
            RejectReason::classify(400, Some(-32020)),
            RejectReason::HeaderMismatch
        );
        assert_eq!(
            RejectReason::classify(400, Some(-32022)),
            RejectReason::UnsupportedVersion
        );
        assert_eq!(
            RejectReason::classify(400, Some(-32602)),
            RejectReason::InvalidParams
        );
        assert_eq!(
            RejectReason::classify(404, Some(-32008)),
            RejectReason::SessionNotFound
        );
        assert_eq!(
            RejectReason::classify(404, Some(-32601)),
            RejectReason::UnknownMethod
        );
        assert_eq!(
            RejectReason::classify(503, Some(-32006)),
            RejectReason::Overloaded
        );
        assert_eq!(RejectReason::classify(500, None), RejectReason::Other);
        assert_eq!(
            RejectReason::classify(401, None),
            RejectReason::Unauthenticated
        );
    }

    #[test]
    fn every_outcome_and_reason_has_its_own_index_and_name() {
        for (i, o) in CallOutcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
        for (i, r) in RejectReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut names: Vec<&str> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RejectReason::ALL.len());
    }

    #[test]
    fn tool_names_too_long_for_a_label_are_not_usable() {
        assert!(usable_tool_name("echo"));
        assert!(usable_tool_name(&"a".repeat(MAX_LABEL_VALUE_LEN)));
        assert!(!usable_tool_name(&"a".repeat(MAX_LABEL_VALUE_LEN + 1)));
        assert!(!usable_tool_name(""));
    }
}
