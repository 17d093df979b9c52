//! Why: a gateway polls the store every second for what other writers changed (pins approved
//! from the command line, authored tools added). On SQLite each poll was a query even when
//! nothing had been written for hours, and those queries kept the SQL code of an idle gateway
//! resident and its threads waking. Any write to a SQLite store changes its files (the WAL
//! grows, or is rewritten from its start after a checkpoint, and the modification time moves),
//! so a poll compares the files' sizes and times, two `stat` calls, and queries only when they
//! moved. PostgreSQL has no such files: its readers always query.
//!
//! What this relies on: a write changes a file's size or its modification time. On Linux 6.13
//! and later (ext4, xfs, btrfs, tmpfs) a write after a `stat` always gets a newer time; on older
//! kernels times move in clock ticks (a few ms), so a write whose time and sizes equal the last
//! stamp (the WAL rewritten in place within the same tick as the write before it, right after
//! the poll looked) is seen at the next write instead.

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use crate::{Store, StoreLocation};

/// What one file looked like: its size and modification time, `None` when it does not exist.
type FileStamp = Option<(u64, Option<SystemTime>)>;

/// A SQLite store's database file and WAL as they were at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeStamp {
    database: FileStamp,
    wal: FileStamp,
}

impl ChangeStamp {
    fn of(database: &Path) -> ChangeStamp {
        let stamp = |path: &Path| -> FileStamp {
            std::fs::metadata(path)
                .ok()
                .map(|m| (m.len(), m.modified().ok()))
        };
        let mut wal = database.as_os_str().to_owned();
        wal.push("-wal");
        ChangeStamp {
            database: stamp(database),
            wal: stamp(Path::new(&wal)),
        }
    }
}

impl Store {
    /// A stamp that changes whenever anyone writes the store, read without a query: SQLite
    /// only; `None` for PostgreSQL, whose readers must ask.
    pub fn change_stamp(&self) -> Option<ChangeStamp> {
        match &self.location {
            StoreLocation::Sqlite { .. } => {
                self.location.sqlite_file().map(|f| ChangeStamp::of(&f))
            }
            StoreLocation::Postgres { .. } => None,
        }
    }
}

/// One poller's memory of the store as it last read it.
#[derive(Debug, Default)]
pub struct ChangeWatch {
    seen: Mutex<Option<ChangeStamp>>,
}

impl ChangeWatch {
    pub fn new() -> ChangeWatch {
        ChangeWatch::default()
    }

    /// Whether the poller should read the store now: true the first time, always on
    /// PostgreSQL, and on SQLite whenever its files moved since the last time this said true.
    /// The stamp is taken before the caller reads, so a write during the read shows as a change
    /// at the next poll.
    pub fn should_read(&self, store: &Store) -> bool {
        let Some(now) = store.change_stamp() else {
            return true;
        };
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.as_ref() == Some(&now) {
            return false;
        }
        *seen = Some(now);
        true
    }

    /// Forgets the last stamp, so the next poll reads (after a read that failed).
    pub fn forget(&self) {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}
