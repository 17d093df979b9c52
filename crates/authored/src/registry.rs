//! The authored tools in force, kept in step with the store: every change appends a version
//! there first and then refreshes this snapshot, and a poll picks up what another process or
//! replica wrote. Listing reads the snapshot only, so `tools/list` never waits for the store.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use manifold_gateway::hosted::HostedEntry;
use manifold_store::{AuthoredToolVersion, ChangeWatch, Store, StoreError};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::definition::{Invalid, ToolDefinition};

/// How often the store is read for changes made elsewhere (another replica, a restart).
pub const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// Versions `manifold_tool_history` shows by default, and at most.
pub const HISTORY_DEFAULT: usize = 20;
pub const HISTORY_MAX: usize = 100;
/// Who authored a change when authentication is off.
pub const LOCAL_AUTHOR: &str = "local";

/// One tool in force (deleted ones are not in the snapshot).
#[derive(Debug, Clone)]
pub struct Current {
    pub version: AuthoredToolVersion,
    pub definition: ToolDefinition,
}

#[derive(Debug, Default)]
struct Snapshot {
    /// Newest change first.
    tools: Vec<Current>,
    listed: Arc<Vec<HostedEntry>>,
    /// (name, version) of every tool's newest row: what a refresh compares.
    fingerprint: Vec<(String, i64)>,
}

/// Why an authoring request was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{0}")]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    Refused(String),
    #[error("the store refused the change: {0}")]
    Store(#[from] StoreError),
}

fn refused(reason: impl Into<String>) -> RegistryError {
    RegistryError::Refused(reason.into())
}

/// The authored tools: the store's log and the snapshot of what is in force.
#[derive(Debug)]
pub struct Registry {
    store: Arc<Store>,
    snapshot: RwLock<Arc<Snapshot>>,
    changes: watch::Sender<u64>,
    /// One change at a time from this process (the store's key settles races with others).
    writing: tokio::sync::Mutex<()>,
    /// What the store looked like at the last poll: an unchanged SQLite store is not queried.
    polled: ChangeWatch,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn snapshot_of(rows: Vec<AuthoredToolVersion>) -> Snapshot {
    let fingerprint = rows.iter().map(|r| (r.name.clone(), r.version)).collect();
    let tools: Vec<Current> = rows
        .into_iter()
        .filter(|r| !r.deleted)
        .filter_map(|r| {
            match serde_json::from_str::<ToolDefinition>(&r.definition_json) {
                Ok(definition) => Some(Current {
                    version: r,
                    definition,
                }),
                Err(e) => {
                    tracing::warn!(tool = %r.name, version = r.version, error = %e, "an authored tool's stored definition cannot be read; it is left out until a good version is written (manifold_rollback_tool)");
                    None
                }
            }
        })
        .collect();
    let listed = tools
        .iter()
        .filter(|t| t.version.enabled)
        .map(|t| HostedEntry {
            name: t.definition.name.clone(),
            raw: t.definition.listing().to_string(),
        })
        .collect();
    Snapshot {
        tools,
        listed: Arc::new(listed),
        fingerprint,
    }
}

impl Registry {
    /// Reads the tools in force from the store.
    pub async fn open(store: Arc<Store>) -> Result<Arc<Registry>, StoreError> {
        let rows = store.authored_tools().latest().await?;
        let (changes, _) = watch::channel(0);
        Ok(Arc::new(Registry {
            store,
            snapshot: RwLock::new(Arc::new(snapshot_of(rows))),
            changes,
            writing: tokio::sync::Mutex::new(()),
            polled: ChangeWatch::new(),
        }))
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .map(|s| Arc::clone(&s))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// The enabled tools as lists show them, newest change first.
    pub fn listed(&self) -> Arc<Vec<HostedEntry>> {
        Arc::clone(&self.snapshot().listed)
    }

    /// Every tool in force, disabled ones included, newest change first.
    pub fn in_force(&self) -> Vec<Current> {
        self.snapshot().tools.clone()
    }

    /// A tool in force by name (disabled ones included).
    pub fn current(&self, name: &str) -> Option<Current> {
        self.snapshot()
            .tools
            .iter()
            .find(|t| t.definition.name == name)
            .cloned()
    }

    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Tells listeners the listing changed for a reason outside the store (the file's tools).
    pub fn announce_change(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Reads the store again; tells listeners when anything changed.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let rows = self.store.authored_tools().latest().await?;
        let next = snapshot_of(rows);
        let changed = {
            let mut slot = self
                .snapshot
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let changed = slot.fingerprint != next.fingerprint;
            if changed {
                *slot = Arc::new(next);
            }
            changed
        };
        if changed {
            self.changes.send_modify(|n| *n += 1);
        }
        Ok(())
    }

    /// Polls the store every [`REFRESH_EVERY`] until `registry` is gone.
    pub async fn keep_fresh(registry: std::sync::Weak<Registry>) {
        let mut failing = false;
        loop {
            tokio::time::sleep(REFRESH_EVERY).await;
            let Some(registry) = registry.upgrade() else {
                return;
            };
            if !registry.polled.should_read(&registry.store) {
                continue;
            }
            let refreshed = registry.refresh().await;
            if refreshed.is_err() {
                registry.polled.forget();
            }
            match refreshed {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("authored tools are read from the store again");
                }
                Ok(()) => {}
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "authored tools could not be read from the store; the ones in force stay until it answers");
                }
                Err(_) => {}
            }
        }
    }

