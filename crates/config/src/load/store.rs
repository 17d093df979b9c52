//! Reads the `[store]` section: where Manifold keeps durable state. Absent or without `url`:
//! SQLite in `[gateway] data_dir`; `url = "postgres://..."`: PostgreSQL, which several replicas need.
//!
//! The URL may carry a password, so it is read as a hidden value (never echoed in a problem) and
//! the settings' `Debug` redacts it.

use std::fmt;

use toml::de::DeTable;

use super::reader::{Item, Reader, Show, key_path};

pub(crate) const STORE_KEYS: &[&str] = &["url"];

const STORE_HINTS: &[(&str, &str)] = &[
    (
        "path",
        "the SQLite store is always store.sqlite in [gateway] data_dir; set data_dir there",
    ),
    (
        "database_url",
        "write url = \"postgres://USER:PASSWORD@HOST:PORT/DATABASE\"",
    ),
    (
        "backend",
        "leave url out for SQLite, or write url = \"postgres://...\" for PostgreSQL",
    ),
];

/// The `[store]` section, resolved.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct StoreSettings {
    /// A `postgres://` or `postgresql://` URL; `None`: SQLite in `data_dir`.
    pub url: Option<String>,
}

impl fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.url.as_deref().map(|u| match url::Url::parse(u) {
            Ok(mut parsed) if parsed.password().is_some() => {
                let _ = parsed.set_password(Some("***"));
                parsed.to_string()
            }
            Ok(parsed) => parsed.to_string(),
            Err(_) => "<not a URL>".to_owned(),
        });
        f.debug_struct("StoreSettings")
            .field("url", &shown)
            .finish()
    }
}

/// Reads `[store]` (absent: SQLite in `data_dir`).
pub(crate) fn read_store(reader: &mut Reader<'_>, section: Option<&Item<'_>>) -> StoreSettings {
    let mut settings = StoreSettings::default();
    let empty = DeTable::new();
    let table = match section {
        Some(item) => reader
            .table("store", item, "write a [store] section")
            .unwrap_or(&empty),
        None => &empty,
    };
    reader.check_keys("store", table, STORE_KEYS, STORE_HINTS);
    if let Some(item) = table.get("url") {
        let f = key_path("store", "url");
        let example = "write url = \"postgres://USER:${MANIFOLD_DB_PASSWORD}@HOST:5432/manifold\", or leave url out for SQLite in [gateway] data_dir";
        if let Some(text) = reader.string(&f, item, Show::Hidden, example) {
            let value = text.value.trim();
            match url::Url::parse(value) {
                Ok(u) if matches!(u.scheme(), "postgres" | "postgresql") && u.has_host() => {
                    settings.url = Some(value.to_owned());
                }
                Ok(u) if u.scheme() == "sqlite" || u.scheme() == "file" => reader.report_text(
                    &f,
                    &text,
                    "names SQLite, which needs no url",
                    "leave url out: the SQLite store is store.sqlite in [gateway] data_dir",
                ),
                _ => reader.report_text(&f, &text, "is not a postgres:// URL with a host", example),
            }
        }
    }
    settings
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Config, FixedEnvironment};

    fn load(text: &str) -> Result<Config, crate::ConfigErrors> {
        let env = FixedEnvironment::new()
            .with_var("HOME", "/home/t")
            .with_var("DB_PW", "s3cret-db-pw");
        Config::from_str_with(text, "m.toml", None, &env)
    }

    #[test]
    fn absent_means_sqlite_in_data_dir() {
        assert_eq!(load("").unwrap().store, StoreSettings::default());
    }

    #[test]
    fn a_postgres_url_is_read_and_its_password_never_shown() {
        let c = load("[store]\nurl = \"postgres://mf:${DB_PW}@db:5432/manifold\"\n").unwrap();
        assert_eq!(
            c.store.url.as_deref(),
            Some("postgres://mf:s3cret-db-pw@db:5432/manifold")
        );
        let debug = format!("{:?}", c.store);
        assert!(
            !debug.contains("s3cret-db-pw") && debug.contains("db:5432"),
            "{debug}"
        );
    }

    #[test]
    fn bad_urls_are_reported_without_their_value() {
        let errors = load("[store]\nurl = \"mysql://u:${DB_PW}@h/db\"\n")
            .unwrap_err()
            .to_string();
        assert!(errors.contains("m.toml:2:7"), "{errors}");
        assert!(errors.contains("store.url"), "{errors}");
        assert!(errors.contains("is not a postgres:// URL"), "{errors}");
        assert!(!errors.contains("s3cret-db-pw"), "{errors}");
        let sqlite = load("[store]\nurl = \"sqlite:///var/lib/m.db\"\n")
            .unwrap_err()
            .to_string();
        assert!(sqlite.contains("leave url out"), "{sqlite}");
    }

    #[test]
    fn unknown_keys_get_a_hint() {
        let errors = load("[store]\ndatabase_url = \"postgres://h/db\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            errors.contains("store.database_url") && errors.contains("write url ="),
            "{errors}"
        );
    }
}
