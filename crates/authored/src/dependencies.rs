//! An authored tool's dependencies: pinned PyPI or npm requirements, parsed before anything is
//! stored, and installed once per (language, dependency set) into a cache the tool then reads.
//! Pinned means one exact version: a tool that runs today must run the same tomorrow.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::language::Language;

/// Most dependencies one tool may have.
pub const MAX_DEPENDENCIES: usize = 32;
/// Longest dependency spec.
pub const MAX_DEPENDENCY_LEN: usize = 200;

/// One pinned requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub name: String,
    pub version: String,
}

impl Dependency {
    /// As the installer takes it (`name==1.0` for pip, `name@1.0` for npm).
    pub fn spec(&self, language: Language) -> String {
        match language {
            Language::Node => format!("{}@{}", self.name, self.version),
            _ => format!("{}=={}", self.name, self.version),
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn is_version(v: &str) -> bool {
    !v.is_empty()
        && v.chars().next().is_some_and(|c| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '!'))
}

fn parse_python(spec: &str) -> Result<Dependency, String> {
    let Some((name, version)) = spec.split_once("==") else {
        return Err(format!(
            "{spec:?} is not pinned; write name==version, e.g. \"requests==2.32.3\""
        ));
    };
    let name = name.trim();
    let version = version.trim();
    let base = name.split_once('[').map_or(
        name,
        |(b, extras)| {
            if extras.ends_with(']') { b } else { "" }
        },
    );
    if base.is_empty() || !base.chars().all(is_name_char) {
        return Err(format!("{spec:?}: {name:?} is not a PyPI project name"));
    }
    if !is_version(version) {
        return Err(format!("{spec:?}: {version:?} is not one exact version"));
    }
    Ok(Dependency {
        name: name.to_owned(),
        version: version.to_owned(),
    })
}

fn parse_node(spec: &str) -> Result<Dependency, String> {
    // A scoped name starts with '@', so the version's '@' is the last one.
    let Some((name, version)) = spec.rsplit_once('@').filter(|(n, _)| !n.is_empty()) else {
        return Err(format!(
            "{spec:?} is not pinned; write name@version, e.g. \"lodash@4.17.21\""
        ));
    };
    let bare = name.strip_prefix('@').map_or(Some(name), |scoped| {
        scoped
            .split_once('/')
            .filter(|(scope, pkg)| !scope.is_empty() && !pkg.is_empty())
            .map(|(_, pkg)| pkg)
    });
    let valid_name = bare.is_some_and(|n| {
        n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
    }) && name.chars().all(|c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '@' | '/')
    });
    if !valid_name {
        return Err(format!("{spec:?}: {name:?} is not an npm package name"));
    }
    let semver = version.split('.').count() == 3 && is_version(version);
    if !semver {
        return Err(format!(
            "{spec:?}: {version:?} is not one exact version (major.minor.patch)"
        ));
    }
    Ok(Dependency {
        name: name.to_owned(),
        version: version.to_owned(),
    })
}

/// Parses every spec of a tool in `language`; the first problem is the error.
pub fn parse_all(language: Language, specs: &[String]) -> Result<Vec<Dependency>, String> {
    if specs.len() > MAX_DEPENDENCIES {
        return Err(format!("{} given; at most {MAX_DEPENDENCIES}", specs.len()));
    }
    if language == Language::Sh && !specs.is_empty() {
        return Err("sh tools take no dependencies; use python or node for packages".into());
    }
    specs
        .iter()
        .map(|spec| {
            if spec.len() > MAX_DEPENDENCY_LEN {
                return Err(format!(
                    "a spec of {} bytes; at most {MAX_DEPENDENCY_LEN}",
                    spec.len()
                ));
            }
            match language {
                Language::Python => parse_python(spec),
                Language::Node => parse_node(spec),
                Language::Sh => Err("sh tools take no dependencies".into()),
            }
        })
        .collect()
}

/// The cache directory of one (language, dependency set): the same set, in any order, shares
/// one install.
pub fn cache_dir(root: &Path, language: Language, deps: &[Dependency]) -> PathBuf {
    let mut specs: Vec<String> = deps.iter().map(|d| d.spec(language)).collect();
    specs.sort();
    let digest = Sha256::digest(specs.join("\n").as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    root.join(format!("{}-{hex}", language.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_python_and_npm_specs_parse_and_loose_ones_are_refused() {
        let py = |s: &str| parse_all(Language::Python, &[s.to_owned()]);
        let node = |s: &str| parse_all(Language::Node, &[s.to_owned()]);
        assert_eq!(py("six==1.16.0").unwrap()[0].name, "six");
        assert_eq!(py("requests[socks]==2.32.3").unwrap()[0].version, "2.32.3");
        assert!(py("six").unwrap_err().contains("not pinned"));
        assert!(py("six>=1").unwrap_err().contains("not pinned"));
        assert!(py("six==1.*").unwrap_err().contains("exact version"));
        assert!(py("s ix==1.0").unwrap_err().contains("project name"));
        assert_eq!(node("@scope/pkg@1.2.3").unwrap()[0].name, "@scope/pkg");
        assert_eq!(
            node("left-pad@1.3.0").unwrap()[0].spec(Language::Node),
            "left-pad@1.3.0"
        );
        assert!(node("left-pad").unwrap_err().contains("not pinned"));
        assert!(
            node("left-pad@^1.3.0")
                .unwrap_err()
                .contains("exact version")
        );
        assert!(
            node("Left-Pad@1.3.0")
                .unwrap_err()
                .contains("npm package name")
        );
        assert!(parse_all(Language::Sh, &["x==1".into()]).is_err());
        let long = format!("{}==1.0", "s".repeat(MAX_DEPENDENCY_LEN));
        assert!(py(&long).unwrap_err().contains("at most"));
        let many = vec!["six==1.0".to_owned(); MAX_DEPENDENCIES + 1];
        assert!(
            parse_all(Language::Python, &many)
                .unwrap_err()
                .contains("at most")
        );
    }

    #[test]
    fn the_same_set_in_any_order_shares_a_cache_dir() {
        let a = parse_all(Language::Python, &["a==1".into(), "b==2".into()]).unwrap();
        let b = parse_all(Language::Python, &["b==2".into(), "a==1".into()]).unwrap();
        let c = parse_all(Language::Python, &["a==1".into()]).unwrap();
        let root = Path::new("/cache");
        assert_eq!(
            cache_dir(root, Language::Python, &a),
            cache_dir(root, Language::Python, &b)
        );
        assert_ne!(
            cache_dir(root, Language::Python, &a),
            cache_dir(root, Language::Python, &c)
        );
    }
}
