//! Why: what an idle gateway holds resident is mostly not its own data. It is the allocator's
//! arena, committed and touched up front, and the binary's code pages, most of which only ran
//! once while starting (configuration, migrations, the command line). Each is set right here,
//! at the moments that matter: before `main` (the allocator's option), first thing in `main`
//! (huge pages), and once serving (the start-up code).
//!
//! The calls below are the only unsafe code of the binary: the allocator's option setter (a
//! plain C function of mimalloc) and `madvise`, used only on read-only mappings of the binary
//! that hold no private copies, where dropping pages loses nothing (they are read back from the
//! file on their next use).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr::NonNull;
use std::time::Duration;

use nix::sys::mman::{MmapAdvise, madvise};

/// mimalloc's `mi_option_arena_eager_commit`: the fifth of `mi_option_e` in the v2 and v3 headers
/// of `libmimalloc-sys` 0.1.49, which Cargo.toml pins exactly (`=0.1.49`) for this number.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Runs before `main`, from the ELF constructors (`.init_array`), because Rust's runtime
/// allocates before `main` and mimalloc reserves its arena at the first allocation: set from
/// `main`, the option came too late for the one arena a gateway uses.
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENA_ON_DEMAND: extern "C" fn() = commit_arena_on_demand;

/// mimalloc commits its arena as it is used instead of all at once: eager commit held about
/// 3.4 MiB of an idle gateway's 6.4 MiB of anonymous memory (docs/benchmarks.md).
extern "C" fn commit_arena_on_demand() {
    // SAFETY: `mi_option_set` stores a number in mimalloc's option table and allocates
    // nothing; it may run before mimalloc's own initialization, which keeps a set option.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
}

/// First thing in `main`, before the runtime's threads and buffers exist: transparent huge
/// pages off. The kernel's `madvise` mode, which mimalloc asks for on its arenas, made an idle
/// gateway resident in 2 MiB steps (about 11 MiB of its 29 MiB).
pub fn tune_at_start() {
    let _ = nix::sys::prctl::set_thp_disable(true);
}

/// How long after listening the start-up code is released a second time: upstreams start
/// in the background after the gateway listens, and the periodic store polls (pins, authored
/// tools; every second) run for the first time, each touching code that only starting needs.
pub const STARTUP_SETTLE: Duration = Duration::from_secs(3);

/// Releases the start-up code (see [`release_startup_code`]) now, once listening, and again
/// [`STARTUP_SETTLE`] later, on the current runtime.
pub fn release_startup_code_now_and_once_settled() {
    fn release(when: &'static str) {
        match release_startup_code() {
            Ok(released) => tracing::debug!(
                when,
                mappings = released.mappings,
                resident_kib = released.resident_bytes / 1024,
                "released the code pages start-up touched"
            ),
            Err(e) => {
                tracing::debug!(when, error = %e, "could not read this process's mappings; its start-up code stays resident")
            }
        }
    }
    release("listening");
    tokio::spawn(async {
        tokio::time::sleep(STARTUP_SETTLE).await;
        release("settled");
    });
}

/// What [`release_startup_code`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub mappings: usize,
    /// Resident bytes of those mappings before the release.
    pub resident_bytes: u64,
}

/// Drops the binary's read-only pages from this process's page tables once it is serving: the
/// code and constants that ran while starting stay in the page cache (nothing is read from disk
/// again unless memory ran short) but stop counting as resident, and what the serving path uses
/// comes back on first touch (a minor fault per 64 KiB). Writable mappings, and read-only ones
/// holding private copies (relocated constants), are left alone: dropping those would lose data.
pub fn release_startup_code() -> std::io::Result<Released> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mut released = Released::default();
    for mapping in read_only_file_mappings(&smaps, &exe.to_string_lossy()) {
        let Some(start) = NonNull::new(mapping.start as *mut c_void) else {
            continue;
        };
        // SAFETY: the range is one whole mapping of the binary's file, read-only and without
        // private (anonymous) pages, so MADV_DONTNEED only unmaps page-cache pages that the
        // next access maps again with the same contents; no Rust value lives there.
        if unsafe { madvise(start, mapping.len, MmapAdvise::MADV_DONTNEED) }.is_ok() {
            released.mappings += 1;
            released.resident_bytes = released
                .resident_bytes
                .saturating_add(mapping.resident_kib.saturating_mul(1024));
        }
    }
    Ok(released)
}

/// One mapping from `/proc/self/smaps` that may be released.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    len: usize,
    resident_kib: u64,
}

