//! Where the store lives, as configured, and how it is named in messages: a PostgreSQL URL is always
//! shown with its password replaced, so no error, log line or `Debug` output can leak it.

use std::fmt;
use std::path::{Path, PathBuf};

/// The SQLite file's name inside `data_dir`.
pub const SQLITE_FILE_NAME: &str = "store.sqlite";
/// The sibling file whose exclusive lock marks the one process that may use the SQLite file.
pub const SQLITE_LOCK_FILE_NAME: &str = "store.sqlite.lock";
/// What replaces a URL's password wherever it is shown.
pub const REDACTED_PASSWORD: &str = "***";

/// Which database backs the store.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// `store.sqlite` in this directory (the default: nothing to install or run).
    Sqlite { data_dir: PathBuf },
    /// A PostgreSQL server (needed for several replicas).
    Postgres { url: String },
}

impl StoreLocation {
    /// SQLite in `data_dir`.
    pub fn sqlite(data_dir: impl Into<PathBuf>) -> StoreLocation {
        StoreLocation::Sqlite {
            data_dir: data_dir.into(),
        }
    }

    /// PostgreSQL at `url` (`postgres://` or `postgresql://`).
    pub fn postgres(url: impl Into<String>) -> StoreLocation {
        StoreLocation::Postgres { url: url.into() }
    }

    /// The SQLite file, for the SQLite backend.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        match self {
            StoreLocation::Sqlite { data_dir } => Some(data_dir.join(SQLITE_FILE_NAME)),
            StoreLocation::Postgres { .. } => None,
        }
    }

    /// The file or URL as messages show it (a URL's password redacted).
    pub fn shown(&self) -> String {
        match self {
            StoreLocation::Sqlite { data_dir } => {
                data_dir.join(SQLITE_FILE_NAME).display().to_string()
            }
            StoreLocation::Postgres { url } => redact_url(url),
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite { data_dir } => f
                .debug_struct("Sqlite")
                .field("data_dir", &data_dir)
                .finish(),
            StoreLocation::Postgres { url } => f
                .debug_struct("Postgres")
                .field("url", &redact_url(url))
                .finish(),
        }
    }
}

/// `url` with its password (and any `password=` query parameter) replaced by
/// [`REDACTED_PASSWORD`]; text that is not a URL is shown as `<not a URL>` since it might be a secret.
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "<not a URL>".to_owned();
    };
    if parsed.password().is_some() {
        // Only fails for URLs that cannot carry a password, and this one does.
        let _ = parsed.set_password(Some(REDACTED_PASSWORD));
    }
    if parsed
        .query_pairs()
        .any(|(k, _)| k.eq_ignore_ascii_case("password"))
    {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                if k.eq_ignore_ascii_case("password") {
                    (k.into_owned(), REDACTED_PASSWORD.to_owned())
                } else {
                    (k.into_owned(), v.into_owned())
                }
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// The directory a SQLite store's file lives in.
pub(crate) fn data_dir_of(file: &Path) -> &Path {
    file.parent().unwrap_or(Path::new("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        let location = StoreLocation::postgres(
            "postgres://mf:hunter2@db:5432/manifold?password=hunter2&sslmode=disable",
        );
        for shown in [location.to_string(), format!("{location:?}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("db:5432"), "{shown}");
            assert!(shown.contains("sslmode=disable"), "{shown}");
        }
        assert_eq!(redact_url("hunter2 is not a url"), "<not a URL>");
    }

    #[test]
    fn sqlite_is_named_by_its_file() {
        let location = StoreLocation::sqlite("/var/lib/manifold");
        assert_eq!(location.to_string(), "/var/lib/manifold/store.sqlite");
    }
}
