//! Every way opening or using the store fails, each saying what happened, to which file or URL
//! (password redacted), and what to do.

use std::path::PathBuf;

/// A store failure. `location` fields are already redacted ([`crate::StoreLocation::shown`]).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "another Manifold process (pid {pid}) holds the store {path}; several replicas need PostgreSQL: set [store] url = \"postgres://...\""
    )]
    HeldByAnotherProcess { path: PathBuf, pid: String },

    #[error(
        "the data directory {dir} is not writable ({reason}); make it writable by the user running Manifold or set [gateway] data_dir to a writable directory"
    )]
    ReadOnly { dir: PathBuf, reason: String },

    #[error(
        "could not create the data directory {dir} ({reason}); create it or set [gateway] data_dir to a directory Manifold may write"
    )]
    DataDir { dir: PathBuf, reason: String },

    #[error(
        "the store {path} is not a SQLite database or is damaged ({reason}); restore it from a backup, or move it away to start with an empty store"
    )]
    Corrupt { path: PathBuf, reason: String },

    #[error(
        "the store at {location} was written by a newer Manifold (schema {found}, this build knows up to {known}): upgrade Manifold or point [store] at another database"
    )]
    NewerSchema {
        location: String,
        found: i64,
        known: i64,
    },

    #[error(
        "the store at {location} has schema step {version} applied with different contents than this build's; it was changed by hand or by a modified build: restore it from a backup or point [store] at another database"
    )]
    ChangedMigration { location: String, version: i64 },

    #[error(
        "could not bring the store at {location} up to date ({reason}); nothing was changed: fix the cause and start again"
    )]
    Migrate { location: String, reason: String },

    #[error(
        "the store at {location} is unreachable or failed ({reason}); check that the database is running and reachable, then retry"
    )]
    Unavailable { location: String, reason: String },

    #[error(
        "the store URL {location} is not a PostgreSQL URL; write [store] url = \"postgres://USER:PASSWORD@HOST:PORT/DATABASE\""
    )]
    NotPostgres { location: String },

    #[error("{what}: {field} {reason}; fix it and retry")]
    Invalid {
        what: &'static str,
        field: &'static str,
        reason: String,
    },

    #[error("{what} {key:?} already exists in the store at {location}; choose another")]
    AlreadyExists {
        location: String,
        what: &'static str,
        key: String,
    },
}
