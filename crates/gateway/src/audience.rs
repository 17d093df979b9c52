//! Which gateway events one caller may hear. The gateway broadcasts every change to every
//! session; a change the caller's rules hide entirely would still tell it that something it may
//! not see exists and moved, and an update of a resource a reload hid would keep flowing to a
//! subscription made while it was visible.
//!
//! The rule (docs/security.md, "What a session hears"): a `list_changed` reaches a caller only
//! when what it sees of that list differs from what it saw when it last heard one (or when its
//! session began: the digest of its filtered view, item bytes included, is kept per list); a
//! `resources/updated` reaches it only while it may see the resource, judged by the rules in force
//! when the update arrives. A caller no rule applies to hears every change, as without rules.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use crate::builtin;
use crate::catalog::build::Entry;
use crate::context::Caller;
use crate::events::GatewayEvent;
use crate::gateway::Gateway;
use crate::gateway_settings::Discovery;
use crate::policy::{ItemKind, resource_target};
use crate::state::Core;

/// The lists a `list_changed` can name, in the order [`Audience`] keeps their digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Tools = 0,
    Prompts = 1,
    Resources = 2,
}

const LISTS: [List; 3] = [List::Tools, List::Prompts, List::Resources];

/// One caller's hearing of gateway events: the rules it is judged by are always the ones in
/// force, the views it last heard of are its own.
pub struct Audience {
    gateway: Arc<Core>,
    caller: Option<Arc<Caller>>,
    /// The tool set its session works in.
    toolset: Option<Arc<str>>,
    heard: Mutex<[Option<u64>; 3]>,
}

impl std::fmt::Debug for Audience {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audience")
            .field("caller", &self.caller.as_ref().map(|c| c.name.as_str()))
            .finish_non_exhaustive()
    }
}

impl Audience {
    /// The audience of `caller` in `toolset`, taking what it sees now as what it has heard of.
    pub fn new(
        gateway: Gateway,
        caller: Option<Arc<Caller>>,
        toolset: Option<Arc<str>>,
    ) -> Audience {
        let audience = Audience {
            gateway: gateway.inner,
            caller,
            toolset,
            heard: Mutex::new([None; 3]),
        };
        let now = LISTS.map(|list| audience.view_digest(list));
        *audience
            .heard
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = now;
        audience
    }

    /// The tool set this audience hears in.
    pub fn toolset(&self) -> Option<&str> {
        self.toolset.as_deref()
    }

    /// The caller this audience judges for.
    pub fn caller(&self) -> Option<&Arc<Caller>> {
        self.caller.as_ref()
    }

    /// Whether the caller hears `event`; a `list_changed` it hears becomes what it has heard of.
    pub fn admits(&self, event: &GatewayEvent) -> bool {
        let list = match event {
            GatewayEvent::ToolsChanged => List::Tools,
            GatewayEvent::PromptsChanged => List::Prompts,
            GatewayEvent::ResourcesChanged => List::Resources,
            GatewayEvent::ResourceUpdated { uri } => return self.may_see_resource(uri),
            GatewayEvent::Log { .. } => return true,
        };
        let Some(now) = self.view_digest(list) else {
            return true;
        };
        let mut heard = self.heard.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = &mut heard[list as usize];
        if *slot == Some(now) {
            return false;
        }
        *slot = Some(now);
        true
    }

    /// Whether the rules in force let the caller see the resource at the exposed `uri`.
    pub fn may_see_resource(&self, uri: &str) -> bool {
        let policy = self.gateway.policy();
        let view = policy.for_request(self.caller.as_deref(), self.toolset.as_deref());
        if view.is_unrestricted() {
            return true;
        }
        let catalog = self.gateway.catalog();
        let Some((server, _)) = resource_target(&catalog, uri) else {
            return false;
        };
        view.sees(ItemKind::Resource, Some(&server), uri)
    }

    /// A digest of what the caller sees of `list` now; `None` when no rule applies to it (it sees
    /// everything, and every change is its to hear).
    fn view_digest(&self, list: List) -> Option<u64> {
        let policy = self.gateway.policy();
        let view = policy.for_request(self.caller.as_deref(), self.toolset.as_deref());
        if view.is_unrestricted() {
            return None;
        }
        let catalog = self.gateway.catalog();
        let mut hasher = DefaultHasher::new();
        let add = |hasher: &mut DefaultHasher, kind: ItemKind, entries: &[Entry]| {
            for e in entries.iter().filter(|e| view.sees_entry(kind, e)) {
                e.raw.hash(hasher);
            }
            // A boundary, so that two lists cannot run into each other.
            0xffu8.hash(hasher);
        };
        match list {
            List::Tools => {
                if self.gateway.settings().discovery != Discovery::Search && !view.search_only() {
                    add(&mut hasher, ItemKind::Tool, &catalog.tools);
                }
                for name in builtin::NAMES {
                    view.sees(ItemKind::Tool, None, name).hash(&mut hasher);
                }
                for raw in self.gateway.hosted_visible(&view, self.caller.as_deref()) {
                    raw.hash(&mut hasher);
                }
            }
            List::Prompts => add(&mut hasher, ItemKind::Prompt, &catalog.prompts),
            List::Resources => {
                add(&mut hasher, ItemKind::Resource, &catalog.resources);
                add(&mut hasher, ItemKind::Resource, &catalog.templates);
            }
        }
        Some(hasher.finish())
    }
}
