//! The only place this crate touches the outside world: environment variables and files (the
//! configuration itself and `${file:PATH}` references). Loading takes an [`Environment`] so that
//! everything else stays pure and tests can supply variables and files without mutating the
//! process environment.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// Largest file a `${file:PATH}` reference may name (keys and tokens are small).
pub const MAX_INTERPOLATED_FILE_BYTES: u64 = 64 * 1024;

/// What a variable lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    Set(String),
    Unset,
    /// Set, but not valid UTF-8.
    NotUnicode,
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileProblem {
    /// The operating system's reason (not found, permission denied, ...).
    Io(String),
    /// Longer than the limit given.
    TooLarge { limit: u64 },
}

/// Where variables and files come from.
pub trait Environment {
    fn var(&self, name: &str) -> Var;
    /// Reads at most `limit` bytes; a longer file is [`FileProblem::TooLarge`].
    fn read_file(&self, path: &Path, limit: u64) -> Result<Vec<u8>, FileProblem>;
}

/// The real process environment and file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn var(&self, name: &str) -> Var {
        match std::env::var(name) {
            Ok(v) => Var::Set(v),
            Err(std::env::VarError::NotPresent) => Var::Unset,
            Err(std::env::VarError::NotUnicode(_)) => Var::NotUnicode,
        }
    }

    fn read_file(&self, path: &Path, limit: u64) -> Result<Vec<u8>, FileProblem> {
        let file = std::fs::File::open(path).map_err(|e| FileProblem::Io(e.to_string()))?;
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| FileProblem::Io(e.to_string()))?;
        if bytes.len() as u64 > limit {
            return Err(FileProblem::TooLarge { limit });
        }
        Ok(bytes)
    }
}

/// A fixed set of variables and files, for tests (here and in the crates that load configs).
#[derive(Debug, Clone, Default)]
pub struct FixedEnvironment {
    pub vars: BTreeMap<String, String>,
    pub files: BTreeMap<PathBuf, Vec<u8>>,
}

impl FixedEnvironment {
    pub fn new() -> FixedEnvironment {
        FixedEnvironment::default()
    }

    pub fn with_var(mut self, name: &str, value: &str) -> FixedEnvironment {
        self.vars.insert(name.to_owned(), value.to_owned());
        self
    }

    pub fn with_file(mut self, path: impl Into<PathBuf>, contents: &[u8]) -> FixedEnvironment {
        self.files.insert(path.into(), contents.to_vec());
        self
    }
}

impl Environment for FixedEnvironment {
    fn var(&self, name: &str) -> Var {
        match self.vars.get(name) {
            Some(v) => Var::Set(v.clone()),
            None => Var::Unset,
        }
    }

    fn read_file(&self, path: &Path, limit: u64) -> Result<Vec<u8>, FileProblem> {
        match self.files.get(path) {
            Some(bytes) if bytes.len() as u64 > limit => Err(FileProblem::TooLarge { limit }),
            Some(bytes) => Ok(bytes.clone()),
            None => Err(FileProblem::Io(
                "No such file or directory (os error 2)".to_owned(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_reads_are_bounded() {
        let dir = std::env::temp_dir().join(format!("manifold-config-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(
            ProcessEnvironment.read_file(&path, 5).unwrap(),
            b"12345".to_vec()
        );
        assert_eq!(
            ProcessEnvironment.read_file(&path, 4),
            Err(FileProblem::TooLarge { limit: 4 })
        );
        assert!(matches!(
            ProcessEnvironment.read_file(&dir.join("missing"), 4),
            Err(FileProblem::Io(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
