//! One `[servers.NAME]` section as typed, resolved values, and its conversion into the upstream
//! crate's connection types. Printing a server (`{:?}`) never shows environment values, header
//! values, a URL's path or query, or anything that came from `${...}` interpolation.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manifold_upstream::auth::HttpAuth;
use manifold_upstream::connection::RefuseServerRequests;
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{
    ClientIdentity, ConnectOptions, EraChoice, HttpSpec, HttpTransportChoice, Target,
};

use crate::secret::REDACTED;

// The gateway's own types, which a server's section is read into: who shares a stdio child, what
// a changed tool definition does, which tools are offered. Re-exported so that this module names
// everything a server's settings hold.
pub use manifold_gateway::ToolFilter;
pub use manifold_gateway::pins::OnChange;
pub use manifold_gateway::upstream::Scope;

/// Per-call idle timeout unless configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Absolute per-call cap unless configured.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// When a server is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Startup {
    /// When the gateway starts.
    #[default]
    Eager,
    /// On first use.
    Lazy,
}

/// The fields of a server whose values came from `${...}` interpolation, by their path inside
/// the server (`command`, `args[1]`, `env.TOKEN`, `url`, `headers.Authorization`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interpolated(BTreeSet<String>);

impl Interpolated {
    pub fn new() -> Interpolated {
        Interpolated::default()
    }

    pub(crate) fn insert(&mut self, field: String) {
        self.0.insert(field);
    }

    pub fn contains(&self, field: &str) -> bool {
        self.0.contains(field)
    }

    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// How a server is reached.
#[derive(Clone)]
pub enum ServerKind {
    Stdio {
        spec: StdioSpec,
        scope: Scope,
        interpolated: Interpolated,
    },
    Http {
        spec: HttpSpec,
        interpolated: Interpolated,
        /// An OpenAPI server: the document (a path, resolved, or a URL) whose operations are
        /// the tools, `spec.url` being the API's base URL (`openapi`, `base_url`).
        openapi: Option<String>,
    },
}

/// One configured upstream server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    /// Put before tool names (`prefix__tool`); defaults to the name.
    pub prefix: String,
    pub enabled: bool,
    pub era: EraChoice,
    /// Per-call idle timeout (reset by progress).
    pub timeout: Duration,
    /// Absolute per-call cap.
    pub max_timeout: Duration,
    pub tools: ToolFilter,
    pub startup: Startup,
    /// What a changed tool definition does (see `docs/security.md`, "Tool definitions").
    pub on_change: OnChange,
    pub kind: ServerKind,
}

impl ServerConfig {
    /// Where the upstream crate connects.
    pub fn target(&self) -> Target {
        match &self.kind {
            ServerKind::Stdio { spec, .. } => Target::Stdio(spec.clone()),
            ServerKind::Http {
                spec,
                openapi: Some(document),
                ..
            } => Target::OpenApi(manifold_upstream::transport::openapi::OpenApiSpec {
                document: document.clone(),
                api: spec.clone(),
            }),
            ServerKind::Http { spec, .. } => Target::Http(spec.clone()),
        }
    }

    /// Connection options for this server: its name and era, a default client identity, and a
    /// handler that refuses server requests (the gateway replaces the last two).
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            server: self.name.clone(),
            era: self.era,
            client: ClientIdentity::default(),
            handler: Arc::new(RefuseServerRequests),
        }
    }

    /// `stdio` or `http`.
    pub fn transport_label(&self) -> &'static str {
        match self.kind {
            ServerKind::Stdio { .. } => "stdio",
            ServerKind::Http {
                openapi: Some(_), ..
            } => "openapi",
            ServerKind::Http { .. } => "http",
        }
    }

    pub fn is_stdio(&self) -> bool {
        matches!(self.kind, ServerKind::Stdio { .. })
    }

    /// The stdio scope; `None` for HTTP servers.
    pub fn scope(&self) -> Option<Scope> {
        match self.kind {
            ServerKind::Stdio { scope, .. } => Some(scope),
            ServerKind::Http { .. } => None,
        }
    }
}

/// Writes a string field, or `<redacted>`.
struct Shown<'a>(&'a str, bool);

impl fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.1 {
            f.write_str(REDACTED)
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

/// A URL cut to its origin: paths and queries may carry tokens.
fn url_origin(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => {
            let mut out = format!("{}://{}", u.scheme(), u.host_str().unwrap_or_default());
            if let Some(port) = u.port() {
                out.push_str(&format!(":{port}"));
            }
            if u.path() != "/" || u.query().is_some() {
                out.push_str("/…");
            }
            out
        }
        Err(_) => REDACTED.to_owned(),
    }
}

