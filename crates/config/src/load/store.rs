//! Reads the `[store]` section: where Manifold keeps durable state. Absent or without `url`:
//! SQLite in `[gateway] data_dir`; `url = "postgres://..."`: PostgreSQL, which several replicas need.
//!
//! The URL may carry a password, so it is read as a hidden value (never echoed in a problem) and
//! the settings' `Debug` redacts it.
//!
//! `token_key` names the key that seals upstream OAuth tokens in the store, by reference
//! (`"env:NAME"` or `"file:/path"`, or a `${...}` that gives the key itself), so several replicas
//! on one PostgreSQL can share it; without it the key is `store.key` in `data_dir`. It is resolved
//! at load time, like `${...}`, so `manifold check` reports a missing or malformed key.

use std::fmt;

use toml::de::DeTable;

use super::gateway::decode_session_key;
use super::reader::{Item, Reader, Show, Text, key_path};
use crate::environment::{FileProblem, MAX_INTERPOLATED_FILE_BYTES, Var};
use crate::interpolate::is_variable_name;
use crate::paths::resolve_path;
use crate::secret::Secret;

pub(crate) const STORE_KEYS: &[&str] = &["url", "token_key"];

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
    /// The key sealing OAuth tokens in the store; `None`: `store.key` in `data_dir`.
    pub token_key: Option<TokenKeySetting>,
}

/// `[store] token_key`, resolved: the key's 32 bytes and where they came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenKeySetting {
    pub key: Secret<[u8; 32]>,
    /// E.g. `the environment variable MANIFOLD_TOKEN_KEY ([store] token_key)`.
    pub source: String,
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
            .field("token_key", &self.token_key.as_ref().map(|k| &k.source))
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
    if let Some(item) = table.get("token_key") {
        settings.token_key = read_token_key(reader, item);
    }
    settings
}

const TOKEN_KEY_FIX: &str = "write token_key = \"env:NAME\" (a variable holding 32 random bytes in hex or base64) or \"file:/path/to/token.key\" (a file made by `openssl rand -hex 32`)";

fn read_token_key(reader: &mut Reader<'_>, item: &Item<'_>) -> Option<TokenKeySetting> {
    let field = key_path("store", "token_key");
    let text = reader.string(&field, item, Show::Hidden, TOKEN_KEY_FIX)?;
    let (key_text, source) = if text.interpolated {
        (text.value.clone(), "[store] token_key".to_owned())
    } else if let Some(name) = text.value.strip_prefix("env:") {
        let name = name.trim();
        if !is_variable_name(name) {
            reader.report_text(
                &field,
                &text,
                "names no environment variable after \"env:\"",
                TOKEN_KEY_FIX,
            );
            return None;
        }
        match reader.env.var(name) {
            Var::Set(v) => (
                v,
                format!("the environment variable {name} ([store] token_key)"),
            ),
            Var::Unset | Var::NotUnicode => {
                reader.report_text(
                    &field,
                    &text,
                    format!("names the environment variable {name}, which is not set (or not UTF-8)"),
                    format!("set {name} to 32 random bytes in hex or base64 (`openssl rand -hex 32`) before starting Manifold"),
                );
                return None;
            }
        }
    } else if let Some(written) = text.value.strip_prefix("file:") {
        let path = match resolve_path(written.trim(), reader.env, reader.base_dir.as_deref()) {
            Ok(p) => p,
            Err((problem, fix)) => {
                reader.report_text(
                    &field,
                    &text,
                    format!("names a file whose path {problem}"),
                    fix,
                );
                return None;
            }
        };
        match reader.env.read_file(&path, MAX_INTERPOLATED_FILE_BYTES) {
            Ok(bytes) => (
                String::from_utf8_lossy(&bytes).into_owned(),
                format!("{} ([store] token_key)", path.display()),
            ),
            Err(e) => {
                let reason = match e {
                    FileProblem::Io(reason) => reason,
                    FileProblem::TooLarge { limit } => {
                        format!("it is larger than {} KiB", limit / 1024)
                    }
                };
                reader.report_text(
                    &field,
                    &text,
                    format!("names {}, which could not be read: {reason}", path.display()),
                    "check the path (a relative path is relative to the configuration file's directory) and its permissions",
                );
                return None;
            }
        }
    } else {
        reader.report_text(
            &field,
            &text,
            "is neither \"env:NAME\" nor \"file:PATH\" (the key itself does not belong in the configuration file)",
            TOKEN_KEY_FIX,
        );
        return None;
    };
    decode_key(reader, &field, &text, &key_text, source)
}

