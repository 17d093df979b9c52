//! The `[sandbox]` and `[servers.NAME.sandbox]` tables: defaults, merging, and each refusal with
//! the place and message a user sees.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use manifold_config::{Config, FixedEnvironment, ServerKind};
use manifold_sandbox::{Control, Network, SandboxSpec};
use manifold_upstream::transport::stdio::StdioSandbox;

fn load(text: &str) -> Result<Config, Vec<String>> {
    let text = format!("[gateway]\ndata_dir = \"/var/lib/mf\"\n{text}");
    let env = FixedEnvironment::new().with_var("HOME", "/home/ada");
    Config::from_str_with(&text, "m.toml", Some(Path::new("/etc/manifold")), &env)
        .map_err(|e| e.iter().map(|e| e.render()).collect())
}

fn sandbox_of(config: &Config, name: &str) -> StdioSandbox {
    match &config.server(name).unwrap().kind {
        ServerKind::Stdio { spec, .. } => spec.sandbox.clone(),
        ServerKind::Http { .. } => panic!("{name} is not stdio"),
    }
}

fn spec_of(config: &Config, name: &str) -> SandboxSpec {
    match sandbox_of(config, name) {
        StdioSandbox::On(spec) => *spec,
        other => panic!("{name} is not sandboxed: {other:?}"),
    }
}

const TWO: &str =
    "\n[servers.a]\ncommand = \"/bin/true\"\n\n[servers.b]\ncommand = \"/bin/true\"\n";

fn default_of(config: &Config, name: &str) -> SandboxSpec {
    match sandbox_of(config, name) {
        StdioSandbox::Default(spec) => *spec,
        other => panic!("{name} does not have the default profile: {other:?}"),
    }
}

#[test]
fn no_profile_anywhere_is_strict_with_nothing_required() {
    let c = load(TWO).unwrap();
    let dirs = PathBuf::from("/var/lib/mf/sandbox/a");
    let mut want = SandboxSpec::new(
        dirs.join("workspace"),
        dirs.join("output"),
        dirs.join("home"),
    );
    want.require = Vec::new();
    assert_eq!(default_of(&c, "a"), want);
    assert_eq!(
        default_of(&c, "b").workspace,
        PathBuf::from("/var/lib/mf/sandbox/b/workspace")
    );
}

#[test]
fn the_default_profile_lets_a_package_runner_reach_its_registries_only() {
    let c = load(
        "\n[servers.a]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]\n\
         [servers.a.env]\nnpm_config_registry = \"https://npm.internal.example/\"\n\
         [servers.b]\ncommand = \"/usr/bin/uvx\"\nargs = [\"mcp-server-time\"]\n\
         [servers.c]\ncommand = \"node\"\n\
         [servers.d]\ncommand = \"npx\"\n[servers.d.sandbox]\nprofile = \"strict\"\n",
    )
    .unwrap();
    let a = default_of(&c, "a");
    assert_eq!(a.network, Network::Allow);
    for host in ["registry.npmjs.org", "pypi.org", "npm.internal.example"] {
        assert!(
            a.allow_hosts.iter().any(|h| h == host),
            "{host} in {:?}",
            a.allow_hosts
        );
    }
    assert_eq!(default_of(&c, "b").network, Network::Allow);
    let plain = default_of(&c, "c");
    assert_eq!((plain.network, plain.allow_hosts.len()), (Network::None, 0));
    let written = spec_of(&c, "d");
    assert_eq!(
        (written.network, written.allow_hosts.len()),
        (Network::None, 0),
        "a written strict profile keeps its network closed"
    );
}

#[test]
fn the_default_profile_makes_the_dirs_the_command_line_names_writable_and_starts_in_cwd() {
    let base = std::env::temp_dir().join(format!("manifold-config-handed-{}", std::process::id()));
    let notes = base.join("notes");
    let repo = base.join("repo");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::create_dir_all(&repo).unwrap();
    let c = load(&format!(
        "\n[servers.a]\ncommand = \"node\"\nargs = [\"/\", \"{}\", \"--repository={}\"]\ncwd = \"{}\"\n\
         [servers.b]\ncommand = \"node\"\nargs = [\"{}\"]\n[servers.b.sandbox]\nprofile = \"strict\"\n",
        notes.display(),
        repo.display(),
        repo.display(),
        notes.display(),
    ))
    .unwrap();
    std::fs::remove_dir_all(&base).unwrap();
    let a = default_of(&c, "a");
    assert_eq!(a.read_write, vec![repo.clone(), notes]);
    assert_eq!(a.workdir, Some(repo));
    let b = spec_of(&c, "b");
    assert!(
        b.read_write.is_empty() && b.workdir.is_none(),
        "a written strict profile hands nothing writable: {b:?}"
    );
}

