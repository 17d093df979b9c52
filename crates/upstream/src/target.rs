//! Where a server is: a stdio command, an HTTP endpoint, or an OpenAPI-described API.

use std::sync::Arc;

use crate::auth::{HttpAuth, TokenStore};
use crate::http_spec::HttpSpec;
use crate::transport::stdio::StdioSpec;

/// Where a server is.
#[derive(Debug, Clone)]
pub enum Target {
    Stdio(StdioSpec),
    Http(HttpSpec),
    /// An API described by an OpenAPI document, answered by Manifold itself.
    OpenApi(crate::transport::openapi::OpenApiSpec),
}

impl Target {
    /// Gives an HTTP target's OAuth client `store`, so that tokens obtained by `manifold login`,
    /// and refreshed ones, persist. Other targets, and clients that have a store, come back
    /// unchanged.
    #[must_use]
    pub fn with_token_store(mut self, store: &Arc<dyn TokenStore>, server: &str) -> Target {
        if let Target::Http(HttpSpec {
            auth: HttpAuth::OAuth(client),
            ..
        }) = &mut self
            && !client.has_store()
        {
            *client = client.with_store(Arc::clone(store), server);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::stdio::StdioSpec;

    #[test]
    fn debug_output_hides_secret_values() {
        let http = HttpSpec {
            url: "https://h/mcp?token=s3cret".to_owned(),
            headers: vec![("Authorization".to_owned(), "Bearer s3cret".to_owned())],
            ..HttpSpec::default()
        };
        let stdio = StdioSpec {
            command: "srv".to_owned(),
            env: vec![("API_KEY".to_owned(), "s3cret".to_owned())],
            ..StdioSpec::default()
        };
        for shown in [
            format!("{http:?}"),
            format!("{stdio:?}"),
            format!("{:?}", Target::Http(http.clone())),
        ] {
            assert!(!shown.contains("s3cret"), "{shown}");
        }
        assert!(format!("{stdio:?}").contains("API_KEY=<redacted>"));
    }
}
