//! Token passthrough: forwarding the downstream caller's own bearer token to an upstream.
//!
//! The MCP specification forbids it by default (a token is issued for one audience; a server that
//! forwards it becomes a confused deputy), so it happens only for servers configured with
//! `token_passthrough = true`, and only with the token of the request being served. The token
//! goes down explicitly with that one request ([`CallerToken`], an argument of
//! `Connection::request_in_context` and `Transport::send_as`), never in shared state or in
//! anything the task carries implicitly, so one caller's token can never ride on another
//! caller's request.

use std::sync::Arc;

/// A downstream caller's raw bearer token, for the one request it came with; its `Debug` never
/// shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct CallerToken(pub Arc<str>);

impl CallerToken {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for CallerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallerToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_token_never_shows_in_debug_output() {
        let token = CallerToken(Arc::from("secret-token-123"));
        let shown = format!("{token:?} {:?}", Some(token.clone()));
        assert!(!shown.contains("secret-token-123"), "{shown}");
        assert_eq!(token.as_str(), "secret-token-123");
    }
}
