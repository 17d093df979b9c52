//! The unit tests of `allowlist.rs`, kept beside it so the file reads as the code it tests.

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
    assert!(origin("*").matches("http://anything"));
}

#[test]
fn suffix_origin_patterns_on_default_ports() {
    let p = origin("https://*.example.com");
    assert!(p.matches("https://app.example.com"));
    assert!(p.matches("https://app.example.com:443"));
    assert!(!p.matches("https://app.example.com:8443"));
    assert!(!p.matches("https://example.com"));
}

#[test]
fn an_origin_header_with_a_path_or_user_matches_no_pattern() {
    // Without this rule the text after the host would be taken as part of the host name,
    // and "evil.com/.example.com" ends with ".example.com".
    let suffix = origin("https://*.example.com");
    assert!(!suffix.matches("https://evil.com/.example.com"));
    assert!(!suffix.matches("https://evil.com?.example.com"));
    let local = origin("http://localhost:*");
    assert!(!local.matches("http://user@localhost:1"));
    assert!(!local.matches("http://localhost:1/"));
}

#[test]
fn loopback_origins_match_any_port_and_nothing_else() {
    let p = OriginPattern::loopback();
    assert_eq!(p.len(), DEFAULT_ALLOWED_ORIGINS.len());
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
fn origin_patterns_refuse_what_is_not_an_origin() {
    let err = OriginPattern::parse("http://localhost:3000/").unwrap_err();
    assert_eq!(err.problem, "an origin has no path, not even \"/\"");
    assert_eq!(err.fix, "write \"http://localhost:3000\"");
    assert_eq!(
        err.to_string(),
        "the pattern \"http://localhost:3000/\" an origin has no path, not even \"/\"; write \"http://localhost:3000\""
    );
    assert_eq!(
        OriginPattern::parse("localhost:3000").unwrap_err().problem,
        "is not an origin (scheme://host[:port])"
    );
    assert_eq!(
        OriginPattern::parse("no-scheme").unwrap_err().problem,
        "is not an origin (scheme://host[:port])"
    );
    assert_eq!(
        OriginPattern::parse("1http://localhost")
            .unwrap_err()
            .problem,
        "does not start with a scheme such as http or https"
    );
    assert_eq!(
        OriginPattern::parse("http://a/b/c").unwrap_err().problem,
        "an origin is only scheme://host[:port], without path, query or user"
    );
    assert_eq!(
        OriginPattern::parse("http://localhost:99999")
            .unwrap_err()
            .problem,
        "has a port that is not a number from 0 to 65535 or \"*\""
    );
    assert_eq!(
        OriginPattern::parse("http://exa mple").unwrap_err().problem,
        "does not name a host (a name, an address, \"*\" or \"*.domain\")"
    );
    assert_eq!(
        OriginPattern::parse("http://a:b:zz").unwrap_err().problem,
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
        HostPattern::parse("http://localhost").unwrap_err().problem,
        "is a URL, not a host"
    );
    assert_eq!(
        HostPattern::parse("localhost:7391").unwrap_err().problem,
        "has a port; the Host allowlist matches names only (any port)"
    );
    assert_eq!(
        HostPattern::parse("exa mple").unwrap_err().problem,
        "is not a host name or address"
    );
}

#[test]
fn hosts_are_loopback_names_or_the_listen_address() {
    let p = HostAllowlist::default();
    let listen: SocketAddr = "192.0.2.7:7391".parse().unwrap();
    assert!(p.allows(Some("localhost:7391"), listen));
    assert!(p.allows(Some("127.0.0.1:9"), listen));
    assert!(p.allows(Some("[::1]:7391"), listen));
    assert!(p.allows(Some("192.0.2.7:7391"), listen));
    assert!(p.allows(Some("192.0.2.7"), listen));
    assert!(!p.allows(Some("192.0.2.7:80"), listen));
    assert!(!p.allows(Some("192.0.2.8:7391"), listen));
    assert!(!p.allows(Some("evil.example"), listen));
    assert!(!p.allows(None, listen));
    let v6: SocketAddr = "[2001:db8::7]:7391".parse().unwrap();
    assert!(p.allows(Some("[2001:db8:0::7]:7391"), v6));
    let star = HostAllowlist::only(vec![HostPattern::parse("*.corp.example").unwrap()]);
    assert!(star.allows(Some("mcp.corp.example:1"), listen));
}

#[test]
fn an_unspecified_listen_address_is_never_a_host() {
    let p = HostAllowlist::default();
    let any_v4: SocketAddr = "0.0.0.0:7391".parse().unwrap();
    assert!(!p.allows(Some("0.0.0.0:7391"), any_v4));
    assert!(!p.allows(Some("0.0.0.0"), any_v4));
    let any_v6: SocketAddr = "[::]:7391".parse().unwrap();
    assert!(!p.allows(Some("[::]:7391"), any_v6));
    assert!(p.allows(Some("localhost:7391"), any_v4));
}

#[test]
fn listed_hosts_are_exactly_what_is_allowed() {
    let listed = HostAllowlist::only(vec![HostPattern::parse("mcp.example.com").unwrap()]);
    let listen: SocketAddr = "192.0.2.7:7391".parse().unwrap();
    assert!(listed.allows(Some("mcp.example.com:443"), listen));
    assert!(!listed.allows(Some("192.0.2.7:7391"), listen));
    assert!(!listed.allows(Some("localhost"), listen));
    assert!(!listed.includes_listen_address());
    assert!(HostAllowlist::default().includes_listen_address());
}

#[test]
fn defaults_parse() {
    assert_eq!(
        OriginPattern::loopback().len(),
        DEFAULT_ALLOWED_ORIGINS.len()
    );
    assert_eq!(HostPattern::loopback().len(), DEFAULT_ALLOWED_HOSTS.len());
    assert_eq!(
        format!("{:?}", HostAllowlist::default()),
        "[\"localhost\", \"127.0.0.1\", \"::1\", <listen address>]"
    );
}
