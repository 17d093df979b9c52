//! Why a sandbox could not be built or was refused; each message names the control, what the
//! kernel said and what to do about it.

use std::path::PathBuf;

use crate::spec::Control;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "sandbox launcher {path} cannot be used: {source}; build the manifold-sandbox-exec binary and put it next to manifold, or name it in the spec"
    )]
    Launcher {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "sandbox directory {path} cannot be prepared: {source}; create it and make it writable by the gateway"
    )]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "sandbox report pipe failed: {0}; the file-descriptor limit may be reached, raise `ulimit -n`"
    )]
    Pipe(nix::Error),
    #[error("sandboxed server could not be spawned: {0}")]
    Spawn(std::io::Error),
    #[error(
        "sandbox report from the launcher is unreadable ({0}); the launcher and the gateway must come from the same build"
    )]
    Report(String),
    #[error("sandbox launcher failed while applying {control:?}: {detail}")]
    Setup { control: Control, detail: String },
    #[error(
        "sandbox refused the server: required control {control:?} is not enforced ({detail}); fix it or drop {control:?} from `require`"
    )]
    Refused { control: Control, detail: String },
}

impl SandboxError {
    /// The control this error is about, when it is about one.
    pub fn control(&self) -> Option<Control> {
        match self {
            SandboxError::Setup { control, .. } | SandboxError::Refused { control, .. } => {
                Some(*control)
            }
            _ => None,
        }
    }
}
