//! Reads the gateway-wide `[sandbox]` defaults and each `[servers.NAME.sandbox]` table into the
//! stdio spec's `StdioSandbox`: the default profile (nothing written), explicitly off, or a resolved
//! `SandboxSpec` whose workspace, output and home default to dirs under `[gateway] data_dir`.
//!
//! Read in a pass of its own after the servers (whose reader accepts the `sandbox` key), so one
//! place merges the two layers: a server's keys override the defaults, `read_only` lists add up.

use std::path::PathBuf;

use manifold_sandbox::{Control, Network, SandboxSpec};
use manifold_upstream::transport::stdio::{StdioSandbox, StdioSpec};

use super::default_sandbox;
use crate::environment::{Environment, Var};
use toml::de::{DeTable, DeValue};

use super::reader::{Item, Reader, Show, key_path};
use crate::server::{ServerConfig, ServerKind};
use crate::settings::GatewaySection;

pub(crate) const SANDBOX_KEYS: &[&str] = &[
    "profile",
    "network",
    "allow_hosts",
    "allow_private",
    "workspace",
    "output",
    "home",
    "read_only",
    "read_write",
    "tmp_size",
    "memory",
    "pids",
    "cpu",
    "file_size",
    "open_files",
    "seccomp",
    "require",
];

/// Keys that name one server's own dirs, so they have no gateway-wide default.
const PER_SERVER_KEYS: &[&str] = &["workspace", "output", "home"];

const SANDBOX_HINTS: &[(&str, &str)] = &[
    ("read_only_paths", "write read_only = [\"/path\", ...]"),
    ("mounts", "write read_only = [\"/path\", ...]"),
    ("cpus", "write cpu = 0.5 (in CPUs)"),
    ("pids_max", "write pids = 256"),
    ("memory_max", "write memory = \"1GiB\""),
];

/// Smallest `memory`: below it node and python die before they answer `initialize`.
pub const MIN_MEMORY: u64 = 32 * 1024 * 1024;
/// Smallest `tmp_size` and `file_size`.
pub const MIN_FILE_BYTES: u64 = 1024 * 1024;
/// `pids` range: a server needs a few threads; above this the limit limits nothing.
pub const PIDS_RANGE: (u64, u64) = (8, 65_536);
/// `open_files` range.
pub const OPEN_FILES_RANGE: (u64, u64) = (16, 1_048_576);
/// `cpu` range in thousandths of a CPU (0.01 to 1024 CPUs).
pub const CPU_MILLIS_RANGE: (u64, u64) = (10, 1_024_000);

/// Every control `require` may name, as the sandbox reports it.
pub const CONTROL_NAMES: &[(&str, Control)] = &[
    ("namespaces", Control::Namespaces),
    ("filesystem", Control::Filesystem),
    ("network", Control::Network),
    ("memory", Control::Memory),
    ("pids", Control::Pids),
    ("cpu", Control::Cpu),
    ("rlimits", Control::Rlimits),
    ("no_new_privs", Control::NoNewPrivs),
    ("landlock", Control::Landlock),
    ("seccomp", Control::Seccomp),
    ("tree_kill", Control::TreeKill),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    Strict,
    Network,
    Off,
}

/// One table's keys as written; `None` = not said here.
#[derive(Clone, Debug, Default, PartialEq)]
struct Layer {
    profile: Option<Profile>,
    network: Option<Network>,
    allow_hosts: Option<Vec<String>>,
    allow_private: Option<Vec<String>>,
    workspace: Option<PathBuf>,
    output: Option<PathBuf>,
    home: Option<PathBuf>,
    read_only: Vec<PathBuf>,
    read_write: Vec<PathBuf>,
    tmp_size: Option<u64>,
    memory: Option<u64>,
    pids: Option<u64>,
    cpu_millis: Option<u64>,
    file_size: Option<u64>,
    open_files: Option<u64>,
    seccomp: Option<bool>,
    require: Option<Vec<Control>>,
}

