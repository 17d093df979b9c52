//! Locking a `std::sync::Mutex` without a panic path.
//!
//! The peer's critical sections only insert into and remove from maps, so a holder that panicked
//! cannot leave the data half-updated; carrying on with the inner value is safe and keeps every
//! lock site free of `unwrap`.

use std::sync::{Mutex, MutexGuard};

pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
