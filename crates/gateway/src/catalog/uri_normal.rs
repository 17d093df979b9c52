//! One spelling per resource URI, so that a rule over resource URIs holds however a caller spells
//! one, and every spelling an upstream could read as the same resource.
//!
//! The rule (docs/security.md, "Resource URIs"): a request's URI is brought to its normal form,
//! RFC 3986 section 6.2.2 (scheme and host in lowercase, percent-encodings in uppercase hex and
//! decoded where they stand for unreserved characters, dot segments removed) and section 6.2.3
//! for what is certain (an empty or default port dropped, `file://localhost/` read as
//! `file:///`), plus doubled slashes in the path collapsed. The normal form is what the upstream is
//! sent. Because upstreams read URIs in more ways than RFC 3986 says (a file server that decodes
//! `%2F`, treats `\` as `/`, ignores a trailing slash, a query or a fragment, or keeps empty
//! segments when it resolves `..`), rules are judged on every [`readings`] of the URI, and a deny
//! that covers any of them denies the URI.
//!
//! Written here rather than taken from the `url` crate: that crate follows the WHATWG URL
//! standard, which leaves the paths of non-special schemes (every `SERVER+scheme` Manifold
//! exposes) alone, and percent-encoding case and dot segments there are exactly what matters.

/// Characters RFC 3986 section 2.3 calls unreserved: their percent-encoding means the character.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Whether `s` is a URI scheme (RFC 3986 section 3.1).
fn is_scheme(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// The five components of RFC 3986 appendix B, as written.
#[derive(Debug, Clone, Copy)]
struct Parts<'a> {
    scheme: Option<&'a str>,
    authority: Option<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

fn parse(uri: &str) -> Parts<'_> {
    let (rest, fragment) = match uri.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (uri, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (scheme, rest) = match rest.split_once(':') {
        Some((s, r)) if is_scheme(s) => (Some(s), r),
        _ => (None, rest),
    };
    let (authority, path) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            (after.get(..end), after.get(end..).unwrap_or_default())
        }
        None => (None, rest),
    };
    Parts {
        scheme,
        authority,
        path,
        query,
        fragment,
    }
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Percent-encodings in uppercase hex, decoded when they stand for an unreserved character or
/// one `also` names; every other byte as written.
fn normal_percent(s: &str, also: &[u8]) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let pair = (bytes.get(i + 1).copied(), bytes.get(i + 2).copied());
        if let (b'%', (Some(h), Some(l))) = (b, pair)
            && let (Some(hv), Some(lv)) = (hex_value(h), hex_value(l))
        {
            let v = hv * 16 + lv;
            if is_unreserved(v) || also.contains(&v) {
                out.push(v);
            } else {
                out.push(b'%');
                out.push(h.to_ascii_uppercase());
                out.push(l.to_ascii_uppercase());
            }
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    // Only ASCII bytes were put in place of ASCII sequences, so this never replaces anything.
    String::from_utf8_lossy(&out).into_owned()
}

/// Lowercase, except the hex digits of percent-encodings (which stay uppercase).
fn lowercase_outside_percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut keep = 0;
    for c in s.chars() {
        if keep > 0 {
            out.push(c);
            keep -= 1;
        } else if c == '%' {
            out.push(c);
            keep = 2;
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The port a scheme implies, which RFC 3986 section 6.2.3 says to leave out.
fn default_port(base_scheme: &str) -> Option<&'static str> {
    match base_scheme {
        "http" | "ws" => Some("80"),
        "https" | "wss" => Some("443"),
        "ftp" => Some("21"),
        _ => None,
    }
}

fn normal_authority(authority: &str, base_scheme: &str) -> String {
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(normal_percent(u, &[])), h),
        None => (None, authority),
    };
    let (host, port) = match host_port.rfind(':') {
        Some(at) if !host_port.get(at..).is_some_and(|p| p.contains(']')) => (
            host_port.get(..at).unwrap_or_default(),
            host_port.get(at + 1..).unwrap_or_default(),
        ),
        _ => (host_port, ""),
    };
    let mut host = lowercase_outside_percent(&normal_percent(host, &[]));
    if base_scheme == "file" && host == "localhost" {
        host.clear();
    }
    let mut out = String::with_capacity(authority.len());
    if let Some(u) = userinfo {
        out.push_str(&u);
        out.push('@');
    }
    out.push_str(&host);
    if !port.is_empty() && default_port(base_scheme) != Some(port) {
        out.push(':');
        out.push_str(port);
    }
    out
}

