//! Reads `[servers.NAME.overrides.TOOL]`: what Manifold shows of one upstream tool instead of
//! what the upstream says — its exposed name, title, description and annotations. The upstream's
//! own definition stays what is pinned, so a changed upstream is still detected; the overridden
//! annotations are what rules see (an `ask` rule matching `destructiveHint` covers a tool marked
//! destructive here).
//!
//! Read in a pass of its own after the sections' readers (which accept the key and leave it
//! alone), like the retry policy, so the overrides travel as one value, each one the gateway's
//! own `ToolOverride`.

use std::collections::BTreeMap;

use manifold_gateway::catalog::overrides::{ToolOverride, ToolOverrides};
use toml::de::{DeTable, DeValue};

use super::reader::{Reader, Show, key_path};

/// The tool annotations an override may set (each a boolean hint).
pub const OVERRIDE_ANNOTATIONS: &[&str] = &[
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];
const OVERRIDE_KEYS: &[&str] = &["name", "title", "description", "annotations"];
/// Longest exposed name an override may give (the protocol's tool names are at most 128).
pub const MAX_OVERRIDE_NAME_LEN: usize = 128;
/// Longest title or description an override may give.
pub const MAX_OVERRIDE_TEXT_LEN: usize = 8 * 1024;

/// Every server's overrides: server name, then the upstream's tool name. Each is the gateway's
/// own `ToolOverride`, which it applies to the catalog entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    pub servers: BTreeMap<String, ToolOverrides>,
}

impl Overrides {
    /// One server's overrides, by the upstream's tool name, as its upstream definition takes them.
    pub fn of(&self, server: &str) -> ToolOverrides {
        self.servers.get(server).cloned().unwrap_or_default()
    }
}

fn valid_exposed_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_OVERRIDE_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub(crate) fn read_overrides(reader: &mut Reader<'_>, root: &DeTable<'_>) -> Overrides {
    let mut out = Overrides::default();
    let Some(DeValue::Table(servers)) = root.get("servers").map(|i| i.get_ref()) else {
        return out;
    };
    let mut exposed: BTreeMap<String, String> = BTreeMap::new();
    for (key, item) in servers.iter() {
        let server: &str = key.get_ref();
        let DeValue::Table(section) = item.get_ref() else {
            continue;
        };
        let Some(item) = section.get("overrides") else {
            continue;
        };
        let path = key_path(&key_path("servers", server), "overrides");
        let Some(tools) = reader.table(
            &path,
            item,
            "write one [servers.NAME.overrides.TOOL] section per tool, TOOL being the server's own name for it",
        ) else {
            continue;
        };
        let mut of_server = BTreeMap::new();
        for (tool_key, tool_item) in tools.iter() {
            let tool: &str = tool_key.get_ref();
            let tool_path = key_path(&path, tool);
            let Some(table) = reader.table(
                &tool_path,
                tool_item,
                "write e.g. [servers.git.overrides.git_push] description = \"...\"",
            ) else {
                continue;
            };
            reader.check_keys(&tool_path, table, OVERRIDE_KEYS, &[]);
            let field = |k: &str| key_path(&tool_path, k);
            let mut o = ToolOverride::default();
            if let Some(i) = table.get("name") {
                let f = field("name");
                if let Some(text) =
                    reader.string(&f, i, Show::Value, "write e.g. name = \"search_docs\"")
                {
                    if !valid_exposed_name(&text.value) {
                        reader.report_text(
                            &f,
                            &text,
                            format!("is not an exposed name: 1 to {MAX_OVERRIDE_NAME_LEN} characters of A-Z a-z 0-9 _ - ."),
                            "write e.g. name = \"search_docs\"",
                        );
                    } else if let Some(other) = exposed.get(&text.value) {
                        reader.report_text(
                            &f,
                            &text,
                            format!("is also the name {other} gives"),
                            "give each overridden tool its own name",
                        );
                    } else {
                        exposed.insert(text.value.clone(), f.clone());
                        o.name = Some(text.value);
                    }
                }
            }
            for (k, slot) in [("title", &mut o.title), ("description", &mut o.description)] {
                let Some(i) = table.get(k) else { continue };
                let f = field(k);
                if let Some(text) =
                    reader.string(&f, i, Show::Value, &format!("write e.g. {k} = \"...\""))
                {
                    if text.value.chars().count() > MAX_OVERRIDE_TEXT_LEN {
                        reader.report_text(
                            &f,
                            &text,
                            format!("is longer than {MAX_OVERRIDE_TEXT_LEN} characters"),
                            "shorten it: clients show it to the model with every list",
                        );
                    } else {
                        *slot = Some(text.value);
                    }
                }
            }
            if let Some(i) = table.get("annotations") {
                let f = field("annotations");
                if let Some(hints) =
                    reader.table(&f, i, "write e.g. annotations = { destructiveHint = true }")
                {
                    reader.check_keys(&f, hints, OVERRIDE_ANNOTATIONS, &[]);
                    for (hk, hi) in hints.iter() {
                        let hint: &str = hk.get_ref();
                        if !OVERRIDE_ANNOTATIONS.contains(&hint) {
                            continue;
                        }
                        if let Some(b) = reader.boolean(&key_path(&f, hint), hi) {
                            o.annotations.insert(hint.to_owned(), b);
                        }
                    }
                }
            }
            of_server.insert(tool.to_owned(), o);
        }
        if !of_server.is_empty() {
            out.servers.insert(server.to_owned(), of_server);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use crate::{Config, FixedEnvironment};

    fn load(text: &str) -> Result<Config, crate::ConfigErrors> {
        let env = FixedEnvironment::new().with_var("HOME", "/home/t");
        Config::from_str_with(text, "m.toml", None, &env)
    }

    #[test]
    fn overrides_are_read_per_server_and_upstream_tool() {
        let c = load(
            r#"
[servers.git]
command = "git-mcp"

[servers.git.overrides.git_push]
name = "push"
description = "Push the current branch"
annotations = { destructiveHint = true, readOnlyHint = false }
"#,
        )
        .unwrap();
        let o = &c.overrides.of("git")["git_push"];
        assert_eq!(o.name.as_deref(), Some("push"));
        assert_eq!(o.description.as_deref(), Some("Push the current branch"));
        assert_eq!(o.title, None);
        assert_eq!(o.annotations.get("destructiveHint"), Some(&true));
        assert_eq!(o.annotations.get("readOnlyHint"), Some(&false));
        assert!(c.overrides.of("other").is_empty());
    }

    #[test]
    fn bad_overrides_are_refused_at_their_place() {
        let e =
            load("[servers.a]\ncommand = \"x\"\n[servers.a.overrides.t]\nname = \"no spaces\"\n")
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("servers.a.overrides.t.name") && e.contains("not an exposed name"),
            "{e}"
        );
        let e = load(
            "[servers.a]\ncommand = \"x\"\n[servers.a.overrides.t]\nname = \"same\"\n[servers.a.overrides.u]\nname = \"same\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("is also the name"), "{e}");
        let e = load("[servers.a]\ncommand = \"x\"\n[servers.a.overrides.t]\nannotations = { dangerous = true }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("dangerous"), "{e}");
        let e = load("[servers.a]\ncommand = \"x\"\n[servers.a.overrides.t]\nicon = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("icon"), "{e}");
    }
}
