//! The only `unsafe` in manifold-sandbox, kept small so it can be audited in one sitting: forking the
//! single-threaded launcher, handing the report socket to it as fd 3, adopting that fd, asking the
//! kernel for its Landlock ABI, bringing `lo` up (SIOCSIFFLAGS), adopting the proxy listener fd
//! received by SCM_RIGHTS, and cloning and attaching mount trees (`open_tree`, `move_mount`, which
//! nix does not wrap). Everything else uses safe nix/landlock/seccompiler calls.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
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

/// Sets `lo` up in the current network namespace (needs CAP_NET_ADMIN there, which the launcher
/// holds right after unsharing its user namespace).
pub fn loopback_up() -> Result<(), nix::errno::Errno> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    use std::os::fd::AsRawFd;
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: ifreq is plain C data (a name array and a union of integers and addresses), for
    // which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name and writes ifru_flags of the ifreq we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(nix::errno::Errno::last());
    }
    // SAFETY: SIOCGIFFLAGS succeeded, so ifru_flags is the field the kernel wrote.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: SIOCSIFFLAGS only reads the ifreq we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(nix::errno::Errno::last());
    }
    Ok(())
}

/// Takes ownership of an fd that arrived in an SCM_RIGHTS message. Sound: the kernel installed it
/// in this process for this message only, so nothing else owns it.
pub fn adopt_received_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: see above; each received fd is adopted exactly once by the caller's loop.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `move_mount`'s flag for "the source is the fd itself" (linux/mount.h).
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn c_path(path: &Path) -> Result<CString, nix::errno::Errno> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| nix::errno::Errno::EINVAL)
}

/// A detached copy of the mount tree at `path` (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`),
/// close-on-exec. Cloning needs CAP_SYS_ADMIN over the caller's mount namespace: a root launcher
/// has it before it gives up its uid; anyone else gets EPERM.
pub fn clone_tree(path: &Path) -> Result<OwnedFd, nix::errno::Errno> {
    let path = c_path(path)?;
    let flags =
        libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as libc::c_uint;
    // SAFETY: open_tree reads a NUL-terminated path that outlives the call and returns a new fd
    // or -1; nothing else is touched.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(nix::errno::Errno::last());
    }
    let fd = RawFd::try_from(fd).map_err(|_| nix::errno::Errno::EBADF)?;
    // SAFETY: the kernel just returned this fd to this process; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches a tree from [`clone_tree`] at `target` (`move_mount`); the tree then belongs to the
/// caller's mount namespace, so the uid it runs as never has to search the tree's host path.
pub fn attach_tree(tree: &OwnedFd, target: &Path) -> Result<(), nix::errno::Errno> {
    let target = c_path(target)?;
    let empty = c"";
    // SAFETY: move_mount reads two NUL-terminated paths that outlive the call and an fd this
    // process owns; it returns 0 or -1.
    let done = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if done < 0 {
        return Err(nix::errno::Errno::last());
    }
    Ok(())
}
