//! MCP log levels and the rule that decides whether a log message is sent.
//!
//! The legacy era sets the level once per session (`logging/setLevel`); the modern era states it
//! per request in `_meta` (`io.modelcontextprotocol/logLevel`) and sends nothing when it is absent.
//! Both eras compare levels with the same order, kept here.

/// The syslog severities MCP uses, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    pub fn parse(text: &str) -> Option<LogLevel> {
        LogLevel::ALL.into_iter().find(|l| l.as_str() == text)
    }
}

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
    fn levels_parse_and_order_by_severity() {
        for l in LogLevel::ALL {
            assert_eq!(LogLevel::parse(l.as_str()), Some(l));
        }
        assert_eq!(LogLevel::parse("verbose"), None);
        assert!(LogPolicy::AtLeast(LogLevel::Info).admits(LogLevel::Warning));
        assert!(!LogPolicy::AtLeast(LogLevel::Warning).admits(LogLevel::Info));
        assert!(!LogPolicy::Silent.admits(LogLevel::Emergency));
    }
}
