//! MCP protocol revisions, their eras, and how each era agrees on one.
//!
//! The legacy era (2024-11-05 .. 2025-11-25) negotiates once, in `initialize`; the modern era
//! (2026-07-28) states the revision on every request and learns what a server supports from
//! `server/discover`. Both rules live here so client and server sides apply the same ones.

use std::fmt;
use std::str::FromStr;

/// A protocol revision Manifold speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

/// The two eras of MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize`, sessions, server-initiated requests.
    Legacy,
    /// Stateless: `server/discover`, per-request `_meta`, MRTR.
    Modern,
}

/// A revision string Manifold does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown MCP protocol revision {0:?}; known revisions are {KNOWN}")]
pub struct UnknownRevision(pub String);

const KNOWN: &str = "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28";

impl Revision {
    /// Every revision, oldest first.
    pub const ALL: [Revision; 5] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
        Revision::V2026_07_28,
    ];
    /// The newest legacy revision: what a legacy client asks for by default.
    pub const LATEST_LEGACY: Revision = Revision::V2025_11_25;
    /// The newest revision overall.
    pub const LATEST: Revision = Revision::V2026_07_28;
    /// What a legacy peer that sends no `MCP-Protocol-Version` header is assumed to speak.
    pub const HTTP_HEADER_DEFAULT: Revision = Revision::V2025_03_26;

    pub const fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    pub const fn era(self) -> Era {
        match self {
            Revision::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// Legacy revisions, oldest first.
    pub fn legacy() -> impl Iterator<Item = Revision> {
        Revision::ALL.into_iter().filter(|r| r.era() == Era::Legacy)
    }

    /// Whether the `MCP-Protocol-Version` header is required after initialization.
    pub fn has_version_header(self) -> bool {
        self >= Revision::V2025_06_18
    }

    /// Whether Streamable HTTP exists (2024-11-05 had only HTTP+SSE).
    pub fn has_streamable_http(self) -> bool {
        self >= Revision::V2025_03_26
    }
}

impl FromStr for Revision {
    type Err = UnknownRevision;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Revision::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRevision(s.chars().take(64).collect()))
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Server side of legacy `initialize`: answer with the client's revision if we support it,
/// otherwise with our latest legacy revision (the client then decides whether to go on).
pub fn legacy_server_answer(requested: &str, supported: &[Revision]) -> Revision {
    requested
        .parse::<Revision>()
        .ok()
        .filter(|r| r.era() == Era::Legacy && supported.contains(r))
        .or_else(|| {
            supported
                .iter()
                .copied()
                .filter(|r| r.era() == Era::Legacy)
                .max()
        })
        .unwrap_or(Revision::LATEST_LEGACY)
}

/// What went wrong when a legacy server answered `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LegacyAnswerError {
    #[error(
        "the server answered protocol revision {answered:?}, which this client does not support (supported: {KNOWN})"
    )]
    Unsupported { answered: String },
    #[error(
        "the server answered protocol revision {answered}, which belongs to the modern era and cannot follow initialize"
    )]
    ModernInInitialize { answered: Revision },
}

/// Client side of legacy `initialize`: accept the server's answer if it is a legacy revision we
/// speak (servers may answer an older revision than requested).
pub fn legacy_client_accepts(answered: &str) -> Result<Revision, LegacyAnswerError> {
    match answered.parse::<Revision>() {
        Ok(r) if r.era() == Era::Legacy => Ok(r),
        Ok(r) => Err(LegacyAnswerError::ModernInInitialize { answered: r }),
        Err(_) => Err(LegacyAnswerError::Unsupported {
            answered: answered.chars().take(64).collect(),
        }),
    }
}

/// Modern era, client side: the newest revision both sides support, from `server/discover`'s
/// `supportedVersions`. Unknown strings in the list are ignored.
pub fn modern_client_choice(server_supported: &[String]) -> Option<Revision> {
    server_supported
        .iter()
        .filter_map(|s| s.parse::<Revision>().ok())
        .filter(|r| r.era() == Era::Modern)
        .max()
}

/// Modern era, server side: a request's `_meta` revision is served only if supported.
pub fn modern_server_accepts(requested: &str, supported: &[Revision]) -> Option<Revision> {
    requested
        .parse::<Revision>()
        .ok()
        .filter(|r| r.era() == Era::Modern && supported.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_revision_and_knows_its_era() {
        for r in Revision::ALL {
            assert_eq!(r.as_str().parse::<Revision>(), Ok(r));
        }
        assert_eq!(Revision::V2026_07_28.era(), Era::Modern);
        assert_eq!(Revision::V2024_11_05.era(), Era::Legacy);
        assert_eq!(Revision::legacy().count(), 4);
        assert!("2099-01-01".parse::<Revision>().is_err());
    }

    #[test]
    fn legacy_server_echoes_a_supported_request_and_otherwise_offers_its_latest() {
        let all: Vec<_> = Revision::legacy().collect();
        assert_eq!(
            legacy_server_answer("2025-03-26", &all),
            Revision::V2025_03_26
        );
        assert_eq!(
            legacy_server_answer("2099-01-01", &all),
            Revision::V2025_11_25
        );
        assert_eq!(
            legacy_server_answer("2026-07-28", &all),
            Revision::V2025_11_25
        );
    }

    #[test]
    fn legacy_client_refuses_unknown_and_modern_answers() {
        assert_eq!(
            legacy_client_accepts("2024-11-05"),
            Ok(Revision::V2024_11_05)
        );
        assert!(matches!(
            legacy_client_accepts("1999-01-01"),
            Err(LegacyAnswerError::Unsupported { .. })
        ));
        assert!(matches!(
            legacy_client_accepts("2026-07-28"),
            Err(LegacyAnswerError::ModernInInitialize { .. })
        ));
    }

    #[test]
    fn modern_choice_takes_the_newest_modern_revision() {
        let offered = vec!["2026-07-28".to_owned(), "2030-01-01".to_owned()];
        assert_eq!(modern_client_choice(&offered), Some(Revision::V2026_07_28));
        assert_eq!(modern_client_choice(&["2025-11-25".to_owned()]), None);
        assert_eq!(
            modern_server_accepts("2026-07-28", &[Revision::V2026_07_28]),
            Some(Revision::V2026_07_28)
        );
        assert_eq!(
            modern_server_accepts("2025-11-25", &[Revision::V2026_07_28]),
            None
        );
    }

    #[test]
    fn header_rules_follow_the_revision() {
        assert!(!Revision::V2025_03_26.has_version_header());
        assert!(Revision::V2025_06_18.has_version_header());
        assert!(!Revision::V2024_11_05.has_streamable_http());
    }
}