/// Sets every stdio server's `sandbox` from `[sandbox]` and its own `[servers.NAME.sandbox]`.
pub(crate) fn apply_sandboxes(
    reader: &mut Reader<'_>,
    root: &DeTable<'_>,
    gateway: &GatewaySection,
    servers: &mut [ServerConfig],
) {
    let defaults = match root.get("sandbox") {
        Some(item) => read_layer(reader, "sandbox", item, false),
        None => Layer::default(),
    };
    let tables = match root.get("servers").map(|i| i.get_ref()) {
        Some(DeValue::Table(t)) => Some(t),
        _ => None,
    };
    for server in servers.iter_mut() {
        let own = tables
            .and_then(|t| t.get(server.name.as_str()))
            .and_then(|i| match i.get_ref() {
                DeValue::Table(t) => t.get("sandbox"),
                _ => None,
            });
        let field = key_path(&key_path("servers", &server.name), "sandbox");
        let layer = match own {
            Some(item) => read_layer(reader, &field, item, true),
            None => Layer::default(),
        };
        let is_http = matches!(server.kind, ServerKind::Http { .. });
        if let (Some(item), true) = (own, is_http) {
            reader.report_value(
                &field,
                item,
                Show::Hidden,
                "is set on an HTTP server, which Manifold does not start",
                "remove the sandbox table: only stdio servers run sandboxed",
            );
        }
        if let ServerKind::Stdio { spec, .. } = &mut server.kind {
            spec.sandbox = resolve(&defaults, layer, gateway, &server.name, spec, reader.env);
        }
    }
}

/// The merged choice: the server's keys over the defaults; no `profile` anywhere is the default
/// profile (strict plus what the command line hands the server, see `default_sandbox`).
fn resolve(
    defaults: &Layer,
    own: Layer,
    gateway: &GatewaySection,
    name: &str,
    server: &StdioSpec,
    env: &dyn Environment,
) -> StdioSandbox {
    let (profile, unwritten) = match own.profile.or(defaults.profile) {
        // A container engine's server is boxed by its container, unless its own table asks
        // for something of Manifold's sandbox.
        None if default_sandbox::is_container_engine(&server.command)
            && own == Layer::default() =>
        {
            return StdioSandbox::ContainerEngine;
        }
        None => (Profile::Strict, true),
        Some(Profile::Off) => return StdioSandbox::Off,
        Some(p) => (p, false),
    };
    let dirs = gateway.data_dir.join("sandbox").join(name);
    let mut spec = SandboxSpec::new(
        own.workspace.unwrap_or_else(|| dirs.join("workspace")),
        own.output.unwrap_or_else(|| dirs.join("output")),
        own.home.unwrap_or_else(|| dirs.join("home")),
    );
    let fetches = unwritten && default_sandbox::is_package_runner(&server.command);
    spec.network = own.network.or(defaults.network).unwrap_or(match profile {
        Profile::Network => Network::Host,
        _ if fetches => Network::Allow,
        _ => Network::None,
    });
    spec.allow_hosts = own
        .allow_hosts
        .or_else(|| defaults.allow_hosts.clone())
        .unwrap_or_else(|| match fetches && spec.network == Network::Allow {
            true => default_sandbox::registry_hosts(server, env),
            false => Vec::new(),
        });
    spec.allow_private = own
        .allow_private
        .or_else(|| defaults.allow_private.clone())
        .unwrap_or_default();
    spec.require = match own.require.or_else(|| defaults.require.clone()) {
        Some(require) => require,
        None if unwritten => Vec::new(),
        None if spec.network == Network::Host => vec![Control::Filesystem],
        None => spec.require,
    };
    spec.read_only = defaults.read_only.clone();
    spec.read_only.extend(own.read_only);
    spec.read_write = defaults.read_write.clone();
    spec.read_write.extend(own.read_write);
    if unwritten {
        let home = match env.var("HOME") {
            Var::Set(h) => Some(PathBuf::from(h)),
            Var::Unset | Var::NotUnicode => None,
        };
        for dir in default_sandbox::handed_dirs(server, home.as_deref()) {
            if !spec.read_write.contains(&dir) {
                spec.read_write.push(dir);
            }
        }
        // The server starts where it would unsandboxed, when that dir is handed to it.
        spec.workdir = server.cwd.clone().filter(|c| spec.read_write.contains(c));
    }
    let pick = |a: Option<u64>, b: Option<u64>, default: u64| a.or(b).unwrap_or(default);
    spec.tmp_size = pick(own.tmp_size, defaults.tmp_size, spec.tmp_size);
    spec.memory = pick(own.memory, defaults.memory, spec.memory);
    spec.pids = pick(own.pids, defaults.pids, spec.pids);
    spec.cpu_millis = pick(own.cpu_millis, defaults.cpu_millis, spec.cpu_millis);
    spec.file_size = pick(own.file_size, defaults.file_size, spec.file_size);
    spec.open_files = pick(own.open_files, defaults.open_files, spec.open_files);
    spec.seccomp = own.seccomp.or(defaults.seccomp).unwrap_or(true);
    match unwritten {
        true => StdioSandbox::Default(Box::new(spec)),
        false => StdioSandbox::On(Box::new(spec)),
    }
}