fn shown_path(path: Option<&Path>, hidden: bool) -> Option<Shown<'_>> {
    path.map(|p| Shown(p.to_str().unwrap_or("<not UTF-8>"), hidden))
}

impl fmt::Debug for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerKind::Stdio {
                spec,
                scope,
                interpolated,
            } => {
                let args: Vec<Shown<'_>> = spec
                    .args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| Shown(a, interpolated.contains(&format!("args[{i}]"))))
                    .collect();
                // Environment values are often secrets even when written literally.
                let env: Vec<(&str, Shown<'_>)> = spec
                    .env
                    .iter()
                    .map(|(k, _)| (k.as_str(), Shown("", true)))
                    .collect();
                f.debug_struct("Stdio")
                    .field(
                        "command",
                        &Shown(&spec.command, interpolated.contains("command")),
                    )
                    .field("args", &args)
                    .field("env", &env)
                    .field("env_allow", &spec.env_allow)
                    .field(
                        "cwd",
                        &shown_path(spec.cwd.as_deref(), interpolated.contains("cwd")),
                    )
                    .field("scope", scope)
                    .finish()
            }
            ServerKind::Http {
                spec, interpolated, ..
            } => {
                // Header values carry credentials even when written literally.
                let headers: Vec<(&str, Shown<'_>)> = spec
                    .headers
                    .iter()
                    .map(|(k, _)| (k.as_str(), Shown("", true)))
                    .collect();
                let origin = url_origin(&spec.url);
                f.debug_struct("Http")
                    .field("url", &Shown(&origin, interpolated.contains("url")))
                    .field("transport", &spec.transport)
                    .field("headers", &headers)
                    .field(
                        "ca_bundle",
                        &shown_path(
                            spec.ca_bundle.as_deref(),
                            interpolated.contains("ca_bundle"),
                        ),
                    )
                    .field(
                        "client_cert",
                        &shown_path(
                            spec.client_identity.as_deref(),
                            interpolated.contains("client_cert"),
                        ),
                    )
                    .field("allow_insecure_http", &spec.allow_insecure_http)
                    .field(
                        "auth",
                        &ShownCredentials {
                            auth: &spec.auth,
                            interpolated,
                        },
                    )
                    .finish()
            }
        }
    }
}

impl PartialEq for ServerKind {
    /// Same process or endpoint with the same settings: what decides whether a reload must
    /// restart the server.
    fn eq(&self, other: &ServerKind) -> bool {
        match (self, other) {
            (
                ServerKind::Stdio {
                    spec: a, scope: sa, ..
                },
                ServerKind::Stdio {
                    spec: b, scope: sb, ..
                },
            ) => sa == sb && a == b,
            (ServerKind::Http { spec: a, .. }, ServerKind::Http { spec: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// The configuration spelling of a transport choice.
pub fn transport_name(t: HttpTransportChoice) -> &'static str {
    match t {
        HttpTransportChoice::Auto => "auto",
        HttpTransportChoice::StreamableHttp => "streamable-http",
        HttpTransportChoice::Sse => "sse",
    }
}

/// The credentials of a server as `{:?}` shows them: values from `${...}` and the secret never.
struct ShownCredentials<'a> {
    pub auth: &'a HttpAuth,
    pub interpolated: &'a Interpolated,
}

impl std::fmt::Debug for ShownCredentials<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |k: &str, v: &Option<String>| -> Option<String> {
            v.as_ref().map(|v| {
                if self.interpolated.contains(&format!("oauth.{k}")) {
                    REDACTED.to_owned()
                } else {
                    v.clone()
                }
            })
        };
        match self.auth {
            HttpAuth::None => f.write_str("None"),
            HttpAuth::Passthrough => f.write_str("TokenPassthrough"),
            HttpAuth::OAuth(client) => {
                let s = client.settings();
                f.debug_struct("OAuth")
                    .field("grant", &s.grant)
                    .field("client_id", &hidden("client_id", &s.client_id))
                    .field("client_secret", &s.client_secret.as_ref().map(|_| REDACTED))
                    .field(
                        "client_metadata_url",
                        &hidden("client_metadata_url", &s.client_metadata_url),
                    )
                    .field("scopes", &s.scopes)
                    .field("redirect_uri", &hidden("redirect_uri", &s.redirect_uri))
                    .finish()
            }
        }
    }
}
