//! Reads `[toolsets.NAME]`: the small sets of tools (and resources and prompts) that different
//! clients should see, each served at its own endpoint (`/mcp/NAME`). A set names whole servers
//! and patterns, as rules do; it can confine identities and groups to itself. Every problem is
//! reported at its place: an unknown server, a pattern that is not a glob, a set that names
//! nothing, a name an endpoint path cannot carry. A set is read straight into the gateway's own
//! `ToolsetSpec`, which the gateway compiles beside the rules.

use manifold_gateway::policy::ToolsetSpec;
use toml::de::DeTable;

use super::patterns::read_patterns;
use super::reader::{Item, Reader, Show, key_path};
use super::rules::{non_empty, read_servers};
use crate::server::ServerConfig;

pub(crate) const TOOLSET_KEYS: &[&str] = &[
    "servers",
    "tools",
    "resources",
    "prompts",
    "discovery",
    "identities",
    "groups",
];

const TOOLSET_HINTS: &[(&str, &str)] = &[
    (
        "keys",
        "write identities = [\"KEY-NAME\"]: an API key's name is its identity",
    ),
    ("users", "write identities = [\"NAME\"]"),
    ("include", "write servers = [...] and tools = [\"PATTERN\"]"),
];

/// Longest set name (it is a path segment of `/mcp/NAME`).
pub const MAX_TOOLSET_NAME: usize = 64;

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOLSET_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads `[toolsets]` (absent: no sets; `/mcp` serves everything the rules allow).
pub(crate) fn read_toolsets(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
    servers: &[ServerConfig],
) -> Vec<ToolsetSpec> {
    let Some(section) = section else {
        return Vec::new();
    };
    let Some(sets) = reader.table(
        "toolsets",
        section,
        "write one [toolsets.NAME] section per set",
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, item) in sets {
        let name = name.get_ref().to_string();
        let path = key_path("toolsets", &name);
        let Some(table) = reader.table(&path, item, "write [toolsets.NAME] with servers and tools")
        else {
            continue;
        };
        if !valid_name(&name) {
            reader.report(
                &item.span(),
                &path,
                None,
                format!("the name {name:?} cannot be a path segment of /mcp/NAME"),
                format!("use 1 to {MAX_TOOLSET_NAME} of A-Z a-z 0-9 _ -"),
            );
            continue;
        }
        reader.check_keys(&path, table, TOOLSET_KEYS, TOOLSET_HINTS);
        if let Some(set) = read_toolset(reader, &path, &name, item, table, servers) {
            out.push(set);
        }
    }
    out
}

fn read_toolset(
    reader: &mut Reader<'_>,
    path: &str,
    name: &str,
    item: &Item<'_>,
    table: &DeTable<'_>,
    servers: &[ServerConfig],
) -> Option<ToolsetSpec> {
    let before = reader.problem_count();
    let field = |k: &str| key_path(path, k);
    let set_servers = table
        .get("servers")
        .map(|i| read_servers(reader, &field("servers"), i, servers))
        .unwrap_or_default();
    let mut patterns = |key: &str, example: &str| -> Vec<String> {
        table
            .get(key)
            .map(|i| read_patterns(reader, &field(key), i, example))
            .unwrap_or_default()
    };
    let tools = patterns(
        "tools",
        "write e.g. tools = [\"git__status\", \"fs__read_*\"]",
    );
    let resources = patterns(
        "resources",
        "write e.g. resources = [\"fs+file:///docs/*\"]",
    );
    let prompts = patterns("prompts", "write e.g. prompts = [\"git__*\"]");
    let search_only = match table.get("discovery") {
        Some(i) => reader
            .choice(&field("discovery"), i, &[("all", false), ("search", true)])
            .unwrap_or(false),
        None => false,
    };
    let mut subjects = |key: &str, example: &str| -> Vec<String> {
        let Some(i) = table.get(key) else {
            return Vec::new();
        };
        let texts = reader
            .string_list(&field(key), i, Show::Value, example)
            .unwrap_or_default();
        non_empty(reader, texts, example)
    };
    let identities = subjects("identities", "write e.g. identities = [\"ci-bot\"]");
    let groups = subjects("groups", "write e.g. groups = [\"dev\"]");
    if reader.problem_count() > before {
        return None;
    }
    if set_servers.is_empty() && tools.is_empty() && resources.is_empty() && prompts.is_empty() {
        reader.report(
            &item.span(),
            path,
            None,
            "names nothing: a set holds only what its servers and patterns name",
            "write servers = [\"NAME\"] and/or tools = [\"PATTERN\"] (resources, prompts)",
        );
        return None;
    }
    Some(ToolsetSpec {
        name: name.to_owned(),
        servers: set_servers,
        tools,
        resources,
        prompts,
        search_only,
        identities,
        groups,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::{Config, FixedEnvironment};

    fn load(text: &str) -> Result<Config, crate::ConfigErrors> {
        let servers = "[servers.git]\ncommand = \"git-mcp\"\n[servers.fs]\ncommand = \"fs-mcp\"\n";
        Config::from_str_with(
            &format!("{servers}{text}"),
            "m.toml",
            None,
            &FixedEnvironment::new().with_var("HOME", "/home/t"),
        )
    }

    #[test]
    fn a_set_reads_its_servers_patterns_discovery_and_who_it_confines() {
        let c = load(
            "[toolsets.coding]\nservers = [\"git\"]\ntools = [\"fs__read_*\"]\ndiscovery = \"search\"\nidentities = [\"ci\"]\ngroups = [\"dev\"]\n[toolsets.docs]\nresources = [\"fs+file:///docs/*\"]\n",
        )
        .unwrap();
        assert_eq!(c.toolsets.len(), 2);
        let coding = c.toolsets.iter().find(|t| t.name == "coding").unwrap();
        assert_eq!(coding.servers, ["git"]);
        assert_eq!(coding.tools, ["fs__read_*"]);
        assert!(coding.search_only);
        assert_eq!(coding.identities, ["ci"]);
        assert_eq!(coding.groups, ["dev"]);
        assert!(load("").unwrap().toolsets.is_empty());
    }

    #[test]
    fn set_mistakes_are_reported_where_they_are() {
        let e = load("[toolsets.a]\nservers = [\"gti\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m.toml:6:12")
                && e.contains("toolsets.a.servers[0]")
                && e.contains("names no configured server"),
            "{e}"
        );
        let e = load("[toolsets.a]\ntools = [\"[\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("toolsets.a.tools") && e.contains("not a valid pattern"),
            "{e}"
        );
        let e = load("[toolsets.a]\ndiscovery = \"some\"\ntools = [\"x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("toolsets.a.discovery"), "{e}");
        let e = load("[toolsets.a]\nidentities = [\"x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("names nothing"), "{e}");
        let e = load("[toolsets.\"a b\"]\ntools = [\"x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("path segment"), "{e}");
        let e = load("[toolsets.a]\ntools = [\"x\"]\nkeys = [\"k\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("identities"), "{e}");
    }
}
