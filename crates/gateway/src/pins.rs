//! Tool definition pinning: a defence against "rug pulls", where a server that was trusted with
//! one tool definition later changes what the tool says it does (or what it takes) without anyone
//! looking again.
//!
//! On first sight, each tool's definition is digested (SHA-256 of the RFC 8785 canonical JSON of
//! its `name`, `title`, `description`, `inputSchema`, `outputSchema` and `annotations`) and the
//! digest is recorded, with the definition itself, in a [`PinRepository`]. A later definition with
//! another digest is a change: logged, recorded for `manifold pins approve`, reported by
//! `manifold_health`, and, under a server's `on_change = "block"`, withheld from clients until
//! approved.
//!
//! The repository is the source of truth shared by running gateways and the `manifold pins`
//! command; the `manifold` binary backs it with its store (this crate has no database), and
//! [`MemoryPins`] backs it in memory. Catalog builds decide on an in-memory copy (they are
//! synchronous and must not wait on a database) and queue their decisions as conditional writes
//! ([`PinWrite`]) that [`keep_in_step`] flushes at once; it also polls the repository's revision
//! every [`PIN_FILE_POLL`] and takes in what another writer (an approval) changed. The conditions
//! make the order of writers harmless: a first sight never replaces a pin, and a change is recorded
//! or cleared only against the pin it was compared with, so a gateway cannot undo an approval.
//!
//! `pins.json`, where earlier versions kept the pins, is read by [`OldPinFile`] for a one-time
//! import.

mod canonical_json;
mod memory;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::sync::watch;

pub use canonical_json::{
    CanonicalError, Json, canonicalize, ecmascript_number, parse, to_canonical,
};
pub use memory::MemoryPins;

use crate::upstream::Lists;

/// The file earlier versions kept the pins in, inside the data directory.
pub const PIN_FILE: &str = "pins.json";
/// The format version of [`PinFile`] (also what `manifold pins list --json` prints); a file from a
/// newer Manifold is refused, not imported.
pub const PIN_FILE_VERSION: u32 = 1;
/// Largest pin file read (a file this big is not one Manifold wrote for any real catalog).
pub const MAX_PIN_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// How often a running gateway looks for a change another writer (an approval by `manifold pins`)
/// made, and retries writes that failed.
pub const PIN_FILE_POLL: Duration = Duration::from_secs(1);
/// Largest definition kept beside its pin; a larger one is pinned by its digest alone.
pub const MAX_PINNED_DEFINITION_BYTES: usize = 256 * 1024;
/// Writes handed to the repository in one call.
pub const PIN_WRITE_BATCH: usize = 500;
/// Writes queued while the repository cannot take them; beyond this, new ones are dropped and the
/// gateway re-reads the repository once it answers again (the next catalog build re-derives them).
pub const MAX_PENDING_PIN_WRITES: usize = 100_000;
/// The members of a tool definition a pin covers, in the order changes are named.
///
/// `title` and `annotations` are in: the title is what a person reads when approving a tool, and
/// annotations (`readOnlyHint`, `destructiveHint`) steer clients' automatic approval, so changing
/// either is as much a rug pull as changing the description. Left out: `icons`, `_meta`,
/// `execution` and vendor members, which carry presentation and transport details that may
/// legitimately vary between runs.
pub const PINNED_MEMBERS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];
/// Changes remembered as already logged (per process) before the memory starts afresh.
const MAX_LOGGED_CHANGES: usize = 10_000;
/// Hex digits kept of each member's own digest: enough to tell which members changed.
const PART_DIGEST_HEX: usize = 16;

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

/// One tool as offered: its upstream name, digest and (when small enough) definition.
#[derive(Debug, Clone)]
struct OfferedTool {
    name: String,
    digest: DefinitionDigest,
    definition: Option<String>,
}

/// One server's tools, with their digests.
type ServerDigests = Arc<Vec<OfferedTool>>;

