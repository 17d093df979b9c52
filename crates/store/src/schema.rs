//! The store's schema: embedded, checksummed migrations per backend (sqlx runs each in a
//! transaction, under a database lock on PostgreSQL), and the refusal of a database a newer
//! Manifold wrote, before anything is changed.

use sqlx::migrate::{MigrateError, Migrator};

use crate::error::StoreError;

/// The SQLite schema steps, compiled in.
pub static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
/// The PostgreSQL schema steps, compiled in.
pub static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");
/// Where sqlx records applied steps.
pub const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// The newest schema version this build knows for `migrator`.
pub fn latest_version(migrator: &Migrator) -> i64 {
    migrator.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Turns a migration failure into what the operator should do; `newest_applied` is the highest
/// version the database records (read after the failure, for the message).
pub(crate) fn migrate_error(
    e: MigrateError,
    location: &str,
    known: i64,
    newest_applied: Option<i64>,
) -> StoreError {
    match e {
        MigrateError::VersionMissing(version) => StoreError::NewerSchema {
            location: location.to_owned(),
            found: newest_applied.unwrap_or(version).max(version),
            known,
        },
        MigrateError::VersionMismatch(version) => StoreError::ChangedMigration {
            location: location.to_owned(),
            version,
        },
        other => StoreError::Migrate {
            location: location.to_owned(),
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_know_the_same_versions() {
        let versions = |m: &Migrator| m.iter().map(|s| s.version).collect::<Vec<_>>();
        assert_eq!(versions(&SQLITE_MIGRATIONS), versions(&POSTGRES_MIGRATIONS));
        assert_eq!(latest_version(&SQLITE_MIGRATIONS), 13);
    }
}