fn read_layer(reader: &mut Reader<'_>, path: &str, item: &Item<'_>, per_server: bool) -> Layer {
    let mut layer = Layer::default();
    let Some(table) = reader.table(
        path,
        item,
        "write a sandbox table, e.g. profile = \"strict\"",
    ) else {
        return layer;
    };
    reader.check_keys(path, table, SANDBOX_KEYS, SANDBOX_HINTS);
    let field = |k: &str| key_path(path, k);
    if let Some(item) = table.get("profile") {
        let options = [
            ("strict", Profile::Strict),
            ("network", Profile::Network),
            ("off", Profile::Off),
        ];
        layer.profile = reader.choice(&field("profile"), item, &options);
    }
    read_network(reader, table, path, &mut layer);
    for key in PER_SERVER_KEYS {
        let Some(item) = table.get(*key) else {
            continue;
        };
        if !per_server {
            reader.report_value(
                &field(key),
                item,
                Show::Value,
                "is one server's own dir, so it has no gateway-wide default",
                format!("set {key} in [servers.NAME.sandbox]; it defaults to data_dir/sandbox/NAME/{key}"),
            );
            continue;
        }
        let dir = reader
            .string(
                &field(key),
                item,
                Show::Value,
                "write e.g. \"/srv/mcp/notes\"",
            )
            .and_then(|text| reader.path(&field(key), &text));
        match *key {
            "workspace" => layer.workspace = dir,
            "output" => layer.output = dir,
            _ => layer.home = dir,
        }
    }
    for (key, example, list) in [
        (
            "read_only",
            "write e.g. read_only = [\"/opt/node\"]",
            &mut layer.read_only,
        ),
        (
            "read_write",
            "write e.g. read_write = [\"/srv/notes\"]",
            &mut layer.read_write,
        ),
    ] {
        let Some(item) = table.get(key) else { continue };
        for text in reader
            .string_list(&field(key), item, Show::Value, example)
            .unwrap_or_default()
        {
            if let Some(p) = reader.path(&text.field.clone(), &text) {
                list.push(p);
            }
        }
    }
    read_limits(reader, table, path, &mut layer);
    if let Some(item) = table.get("seccomp") {
        layer.seccomp = reader.boolean(&field("seccomp"), item);
    }
    if let Some(item) = table.get("require") {
        let found = reader.string_list(
            &field("require"),
            item,
            Show::Value,
            "write e.g. [\"filesystem\", \"network\"]",
        );
        layer.require = found.map(|texts| read_require(reader, &texts));
    }
    layer
}

