//! `WWW-Authenticate` as RFC 9110 §11.6.1 writes it: a comma-separated list of challenges, each a
//! scheme followed by a token68 or by `name=value` parameters (values tokens or quoted strings).
//!
//! Parsing is total: any header value, however malformed, yields the challenges that can be read
//! and never panics, because the header comes from the server (or from anyone in between).

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};

/// One challenge: its scheme and parameters (names lower-cased, first occurrence kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub token68: Option<String>,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// A parameter's value, by case-insensitive name.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a `Bearer` challenge tells an OAuth client (RFC 6750 §3, RFC 9728 §5.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl BearerChallenge {
    /// Whether the server said the token lacks scope (`error="insufficient_scope"`).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// The challenged scopes, split on spaces.
    pub fn scopes(&self) -> Vec<String> {
        self.scope.as_deref().map(split_scopes).unwrap_or_default()
    }
}

/// Scopes of a space-separated `scope` value, without empties or repeats, in order.
pub fn split_scopes(value: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in value.split([' ', '\t']).filter(|s| !s.is_empty()) {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    out
}

/// The first `Bearer` challenge among a response's `WWW-Authenticate` headers, if any.
pub fn bearer_challenge(headers: &HeaderMap) -> Option<BearerChallenge> {
    headers
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .flat_map(|v| parse(&String::from_utf8_lossy(v.as_bytes())))
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        .map(|c| BearerChallenge {
            resource_metadata: c.param("resource_metadata").map(str::to_owned),
            scope: c.param("scope").map(str::to_owned),
            error: c.param("error").map(str::to_owned),
            error_description: c.param("error_description").map(str::to_owned),
        })
}

/// Every challenge that can be read from one header value.
pub fn parse(value: &str) -> Vec<Challenge> {
    let mut cursor = Cursor {
        chars: value.chars().collect(),
        pos: 0,
    };
    let mut out = Vec::new();
    loop {
        cursor.skip_separators();
        if cursor.done() {
            break;
        }
        let Some(scheme) = cursor.token() else {
            // Not the start of a challenge: skip the character and look again.
            cursor.bump();
            continue;
        };
        let mut challenge = Challenge {
            scheme,
            token68: None,
            params: Vec::new(),
        };
        if cursor.skip_spaces() && !cursor.done() && cursor.peek() != Some(',') {
            let start = cursor.pos;
            match cursor.auth_param() {
                Some(param) => add_param(&mut challenge, param),
                None => {
                    cursor.pos = start;
                    challenge.token68 = cursor.token68();
                }
            }
        }
        // Further parameters follow commas; a comma followed by something that is not a
        // parameter starts the next challenge.
        loop {
            let before_comma = cursor.pos;
            cursor.skip_spaces();
            if cursor.peek() != Some(',') {
                cursor.pos = before_comma;
                break;
            }
            cursor.skip_separators();
            let start = cursor.pos;
            match cursor.auth_param() {
                Some(param) => add_param(&mut challenge, param),
                None => {
                    cursor.pos = start;
                    break;
                }
            }
        }
        out.push(challenge);
    }
    out
}

fn add_param(challenge: &mut Challenge, (name, value): (String, String)) {
    // Each parameter may appear once; a repeat is ignored rather than trusted.
    if challenge.param(&name).is_none() {
        challenge.params.push((name, value));
    }
}

struct Cursor {
    chars: Vec<char>,
    pos: usize,
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn is_token68_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/".contains(c)
}

impl Cursor {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos = self.pos.saturating_add(1);
    }

    fn done(&self) -> bool {
        self.pos >= self.chars.len()
    }

    /// Skips spaces and tabs; whether any were skipped.
    fn skip_spaces(&mut self) -> bool {
        let start = self.pos;
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
        self.pos > start
    }

    /// Skips spaces, tabs and commas (empty list elements are allowed).
    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | ',')) {
            self.bump();
        }
    }

    fn token(&mut self) -> Option<String> {
        let start = self.pos;
        while self.peek().is_some_and(is_tchar) {
            self.bump();
        }
        (self.pos > start).then(|| self.slice(start))
    }

    fn slice(&self, start: usize) -> String {
        self.chars
            .get(start..self.pos)
            .map(|s| s.iter().collect())
            .unwrap_or_default()
    }

    /// `name BWS "=" BWS (token / quoted-string)`, or `None` with the position undefined.
    fn auth_param(&mut self) -> Option<(String, String)> {
        let name = self.token()?;
        self.skip_spaces();
        if self.peek() != Some('=') {
            return None;
        }
        self.bump();
        self.skip_spaces();
        let value = if self.peek() == Some('"') {
            self.quoted()
        } else {
            self.token()?
        };
        Some((name.to_ascii_lowercase(), value))
    }

    /// A quoted string with backslash escapes; an unterminated one runs to the end.
    fn quoted(&mut self) -> String {
        self.bump();
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.bump();
            match c {
                '"' => break,
                '\\' => {
                    if let Some(escaped) = self.peek() {
                        out.push(escaped);
                        self.bump();
                    }
                }
                other => out.push(other),
            }
        }
        out
    }

    fn token68(&mut self) -> Option<String> {
        let start = self.pos;
        while self.peek().is_some_and(is_token68_char) {
            self.bump();
        }
        while self.peek() == Some('=') {
            self.bump();
        }
        (self.pos > start).then(|| self.slice(start))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn params(c: &Challenge) -> Vec<(&str, &str)> {
        c.params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn a_bearer_challenge_with_quoted_and_token_values() {
        let got = parse(
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read files:write", error=insufficient_scope"#,
        );
        assert_eq!(got.len(), 1);
        let c = &got[0];
        assert_eq!(c.scheme, "Bearer");
        assert_eq!(
            params(c),
            vec![
                (
                    "resource_metadata",
                    "https://mcp.example.com/.well-known/oauth-protected-resource"
                ),
                ("scope", "files:read files:write"),
                ("error", "insufficient_scope"),
            ]
        );
    }

    #[test]
    fn several_challenges_in_one_value_are_told_apart() {
        let got =
            parse(r#"Basic realm="simple", Bearer realm="x", scope="a b", DPoP algs="ES256""#);
        let schemes: Vec<&str> = got.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, vec!["Basic", "Bearer", "DPoP"]);
        assert_eq!(params(&got[1]), vec![("realm", "x"), ("scope", "a b")]);
        assert_eq!(params(&got[2]), vec![("algs", "ES256")]);
    }

    #[test]
    fn token68_escapes_names_case_and_spacing() {
        let got =
            parse("Negotiate abc+/==, Bearer  ERROR = \"a \\\"quoted\\\" \\\\ value\" ,, scope=x");
        assert_eq!(got[0].scheme, "Negotiate");
        assert_eq!(got[0].token68.as_deref(), Some("abc+/=="));
        assert_eq!(
            params(&got[1]),
            vec![("error", "a \"quoted\" \\ value"), ("scope", "x")]
        );
    }

    #[test]
    fn a_scheme_alone_and_repeated_parameters() {
        let got = parse("Bearer");
        assert_eq!(got.len(), 1);
        assert!(got[0].params.is_empty() && got[0].token68.is_none());
        let got = parse(r#"Bearer scope="first", scope="second""#);
        assert_eq!(got[0].param("scope"), Some("first"));
    }

    #[test]
    fn malformed_values_yield_what_can_be_read() {
        assert!(parse("").is_empty());
        assert!(parse(" , ,").is_empty());
        let got = parse(r#"Bearer scope="unterminated"#);
        assert_eq!(got[0].param("scope"), Some("unterminated"));
        let got = parse("@@@ Bearer error=x");
        assert_eq!(got.last().unwrap().param("error"), Some("x"));
    }

    #[test]
    fn bearer_challenge_reads_the_fields_the_client_needs() {
        let mut headers = HeaderMap::new();
        headers.append(WWW_AUTHENTICATE, "Basic realm=x".parse().unwrap());
        headers.append(
            WWW_AUTHENTICATE,
            r#"bearer error="insufficient_scope", scope="mcp:write", resource_metadata="https://h/.well-known/oauth-protected-resource/mcp""#
                .parse()
                .unwrap(),
        );
        let b = bearer_challenge(&headers).unwrap();
        assert!(b.is_insufficient_scope());
        assert_eq!(b.scopes(), vec!["mcp:write"]);
        assert_eq!(
            b.resource_metadata.as_deref(),
            Some("https://h/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(bearer_challenge(&HeaderMap::new()), None);
    }

    #[test]
    fn scopes_split_on_spaces_without_repeats() {
        assert_eq!(split_scopes(" a  b\ta b "), vec!["a", "b"]);
        assert!(split_scopes("").is_empty());
    }

    proptest! {
        #[test]
        fn any_value_parses_without_panicking(value in ".{0,200}") {
            let challenges = parse(&value);
            for c in challenges {
                prop_assert!(!c.scheme.is_empty());
            }
        }

        #[test]
        fn values_made_of_header_syntax_parse_without_panicking(
            value in proptest::collection::vec(
                prop_oneof![Just(","), Just("="), Just("\""), Just("\\"), Just(" "), Just("Bearer"), Just("a"), Just("x=y")],
                0..40,
            )
        ) {
            let text: String = value.concat();
            let _ = parse(&text);
        }
    }
}
