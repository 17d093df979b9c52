//! Origin and Host allowlists, checked on every HTTP request.
//!
//! A web page can make a browser send requests to a gateway on localhost (and DNS rebinding can
//! make a hostile name resolve to 127.0.0.1). Browsers always send `Origin` on such requests, and
//! the `Host` header names what the page thought it was talking to: checking both keeps pages
//! out while leaving non-browser clients (which send no `Origin`) unaffected.

use std::fmt;
use std::net::SocketAddr;

/// Host names and addresses that mean "this machine".
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostRule {
    Any,
    Exact(String),
    /// `*.example.com`, stored as `.example.com`.
    Suffix(String),
}

impl HostRule {
    fn parse(text: &str) -> Option<HostRule> {
        if text == "*" {
            return Some(HostRule::Any);
        }
        if let Some(suffix) = text.strip_prefix("*.") {
            return valid_name(suffix)
                .then(|| HostRule::Suffix(format!(".{}", suffix.to_ascii_lowercase())));
        }
        let bare = text.trim_start_matches('[').trim_end_matches(']');
        valid_name(bare).then(|| HostRule::Exact(bare.to_ascii_lowercase()))
    }

    fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        match self {
            HostRule::Any => true,
            HostRule::Exact(h) => *h == host,
            HostRule::Suffix(s) => host.len() > s.len() && host.ends_with(s.as_str()),
        }
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':'))
}

/// Splits `host[:port]` (host may be `[v6]`) into the host without brackets and the port text.
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
        _ => Some((s, None)),
    }
}

/// A pattern a `Host` header must match: `*`, a name or address, or `*.example.com`. Ports are
/// not part of the pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    rule: HostRule,
}

impl HostPattern {
    /// Parses a pattern; `None` when it is not a host name, an address, `*` or `*.suffix`.
    pub fn parse(text: &str) -> Option<HostPattern> {
        Some(HostPattern {
            rule: HostRule::parse(text)?,
            text: text.to_owned(),
        })
    }

    /// The loopback names: the default.
    pub fn loopback() -> Vec<HostPattern> {
        LOOPBACK_HOSTS
            .iter()
            .filter_map(|h| HostPattern::parse(h))
            .collect()
    }

    fn matches_host(&self, host: &str) -> bool {
        self.rule.matches(host)
    }
}

impl fmt::Debug for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PortRule {
    Any,
    /// No port written: the scheme's default port (or none) only.
    Default,
    Exact(u16),
}

/// A pattern an `Origin` header must match: `*`, or `scheme://host[:port]` where host may be
/// `*.suffix` and port may be `*`.
#[derive(Clone, PartialEq, Eq)]
pub struct OriginPattern {
    text: String,
    rule: Option<(String, HostRule, PortRule)>,
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

impl OriginPattern {
    /// Parses a pattern; `None` when it is not `*` or `scheme://host[:port]`.
    pub fn parse(text: &str) -> Option<OriginPattern> {
        if text == "*" {
            return Some(OriginPattern {
                text: text.to_owned(),
                rule: None,
            });
        }
        let (scheme, rest) = text.split_once("://")?;
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            return None;
        }
        let (host, port) = split_host_port(rest.trim_end_matches('/'))?;
        let port = match port {
            None => PortRule::Default,
            Some("*") => PortRule::Any,
            Some(p) => PortRule::Exact(p.parse().ok()?),
        };
        Some(OriginPattern {
            text: text.to_owned(),
            rule: Some((scheme.to_ascii_lowercase(), HostRule::parse(host)?, port)),
        })
    }

    /// `http://` and `https://` on every loopback name, any port: the default.
    pub fn loopback() -> Vec<OriginPattern> {
        ["http", "https"]
            .iter()
            .flat_map(|scheme| {
                ["localhost", "127.0.0.1", "[::1]"]
                    .iter()
                    .filter_map(move |h| OriginPattern::parse(&format!("{scheme}://{h}:*")))
            })
            .collect()
    }

