//! Errors at the binary's edge and the exit status they map to.
//!
//! Exit status: 0 success, 2 when a tool reported `isError`, 1 for every connection, protocol or
//! usage failure. Messages say what failed and what to try.

use std::fmt;
use std::process::ExitCode;

use manifold_upstream::UpstreamError;

/// A failure of a client command.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub hint: Option<String>,
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(message: impl Into<String>, hint: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            hint: Some(hint.into()),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

impl From<UpstreamError> for CliError {
    fn from(e: UpstreamError) -> Self {
        let hint = match &e {
            UpstreamError::Spawn { .. } => {
                Some("check that the command exists and runs on its own")
            }
            UpstreamError::Connect { .. } => {
                Some("check that the server is running and the URL is right")
            }
            UpstreamError::Timeout { .. } => {
                Some("raise --timeout, or check the server's logs (-v shows its stderr)")
            }
            UpstreamError::Http {
                status: 401 | 403, ..
            } => Some("pass credentials with --header 'Authorization: Bearer ...'"),
            UpstreamError::Closed { .. } => Some("run with -v to see the server's stderr"),
            _ => None,
        };
        CliError {
            message: e.to_string(),
            hint: hint.map(str::to_owned),
        }
    }
}

/// How a command ended.
#[derive(Debug)]
pub enum Outcome {
    Success,
    ToolError,
}

impl Outcome {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Outcome::Success => ExitCode::SUCCESS,
            Outcome::ToolError => ExitCode::from(2),
        }
    }
}
