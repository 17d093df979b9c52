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
mod digest;
mod health;
mod live;
mod memory;
mod review;
mod store;

use std::time::Duration;

pub use canonical_json::{
    CanonicalError, Json, MAX_PLAIN_INTEGER_DIGITS, canonical_form, canonicalize,
    ecmascript_number, is_canonical, parse, to_canonical,
};
pub use digest::{DefinitionDigest, changed_members, digest_tool};
pub use health::{health_of, withheld_message};
pub use live::{Pins, ServerPins, keep_in_step};
pub use memory::MemoryPins;
pub use review::{ChangedTool, Review};
pub use store::{
    Change, OldPinFile, OnChange, Pin, PinError, PinFile, PinFuture, PinRepository, PinWrite,
};

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
pub(crate) const MAX_LOGGED_CHANGES: usize = 10_000;
/// Hex digits kept of each member's own digest: enough to tell which members changed.
pub(crate) const PART_DIGEST_HEX: usize = 16;

#[cfg(test)]
mod tests;
