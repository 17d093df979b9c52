//! Errors of the server crate: what failed to start, and what is wrong with a session key.
//!
//! Request-level failures never appear here: they are answered on the wire as JSON-RPC errors
//! with the HTTP status the protocol asks for.

use std::path::PathBuf;

/// Why the server or a session key could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("could not listen on {addr}: {source}; pick another port or stop what holds it")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "a session key must be exactly 32 bytes, this one has {found}; generate one with `head -c 32 /dev/urandom | base64`"
    )]
    KeyLength { found: usize },
    #[error("the session key id {0:?} is not usable; use 1 to 16 of A-Z a-z 0-9 _ -, e.g. \"k1\"")]
    KeyId(String),
    #[error(
        "the session key file {path} is not 32 bytes of base64 ({why}); delete it to generate a new one"
    )]
    KeyFile { path: PathBuf, why: String },
    #[error("could not {action} the session key file {path}: {source}")]
    KeyIo {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the operating system's random source failed: {0}")]
    Random(String),
}
