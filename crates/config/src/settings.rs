//! The `[gateway]` section as typed, resolved values, with the defaults people expect from a
//! local gateway: loopback only, stable prefixed names within 64 characters.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::secret::Secret;
use manifold_server::allowlist::{HostAllowlist, OriginPattern, origin_allowed};

/// Manifold's default port: fixed, so clients can be configured once.
pub const DEFAULT_PORT: u16 = 7391;
/// Where Manifold listens unless told otherwise: this machine only.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), DEFAULT_PORT);
/// Longest exposed tool name by default (what most clients accept).
pub const DEFAULT_NAME_MAX_LEN: usize = 64;
/// The range `name_max_len` accepts (128 is the protocol's limit).
pub const NAME_MAX_LEN_RANGE: std::ops::RangeInclusive<usize> = 16..=128;
/// Between a prefix and a tool name.
pub const PREFIX_SEPARATOR: &str = "__";
/// Characters of the tool's own name that a prefix must leave room for.
pub const MIN_TOOL_NAME_ROOM: usize = 8;

/// When exposed tool names carry the server's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NamingMode {
    /// Always `prefix__name`: names never change when a server is added.
    #[default]
    Always,
    /// Never prefixed; colliding names are refused.
    Never,
    /// Prefixed only where names collide.
    Conditional,
}

/// What `tools/list` shows a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Discovery {
    /// Every exposed tool.
    #[default]
    Full,
    /// Only the built-in search tools (search, describe, call).
    Search,
}

/// The key that seals legacy-era session state into session ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKey {
    /// Names the key in sealed tokens, for rotation; `None` when not configured.
    pub id: Option<String>,
    pub key: Secret<[u8; 32]>,
}

/// The resolved `[gateway]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    pub listen: SocketAddr,
    pub naming: NamingMode,
    pub name_max_len: usize,
    /// true: exposed names use `[A-Za-z0-9_-]` only; false: `.` is allowed too (the protocol's
    /// own rule), which some clients refuse.
    pub strict_names: bool,
    pub allowed_origins: Vec<OriginPattern>,
    pub allowed_hosts: HostAllowlist,
    pub discovery: Discovery,
    pub session_key: Option<SessionKey>,
    pub data_dir: PathBuf,
}

impl GatewaySettings {
    /// Whether a request's `Origin` header is allowed.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        origin_allowed(&self.allowed_origins, Some(origin))
    }

    /// Whether a request's `Host` header is allowed by a server bound to `listen`.
    pub fn host_allowed(&self, host: &str) -> bool {
        self.allowed_hosts.allows(Some(host), self.listen)
    }

    /// Whether only this machine can connect.
    pub fn listens_on_loopback_only(&self) -> bool {
        self.listen.ip().is_loopback()
    }
}
