//! Origin and Host allowlists: the HTTP server checks them on every request, and owns them; the
//! configuration (manifold-config) builds them from the file with the same validation.
//!
//! A web page can make a browser send requests to a gateway on localhost, and DNS rebinding can
//! make a hostile name resolve to 127.0.0.1. Browsers always send `Origin` on such requests, and
//! the `Host` header names what the page thought it was talking to: checking both keeps pages out
//! while leaving non-browser clients (which send no `Origin`) unaffected. Patterns are validated
//! strictly, so a pattern that could never match (or would match more than it says) is refused
//! when the file is loaded instead of silently weakening the check.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

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
    /// Patterns are stored lowercase; the host is compared without case, in place.
    fn matches(&self, host: &str) -> bool {
        match self {
            HostMatch::Any => true,
            HostMatch::Exact(h) => h.eq_ignore_ascii_case(host),
            HostMatch::Suffix(s) => {
                host.len() > s.len()
                    && host
                        .get(host.len() - s.len()..)
                        .is_some_and(|end| end.eq_ignore_ascii_case(s))
            }
        }
    }
}

/// A pattern that is not one: what was written, what is wrong with it and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the pattern {pattern:?} {problem}; {fix}")]
pub struct PatternError {
    pub pattern: String,
    /// What is wrong, as a phrase that follows the pattern ("is not an origin ...").
    pub problem: String,
    /// What to write instead.
    pub fix: String,
}

