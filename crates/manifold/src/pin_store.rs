//! Pinned tool definitions in Manifold's store: the binary backs manifold-gateway's
//! `PinRepository` with manifold-store's `tool_pins`, so the gateway crate needs no database
//! driver. Gateways and `manifold pins approve` (another process, beside them) write single rows
//! under conditions, and gateways poll the store's pin revision to take in an approval.
//!
//! `serve`, `stdio`, `check` and `manifold pins` import the `pins.json` earlier versions kept in
//! `data_dir` once (never over a pin the store has), then rename it `pins.json.imported`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use manifold_config::Config;
use manifold_gateway::pins::{
    Change, OldPinFile, Pin, PinError, PinFile, PinFuture, PinRepository, PinWrite,
};
use manifold_store::{
    MAX_PIN_BATCH, MAX_PIN_DEFINITION_BYTES, MAX_PIN_NAME_LEN, PinChangeRecord, PinRecord,
    PinWriteRecord, Store, StoreError,
};

use crate::report::CliError;

/// Milliseconds per second, between the gateway's seconds and the store's milliseconds.
const MS_PER_SECOND: i64 = 1000;

/// The store's `tool_pins`, as manifold-gateway sees it.
pub struct StorePins {
    store: Arc<Store>,
}

impl StorePins {
    pub fn new(store: Arc<Store>) -> StorePins {
        StorePins { store }
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
            self.store
                .pins()
                .revision()
                .await
                .map(revision)
                .map_err(|e| store_failed(&e))
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
        manifold_gateway::pins::Pins::open(repository, crate::gateway_config::pin_policies(config))
            .await,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;
    use manifold_gateway::pins::{MAX_PINNED_DEFINITION_BYTES, PIN_WRITE_BATCH};
    use manifold_store::StoreLocation;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("manifold-pin-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn sample() -> PinFile {
        let mut file = PinFile::default();
        file.pins.entry("s".to_owned()).or_default().insert(
            "echo".to_owned(),
            Pin {
                sha256: "a".repeat(64),
                parts: [("description".to_owned(), "b".repeat(16))].into(),
                pinned_at: 1_700_000_000,
                approved_at: Some(1_700_000_100),
                definition: Some("{\"name\":\"echo\"}".to_owned()),
            },
        );
        file.pins.entry("s".to_owned()).or_default().insert(
            "add".to_owned(),
            Pin {
                sha256: "c".repeat(64),
                parts: Default::default(),
                pinned_at: 1_700_000_000,
                approved_at: None,
                definition: None,
            },
        );
        file.changed.entry("s".to_owned()).or_default().insert(
            "echo".to_owned(),
            Change {
                pinned: "a".repeat(64),
                seen: "d".repeat(64),
                parts: [("description".to_owned(), "e".repeat(16))].into(),
                fields: vec!["description".to_owned()],
                seen_at: 1_700_000_200,
                definition: Some("{\"name\":\"echo\",\"v\":2}".to_owned()),
            },
        );
        file
    }

    #[test]
    fn a_pin_file_survives_the_round_trip_through_store_rows() {
        assert_eq!(pin_file(pin_rows(&sample())), sample());
        assert_eq!(MS_PER_SECOND, 1000);
        // What the gateway hands over in one call, and keeps, fits what the store takes.
        const { assert!(PIN_WRITE_BATCH <= MAX_PIN_BATCH) };
        const { assert!(MAX_PINNED_DEFINITION_BYTES <= MAX_PIN_DEFINITION_BYTES) };
    }

    #[tokio::test]
    async fn the_store_backs_a_running_keeper_and_an_approval_from_another_opening_reaches_it() {
        let dir = scratch("keeper");
        let location = StoreLocation::sqlite(&dir);
        let store = Arc::new(Store::open(&location).await.unwrap());
        let pins = manifold_gateway::pins::Pins::open(
            Arc::new(StorePins::new(Arc::clone(&store))),
            HashMap::new(),
        )
        .await;
        // As `manifold pins approve` would: the command's own opening beside the gateway's.
        let command = Arc::new(Store::open_for_command(&location).await.unwrap());
        let rows = pin_rows(&sample());
        command.pins().import(&rows).await.unwrap();
        assert!(
            pins.sync().await,
            "the keeper takes in the other process's write"
        );
        assert_eq!(pins.server_report("s").changed.len(), 1);
        let approved = StorePins::new(Arc::clone(&command))
            .approve("s", 1_700_000_300)
            .await
            .unwrap();
        assert_eq!(approved, ["echo"]);
        assert!(pins.sync().await);
        let report = pins.server_report("s");
        assert!(report.changed.is_empty());
        assert_eq!(report.pinned, 2);
        let (file, _) = StorePins::new(Arc::clone(&store)).snapshot().await.unwrap();
        let echo = &file.pins["s"]["echo"];
        assert_eq!(echo.sha256, "d".repeat(64));
        assert_eq!(echo.approved_at, Some(1_700_000_300));
        assert_eq!(
            echo.definition.as_deref(),
            Some("{\"name\":\"echo\",\"v\":2}")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn writes_the_store_cannot_key_are_kept_out_and_do_not_block_the_others() {
        let dir = scratch("long-names");
        let store = Arc::new(Store::open(&StoreLocation::sqlite(&dir)).await.unwrap());
        let repository = StorePins::new(Arc::clone(&store));
        let pin = sample().pins["s"]["add"].clone();
        let writes = [
            PinWrite::Pin {
                server: "s".to_owned(),
                tool: "n".repeat(MAX_PIN_NAME_LEN + 1),
                pin: pin.clone(),
            },
            PinWrite::Pin {
                server: "s".to_owned(),
                tool: "ok".to_owned(),
                pin: Pin {
                    definition: Some("x".repeat(MAX_PIN_DEFINITION_BYTES + 1)),
                    ..pin
                },
            },
        ];
        let before = repository.revision().await.unwrap();
        assert_eq!(repository.apply(&writes).await.unwrap(), before + 1);
        let (file, _) = repository.snapshot().await.unwrap();
        let tools: Vec<&String> = file.pins["s"].keys().collect();
        assert_eq!(tools, ["ok"]);
        assert_eq!(file.pins["s"]["ok"].definition, None, "too large to keep");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn pins_json_is_imported_once_and_renamed() {
        let dir = scratch("import");
        let store = Store::open(&StoreLocation::sqlite(&dir)).await.unwrap();
        let old = OldPinFile::in_dir(&dir);
        std::fs::write(old.path(), serde_json::to_string(&sample()).unwrap()).unwrap();
        // A pin the store has already (a gateway pinned it meanwhile) is kept.
        let kept_row = PinRecord {
            sha256: "f".repeat(64),
            ..pin_rows(&sample()).remove(0)
        };
        store
            .pins()
            .import(std::slice::from_ref(&kept_row))
            .await
            .unwrap();

        let report = import_pin_file(&dir, &store).await.unwrap().unwrap();
        assert_eq!((report.imported, report.already_present), (1, 1));
        assert_eq!(report.servers, ["s"]);
        assert_eq!(report.renamed_to, dir.join("pins.json.imported"));
        assert!(!old.exists());
        let snapshot = store.pins().snapshot().await.unwrap();
        let file = pin_file(snapshot.pins);
        assert_eq!(file.pins["s"]["add"].sha256, kept_row.sha256);
        assert_eq!(file.changed["s"]["echo"], sample().changed["s"]["echo"]);
        let line = describe_import(&report);
        assert!(
            line.starts_with("Imported 1 pinned tool definition(s) from ")
                && line.contains("(servers: s); 1 already there; the old file is now "),
            "{line}"
        );
        assert_eq!(import_pin_file(&dir, &store).await.unwrap(), None);

        // A file that cannot be read is refused, naming it, and left where it is.
        std::fs::write(old.path(), "{not json").unwrap();
        let refused = import_pin_file(&dir, &store).await.unwrap_err();
        assert!(
            refused.message.contains("pins.json is not a pin file"),
            "{}",
            refused.message
        );
        assert!(old.exists());
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
