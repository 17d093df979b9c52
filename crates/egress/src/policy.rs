//! What a sandboxed server may reach: host patterns (exact names, or `*.` suffixes that never match
//! their apex) and the private address ranges it may still connect to. Parsed once from the
//! configuration, so a bad pattern is refused at load time, not at the first request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Ports a pattern without `:port` allows: plain HTTP (absolute-URI requests) and TLS (CONNECT).
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// Longest host name (RFC 1035, without the trailing dot).
pub const MAX_HOST_LEN: usize = 253;
/// Longest label of a host name.
pub const MAX_LABEL_LEN: usize = 63;

/// Why an allow-list entry was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error(
        "allow_hosts entry {entry:?} {problem}; write a host name such as \"api.github.com\", \"*.example.com\" or \"example.com:8443\""
    )]
    Host {
        entry: String,
        problem: &'static str,
    },
    #[error(
        "allow_private entry {entry:?} {problem}; write an address or CIDR such as \"10.1.2.3\", \"10.0.0.0/8\" or \"fd00::/8\""
    )]
    Cidr {
        entry: String,
        problem: &'static str,
    },
}

/// One allow-list entry: `name`, `*.suffix` (subdomains only; the apex needs its own entry), with
/// an optional `:port` (else `DEFAULT_PORTS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern {
    /// Lowercase name without a `*.` prefix.
    name: String,
    wildcard: bool,
    port: Option<u16>,
}

impl HostPattern {
    pub fn parse(entry: &str) -> Result<Self, PolicyError> {
        let fail = |problem| PolicyError::Host {
            entry: entry.to_owned(),
            problem,
        };
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) => {
                let port: u16 = port
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| fail("has a port that is not 1-65535"))?;
                (host, Some(port))
            }
            None => (entry, None),
        };
        let (name, wildcard) = match host.strip_prefix("*.") {
            Some(rest) => (rest, true),
            None => (host, false),
        };
        if name.contains('*') {
            return Err(fail("has a `*` other than a leading `*.`"));
        }
        let name = name.to_ascii_lowercase();
        if let Some(problem) = host_name_problem(&name) {
            return Err(fail(problem));
        }
        if wildcard && !name.contains('.') {
            return Err(fail("is a wildcard over a whole top-level domain"));
        }
        Ok(Self {
            name,
            wildcard,
            port,
        })
    }

    /// Whether a request for `host:port` (host already lowercase, no trailing dot) matches.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        let host_ok = if self.wildcard {
            host.strip_suffix(self.name.as_str())
                .and_then(|rest| rest.strip_suffix('.'))
                .is_some_and(|sub| !sub.is_empty())
        } else {
            host == self.name
        };
        port_ok && host_ok
    }
}

/// Why `name` is not a host name, or None. IP literals are refused: the allow-list names hosts,
/// and an address target would skip the name check.
fn host_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is empty");
    }
    if name.len() > MAX_HOST_LEN {
        return Some("is longer than 253 characters");
    }
    if name.parse::<IpAddr>().is_ok() || name.parse::<Ipv4Addr>().is_ok() {
        return Some("is an IP address, not a host name (use allow_private for addresses)");
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > MAX_LABEL_LEN {
            return Some("has an empty label or one longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            || label.starts_with('-')
            || label.ends_with('-')
        {
            return Some("has a character a host name cannot hold");
        }
    }
    if name.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Some("is all digits, which resolvers read as an address");
    }
    None
}

/// An address range `allow_private` opens: `addr/prefix`, or one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(entry: &str) -> Result<Self, PolicyError> {
        let fail = |problem| PolicyError::Cidr {
            entry: entry.to_owned(),
            problem,
        };
        let (addr, prefix) = match entry.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (entry, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| fail("is not an IPv4 or IPv6 address"))?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix =
            match prefix {
                None => max,
                Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| {
                    fail("has a prefix length outside 0-32 (IPv4) or 0-128 (IPv6)")
                })?,
            };
        Ok(Self { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `prefix` bits of `a` and `b` agree.
fn prefix_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let mut bits = usize::from(prefix);
    for (x, y) in a.iter().zip(b) {
        if bits == 0 {
            return true;
        }
        let take = bits.min(8);
        // take is 1..=8, so the shift stays within a u8.
        let mask = 0xffu8 << (8 - take);
        if (x ^ y) & mask != 0 {
            return false;
        }
        bits -= take;
    }
    true
}

/// Which built-in rule refuses an address (unless `allow_private` covers it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressRule {
    Loopback,
    LinkLocal,
    /// Cloud instance metadata (169.254.169.254, fd00:ec2::254): credentials live there.
    Metadata,
    /// RFC 1918, RFC 6598 shared space and IPv6 unique-local addresses.
    Private,
    Unspecified,
    Multicast,
    Broadcast,
}

