//! Builds the server's minimal root inside its new mount namespace: a read-only tmpfs holding
//! read-only binds of the system dirs, a few /etc files and `read_only` paths (a listed symlink
//! whose target is shown anyway stays a symlink), rw binds of workspace,
//! output and home, a tmpfs /tmp, a small /dev and a fresh /proc; then pivot_root into it and detach
//! the host's root. A root launcher clones each source's mount tree (`open_tree`) before it gives
//! up its uid and attaches the clones inside (`move_mount`), so the server's uid (nobody) never
//! searches a host path: a program under `/root` (0700) can be bound as long as the program itself
//! is readable. Any other launcher cannot clone trees (EPERM) and binds by host path under the
//! staged `/oldroot` as the server's uid, so there every source and its parents must be searchable
//! by that uid (a plain fd opened before unshare belongs to the host's mount namespace and cannot
//! be bound: EINVAL).

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::statvfs::{FsFlags, statvfs};

use crate::spec::SandboxSpec;

/// The staging tmpfs and the new root's tmpfs hold only mount points and symlinks.
pub const ROOT_TMPFS_OPTIONS: &str = "size=4m,mode=0755";
/// `/dev` holds a few device mount points and symlinks.
pub const DEV_TMPFS_OPTIONS: &str = "size=64k,mode=0755";
/// System dirs taken from the host (read-only), or re-created as symlinks when they are symlinks.
pub const SYSTEM_DIRS: &[&str] = &["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];
/// /etc entries a server may need (users, name resolution, TLS roots, dynamic linker, timezone).
pub const ETC_ENTRIES: &[&str] = &[
    "passwd",
    "group",
    "hosts",
    "resolv.conf",
    "nsswitch.conf",
    "host.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl",
    "ca-certificates",
    "localtime",
    "os-release",
    "mime.types",
];
/// Device nodes bound in from the host.
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Where the server's writable dirs appear.
pub const WORKSPACE: &str = "/workspace";
pub const OUTPUT: &str = "/output";
pub const HOME: &str = "/home/sandbox";

/// One host path to bind into the new root.
pub struct Bind {
    source: PathBuf,
    inside: PathBuf,
    writable: bool,
    is_dir: bool,
    /// The source's mount tree, cloned while the launcher could (see the module comment).
    tree: Option<OwnedFd>,
}

/// What the new root is made of, gathered before the launcher gives up its uid.
pub struct RootPlan {
    binds: Vec<Bind>,
    symlinks: Vec<(PathBuf, PathBuf)>,
    /// `read_only` paths that are symlinks to something else the root shows, made as links
    /// (link, real target) once the binds are in place.
    listed_links: Vec<(PathBuf, PathBuf)>,
    tmp_size: u64,
}

impl RootPlan {
    /// Opens every bind source; a missing workspace/output/home or `read_only` path is an error.
    pub fn gather(spec: &SandboxSpec) -> Result<Self, String> {
        let mut plan = RootPlan {
            binds: Vec::new(),
            symlinks: Vec::new(),
            listed_links: Vec::new(),
            tmp_size: spec.tmp_size,
        };
        for dir in SYSTEM_DIRS {
            let host = Path::new("/").join(dir);
            match std::fs::read_link(&host) {
                Ok(target) => plan.symlinks.push((host, target)),
                Err(_) if host.is_dir() => plan.add(&host, &host, false)?,
                Err(_) => {}
            }
        }
        for entry in ETC_ENTRIES {
            let host = Path::new("/etc").join(entry);
            if host.exists() {
                plan.add(&host, &host, false)?;
            }
        }
        // Outer paths first, so that a path listed inside another is bound on top of it.
        let mut listed: Vec<(&PathBuf, bool)> = spec
            .read_only
            .iter()
            .map(|p| (p, false))
            .chain(spec.read_write.iter().map(|p| (p, true)))
            .collect();
        listed.sort_by_key(|(p, _)| p.components().count());
        // What the listed paths that are not links show inside, at their own paths.
        let shown: Vec<PathBuf> = (listed.iter())
            .filter(|(p, _)| std::fs::symlink_metadata(p).is_ok_and(|m| !m.is_symlink()))
            .map(|(p, _)| (*p).clone())
            .collect();
        for (path, writable) in listed {
            match (!writable).then(|| link_to_shown(path, &shown)).flatten() {
                Some(target) => plan.listed_links.push((path.clone(), target)),
                None => plan.add(path, path, writable)?,
            }
        }
        plan.add(&spec.workspace, Path::new(WORKSPACE), true)?;
        plan.add(&spec.output, Path::new(OUTPUT), true)?;
        plan.add(&spec.home, Path::new(HOME), true)?;
        for dev in DEVICES {
            let host = Path::new("/dev").join(dev);
            if host.exists() {
                plan.add(&host, &host, true)?;
            }
        }
        Ok(plan)
    }

    fn add(&mut self, host: &Path, inside: &Path, writable: bool) -> Result<(), String> {
        let meta = std::fs::metadata(host)
            .map_err(|e| format!("{}: {e}; create it, make it searchable by the server's uid, or drop it from the spec", host.display()))?;
        let is_dir = meta.is_dir();
        // Symlinks (e.g. /etc/localtime) resolve against the host root, not the staged one.
        let source = std::fs::canonicalize(host).map_err(|e| format!("{}: {e}", host.display()))?;
        let tree = crate::sys::clone_tree(&source).ok();
        self.binds.push(Bind {
            source,
            inside: inside.to_path_buf(),
            writable,
            is_dir,
            tree,
        });
        Ok(())
    }

    /// Builds the root and pivots into it. Runs as pid 1 of the new namespaces, single-threaded.
    pub fn enter(&self) -> Result<(), String> {
        let fail = |what: &str, e: nix::Error| format!("{what}: {}", e.desc());
        let none: Option<&str> = None;
        mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
            .map_err(|e| fail("make / private", e))?;
        mount(
            Some("tmpfs"),
            "/tmp",
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(ROOT_TMPFS_OPTIONS),
        )
        .map_err(|e| fail("mount staging tmpfs", e))?;
        for dir in ["/tmp/newroot", "/tmp/oldroot"] {
            std::fs::create_dir(dir).map_err(|e| format!("mkdir {dir}: {e}"))?;
        }
        nix::unistd::chdir("/tmp").map_err(|e| fail("chdir staging", e))?;
        nix::unistd::pivot_root(".", "oldroot").map_err(|e| fail("pivot_root into staging", e))?;
        nix::unistd::chdir("/").map_err(|e| fail("chdir /", e))?;
        let new = Path::new("/newroot");
        mount(
            Some("tmpfs"),
            new,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(ROOT_TMPFS_OPTIONS),
        )
        .map_err(|e| fail("mount root tmpfs", e))?;
        for (link, target) in &self.symlinks {
            symlink(target, inside(new, link))
                .map_err(|e| format!("symlink {}: {e}", link.display()))?;
        }
        // The private /tmp and /dev go first so that no bind beneath them is hidden.
        make_dir(&new.join("tmp"))?;
        let tmp_options = format!("size={},mode=1777", self.tmp_size);
        mount(
            Some("tmpfs"),
            &new.join("tmp"),
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(tmp_options.as_str()),
        )
        .map_err(|e| fail("mount /tmp", e))?;
        make_dir(&new.join("dev"))?;
        mount(
            Some("tmpfs"),
            &new.join("dev"),
            Some("tmpfs"),
            MsFlags::MS_NOSUID,
            Some(DEV_TMPFS_OPTIONS),
        )
        .map_err(|e| fail("mount /dev", e))?;
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            symlink(target, new.join("dev").join(name))
                .map_err(|e| format!("symlink /dev/{name}: {e}"))?;
        }
        for bind in &self.binds {
            bind_into(new, bind)?;
        }
        for (link, target) in &self.listed_links {
            link_into(new, link, target)?;
        }
        make_dir(&new.join("proc"))?;
        let proc_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        mount(
            Some("proc"),
            &new.join("proc"),
            Some("proc"),
            proc_flags,
            none,
        )
        .map_err(|e| fail("mount /proc", e))?;
        let ro_root =
            MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        mount(none, new, none, ro_root, Some(ROOT_TMPFS_OPTIONS))
            .map_err(|e| fail("remount root read-only", e))?;
        nix::unistd::chdir(new).map_err(|e| fail("chdir new root", e))?;
        nix::unistd::pivot_root(".", ".").map_err(|e| fail("pivot_root into new root", e))?;
        umount2(".", MntFlags::MNT_DETACH).map_err(|e| fail("detach host root", e))?;
        nix::unistd::chdir("/").map_err(|e| fail("chdir /", e))?;
        Ok(())
    }
}