    async fn next_version(&self, name: &str) -> Result<i64, StoreError> {
        let newest = self.store.authored_tools().history(name, 1).await?;
        Ok(newest.first().map_or(1, |v| v.version + 1))
    }

    async fn append(
        &self,
        name: &str,
        action: &str,
        definition: &ToolDefinition,
        author: &str,
        enabled: bool,
        deleted: bool,
    ) -> Result<i64, RegistryError> {
        let version = self.next_version(name).await?;
        let definition_json = serde_json::to_string(definition)
            .map_err(|e| refused(format!("the definition cannot be written: {e}")))?;
        let record = AuthoredToolVersion {
            name: name.to_owned(),
            version,
            action: action.to_owned(),
            definition_json,
            author: author.to_owned(),
            created_at_ms: now_ms(),
            enabled,
            deleted,
        };
        match self.store.authored_tools().append(&record).await {
            Ok(()) => {}
            Err(StoreError::AlreadyExists { .. }) => {
                return Err(refused(format!(
                    "{name} was changed elsewhere at the same moment (version {version} exists); read it again with manifold_tool_history and retry"
                )));
            }
            Err(e) => return Err(e.into()),
        }
        self.refresh().await?;
        Ok(version)
    }

    /// `manifold_create_tool`.
    pub async fn create(
        &self,
        arguments: &Value,
        author: &str,
        taken: &(dyn Fn(&str) -> bool + Send + Sync),
    ) -> Result<(ToolDefinition, i64), RegistryError> {
        let definition = ToolDefinition::from_arguments(arguments, None)?;
        let name = definition.name.clone();
        if taken(&name) {
            return Err(refused(format!(
                "the name {name} is taken by a built-in tool or a server's tool; choose another name"
            )));
        }
        let _one = self.writing.lock().await;
        self.refresh().await?;
        if self.current(&name).is_some() {
            return Err(refused(format!(
                "an authored tool named {name} exists; change it with manifold_update_tool, or delete it first"
            )));
        }
        let version = self
            .append(&name, "create", &definition, author, true, false)
            .await?;
        Ok((definition, version))
    }

    fn existing(&self, name: &str) -> Result<Current, RegistryError> {
        self.current(name).ok_or_else(|| {
            refused(format!(
                "there is no authored tool named {name}; list them with tools/list, or create it with manifold_create_tool"
            ))
        })
    }

