//! The only `unsafe` in manifold-sandbox, kept small so it can be audited in one sitting: forking the
//! single-threaded launcher, handing the report pipe to it as fd 3, adopting that fd, and asking the
//! kernel for its Landlock ABI. Everything else uses safe nix/landlock/seccompiler calls.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The fd number the launcher finds its report pipe on.
pub const REPORT_FD: RawFd = 3;

/// Makes `fd` (a CLOEXEC pipe end open in the parent) appear as `REPORT_FD`, without CLOEXEC, in the
/// launcher only. The closure runs between fork and exec of a possibly multi-threaded parent, so it
/// makes only the async-signal-safe calls `dup2` and `fcntl`, allocates nothing and takes no lock.
pub fn pass_report_fd(command: &mut Command, fd: RawFd) {
    let hook = move || {
        if fd == REPORT_FD {
            // SAFETY: fcntl on an fd this child owns; async-signal-safe.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            // SAFETY: as above; clearing FD_CLOEXEC so the fd survives exec.
            if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0
            {
                return Err(std::io::Error::last_os_error());
            }
        // SAFETY: dup2 is async-signal-safe; the target of dup2 never has FD_CLOEXEC.
        } else if unsafe { libc::dup2(fd, REPORT_FD) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: the hook only calls async-signal-safe functions on fds it was given (see above).
    unsafe {
        command.pre_exec(hook);
    }
}

/// Takes ownership of `REPORT_FD` in the launcher, or None when it is not open (the launcher was run
/// by hand). Sound: by protocol with `pass_report_fd` nothing else in this process owns fd 3, and it
/// is checked to be open before it is wrapped.
pub fn adopt_report_fd() -> Option<OwnedFd> {
    // SAFETY: F_GETFD only reads the fd's flags.
    let open = unsafe { libc::fcntl(REPORT_FD, libc::F_GETFD) } >= 0;
    // SAFETY: fd 3 is open and owned by nobody else in this process (see above).
    open.then(|| unsafe { OwnedFd::from_raw_fd(REPORT_FD) })
}

/// Forks the launcher. Sound only in a single-threaded process, which the caller checks with
/// `thread_count() == 1` first: the child then has a consistent heap and no locks held by others.
pub fn fork_single_threaded() -> nix::Result<nix::unistd::ForkResult> {
    if thread_count() != Some(1) {
        return Err(nix::errno::Errno::EDEADLK);
    }
    // SAFETY: this process has exactly one thread (checked above), so fork cannot copy a lock held
    // by another thread.
    unsafe { nix::unistd::fork() }
}

/// Threads of this process, from /proc/self/status.
pub fn thread_count() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The kernel's Landlock ABI version, or the errno (ENOSYS: not built in; EOPNOTSUPP: not enabled).
pub fn landlock_abi() -> Result<i64, nix::errno::Errno> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
    // SAFETY: with a null attr and size 0 and the VERSION flag the kernel only returns a number; no
    // memory is read or written.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        Err(nix::errno::Errno::last())
    } else {
        Ok(v)
    }
}
