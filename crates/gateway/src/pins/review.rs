//! Comparing what servers offer with the pins: first sights, changes (withheld under
//! `on_change = "block"`), and tools back at their pinned definition, with the writes that
//! record each decision. Pure apart from the pin file it is given.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::*;

/// One tool as offered: its upstream name, digest and (when small enough) definition.
#[derive(Debug, Clone)]
pub(super) struct OfferedTool {
    pub(super) name: String,
    pub(super) digest: DefinitionDigest,
    pub(super) definition: Option<String>,
}

/// One server's tools, with their digests.
pub(super) type ServerDigests = Arc<Vec<OfferedTool>>;

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
    pub(super) first_sights: Vec<(String, String)>,
    pub(super) back_to_pinned: Vec<(String, String)>,
    /// What to write for the decisions made (none: nothing new).
    pub(super) writes: Vec<PinWrite>,
}

impl Review {
    /// The change of one tool, if its definition differs from its pin.
    pub fn change(&self, server: &str, tool: &str) -> Option<&ChangedTool> {
        self.changed.get(&(server.to_owned(), tool.to_owned()))
    }
}

/// Compares each offered tool with the pins in `file`, recording first sights and changes in it
/// and in the writes returned. Pure apart from `file`.
pub(super) fn review_offered(
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