#[test]
fn strict_uses_the_sandbox_defaults_with_dirs_under_data_dir() {
    let c =
        load("\n[servers.a]\ncommand = \"/bin/true\"\n[servers.a.sandbox]\nprofile = \"strict\"\n")
            .unwrap();
    let got = spec_of(&c, "a");
    let dirs = PathBuf::from("/var/lib/mf/sandbox/a");
    let want = SandboxSpec::new(
        dirs.join("workspace"),
        dirs.join("output"),
        dirs.join("home"),
    );
    assert_eq!(got, want);
}

#[test]
fn an_explicit_off_is_kept_apart_from_the_default() {
    let c = load(&format!(
        "[sandbox]\nprofile = \"strict\"\n{TWO}[servers.b.sandbox]\nprofile = \"off\"\n"
    ))
    .unwrap();
    assert!(matches!(sandbox_of(&c, "a"), StdioSandbox::On(_)));
    assert_eq!(sandbox_of(&c, "b"), StdioSandbox::Off);
}

#[test]
fn read_write_lists_add_up_like_read_only_and_relative_paths_follow_the_config() {
    let c = load(&format!(
        "[sandbox]\nprofile = \"strict\"\nread_write = [\"/srv/shared\"]\n\
         {TWO}[servers.b.sandbox]\nread_write = [\"notes\"]\n"
    ))
    .unwrap();
    assert_eq!(
        spec_of(&c, "a").read_write,
        vec![PathBuf::from("/srv/shared")]
    );
    assert_eq!(
        spec_of(&c, "b").read_write,
        vec![
            PathBuf::from("/srv/shared"),
            PathBuf::from("/etc/manifold/notes")
        ]
    );
    let refused = load(&format!(
        "[sandbox]\nprofile = \"strict\"\nread_write = \"/srv/shared\"\n{TWO}"
    ))
    .unwrap_err()
    .join("\n");
    assert!(refused.contains("read_write"), "{refused}");
    assert!(
        refused.contains("read_write = [\"/srv/notes\"]"),
        "{refused}"
    );
}

#[test]
fn server_keys_override_the_defaults_and_read_only_lists_add_up() {
    let c = load(&format!(
        "[sandbox]\nprofile = \"strict\"\nmemory = \"2GiB\"\npids = 100\nread_only = [\"/opt/node\"]\n\
         {TWO}[servers.b.sandbox]\nprofile = \"network\"\nworkspace = \"notes\"\nread_only = [\"/srv/venv\"]\n\
         tmp_size = \"8M\"\npids = 64\ncpu = 0.5\nfile_size = 4194304\nopen_files = 512\nseccomp = false\n\
         require = [\"filesystem\", \"memory\"]\n"
    ))
    .unwrap();
    let a = spec_of(&c, "a");
    assert_eq!((a.memory, a.pids, a.network), (2 << 30, 100, Network::None));
    assert_eq!(a.read_only, vec![PathBuf::from("/opt/node")]);
    let b = spec_of(&c, "b");
    assert_eq!(b.workspace, PathBuf::from("/etc/manifold/notes"));
    assert_eq!(
        b.read_only,
        vec![PathBuf::from("/opt/node"), PathBuf::from("/srv/venv")]
    );
    assert_eq!(
        (
            b.tmp_size,
            b.memory,
            b.pids,
            b.cpu_millis,
            b.file_size,
            b.open_files,
            b.seccomp
        ),
        (8 << 20, 2 << 30, 64, 500, 4 << 20, 512, false)
    );
    assert_eq!(b.network, Network::Host);
    assert_eq!(b.require, vec![Control::Filesystem, Control::Memory]);
}

#[test]
fn host_network_does_not_require_the_network_control_by_default() {
    let c = load("\n[servers.a]\ncommand = \"/bin/true\"\n[servers.a.sandbox]\nprofile = \"strict\"\nnetwork = \"host\"\n")
        .unwrap();
    let a = spec_of(&c, "a");
    assert_eq!(
        (a.network, a.require),
        (Network::Host, vec![Control::Filesystem])
    );
}

#[test]
fn allow_reads_hosts_and_private_ranges_and_loopback_is_a_network() {
    let c = load(&format!(
        "[sandbox]\nprofile = \"strict\"\nallow_private = [\"10.0.0.0/8\"]\n{TWO}[servers.a.sandbox]\nnetwork = \"allow\"\nallow_hosts = [\"api.github.com\", \"*.example.com\", \"example.com:8443\"]\n[servers.b.sandbox]\nnetwork = \"loopback\"\n"
    ))
    .unwrap();
    let a = spec_of(&c, "a");
    assert_eq!(a.network, Network::Allow);
    assert_eq!(
        a.allow_hosts,
        ["api.github.com", "*.example.com", "example.com:8443"]
    );
    assert_eq!(a.allow_private, ["10.0.0.0/8"]);
    assert_eq!(a.require, vec![Control::Filesystem, Control::Network]);
    assert_eq!(spec_of(&c, "b").network, Network::Loopback);
}

