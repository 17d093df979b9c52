//! One immutable snapshot of everything the gateway offers, rebuilt whenever an upstream changes.
//!
//! Entries keep the upstream's raw JSON with only the name (or URI) patched, and the title and
//! description cleaned when they need it (`hygiene`), in a deterministic order: built-in tools
//! first, then upstreams in configuration order, each in its own order. With pins, a tool whose
//! definition changed under an `on_change = "block"` policy is withheld: it keeps its exposed name
//! (so no other name moves) but is neither listed nor callable. Readers take an `Arc` of the
//! snapshot, so a rebuild never blocks a request in flight.

use std::collections::HashMap;
use std::sync::Arc;

use manifold_wire::id::json_string;
use manifold_wire::patch;

use super::hygiene;
use super::naming::{NameCollision, NameTable, NamingRules};
use super::uri;
use crate::pins::{ChangedTool, Pins};
use crate::upstream::Upstream;

/// One offered item.
#[derive(Debug, Clone)]
pub struct Entry {
    pub server: Arc<str>,
    /// The upstream's own name or URI.
    pub original: String,
    /// What clients see.
    pub exposed: String,
    /// The item's raw JSON with its name or URI patched to `exposed`.
    pub raw: String,
}

/// The merged catalog.
#[derive(Debug, Default)]
pub struct Catalog {
    pub tools: Vec<Entry>,
    pub prompts: Vec<Entry>,
    pub resources: Vec<Entry>,
    pub templates: Vec<Entry>,
    tool_names: NameTable,
    prompt_names: NameTable,
    /// URI scheme prefix -> server name.
    uri_servers: NameIndex<Arc<str>>,
    /// Exposed resource URI -> entry index, for exact lookups.
    resource_index: NameIndex<usize>,
    /// Exposed tool name -> entry index.
    tool_index: NameIndex<usize>,
    /// Whether URIs carry a server prefix (every naming mode but "never").
    namespaced: bool,
    /// Exposed name -> why the tool is withheld (its definition changed; policy "block").
    withheld: NameIndex<ChangedTool>,
}

/// A map by exposed name, read several times by every call. Hashed with foldhash, which for
/// these keys costs a fraction of std's SipHash; SipHash's defence against chosen collisions
/// buys nothing here, as the keys come from the configured servers' lists, never from a caller
/// (a caller's name is only looked up).
type NameIndex<V> = HashMap<String, V, foldhash::fast::RandomState>;

fn name_of(raw: &str, key: &str) -> Option<String> {
    patch::get_str(raw, &[key]).ok().flatten()
}

fn patched(raw: &str, key: &str, value: &str) -> Option<String> {
    patch::set(raw, &[key], &json_string(value)).ok()
}

impl Catalog {
    /// Builds the catalog from the upstreams' current lists, without pins.
    pub fn build(
        rules: &NamingRules,
        upstreams: &[Arc<Upstream>],
        reserved: &[&str],
    ) -> Result<Catalog, NameCollision> {
        Catalog::build_pinned(rules, upstreams, reserved, None)
    }

