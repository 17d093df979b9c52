//! Why: end-to-end tests write configuration files, keys and logs, and each test file used to carry
//! its own copy of "make a fresh directory under the temp dir". One definition here.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::TestkitError;

/// A fresh, empty directory `<temp>/manifold-<label>-<pid>` (what an earlier process with the
/// same pid left there is removed first). It is kept after the test, so its logs can be read.
pub fn fresh_dir(label: &str) -> Result<PathBuf, TestkitError> {
    let dir = std::env::temp_dir().join(format!("manifold-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|source| TestkitError::Scratch {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

/// A fresh directory removed (with all it holds) when dropped, named by its canonical path:
/// servers resolve paths (the filesystem server's roots, `/proc/PID/cwd`), so tests compare
/// against the resolved form.
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// `<temp>/manifold-<label>-<pid>-<nanos>`: unique even when a test makes several.
    pub fn new(label: &str) -> Result<ScratchDir, TestkitError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let path =
            std::env::temp_dir().join(format!("manifold-{label}-{}-{nanos}", std::process::id()));
        let io = |source| TestkitError::Scratch {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&path).map_err(io)?;
        let path = path.canonicalize().map_err(io)?;
        Ok(ScratchDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_fresh_dir_starts_empty_and_a_scratch_dir_goes_with_its_owner() {
        let dir = fresh_dir("testkit-fresh").unwrap();
        std::fs::write(dir.join("left.txt"), "x").unwrap();
        let again = fresh_dir("testkit-fresh").unwrap();
        assert_eq!(again, dir);
        assert_eq!(std::fs::read_dir(&again).unwrap().count(), 0);
        std::fs::remove_dir_all(&again).unwrap();

        let scratch = ScratchDir::new("testkit-scratch").unwrap();
        let path = scratch.path().to_path_buf();
        assert_eq!(path, path.canonicalize().unwrap());
        std::fs::write(path.join("f"), "x").unwrap();
        drop(scratch);
        assert!(!path.exists());
    }
}