#[test]
fn bad_allow_list_entries_are_refused_where_written() {
    let errors = load(
        "\n[servers.a]\ncommand = \"/bin/true\"\n[servers.a.sandbox]\nprofile = \"strict\"\nnetwork = \"allow\"\nallow_hosts = [\"ok.test\", \"a.*.com\", \"10.0.0.1\"]\nallow_private = [\"10.0.0.0/33\"]\n",
    )
    .unwrap_err();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0].contains(
            "servers.a.sandbox.allow_hosts[1] = \"a.*.com\": has a `*` other than a leading `*.`"
        ),
        "{errors:#?}"
    );
    assert!(
        errors[1].contains("allow_hosts[2] = \"10.0.0.1\": is an IP address"),
        "{errors:#?}"
    );
    assert!(
        errors[2].contains("allow_private[0] = \"10.0.0.0/33\": has a prefix length outside"),
        "{errors:#?}"
    );
}

#[test]
fn allow_hosts_with_another_network_is_refused() {
    let errors = load(
        "\n[servers.a]\ncommand = \"/bin/true\"\n[servers.a.sandbox]\nprofile = \"strict\"\nnetwork = \"none\"\nallow_hosts = [\"example.com\"]\n",
    )
    .unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("servers.a.sandbox.network = \"none\": is not \"allow\", so allow_hosts and allow_private would be ignored"),
        "{errors:#?}"
    );
}

#[test]
fn unknown_keys_words_and_controls_get_did_you_mean() {
    let errors = load(
        "\n[servers.a]\ncommand = \"/bin/true\"\n[servers.a.sandbox]\nprofile = \"strikt\"\nmemroy = 1\nrequire = [\"seccom\"]\n",
    )
    .unwrap_err();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors[0].contains("m.toml:7:11: error: servers.a.sandbox.profile = \"strikt\": is not one of strict, network, off") && errors[0].contains("did you mean \"strict\"?"), "{errors:#?}");
    assert!(
        errors[1].contains("m.toml:8:1: error: servers.a.sandbox.memroy: unknown key")
            && errors[1].contains("did you mean \"memory\"?"),
        "{errors:#?}"
    );
    assert!(
        errors[2].contains("servers.a.sandbox.require[0] = \"seccom\": is not a sandbox control")
            && errors[2].contains("did you mean \"seccomp\"?"),
        "{errors:#?}"
    );
}

#[test]
fn out_of_range_limits_and_gateway_wide_dirs_are_refused_at_their_place() {
    let errors = load(
        "[sandbox]\nworkspace = \"/w\"\nmemory = \"1M\"\npids = 1\ncpu = \"2\"\ntmp_size = \"5TB\"\n",
    )
    .unwrap_err();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert!(
        errors[0]
            .contains("m.toml:4:13: error: sandbox.workspace = \"/w\": is one server's own dir"),
        "{errors:#?}"
    );
    assert!(
        errors[1]
            .contains("sandbox.memory = \"1M\": is below the smallest allowed (33554432 bytes)"),
        "{errors:#?}"
    );
    assert!(
        errors[2].contains("sandbox.pids = 1: is outside 8..=65536"),
        "{errors:#?}"
    );
    assert!(
        errors[3].contains(
            "sandbox.cpu = \"2\": is not a valid value; write CPUs as a number without quotes"
        ),
        "{errors:#?}"
    );
    assert!(
        errors[4].contains("sandbox.tmp_size = \"5TB\": is not a valid value"),
        "{errors:#?}"
    );
}

#[test]
fn a_sandbox_on_an_http_server_is_refused() {
    let errors = load(
        "\n[servers.a]\nurl = \"https://mcp.example.com/mcp\"\n[servers.a.sandbox]\nprofile = \"strict\"\n",
    )
    .unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("servers.a.sandbox: is set on an HTTP server"),
        "{errors:#?}"
    );
}

#[test]
fn a_container_engine_with_no_profile_and_no_table_of_its_own_is_left_to_its_container() {
    let c = load(
        "[sandbox]\nread_only = [\"/opt/shared\"]\n\n\
         [servers.gh]\ncommand = \"docker\"\nargs = [\"run\", \"-i\", \"--rm\", \"mcp/github\"]\n\n\
         [servers.pod]\ncommand = \"/usr/bin/podman\"\nargs = [\"run\", \"-i\", \"img\"]\n\n\
         [servers.sized]\ncommand = \"docker\"\n[servers.sized.sandbox]\nmemory = \"512MiB\"\n\n\
         [servers.boxed]\ncommand = \"docker\"\n[servers.boxed.sandbox]\nprofile = \"strict\"\n\n\
         [servers.plain]\ncommand = \"/opt/docker/server\"\n",
    )
    .unwrap();
    assert_eq!(sandbox_of(&c, "gh"), StdioSandbox::ContainerEngine);
    assert_eq!(sandbox_of(&c, "pod"), StdioSandbox::ContainerEngine);
    // A table of its own asks for Manifold's box: the default profile, or the one written.
    assert_eq!(default_of(&c, "sized").memory, 512 * 1024 * 1024);
    assert_eq!(spec_of(&c, "boxed").network, Network::None);
    // Only the engine's own name counts.
    assert!(matches!(sandbox_of(&c, "plain"), StdioSandbox::Default(_)));
}
