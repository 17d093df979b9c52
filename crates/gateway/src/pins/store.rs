//! What the pins are as records, and where they live: each server's `on_change` policy, a pin and
//! a recorded change, the whole `PinFile`, the conditional writes a review decides
//! (`PinWrite`), the `PinRepository` the store (or memory) implements, and `pins.json` of earlier
//! versions read once for import (`OldPinFile`).

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;

/// What happens when a server's tool no longer matches its pin (`on_change` per server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnChange {
    /// Serve the changed tool; log it and report it in health.
    #[default]
    Warn,
    /// Withhold the changed tool from lists and refuse calls to it until approved.
    Block,
}

impl OnChange {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OnChange::Warn => "warn",
            OnChange::Block => "block",
        }
    }
}

/// Why pins could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a pin file Manifold can read ({detail}); move it aside to start pinning afresh, or restore it from a backup"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "{path} is larger than {} MiB, so it was not read; move it aside to start pinning afresh",
        MAX_PIN_FILE_BYTES / (1024 * 1024)
    )]
    TooLarge { path: PathBuf },
    #[error(
        "{path} was written by a newer Manifold (format {found}, this one knows {PIN_FILE_VERSION}); upgrade Manifold"
    )]
    NewerVersion { path: PathBuf, found: u32 },
    /// The repository failed; `detail` names it and says what to do.
    #[error("{detail}")]
    Repository { detail: String },
}

/// One pinned definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// SHA-256 (hex) of the canonical JSON of the pinned members.
    pub sha256: String,
    /// A short digest of each member present, to name the members that change later.
    #[serde(default)]
    pub parts: BTreeMap<String, String>,
    /// When it was pinned (seconds since the Unix epoch).
    #[serde(rename = "pinnedAt", default)]
    pub pinned_at: u64,
    /// When a person approved it (`None`: pinned on first sight).
    #[serde(
        rename = "approvedAt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub approved_at: Option<u64>,
    /// The definition as the server sent it (absent for pins from `pins.json`, and for definitions
    /// over [`MAX_PINNED_DEFINITION_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
}

/// A definition seen that differs from its pin, waiting for `manifold pins approve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The pin's digest when the change was seen.
    pub pinned: String,
    /// The digest of the definition seen.
    pub seen: String,
    #[serde(default)]
    pub parts: BTreeMap<String, String>,
    /// The members that differ (empty when the parts could not be compared).
    #[serde(default)]
    pub fields: Vec<String>,
    /// When it was first seen (seconds since the Unix epoch).
    #[serde(rename = "seenAt", default)]
    pub seen_at: u64,
    /// The definition seen, as the server sent it (when known and small enough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
}

/// Every pin: server name, then the tool's own (upstream) name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinFile {
    pub version: u32,
    #[serde(default)]
    pub pins: BTreeMap<String, BTreeMap<String, Pin>>,
    #[serde(default)]
    pub changed: BTreeMap<String, BTreeMap<String, Change>>,
}

impl Default for PinFile {
    fn default() -> Self {
        PinFile {
            version: PIN_FILE_VERSION,
            pins: BTreeMap::new(),
            changed: BTreeMap::new(),
        }
    }
}

impl PinFile {
    /// Accepts every recorded change of `server` at `now`: the definitions seen become its pins.
    /// Returns the tools approved, by name.
    pub fn approve(&mut self, server: &str, now: u64) -> Vec<String> {
        let Some(changes) = self.changed.remove(server) else {
            return Vec::new();
        };
        let pins = self.pins.entry(server.to_owned()).or_default();
        let mut approved = Vec::new();
        for (tool, change) in changes {
            pins.insert(
                tool.clone(),
                Pin {
                    sha256: change.seen,
                    parts: change.parts,
                    pinned_at: now,
                    approved_at: Some(now),
                    definition: change.definition,
                },
            );
            approved.push(tool);
        }
        approved
    }

    fn pin_of(&self, server: &str, tool: &str) -> Option<&Pin> {
        self.pins.get(server).and_then(|p| p.get(tool))
    }
}

/// One decision of a catalog build, written under the condition it was made against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinWrite {
    /// First sight: pin it, unless a pin is there already (another writer saw it first).
    Pin {
        server: String,
        tool: String,
        pin: Pin,
    },
    /// Record the change, unless the pin is no longer `change.pinned` (it was approved meanwhile).
    RecordChange {
        server: String,
        tool: String,
        change: Change,
    },
    /// Back to the pinned definition: forget the change, unless the pin is no longer `pinned`.
    ClearChange {
        server: String,
        tool: String,
        pinned: String,
    },
}

