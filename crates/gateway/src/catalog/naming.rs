//! Exposed names for tools and prompts: stable, short, collision-safe, and exactly reversible.
//!
//! Clients cap tool names (64 characters, `[A-Za-z0-9_-]`) and add their own prefixes, and users
//! suffer when names change because another server was added. A name here depends only on the
//! server's prefix, the original name and the naming mode; when it must be changed to fit, a digest
//! of the original keeps it unique and deterministic; and a collision is refused, never renamed.

use std::collections::HashMap;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// The default longest exposed name.
pub const DEFAULT_MAX_NAME_LEN: usize = 64;
/// Hex digits of the digest appended to a name that had to be changed.
pub const DIGEST_HEX_LEN: usize = 8;
/// The separator between a prefix and the original name.
pub const PREFIX_SEPARATOR: &str = "__";

/// How exposed names are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NamingMode {
    /// Always `prefix__name`: names never change when servers are added.
    #[default]
    Always,
    /// Original names; a collision between servers refuses to start.
    Never,
    /// Original names, prefixed only where two servers offer the same name.
    Conditional,
}

/// Naming rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamingRules {
    pub mode: NamingMode,
    pub max_len: usize,
    /// Restrict names to `[A-Za-z0-9_-]`.
    pub strict_charset: bool,
}

impl Default for NamingRules {
    fn default() -> Self {
        NamingRules {
            mode: NamingMode::Always,
            max_len: DEFAULT_MAX_NAME_LEN,
            strict_charset: true,
        }
    }
}

/// Where an exposed name leads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub server: String,
    pub original: String,
}

