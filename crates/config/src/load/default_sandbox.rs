//! What a stdio server gets when no `profile` is written anywhere: the strict profile, plus what
//! its own command line hands it. Kept apart from the table reader because these rules read the
//! server's command (and the host), not the TOML: the dirs it is given by absolute path and its
//! `cwd` become writable, a package runner (`npx`, `uvx`, ...) may reach its registry through
//! the egress proxy, a container engine (`docker`, ...) is left to its own container, and
//! nothing is `require`d, so a host without user namespaces or without the
//! launcher starts the server degraded (and says so) instead of refusing it.

use std::path::{Path, PathBuf};

use manifold_upstream::transport::stdio::StdioSpec;

use crate::environment::{Environment, Var};

/// Programs that fetch the package they run from a registry on first use.
pub const PACKAGE_RUNNERS: &[&str] = &[
    "npx", "npm", "pnpm", "pnpx", "yarn", "bunx", "bun", "uvx", "uv", "pipx",
];

/// Programs that run a server in a container of their own (`docker run -i --rm IMAGE`): under
/// the default profile the container is the server's sandbox, and the CLI starts unboxed.
pub const CONTAINER_ENGINES: &[&str] = &["docker", "podman", "nerdctl"];

/// Whether `command` is a container engine's CLI, by its file name.
pub fn is_container_engine(command: &str) -> bool {
    CONTAINER_ENGINES.contains(&file_name(command))
}

/// The public registries those runners fetch from (npm, Yarn's mirror of it, PyPI's index and
/// its file host).
pub const PUBLIC_REGISTRY_HOSTS: &[&str] = &[
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "pypi.org",
    "files.pythonhosted.org",
];

/// Variables naming the registry a runner uses instead of (or beside) the public one.
pub const REGISTRY_VARIABLES: &[&str] = &[
    "npm_config_registry",
    "NPM_CONFIG_REGISTRY",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_INDEX",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
];

/// Whether `command` is a package runner, by its file name (`/usr/bin/npx` counts).
pub fn is_package_runner(command: &str) -> bool {
    PACKAGE_RUNNERS.contains(&file_name(command))
}

fn file_name(command: &str) -> &str {
    Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command)
}

/// The hosts a package runner may reach: the public registries and every host a registry
/// variable names (the server's own `env` first, then the gateway's environment).
pub fn registry_hosts(spec: &StdioSpec, env: &dyn Environment) -> Vec<String> {
    let mut hosts: Vec<String> = PUBLIC_REGISTRY_HOSTS
        .iter()
        .map(|h| (*h).to_owned())
        .collect();
    for name in REGISTRY_VARIABLES {
        let value = spec
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| match env.var(name) {
                Var::Set(v) => Some(v),
                Var::Unset | Var::NotUnicode => None,
            });
        // uv and pip take several URLs separated by spaces.
        for text in value.iter().flat_map(|v| v.split_whitespace()) {
            let host = url::Url::parse(text)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned));
            if let Some(host) = host
                && !hosts.contains(&host)
            {
                hosts.push(host);
            }
        }
    }
    hosts
}

/// The dirs the command line names by absolute path (`/p` or `--flag=/p`) that exist, and `cwd`:
/// the server was handed them to work in, so the default makes them writable. The root, the
/// gateway user's home and its ancestors are never among them (naming one is not taken as
/// leave to write everything below it); they stay read-only.
pub fn handed_dirs(spec: &StdioSpec, home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let named = spec.args.iter().map(|arg| {
        let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
        PathBuf::from(value)
    });
    for dir in spec.cwd.iter().cloned().chain(named) {
        let too_wide = dir.parent().is_none() || home.is_some_and(|h| h.starts_with(&dir));
        if dir.is_absolute() && dir.is_dir() && !too_wide && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: &str, args: &[&str]) -> StdioSpec {
        StdioSpec {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..StdioSpec::default()
        }
    }

    #[test]
    fn container_engines_are_known_by_file_name_and_others_are_not() {
        assert!(is_container_engine("docker"));
        assert!(is_container_engine("/usr/bin/podman"));
        assert!(!is_container_engine("dockerd-rootless.sh"));
        assert!(!is_container_engine("/opt/docker/server"));
    }

    #[test]
    fn runners_are_known_by_file_name_and_others_are_not() {
        assert!(is_package_runner("npx"));
        assert!(is_package_runner("/usr/local/bin/uvx"));
        assert!(!is_package_runner("node"));
        assert!(!is_package_runner("/opt/npx-like/server"));
    }

    #[test]
    fn a_registry_variable_in_the_server_env_adds_its_hosts() {
        let mut s = spec("uvx", &["mcp-server-time"]);
        s.env.push((
            "UV_INDEX_URL".into(),
            "https://pypi.internal.example/simple https://mirror.example:8443/simple".into(),
        ));
        s.env
            .push(("npm_config_registry".into(), "not a url".into()));
        let env =
            crate::FixedEnvironment::new().with_var("PIP_INDEX_URL", "https://pypi.org/simple");
        let hosts = registry_hosts(&s, &env);
        assert!(hosts.iter().any(|h| h == "pypi.org"));
        assert!(hosts.iter().any(|h| h == "pypi.internal.example"));
        assert!(hosts.iter().any(|h| h == "mirror.example"));
        assert_eq!(
            hosts.len(),
            PUBLIC_REGISTRY_HOSTS.len() + 2,
            "an unparsable value adds nothing: {hosts:?}"
        );
    }

    #[test]
    fn handed_dirs_are_existing_absolute_dirs_but_never_the_root_or_the_home() {
        let base = std::env::temp_dir().join(format!("manifold-handed-{}", std::process::id()));
        let home = base.join("home");
        let notes = home.join("notes");
        std::fs::create_dir_all(&notes).unwrap_or_else(|e| panic!("mkdir: {e}"));
        let file = notes.join("a.txt");
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("write: {e}"));
        let mut s = spec(
            "node",
            &[
                "/",
                home.to_str().unwrap_or_default(),
                &format!("--root={}", notes.display()),
                file.to_str().unwrap_or_default(),
                "relative/dir",
                "/no/such/dir",
            ],
        );
        s.cwd = Some(notes.clone());
        let dirs = handed_dirs(&s, Some(&home));
        let _ = std::fs::remove_dir_all(&base);
        assert_eq!(dirs, vec![notes], "only the notes dir, once");
    }
}
