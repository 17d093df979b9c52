//! One process per SQLite store: SQLite allows one writer, and two gateways on one file would
//! quietly serialize or fail mid-call. An exclusive lock on a sibling file, held for the store's
//! life, refuses the second process up front and names the first one's pid.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::location::SQLITE_LOCK_FILE_NAME;

/// Longest pid text read back from a lock file (a pid is at most 7 digits on Linux).
pub const MAX_PID_TEXT: u64 = 32;

/// Held while the store is open; the kernel releases it when the process ends, however it ends.
#[derive(Debug)]
pub(crate) struct ProcessLock {
    _file: File,
}

impl ProcessLock {
    /// Takes the lock in `data_dir`, or says which process holds it.
    pub(crate) fn acquire(data_dir: &Path, store_file: &Path) -> Result<ProcessLock, StoreError> {
        let path = data_dir.join(SQLITE_LOCK_FILE_NAME);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| unwritable(data_dir, &e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::HeldByAnotherProcess {
                    path: store_file.to_path_buf(),
                    pid: holder_pid(&mut file),
                });
            }
            Err(TryLockError::Error(e)) => return Err(unwritable(data_dir, &e)),
        }
        let record = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .and_then(|()| file.sync_data());
        record.map_err(|e| unwritable(data_dir, &e))?;
        Ok(ProcessLock { _file: file })
    }
}

fn holder_pid(file: &mut File) -> String {
    let mut text = String::new();
    let read = file.take(MAX_PID_TEXT).read_to_string(&mut text);
    match read {
        Ok(_) if !text.trim().is_empty() => text.trim().to_owned(),
        _ => "unknown".to_owned(),
    }
}

/// The error for a data directory Manifold cannot write.
pub(crate) fn unwritable(dir: &Path, e: &std::io::Error) -> StoreError {
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => StoreError::DataDir {
            dir: PathBuf::from(dir),
            reason: e.to_string(),
        },
        _ => StoreError::ReadOnly {
            dir: PathBuf::from(dir),
            reason: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_second_lock_in_one_process_is_refused_with_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("store.sqlite");
        let _held = ProcessLock::acquire(dir.path(), &file).unwrap();
        let err = ProcessLock::acquire(dir.path(), &file).unwrap_err();
        assert!(
            matches!(&err, StoreError::HeldByAnotherProcess { pid, .. } if *pid == std::process::id().to_string()),
            "{err}"
        );
    }

    #[test]
    fn pid_text_bound_fits_any_linux_pid() {
        assert!(MAX_PID_TEXT >= u64::from(u32::MAX).to_string().len() as u64);
    }
}
