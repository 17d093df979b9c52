//! The unit tests of `exposure.rs`, kept beside it so the file reads as the code it tests.

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

#[test]
fn an_npm_bin_link_exposes_the_node_modules_tree_its_script_lies_in() {
    let t = tempfile::tempdir().unwrap();
    let node = t.path().join("node-v22/bin/node");
    write_exe(&node, "\x7fELF");
    std::fs::create_dir_all(t.path().join("node-v22/lib")).unwrap();
    let modules = t.path().join("project/node_modules");
    let script = modules.join("@scope/server/dist/index.js");
    write_exe(&script, "#!/usr/bin/env node\nimport '@scope/sdk';\n");
    let bin_link = modules.join(".bin/server");
    std::fs::create_dir_all(bin_link.parent().unwrap()).unwrap();
    symlink("../@scope/server/dist/index.js", &bin_link).unwrap();
    let home = t.path().join("home");
    // Run by its bin link's path: the package imports its siblings (`@scope/sdk`), so the whole
    // tree is visible, the link stays a link inside it, and node comes from its install.
    let found = exposed_paths::<&str>(
        bin_link.to_str().unwrap(),
        &[],
        &lookup(&[node.parent().unwrap()], &home),
    );
    assert_eq!(found, vec![t.path().join("node-v22"), modules.clone()]);
    // A link from outside the tree exposes the link and the tree.
    let outside = t.path().join("tools/server");
    std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
    symlink(&bin_link, &outside).unwrap();
    let found = exposed_paths::<&str>(
        "server",
        &[],
        &lookup(&[outside.parent().unwrap(), node.parent().unwrap()], &home),
    );
    assert_eq!(found, vec![outside, t.path().join("node-v22"), modules]);
}