/// Two originals that would be exposed under one name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the name {exposed:?} would be exposed for both {first_server}/{first_name:?} and {second_server}/{second_name:?}; \
     give one server another prefix, use naming = \"always\", or filter one tool out with tools.deny"
)]
pub struct NameCollision {
    pub exposed: String,
    pub first_server: String,
    pub first_name: String,
    pub second_server: String,
    pub second_name: String,
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn digest_hex(prefix: &str, original: &str) -> String {
    let mut h = Sha256::new();
    h.update(prefix.as_bytes());
    h.update([0u8]);
    h.update(original.as_bytes());
    let mut out = String::with_capacity(DIGEST_HEX_LEN);
    for b in h.finalize().iter().take(DIGEST_HEX_LEN / 2) {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The exposed form of one name, given whether it is prefixed.
pub fn expose(rules: &NamingRules, prefix: &str, original: &str, prefixed: bool) -> String {
    let base = if prefixed {
        format!("{prefix}{PREFIX_SEPARATOR}{original}")
    } else {
        original.to_owned()
    };
    let cleaned: String = if rules.strict_charset {
        base.chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .collect()
    } else {
        base.clone()
    };
    if cleaned == base && cleaned.chars().count() <= rules.max_len && !cleaned.is_empty() {
        return cleaned;
    }
    // Changed or too long: keep what fits and add a digest of the true origin so distinct
    // originals stay distinct and the same original always gets the same name.
    let digest = digest_hex(prefix, original);
    let room = rules.max_len.saturating_sub(DIGEST_HEX_LEN + 1);
    let head: String = cleaned.chars().take(room).collect();
    if head.is_empty() {
        digest
    } else {
        format!("{head}_{digest}")
    }
}

/// The exposed names of a whole catalog, and the exact way back.
#[derive(Debug, Clone, Default)]
pub struct NameTable {
    forward: HashMap<Origin, String>,
    reverse: HashMap<String, Origin>,
}

impl NameTable {
    /// Names every `(server, prefix, original)` in order. In `Conditional` mode a name is prefixed
    /// when another server offers the same original name; reserved names (built-in tools) always
    /// count as taken.
    pub fn build<'a>(
        rules: &NamingRules,
        entries: impl IntoIterator<Item = (&'a str, &'a str, &'a str)> + Clone,
        reserved: &[&str],
    ) -> Result<NameTable, NameCollision> {
        let mut offered: HashMap<&str, Vec<&str>> = HashMap::new();
        for (server, _, original) in entries.clone() {
            offered.entry(original).or_default().push(server);
        }
        let mut table = NameTable::default();
        for (server, prefix, original) in entries {
            let shared = offered
                .get(original)
                .is_some_and(|servers| servers.iter().any(|s| *s != server))
                || reserved.contains(&original);
            let prefixed = match rules.mode {
                NamingMode::Always => true,
                NamingMode::Never => false,
                NamingMode::Conditional => shared,
            };
            let exposed = expose(rules, prefix, original, prefixed);
            let origin = Origin {
                server: server.to_owned(),
                original: original.to_owned(),
            };
            table.claim(exposed, origin, reserved)?;
        }
        Ok(table)
    }

    /// Gives `origin` the exposed name `exposed`, unless another origin or a reserved name has it.
    fn claim(
        &mut self,
        exposed: String,
        origin: Origin,
        reserved: &[&str],
    ) -> Result<(), NameCollision> {
        let clash = self
            .reverse
            .get(&exposed)
            .filter(|o| **o != origin)
            .cloned()
            .or_else(|| {
                reserved.contains(&exposed.as_str()).then(|| Origin {
                    server: "manifold".to_owned(),
                    original: exposed.clone(),
                })
            });
        if let Some(first) = clash {
            return Err(NameCollision {
                exposed,
                first_server: first.server,
                first_name: first.original,
                second_server: origin.server,
                second_name: origin.original,
            });
        }
        self.reverse.insert(exposed.clone(), origin.clone());
        self.forward.insert(origin, exposed);
        Ok(())
    }

    /// Gives the named entries the exposed names an operator chose (`[servers.NAME.overrides]`),
    /// exactly, in place of the ones `build` made. Entries not in the table are skipped (the
    /// upstream does not offer that tool now). A chosen name that another entry, another chosen
    /// name or a reserved name already has is a collision, as in `build`.
    pub fn rename<'a>(
        &mut self,
        renames: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
        reserved: &[&str],
    ) -> Result<(), NameCollision> {
        let mut chosen = Vec::new();
        for (server, original, name) in renames {
            let origin = Origin {
                server: server.to_owned(),
                original: original.to_owned(),
            };
            if let Some(old) = self.forward.get(&origin) {
                self.reverse.remove(old);
                chosen.push((origin, name.to_owned()));
            }
        }
        for (origin, name) in chosen {
            self.claim(name, origin, reserved)?;
        }
        Ok(())
    }

    /// The exposed name of an upstream's name.
    pub fn exposed(&self, server: &str, original: &str) -> Option<&str> {
        self.forward
            .get(&Origin {
                server: server.to_owned(),
                original: original.to_owned(),
            })
            .map(String::as_str)
    }

    /// Where an exposed name leads.
    pub fn resolve(&self, exposed: &str) -> Option<&Origin> {
        self.reverse.get(exposed)
    }

    /// Every exposed name (for suggestions).
    pub fn exposed_names(&self) -> impl Iterator<Item = &str> {
        self.reverse.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.reverse.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reverse.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(mode: NamingMode) -> NamingRules {
        NamingRules {
            mode,
            ..NamingRules::default()
        }
    }

    #[test]
    fn a_chosen_name_replaces_the_made_one_and_may_not_take_anothers() {
        let entries = [("git", "git", "push"), ("git", "git", "pull")];
        let mut t =
            NameTable::build(&rules(NamingMode::Always), entries, &["manifold_health"]).unwrap();
        t.rename(
            [("git", "push", "ship"), ("git", "absent", "x")],
            &["manifold_health"],
        )
        .unwrap();
        assert_eq!(t.exposed("git", "push"), Some("ship"));
        assert_eq!(t.resolve("ship").map(|o| o.original.as_str()), Some("push"));
        assert!(t.resolve("git__push").is_none());
        assert_eq!(t.len(), 2);
        let clash = t
            .clone()
            .rename([("git", "push", "git__pull")], &[])
            .unwrap_err();
        assert_eq!(clash.exposed, "git__pull");
        assert_eq!(clash.first_name, "pull");
        let reserved = t
            .rename([("git", "pull", "manifold_health")], &["manifold_health"])
            .unwrap_err();
        assert_eq!(reserved.first_server, "manifold");
    }

    #[test]
    fn always_prefixes_and_keeps_valid_names_as_they_are() {
        let r = rules(NamingMode::Always);
        assert_eq!(expose(&r, "git", "git_status", true), "git__git_status");
        assert_eq!(expose(&r, "fs", "read-file", true), "fs__read-file");
    }

    #[test]
    fn invalid_characters_and_long_names_get_a_deterministic_digest() {
        let r = rules(NamingMode::Always);
        let a = expose(&r, "srv", "a.b", true);
        let b = expose(&r, "srv", "a_b", true);
        assert_eq!(b, "srv__a_b");
        assert!(
            a.starts_with("srv__a_b_") && a.len() == "srv__a_b_".len() + DIGEST_HEX_LEN,
            "{a}"
        );
        assert_ne!(a, b, "a changed name must not collide with a natural one");
        assert_eq!(a, expose(&r, "srv", "a.b", true), "deterministic");
        let long = "x".repeat(200);
        let e = expose(&r, "srv", &long, true);
        assert_eq!(e.chars().count(), DEFAULT_MAX_NAME_LEN);
        assert!(e.chars().all(allowed));
        let e2 = expose(&r, "srv", &format!("{long}y"), true);
        assert_ne!(e, e2, "two long names sharing a head stay distinct");
    }

    #[test]
    fn the_reverse_map_is_exact() {
        let r = rules(NamingMode::Always);
        let entries = [
            ("git", "git", "status"),
            ("fs", "fs", "status"),
            ("fs", "fs", "a.b"),
        ];
        let t = NameTable::build(&r, entries, &[]).unwrap();
        for (server, _, original) in entries {
            let exposed = t.exposed(server, original).unwrap();
            assert_eq!(
                t.resolve(exposed),
                Some(&Origin {
                    server: server.into(),
                    original: original.into()
                })
            );
        }
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn never_mode_refuses_a_collision_naming_both_servers() {
        let r = rules(NamingMode::Never);
        let err = NameTable::build(&r, [("a", "a", "echo"), ("b", "b", "echo")], &[]).unwrap_err();
        assert_eq!(
            (err.first_server.as_str(), err.second_server.as_str()),
            ("a", "b")
        );
        assert!(err.to_string().contains("\"echo\""));
    }

    #[test]
    fn conditional_mode_prefixes_only_shared_names() {
        let r = rules(NamingMode::Conditional);
        let t = NameTable::build(
            &r,
            [("a", "a", "echo"), ("b", "b", "echo"), ("b", "b", "add")],
            &["manifold_health"],
        )
        .unwrap();
        assert_eq!(t.exposed("a", "echo"), Some("a__echo"));
        assert_eq!(t.exposed("b", "echo"), Some("b__echo"));
        assert_eq!(t.exposed("b", "add"), Some("add"));
        let t =
            NameTable::build(&r, [("a", "a", "manifold_health")], &["manifold_health"]).unwrap();
        assert_eq!(
            t.exposed("a", "manifold_health"),
            Some("a__manifold_health")
        );
    }

    #[test]
    fn reserved_names_cannot_be_taken_in_never_mode() {
        let r = rules(NamingMode::Never);
        let err = NameTable::build(&r, [("a", "a", "manifold_health")], &["manifold_health"])
            .unwrap_err();
        assert_eq!(err.first_server, "manifold");
    }
}
