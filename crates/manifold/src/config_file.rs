//! Which configuration file a command uses, and reading it for a command: the one given, else
//! the one `$MANIFOLD_CONFIG` names, else `./manifold.toml` or the user's
//! `~/.config/manifold/manifold.toml`, whichever exists first, else the built-in defaults. Below
//! every command.

use std::path::{Path, PathBuf};

use manifold_config::Config;

use crate::report::CliError;

/// The configuration used when none is named.
pub const DEFAULT_CONFIG: &str = "manifold.toml";

/// The variable that names the configuration when `--config` is not given.
pub const CONFIG_ENV: &str = "MANIFOLD_CONFIG";

/// The configuration file to use: the one given; else the one `$MANIFOLD_CONFIG` names; else
/// `./manifold.toml`, then the user's ([`user_config`]), the first that exists. A client that
/// launches `manifold stdio` from a directory of its own choosing (often `/`) still finds the
/// user's.
pub fn config_path(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = given {
        return Some(path.to_path_buf());
    }
    if let Some(named) = std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(named));
    }
    [Some(PathBuf::from(DEFAULT_CONFIG)), user_config()]
        .into_iter()
        .flatten()
        .find(|path| path.exists())
}

/// What a command says when [`config_path`] finds nothing: where it looked.
pub fn none_found() -> String {
    let user = user_config().map_or_else(
        || "~/.config/manifold/manifold.toml".to_owned(),
        |p| p.display().to_string(),
    );
    format!(
        "no configuration given (no --config, no ${CONFIG_ENV}) and neither ./{DEFAULT_CONFIG} nor {user} exists"
    )
}

/// `$XDG_CONFIG_HOME/manifold/manifold.toml`, else `$HOME/.config/manifold/manifold.toml`.
pub fn user_config() -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("manifold").join(DEFAULT_CONFIG))
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
