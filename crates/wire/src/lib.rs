//! manifold-wire: the bytes <-> messages layer of Manifold.
//!
//! Everything here is pure (no I/O) so that every decoder can be fuzzed and property-tested in
//! isolation, and so that the gateway can forward JSON it does not own without re-serialising it.

pub mod codes;
pub mod depth;
pub mod elements;
pub mod envelope;
pub mod id;
pub mod id_scan;
pub mod line;
pub mod log_level;
pub mod meta;
pub mod patch;
pub mod revision;
pub mod shallow;
pub mod sse;

pub use codes::ErrorCode;
pub use envelope::{ErrorObject, Fault, FaultKind, Kind, Message};
pub use id::Id;
pub use revision::{Era, Revision};
