//! `${NAME}` (an environment variable) and `${file:PATH}` (a file's contents) in string values,
//! resolved once at load time so that secrets need not be written into the configuration file.
//! `$$` is a literal dollar sign. Problems name the variable or file, never a resolved value.

use std::path::Path;

use crate::environment::{Environment, FileProblem, MAX_INTERPOLATED_FILE_BYTES, Var};
use crate::paths::resolve_path;

/// A string value after interpolation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub value: String,
    /// At least one `${...}` was substituted: the value must be treated as a secret.
    pub interpolated: bool,
    /// In lenient mode, some reference was absent and became empty text: the value is not
    /// what it will be once the reference exists, so it cannot be judged.
    pub incomplete: bool,
}

/// One problem with one string: (what is wrong, what to write instead).
pub(crate) type Problem = (String, String);

const FORMS: &str = "write ${NAME} for an environment variable or ${file:PATH} for a file's contents, and $$ for a literal dollar sign";

/// Resolves every `${...}` in `raw`, reporting every problem found. With `lenient` (used for
/// disabled servers, whose secrets may legitimately be absent) an unset variable or unreadable
/// file becomes empty text instead of a problem; malformed references are still problems.
pub(crate) fn interpolate(
    raw: &str,
    env: &dyn Environment,
    base_dir: Option<&Path>,
    lenient: bool,
) -> Result<Resolved, Vec<Problem>> {
    let mut out = String::with_capacity(raw.len());
    let mut problems = Vec::new();
    let mut interpolated = false;
    let mut incomplete = false;
    let mut rest = raw;
    while let Some(dollar) = rest.find('$') {
        out.push_str(rest.get(..dollar).unwrap_or_default());
        let after = rest.get(dollar + 1..).unwrap_or_default();
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let Some(close) = body.find('}') else {
                problems.push((
                    "a \"${\" is not closed with \"}\"".to_owned(),
                    FORMS.to_owned(),
                ));
                rest = "";
                break;
            };
            let inner = body.get(..close).unwrap_or_default();
            rest = body.get(close + 1..).unwrap_or_default();
            interpolated = true;
            match substitute(inner, env, base_dir) {
                Ok(value) => out.push_str(&value),
                Err(Failure::Unavailable(_)) if lenient => incomplete = true,
                Err(Failure::Unavailable(p) | Failure::Malformed(p)) => problems.push(p),
            }
        } else if after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            problems.push((
                "a \"$\" is followed by a name without braces, which is not interpolated"
                    .to_owned(),
                "write ${NAME} to read an environment variable, or $$ for a literal dollar sign"
                    .to_owned(),
            ));
            out.push('$');
            rest = after;
        } else {
            // "$" before anything else ("^end$", "$5") is taken literally.
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if problems.is_empty() {
        Ok(Resolved {
            value: out,
            interpolated,
            incomplete,
        })
    } else {
        Err(problems)
    }
}

/// Why a reference gave no value.
enum Failure {
    /// Well formed, but the variable or file is not there (or not readable).
    Unavailable(Problem),
    Malformed(Problem),
}

fn substitute(
    inner: &str,
    env: &dyn Environment,
    base_dir: Option<&Path>,
) -> Result<String, Failure> {
    if let Some(path) = inner.strip_prefix("file:") {
        let path = path.trim();
        if path.is_empty() {
            return Err(Failure::Malformed((
                "\"${file:}\" names no file".to_owned(),
                "write ${file:/path/to/file}".to_owned(),
            )));
        }
        return read_file(path, env, base_dir).map_err(Failure::Unavailable);
    }
    if is_variable_name(inner) {
        return match env.var(inner) {
            Var::Set(v) => Ok(v),
            Var::Unset => Err(Failure::Unavailable((
                format!("the environment variable {inner} is not set"),
                format!(
                    "set {inner} before starting Manifold, or write the value without ${{...}}"
                ),
            ))),
            Var::NotUnicode => Err(Failure::Unavailable((
                format!("the environment variable {inner} is not valid UTF-8"),
                format!("set {inner} to UTF-8 text"),
            ))),
        };
    }
    if let Some(name) = inner.strip_prefix("env:").filter(|n| is_variable_name(n)) {
        return Err(Failure::Malformed((
            "\"${env:NAME}\" is VS Code's spelling".to_owned(),
            format!("write ${{{name}}}"),
        )));
    }
    if inner.is_empty() {
        return Err(Failure::Malformed((
            "\"${}\" names nothing".to_owned(),
            FORMS.to_owned(),
        )));
    }
    if inner.contains(":-") || inner.contains(":=") || inner.contains(":?") {
        return Err(Failure::Malformed((
            "defaults and other shell modifiers inside ${...} are not supported".to_owned(),
            FORMS.to_owned(),
        )));
    }
    Err(Failure::Malformed((
        "a ${...} holds neither an environment variable name ([A-Za-z_][A-Za-z0-9_]*) nor file:PATH"
            .to_owned(),
        FORMS.to_owned(),
    )))
}