impl AddressRule {
    pub fn as_str(self) -> &'static str {
        match self {
            AddressRule::Loopback => "loopback",
            AddressRule::LinkLocal => "link-local",
            AddressRule::Metadata => "metadata",
            AddressRule::Private => "private",
            AddressRule::Unspecified => "unspecified",
            AddressRule::Multicast => "multicast",
            AddressRule::Broadcast => "broadcast",
        }
    }

    /// The rule `ip` falls under, or None for a public address. IPv4-mapped IPv6 addresses are
    /// judged as the IPv4 address they carry.
    pub fn of(ip: IpAddr) -> Option<AddressRule> {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Self::of_v4(v4),
            IpAddr::V6(v6) => Self::of_v6(v6),
        }
    }

    fn of_v4(ip: Ipv4Addr) -> Option<AddressRule> {
        let [a, b, ..] = ip.octets();
        if ip == Ipv4Addr::new(169, 254, 169, 254) {
            Some(AddressRule::Metadata)
        } else if ip.is_loopback() {
            Some(AddressRule::Loopback)
        } else if ip.is_link_local() {
            Some(AddressRule::LinkLocal)
        } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
            Some(AddressRule::Private)
        } else if a == 0 {
            Some(AddressRule::Unspecified)
        } else if ip.is_multicast() {
            Some(AddressRule::Multicast)
        } else if ip.is_broadcast() {
            Some(AddressRule::Broadcast)
        } else {
            None
        }
    }

    fn of_v6(ip: Ipv6Addr) -> Option<AddressRule> {
        let first = ip.segments()[0];
        if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
            Some(AddressRule::Metadata)
        } else if ip.is_loopback() {
            Some(AddressRule::Loopback)
        } else if ip.is_unspecified() {
            Some(AddressRule::Unspecified)
        } else if first & 0xffc0 == 0xfe80 {
            Some(AddressRule::LinkLocal)
        } else if first & 0xfe00 == 0xfc00 {
            Some(AddressRule::Private)
        } else if ip.is_multicast() {
            Some(AddressRule::Multicast)
        } else {
            None
        }
    }
}

/// One server's allow-list, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    hosts: Vec<HostPattern>,
    private: Vec<Cidr>,
}

impl Policy {
    /// Parses `allow_hosts` and `allow_private`; the first bad entry is the error.
    pub fn new<H: AsRef<str>, P: AsRef<str>>(
        hosts: &[H],
        private: &[P],
    ) -> Result<Self, PolicyError> {
        Ok(Self {
            hosts: hosts
                .iter()
                .map(|h| HostPattern::parse(h.as_ref()))
                .collect::<Result<_, _>>()?,
            private: private
                .iter()
                .map(|p| Cidr::parse(p.as_ref()))
                .collect::<Result<_, _>>()?,
        })
    }

    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// Whether `host:port` is on the list; `host` is compared lowercase without a trailing dot.
    pub fn allows_host(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.iter().any(|p| p.matches(&host, port))
    }

