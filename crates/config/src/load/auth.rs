//! Reads the `[auth]` section: API keys on or off, the OAuth issuer whose tokens are accepted,
//! the gateway's public resource URL, and the explicit opt-out. Every URL is checked here, with
//! its position in the file, so a typo never becomes a 401 at run time.

use toml::de::DeTable;

use super::reader::{Item, Reader, Show, Text, key_path};
use manifold_auth::settings::{
    ASYMMETRIC_ALGORITHMS, AuthSettings, DEFAULT_ALGORITHMS, DEFAULT_GROUPS_CLAIM, OAuthSettings,
};

pub(crate) const AUTH_KEYS: &[&str] = &["api_keys", "oauth", "resource_url", "insecure_no_auth"];

pub(crate) const OAUTH_KEYS: &[&str] = &[
    "issuer",
    "jwks_url",
    "audience",
    "algorithms",
    "required_scopes",
    "groups_claim",
];

const AUTH_HINTS: &[(&str, &str)] = &[
    (
        "keys",
        "API keys are not written here: make one with `manifold keys create NAME` and set api_keys = true",
    ),
    (
        "api_key",
        "API keys are not written here: make one with `manifold keys create NAME` and set api_keys = true",
    ),
    ("issuer", "it belongs in the [auth.oauth] section"),
    ("jwks_url", "it belongs in the [auth.oauth] section"),
    ("audience", "it belongs in the [auth.oauth] section"),
    ("algorithms", "it belongs in the [auth.oauth] section"),
    ("required_scopes", "it belongs in the [auth.oauth] section"),
    (
        "scopes",
        "write required_scopes in the [auth.oauth] section",
    ),
];

const OAUTH_HINTS: &[(&str, &str)] = &[
    ("jwks_uri", "write jwks_url"),
    ("scopes", "write required_scopes"),
    ("aud", "write audience"),
    ("iss", "write issuer"),
    ("algorithm", "write algorithms = [\"RS256\"]"),
    (
        "client_secret",
        "Manifold only checks tokens; it needs no client credentials",
    ),
    ("resource_url", "it belongs in the [auth] section"),
];

/// What a URL in `[auth]` may be.
enum UrlUse {
    /// An issuer identifier: no query, no fragment.
    Issuer,
    /// A URL Manifold fetches: no fragment.
    Fetched,
    /// The gateway's own resource identifier: no fragment (RFC 9728).
    Resource,
}

pub(crate) fn loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

fn read_url(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    usage: UrlUse,
) -> Option<String> {
    let example = match usage {
        UrlUse::Issuer => "write the issuer's URL, e.g. \"https://login.example.com/realms/mcp\"",
        UrlUse::Fetched => "write an https URL, e.g. \"https://login.example.com/jwks.json\"",
        UrlUse::Resource => {
            "write the URL clients use for /mcp, e.g. \"https://mcp.example.com/mcp\""
        }
    };
    let text: Text = reader.string(field, item, Show::Value, example)?;
    if text.incomplete {
        return Some(text.value);
    }
    let parsed = match url::Url::parse(text.value.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
        _ => {
            reader.report_text(field, &text, "is not an http or https URL", example);
            return None;
        }
    };
    if parsed.scheme() == "http" && !loopback_host(&parsed) {
        reader.report_text(
            field,
            &text,
            "uses plain http to a host other than this machine: tokens and keys would cross the network unprotected",
            "use https (plain http is accepted only for localhost and 127.0.0.1)",
        );
        return None;
    }
    if parsed.fragment().is_some() {
        reader.report_text(field, &text, "has a #fragment", "remove the #... part");
        return None;
    }
    if matches!(usage, UrlUse::Issuer) && parsed.query().is_some() {
        reader.report_text(
            field,
            &text,
            "has a ?query, which an issuer identifier cannot have",
            "write the issuer exactly as its tokens' iss claim says it",
        );
        return None;
    }
    Some(text.value.trim().to_owned())
}

