//! Why: legacy Streamable HTTP clients expect `Mcp-Session-Id` (missing -> 400, unknown or ended
//! -> 404). Ids are a counter, so checking one is an atomic load; the set of ended ids is only
//! consulted once some session has been ended.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const PREFIX: &str = "echo-";

/// The legacy sessions this process has opened.
#[derive(Default)]
pub struct Sessions {
    opened: AtomicU64,
    ended: Mutex<HashSet<u64>>,
    any_ended: AtomicBool,
}

impl Sessions {
    /// Opens a session and returns its id.
    pub fn open(&self) -> String {
        let n = self.opened.fetch_add(1, Ordering::Relaxed);
        format!("{PREFIX}{n:x}")
    }

    /// Whether `id` names a session that is open.
    pub fn is_open(&self, id: &str) -> bool {
        let Some(n) = number(id) else {
            return false;
        };
        if n >= self.opened.load(Ordering::Relaxed) {
            return false;
        }
        !self.any_ended.load(Ordering::Relaxed) || !self.ended_set().contains(&n)
    }

    /// Ends `id`; false when it was not open.
    pub fn end(&self, id: &str) -> bool {
        if !self.is_open(id) {
            return false;
        }
        let Some(n) = number(id) else {
            return false;
        };
        self.ended_set().insert(n);
        self.any_ended.store(true, Ordering::Relaxed);
        true
    }

    fn ended_set(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn number(id: &str) -> Option<u64> {
    let digits = id.strip_prefix(PREFIX)?;
    if digits.is_empty() || digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opened_ids_are_open_until_ended_and_others_never_are() {
        let sessions = Sessions::default();
        let a = sessions.open();
        let b = sessions.open();
        assert!(sessions.is_open(&a) && sessions.is_open(&b));
        assert!(!sessions.is_open("echo-2"), "not opened yet");
        assert!(!sessions.is_open("other-0"));
        assert!(!sessions.is_open("echo-+1"));
        assert!(sessions.end(&a));
        assert!(!sessions.is_open(&a));
        assert!(sessions.is_open(&b));
        assert!(!sessions.end(&a), "ending twice");
    }
}
