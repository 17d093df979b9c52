//! MCP log levels and the rule that decides whether a log message is sent.
//!
//! The legacy era sets the level once per session (`logging/setLevel`); the modern era states it
//! per request in `_meta` (`io.modelcontextprotocol/logLevel`) and sends nothing when it is absent.
//! Both eras compare levels with the same order (`manifold_wire::log_level`).

pub use manifold_wire::log_level::LogLevel;

/// Which messages a request may receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogPolicy {
    /// No messages at all (a modern request that named no level).
    Silent,
    /// Messages at this level or above.
    AtLeast(LogLevel),
}

impl LogPolicy {
    pub fn admits(self, level: LogLevel) -> bool {
        match self {
            LogPolicy::Silent => false,
            LogPolicy::AtLeast(min) => level >= min,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_admit_by_severity() {
        assert!(LogPolicy::AtLeast(LogLevel::Info).admits(LogLevel::Warning));
        assert!(!LogPolicy::AtLeast(LogLevel::Warning).admits(LogLevel::Info));
        assert!(!LogPolicy::Silent.admits(LogLevel::Emergency));
    }
}