    /// `manifold_update_tool`: the fields given replace the old ones.
    pub async fn update(
        &self,
        arguments: &Value,
        author: &str,
    ) -> Result<(ToolDefinition, i64), RegistryError> {
        let name = arguments
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| refused("name: is required: the tool to change"))?
            .to_owned();
        let _one = self.writing.lock().await;
        self.refresh().await?;
        let base = self.existing(&name)?;
        let definition = ToolDefinition::from_arguments(arguments, Some(&base.definition))?;
        if definition == base.definition {
            return Err(refused(format!(
                "nothing changed: {name} version {} already is this definition",
                base.version.version
            )));
        }
        let version = self
            .append(
                &name,
                "update",
                &definition,
                author,
                base.version.enabled,
                false,
            )
            .await?;
        Ok((definition, version))
    }

    /// `manifold_enable_tool` / `manifold_disable_tool`.
    pub async fn set_enabled(
        &self,
        name: &str,
        enabled: bool,
        author: &str,
    ) -> Result<i64, RegistryError> {
        let _one = self.writing.lock().await;
        self.refresh().await?;
        let base = self.existing(name)?;
        if base.version.enabled == enabled {
            return Err(refused(format!(
                "{name} is already {}",
                if enabled { "enabled" } else { "disabled" }
            )));
        }
        let action = if enabled { "enable" } else { "disable" };
        self.append(name, action, &base.definition, author, enabled, false)
            .await
    }

    /// `manifold_delete_tool`: the tool goes; its history stays (and a rollback brings it back).
    pub async fn delete(&self, name: &str, author: &str) -> Result<i64, RegistryError> {
        let _one = self.writing.lock().await;
        self.refresh().await?;
        let base = self.existing(name)?;
        self.append(name, "delete", &base.definition, author, false, true)
            .await
    }

    /// `manifold_rollback_tool`: version `to`'s definition becomes a new version, enabled.
    pub async fn rollback(
        &self,
        name: &str,
        to: i64,
        author: &str,
        taken: &(dyn Fn(&str) -> bool + Send + Sync),
    ) -> Result<(ToolDefinition, i64), RegistryError> {
        let _one = self.writing.lock().await;
        self.refresh().await?;
        let history = self
            .store
            .authored_tools()
            .history(name, manifold_store::MAX_AUTHORED_HISTORY)
            .await?;
        let Some(row) = history.iter().find(|v| v.version == to) else {
            return Err(refused(format!(
                "{name} has no version {to}; manifold_tool_history lists its versions"
            )));
        };
        if self.current(name).is_none() && taken(name) {
            return Err(refused(format!(
                "the name {name} is now taken by a server's tool; it cannot come back under it"
            )));
        }
        let definition: ToolDefinition = serde_json::from_str(&row.definition_json)
            .map_err(|e| refused(format!("version {to} cannot be read: {e}")))?;
        let version = self
            .append(name, "rollback", &definition, author, true, false)
            .await?;
        Ok((definition, version))
    }

    /// `manifold_tool_history`: versions newest first, each with a diff from the one before.
    pub async fn history(&self, name: &str, limit: usize) -> Result<Value, RegistryError> {
        let limit = limit.clamp(1, HISTORY_MAX);
        // One more than shown, so the oldest shown has something to diff against.
        let rows = self.store.authored_tools().history(name, limit + 1).await?;
        if rows.is_empty() {
            return Err(refused(format!(
                "there is no authored tool named {name}, and never was"
            )));
        }
        let shown = |row: &AuthoredToolVersion| -> String {
            serde_json::from_str::<ToolDefinition>(&row.definition_json)
                .map(|d| serde_json::to_string_pretty(&d.shown()).unwrap_or_default())
                .unwrap_or_else(|_| row.definition_json.clone())
        };
        let versions: Vec<Value> = rows
            .iter()
            .take(limit)
            .enumerate()
            .map(|(i, row)| {
                let before = rows.get(i + 1).map(shown).unwrap_or_default();
                let after = shown(row);
                let diff = similar::TextDiff::from_lines(&before, &after)
                    .unified_diff()
                    .context_radius(2)
                    .header(
                        &rows
                            .get(i + 1)
                            .map_or("(nothing)".to_owned(), |r| format!("v{}", r.version)),
                        &format!("v{}", row.version),
                    )
                    .to_string();
                json!({
                    "version": row.version,
                    "action": row.action,
                    "author": row.author,
                    "at": manifold_store::timestamps::utc_rfc3339(
                        u64::try_from(row.created_at_ms / 1000).unwrap_or(0)
                    ),
                    "enabled": row.enabled,
                    "deleted": row.deleted,
                    "diff": diff,
                })
            })
            .collect();
        Ok(json!({ "name": name, "versions": versions }))
    }
}
