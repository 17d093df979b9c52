//! Which configuration file a command uses, and reading it for a command: the one given, else
//! `./manifold.toml` when it exists, else the built-in defaults. Below every command.

use std::path::{Path, PathBuf};

use manifold_config::Config;

use crate::report::CliError;

/// The configuration used when none is named.
pub const DEFAULT_CONFIG: &str = "manifold.toml";

/// The configuration file to use: the one given, else `./manifold.toml` if it exists.
pub fn config_path(given: Option<&Path>) -> Option<PathBuf> {
    match given {
        Some(p) => Some(p.to_path_buf()),
        None => {
            let default = PathBuf::from(DEFAULT_CONFIG);
            default.exists().then_some(default)
        }
    }
}

/// The configuration a command works from: the file given or found, else the built-in
/// defaults.
pub(crate) fn load_config(given: Option<&Path>) -> Result<Config, CliError> {
    match config_path(given) {
        Some(path) => Config::load(&path).map_err(|errors| {
            CliError::usage(format!("{} is not valid:\n{errors}", path.display()))
        }),
        None => Config::from_str("", "built-in defaults").map_err(|errors| {
            CliError::usage(format!(
                "the built-in defaults could not be loaded:\n{errors}"
            ))
        }),
    }
}
