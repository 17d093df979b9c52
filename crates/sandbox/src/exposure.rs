//! The one rule for which host paths a sandboxed command needs to see without the user listing
//! them: its resolved executable (every symlink hop and the final target, and the `node_modules`
//! tree that target lies in), the install prefix of each (a venv, a node or pyenv install: the
//! parent of its `bin/`), the interpreter a `#!` line names, the script or package tree an
//! interpreter is given, and every argument that is an existing absolute host path. All of them
//! are exposed read-only; the minimal root already holds the system dirs, so paths under them are
//! left out.
//!
//! Kept apart from the launcher so the gateway can compute it (on the host, before the child
//! exists) and so it is one function with its own tests rather than rules spread over callers.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::root::SYSTEM_DIRS;
use crate::spec::{DEFAULT_ROOT_RUN_AS, SandboxSpec};

/// Symlink hops followed from one executable before giving up (the kernel's own ELOOP bound).
pub const MAX_SYMLINK_HOPS: usize = 40;
/// `#!` lines followed in a chain (script -> interpreter script -> ...): the kernel allows 4.
pub const MAX_SHEBANG_DEPTH: usize = 4;
/// Bytes read from the head of an executable to find its `#!` line (the kernel reads 256).
pub const SHEBANG_MAX_BYTES: usize = 256;
/// Programs whose first non-option argument is a script or package they run: its tree is exposed.
pub const INTERPRETERS: &[&str] = &[
    "node", "nodejs", "deno", "bun", "python", "python3", "pypy3", "ruby", "perl", "php", "bash",
    "sh", "dash",
];

/// What the rule needs besides the command: the PATH the command is looked up on, the directory
/// relative program paths resolve against, and the home dir it must never expose whole.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    /// The child's PATH (colon separated), as the launcher will see it.
    pub path: Option<String>,
    /// Where a relative program path (one with a slash) resolves; the gateway's cwd.
    pub cwd: PathBuf,
    /// The gateway user's home: neither it nor an ancestor is ever exposed as a whole dir.
    pub home: Option<PathBuf>,
}

/// The host paths `program args` needs read-only, deduplicated, without paths inside a system
/// dir or inside another listed dir, in a stable order. Relative arguments are not exposed: inside
/// the sandbox they resolve against `/workspace`.
pub fn exposed_paths<S: AsRef<OsStr>>(program: &str, args: &[S], lookup: &Lookup) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let resolved = find_program(program, lookup);
    if let Some(exe) = &resolved {
        expose_executable(exe, lookup, 0, &mut found);
        // An npm bin link (`node_modules/.bin/NAME`, or a link to a package's script from
        // anywhere) runs a script that imports its package's siblings: the tree holds them.
        if let Some(tree) = final_target(exe).as_deref().and_then(node_modules_tree) {
            found.push(tree);
        }
    }
    let runs_script = resolved
        .as_deref()
        .and_then(final_target)
        .is_some_and(|target| is_interpreter(&target))
        || is_interpreter(Path::new(program));
    let args: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
    if runs_script && let Some(script) = args.iter().find(|a| !a.to_string_lossy().starts_with('-'))
    {
        let script = Path::new(script);
        if script.is_absolute() && script.exists() {
            found.push(script_tree(script, lookup));
        }
    }
    for arg in args {
        let text = arg.to_string_lossy();
        // `--flag=/path` names a path as much as `/path` does.
        let value = text.split_once('=').map_or(text.as_ref(), |(_, v)| v);
        let path = Path::new(value);
        if path.is_absolute() && path.exists() {
            found.push(path.to_path_buf());
        }
    }
    minimal(found)
}