/// The real target of `path` when `path` is a symlink and the root shows that target anyway
/// (inside a system dir, or inside or at a listed path that is not a link). Such a link is made
/// as a link, not bound as a copy of its target: a runtime that finds its entry point's siblings
/// from its real path (node, for an npm bin link) then finds them inside as it does outside.
fn link_to_shown(path: &Path, shown: &[PathBuf]) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_symlink() {
        return None;
    }
    let target = std::fs::canonicalize(path).ok()?;
    let in_system_dir = target
        .components()
        .nth(1)
        .is_some_and(|first| SYSTEM_DIRS.iter().any(|d| first.as_os_str() == *d));
    let in_listed = shown.iter().any(|shown| target.starts_with(shown));
    (in_system_dir || in_listed).then_some(target)
}

/// Makes `link` (a host path) inside the new root point at `target`; where something is there
/// already (the link lies inside a listed dir, which shows it as it is), leaves that.
fn link_into(new: &Path, link: &Path, target: &Path) -> Result<(), String> {
    let at = inside(new, link);
    if std::fs::symlink_metadata(&at).is_ok() {
        return Ok(());
    }
    if let Some(parent) = at.parent() {
        make_dir(parent)?;
    }
    symlink(target, &at).map_err(|e| format!("symlink {}: {e}", link.display()))
}