    /// The rule refusing `ip`, or None when it may be reached (public, or inside `allow_private`).
    pub fn refuses_address(&self, ip: IpAddr) -> Option<AddressRule> {
        let rule = AddressRule::of(ip)?;
        if self.private.iter().any(|c| c.contains(ip)) {
            None
        } else {
            Some(rule)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn wildcards_match_subdomains_but_not_the_apex() {
        let p = Policy::new(&["api.github.com", "*.example.com"], &[] as &[&str]).unwrap();
        assert!(p.allows_host("api.github.com", 443));
        assert!(p.allows_host("API.GitHub.com.", 80));
        assert!(!p.allows_host("github.com", 443));
        assert!(!p.allows_host("evil-api.github.com", 443));
        assert!(p.allows_host("a.example.com", 443));
        assert!(p.allows_host("a.b.example.com", 443));
        assert!(
            !p.allows_host("example.com", 443),
            "the apex needs its own entry"
        );
        assert!(!p.allows_host("notexample.com", 443));
        assert!(!p.allows_host("a.example.com.evil.net", 443));
    }

    #[test]
    fn ports_default_to_http_and_https() {
        let p = Policy::new(&["a.test", "b.test:8443"], &[] as &[&str]).unwrap();
        assert!(p.allows_host("a.test", 80) && p.allows_host("a.test", 443));
        assert!(!p.allows_host("a.test", 22));
        assert!(p.allows_host("b.test", 8443));
        assert!(!p.allows_host("b.test", 443));
        assert_eq!(DEFAULT_PORTS, [80, 443]);
    }

    #[test]
    fn bad_host_patterns_are_refused_with_the_entry_named() {
        for bad in [
            "",
            "*",
            "*.com",
            "a.*.com",
            "*example.com",
            "10.0.0.1",
            "::1",
            "a..b",
            "-a.com",
            "a b.com",
            "a.com:0",
            "a.com:99999",
            "1.2.3",
        ] {
            let e = HostPattern::parse(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        let long = format!("{}.com", "a".repeat(MAX_LABEL_LEN + 1));
        assert!(HostPattern::parse(&long).is_err());
        let label = "a".repeat(MAX_LABEL_LEN);
        let too_long = [label.as_str(); 4].join(".") + ".com";
        assert!(too_long.len() > MAX_HOST_LEN);
        assert!(HostPattern::parse(&too_long).is_err());
        assert!(HostPattern::parse(&format!("{label}.com")).is_ok());
    }

    #[test]
    fn address_refusal_table() {
        let table = [
            ("127.0.0.1", Some(AddressRule::Loopback)),
            ("127.9.9.9", Some(AddressRule::Loopback)),
            ("::1", Some(AddressRule::Loopback)),
            ("::ffff:127.0.0.1", Some(AddressRule::Loopback)),
            ("169.254.169.254", Some(AddressRule::Metadata)),
            ("fd00:ec2::254", Some(AddressRule::Metadata)),
            ("169.254.1.1", Some(AddressRule::LinkLocal)),
            ("fe80::1", Some(AddressRule::LinkLocal)),
            ("10.1.2.3", Some(AddressRule::Private)),
            ("172.16.0.1", Some(AddressRule::Private)),
            ("172.31.255.255", Some(AddressRule::Private)),
            ("192.168.1.1", Some(AddressRule::Private)),
            ("100.64.0.1", Some(AddressRule::Private)),
            ("fd12::1", Some(AddressRule::Private)),
            ("fc00::1", Some(AddressRule::Private)),
            ("::ffff:10.0.0.1", Some(AddressRule::Private)),
            ("0.0.0.0", Some(AddressRule::Unspecified)),
            ("::", Some(AddressRule::Unspecified)),
            ("224.0.0.1", Some(AddressRule::Multicast)),
            ("ff02::1", Some(AddressRule::Multicast)),
            ("255.255.255.255", Some(AddressRule::Broadcast)),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("8.8.8.8", None),
            ("2606:4700::1111", None),
        ];
        let policy = Policy::default();
        for (addr, rule) in table {
            assert_eq!(policy.refuses_address(ip(addr)), rule, "{addr}");
        }
    }

    #[test]
    fn allow_private_opens_only_its_ranges() {
        let p = Policy::new(&[] as &[&str], &["10.0.0.0/8", "127.0.0.1", "fd00::/8"]).unwrap();
        assert_eq!(p.refuses_address(ip("10.200.0.1")), None);
        assert_eq!(p.refuses_address(ip("::ffff:10.200.0.1")), None);
        assert_eq!(p.refuses_address(ip("127.0.0.1")), None);
        assert_eq!(
            p.refuses_address(ip("127.0.0.2")),
            Some(AddressRule::Loopback)
        );
        assert_eq!(p.refuses_address(ip("fd12::1")), None);
        assert_eq!(
            p.refuses_address(ip("192.168.0.1")),
            Some(AddressRule::Private)
        );
        let zero = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(zero.contains(ip("169.254.169.254")) && !zero.contains(ip("::1")));
        let odd = Cidr::parse("172.16.0.0/12").unwrap();
        assert!(odd.contains(ip("172.31.0.1")) && !odd.contains(ip("172.32.0.1")));
    }

    #[test]
    fn bad_cidrs_are_refused_with_the_entry_named() {
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "example.com",
            "10.0.0.0/x",
        ] {
            let e = Cidr::parse(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }
}