    /// Whether an `Origin` header value matches.
    pub fn matches(&self, origin: &str) -> bool {
        let Some((scheme, host_rule, port_rule)) = &self.rule else {
            return true;
        };
        let Some((o_scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        if !o_scheme.eq_ignore_ascii_case(scheme) {
            return false;
        }
        let Some((host, port)) = split_host_port(rest) else {
            return false;
        };
        if !host_rule.matches(host) {
            return false;
        }
        let port = match port {
            None => default_port(scheme),
            Some(p) => match p.parse::<u16>() {
                Ok(p) => Some(p),
                Err(_) => return false,
            },
        };
        match port_rule {
            PortRule::Any => true,
            PortRule::Default => port == default_port(scheme),
            PortRule::Exact(want) => port == Some(*want),
        }
    }
}

impl fmt::Debug for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

/// Whether an `Origin` header is allowed (no header: a non-browser client, allowed).
pub fn origin_allowed(patterns: &[OriginPattern], origin: Option<&str>) -> bool {
    match origin {
        None => true,
        Some(o) => patterns.iter().any(|p| p.matches(o)),
    }
}

/// Whether a `Host` header is allowed: it matches a pattern, or names the listen address itself.
pub fn host_allowed(patterns: &[HostPattern], listen: SocketAddr, host: Option<&str>) -> bool {
    let Some(host) = host else {
        return false;
    };
    let Some((name, port)) = split_host_port(host) else {
        return false;
    };
    if patterns.iter().any(|p| p.matches_host(name)) {
        return true;
    }
    let listen_ip = listen.ip().to_string();
    name.eq_ignore_ascii_case(&listen_ip)
        && port.is_none_or(|p| p.parse::<u16>().ok() == Some(listen.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_origins_match_any_port_and_nothing_else() {
        let p = OriginPattern::loopback();
        assert!(origin_allowed(&p, Some("http://localhost:5173")));
        assert!(origin_allowed(&p, Some("http://127.0.0.1")));
        assert!(origin_allowed(&p, Some("https://[::1]:8443")));
        assert!(!origin_allowed(&p, Some("http://evil.example")));
        assert!(!origin_allowed(
            &p,
            Some("http://localhost.evil.example:80")
        ));
        assert!(!origin_allowed(&p, Some("null")));
        assert!(origin_allowed(&p, None));
    }

    #[test]
    fn origin_patterns_with_ports_and_suffixes() {
        let p = [OriginPattern::parse("https://*.example.com").unwrap()];
        assert!(p[0].matches("https://app.example.com"));
        assert!(p[0].matches("https://app.example.com:443"));
        assert!(!p[0].matches("https://app.example.com:8443"));
        assert!(!p[0].matches("https://example.com"));
        assert!(
            OriginPattern::parse("*")
                .unwrap()
                .matches("http://anything")
        );
        assert!(OriginPattern::parse("no-scheme").is_none());
    }

    #[test]
    fn hosts_are_loopback_names_or_the_listen_address() {
        let p = HostPattern::loopback();
        let listen: SocketAddr = "192.0.2.7:7391".parse().unwrap();
        assert!(host_allowed(&p, listen, Some("localhost:7391")));
        assert!(host_allowed(&p, listen, Some("127.0.0.1:9")));
        assert!(host_allowed(&p, listen, Some("[::1]:7391")));
        assert!(host_allowed(&p, listen, Some("192.0.2.7:7391")));
        assert!(!host_allowed(&p, listen, Some("192.0.2.7:80")));
        assert!(!host_allowed(&p, listen, Some("evil.example")));
        assert!(!host_allowed(&p, listen, None));
        let star = [HostPattern::parse("*.corp.example").unwrap()];
        assert!(host_allowed(&star, listen, Some("mcp.corp.example:1")));
    }
}
