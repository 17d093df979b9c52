//! The one rule for which host paths a sandboxed command needs to see without the user listing
//! them: its resolved executable (every symlink hop and the final target), the install prefix of
//! each (a venv, a node or pyenv install: the parent of its `bin/`), the interpreter a `#!` line
//! names, the script or package tree an interpreter is given, and every argument that is an
//! existing absolute host path. All of them are exposed read-only; the minimal root already holds
//! the system dirs, so paths under them are left out.
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
    let resolved = resolve_program(program, lookup);
    if let Some(exe) = &resolved {
        expose_executable(exe, lookup, 0, &mut found);
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

fn resolve_program(program: &str, lookup: &Lookup) -> Option<PathBuf> {
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
        return resolve_program(name, lookup);
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
    let outermost = script
        .ancestors()
        .filter(|a| a.file_name() == Some(OsStr::new("node_modules")))
        .last();
    if let Some(tree) = outermost {
        return tree.to_path_buf();
    }
    match script.parent() {
        Some(dir) if script.is_file() && !too_wide(dir, lookup) => dir.to_path_buf(),
        _ => script,
    }
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
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn write_exe(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn lookup(path: &[&Path], home: &Path) -> Lookup {
        let path: Vec<String> = path.iter().map(|p| p.display().to_string()).collect();
        Lookup {
            path: Some(path.join(":")),
            cwd: PathBuf::from("/"),
            home: Some(home.to_path_buf()),
        }
    }

    #[test]
    fn a_venv_entry_point_exposes_the_venv_and_the_interpreter_install_it_links_to() {
        let t = tempfile::tempdir().unwrap();
        let pyenv = t.path().join("pyenv/versions/3.11.7");
        write_exe(&pyenv.join("bin/python3.11"), "\x7fELF");
        std::fs::create_dir_all(pyenv.join("lib")).unwrap();
        let venv = t.path().join("srv/.venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = x\n").unwrap();
        symlink(pyenv.join("bin/python3.11"), venv.join("bin/python3")).unwrap();
        let entry = venv.join("bin/mcp-server-time");
        write_exe(
            &entry,
            &format!("#!{}\nimport x\n", venv.join("bin/python3").display()),
        );
        let found = exposed_paths::<&str>(
            "mcp-server-time",
            &[],
            &lookup(&[&venv.join("bin")], &t.path().join("home")),
        );
        assert_eq!(found, vec![venv.clone(), pyenv.clone()]);
    }

    #[test]
    fn a_version_manager_shim_exposes_the_manager_root_it_execs() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("home/.pyenv");
        std::fs::create_dir_all(root.join("libexec")).unwrap();
        std::fs::create_dir_all(root.join("versions")).unwrap();
        write_exe(&root.join("shims/python3"), "#!/bin/sh\nexec pyenv exec\n");
        let home = t.path().join("home");
        let found = exposed_paths::<&str>("python3", &[], &lookup(&[&root.join("shims")], &home));
        assert_eq!(found, vec![root.clone()]);
        // A dir named shims that is no manager's (nothing beside it) exposes the shim alone.
        let lone = t.path().join("tools/shims/run");
        write_exe(&lone, "#!/bin/sh\n");
        let found = exposed_paths::<&str>("run", &[], &lookup(&[lone.parent().unwrap()], &home));
        assert_eq!(found, vec![lone]);
    }

    #[test]
    fn every_symlink_hop_and_the_final_target_are_exposed_and_env_shebangs_follow_path() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("opt/tool-1.2/tool");
        write_exe(&real, "#!/usr/bin/env -S mytool-interp --flag\n");
        let interp = t.path().join("interp/mytool-interp");
        write_exe(&interp, "\x7fELF");
        let hop = t.path().join("links/tool");
        std::fs::create_dir_all(hop.parent().unwrap()).unwrap();
        symlink("../opt/tool-1.2/tool", &hop).unwrap();
        let first = t.path().join("path/tool");
        std::fs::create_dir_all(first.parent().unwrap()).unwrap();
        symlink(&hop, &first).unwrap();
        let found = exposed_paths::<&str>(
            "tool",
            &[],
            &lookup(
                &[first.parent().unwrap(), interp.parent().unwrap()],
                &t.path().join("home"),
            ),
        );
        assert_eq!(found, vec![first, hop, real, interp]);
    }

    #[test]
    fn a_node_package_script_exposes_its_outermost_node_modules_tree() {
        let t = tempfile::tempdir().unwrap();
        let node = t.path().join("node-v22/bin/node");
        write_exe(&node, "\x7fELF");
        std::fs::create_dir_all(t.path().join("node-v22/lib")).unwrap();
        let modules = t.path().join("peers/node_modules");
        let script = modules.join("@scope/pkg/node_modules/inner/dist/index.js");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        let found = exposed_paths(
            node.to_str().unwrap(),
            &["--no-warnings", script.to_str().unwrap()],
            &lookup(&[], &t.path().join("home")),
        );
        assert_eq!(found, vec![t.path().join("node-v22"), modules]);
    }

    #[test]
    fn path_arguments_are_exposed_and_relative_ones_and_system_dirs_are_not() {
        let t = tempfile::tempdir().unwrap();
        let tool = t.path().join("tools/serve");
        write_exe(&tool, "\x7fELF");
        let repo = t.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let notes = t.path().join("notes.txt");
        std::fs::write(&notes, "").unwrap();
        let found = exposed_paths(
            tool.to_str().unwrap(),
            &[
                "--repository",
                repo.to_str().unwrap(),
                &format!("--notes={}", notes.display()),
                "relative/dir",
                "/usr/share",
                "/does/not/exist",
            ],
            &lookup(&[], &t.path().join("home")),
        );
        assert_eq!(found, vec![tool, repo, notes]);
    }

    #[test]
    fn a_script_beside_the_home_exposes_only_itself_never_the_home() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let script = home.join("server.py");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(&script, "").unwrap();
        let bin = t.path().join("py/bin/python3");
        write_exe(&bin, "\x7fELF");
        let found = exposed_paths(
            bin.to_str().unwrap(),
            &[script.to_str().unwrap()],
            &lookup(&[], &home),
        );
        // py/ has no lib/ nor pyvenv.cfg: not an install, so the binary alone.
        assert_eq!(found, vec![bin, script]);
    }

    #[test]
    fn a_symlink_loop_and_a_shebang_loop_end_within_their_bounds() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let b = t.path().join("b");
        symlink(&b, &a).unwrap();
        symlink(&a, &b).unwrap();
        // A loop is not runnable, so the command exposes nothing; its walk still ends.
        let l = lookup(&[], t.path());
        assert!(exposed_paths::<&str>(a.to_str().unwrap(), &[], &l).is_empty());
        let mut walked = Vec::new();
        expose_executable(&a, &l, 0, &mut walked);
        assert_eq!(walked.len(), MAX_SYMLINK_HOPS);
        assert_eq!(minimal(walked), vec![a.clone(), b.clone()]);
        let selfish = t.path().join("self");
        write_exe(&selfish, &format!("#!{}\n", selfish.display()));
        let found = exposed_paths::<&str>(selfish.to_str().unwrap(), &[], &lookup(&[], t.path()));
        assert_eq!(found, vec![selfish]);
        assert_eq!(MAX_SYMLINK_HOPS, 40);
        assert_eq!(MAX_SHEBANG_DEPTH, 4);
    }

    #[test]
    fn a_shebang_past_the_head_bound_is_not_read() {
        let t = tempfile::tempdir().unwrap();
        let interp = t.path().join("interp/run");
        write_exe(&interp, "\x7fELF");
        let long = t.path().join("long");
        let pad = "x".repeat(SHEBANG_MAX_BYTES);
        write_exe(&long, &format!("#!/usr/bin/env {pad} run\n"));
        let short = t.path().join("short");
        write_exe(&short, "#!/usr/bin/env run\n");
        let l = lookup(&[interp.parent().unwrap()], &t.path().join("home"));
        assert_eq!(
            exposed_paths::<&str>(long.to_str().unwrap(), &[], &l),
            vec![long]
        );
        assert_eq!(
            exposed_paths::<&str>(short.to_str().unwrap(), &[], &l),
            vec![short, interp]
        );
    }

    #[test]
    fn unwritable_for_reads_the_owner_group_and_other_bits() {
        let t = tempfile::tempdir().unwrap();
        let me = std::fs::metadata(t.path()).unwrap();
        let stranger = me.uid().wrapping_add(12_345);
        let dir = t.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        for (mode, owner, other) in [
            (0o755, false, true),
            (0o757, false, false),
            (0o555, true, true),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let owner_refused = me.uid() != 0 && unwritable_for(&dir, me.uid(), me.gid());
            assert_eq!(owner_refused, owner && me.uid() != 0, "{mode:o} owner");
            assert_eq!(
                unwritable_for(&dir, stranger, stranger),
                other,
                "{mode:o} other"
            );
        }
    }

    #[test]
    fn blocked_for_names_the_dir_the_uid_cannot_search() {
        let t = tempfile::tempdir().unwrap();
        let closed = t.path().join("closed");
        std::fs::create_dir_all(closed.join("inner")).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let me = std::fs::metadata(t.path()).unwrap();
        let stranger = me.uid().wrapping_add(12_345);
        let file = closed.join("inner/x");
        assert_eq!(blocked_for(&file, stranger, stranger), Some(closed.clone()));
        assert_eq!(blocked_for(&file, me.uid(), me.gid()), None);
        let open = t.path().join("open");
        assert_eq!(blocked_for(&open.join("x"), stranger, stranger), None);
    }

    #[test]
    fn expose_command_leaves_out_what_read_only_or_read_write_already_covers() {
        let t = tempfile::tempdir().unwrap();
        let tool = t.path().join("tools/serve");
        write_exe(&tool, "\x7fELF");
        let data = t.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let mut spec = SandboxSpec::new("/w", "/o", "/h");
        spec.read_only = vec![t.path().join("tools")];
        let exposure = expose_command(
            &spec,
            tool.to_str().unwrap(),
            &[data.to_str().unwrap()],
            &lookup(&[], &t.path().join("home")),
        );
        assert_eq!(exposure.read_only, vec![data.clone()]);
        assert!(exposure.unreachable.is_empty());
        // A path the server may write is not exposed again read-only.
        spec.read_write = vec![data.clone()];
        let exposure = expose_command(
            &spec,
            tool.to_str().unwrap(),
            &[data.to_str().unwrap()],
            &lookup(&[], &t.path().join("home")),
        );
        assert!(exposure.read_only.is_empty(), "{exposure:?}");
    }
}
