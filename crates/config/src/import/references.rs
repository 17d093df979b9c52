//! Clients write references in values in their own ways (`${VAR}`, `${VAR:-default}` in Claude
//! Code, `${env:VAR}`, `${input:id}`, `${userHome}` in VS Code and Cursor). This translates them
//! into Manifold's `${VAR}` where the meaning carries over, and into literal text (with a note)
//! where it does not, so that an imported value never means something it did not.

use crate::interpolate::is_variable_name;

/// Variables VS Code and Cursor define themselves (not environment variables).
const CLIENT_VARIABLES: &[&str] = &[
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "file",
    "fileBasename",
    "fileBasenameNoExtension",
    "fileDirname",
    "fileExtname",
    "fileWorkspaceFolder",
    "relativeFile",
    "relativeFileDirname",
    "cwd",
    "lineNumber",
    "selectedText",
    "execPath",
    "defaultBuildTask",
    "pathSeparator",
];

/// The environment variable Manifold reads in place of VS Code input `id`.
pub(crate) fn input_variable(id: &str) -> String {
    let mut name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "INPUT_");
    }
    name
}

/// Rewrites `value` (a string from field `field`) for Manifold: every `$` that is not a
/// translated reference is doubled so it stays literal. Notes explain what changed.
pub(crate) fn translate(value: &str, field: &str, notes: &mut Vec<String>) -> String {
    translate_with_flag(value, field, notes).0
}

/// [`translate`], also saying whether the result holds a `${...}` reference (and so cannot be
/// checked before it is resolved).
pub(crate) fn translate_with_flag(
    value: &str,
    field: &str,
    notes: &mut Vec<String>,
) -> (String, bool) {
    let mut references = false;
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(dollar) = rest.find('$') {
        out.push_str(rest.get(..dollar).unwrap_or_default());
        let after = rest.get(dollar + 1..).unwrap_or_default();
        let reference = after
            .strip_prefix('{')
            .and_then(|body| body.find('}').map(|close| (body, close)));
        let Some((body, close)) = reference else {
            out.push_str("$$");
            rest = after;
            continue;
        };
        let inner = body.get(..close).unwrap_or_default();
        rest = body.get(close + 1..).unwrap_or_default();
        if inner == "userHome" {
            references = true;
            out.push_str("${HOME}");
        } else if is_variable_name(inner) && !CLIENT_VARIABLES.contains(&inner) {
            references = true;
            out.push_str(&format!("${{{inner}}}"));
        } else if let Some(name) = inner.strip_prefix("env:").filter(|n| is_variable_name(n)) {
            references = true;
            out.push_str(&format!("${{{name}}}"));
        } else if let Some((name, _)) = inner.split_once(":-").filter(|(n, _)| is_variable_name(n))
        {
            references = true;
            out.push_str(&format!("${{{name}}}"));
            notes.push(format!(
                "{field}: the default after \":-\" for ${{{name}}} was dropped (Manifold has no defaults); make sure {name} is set"
            ));
        } else if let Some(id) = inner.strip_prefix("input:") {
            references = true;
            let var = input_variable(id);
            out.push_str(&format!("${{{var}}}"));
            notes.push(format!(
                "{field}: the client prompted for input \"{id}\"; Manifold reads the environment variable {var} instead"
            ));
        } else {
            out.push_str("$${");
            out.push_str(&inner.replace('$', "$$"));
            out.push('}');
            notes.push(format!(
                "{field}: \"${{{inner}}}\" means something only inside the client; it is kept as literal text: replace it by hand"
            ));
        }
    }
    out.push_str(rest);
    (out, references)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(value: &str) -> (String, Vec<String>) {
        let mut notes = Vec::new();
        let out = translate(value, "env.X", &mut notes);
        (out, notes)
    }

    #[test]
    fn references_that_carry_over() {
        assert_eq!(run("Bearer ${TOKEN}"), ("Bearer ${TOKEN}".into(), vec![]));
        assert_eq!(run("${env:TOKEN}"), ("${TOKEN}".into(), vec![]));
        assert_eq!(run("${userHome}/x"), ("${HOME}/x".into(), vec![]));
    }

    #[test]
    fn references_that_change_meaning_are_noted() {
        let (out, notes) = run("${PORT:-3000}");
        assert_eq!(out, "${PORT}");
        assert_eq!(notes.len(), 1);
        let (out, notes) = run("${input:api-key}");
        assert_eq!(out, "${API_KEY}");
        assert_eq!(
            notes,
            vec![
                "env.X: the client prompted for input \"api-key\"; Manifold reads the environment variable API_KEY instead"
            ]
        );
        let (out, notes) = run("${workspaceFolder}/src");
        assert_eq!(out, "$${workspaceFolder}/src");
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn other_dollars_stay_literal() {
        assert_eq!(run("pa$word $5 ${").0, "pa$$word $$5 $${");
        assert_eq!(run("${a$b}").0, "$${a$$b}");
    }

    #[test]
    fn input_variable_names() {
        assert_eq!(input_variable("github-token"), "GITHUB_TOKEN");
        assert_eq!(input_variable("1st"), "INPUT_1ST");
        assert_eq!(input_variable(""), "INPUT_");
    }
}