/// A tool definition's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionDigest {
    pub sha256: String,
    pub parts: BTreeMap<String, String>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Digests one raw tool definition. Total: a definition with no canonical form (not an object,
/// a number beyond a double, a member name twice) is digested by its exact bytes instead, so it
/// is still pinned, only more strictly.
pub fn digest_tool(raw: &str) -> DefinitionDigest {
    let by_bytes = || {
        let mut bytes = b"manifold-raw-definition\0".to_vec();
        bytes.extend_from_slice(raw.as_bytes());
        DefinitionDigest {
            sha256: sha256_hex(&bytes),
            parts: BTreeMap::new(),
        }
    };
    let definition = match canonical_json::parse(raw) {
        Ok(d @ Json::Object(_)) => d,
        _ => return by_bytes(),
    };
    let mut pinned = Vec::new();
    let mut parts = BTreeMap::new();
    for member in PINNED_MEMBERS {
        if let Some(value) = definition.member(member) {
            let mut part = sha256_hex(to_canonical(value).as_bytes());
            part.truncate(PART_DIGEST_HEX);
            parts.insert(member.to_owned(), part);
            pinned.push((member.to_owned(), value.clone()));
        }
    }
    DefinitionDigest {
        sha256: sha256_hex(to_canonical(&Json::Object(pinned)).as_bytes()),
        parts,
    }
}

/// The members whose digests differ (present in one and not the other counts).
pub fn changed_members(
    pinned: &BTreeMap<String, String>,
    seen: &BTreeMap<String, String>,
) -> Vec<String> {
    if pinned.is_empty() || seen.is_empty() {
        return Vec::new();
    }
    PINNED_MEMBERS
        .iter()
        .filter(|m| pinned.get(**m) != seen.get(**m))
        .map(|m| (*m).to_owned())
        .collect()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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

/// A tool whose definition differs from its pin, as one catalog build saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedTool {
    pub server: String,
    pub tool: String,
    pub fields: Vec<String>,
    pub pinned: String,
    pub seen: String,
    /// Whether the server's policy withholds it.
    pub withheld: bool,
}

/// The outcome of comparing offered tools with the pins.
#[derive(Debug, Default)]
pub struct Review {
    /// Changed tools by (server, tool).
    pub changed: HashMap<(String, String), ChangedTool>,
    first_sights: Vec<(String, String)>,
    back_to_pinned: Vec<(String, String)>,
    /// What to write for the decisions made (none: nothing new).
    writes: Vec<PinWrite>,
}

impl Review {
    /// The change of one tool, if its definition differs from its pin.
    pub fn change(&self, server: &str, tool: &str) -> Option<&ChangedTool> {
        self.changed.get(&(server.to_owned(), tool.to_owned()))
    }
}

/// Compares each offered tool with the pins in `file`, recording first sights and changes in it
/// and in the writes returned. Pure apart from `file`.
fn review(
    file: &mut PinFile,
    offered: &[(String, ServerDigests)],
    policies: &HashMap<String, OnChange>,
    now: u64,
) -> Review {
    let mut out = Review::default();
    for (server, tools) in offered {
        let policy = policies.get(server).copied().unwrap_or_default();
        for offered_tool in tools.iter() {
            let (tool, digest) = (&offered_tool.name, &offered_tool.digest);
            let PinFile { pins, changed, .. } = &mut *file;
            match pins.get(server).and_then(|p| p.get(tool)) {
                None => {
                    let pin = Pin {
                        sha256: digest.sha256.clone(),
                        parts: digest.parts.clone(),
                        pinned_at: now,
                        approved_at: None,
                        definition: offered_tool.definition.clone(),
                    };
                    pins.entry(server.clone())
                        .or_default()
                        .insert(tool.clone(), pin.clone());
                    out.first_sights.push((server.clone(), tool.clone()));
                    out.writes.push(PinWrite::Pin {
                        server: server.clone(),
                        tool: tool.clone(),
                        pin,
                    });
                }
                Some(pin) if pin.sha256 == digest.sha256 => {
                    let cleared = changed
                        .get_mut(server)
                        .and_then(|c| c.remove(tool))
                        .is_some();
                    if cleared {
                        if changed.get(server).is_some_and(BTreeMap::is_empty) {
                            changed.remove(server);
                        }
                        out.back_to_pinned.push((server.clone(), tool.clone()));
                        out.writes.push(PinWrite::ClearChange {
                            server: server.clone(),
                            tool: tool.clone(),
                            pinned: pin.sha256.clone(),
                        });
                    }
                }
                Some(pin) => {
                    let fields = changed_members(&pin.parts, &digest.parts);
                    let recorded = changed.get(server).and_then(|c| c.get(tool));
                    let already =
                        recorded.is_some_and(|r| r.seen == digest.sha256 && r.pinned == pin.sha256);
                    if !already {
                        let change = Change {
                            pinned: pin.sha256.clone(),
                            seen: digest.sha256.clone(),
                            parts: digest.parts.clone(),
                            fields: fields.clone(),
                            seen_at: now,
                            definition: offered_tool.definition.clone(),
                        };
                        changed
                            .entry(server.clone())
                            .or_default()
                            .insert(tool.clone(), change.clone());
                        out.writes.push(PinWrite::RecordChange {
                            server: server.clone(),
                            tool: tool.clone(),
                            change,
                        });
                    }
                    out.changed.insert(
                        (server.clone(), tool.clone()),
                        ChangedTool {
                            server: server.clone(),
                            tool: tool.clone(),
                            fields,
                            pinned: pin.sha256.clone(),
                            seen: digest.sha256.clone(),
                            withheld: policy == OnChange::Block,
                        },
                    );
                }
            }
        }
    }
    out
}

/// What health shows of one server's pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPins {
    pub on_change: OnChange,
    pub pinned: usize,
    /// Recorded changes waiting for approval, by tool name.
    pub changed: Vec<(String, Change)>,
}