    /// Builds the catalog from the upstreams' current lists, comparing each tool with its pin
    /// when `pins` is given.
    #[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
    pub fn build_pinned(
        rules: &NamingRules,
        upstreams: &[Arc<Upstream>],
        reserved: &[&str],
        pins: Option<&Pins>,
    ) -> Result<Catalog, NameCollision> {
        let lists: Vec<_> = upstreams.iter().map(|u| (u, u.lists())).collect();
        let mut tool_entries = Vec::new();
        let mut prompt_entries = Vec::new();
        for (u, l) in &lists {
            let server = u.def.name.as_str();
            let prefix = u.def.prefix.as_str();
            for t in &l.tools {
                if let Some(n) = name_of(t.get(), "name") {
                    tool_entries.push((server, prefix, n));
                }
            }
            for p in &l.prompts {
                if let Some(n) = name_of(p.get(), "name") {
                    prompt_entries.push((server, prefix, n));
                }
            }
        }
        let mut tool_names = NameTable::build(
            rules,
            tool_entries.iter().map(|(s, p, n)| (*s, *p, n.as_str())),
            reserved,
        )?;
        tool_names.rename(
            upstreams.iter().flat_map(|u| {
                u.def.tool_overrides.iter().filter_map(|(tool, o)| {
                    o.name
                        .as_deref()
                        .map(|name| (u.def.name.as_str(), tool.as_str(), name))
                })
            }),
            reserved,
        )?;
        let prompt_names = NameTable::build(
            rules,
            prompt_entries.iter().map(|(s, p, n)| (*s, *p, n.as_str())),
            &[],
        )?;
        let mut catalog = Catalog {
            tool_names,
            prompt_names,
            ..Catalog::default()
        };
        let namespaced = rules.mode != super::naming::NamingMode::Never;
        catalog.namespaced = namespaced;
        let review = pins.map(|p| {
            let offered: Vec<(&str, Arc<crate::upstream::Lists>)> = lists
                .iter()
                .map(|(u, l)| (u.def.name.as_str(), Arc::clone(l)))
                .collect();
            p.review(&offered)
        });
        for (u, l) in &lists {
            let server: Arc<str> = Arc::from(u.def.name.as_str());
            let scheme = uri::scheme_prefix(&u.def.prefix);
            catalog
                .uri_servers
                .insert(scheme.clone(), Arc::clone(&server));
            let named = |raw: &str, table: &NameTable, kind: &str| -> Option<Entry> {
                let original = name_of(raw, "name")?;
                let exposed = table.exposed(&server, &original)?.to_owned();
                let offered = hygiene::offered_entry(&server, kind, &original, raw)?;
                Some(Entry {
                    server: Arc::clone(&server),
                    raw: patched(&offered, "name", &exposed)?,
                    original,
                    exposed,
                })
            };
            for t in &l.tools {
                let change = review.as_ref().and_then(|r| {
                    r.change(&server, &name_of(t.get(), "name")?)
                        .filter(|c| c.withheld)
                });
                if let Some(change) = change {
                    if let Some(exposed) = catalog.tool_names.exposed(&server, &change.tool) {
                        catalog.withheld.insert(exposed.to_owned(), change.clone());
                    }
                    continue;
                }
                if let Some(mut e) = named(t.get(), &catalog.tool_names, "tool") {
                    if let Some(o) = u.def.tool_overrides.get(&e.original) {
                        e.raw = super::overrides::apply(&e.raw, o);
                    }
                    catalog
                        .tool_index
                        .insert(e.exposed.clone(), catalog.tools.len());
                    catalog.tools.push(e);
                }
            }
            catalog.prompts.extend(
                l.prompts
                    .iter()
                    .filter_map(|p| named(p.get(), &catalog.prompt_names, "prompt")),
            );
            let located = |raw: &str, key: &str, kind: &str| -> Option<Entry> {
                let original = name_of(raw, key)?;
                let exposed = if namespaced {
                    uri::expose(&scheme, &original)
                } else {
                    original.clone()
                };
                let offered = hygiene::offered_entry(&server, kind, &original, raw)?;
                Some(Entry {
                    server: Arc::clone(&server),
                    raw: patched(&offered, key, &exposed)?,
                    original,
                    exposed,
                })
            };
            for r in &l.resources {
                if let Some(e) = located(r.get(), "uri", "resource") {
                    catalog
                        .resource_index
                        .insert(e.exposed.clone(), catalog.resources.len());
                    catalog.resources.push(e);
                }
            }
            catalog.templates.extend(
                l.templates
                    .iter()
                    .filter_map(|t| located(t.get(), "uriTemplate", "template")),
            );
        }
        Ok(catalog)
    }

    /// The tool an exposed name leads to (never a withheld one).
    pub fn tool(&self, exposed: &str) -> Option<(&str, &str)> {
        if self.withheld.contains_key(exposed) {
            return None;
        }
        self.tool_names
            .resolve(exposed)
            .map(|o| (o.server.as_str(), o.original.as_str()))
    }

