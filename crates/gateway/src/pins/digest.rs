//! A tool definition's digest: SHA-256 of the RFC 8785 canonical JSON of the pinned members,
//! with a short digest per member so a change can be named by what changed.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

use super::*;

/// A tool definition's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionDigest {
    pub sha256: String,
    pub parts: BTreeMap<String, String>,
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Digests one raw tool definition. Total: a definition with no canonical form (not an object,
/// a number beyond a double, a member name twice) is digested by its exact bytes instead, so it
/// is still pinned, only more strictly.
pub fn digest_tool(raw: &str) -> DefinitionDigest {
    let by_bytes = || {
        let mut bytes = b"manifold-raw-definition\0".to_vec();
        bytes.extend_from_slice(raw.as_bytes());
        DefinitionDigest {
            sha256: sha256_hex(&bytes),
            parts: BTreeMap::new(),
        }
    };
    let definition = match canonical_json::parse(raw) {
        Ok(d @ Json::Object(_)) => d,
        _ => return by_bytes(),
    };
    let mut pinned = Vec::new();
    let mut parts = BTreeMap::new();
    for member in PINNED_MEMBERS {
        if let Some(value) = definition.member(member) {
            let mut part = sha256_hex(to_canonical(value).as_bytes());
            part.truncate(PART_DIGEST_HEX);
            parts.insert(member.to_owned(), part);
            pinned.push((member.to_owned(), value.clone()));
        }
    }
    DefinitionDigest {
        sha256: sha256_hex(to_canonical(&Json::Object(pinned)).as_bytes()),
        parts,
    }
}

/// The members whose digests differ (present in one and not the other counts).
pub fn changed_members(
    pinned: &BTreeMap<String, String>,
    seen: &BTreeMap<String, String>,
) -> Vec<String> {
    if pinned.is_empty() || seen.is_empty() {
        return Vec::new();
    }
    PINNED_MEMBERS
        .iter()
        .filter(|m| pinned.get(**m) != seen.get(**m))
        .map(|m| (*m).to_owned())
        .collect()
}