fn inside(new: &Path, path: &Path) -> PathBuf {
    new.join(path.strip_prefix("/").unwrap_or(path))
}

fn make_dir(path: &Path) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("mkdir {}: {e}", path.display()))
}

fn bind_into(new: &Path, bind: &Bind) -> Result<(), String> {
    let target = inside(new, &bind.inside);
    if bind.is_dir {
        make_dir(&target)?;
    } else {
        if let Some(parent) = target.parent() {
            make_dir(parent)?;
        }
        File::create(&target)
            .map_err(|e| format!("create mount point {}: {e}", target.display()))?;
    }
    let source = inside(Path::new("/oldroot"), &bind.source);
    let none: Option<&str> = None;
    let fail = |what: &str, e: nix::Error| {
        format!(
            "{what} {} at {}: {}; make it searchable by the server's uid",
            bind.source.display(),
            bind.inside.display(),
            e.desc()
        )
    };
    match &bind.tree {
        Some(tree) => crate::sys::attach_tree(tree, &target).map_err(|e| fail("attach", e))?,
        None => mount(
            Some(&source),
            &target,
            none,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            none,
        )
        .map_err(|e| fail("bind", e))?,
    }
    if bind.inside.starts_with("/dev") {
        return Ok(());
    }
    // A remount in a user namespace must keep the flags the host locked (noexec, atime).
    let locked = statvfs(&target)
        .map(|s| s.flags())
        .unwrap_or(FsFlags::empty());
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    for (fs, ms) in [
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if locked.contains(fs) {
            flags |= ms;
        }
    }
    if !bind.writable || locked.contains(FsFlags::ST_RDONLY) {
        flags |= MsFlags::MS_RDONLY;
    }
    mount(none, &target, none, flags, none).map_err(|e| fail("remount", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmpfs_bounds_are_small_and_sized() {
        assert!(ROOT_TMPFS_OPTIONS.starts_with("size=4m"));
        assert!(DEV_TMPFS_OPTIONS.starts_with("size=64k"));
        assert!(SYSTEM_DIRS.contains(&"usr") && DEVICES.contains(&"null"));
    }
}
