//! Which of a dead stdio server's last stderr lines names why it died. The last line alone is
//! often the runtime's sign-off (`Node.js v20.20.2`, a closing `}` of an error object, a Rust
//! panic's `note: run with RUST_BACKTRACE=1`), which tells a user nothing; the error line a few
//! lines above it says what to fix.

/// Words of an error report, matched without case. Stack frames (`at ...`) are skipped even when
/// they hold one.
const ERROR_WORDS: &[&str] = &[
    "error",
    "exception",
    "panicked",
    "fatal",
    "cannot ",
    "can't ",
    "not found",
    "no such file",
    "denied",
];

/// The line of `tail` (oldest first) that best says why the server stopped: the last one that
/// reads as an error report, else the last non-blank one.
pub fn telling_line(tail: &[String]) -> Option<&str> {
    let lines = tail
        .iter()
        .rev()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty());
    let reports_error = |line: &&str| {
        let lower = line.to_ascii_lowercase();
        !lower.starts_with("at ") && ERROR_WORDS.iter().any(|w| lower.contains(w))
    };
    lines
        .clone()
        .find(reports_error)
        .or_else(|| lines.clone().next())
}

/// Words of a report that a file could not be found, read or written, matched without case:
/// what a sandbox that hides a path, or shows it read-only, makes a server say.
const PATH_REFUSED_WORDS: &[&str] = &[
    "not found",
    "cannot find",
    "no such file",
    "enoent",
    "no module named",
    "permission denied",
    "eacces",
    "read-only file system",
    "erofs",
];

/// Whether `line` says a path was missing or refused.
pub fn names_a_refused_path(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    PATH_REFUSED_WORDS.iter().any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn nodes_error_line_is_chosen_over_its_stack_and_sign_off() {
        let node = tail(
            "node:internal/modules/esm/resolve:873\n  throw new ERR_MODULE_NOT_FOUND(packageName);\n        ^\n\
             Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@modelcontextprotocol/sdk' imported from /srv/index.js\n\
             \x20   at packageResolve (node:internal/modules/esm/resolve:873:9)\n\
             \x20   at moduleResolve (node:internal/modules/esm/resolve:946:18) {\n  code: 'ERR_MODULE_NOT_FOUND'\n}\n\nNode.js v20.20.2",
        );
        assert_eq!(
            telling_line(&node),
            Some(
                "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@modelcontextprotocol/sdk' imported from /srv/index.js"
            )
        );
    }

    #[test]
    fn pythons_last_line_is_its_exception_and_a_panic_names_itself() {
        let python = tail(
            "Traceback (most recent call last):\n  File \"/srv/server.py\", line 1, in <module>\n    import mcp\nModuleNotFoundError: No module named 'mcp'",
        );
        assert_eq!(
            telling_line(&python),
            Some("ModuleNotFoundError: No module named 'mcp'")
        );
        let rust = tail(
            "thread 'main' panicked at src/main.rs:3:5:\nno config\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        );
        assert_eq!(
            telling_line(&rust),
            Some("thread 'main' panicked at src/main.rs:3:5:")
        );
    }

    #[test]
    fn without_an_error_line_the_last_non_blank_line_is_kept_and_nothing_gives_none() {
        assert_eq!(
            telling_line(&tail("listening\nshutting down\n\n")),
            Some("shutting down")
        );
        assert_eq!(telling_line(&tail("\n  \n")), None);
        assert_eq!(telling_line(&[]), None);
    }

    #[test]
    fn missing_modules_and_refused_writes_name_a_refused_path_and_other_errors_do_not() {
        for line in [
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x' imported from /srv/a.js",
            "ModuleNotFoundError: No module named 'mcp'",
            "Error: EROFS: read-only file system, open '/srv/memory.json'",
            "PermissionError: [Errno 13] Permission denied: '/data'",
            "ls: cannot access '/x': No such file or directory",
        ] {
            assert!(names_a_refused_path(line), "{line}");
        }
        assert!(!names_a_refused_path("Error: listen EADDRINUSE :::3000"));
        assert!(!names_a_refused_path(
            "thread 'main' panicked at src/main.rs:3:5:"
        ));
    }
}
