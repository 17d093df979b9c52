//! Token passthrough: forwarding the downstream caller's own bearer token to an upstream.
//!
//! The MCP specification forbids it by default (a token is issued for one audience; a server that
//! forwards it becomes a confused deputy), so it happens only for servers configured with
//! `token_passthrough = true`, and only with the token of the request being served. The token
//! travels with the task that serves the request ([`with_caller_token`]), never in shared state,
//! so one caller's token can never ride on another caller's request.

use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static CALLER_TOKEN: Option<Arc<str>>;
}

/// Runs `work` with `token` as the caller's bearer token for passthrough servers.
pub async fn with_caller_token<F: Future>(token: Option<Arc<str>>, work: F) -> F::Output {
    CALLER_TOKEN.scope(token, work).await
}

/// The caller's bearer token of the current task, if any.
pub fn caller_token() -> Option<Arc<str>> {
    CALLER_TOKEN.try_with(Clone::clone).ok().flatten()
}

/// Wraps `work` so that it keeps the current task's caller token when spawned elsewhere (a
/// transport that answers a request on its own task).
pub fn carry<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let token = caller_token();
    CALLER_TOKEN.scope(token, work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_token_is_seen_only_inside_its_scope_and_carried_into_spawned_work() {
        assert_eq!(caller_token(), None);
        let inside = with_caller_token(Some(Arc::from("t1")), async {
            let here = caller_token();
            let spawned = tokio::spawn(carry(async { caller_token() }))
                .await
                .ok()
                .flatten();
            let plain = tokio::spawn(async { caller_token() }).await.ok().flatten();
            (here, spawned, plain)
        })
        .await;
        assert_eq!(inside.0.as_deref(), Some("t1"));
        assert_eq!(inside.1.as_deref(), Some("t1"));
        assert_eq!(inside.2, None);
        assert_eq!(caller_token(), None);
    }
}