fn read_file(
    written: &str,
    env: &dyn Environment,
    base_dir: Option<&Path>,
) -> Result<String, Problem> {
    let path = resolve_path(written, env, base_dir)
        .map_err(|(problem, fix)| (format!("the path in ${{file:{written}}} {problem}"), fix))?;
    let shown = path.display();
    let bytes = env
        .read_file(&path, MAX_INTERPOLATED_FILE_BYTES)
        .map_err(|e| match e {
            FileProblem::Io(reason) => (
                format!("could not read {shown} (named by ${{file:...}}): {reason}"),
                "check the path (a relative path is relative to the configuration file's directory) and its permissions".to_owned(),
            ),
            FileProblem::TooLarge { limit } => (
                format!("{shown} (named by ${{file:...}}) is larger than {} KiB", limit / 1024),
                "point ${file:...} at a file holding only the value".to_owned(),
            ),
        })?;
    let mut text = String::from_utf8(bytes).map_err(|_| {
        (
            format!("{shown} (named by ${{file:...}}) is not UTF-8 text"),
            "store the value as text (for binary keys, base64 or hex)".to_owned(),
        )
    })?;
    // Files written by editors and `echo` end in a line break that is not part of the value.
    let kept = text.trim_end_matches(['\n', '\r']).len();
    text.truncate(kept);
    Ok(text)
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_variable_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::FixedEnvironment;

    fn env() -> FixedEnvironment {
        FixedEnvironment::new()
            .with_var("TOKEN", "s3cr3t")
            .with_var("HOME", "/home/ada")
            .with_file("/run/key", b"filesecret\n")
            .with_file("/etc/manifold/rel", b"relsecret\r\n")
            .with_file("/home/ada/k", b"homesecret")
            .with_file("/bin.dat", &[0xff, 0xfe])
    }

    fn ok(raw: &str) -> Resolved {
        interpolate(raw, &env(), Some(Path::new("/etc/manifold")), false).unwrap()
    }

    fn problems(raw: &str) -> Vec<String> {
        interpolate(raw, &env(), Some(Path::new("/etc/manifold")), false)
            .unwrap_err()
            .into_iter()
            .map(|(p, f)| format!("{p}; {f}"))
            .collect()
    }

    #[test]
    fn plain_strings_are_not_interpolated() {
        assert_eq!(
            ok("node"),
            Resolved {
                value: "node".into(),
                interpolated: false,
                incomplete: false,
            }
        );
        assert_eq!(ok("cost $5 ^end$").value, "cost $5 ^end$");
        assert!(!ok("cost $5").interpolated);
    }

    #[test]
    fn double_dollar_escapes() {
        let r = ok("$${TOKEN} and $$HOME");
        assert_eq!(r.value, "${TOKEN} and $HOME");
        assert!(!r.interpolated);
    }

    #[test]
    fn variables_and_files_are_substituted() {
        let r = ok("Bearer ${TOKEN}");
        assert_eq!(r.value, "Bearer s3cr3t");
        assert!(r.interpolated);
        assert_eq!(ok("${file:/run/key}").value, "filesecret");
        assert_eq!(ok("${file:rel}").value, "relsecret");
        assert_eq!(ok("${file:~/k}").value, "homesecret");
        assert_eq!(ok("${TOKEN}${TOKEN}").value, "s3cr3ts3cr3t");
    }

    #[test]
    fn every_problem_is_reported_without_values() {
        assert_eq!(
            problems("${MISSING} ${ALSO_MISSING}"),
            vec![
                "the environment variable MISSING is not set; set MISSING before starting Manifold, or write the value without ${...}",
                "the environment variable ALSO_MISSING is not set; set ALSO_MISSING before starting Manifold, or write the value without ${...}",
            ]
        );
        assert_eq!(
            problems("${file:/nope}"),
            vec![
                "could not read /nope (named by ${file:...}): No such file or directory (os error 2); check the path (a relative path is relative to the configuration file's directory) and its permissions"
            ]
        );
        assert_eq!(
            problems("${file:/bin.dat}"),
            vec![
                "/bin.dat (named by ${file:...}) is not UTF-8 text; store the value as text (for binary keys, base64 or hex)"
            ]
        );
        assert_eq!(
            problems("${file:}"),
            vec!["\"${file:}\" names no file; write ${file:/path/to/file}"]
        );
    }

    #[test]
    fn malformed_references_are_refused() {
        assert_eq!(
            problems("abc ${TOKEN"),
            vec![format!("a \"${{\" is not closed with \"}}\"; {FORMS}")]
        );
        assert_eq!(
            problems("${}"),
            vec![format!("\"${{}}\" names nothing; {FORMS}")]
        );
        assert_eq!(
            problems("${TOKEN:-x}"),
            vec![format!(
                "defaults and other shell modifiers inside ${{...}} are not supported; {FORMS}"
            )]
        );
        assert_eq!(
            problems("${1abc}"),
            vec![format!(
                "a ${{...}} holds neither an environment variable name ([A-Za-z_][A-Za-z0-9_]*) nor file:PATH; {FORMS}"
            )]
        );
        assert_eq!(
            problems("${env:TOKEN}"),
            vec!["\"${env:NAME}\" is VS Code's spelling; write ${TOKEN}"]
        );
        assert_eq!(
            problems("pa$sword"),
            vec![
                "a \"$\" is followed by a name without braces, which is not interpolated; write ${NAME} to read an environment variable, or $$ for a literal dollar sign"
            ]
        );
    }

    #[test]
    fn lenient_mode_forgives_only_absent_values() {
        let r = interpolate("a${MISSING}b${file:/nope}", &env(), None, true).unwrap();
        assert_eq!(r.value, "ab");
        assert!(r.interpolated);
        assert!(r.incomplete);
        assert_eq!(
            interpolate("${1x}", &env(), None, true).unwrap_err().len(),
            1
        );
    }

    #[test]
    fn oversized_files_are_refused() {
        let big = vec![b'a'; MAX_INTERPOLATED_FILE_BYTES as usize + 1];
        let env = FixedEnvironment::new().with_file("/big", &big);
        let err = interpolate("${file:/big}", &env, None, false).unwrap_err();
        assert_eq!(
            err[0].0,
            "/big (named by ${file:...}) is larger than 64 KiB"
        );
    }
}