/// Whether every directory above `path` is searchable by `uid`/`gid`: the launcher binds as the
/// server's uid, so a path under an unsearchable dir (e.g. /root, 0700, for nobody) cannot be
/// bound. Returns the first dir that blocks.
pub fn blocked_for(path: &Path, uid: u32, gid: u32) -> Option<PathBuf> {
    if uid == 0 {
        return None;
    }
    let mut dir = path.parent();
    let mut blocking = None;
    while let Some(d) = dir {
        if let Ok(meta) = std::fs::metadata(d)
            && !permits(&meta, uid, gid, SEARCH)
        {
            blocking = Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    blocking
}

/// The "other" bit of each permission; [`permits`] shifts it to the owner's or group's.
const SEARCH: u32 = 0o001;
const WRITE: u32 = 0o002;

/// Whether the mode bits of `meta` grant `bit` to `uid`/`gid` (owner, else group, else other;
/// root is granted everything).
fn permits(meta: &std::fs::Metadata, uid: u32, gid: u32, bit: u32) -> bool {
    let shift = if meta.uid() == uid {
        6
    } else if meta.gid() == gid {
        3
    } else {
        0
    };
    uid == 0 || meta.mode() & (bit << shift) != 0
}

/// Whether `uid`/`gid` may not create files in `dir` (a `read_write` path the server could not
/// write although it is bound writable: the gateway is root, the server nobody).
pub fn unwritable_for(dir: &Path, uid: u32, gid: u32) -> bool {
    std::fs::metadata(dir).is_ok_and(|meta| !permits(&meta, uid, gid, WRITE))
}

/// The rule applied to one server: what to add to its spec's `read_only`, what the rule found
/// but the server's uid cannot reach (each with the dir that blocks it), and the `read_write`
/// paths that uid cannot write; the caller logs the last two.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exposure {
    pub read_only: Vec<PathBuf>,
    pub unreachable: Vec<(PathBuf, PathBuf)>,
    pub unwritable: Vec<PathBuf>,
}

/// Whether a launcher started by this process can clone mount trees (the root gateway's case,
/// see `root.rs`): then binds need no path search by the server's uid. Asked of the kernel once
/// with a clone of `/dev/null`, dropped at once.
pub fn launcher_clones_trees() -> bool {
    static CLONES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CLONES.get_or_init(|| {
        nix::unistd::geteuid().is_root() && crate::sys::clone_tree(Path::new("/dev/null")).is_ok()
    })
}

/// [`exposed_paths`] for `spec`, without what its `read_only` already covers, split by whether
/// the uid the launcher will bind as (the spec's `run_as` under a root gateway, else the
/// gateway's own) can search every dir above each path. A root gateway whose launcher clones
/// mount trees reaches every path.
pub fn expose_command<S: AsRef<OsStr>>(
    spec: &SandboxSpec,
    program: &str,
    args: &[S],
    lookup: &Lookup,
) -> Exposure {
    let server_uid = if nix::unistd::geteuid().is_root() {
        spec.run_as.unwrap_or(DEFAULT_ROOT_RUN_AS)
    } else {
        (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    };
    // The uid whose path search the binds need; none when the launcher clones mount trees.
    let searcher = (!launcher_clones_trees()).then_some(server_uid);
    let mut exposure = Exposure::default();
    let (uid, gid) = server_uid;
    exposure.unwritable = (spec.read_write.iter())
        .filter(|dir| unwritable_for(dir, uid, gid))
        .cloned()
        .collect();
    for path in exposed_paths(program, args, lookup) {
        let listed = spec.read_only.iter().chain(&spec.read_write);
        if listed.into_iter().any(|listed| path.starts_with(listed)) {
            continue;
        }
        match searcher.and_then(|(uid, gid)| blocked_for(&path, uid, gid)) {
            Some(dir) => exposure.unreachable.push((path, dir)),
            None => exposure.read_only.push(path),
        }
    }
    exposure
}

/// Where `program` is found as the launcher will run it: relative to `lookup.cwd` when it has a
/// slash, else the first executable file of that name on `lookup.path`.
pub fn find_program(program: &str, lookup: &Lookup) -> Option<PathBuf> {
    if program.contains('/') {
        let path = lookup.cwd.join(program);
        return path.exists().then_some(path);
    }
    lookup
        .path
        .as_deref()
        .unwrap_or_default()
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
}

/// Each symlink hop, its install prefix, and the same for the `#!` interpreter of the target.
fn expose_executable(exe: &Path, lookup: &Lookup, depth: usize, found: &mut Vec<PathBuf>) {
    let mut hop = absolute(exe, &lookup.cwd);
    for _ in 0..MAX_SYMLINK_HOPS {
        found.push(hop.clone());
        if let Some(prefix) = install_prefix(&hop, lookup) {
            found.push(prefix);
        }
        match std::fs::read_link(&hop) {
            Ok(target) => {
                let base = hop.parent().map(Path::to_path_buf).unwrap_or_default();
                hop = normalise(&base.join(target));
            }
            Err(_) => break,
        }
    }
    if depth >= MAX_SHEBANG_DEPTH {
        return;
    }
    if let Some(interpreter) = shebang(&hop, lookup) {
        expose_executable(&interpreter, lookup, depth + 1, found);
    }
}

/// The interpreter a `#!` line names, resolved through `env` (with or without `-S`) on PATH.
fn shebang(path: &Path, lookup: &Lookup) -> Option<PathBuf> {
    let mut head = Vec::with_capacity(SHEBANG_MAX_BYTES);
    std::fs::File::open(path)
        .ok()?
        .take(SHEBANG_MAX_BYTES as u64)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if Path::new(interpreter).file_name() == Some(OsStr::new("env")) {
        let name = words.find(|w| !w.starts_with('-'))?;
        return find_program(name, lookup);
    }
    Some(PathBuf::from(interpreter))
}

/// The parent of `bin/` (or `sbin/`) holding `exe`, when it looks like an install (a venv's
/// `pyvenv.cfg` or a `lib/` dir), or of `shims/`, when it looks like a version manager's root
/// (pyenv's and rbenv's `libexec/` and `versions/`, asdf's `installs/`: a shim execs the manager,
/// which runs an interpreter from there); never the root, a system dir, the home dir or its
/// ancestor.
fn install_prefix(exe: &Path, lookup: &Lookup) -> Option<PathBuf> {
    let dir = exe.parent()?;
    let name = dir.file_name()?;
    let prefix = dir.parent()?;
    let installed = if name == "bin" || name == "sbin" {
        prefix.join("pyvenv.cfg").is_file() || prefix.join("lib").is_dir()
    } else if name == "shims" {
        ["libexec", "versions", "installs"]
            .iter()
            .any(|d| prefix.join(d).is_dir())
    } else {
        false
    };
    (installed && !too_wide(prefix, lookup)).then(|| prefix.to_path_buf())
}

/// What to expose for an interpreter's script: the outermost `node_modules` tree holding it (a
/// package imports its siblings), else its own dir, else (that dir too wide) the file alone.
fn script_tree(script: &Path, lookup: &Lookup) -> PathBuf {
    let script = normalise(script);
    if let Some(tree) = node_modules_tree(&script) {
        return tree;
    }
    match script.parent() {
        Some(dir) if script.is_file() && !too_wide(dir, lookup) => dir.to_path_buf(),
        _ => script,
    }
}

/// The outermost `node_modules` dir above `path`, if any.
fn node_modules_tree(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .filter(|a| a.file_name() == Some(OsStr::new("node_modules")))
        .last()
        .map(Path::to_path_buf)
}

/// `/`, a system dir, the home dir or one of its ancestors: never exposed as a whole.
fn too_wide(dir: &Path, lookup: &Lookup) -> bool {
    dir.parent().is_none()
        || under_system_dir(dir)
        || lookup.home.as_deref().is_some_and(|h| h.starts_with(dir))
}

fn is_interpreter(path: &Path) -> bool {
    let Some(name) = path.file_name().map(OsStr::to_string_lossy) else {
        return false;
    };
    // python3.11, node22 and the like count as their family.
    let family = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.contains(&family) || INTERPRETERS.contains(&name.as_ref())
}

fn final_target(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

fn under_system_dir(path: &Path) -> bool {
    let mut parts = path.components();
    matches!(parts.next(), Some(Component::RootDir))
        && parts
            .next()
            .is_some_and(|first| SYSTEM_DIRS.iter().any(|d| first.as_os_str() == *d))
}

fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    normalise(&cwd.join(path))
}

/// Drops `.` and folds `..` lexically: symlink hops are followed one by one, not resolved here.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Without system paths, duplicates and paths inside another listed dir.
fn minimal(found: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in found {
        if under_system_dir(&path) || kept.contains(&path) {
            continue;
        }
        kept.push(path);
    }
    let dirs: Vec<PathBuf> = kept.iter().filter(|p| p.is_dir()).cloned().collect();
    kept.retain(|p| !dirs.iter().any(|d| d != p && p.starts_with(d)));
    kept
}

#[cfg(test)]
mod tests;
