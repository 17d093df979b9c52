//! Call ids: the handle a client gets (in the tool result's `_meta`) to find its call in logs
//! and traces.
//!
//! 16 hex digits: a per-process random seed plus a counter, through a bijective mixer, so ids
//! never repeat within a process (2^64 calls), do not collide across replicas in practice, and
//! do not reveal how many calls a replica has served. One atomic add and one small string per
//! call.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static SEED: OnceLock<u64> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn seed() -> u64 {
    *SEED.get_or_init(|| {
        let mut bytes = [0u8; 8];
        match getrandom::fill(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes),
            // No randomness: ids stay unique within the process; only cross-replica uniqueness
            // weakens, so the clock stands in.
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed),
        }
    })
}

/// SplitMix64's finaliser: a bijection on u64 that scatters consecutive inputs.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A new call id.
pub fn next_call_id() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}", mix(seed().wrapping_add(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_are_sixteen_hex_digits_and_do_not_repeat() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| next_call_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }
}