/// The mappings of `path` in `smaps` text that are not writable and hold no anonymous pages.
fn read_only_file_mappings(smaps: &str, path: &str) -> Vec<Mapping> {
    struct Open {
        range: Option<(usize, usize)>,
        releasable: bool,
        resident_kib: u64,
        anonymous_kib: Option<u64>,
    }
    let mut found = Vec::new();
    let mut open: Option<Open> = None;
    let close = |open: Option<Open>, found: &mut Vec<Mapping>| {
        if let Some(Open {
            range: Some((start, end)),
            releasable: true,
            resident_kib,
            anonymous_kib: Some(0),
        }) = open
        {
            found.push(Mapping {
                start,
                len: end - start,
                resident_kib,
            });
        }
    };
    for line in smaps.lines() {
        if let Some(Header { range, perms, name }) = mapping_header(line) {
            close(open.take(), &mut found);
            open = Some(Open {
                range,
                releasable: name == path && perms.starts_with('r') && !perms.contains('w'),
                resident_kib: 0,
                anonymous_kib: None,
            });
            continue;
        }
        let Some(current) = open.as_mut() else {
            continue;
        };
        if let Some(kib) = field_kib(line, "Rss:") {
            current.resident_kib = kib;
        } else if let Some(kib) = field_kib(line, "Anonymous:") {
            current.anonymous_kib = Some(kib);
        }
    }
    close(open, &mut found);
    found
}

/// A mapping's header line in `smaps`.
struct Header<'a> {
    /// The address range, when it reads as one.
    range: Option<(usize, usize)>,
    perms: &'a str,
    name: &'a str,
}

/// The header a line of `smaps` is, if it is one.
fn mapping_header(line: &str) -> Option<Header<'_>> {
    // Five fields one space apart, then padding and the path (which may hold spaces).
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let (start, end) = range.split_once('-')?;
    let perms = fields.next()?;
    if perms.len() != 4 {
        return None;
    }
    let (_offset, _device, _inode) = (fields.next()?, fields.next()?, fields.next()?);
    let name = fields.next().unwrap_or("").trim();
    let range = match (
        usize::from_str_radix(start, 16),
        usize::from_str_radix(end, 16),
    ) {
        (Ok(start), Ok(end)) if end > start => Some((start, end)),
        _ => None,
    };
    Some(Header { range, perms, name })
}

fn field_kib(line: &str, field: &str) -> Option<u64> {
    line.strip_prefix(field)?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
5555aaa00000-5555aab00000 r--p 00000000 fe:01 42 /opt/manifold
Size:               1024 kB
Rss:                 300 kB
Anonymous:             0 kB
5555aab00000-5555abb00000 r-xp 00100000 fe:01 42 /opt/manifold
Size:              16384 kB
Rss:               15000 kB
Anonymous:             0 kB
5555abb00000-5555abc00000 r--p 01100000 fe:01 42 /opt/manifold
Size:               1024 kB
Rss:                1024 kB
Anonymous:           900 kB
5555abc00000-5555abd00000 rw-p 01200000 fe:01 42 /opt/manifold
Size:               1024 kB
Rss:                  64 kB
Anonymous:            64 kB
7f0000000000-7f0000100000 r-xp 00000000 fe:01 7 /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               1024 kB
Rss:                 900 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r--p 00000000 fe:01 9 /opt/manifold (deleted)
Size:               1024 kB
Rss:                  10 kB
Anonymous:             0 kB
";

    #[test]
    fn only_the_binarys_read_only_mappings_without_private_pages_are_released() {
        let found = read_only_file_mappings(SMAPS, "/opt/manifold");
        assert_eq!(
            found,
            [
                Mapping {
                    start: 0x5555_aaa0_0000,
                    len: 0x10_0000,
                    resident_kib: 300
                },
                Mapping {
                    start: 0x5555_aab0_0000,
                    len: 0x100_0000,
                    resident_kib: 15000
                },
            ],
            "the relocated constants (anonymous pages), the data, libc and another file stay"
        );
    }

    #[test]
    fn a_mapping_whose_anonymous_line_is_missing_or_unreadable_stays() {
        let smaps = "\
1000-2000 r-xp 00000000 fe:01 42 /opt/manifold
Rss:                   4 kB
zzzz-2000 r-xp 00000000 fe:01 42 /opt/manifold
Rss:                   4 kB
Anonymous:             0 kB
";
        assert!(read_only_file_mappings(smaps, "/opt/manifold").is_empty());
    }

    #[test]
    fn the_arena_option_is_set_before_main() {
        // mimalloc's default is 2 ("on where the OS overcommits"); only the constructor sets 0.
        // SAFETY: `mi_option_get` reads a number from mimalloc's option table.
        let value = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_EAGER_COMMIT) };
        assert_eq!(value, 0, "the .init_array constructor did not run");
    }

    #[test]
    fn releasing_keeps_the_process_running_and_its_code_callable() {
        let released = release_startup_code().unwrap_or_default();
        // This test binary's code was just dropped from its page tables and runs on: the next
        // instructions fault their pages back in.
        let sum: u64 = (1..=100u64).sum();
        assert_eq!(sum, 5050);
        assert!(
            released.mappings >= 1,
            "the test binary has a read-only code mapping"
        );
    }
}
