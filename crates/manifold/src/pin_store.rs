//! Pinned tool definitions in Manifold's store: the binary backs manifold-gateway's
//! `PinRepository` with manifold-store's `tool_pins`, so the gateway crate needs no database
//! driver. Gateways and `manifold pins approve` (another process, beside them) write single rows
//! under conditions, and gateways poll the store's pin revision to take in an approval.
//!
//! `serve`, `stdio`, `check` and `manifold pins` import the `pins.json` earlier versions kept in
//! `data_dir` once (never over a pin the store has), then rename it `pins.json.imported`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use manifold_config::Config;
use manifold_gateway::pins::{
    Change, OldPinFile, Pin, PinError, PinFile, PinFuture, PinRepository, PinWrite,
};
use manifold_store::{
    ChangeWatch, MAX_PIN_BATCH, MAX_PIN_DEFINITION_BYTES, MAX_PIN_NAME_LEN, PinChangeRecord,
    PinRecord, PinWriteRecord, Store, StoreError,
};

use crate::report::CliError;

/// Milliseconds per second, between the gateway's seconds and the store's milliseconds.
const MS_PER_SECOND: i64 = 1000;

/// The store's `tool_pins`, as manifold-gateway sees it.
pub struct StorePins {
    store: Arc<Store>,
    /// The revision last read, and what the store looked like then: the gateway asks for the
    /// revision every second, and an unchanged SQLite store is not queried for it.
    polled: ChangeWatch,
    last_revision: Mutex<Option<u64>>,
}

impl StorePins {
    pub fn new(store: Arc<Store>) -> StorePins {
        StorePins {
            store,
            polled: ChangeWatch::new(),
            last_revision: Mutex::new(None),
        }
    }

    fn last_revision(&self) -> std::sync::MutexGuard<'_, Option<u64>> {
        self.last_revision
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn ms(secs: u64) -> i64 {
    i64::try_from(secs)
        .unwrap_or(i64::MAX / MS_PER_SECOND)
        .saturating_mul(MS_PER_SECOND)
}

fn secs(ms: i64) -> u64 {
    u64::try_from(ms / MS_PER_SECOND).unwrap_or(0)
}

/// A definition the store can keep (larger ones are pinned by digest alone).
fn kept(definition: &Option<String>) -> Option<String> {
    definition
        .as_ref()
        .filter(|d| d.len() <= MAX_PIN_DEFINITION_BYTES)
        .cloned()
}

fn change_record(c: &Change) -> PinChangeRecord {
    PinChangeRecord {
        pinned_sha256: c.pinned.clone(),
        seen_sha256: c.seen.clone(),
        parts: c.parts.clone(),
        fields: c.fields.clone(),
        definition_json: kept(&c.definition),
        seen_at_ms: ms(c.seen_at),
    }
}

fn pin_record(server: &str, tool: &str, pin: &Pin, change: Option<&Change>) -> PinRecord {
    PinRecord {
        server: server.to_owned(),
        tool: tool.to_owned(),
        sha256: pin.sha256.clone(),
        parts: pin.parts.clone(),
        definition_json: kept(&pin.definition),
        pinned_at_ms: ms(pin.pinned_at),
        approved_at_ms: pin.approved_at.map(ms),
        change: change.map(change_record),
    }
}

/// The store's rows as the gateway's [`PinFile`].
pub fn pin_file(rows: Vec<PinRecord>) -> PinFile {
    let mut file = PinFile::default();
    for r in rows {
        if let Some(c) = r.change {
            file.changed.entry(r.server.clone()).or_default().insert(
                r.tool.clone(),
                Change {
                    pinned: c.pinned_sha256,
                    seen: c.seen_sha256,
                    parts: c.parts,
                    fields: c.fields,
                    seen_at: secs(c.seen_at_ms),
                    definition: c.definition_json,
                },
            );
        }
        file.pins.entry(r.server).or_default().insert(
            r.tool,
            Pin {
                sha256: r.sha256,
                parts: r.parts,
                pinned_at: secs(r.pinned_at_ms),
                approved_at: r.approved_at_ms.map(secs),
                definition: r.definition_json,
            },
        );
    }
    file
}

/// The gateway's [`PinFile`] as rows (an import: each pin with its change, if any).
pub fn pin_rows(file: &PinFile) -> Vec<PinRecord> {
    let mut rows = Vec::new();
    for (server, tools) in &file.pins {
        for (tool, pin) in tools {
            let change = file.changed.get(server).and_then(|c| c.get(tool));
            rows.push(pin_record(server, tool, pin, change));
        }
    }
    rows
}

fn names_fit(server: &str, tool: &str) -> bool {
    let fits = |n: &str| !n.is_empty() && n.len() <= MAX_PIN_NAME_LEN;
    fits(server) && fits(tool)
}

/// The write as the store takes it; `None` for a name the store cannot key (it stays pinned in
/// the gateway's memory only, which is said once per write).
fn write_record(w: &PinWrite) -> Option<PinWriteRecord> {
    let (server, tool) = match w {
        PinWrite::Pin { server, tool, .. }
        | PinWrite::RecordChange { server, tool, .. }
        | PinWrite::ClearChange { server, tool, .. } => (server, tool),
    };
    if !names_fit(server, tool) {
        tracing::warn!(
            server = %server.chars().take(64).collect::<String>(),
            "a tool name or server name is longer than {MAX_PIN_NAME_LEN} bytes: its pin is kept in this process only"
        );
        return None;
    }
    Some(match w {
        PinWrite::Pin { server, tool, pin } => {
            PinWriteRecord::Pin(pin_record(server, tool, pin, None))
        }
        PinWrite::RecordChange {
            server,
            tool,
            change,
        } => PinWriteRecord::RecordChange {
            server: server.clone(),
            tool: tool.clone(),
            change: change_record(change),
        },
        PinWrite::ClearChange {
            server,
            tool,
            pinned,
        } => PinWriteRecord::ClearChange {
            server: server.clone(),
            tool: tool.clone(),
            pinned_sha256: pinned.clone(),
        },
    })
}

fn store_failed(e: &StoreError) -> PinError {
    PinError::Repository {
        detail: e.to_string(),
    }
}

fn revision(r: i64) -> u64 {
    u64::try_from(r).unwrap_or(0)
}

impl PinRepository for StorePins {
    fn snapshot(&self) -> PinFuture<'_, (PinFile, u64)> {
        Box::pin(async move {
            let snapshot = self
                .store
                .pins()
                .snapshot()
                .await
                .map_err(|e| store_failed(&e))?;
            Ok((pin_file(snapshot.pins), revision(snapshot.revision)))
        })
    }