fn decode_key(
    reader: &mut Reader<'_>,
    field: &str,
    text: &Text,
    key_text: &str,
    source: String,
) -> Option<TokenKeySetting> {
    match decode_session_key(key_text) {
        Ok(key) => Some(TokenKeySetting {
            key: Secret::new(key),
            source,
        }),
        Err(problem) => {
            reader.report_text(
                field,
                text,
                format!("gives a key that {problem} (from {source})"),
                TOKEN_KEY_FIX,
            );
            None
        }
    }
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
    fn a_token_key_is_read_by_reference_and_never_shown() {
        let hex = "ab".repeat(32);
        let env = FixedEnvironment::new()
            .with_var("HOME", "/home/t")
            .with_var("TK", &hex)
            .with_file("/etc/m/token.key", format!("{hex}\n").as_bytes());
        let load = |text: &str| Config::from_str_with(text, "m.toml", None, &env);
        let from_env = load("[store]\ntoken_key = \"env:TK\"\n").unwrap();
        let key = from_env.store.token_key.unwrap();
        assert_eq!(key.key.expose(), &[0xab; 32]);
        assert_eq!(
            key.source,
            "the environment variable TK ([store] token_key)"
        );
        let from_file = load("[store]\ntoken_key = \"file:/etc/m/token.key\"\n").unwrap();
        let key = from_file.store.token_key.clone().unwrap();
        assert_eq!(key.key.expose(), &[0xab; 32]);
        assert_eq!(key.source, "/etc/m/token.key ([store] token_key)");
        let debug = format!("{:?}", from_file.store);
        assert!(
            debug.contains("/etc/m/token.key") && !debug.contains(&hex),
            "{debug}"
        );
        let interpolated = load("[store]\ntoken_key = \"${TK}\"\n").unwrap();
        assert_eq!(
            interpolated.store.token_key.unwrap().source,
            "[store] token_key"
        );
        assert_eq!(load("").unwrap().store.token_key, None);
    }

    #[test]
    fn a_bad_token_key_says_what_is_wrong_and_never_echoes_it() {
        let env = FixedEnvironment::new()
            .with_var("HOME", "/home/t")
            .with_var("SHORT", "c2hvcnQ=");
        let load = |text: &str| {
            Config::from_str_with(text, "m.toml", None, &env)
                .unwrap_err()
                .to_string()
        };
        let unset = load("[store]\ntoken_key = \"env:NOPE\"\n");
        assert!(
            unset.contains("store.token_key") && unset.contains("NOPE, which is not set"),
            "{unset}"
        );
        let short = load("[store]\ntoken_key = \"env:SHORT\"\n");
        assert!(short.contains("decodes to 5 bytes, not 32"), "{short}");
        assert!(!short.contains("c2hvcnQ"), "{short}");
        let missing = load("[store]\ntoken_key = \"file:/nowhere/k\"\n");
        assert!(
            missing.contains("/nowhere/k, which could not be read"),
            "{missing}"
        );
        let literal = load(&format!("[store]\ntoken_key = \"{}\"\n", "ab".repeat(32)));
        assert!(
            literal.contains("does not belong in the configuration file"),
            "{literal}"
        );
        assert!(!literal.contains(&"ab".repeat(32)), "{literal}");
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
