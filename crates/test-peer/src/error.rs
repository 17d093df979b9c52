//! Why the peer could not start or keep serving, in words a test log reader can act on.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}; pick a free port or pass --port 0")]
    Bind { port: u16, source: io::Error },
    #[error("cannot write the `listening on` line to stdout: {0}; is stdout closed?")]
    Announce(io::Error),
    #[error("the HTTP server stopped: {0}")]
    Serve(io::Error),
    #[error("cannot start the tokio runtime: {0}")]
    Runtime(io::Error),
}