/// RFC 3986 section 5.2.4, `remove_dot_segments`, as written there.
pub fn remove_dot_segments(path: &str) -> String {
    let mut input = path.to_owned();
    let mut out = String::with_capacity(path.len());
    let pop = |out: &mut String| match out.rfind('/') {
        Some(at) => out.truncate(at),
        None => out.clear(),
    };
    while !input.is_empty() {
        if input.starts_with("../") {
            input.drain(..3);
        } else if input.starts_with("./") || input.starts_with("/./") {
            input.drain(..2);
        } else if input == "/." {
            input = "/".to_owned();
        } else if input.starts_with("/../") {
            input.drain(..3);
            pop(&mut out);
        } else if input == "/.." {
            input = "/".to_owned();
            pop(&mut out);
        } else if input == "." || input == ".." {
            input.clear();
        } else {
            let start = usize::from(input.starts_with('/'));
            let end = input
                .get(start..)
                .and_then(|s| s.find('/'))
                .map_or(input.len(), |i| i + start);
            out.extend(input.drain(..end));
        }
    }
    out
}

fn collapse_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

/// How one upstream might read a path.
#[derive(Debug, Clone, Copy)]
struct Reading {
    /// `a//b` taken as `a/b` (file systems); otherwise empty segments count for `..`.
    slashes_collapsed: bool,
}

const NORMAL: Reading = Reading {
    slashes_collapsed: true,
};

/// `uri` with `%2F`, `%5C` and `\` taken as `/` wherever they stand, as an upstream that decodes
/// the whole URI, or runs on Windows, would take them.
fn separators_decoded(uri: &str) -> String {
    let mut out = uri.replace('\\', "/");
    for encoded in ["%2F", "%2f", "%5C", "%5c"] {
        out = out.replace(encoded, "/");
    }
    out
}

fn normal_with(parts: Parts<'_>, reading: Reading) -> String {
    let scheme = parts.scheme.map(str::to_ascii_lowercase);
    let base_scheme = scheme
        .as_deref()
        .and_then(|s| s.rsplit('+').next())
        .unwrap_or_default();
    let mut path = normal_percent(parts.path, &[]);
    if reading.slashes_collapsed {
        path = collapse_slashes(&path);
    }
    if parts.scheme.is_some() || path.starts_with('/') {
        path = remove_dot_segments(&path);
    }
    let mut out = String::with_capacity(path.len() + 16);
    if let Some(s) = &scheme {
        out.push_str(s);
        out.push(':');
    }
    if let Some(a) = parts.authority {
        out.push_str("//");
        out.push_str(&normal_authority(a, base_scheme));
    }
    if parts.authority.is_some() && !path.is_empty() && !path.starts_with('/') {
        out.push('/');
    }
    out.push_str(&path);
    if let Some(q) = parts.query {
        out.push('?');
        out.push_str(&normal_percent(q, &[]));
    }
    if let Some(f) = parts.fragment {
        out.push('#');
        out.push_str(&normal_percent(f, &[]));
    }
    out
}

/// The normal form of a URI: what rules are judged on first and what the upstream is sent.
pub fn normal_form(uri: &str) -> String {
    normal_with(parse(uri), NORMAL)
}

/// Every form an upstream might read `uri` as, the normal form first, without repeats: each
/// reading of its path, each with and without a trailing slash, a query and a fragment. A rule
/// that denies any of them denies the URI.
pub fn readings(uri: &str) -> Vec<String> {
    let decoded = separators_decoded(uri);
    let mut out: Vec<String> = Vec::with_capacity(8);
    let mut add = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    for text in [uri, decoded.as_str()] {
        let parts = parse(text);
        for slashes_collapsed in [true, false] {
            let reading = Reading { slashes_collapsed };
            let full = normal_with(parts, reading);
            let bare = normal_with(
                Parts {
                    query: None,
                    fragment: None,
                    ..parts
                },
                reading,
            );
            for form in [full, bare] {
                let trimmed = without_trailing_slash(&form);
                add(form);
                if let Some(t) = trimmed {
                    add(t);
                }
            }
        }
    }
    out
}