impl PinWrite {
    /// Applies the write to `file` under its condition (what a repository does with it).
    pub fn apply_to(&self, file: &mut PinFile) {
        match self {
            PinWrite::Pin { server, tool, pin } => {
                if file.pin_of(server, tool).is_none() {
                    file.pins
                        .entry(server.clone())
                        .or_default()
                        .insert(tool.clone(), pin.clone());
                }
            }
            PinWrite::RecordChange {
                server,
                tool,
                change,
            } => {
                if file
                    .pin_of(server, tool)
                    .is_some_and(|p| p.sha256 == change.pinned)
                {
                    file.changed
                        .entry(server.clone())
                        .or_default()
                        .insert(tool.clone(), change.clone());
                }
            }
            PinWrite::ClearChange {
                server,
                tool,
                pinned,
            } => {
                if file
                    .pin_of(server, tool)
                    .is_some_and(|p| &p.sha256 == pinned)
                    && let Some(changes) = file.changed.get_mut(server)
                {
                    changes.remove(tool);
                    if changes.is_empty() {
                        file.changed.remove(server);
                    }
                }
            }
        }
    }
}

/// What a [`PinRepository`] call returns.
pub type PinFuture<'a, T> =
    std::pin::Pin<Box<dyn Future<Output = Result<T, PinError>> + Send + 'a>>;

/// Where pins live: shared by every gateway and `manifold pins`, so each write is conditional
/// ([`PinWrite`]) and every write changes the revision.
pub trait PinRepository: Send + Sync {
    /// Every pin, and the revision it was read at.
    fn snapshot(&self) -> PinFuture<'_, (PinFile, u64)>;
    /// The revision: it changes with every write, by anyone.
    fn revision(&self) -> PinFuture<'_, u64>;
    /// Applies `writes` in order, each under its condition (at most [`PIN_WRITE_BATCH`] at once);
    /// returns the revision after them.
    fn apply<'a>(&'a self, writes: &'a [PinWrite]) -> PinFuture<'a, u64>;
    /// Accepts every recorded change of `server` (seconds since the epoch in `now`); the tools
    /// approved.
    fn approve<'a>(&'a self, server: &'a str, now: u64) -> PinFuture<'a, Vec<String>>;
    /// Where the pins live, for messages.
    fn describe(&self) -> String;
}

/// `pins.json` as earlier versions wrote it, read once to import it.
#[derive(Debug, Clone)]
pub struct OldPinFile {
    path: PathBuf,
}

impl OldPinFile {
    /// `pins.json` in `data_dir`; nothing is touched until it is read.
    pub fn in_dir(data_dir: &Path) -> OldPinFile {
        OldPinFile {
            path: data_dir.join(PIN_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is there (it is renamed once imported).
    pub fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// The file's content; an absent file is an empty one.
    pub fn load(&self) -> Result<PinFile, PinError> {
        let io = |action, source| PinError::Io {
            action,
            path: self.path.clone(),
            source,
        };
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PinFile::default()),
            Err(e) => return Err(io("open", e)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_PIN_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io("read", e))?;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_PIN_FILE_BYTES {
            return Err(PinError::TooLarge {
                path: self.path.clone(),
            });
        }
        // The version is checked before the shape: a newer format may not parse as this one.
        let version = serde_json::from_slice::<Value>(&bytes)
            .map_err(|e| PinError::Corrupt {
                path: self.path.clone(),
                detail: e.to_string(),
            })?
            .get("version")
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok());
        match version {
            Some(v) if v > PIN_FILE_VERSION => {
                return Err(PinError::NewerVersion {
                    path: self.path.clone(),
                    found: v,
                });
            }
            Some(_) => {}
            None => {
                return Err(PinError::Corrupt {
                    path: self.path.clone(),
                    detail: "it has no \"version\" number".to_owned(),
                });
            }
        }
        serde_json::from_slice(&bytes).map_err(|e| PinError::Corrupt {
            path: self.path.clone(),
            detail: e.to_string(),
        })
    }

    /// Renames the imported file to `pins.json.imported` (kept, not deleted, for the operator).
    pub fn retire(&self) -> Result<PathBuf, PinError> {
        let to = self.path.with_extension("json.imported");
        std::fs::rename(&self.path, &to).map_err(|source| PinError::Io {
            action: "rename the imported pin file",
            path: self.path.clone(),
            source,
        })?;
        Ok(to)
    }
}
