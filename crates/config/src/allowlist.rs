//! Origin and Host allowlists: the patterns `[gateway] allowed_origins` and `allowed_hosts`
//! accept, validated at load time, and the matchers the HTTP server asks on every request
//! (browsers send `Origin`; DNS rebinding is stopped by checking `Host`).

use std::fmt;

/// Ports in an origin pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PortMatch {
    /// `:*`: any port, or none.
    Any,
    /// No port written: the scheme's default port only.
    Default,
    Exact(u16),
}

/// Host names in a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// `*`
    Any,
    /// Lower-cased; IPv6 without brackets.
    Exact(String),
    /// `*.example.com` is stored as `.example.com`: any name ending in it.
    Suffix(String),
}

impl HostMatch {
    fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        match self {
            HostMatch::Any => true,
            HostMatch::Exact(h) => *h == host,
            HostMatch::Suffix(s) => host.len() > s.len() && host.ends_with(s.as_str()),
        }
    }
}

/// One entry of `allowed_origins`: `*`, or `scheme://host[:port]` where host may start with
/// `*.` and port may be `*`.
#[derive(Clone, PartialEq, Eq)]
pub struct OriginPattern {
    text: String,
    rule: Option<(String, HostMatch, PortMatch)>,
}

/// One entry of `allowed_hosts`: `*`, a name or address, or `*.example.com`.
#[derive(Clone, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    rule: HostMatch,
}

impl fmt::Debug for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl fmt::Debug for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// (what is wrong, what to write instead)
pub(crate) type PatternProblem = (String, String);

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn is_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// Splits `host[:port]` (host may be `[v6]`) into host (brackets removed) and port text.
fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match s.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host, Some(port))),
        // Several colons without brackets: a bare IPv6 address.
        Some(_) => Some((s, None)),
        None => Some((s, None)),
    }
}

fn host_rule(host: &str, wildcards: bool) -> Option<HostMatch> {
    if wildcards && host == "*" {
        return Some(HostMatch::Any);
    }
    if wildcards && let Some(suffix) = host.strip_prefix("*.") {
        return is_host_name(suffix)
            .then(|| HostMatch::Suffix(format!(".{}", suffix.to_ascii_lowercase())));
    }
    let v6 = host.contains(':')
        && host
            .chars()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'));
    (is_host_name(host) || v6).then(|| HostMatch::Exact(host.to_ascii_lowercase()))
}

impl OriginPattern {
    pub fn parse(text: &str) -> Result<OriginPattern, PatternProblem> {
        let example = "write e.g. \"https://app.example.com\" or \"http://localhost:*\"";
        if text == "*" {
            return Ok(OriginPattern {
                text: text.to_owned(),
                rule: None,
            });
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err((
                "is not an origin (scheme://host[:port])".to_owned(),
                example.to_owned(),
            ));
        };
        if !is_scheme(scheme) {
            return Err((
                "does not start with a scheme such as http or https".to_owned(),
                example.to_owned(),
            ));
        }
        if let Some(stripped) = rest.strip_suffix('/').filter(|r| !r.contains('/')) {
            return Err((
                "an origin has no path, not even \"/\"".to_owned(),
                format!("write \"{scheme}://{stripped}\""),
            ));
        }
        if rest.contains(['/', '?', '#', '@']) {
            return Err((
                "an origin is only scheme://host[:port], without path, query or user".to_owned(),
                example.to_owned(),
            ));
        }
        let bad_host = || {
            (
                "does not name a host (a name, an address, \"*\" or \"*.domain\")".to_owned(),
                example.to_owned(),
            )
        };
        let (host, port) = split_host_port(rest).ok_or_else(bad_host)?;
        let host = host_rule(host, true).ok_or_else(bad_host)?;
        let port = match port {
            None => PortMatch::Default,
            Some("*") => PortMatch::Any,
            Some(p) => PortMatch::Exact(p.parse::<u16>().map_err(|_| {
                (
                    "has a port that is not a number from 0 to 65535 or \"*\"".to_owned(),
                    example.to_owned(),
                )
            })?),
        };
        Ok(OriginPattern {
            text: text.to_owned(),
            rule: Some((scheme.to_ascii_lowercase(), host, port)),
        })
    }