/// The pins a running gateway enforces: the repository, each server's policy, what it last read,
/// and the writes not yet taken by the repository.
pub struct Pins {
    repository: Arc<dyn PinRepository>,
    state: Mutex<PinState>,
    /// One [`Pins::sync`] at a time.
    syncing: tokio::sync::Mutex<()>,
    /// Woken when a review queued writes, so they go out at once.
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct PinState {
    policies: HashMap<String, OnChange>,
    file: PinFile,
    /// The repository's revision `file` reflects; `None` until it was read once.
    revision: Option<u64>,
    /// Why the repository could not be read or written, for health; `None` while all is well.
    error: Option<String>,
    /// Decisions not yet written, oldest first.
    pending: VecDeque<PinWrite>,
    /// Writes were dropped (the queue was full): read the repository again once it answers.
    resync: bool,
    /// Digests per server, valid while the server's lists are the same `Arc`.
    digests: HashMap<String, (Arc<Lists>, ServerDigests)>,
    /// (server, tool, seen digest) already logged, so a change is logged once per process.
    logged: HashSet<(String, String, String)>,
}

impl std::fmt::Debug for Pins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pins")
            .field("repository", &self.repository.describe())
            .finish_non_exhaustive()
    }
}

impl Pins {
    /// Pins kept in `repository`, with `policies` by server name (absent: warn). Reads the
    /// repository now; when it cannot be read that is reported (log and health) and retried every
    /// [`PIN_FILE_POLL`] by [`keep_in_step`], and nothing it holds is ever replaced meanwhile.
    pub async fn open(
        repository: Arc<dyn PinRepository>,
        policies: HashMap<String, OnChange>,
    ) -> Pins {
        let mut state = PinState {
            policies,
            ..PinState::default()
        };
        match repository.snapshot().await {
            Ok((file, revision)) => {
                state.file = file;
                state.revision = Some(revision);
            }
            Err(e) => {
                tracing::error!(error = %e, "tool definition pins could not be read; every tool counts as first seen until they can, and reading is retried every second");
                state.error = Some(e.to_string());
            }
        }
        Pins {
            repository,
            state: Mutex::new(state),
            syncing: tokio::sync::Mutex::new(()),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Replaces the per-server policies (after a configuration reload); the next catalog build
    /// applies them.
    pub fn set_policies(&self, policies: HashMap<String, OnChange>) {
        self.state().policies = policies;
    }

    pub fn repository(&self) -> &Arc<dyn PinRepository> {
        &self.repository
    }

    /// A server's policy.
    pub fn policy(&self, server: &str) -> OnChange {
        self.state()
            .policies
            .get(server)
            .copied()
            .unwrap_or_default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PinState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(&self, what: &str, e: &PinError) {
        let text = format!("{what}: {e}");
        let mut state = self.state();
        if state.error.as_deref() != Some(&text) {
            tracing::error!(error = %e, "{what}; the pins read before stay in force and it is retried every second");
        }
        state.error = Some(text);
    }

    /// Writes the queued decisions, then takes in what another writer changed. Returns true when
    /// the pins in force changed (the catalog should be built again).
    pub async fn sync(&self) -> bool {
        let _one = self.syncing.lock().await;
        loop {
            let batch: Vec<PinWrite> = self
                .state()
                .pending
                .iter()
                .take(PIN_WRITE_BATCH)
                .cloned()
                .collect();
            if batch.is_empty() {
                break;
            }
            match self.repository.apply(&batch).await {
                Ok(revision) => {
                    let mut state = self.state();
                    // Reviews only append, so the batch is still at the front.
                    state.pending.drain(..batch.len());
                    if state.revision.is_some_and(|r| r + 1 == revision) {
                        // Nobody else wrote in between: the copy in memory is what is stored.
                        state.revision = Some(revision);
                    }
                    state.error = None;
                }
                Err(e) => {
                    self.failed("tool definition pins could not be saved", &e);
                    return false;
                }
            }
        }
        let (seen, resync) = {
            let state = self.state();
            (state.revision, state.resync)
        };
        let current = match self.repository.revision().await {
            Ok(r) => r,
            Err(e) => {
                self.failed("tool definition pins could not be read", &e);
                return false;
            }
        };
        if seen == Some(current) && !resync {
            return false;
        }
        let (file, revision) = match self.repository.snapshot().await {
            Ok(s) => s,
            Err(e) => {
                self.failed("tool definition pins could not be read", &e);
                return false;
            }
        };
        let mut state = self.state();
        let mut merged = file;
        // Decisions made meanwhile are not lost: they go out at the next sync.
        for w in &state.pending {
            w.apply_to(&mut merged);
        }
        let changed = merged != state.file;
        state.file = merged;
        state.revision = Some(revision);
        state.resync = false;
        state.error = None;
        changed
    }

    /// Compares every offered tool with its pin: pins new ones, records and logs changes, and
    /// queues the writes for [`keep_in_step`].
    pub fn review(&self, offered: &[(&str, Arc<Lists>)]) -> Review {
        let mut state = self.state();
        let mut digested = Vec::with_capacity(offered.len());
        for (server, lists) in offered {
            let cached = state
                .digests
                .get(*server)
                .filter(|(seen, _)| Arc::ptr_eq(seen, lists))
                .map(|(_, d)| Arc::clone(d));
            let digests = match cached {
                Some(d) => d,
                None => {
                    let d: ServerDigests = Arc::new(
                        lists
                            .tools
                            .iter()
                            .filter_map(|t| {
                                let raw = t.get();
                                let name = manifold_wire::patch::get_str(raw, &["name"])
                                    .ok()
                                    .flatten()?;
                                Some(OfferedTool {
                                    name,
                                    digest: digest_tool(raw),
                                    definition: (raw.len() <= MAX_PINNED_DEFINITION_BYTES)
                                        .then(|| raw.to_owned()),
                                })
                            })
                            .collect(),
                    );
                    state
                        .digests
                        .insert((*server).to_owned(), (Arc::clone(lists), Arc::clone(&d)));
                    d
                }
            };
            digested.push(((*server).to_owned(), digests));
        }
        let now = unix_now();
        let policies = state.policies.clone();
        let mut outcome = review(&mut state.file, &digested, &policies, now);
        let writes = std::mem::take(&mut outcome.writes);
        if !writes.is_empty() {
            if state.pending.len() + writes.len() > MAX_PENDING_PIN_WRITES {
                if !state.resync {
                    tracing::error!(
                        queued = state.pending.len(),
                        "tool definition pins cannot be saved and {MAX_PENDING_PIN_WRITES} writes are waiting; newer ones are dropped and the pins are read again once they can be"
                    );
                }
                state.resync = true;
            } else {
                state.pending.extend(writes);
            }
            self.wake.notify_one();
        }
        self.log(&mut state, &outcome);
        outcome
    }

    fn log(&self, state: &mut PinState, outcome: &Review) {
        let mut first: BTreeMap<&str, usize> = BTreeMap::new();
        for (server, _) in &outcome.first_sights {
            *first.entry(server.as_str()).or_default() += 1;
        }
        for (server, count) in first {
            tracing::info!(server, tools = count, store = %self.repository.describe(), "pinned tool definitions on first sight");
        }
        for (server, tool) in &outcome.back_to_pinned {
            tracing::info!(server = %server, tool = %tool, "a changed tool definition is back to its pinned form");
        }
        let mut changed: Vec<&ChangedTool> = outcome.changed.values().collect();
        changed.sort_by(|a, b| (&a.server, &a.tool).cmp(&(&b.server, &b.tool)));
        for c in changed {
            let key = (c.server.clone(), c.tool.clone(), c.seen.clone());
            if state.logged.contains(&key) {
                continue;
            }
            if state.logged.len() >= MAX_LOGGED_CHANGES {
                // A server rotating its definitions must not grow this without bound; the worst
                // case is a change logged twice.
                state.logged.clear();
            }
            state.logged.insert(key);
            let members = if c.fields.is_empty() {
                "definition".to_owned()
            } else {
                c.fields.join(", ")
            };
            let consequence = if c.withheld {
                "withheld from clients (on_change = \"block\")"
            } else {
                "still served (on_change = \"warn\")"
            };
            tracing::warn!(
                server = %c.server,
                tool = %c.tool,
                changed = %members,
                pinned_sha256 = %c.pinned,
                seen_sha256 = %c.seen,
                "tool definition changed since it was pinned: {consequence}; if the change is expected, run `manifold pins approve {}`",
                c.server
            );
        }
    }

    /// What health shows for one server.
    pub fn server_report(&self, server: &str) -> ServerPins {
        let state = self.state();
        ServerPins {
            on_change: state.policies.get(server).copied().unwrap_or_default(),
            pinned: state.file.pins.get(server).map_or(0, BTreeMap::len),
            changed: state
                .file
                .changed
                .get(server)
                .map(|c| c.iter().map(|(t, c)| (t.clone(), c.clone())).collect())
                .unwrap_or_default(),
        }
    }

    /// Why the pins could not be read or written, if they could not.
    pub fn error(&self) -> Option<String> {
        self.state().error.clone()
    }

    /// Writes decided but not yet taken by the repository.
    pub fn pending_writes(&self) -> usize {
        self.state().pending.len()
    }
}

/// What `manifold_health` shows of one server's pins: a JSON value, and a line of text when a
/// definition changed.
pub fn health_of(pins: &Pins, server: &str) -> (Value, Option<String>) {
    let report = pins.server_report(server);
    let withheld = report.on_change == OnChange::Block;
    let changed: Vec<Value> = report
        .changed
        .iter()
        .map(|(tool, c)| {
            serde_json::json!({
                "tool": tool,
                "fields": c.fields,
                "pinnedSha256": c.pinned,
                "seenSha256": c.seen,
                "seenAt": c.seen_at,
                "withheld": withheld,
            })
        })
        .collect();
    let line = (!report.changed.is_empty()).then(|| {
        let tools: Vec<String> = report
            .changed
            .iter()
            .map(|(tool, c)| {
                if c.fields.is_empty() {
                    tool.clone()
                } else {
                    format!("{tool} ({})", c.fields.join(", "))
                }
            })
            .collect();
        format!(
            "{server}: {} tool definition(s) changed since pinned: {}; {} (on_change = {:?}); if expected, run `manifold pins approve {server}`",
            tools.len(),
            tools.join(", "),
            if withheld { "withheld" } else { "still served" },
            report.on_change.as_str()
        )
    });
    let value = serde_json::json!({
        "onChange": report.on_change.as_str(),
        "pinned": report.pinned,
        "changed": changed,
    });
    (value, line)
}

/// The message a call to a withheld tool gets.
pub fn withheld_message(exposed: &str, change: &ChangedTool) -> String {
    let members = if change.fields.is_empty() {
        String::new()
    } else {
        format!(" ({})", change.fields.join(", "))
    };
    format!(
        "the tool {exposed:?} is withheld: server {:?} changed its definition{members} since it was pinned, and its on_change policy is \"block\"; if the change is expected, approve it with `manifold pins approve {}` (a running Manifold picks the approval up within {} s); manifold_health shows what changed",
        change.server,
        change.server,
        PIN_FILE_POLL.as_secs()
    )
}

/// Keeps a gateway's pins and the repository in step until shutdown: writes what reviews decided
/// as soon as they queue it, and every [`PIN_FILE_POLL`] reads the revision, calling `changed`
/// when another writer (an approval) changed the pins in force; ends when `changed` returns false,
/// or at shutdown, after a last write of what is queued.
pub async fn keep_in_step(
    pins: Arc<Pins>,
    changed: impl Fn() -> bool + Send + 'static,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let stopping = tokio::select! {
            () = tokio::time::sleep(PIN_FILE_POLL) => false,
            () = pins.wake.notified() => false,
            _ = shutdown.wait_for(|s| *s) => true,
        };
        let taken_in = pins.sync().await;
        if stopping || (taken_in && !changed()) {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
