//! Every way opening or using the store fails, each saying what happened, to which file or URL
//! (password redacted), and what to do.

use std::path::PathBuf;

/// A store failure. `location` fields are already redacted ([`crate::StoreLocation::shown`]).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "another Manifold process (pid {pid}) holds the store {path}; several replicas of one gateway need PostgreSQL: set [store] url = \"postgres://...\"; a separate gateway beside it needs a [gateway] data_dir of its own"
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

    #[error(
        "the store {location} is out of disk space ({reason}); free space on the disk that holds it (or raise its quota), then retry: rows acknowledged before are kept"
    )]
    Full { location: String, reason: String },

    #[error("{what}: {count} is more than the {max} allowed; {fix}")]
    OverLimit {
        what: &'static str,
        count: u64,
        max: u64,
        fix: &'static str,
    },

    #[error(
        "the audit record of call {call_id:?} is {bytes} bytes, more than the {max} a record may hold (MAX_AUDIT_RECORD_BYTES); nothing in its batch was written: shorten what is recorded for the call (e.g. digest its arguments) and append the batch again"
    )]
    AuditRecordTooLarge {
        call_id: String,
        bytes: usize,
        max: usize,
    },

    #[error(
        "the audit record of call {call_id:?} was refused: {reason}; nothing in its batch was written: record_json must be a JSON object whose at_ms, call_id, principal, server, target and outcome equal the entry's columns (AuditEntry::from_record_json builds one that does)"
    )]
    AuditRecordInvalid { call_id: String, reason: String },

    #[error(
        "the stored OAuth tokens of server {server:?} cannot be decrypted with the key from {key_source}; run `manifold login {server}` again or restore the key"
    )]
    Undecryptable { server: String, key_source: String },

    #[error(
        "the OAuth token key {key_source} cannot be used ({reason}); restore it from a backup, or move it away so that a new one is made (stored OAuth tokens then need `manifold login` again)"
    )]
    TokenKey { key_source: String, reason: String },

    #[error(
        "the OAuth tokens of server {server:?} could not be sealed ({reason}); nothing was stored: retry, and report it if it persists"
    )]
    Seal { server: String, reason: String },
}