fn read_network(reader: &mut Reader<'_>, table: &DeTable<'_>, path: &str, layer: &mut Layer) {
    if let Some(item) = table.get("network") {
        let options = [
            ("none", Network::None),
            ("loopback", Network::Loopback),
            ("allow", Network::Allow),
            ("host", Network::Host),
        ];
        layer.network = reader.choice(&key_path(path, "network"), item, &options);
    }
    if let Some(item) = table.get("allow_hosts") {
        let f = key_path(path, "allow_hosts");
        let example = "write e.g. allow_hosts = [\"api.github.com\", \"*.example.com\"]";
        let texts = reader.string_list(&f, item, Show::Value, example);
        layer.allow_hosts = texts.map(|texts| {
            texts
                .into_iter()
                .filter(
                    |text| match manifold_egress::HostPattern::parse(&text.value) {
                        Ok(_) => true,
                        Err(e) => {
                            report_policy_error(reader, text, e);
                            false
                        }
                    },
                )
                .map(|text| text.value)
                .collect()
        });
    }
    if let Some(item) = table.get("allow_private") {
        let f = key_path(path, "allow_private");
        let example = "write e.g. allow_private = [\"10.0.0.0/8\"]";
        let texts = reader.string_list(&f, item, Show::Value, example);
        layer.allow_private = texts.map(|texts| {
            texts
                .into_iter()
                .filter(|text| match manifold_egress::Cidr::parse(&text.value) {
                    Ok(_) => true,
                    Err(e) => {
                        report_policy_error(reader, text, e);
                        false
                    }
                })
                .map(|text| text.value)
                .collect()
        });
    }
    let listed = layer.allow_hosts.as_ref().is_some_and(|h| !h.is_empty())
        || layer.allow_private.as_ref().is_some_and(|p| !p.is_empty());
    if let (Some(network), Some(item), true) = (layer.network, table.get("network"), listed)
        && network != Network::Allow
    {
        reader.report_value(
            &key_path(path, "network"),
            item,
            Show::Value,
            "is not \"allow\", so allow_hosts and allow_private would be ignored",
            "write network = \"allow\" to use the allow-list, or remove allow_hosts/allow_private",
        );
    }
}

/// One refused allow-list entry, with the egress crate's words for what is wrong.
fn report_policy_error(
    reader: &mut Reader<'_>,
    text: &super::reader::Text,
    e: manifold_egress::PolicyError,
) {
    let (problem, fix) = match e {
        manifold_egress::PolicyError::Host { problem, .. } => (
            problem,
            "write a host name such as \"api.github.com\", \"*.example.com\" (subdomains only; list the apex too) or \"example.com:8443\"",
        ),
        manifold_egress::PolicyError::Cidr { problem, .. } => (
            problem,
            "write an address or CIDR such as \"10.1.2.3\", \"10.0.0.0/8\" or \"fd00::/8\"",
        ),
    };
    reader.report_text(&text.field, text, problem, fix);
}

fn read_limits(reader: &mut Reader<'_>, table: &DeTable<'_>, path: &str, layer: &mut Layer) {
    let sizes = [
        ("tmp_size", (MIN_FILE_BYTES, u64::MAX), &mut layer.tmp_size),
        ("memory", (MIN_MEMORY, u64::MAX), &mut layer.memory),
        (
            "file_size",
            (MIN_FILE_BYTES, u64::MAX),
            &mut layer.file_size,
        ),
    ];
    for (key, range, slot) in sizes {
        if let Some(item) = table.get(key) {
            *slot = read_bounded(reader, &key_path(path, key), item, range, parse_size_item);
        }
    }
    let counts = [
        ("pids", PIDS_RANGE, &mut layer.pids),
        ("open_files", OPEN_FILES_RANGE, &mut layer.open_files),
    ];
    for (key, range, slot) in counts {
        if let Some(item) = table.get(key) {
            *slot = read_bounded(reader, &key_path(path, key), item, range, parse_count_item);
        }
    }
    if let Some(item) = table.get("cpu") {
        let f = key_path(path, "cpu");
        layer.cpu_millis = read_bounded(reader, &f, item, CPU_MILLIS_RANGE, parse_cpu_item);
    }
}

