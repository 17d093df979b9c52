//! `manifold doctor` as a person runs it: the host probe, a real strict sandbox's report, each
//! stdio server's resolved sandbox, and exit 1 naming a server whose `require` is unmet.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// Every control the sandbox reports, as doctor prints it.
const CONTROLS: &[&str] = &[
    "namespaces",
    "filesystem",
    "network",
    "memory",
    "pids",
    "cpu",
    "rlimits",
    "no_new_privs",
    "landlock",
    "seccomp",
    "tree_kill",
];

fn doctor(dir: &Path, config: &str) -> (i32, String, String) {
    let launcher =
        manifold_testkit::workspace_binary("manifold-sandbox", "manifold-sandbox-exec").unwrap();
    assert_eq!(launcher.parent(), Path::new(MANIFOLD).parent());
    let path = dir.join("manifold.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(MANIFOLD)
        .args(["doctor", "--config", path.to_str().unwrap()])
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// World-searchable: a sandboxed server under a root gateway runs as nobody and binds as it.
fn scratch(label: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = manifold_testkit::fresh_dir(label).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn config(dir: &Path, extra: &str) -> String {
    format!(
        "[gateway]\ndata_dir = \"{}\"\n\n\
         [servers.tight]\ncommand = \"/bin/cat\"\n[servers.tight.sandbox]\nprofile = \"strict\"\n\n\
         [servers.loose]\ncommand = \"/bin/cat\"\n[servers.loose.sandbox]\nprofile = \"off\"\n{extra}",
        dir.join("data").display()
    )
}

#[test]
fn doctor_prints_probe_real_report_and_each_server_and_exits_0() {
    let dir = scratch("cli-doctor-ok");
    let (code, out, err) = doctor(&dir, &config(&dir, ""));
    assert_eq!(code, 0, "{out}\n{err}");
    for probe in [
        "user_namespaces",
        "landlock",
        "seccomp",
        "cgroup_v1",
        "cgroup_v2",
        "cgroup.kill",
    ] {
        assert!(out.contains(&format!("  {probe} ")), "{probe}: {out}");
    }
    let (host, rest) = out.split_once("strict sandbox around /bin/true:").unwrap();
    assert!(host.contains("ABI"), "{host}");
    let (strict, servers) = rest.split_once("servers:").unwrap();
    for control in CONTROLS {
        let line = strict
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{control} ")))
            .unwrap_or_else(|| panic!("{control} missing: {strict}"));
        assert!(line.contains("enforced"), "{line}");
    }
    assert!(
        servers.contains("  tight: profile strict, network none")
            && servers.contains("require [filesystem, network]"),
        "{servers}"
    );
    assert!(
        servers.contains("  loose: profile off: unsandboxed"),
        "{servers}"
    );
    assert!(servers.contains("    would start"), "{servers}");
}

/// `profile = "network"` gives the host's network, which the sandbox reports as `off`, so
/// requiring `network` can never be met: the server would be refused at start.
#[test]
fn doctor_names_an_unmet_require_and_exits_1() {
    let dir = scratch("cli-doctor-unmet");
    let extra = "\n[servers.wide]\ncommand = \"/bin/cat\"\n[servers.wide.sandbox]\n\
                 profile = \"network\"\nrequire = [\"network\"]\n";
    let (code, out, err) = doctor(&dir, &config(&dir, extra));
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("  wide: profile network, network host"),
        "{out}"
    );
    assert!(
        out.contains("would not start: required network is not enforced"),
        "{out}"
    );
    assert!(
        err.contains("1 server(s) would not start: wide: required network"),
        "{err}"
    );
    assert!(
        out.contains("    would start"),
        "the strict server still starts: {out}"
    );
}

/// What the exposure rule makes visible for a server's command, a program that is not there,
/// and a container engine left to its container.
#[test]
fn doctor_lists_what_a_command_sees_a_missing_program_and_a_container_engine() {
    let dir = scratch("cli-doctor-sees");
    let app = dir.join("app");
    std::fs::create_dir_all(&app).unwrap();
    let script = app.join("server.py");
    std::fs::write(&script, "print()\n").unwrap();
    let extra = format!(
        "\n[servers.py]\ncommand = \"python3\"\nargs = [\"{}\"]\n\n\
         [servers.gone]\ncommand = \"no-such-mcp-server\"\nenv = {{ PATH = \"/usr/bin:/bin\" }}\n\n\
         [servers.image]\ncommand = \"docker\"\nargs = [\"run\", \"-i\", \"--rm\", \"mcp/x\"]\n",
        script.display()
    );
    let (_, out, err) = doctor(&dir, &config(&dir, &extra));
    let servers = out.split_once("servers:").unwrap().1;
    // The script's dir (and python's own install, where it is not a system dir).
    let py = servers.split_once("  py: ").unwrap().1;
    let sees = py.lines().nth(1).unwrap();
    assert!(
        sees.starts_with(
            "    sees read-only besides the system dirs and the lists above (its command's needs): "
        ) && sees.contains(&app.display().to_string()),
        "{servers}\n{err}"
    );
    assert!(
        servers.contains("    its program: \"no-such-mcp-server\" is not an executable file in any dir of the PATH it gets (/usr/bin:/bin)"),
        "{servers}"
    );
    assert!(
        servers.contains("  image: profile default (none written), a container engine"),
        "{servers}"
    );
}