/// A scope token as RFC 6749 section 3.3 defines it: printable ASCII without space, `"` or `\`.
fn valid_scope(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

fn read_algorithms(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Option<Vec<String>> {
    let example = "write e.g. [\"RS256\", \"ES256\"]";
    let texts = reader.string_list(field, item, Show::Value, example)?;
    if texts.is_empty() {
        reader.report_value(
            field,
            item,
            Show::Value,
            "is empty, so no token could ever be accepted",
            example,
        );
        return None;
    }
    let mut out = Vec::with_capacity(texts.len());
    for text in &texts {
        let name = text.value.trim();
        if ASYMMETRIC_ALGORITHMS.contains(&name) {
            if !out.iter().any(|a| a == name) {
                out.push(name.to_owned());
            }
            continue;
        }
        let (problem, fix) = if name.eq_ignore_ascii_case("none") {
            (
                "would accept unsigned tokens".to_owned(),
                format!("remove it; allowed: {}", ASYMMETRIC_ALGORITHMS.join(", ")),
            )
        } else if name.len() >= 2 && name.get(..2).is_some_and(|p| p.eq_ignore_ascii_case("HS")) {
            (
                "is a shared-secret algorithm; Manifold verifies tokens with the issuer's public keys only".to_owned(),
                format!("use one of {}", ASYMMETRIC_ALGORITHMS.join(", ")),
            )
        } else if let Some(known) = ASYMMETRIC_ALGORITHMS
            .iter()
            .find(|a| a.eq_ignore_ascii_case(name))
        {
            (
                "is not spelled as JOSE names it".to_owned(),
                format!("write {known:?}"),
            )
        } else {
            (
                "is not a JWT signature algorithm Manifold accepts".to_owned(),
                format!("use one of {}", ASYMMETRIC_ALGORITHMS.join(", ")),
            )
        };
        reader.report_text(&text.field, text, problem, fix);
        return None;
    }
    Some(out)
}

fn read_scopes(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Option<Vec<String>> {
    let texts = reader.string_list(field, item, Show::Value, "write e.g. [\"mcp\"]")?;
    let mut out = Vec::with_capacity(texts.len());
    for text in &texts {
        if !valid_scope(&text.value) {
            reader.report_text(
                &text.field,
                text,
                "is not a scope (one word of printable ASCII, without spaces, quotes or backslashes)",
                "write one scope per element, e.g. [\"mcp:tools\", \"mcp:read\"]",
            );
            return None;
        }
        if !out.contains(&text.value) {
            out.push(text.value.clone());
        }
    }
    Some(out)
}

fn read_oauth(reader: &mut Reader<'_>, item: &Item<'_>) -> Option<OAuthSettings> {
    let table = reader.table(
        "auth.oauth",
        item,
        "write an [auth.oauth] section with issuer = \"https://...\"",
    )?;
    reader.check_keys("auth.oauth", table, OAUTH_KEYS, OAUTH_HINTS);
    let field = |key: &str| key_path("auth.oauth", key);
    let before = reader.problem_count();
    let issuer = match table.get("issuer") {
        Some(item) => read_url(reader, &field("issuer"), item, UrlUse::Issuer),
        None => {
            reader.report(
                &item.span(),
                "auth.oauth.issuer",
                None,
                "is missing: Manifold must know whose tokens to accept",
                "write issuer = \"https://login.example.com/...\" (exactly the tokens' iss claim)",
            );
            None
        }
    };
    let jwks_url = table
        .get("jwks_url")
        .and_then(|item| read_url(reader, &field("jwks_url"), item, UrlUse::Fetched));
    let audience = table.get("audience").and_then(|item| {
        let text = reader.string(
            &field("audience"),
            item,
            Show::Value,
            "write the audience the issuer puts in tokens for this gateway, e.g. \"https://mcp.example.com/mcp\"",
        )?;
        if text.value.trim().is_empty() {
            reader.report_text(
                &field("audience"),
                &text,
                "is empty",
                "write the audience, or remove the key to use the resource URL",
            );
            return None;
        }
        Some(text.value.trim().to_owned())
    });
    let algorithms = match table.get("algorithms") {
        Some(item) => read_algorithms(reader, &field("algorithms"), item),
        None => Some(DEFAULT_ALGORITHMS.iter().map(|a| (*a).to_owned()).collect()),
    };
    let required_scopes = match table.get("required_scopes") {
        Some(item) => read_scopes(reader, &field("required_scopes"), item),
        None => Some(Vec::new()),
    };
    let groups_claim = match table.get("groups_claim") {
        Some(item) => reader
            .string(
                &field("groups_claim"),
                item,
                Show::Value,
                "write e.g. \"groups\"",
            )
            .and_then(|text| {
                if text.value.trim().is_empty() {
                    reader.report_text(
                        &field("groups_claim"),
                        &text,
                        "is empty",
                        "write the claim's name, e.g. \"groups\" or \"roles\"",
                    );
                    None
                } else {
                    Some(text.value.trim().to_owned())
                }
            }),
        None => Some(DEFAULT_GROUPS_CLAIM.to_owned()),
    };
    if reader.problem_count() > before {
        return None;
    }
    Some(OAuthSettings {
        issuer: issuer?,
        jwks_url,
        audience,
        algorithms: algorithms?,
        required_scopes: required_scopes?,
        groups_claim: groups_claim?,
    })
}

/// Reads `[auth]` (absent: no authentication).
pub(crate) fn read_auth(reader: &mut Reader<'_>, section: Option<&Item<'_>>) -> AuthSettings {
    let Some(item) = section else {
        return AuthSettings::default();
    };
    let empty = DeTable::new();
    let table = reader
        .table("auth", item, "write an [auth] section")
        .unwrap_or(&empty);
    reader.check_keys("auth", table, AUTH_KEYS, AUTH_HINTS);
    let field = |key: &str| key_path("auth", key);
    let api_keys = table
        .get("api_keys")
        .and_then(|item| reader.boolean(&field("api_keys"), item))
        .unwrap_or(false);
    let oauth = table.get("oauth").and_then(|item| read_oauth(reader, item));
    let resource_url = table
        .get("resource_url")
        .and_then(|item| read_url(reader, &field("resource_url"), item, UrlUse::Resource));
    let insecure_no_auth = match table.get("insecure_no_auth") {
        Some(item) => {
            let value = reader
                .boolean(&field("insecure_no_auth"), item)
                .unwrap_or(false);
            if value && (api_keys || table.contains_key("oauth")) {
                reader.report_value(
                    &field("insecure_no_auth"),
                    item,
                    Show::Value,
                    "turns authentication off, but api_keys or [auth.oauth] turn it on",
                    "remove insecure_no_auth, or the authentication settings",
                );
            }
            value
        }
        None => false,
    };
    AuthSettings {
        api_keys,
        oauth,
        resource_url,
        insecure_no_auth,
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn load(text: &str) -> Result<Config, String> {
        Config::from_str(text, "test.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn no_section_means_no_authentication() {
        let c = load("").unwrap();
        assert!(!c.auth.enabled());
        assert!(!c.auth.insecure_no_auth);
    }

    #[test]
    fn oauth_reads_with_its_defaults() {
        let c = load(
            "[auth]\napi_keys = true\nresource_url = \"https://mcp.example.com/mcp\"\n[auth.oauth]\nissuer = \"https://login.example.com/realms/a\"\nrequired_scopes = [\"mcp\"]\n",
        )
        .unwrap();
        assert!(c.auth.api_keys);
        let o = c.auth.oauth.unwrap();
        assert_eq!(o.issuer, "https://login.example.com/realms/a");
        assert_eq!(o.algorithms, ["RS256", "ES256"]);
        assert_eq!(o.required_scopes, ["mcp"]);
        assert_eq!(o.groups_claim, "groups");
        assert_eq!(o.jwks_url, None);
        assert_eq!(o.audience, None);
    }

    #[test]
    fn shared_secret_and_none_algorithms_are_refused_with_their_place() {
        let e = load("[auth.oauth]\nissuer = \"https://i.example\"\nalgorithms = [\"HS256\"]\n")
            .unwrap_err();
        assert!(e.contains("test.toml:3:"), "{e}");
        assert!(e.contains("auth.oauth.algorithms[0]"), "{e}");
        assert!(e.contains("is a shared-secret algorithm"), "{e}");
        let e = load("[auth.oauth]\nissuer = \"https://i.example\"\nalgorithms = [\"none\"]\n")
            .unwrap_err();
        assert!(e.contains("would accept unsigned tokens"), "{e}");
    }

    #[test]
    fn plain_http_is_refused_except_to_this_machine() {
        let e = load("[auth.oauth]\nissuer = \"http://login.example.com\"\n").unwrap_err();
        assert!(
            e.contains("uses plain http to a host other than this machine"),
            "{e}"
        );
        let c = load("[auth.oauth]\nissuer = \"http://127.0.0.1:9000\"\n").unwrap();
        assert_eq!(c.auth.oauth.unwrap().issuer, "http://127.0.0.1:9000");
    }

    #[test]
    fn a_missing_issuer_and_a_contradiction_are_reported() {
        let e = load("[auth.oauth]\naudience = \"x\"\n").unwrap_err();
        assert!(e.contains("auth.oauth.issuer"), "{e}");
        assert!(e.contains("is missing"), "{e}");
        let e = load("[auth]\napi_keys = true\ninsecure_no_auth = true\n").unwrap_err();
        assert!(e.contains("turns authentication off"), "{e}");
    }

    #[test]
    fn misplaced_keys_get_a_hint() {
        let e = load("[auth]\nissuer = \"https://i.example\"\n").unwrap_err();
        assert!(e.contains("it belongs in the [auth.oauth] section"), "{e}");
    }
}
