//! Why: end-to-end tests write `manifold.toml` text with the real peers as servers; the TOML
//! quoting of their paths and the Python SDK server's section were written out again in each test
//! file. One spelling of each here.

use crate::error::TestkitError;
use crate::locate::{peers_dir, python};

/// `s` as a TOML basic string (JSON's escapes are TOML's).
pub fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

/// A `[servers.NAME]` section running the Python SDK server (`tests/peers/python_server.py`)
/// over stdio.
pub fn python_server_section(name: &str) -> Result<String, TestkitError> {
    let script = peers_dir()?.join("python_server.py");
    Ok(format!(
        "[servers.{name}]\ncommand = {}\nargs = [{}, \"stdio\"]\n",
        toml_string(&python()?.to_string_lossy()),
        toml_string(&script.to_string_lossy()),
    ))
}