/// `form` without the trailing slashes of its path, unless its path is only `/`.
fn without_trailing_slash(form: &str) -> Option<String> {
    let parts = parse(form);
    let trimmed = parts.path.trim_end_matches('/');
    if trimmed.len() == parts.path.len() || trimmed.is_empty() {
        return None;
    }
    let mut out = form.to_owned();
    let end = form.len()
        - parts.query.map_or(0, |q| q.len() + 1)
        - parts.fragment.map_or(0, |f| f.len() + 1);
    out.replace_range(end - (parts.path.len() - trimmed.len())..end, "");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_3986_dot_segment_examples_come_out_as_the_rfc_says() {
        // Section 5.2.4's two worked examples and the abnormal ones of section 5.4.2.
        assert_eq!(remove_dot_segments("/a/b/c/./../../g"), "/a/g");
        assert_eq!(remove_dot_segments("mid/content=5/../6"), "mid/6");
        assert_eq!(remove_dot_segments("/../g"), "/g");
        assert_eq!(remove_dot_segments("/./g"), "/g");
        assert_eq!(remove_dot_segments("/g."), "/g.");
        assert_eq!(remove_dot_segments("/.g"), "/.g");
        assert_eq!(remove_dot_segments("/..g"), "/..g");
        assert_eq!(remove_dot_segments("/a/b/./g/."), "/a/b/g/");
        assert_eq!(remove_dot_segments("/a/b/g/.."), "/a/b/");
        assert_eq!(remove_dot_segments("/a/b/../../../../g"), "/g");
    }

    #[test]
    fn rfc_3986_section_6_examples_are_equivalent() {
        // Section 6.2.2: "example://a/b/c/%7Bfoo%7D" and "eXAMPLE://a/./b/../b/%63/%7bfoo%7d".
        assert_eq!(
            normal_form("eXAMPLE://a/./b/../b/%63/%7bfoo%7d"),
            "example://a/b/c/%7Bfoo%7D"
        );
        // Section 6.2.2.1: case of scheme and host, hex digits in uppercase.
        assert_eq!(
            normal_form("HTTP://www.EXAMPLE.com/%3a"),
            "http://www.example.com/%3A"
        );
        // Section 6.2.3: the default port and an empty one mean the same.
        for spelling in ["http://example.com:80/", "http://example.com:/"] {
            assert_eq!(normal_form(spelling), "http://example.com/");
        }
        assert_eq!(
            normal_form("http://example.com:8080/"),
            "http://example.com:8080/"
        );
    }

    #[test]
    fn each_spelling_the_issue_lists_comes_to_one_form() {
        let normal = "fs+file:///srv/secrets/key.pem";
        for spelling in [
            "FS+FILE:///srv/secrets/key.pem",
            "fs+file://LOCALHOST/srv/secrets/key.pem",
            "fs+file:///srv/./secrets/key.pem",
            "fs+file:///srv/public/../secrets/key.pem",
            "fs+file:///srv/%73ecrets/key%2epem",
            "fs+file:///srv/%73ecrets/key%2Epem",
            "fs+file:///srv//secrets///key.pem",
            "fs+file:///../srv/secrets/key.pem",
        ] {
            assert_eq!(normal_form(spelling), normal, "{spelling}");
        }
        // Only one of an upstream's readings of these is the covered URI.
        for spelling in [
            "fs+file:///srv/secrets/key.pem/",
            "fs+file:///srv%2Fsecrets%2Fkey.pem",
            "fs+file:%2F%2F%2Fsrv%2fsecrets%5Ckey.pem",
            "fs+file:///srv\\secrets\\key.pem",
            "fs+file:///srv/secrets/key.pem?x=1",
            "fs+file:///srv/secrets/key.pem#top",
            "fs+file:///srv/public//../secrets/key.pem",
        ] {
            assert!(
                readings(spelling).iter().any(|r| r == normal),
                "{spelling}: {:?}",
                readings(spelling)
            );
        }
    }

    #[test]
    fn what_does_not_stand_for_an_unreserved_character_stays_encoded() {
        assert_eq!(normal_form("a+b:/x%2fy%20z"), "a+b:/x%2Fy%20z");
        assert_eq!(normal_form("a+b:/100%"), "a+b:/100%");
        assert_eq!(normal_form("a+b:/%zz"), "a+b:/%zz");
        assert_eq!(normal_form("a+b:/caf%C3%A9"), "a+b:/caf%C3%A9");
        assert_eq!(normal_form("a+b:/é"), "a+b:/é");
        // The path keeps its case; a template keeps its braces.
        assert_eq!(normal_form("A+B://H/Path/{id}"), "a+b://h/Path/{id}");
    }

    #[test]
    fn the_normal_form_is_a_fixed_point_and_the_first_reading() {
        for uri in [
            "fs+file:///srv/secrets/",
            "e+test://static/resource/1?q=%7e#f",
            "x+urn:isbn:0451450523",
            "m+https://user@Host:443/a/../b",
        ] {
            let n = normal_form(uri);
            assert_eq!(normal_form(&n), n);
            assert_eq!(readings(uri).first(), Some(&n));
        }
    }
}
