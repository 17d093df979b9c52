//! `--header` and `--env` as people write them on a command line. A header is `Name: value`
//! (curl's form) or `Name=value` (`manifold add`'s, like `--env NAME=VALUE`); the client commands
//! and `manifold add` take both. Such values are often credentials, so an entry that does not
//! parse is named by its position, never repeated.

/// `Name: value` or `Name=value`, split at the first `:` or `=`; the name must be an HTTP token.
fn split_header(text: &str) -> Option<(String, String)> {
    let at = text.find([':', '='])?;
    let name = text[..at].trim();
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    token.then(|| (name.to_owned(), text[at + 1..].trim().to_owned()))
}

/// `NAME=VALUE`, split at the first `=`; the name is not empty.
fn split_variable(text: &str) -> Option<(String, String)> {
    let (name, value) = text.split_once('=')?;
    let name = name.trim();
    (!name.is_empty()).then(|| (name.to_owned(), value.to_owned()))
}

/// Which flag a list of entries came from: what it splits at and which forms it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairFlag {
    /// `--header`: `Name: value` or `Name=value`.
    Header,
    /// `--env`: `NAME=VALUE`.
    Env,
}

impl PairFlag {
    fn flag(self) -> &'static str {
        match self {
            PairFlag::Header => "--header",
            PairFlag::Env => "--env",
        }
    }

    fn forms(self) -> &'static str {
        match self {
            PairFlag::Header => "'Name: value' or 'Name=value'",
            PairFlag::Env => "NAME=VALUE",
        }
    }

    fn split(self, text: &str) -> Option<(String, String)> {
        match self {
            PairFlag::Header => split_header(text),
            PairFlag::Env => split_variable(text),
        }
    }
}

/// Every entry of `flag` as a pair; the first that does not parse is named by its position and
/// the forms the flag takes, never shown (it may hold a credential).
pub fn parse_all(entries: &[String], flag: PairFlag) -> Result<Vec<(String, String)>, String> {
    (entries.iter().enumerate())
        .map(|(i, e)| {
            flag.split(e).ok_or_else(|| {
                format!(
                    "{} is not {} (it is not shown: it may hold a credential)",
                    position(flag.flag(), i),
                    flag.forms()
                )
            })
        })
        .collect()
}

/// "the 2nd --header", for an error about an entry that is not shown.
fn position(flag: &str, index: usize) -> String {
    let n = index + 1;
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("the {n}{suffix} {flag}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_split_at_the_first_colon_or_equals_and_keep_the_rest() {
        let pair = |n: &str, v: &str| Some((n.to_owned(), v.to_owned()));
        assert_eq!(
            split_header("Authorization: Bearer a=b:c"),
            pair("Authorization", "Bearer a=b:c")
        );
        assert_eq!(
            split_header("Authorization=Bearer a:b=="),
            pair("Authorization", "Bearer a:b==")
        );
        assert_eq!(split_header("X-Team=core"), pair("X-Team", "core"));
        assert_eq!(split_header("X-Empty:"), pair("X-Empty", ""));
        for bad in ["mfk_secret", "Bearer abc: x", ": v", "=v"] {
            assert_eq!(split_header(bad), None, "{bad}");
        }
    }

    #[test]
    fn variables_split_at_the_first_equals_and_keep_spaces_in_the_value() {
        assert_eq!(
            split_variable("API_KEY= a=b "),
            Some(("API_KEY".to_owned(), " a=b ".to_owned()))
        );
        assert_eq!(split_variable("NOEQUALS"), None);
        assert_eq!(split_variable("=v"), None);
    }

    #[test]
    fn an_entry_that_does_not_parse_is_named_with_the_forms_and_never_shown() {
        let entries = ["X-Team: core".to_owned(), "mfk_secret".to_owned()];
        let e = parse_all(&entries, PairFlag::Header).unwrap_err();
        assert_eq!(
            e,
            "the 2nd --header is not 'Name: value' or 'Name=value' (it is not shown: it may hold a credential)"
        );
        let e = parse_all(&["mfk_secret".to_owned()], PairFlag::Env).unwrap_err();
        assert!(e.starts_with("the 1st --env is not NAME=VALUE"), "{e}");
        assert_eq!(
            parse_all(&["A=b".to_owned()], PairFlag::Env),
            Ok(vec![("A".to_owned(), "b".to_owned())])
        );
    }

    #[test]
    fn positions_read_as_ordinals() {
        let words: Vec<String> = [0, 1, 2, 3, 10, 11, 12, 20, 21, 102]
            .iter()
            .map(|i| position("--header", *i))
            .collect();
        assert_eq!(
            words,
            [
                "the 1st --header",
                "the 2nd --header",
                "the 3rd --header",
                "the 4th --header",
                "the 11th --header",
                "the 12th --header",
                "the 13th --header",
                "the 21st --header",
                "the 22nd --header",
                "the 103rd --header",
            ]
        );
    }
}