    /// Whether an `Origin` header value is allowed by this pattern.
    pub fn matches(&self, origin: &str) -> bool {
        let Some((scheme, host_rule, port_rule)) = &self.rule else {
            return true;
        };
        let Some((o_scheme, rest)) = origin.trim().split_once("://") else {
            return false;
        };
        if !o_scheme.eq_ignore_ascii_case(scheme) || rest.contains(['/', '?', '#', '@']) {
            return false;
        }
        let Some((o_host, o_port)) = split_host_port(rest) else {
            return false;
        };
        let o_port = match o_port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(p) => Some(p),
                Err(_) => return false,
            },
        };
        let port_ok = match port_rule {
            PortMatch::Any => true,
            PortMatch::Default => o_port.is_none() || o_port == default_port(scheme),
            PortMatch::Exact(p) => {
                o_port == Some(*p) || (o_port.is_none() && default_port(scheme) == Some(*p))
            }
        };
        port_ok && host_rule.matches(o_host)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl HostPattern {
    pub fn parse(text: &str) -> Result<HostPattern, PatternProblem> {
        let example = "write a host name or address without scheme or port, e.g. \"localhost\" or \"*.example.com\"";
        if text.contains("://") || text.contains('/') {
            return Err(("is a URL, not a host".to_owned(), example.to_owned()));
        }
        let host = match text.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            Some(inner) => inner,
            None => text,
        };
        if !host.contains("::") && host.matches(':').count() == 1 {
            return Err((
                "has a port; the Host allowlist matches names only (any port)".to_owned(),
                example.to_owned(),
            ));
        }
        let rule = host_rule(host, true).ok_or_else(|| {
            (
                "is not a host name or address".to_owned(),
                example.to_owned(),
            )
        })?;
        Ok(HostPattern {
            text: text.to_owned(),
            rule,
        })
    }

    /// Whether a `Host` header value (`name`, `name:port`, `[v6]:port`) is allowed.
    pub fn matches(&self, host_header: &str) -> bool {
        match split_host_port(host_header.trim()) {
            Some((host, _)) => self.rule.matches(host),
            None => false,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The origins a browser page served from this machine has.
pub const DEFAULT_ALLOWED_ORIGINS: &[&str] = &[
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// The names this machine answers to.
pub const DEFAULT_ALLOWED_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(p: &str) -> OriginPattern {
        OriginPattern::parse(p).unwrap()
    }

    #[test]
    fn origin_patterns_match_scheme_host_and_port() {
        let any_port = origin("http://localhost:*");
        assert!(any_port.matches("http://localhost:5173"));
        assert!(any_port.matches("http://LOCALHOST:80"));
        assert!(any_port.matches("http://localhost"));
        assert!(!any_port.matches("https://localhost:5173"));
        assert!(!any_port.matches("http://localhost.evil.com:5173"));
        assert!(!any_port.matches("http://evil.com"));
        assert!(!any_port.matches("null"));

        let exact = origin("https://app.example.com");
        assert!(exact.matches("https://app.example.com"));
        assert!(exact.matches("https://app.example.com:443"));
        assert!(!exact.matches("https://app.example.com:8443"));

        let suffix = origin("https://*.example.com:8443");
        assert!(suffix.matches("https://a.example.com:8443"));
        assert!(!suffix.matches("https://example.com:8443"));
        assert!(!suffix.matches("https://a.example.com"));

        let v6 = origin("http://[::1]:*");
        assert!(v6.matches("http://[::1]:3000"));
        assert!(!v6.matches("http://[::2]:3000"));

        assert!(origin("*").matches("null"));
    }

    #[test]
    fn origin_patterns_refuse_what_is_not_an_origin() {
        assert_eq!(
            OriginPattern::parse("http://localhost:3000/")
                .unwrap_err()
                .1,
            "write \"http://localhost:3000\""
        );
        assert_eq!(
            OriginPattern::parse("localhost:3000").unwrap_err().0,
            "is not an origin (scheme://host[:port])"
        );
        assert_eq!(
            OriginPattern::parse("http://a/b/c").unwrap_err().0,
            "an origin is only scheme://host[:port], without path, query or user"
        );
        assert_eq!(
            OriginPattern::parse("http://localhost:99999")
                .unwrap_err()
                .0,
            "has a port that is not a number from 0 to 65535 or \"*\""
        );
        assert_eq!(
            OriginPattern::parse("http://exa mple").unwrap_err().0,
            "does not name a host (a name, an address, \"*\" or \"*.domain\")"
        );
    }

    #[test]
    fn host_patterns_ignore_ports_of_requests() {
        let local = HostPattern::parse("localhost").unwrap();
        assert!(local.matches("localhost:7391"));
        assert!(local.matches("LocalHost"));
        assert!(!local.matches("localhost.evil.com"));
        let v6 = HostPattern::parse("::1").unwrap();
        assert!(v6.matches("[::1]:7391"));
        assert!(v6.matches("[::1]"));
        let v6_bracketed = HostPattern::parse("[::1]").unwrap();
        assert!(v6_bracketed.matches("[::1]:1"));
        let suffix = HostPattern::parse("*.example.com").unwrap();
        assert!(suffix.matches("mcp.example.com:443"));
        assert!(!suffix.matches("example.com"));
    }

    #[test]
    fn host_patterns_refuse_urls_and_ports() {
        assert_eq!(
            HostPattern::parse("http://localhost").unwrap_err().0,
            "is a URL, not a host"
        );
        assert_eq!(
            HostPattern::parse("localhost:7391").unwrap_err().0,
            "has a port; the Host allowlist matches names only (any port)"
        );
    }

    #[test]
    fn defaults_parse() {
        for o in DEFAULT_ALLOWED_ORIGINS {
            OriginPattern::parse(o).unwrap();
        }
        for h in DEFAULT_ALLOWED_HOSTS {
            HostPattern::parse(h).unwrap();
        }
    }
}
