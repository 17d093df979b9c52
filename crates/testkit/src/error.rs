//! Why: a test that cannot find its peer or start it should fail with a message that says what is
//! missing and how to get it, not with a bare `No such file or directory`.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// Everything the test kit can fail at. Messages name the thing and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// The peers directory does not exist or has no installed packages.
    #[error(
        "test peers are not installed at {path}: {reason}; run scripts/install-peers (or set MANIFOLD_PEERS_DIR)"
    )]
    PeersNotInstalled { path: PathBuf, reason: &'static str },

    /// A file that the peer installation should have produced is absent.
    #[error("{what} not found at {path}; run scripts/install-peers")]
    NotInstalled { what: String, path: PathBuf },

    /// A workspace binary or the target directory could not be found or built.
    #[error("{what} is missing: {hint}")]
    Missing { what: String, hint: String },

    /// A program expected on PATH is not there.
    #[error("`{program}` was not found on PATH; install it (see tests/peers/README.md)")]
    NotOnPath { program: String },

    /// An npm package name that could climb out of node_modules or is empty.
    #[error("'{name}' is not an npm package name (expected `name` or `@scope/name`)")]
    BadPackageName { name: String },

    /// An installed npm package whose package.json names no entry file.
    #[error(
        "npm package {name} declares neither `bin` nor `main` in {manifest}; pass the entry path yourself"
    )]
    NoPackageEntry { name: String, manifest: PathBuf },

    /// A file could not be read.
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A scratch directory could not be made.
    #[error("could not make the scratch directory {path}: {source}")]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A package.json that is not JSON.
    #[error("{path} is not valid JSON: {source}; reinstall with scripts/install-peers")]
    BadJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// Binding 127.0.0.1:0 to find a free port failed.
    #[error("could not reserve a free port on 127.0.0.1: {0}")]
    NoFreePort(#[source] std::io::Error),

    /// The child process could not be started.
    #[error("could not start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },

    /// Nothing accepted connections on the port before the hang guard ran out.
    #[error(
        "nothing accepted connections on 127.0.0.1:{port} within {timeout:?}; is the peer listening there?"
    )]
    PortTimeout { port: u16, timeout: Duration },

    /// The peer died before its port opened (its stderr, inherited, says why).
    #[error(
        "{program} exited with {status} before 127.0.0.1:{port} accepted connections; see its stderr above"
    )]
    ExitedEarly {
        program: String,
        port: u16,
        status: ExitStatus,
    },

    /// Waiting on or signalling a child failed.
    #[error("could not stop or reap {program}: {source}")]
    Reap {
        program: String,
        #[source]
        source: std::io::Error,
    },

    /// A file could not be written or created, or a pipe read.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },

    /// `manifold serve` did not print its URL (it exited, or printed something else).
    #[error(
        "manifold serve printed {printed:?} instead of its http://127.0.0.1:PORT/mcp URL; its log:\n{log}"
    )]
    GatewayStart { printed: String, log: String },

    /// A signal could not be sent.
    #[error("could not signal pid {pid}: {errno}")]
    Signal { pid: u32, errno: nix::errno::Errno },

    /// Something a test waited for did not happen before the hang guard ran out.
    #[error("hung waiting for {what} (gave up after {timeout:?})")]
    Hung { what: String, timeout: Duration },

    /// An HTTP exchange failed below HTTP (connection refused, reset, body cut short).
    #[error("{method} {url} failed: {source}")]
    Http {
        method: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },

    /// An MCP request got no JSON-RPC answer, or an HTTP status that is not a success.
    #[error("{method} was answered HTTP {status} without its JSON-RPC answer: {body}")]
    NoAnswer {
        method: String,
        status: u16,
        body: String,
    },

    /// A raw exchange's reply is not HTTP.
    #[error("the reply from {authority} is not an HTTP response: {reply:?}")]
    NotHttp { authority: String, reply: String },

    /// A listening peer printed something other than `listening on 127.0.0.1:PORT` first.
    #[error("{program} printed {printed:?} instead of `listening on 127.0.0.1:PORT`")]
    NotAnnounced { program: String, printed: String },

    /// A command the test ran to completion failed.
    #[error("{command} failed ({status}): {stderr}")]
    CommandFailed {
        command: String,
        status: ExitStatus,
        stderr: String,
    },
}