    /// Why a tool is withheld, as the error a call to it gets (`None`: it is not withheld).
    pub fn withheld_tool(&self, exposed: &str) -> Option<manifold_wire::ErrorObject> {
        let change = self.withheld.get(exposed)?;
        let refusal = manifold_wire::ErrorObject::new(
            manifold_wire::ErrorCode::Forbidden,
            crate::pins::withheld_message(exposed, change),
        );
        let data = serde_json::json!({
            "server": change.server,
            "tool": change.tool,
            "changed": change.fields,
            "pinnedSha256": change.pinned,
            "seenSha256": change.seen,
        });
        Some(
            match serde_json::value::RawValue::from_string(data.to_string()) {
                Ok(data) => refusal.with_data(data),
                Err(_) => refusal,
            },
        )
    }

    /// Tools withheld because their definitions changed, by exposed name.
    pub fn withheld_tools(&self) -> impl Iterator<Item = (&str, &ChangedTool)> {
        self.withheld.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The offered entry of an exposed tool name.
    pub fn tool_entry(&self, exposed: &str) -> Option<&Entry> {
        self.tool_index
            .get(exposed)
            .and_then(|i| self.tools.get(*i))
    }

    /// The prompt an exposed name leads to.
    pub fn prompt(&self, exposed: &str) -> Option<(&str, &str)> {
        self.prompt_names
            .resolve(exposed)
            .map(|o| (o.server.as_str(), o.original.as_str()))
    }

    /// Every exposed tool name (for suggestions), withheld ones left out.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tool_names
            .exposed_names()
            .filter(|n| !self.withheld.contains_key(*n))
    }

    /// Whether `exposed` is, byte for byte, the URI of a listed resource.
    pub fn lists_resource(&self, exposed: &str) -> bool {
        self.resource_index.contains_key(exposed)
    }

    /// The server and original URI of an exposed resource URI (listed, or under a server's prefix).
    pub fn resource(&self, exposed: &str) -> Option<(Arc<str>, String)> {
        if let Some(e) = self
            .resource_index
            .get(exposed)
            .and_then(|i| self.resources.get(*i))
        {
            return Some((Arc::clone(&e.server), e.original.clone()));
        }
        if let Some((scheme, original)) = uri::split(exposed)
            && let Some(server) = self.uri_servers.get(scheme)
        {
            return Some((Arc::clone(server), original.to_owned()));
        }
        if self.namespaced {
            return None;
        }
        // Un-namespaced URIs (naming = "never"): a template whose literal head and tail fit, or
        // else the only server that offers resources at all.
        if let Some(t) = self
            .templates
            .iter()
            .find(|t| template_fits(&t.exposed, exposed))
        {
            return Some((Arc::clone(&t.server), exposed.to_owned()));
        }
        let mut offering = self
            .resources
            .iter()
            .chain(&self.templates)
            .map(|e| &e.server)
            .collect::<Vec<_>>();
        offering.dedup();
        match offering.as_slice() {
            [only] => Some((Arc::clone(only), exposed.to_owned())),
            _ => None,
        }
    }

    /// The exposed form of an upstream's URI (for URIs inside results and notifications).
    pub fn expose_uri(&self, server: &str, original: &str, namespaced: bool) -> String {
        if !namespaced {
            return original.to_owned();
        }
        match self.uri_servers.iter().find(|(_, s)| s.as_ref() == server) {
            Some((scheme, _)) => uri::expose(scheme, original),
            None => original.to_owned(),
        }
    }
}

/// Whether `uri` could come from the RFC 6570 `template`: its text before the first `{` and after
/// the last `}` match. Enough to route a URI to the one server that could have minted it.
fn template_fits(template: &str, uri: &str) -> bool {
    let (Some(open), Some(close)) = (template.find('{'), template.rfind('}')) else {
        return template == uri;
    };
    let head = template.get(..open).unwrap_or_default();
    let tail = template.get(close + 1..).unwrap_or_default();
    uri.len() >= head.len() + tail.len() && uri.starts_with(head) && uri.ends_with(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fit_by_their_literal_ends() {
        assert!(template_fits(
            "test://template/{id}/data",
            "test://template/42/data"
        ));
        assert!(!template_fits(
            "test://template/{id}/data",
            "test://other/42/data"
        ));
        assert!(template_fits("file:///{path}", "file:///etc/hosts"));
        assert!(template_fits("exact://x", "exact://x"));
        assert!(!template_fits("a{b}c", "ac".get(..1).unwrap_or_default()));
    }
}
