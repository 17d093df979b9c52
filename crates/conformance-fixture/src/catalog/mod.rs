//! The fixture's primitives: every tool, resource, resource template, prompt and completion the
//! conformance suite's server scenarios name, with the exact names and contents they expect.
//!
//! This module says *what* each primitive is and does; how a primitive reaches the client in each
//! era (results, `input_required`, tasks, SSE) is the engine's business.

pub mod completions;
pub mod media;
pub mod prompts;
pub mod resources;
pub mod tools;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The parts of the catalog that change while the fixture runs.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Whether `test_dynamic_tool` is listed (flipped by `test_trigger_tool_change`).
    dynamic_tool: AtomicBool,
    /// Whether `test_dynamic_prompt` is listed (flipped by `test_trigger_prompt_change`).
    dynamic_prompt: AtomicBool,
    /// How often `test://watched-resource` changed (bumped by `test_trigger_resource_update`).
    watched_version: AtomicU64,
}

impl Catalog {
    pub fn dynamic_tool(&self) -> bool {
        self.dynamic_tool.load(Ordering::SeqCst)
    }

    pub fn dynamic_prompt(&self) -> bool {
        self.dynamic_prompt.load(Ordering::SeqCst)
    }

    pub fn watched_version(&self) -> u64 {
        self.watched_version.load(Ordering::SeqCst)
    }

    /// Flips `test_dynamic_tool`; returns whether it is listed now.
    pub fn toggle_dynamic_tool(&self) -> bool {
        !self.dynamic_tool.fetch_xor(true, Ordering::SeqCst)
    }

    /// Flips `test_dynamic_prompt`; returns whether it is listed now.
    pub fn toggle_dynamic_prompt(&self) -> bool {
        !self.dynamic_prompt.fetch_xor(true, Ordering::SeqCst)
    }

    /// Records a change of `test://watched-resource`; returns its new version.
    pub fn bump_watched(&self) -> u64 {
        self.watched_version.fetch_add(1, Ordering::SeqCst) + 1
    }
}
