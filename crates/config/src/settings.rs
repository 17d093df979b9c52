//! The `[gateway]` section as typed, resolved values, with the defaults people expect from a
//! local gateway: loopback only, stable prefixed names within 64 characters. The section serves
//! several components (the listener and its allowlists are manifold-server's, naming and
//! discovery the gateway's, `data_dir` the binary's), so it is kept here as written and each part
//! is handed over in its owner's types: `naming_rules()`, `discovery`, the allowlists.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use manifold_gateway::catalog::naming::{DEFAULT_MAX_NAME_LEN, NamingRules};
use manifold_server::allowlist::{HostAllowlist, OriginPattern, origin_allowed};

// The gateway's own types and names, which this section is read into: re-exported so that a
// reader of the file's settings need not know which component owns each.
pub use manifold_gateway::Discovery;
pub use manifold_gateway::catalog::naming::{NamingMode, PREFIX_SEPARATOR};
/// The key that seals legacy-era session state into session ids: the server's own type, whose
/// rules (32 bytes, the key id's characters) are the ones checked.
pub use manifold_server::SessionKey;

/// Manifold's default port: fixed, so clients can be configured once.
pub const DEFAULT_PORT: u16 = 7391;
/// Where Manifold listens unless told otherwise: this machine only.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), DEFAULT_PORT);
/// Longest exposed tool name by default (what most clients accept): the gateway's own default.
pub const DEFAULT_NAME_MAX_LEN: usize = DEFAULT_MAX_NAME_LEN;
/// The range `name_max_len` accepts (128 is the protocol's limit).
pub const NAME_MAX_LEN_RANGE: std::ops::RangeInclusive<usize> = 16..=128;
/// Characters of the tool's own name that a prefix must leave room for.
pub const MIN_TOOL_NAME_ROOM: usize = 8;

/// The resolved `[gateway]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySection {
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

impl GatewaySection {
    /// Whether a request's `Origin` header is allowed.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        origin_allowed(&self.allowed_origins, Some(origin))
    }

    /// Whether a request's `Host` header is allowed by a server bound to `listen`.
    pub fn host_allowed(&self, host: &str) -> bool {
        self.allowed_hosts.allows(Some(host), self.listen)
    }

    /// How the gateway names tools: `naming`, `name_max_len` and `strict_names` together, as
    /// the gateway takes them.
    pub fn naming_rules(&self) -> NamingRules {
        NamingRules {
            mode: self.naming,
            max_len: self.name_max_len,
            strict_charset: self.strict_names,
        }
    }

    /// Whether only this machine can connect.
    pub fn listens_on_loopback_only(&self) -> bool {
        self.listen.ip().is_loopback()
    }
}