impl PatternError {
    fn new(pattern: &str, problem: &str, fix: impl Into<String>) -> PatternError {
        PatternError {
            pattern: pattern.to_owned(),
            problem: problem.to_owned(),
            fix: fix.into(),
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

/// One entry of `allowed_hosts`: `*`, a name or address, or `*.example.com`. Ports are not part
/// of a pattern: a `Host` header matches whatever port it names.
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

fn host_rule(host: &str) -> Option<HostMatch> {
    if host == "*" {
        return Some(HostMatch::Any);
    }
    if let Some(suffix) = host.strip_prefix("*.") {
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
    pub fn parse(text: &str) -> Result<OriginPattern, PatternError> {
        let example = "write e.g. \"https://app.example.com\" or \"http://localhost:*\"";
        if text == "*" {
            return Ok(OriginPattern {
                text: text.to_owned(),
                rule: None,
            });
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(PatternError::new(
                text,
                "is not an origin (scheme://host[:port])",
                example,
            ));
        };
        if !is_scheme(scheme) {
            return Err(PatternError::new(
                text,
                "does not start with a scheme such as http or https",
                example,
            ));
        }
        if let Some(stripped) = rest.strip_suffix('/').filter(|r| !r.contains('/')) {
            return Err(PatternError::new(
                text,
                "an origin has no path, not even \"/\"",
                format!("write \"{scheme}://{stripped}\""),
            ));
        }
        if rest.contains(['/', '?', '#', '@']) {
            return Err(PatternError::new(
                text,
                "an origin is only scheme://host[:port], without path, query or user",
                example,
            ));
        }
        let bad_host = || {
            PatternError::new(
                text,
                "does not name a host (a name, an address, \"*\" or \"*.domain\")",
                example,
            )
        };
        let (host, port) = split_host_port(rest).ok_or_else(bad_host)?;
        let host = host_rule(host).ok_or_else(bad_host)?;
        let port = match port {
            None => PortMatch::Default,
            Some("*") => PortMatch::Any,
            Some(p) => PortMatch::Exact(p.parse::<u16>().map_err(|_| {
                PatternError::new(
                    text,
                    "has a port that is not a number from 0 to 65535 or \"*\"",
                    example,
                )
            })?),
        };
        Ok(OriginPattern {
            text: text.to_owned(),
            rule: Some((scheme.to_ascii_lowercase(), host, port)),
        })
    }

    /// [`DEFAULT_ALLOWED_ORIGINS`]: pages served from this machine, over http or https, any port.
    pub fn loopback() -> Vec<OriginPattern> {
        DEFAULT_ALLOWED_ORIGINS
            .iter()
            .filter_map(|o| OriginPattern::parse(o).ok())
            .collect()
    }

    /// Whether an `Origin` header value is allowed by this pattern. A value with a path, query
    /// or user part is not an origin and matches nothing but `*`.
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
    pub fn parse(text: &str) -> Result<HostPattern, PatternError> {
        let example = "write a host name or address without scheme or port, e.g. \"localhost\" or \"*.example.com\"";
        if text.contains("://") || text.contains('/') {
            return Err(PatternError::new(text, "is a URL, not a host", example));
        }
        let host = match text.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            Some(inner) => inner,
            None => text,
        };
        if !host.contains("::") && host.matches(':').count() == 1 {
            return Err(PatternError::new(
                text,
                "has a port; the Host allowlist matches names only (any port)",
                example,
            ));
        }
        let rule = host_rule(host)
            .ok_or_else(|| PatternError::new(text, "is not a host name or address", example))?;
        Ok(HostPattern {
            text: text.to_owned(),
            rule,
        })
    }

    /// [`DEFAULT_ALLOWED_HOSTS`]: the names this machine answers to.
    pub fn loopback() -> Vec<HostPattern> {
        DEFAULT_ALLOWED_HOSTS
            .iter()
            .filter_map(|h| HostPattern::parse(h).ok())
            .collect()
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

/// Whether a request's `Origin` header is allowed. No header: a non-browser client, allowed.
pub fn origin_allowed(patterns: &[OriginPattern], origin: Option<&str>) -> bool {
    match origin {
        None => true,
        Some(o) => patterns.iter().any(|p| p.matches(o)),
    }
}

/// Which `Host` header values a server accepts: its patterns and, by default only, the address
/// the server is bound to.
///
/// An address literal cannot be rebound by DNS, so the address a server listens on is safe to
/// accept when nobody said otherwise; a configuration that lists its hosts gets exactly those.
#[derive(Clone, PartialEq, Eq)]
pub struct HostAllowlist {
    patterns: Vec<HostPattern>,
    listen_address: bool,
}

impl Default for HostAllowlist {
    /// The loopback names ([`DEFAULT_ALLOWED_HOSTS`]) and the listen address.
    fn default() -> HostAllowlist {
        HostAllowlist {
            patterns: HostPattern::loopback(),
            listen_address: true,
        }
    }
}

impl HostAllowlist {
    /// Exactly these patterns, as a configuration lists them: the listen address is not added.
    pub fn only(patterns: Vec<HostPattern>) -> HostAllowlist {
        HostAllowlist {
            patterns,
            listen_address: false,
        }
    }

    pub fn patterns(&self) -> &[HostPattern] {
        &self.patterns
    }

    /// Whether the address the server is bound to is accepted besides the patterns.
    pub fn includes_listen_address(&self) -> bool {
        self.listen_address
    }

    /// Whether a request's `Host` header is allowed on a server bound to `listen`. No header:
    /// refused (HTTP/1.1 requires one, and HTTP/2 clients send `:authority`, which counts).
    ///
    /// The listen address counts only as that address (compared as an IP address, so any
    /// spelling of it) on the bound port or with no port, and never when it is `0.0.0.0` or
    /// `::`: those are not addresses a client can mean, and pages that reach them get to this
    /// machine ("0.0.0.0 day").
    pub fn allows(&self, host: Option<&str>, listen: SocketAddr) -> bool {
        let Some((name, port)) = host.and_then(|h| split_host_port(h.trim())) else {
            return false;
        };
        if self.patterns.iter().any(|p| p.rule.matches(name)) {
            return true;
        }
        let ip = listen.ip();
        self.listen_address
            && !ip.is_unspecified()
            && name.parse::<IpAddr>().ok() == Some(ip)
            && port.is_none_or(|p| p.parse::<u16>().ok() == Some(listen.port()))
    }
}

impl fmt::Debug for HostAllowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        list.entries(&self.patterns);
        if self.listen_address {
            list.entry(&format_args!("<listen address>"));
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests;
