//! The one table of JSON-RPC error codes Manifold emits or recognises.
//!
//! Keeping every code in one enum means a reviewer can see at a glance that Manifold's own codes
//! stay inside the implementation-defined band (-32000..=-32019) and never collide with the codes
//! the MCP specification owns (-32002 and -32020..=-32099).

/// Lowest code (inclusive) that implementations may define.
pub const IMPLEMENTATION_BAND_LOW: i64 = -32019;
/// Highest code (inclusive) that implementations may define.
pub const IMPLEMENTATION_BAND_HIGH: i64 = -32000;

/// Every error code Manifold knows, by meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    // JSON-RPC 2.0 standard codes.
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    // Codes the MCP specification owns.
    /// Legacy-era "resource not found" (the modern era uses InvalidParams; -32002 is accepted too).
    ResourceNotFound,
    /// Modern era: an `Mcp-*` header disagrees with the body.
    HeaderMismatch,
    /// Modern era: the request needs a client capability the client did not declare.
    MissingRequiredClientCapability,
    /// Modern era: the requested protocol revision is not supported (`data: {supported, requested}`).
    UnsupportedProtocolVersion,
    // Manifold's own codes: only in -32000..=-32019, never -32002.
    /// The upstream server could not be reached or its connection died.
    UpstreamUnavailable,
    /// The request's deadline passed before the upstream answered.
    RequestTimeout,
    /// The request was cancelled before it settled.
    RequestCancelled,
    /// The upstream broke the protocol (bad envelope, wrong revision, duplicate response...).
    UpstreamProtocolViolation,
    /// A message or result exceeded a named size bound.
    MessageTooLarge,
    /// Too many requests in flight, or a rate limit was hit.
    Overloaded,
    /// The caller is not allowed to do this.
    Forbidden,
    /// A session id was unknown or no longer valid.
    SessionNotFound,
}

impl ErrorCode {
    /// Every variant, for tables, docs and tests.
    pub const ALL: [ErrorCode; 17] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::ResourceNotFound,
        ErrorCode::HeaderMismatch,
        ErrorCode::MissingRequiredClientCapability,
        ErrorCode::UnsupportedProtocolVersion,
        ErrorCode::UpstreamUnavailable,
        ErrorCode::RequestTimeout,
        ErrorCode::RequestCancelled,
        ErrorCode::UpstreamProtocolViolation,
        ErrorCode::MessageTooLarge,
        ErrorCode::Overloaded,
        ErrorCode::Forbidden,
        ErrorCode::SessionNotFound,
    ];

    /// The numeric code on the wire.
    pub const fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::ResourceNotFound => -32002,
            ErrorCode::HeaderMismatch => -32020,
            ErrorCode::MissingRequiredClientCapability => -32021,
            ErrorCode::UnsupportedProtocolVersion => -32022,
            ErrorCode::UpstreamUnavailable => -32000,
            ErrorCode::RequestTimeout => -32001,
            ErrorCode::RequestCancelled => -32003,
            ErrorCode::UpstreamProtocolViolation => -32004,
            ErrorCode::MessageTooLarge => -32005,
            ErrorCode::Overloaded => -32006,
            ErrorCode::Forbidden => -32007,
            ErrorCode::SessionNotFound => -32008,
        }
    }

    /// Who defines the code.
    pub const fn owner(self) -> CodeOwner {
        match self {
            ErrorCode::ParseError
            | ErrorCode::InvalidRequest
            | ErrorCode::MethodNotFound
            | ErrorCode::InvalidParams
            | ErrorCode::InternalError => CodeOwner::JsonRpc,
            ErrorCode::ResourceNotFound
            | ErrorCode::HeaderMismatch
            | ErrorCode::MissingRequiredClientCapability
            | ErrorCode::UnsupportedProtocolVersion => CodeOwner::Mcp,
            _ => CodeOwner::Manifold,
        }
    }

    /// Maps a wire code back to its meaning, if Manifold knows it.
    pub fn from_code(code: i64) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.code() == code)
    }
}

/// Who owns a code's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeOwner {
    JsonRpc,
    Mcp,
    Manifold,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn manifold_codes_stay_in_the_implementation_band_and_avoid_spec_codes() {
        for c in ErrorCode::ALL {
            if c.owner() == CodeOwner::Manifold {
                let n = c.code();
                assert!(
                    (IMPLEMENTATION_BAND_LOW..=IMPLEMENTATION_BAND_HIGH).contains(&n),
                    "{c:?} = {n} is outside -32000..=-32019"
                );
                assert_ne!(
                    n, -32002,
                    "{c:?} collides with the spec's resource-not-found"
                );
            }
        }
    }

    #[test]
    fn codes_are_distinct_and_round_trip() {
        let mut seen = HashSet::new();
        for c in ErrorCode::ALL {
            assert!(seen.insert(c.code()), "duplicate code {}", c.code());
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
        }
        assert_eq!(ErrorCode::from_code(-32099), None);
    }
}
