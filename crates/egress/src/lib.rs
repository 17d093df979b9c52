//! manifold-egress: the filtering proxy a sandboxed server reaches at 127.0.0.1:3128 inside its
//! network namespace. The gateway accepts on that listener from the host namespace, so every
//! request is decided here: the host must match the allow-list, every address it resolves to must
//! be public (or inside `allow_private`), and the connection goes to the vetted address only.

pub mod policy;
pub mod proxy;
pub mod request;

pub use policy::{AddressRule, Cidr, HostPattern, Policy, PolicyError};
pub use proxy::{Egress, TUNNEL_IDLE_TIMEOUT, serve};
pub use request::{MAX_HEAD_BYTES, MAX_HEADERS, ProxyRequest, RequestError, Target};
