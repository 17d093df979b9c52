//! Pins kept in memory, for gateways embedded without a store and for tests: the same conditional
//! writes and revision counter as the `manifold` binary's store-backed repository, so everything
//! built on [`PinRepository`] behaves the same over either.

use std::sync::Mutex;

use super::{PinFile, PinFuture, PinRepository, PinWrite};

/// A [`PinRepository`] in memory: lost when the process ends.
#[derive(Debug, Default)]
pub struct MemoryPins {
    inner: Mutex<(PinFile, u64)>,
}

impl MemoryPins {
    pub fn new() -> MemoryPins {
        MemoryPins::default()
    }

    /// Starts from `file` (revision 0).
    pub fn with_file(file: PinFile) -> MemoryPins {
        MemoryPins {
            inner: Mutex::new((file, 0)),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, (PinFile, u64)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is stored now.
    pub fn file(&self) -> PinFile {
        self.inner().0.clone()
    }
}

impl PinRepository for MemoryPins {
    fn snapshot(&self) -> PinFuture<'_, (PinFile, u64)> {
        let now = self.inner().clone();
        Box::pin(async move { Ok(now) })
    }

    fn revision(&self) -> PinFuture<'_, u64> {
        let revision = self.inner().1;
        Box::pin(async move { Ok(revision) })
    }

    fn apply<'a>(&'a self, writes: &'a [PinWrite]) -> PinFuture<'a, u64> {
        let mut inner = self.inner();
        for w in writes {
            w.apply_to(&mut inner.0);
        }
        inner.1 += 1;
        let revision = inner.1;
        Box::pin(async move { Ok(revision) })
    }

    fn approve<'a>(&'a self, server: &'a str, now: u64) -> PinFuture<'a, Vec<String>> {
        let mut inner = self.inner();
        let approved = inner.0.approve(server, now);
        if !approved.is_empty() {
            inner.1 += 1;
        }
        Box::pin(async move { Ok(approved) })
    }

    fn describe(&self) -> String {
        "memory (not kept when Manifold stops)".to_owned()
    }
}