    fn revision(&self) -> PinFuture<'_, u64> {
        Box::pin(async move {
            let known = *self.last_revision();
            if let Some(known) = known
                && !self.polled.should_read(&self.store)
            {
                return Ok(known);
            }
            let read = self.store.pins().revision().await.map(revision);
            *self.last_revision() = read.as_ref().ok().copied();
            if read.is_err() {
                self.polled.forget();
            }
            read.map_err(|e| store_failed(&e))
        })
    }

    fn apply<'a>(&'a self, writes: &'a [PinWrite]) -> PinFuture<'a, u64> {
        Box::pin(async move {
            let records: Vec<PinWriteRecord> = writes.iter().filter_map(write_record).collect();
            let mut last = None;
            for chunk in records.chunks(MAX_PIN_BATCH) {
                let r = self
                    .store
                    .pins()
                    .apply(chunk)
                    .await
                    .map_err(|e| store_failed(&e))?;
                last = Some(r);
            }
            match last {
                Some(r) => Ok(revision(r)),
                // Nothing the store could take: an empty write still marks the revision.
                None => self
                    .store
                    .pins()
                    .apply(&[])
                    .await
                    .map(revision)
                    .map_err(|e| store_failed(&e)),
            }
        })
    }

    fn approve<'a>(&'a self, server: &'a str, now: u64) -> PinFuture<'a, Vec<String>> {
        Box::pin(async move {
            self.store
                .pins()
                .approve(server, ms(now))
                .await
                .map_err(|e| store_failed(&e))
        })
    }

    fn describe(&self) -> String {
        format!("the store ({})", self.store.location().shown())
    }
}

/// What importing `pins.json` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinImport {
    pub file: PathBuf,
    /// Pins stored.
    pub imported: usize,
    /// Pins the store had already (kept).
    pub already_present: usize,
    /// The servers the file had pins for.
    pub servers: Vec<String>,
    pub renamed_to: PathBuf,
}

/// Imports `data_dir/pins.json` into the store if it is still there, then renames it. A second
/// run finds no file; a run cut short before the rename stores nothing twice.
pub async fn import_pin_file(
    data_dir: &Path,
    store: &Store,
) -> Result<Option<PinImport>, CliError> {
    let old = OldPinFile::in_dir(data_dir);
    if !old.exists() {
        return Ok(None);
    }
    let failed = |what: String| {
        CliError::with_hint(
            format!(
                "could not import the tool definition pins of {}: {what}",
                old.path().display()
            ),
            "fix the file or move it away (its pins are then taken afresh on first sight), then start again; nothing was renamed",
        )
    };
    let file = old.load().map_err(|e| failed(e.to_string()))?;
    let rows: Vec<PinRecord> = pin_rows(&file)
        .into_iter()
        .filter(|r| names_fit(&r.server, &r.tool))
        .collect();
    let mut imported = 0;
    for chunk in rows.chunks(MAX_PIN_BATCH) {
        imported += store
            .pins()
            .import(chunk)
            .await
            .map_err(|e| failed(e.to_string()))?;
    }
    let renamed_to = old.retire().map_err(|e| failed(e.to_string()))?;
    Ok(Some(PinImport {
        file: old.path().to_path_buf(),
        imported,
        already_present: rows.len() - imported,
        servers: file.pins.keys().cloned().collect(),
        renamed_to,
    }))
}

/// One line saying what an import did.
pub fn describe_import(r: &PinImport) -> String {
    let servers = if r.servers.is_empty() {
        "none".to_owned()
    } else {
        r.servers.join(", ")
    };
    format!(
        "Imported {} pinned tool definition(s) from {} into the store (servers: {servers}); {} already there; the old file is now {}.",
        r.imported,
        r.file.display(),
        r.already_present,
        r.renamed_to.display()
    )
}

/// The pins over `store` for a gateway, with `pins.json` imported first (said on stderr).
pub async fn open(
    config: &Config,
    store: &Arc<Store>,
) -> Result<Arc<manifold_gateway::pins::Pins>, CliError> {
    if let Some(report) = import_pin_file(&config.gateway.data_dir, store).await? {
        eprintln!("{}", describe_import(&report));
    }
    let repository: Arc<dyn PinRepository> = Arc::new(StorePins::new(Arc::clone(store)));
    Ok(Arc::new(
        manifold_gateway::pins::Pins::open(repository, pin_policies(config)).await,
    ))
}

/// Each server's `on_change` policy, by name (at start, and again on every reload).
pub fn pin_policies(
    config: &Config,
) -> std::collections::HashMap<String, manifold_gateway::pins::OnChange> {
    config
        .servers
        .iter()
        .map(|s| (s.name.clone(), s.on_change))
        .collect()
}

#[cfg(test)]
mod tests;