type Parse = fn(&DeValue<'_>) -> Result<u64, &'static str>;

fn read_bounded(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    (low, high): (u64, u64),
    parse: Parse,
) -> Option<u64> {
    match parse(item.get_ref()) {
        Ok(n) if (low..=high).contains(&n) => Some(n),
        Ok(_) if high == u64::MAX => {
            let problem = format!("is below the smallest allowed ({low} bytes)");
            reader.report_value(
                field,
                item,
                Show::Value,
                problem,
                "write a larger size, e.g. \"1GiB\"",
            );
            None
        }
        Ok(_) => {
            let problem = format!("is outside {low}..={high}");
            reader.report_value(
                field,
                item,
                Show::Value,
                problem,
                format!("write a value from {low} to {high}"),
            );
            None
        }
        Err(fix) => {
            reader.report_value(field, item, Show::Value, "is not a valid value", fix);
            None
        }
    }
}

const SIZE_FIX: &str =
    "write bytes as an integer or a string with a unit, e.g. \"512MiB\", \"2GiB\", \"64K\"";

fn parse_size_item(value: &DeValue<'_>) -> Result<u64, &'static str> {
    match value {
        DeValue::Integer(i) => u64::from_str_radix(i.as_str(), i.radix()).map_err(|_| SIZE_FIX),
        DeValue::String(s) => parse_size(s).ok_or(SIZE_FIX),
        _ => Err(SIZE_FIX),
    }
}

/// Bytes from `"512MiB"`, `"64K"`, `"2G"`, `"1024"` (binary units).
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

fn parse_count_item(value: &DeValue<'_>) -> Result<u64, &'static str> {
    const FIX: &str = "write a whole number without quotes";
    match value {
        DeValue::Integer(i) => u64::from_str_radix(i.as_str(), i.radix()).map_err(|_| FIX),
        _ => Err(FIX),
    }
}

fn parse_cpu_item(value: &DeValue<'_>) -> Result<u64, &'static str> {
    const FIX: &str = "write CPUs as a number without quotes, e.g. cpu = 0.5 or cpu = 2";
    let cpus: f64 = match value {
        DeValue::Integer(i) => i.as_str().parse().map_err(|_| FIX)?,
        DeValue::Float(f) => f.as_str().parse().map_err(|_| FIX)?,
        _ => return Err(FIX),
    };
    if !cpus.is_finite() || cpus <= 0.0 {
        return Err(FIX);
    }
    // Rounded to whole thousandths; the range check bounds the cast.
    let millis = (cpus * 1000.0).round();
    if millis > u64::MAX as f64 {
        return Err(FIX);
    }
    Ok(millis as u64)
}

fn read_require(reader: &mut Reader<'_>, texts: &[super::reader::Text]) -> Vec<Control> {
    let names: Vec<&str> = CONTROL_NAMES.iter().map(|(n, _)| *n).collect();
    let mut out = Vec::new();
    for text in texts {
        match CONTROL_NAMES.iter().find(|(n, _)| *n == text.value) {
            Some((_, control)) => out.push(*control),
            None => {
                let fix = match crate::did_you_mean::closest(&text.value, &names) {
                    Some(near) => format!("did you mean {near:?}?"),
                    None => format!("the controls are {}", names.join(", ")),
                };
                reader.report_text(&text.field, text, "is not a sandbox control", fix);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("64K"), Some(64 * 1024));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("1.5G"), None);
        assert_eq!(parse_size("5TB"), None);
        assert_eq!(parse_size("99999999999999G"), None);
    }

    #[test]
    #[allow(clippy::assertions_on_constants)]
    fn bounds_are_ordered_and_sane() {
        assert!(MIN_MEMORY >= 16 << 20 && MIN_MEMORY < manifold_sandbox::spec::DEFAULT_MEMORY);
        assert!(MIN_FILE_BYTES <= manifold_sandbox::spec::DEFAULT_TMP_SIZE);
        for (low, high, default) in [
            (
                PIDS_RANGE.0,
                PIDS_RANGE.1,
                manifold_sandbox::spec::DEFAULT_PIDS,
            ),
            (
                OPEN_FILES_RANGE.0,
                OPEN_FILES_RANGE.1,
                manifold_sandbox::spec::DEFAULT_OPEN_FILES,
            ),
            (
                CPU_MILLIS_RANGE.0,
                CPU_MILLIS_RANGE.1,
                manifold_sandbox::spec::DEFAULT_CPU_MILLIS,
            ),
        ] {
            assert!(low < high && (low..=high).contains(&default));
        }
        assert_eq!(CONTROL_NAMES.len(), 11);
        for (name, control) in CONTROL_NAMES {
            assert_eq!(
                serde_json::to_value(control).ok(),
                Some(serde_json::json!(name))
            );
        }
    }
}
