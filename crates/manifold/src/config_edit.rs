//! `manifold add` and `manifold remove`: a server added to or removed from `manifold.toml` from
//! the shell, as `claude mcp add` does, editing the file in place so that its comments, order and
//! layout stay as written. The edited text is checked before it is written: an edit that would
//! make a valid file invalid is refused with the problems, and nothing changes.

use std::path::{Path, PathBuf};

use manifold_config::{Config, ProcessEnvironment};
use toml_edit::{Array, DocumentMut, Item, Table, value};

use crate::config_file::{DEFAULT_CONFIG, config_path};
use crate::pair_args;
use crate::report::{CliError, Outcome};

/// What `manifold add` was given.
#[derive(Debug, Clone, Default)]
pub struct NewServer {
    pub name: String,
    /// An `http(s)://` URL, or nothing for a stdio server.
    pub url: Option<String>,
    /// The stdio command and its arguments (after `--`).
    pub command: Vec<String>,
    /// `KEY=VALUE` environment entries of a stdio server.
    pub env: Vec<String>,
    /// `NAME=VALUE` headers of an HTTP server.
    pub headers: Vec<String>,
    pub prefix: Option<String>,
}

/// The file an edit goes to: the one every other command would use, else `./manifold.toml`.
fn target(given: Option<&Path>) -> PathBuf {
    config_path(given).unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG))
}

fn read(path: &Path) -> Result<(String, DocumentMut), CliError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(CliError::usage(format!(
                "could not read {}: {e}",
                path.display()
            )));
        }
    };
    let doc = text.parse::<DocumentMut>().map_err(|e| {
        CliError::with_hint(
            format!("{} is not valid TOML: {e}", path.display()),
            "fix it first (manifold check shows where), then run this again",
        )
    })?;
    Ok((text, doc))
}

fn check(text: &str, path: &Path) -> Result<(), String> {
    validate(text, path).map(|_| ()).map_err(|e| e.to_string())
}

/// `text` read as the file at `path` would be (relative paths from its directory, variables
/// from this process): what `manifold check` and a reload would say of it.
pub(crate) fn validate(text: &str, path: &Path) -> Result<Config, manifold_config::ConfigErrors> {
    let base = path.parent().filter(|p| !p.as_os_str().is_empty());
    Config::from_str_with(text, &path.display().to_string(), base, &ProcessEnvironment)
}

/// Writes `edited` over `path` unless it would turn a valid file into an invalid one.
fn write_checked(path: &Path, before: &str, edited: &str) -> Result<(), CliError> {
    if let Err(problems) = check(edited, path)
        && check(before, path).is_ok()
    {
        return Err(CliError::with_hint(
            format!(
                "{} was not changed: the edit would make it invalid:\n{problems}",
                path.display()
            ),
            "correct the values given (see docs/configuration.md), then run this again",
        ));
    }
    std::fs::write(path, edited)
        .map_err(|e| CliError::usage(format!("could not write {}: {e}", path.display())))
}

/// Each entry of `--header` or `--env` as a pair; one that does not parse is refused with an
/// example of what to write.
fn pairs(
    entries: &[String],
    flag: pair_args::PairFlag,
    example: &str,
) -> Result<Vec<(String, String)>, CliError> {
    pair_args::parse_all(entries, flag)
        .map_err(|why| CliError::usage(format!("{why}; write e.g. {example}")))
}

fn inline_table(entries: Vec<(String, String)>) -> Item {
    let mut t = toml_edit::InlineTable::new();
    for (k, v) in entries {
        t.insert(&k, v.into());
    }
    value(t)
}

/// `manifold add NAME URL` or `manifold add NAME -- COMMAND ARGS...`.
pub fn add(config: Option<&Path>, server: &NewServer) -> Result<Outcome, CliError> {
    let path = target(config);
    let (before, mut doc) = read(&path)?;
    let name = server.name.trim();
    if name.is_empty() {
        return Err(CliError::usage(
            "a server needs a name: manifold add NAME ...",
        ));
    }
    let servers = doc
        .entry("servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| {
            CliError::usage(format!(
                "`servers` in {} is not a table of [servers.NAME] sections",
                path.display()
            ))
        })?;
    if servers.contains_key(name) {
        return Err(CliError::with_hint(
            format!("{} already configures a server {name:?}", path.display()),
            format!("choose another name, or run `manifold remove {name}` first"),
        ));
    }
    let mut section = Table::new();
    match (&server.url, server.command.split_first()) {
        (Some(url), None) => {
            section.insert("url", value(url.as_str()));
            if !server.headers.is_empty() {
                let h = pairs(
                    &server.headers,
                    pair_args::PairFlag::Header,
                    "--header \"Authorization=Bearer ${TOKEN}\"",
                )?;
                section.insert("headers", inline_table(h));
            }
            if !server.env.is_empty() {
                return Err(CliError::usage(
                    "--env is for stdio servers; an HTTP server takes --header",
                ));
            }
        }
        (None, Some((command, args))) => {
            section.insert("command", value(command.as_str()));
            if !args.is_empty() {
                let mut a = Array::new();
                for arg in args {
                    a.push(arg.as_str());
                }
                section.insert("args", value(a));
            }
            if !server.env.is_empty() {
                let e = pairs(
                    &server.env,
                    pair_args::PairFlag::Env,
                    "--env \"API_KEY=${API_KEY}\"",
                )?;
                section.insert("env", inline_table(e));
            }
            if !server.headers.is_empty() {
                return Err(CliError::usage(
                    "--header is for HTTP servers; a stdio server takes --env",
                ));
            }
        }
        (Some(_), Some(_)) => {
            return Err(CliError::usage(
                "give a URL or a command after --, not both",
            ));
        }
        (None, None) => {
            return Err(CliError::with_hint(
                format!("nothing to add for {name:?}: no URL and no command"),
                format!(
                    "write `manifold add {name} https://host/mcp` or `manifold add {name} -- npx -y PACKAGE`"
                ),
            ));
        }
    }
    if let Some(prefix) = &server.prefix {
        section.insert("prefix", value(prefix.as_str()));
    }
    servers.insert(name, Item::Table(section));
    write_checked(&path, &before, &doc.to_string())?;
    println!(
        "added [servers.{name}] to {}; a manifold serve running from it starts the server within a few seconds (it watches the file), any other at its next start",
        path.display()
    );
    Ok(Outcome::Success)
}

/// `manifold remove NAME`: its section, and nothing else (rules naming it are reported by the
/// check, so a rule never silently changes meaning).
pub fn remove(config: Option<&Path>, name: &str) -> Result<Outcome, CliError> {
    let path = target(config);
    if !path.exists() {
        return Err(CliError::usage(format!(
            "{} does not exist",
            path.display()
        )));
    }
    let (before, mut doc) = read(&path)?;
    let removed = doc
        .get_mut("servers")
        .and_then(Item::as_table_like_mut)
        .and_then(|t| t.remove(name));
    if removed.is_none() {
        return Err(CliError::with_hint(
            format!("{} configures no server {name:?}", path.display()),
            "manifold check lists the servers it configures",
        ));
    }
    write_checked(&path, &before, &doc.to_string())?;
    println!(
        "removed [servers.{name}] from {}; a manifold serve running from it stops the server within a few seconds (it watches the file)",
        path.display()
    );
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn scratch(text: &str) -> (manifold_testkit::ScratchDir, PathBuf) {
        let dir = manifold_testkit::ScratchDir::new("config-edit").unwrap();
        let path = dir.path().join("manifold.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    const START: &str = "# my gateway\n[gateway]\nlisten = \"127.0.0.1:0\"  # keep this comment\n\n[servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]\n";

    #[test]
    fn add_keeps_comments_and_writes_a_section_check_accepts() {
        let (_dir, path) = scratch(START);
        let stdio = NewServer {
            name: "everything".into(),
            command: vec![
                "npx".into(),
                "-y".into(),
                "@modelcontextprotocol/server-everything".into(),
            ],
            env: vec!["DEBUG=1".into()],
            ..NewServer::default()
        };
        add(Some(&path), &stdio).unwrap();
        let http = NewServer {
            name: "remote".into(),
            url: Some("https://mcp.example.com/mcp".into()),
            headers: vec!["X-Team=core".into()],
            prefix: Some("rm".into()),
            ..NewServer::default()
        };
        add(Some(&path), &http).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# my gateway\n"), "{text}");
        assert!(text.contains("# keep this comment"), "{text}");
        let config = Config::from_str(&text, "m.toml").unwrap();
        let mut names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["everything", "remote", "time"]);
        let at = |s: &str| text.find(s).unwrap();
        assert!(
            at("[servers.time]") < at("[servers.everything]"),
            "added after what was there: {text}"
        );
        assert!(text.contains("[servers.everything]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-everything\"]\nenv = { DEBUG = \"1\" }"), "{text}");
        assert!(text.contains("[servers.remote]\nurl = \"https://mcp.example.com/mcp\"\nheaders = { X-Team = \"core\" }\nprefix = \"rm\""), "{text}");
    }

    #[test]
    fn add_refuses_a_taken_name_and_an_edit_that_would_break_the_file() {
        let (_dir, path) = scratch(START);
        let again = NewServer {
            name: "time".into(),
            command: vec!["x".into()],
            ..NewServer::default()
        };
        let e = add(Some(&path), &again).unwrap_err();
        assert!(
            e.message.contains("already configures a server \"time\""),
            "{}",
            e.message
        );
        let bad = NewServer {
            name: "plain".into(),
            url: Some("http://mcp.example.com/mcp".into()),
            ..NewServer::default()
        };
        let e = add(Some(&path), &bad).unwrap_err();
        assert!(e.message.contains("was not changed"), "{}", e.message);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), START);
    }

    #[test]
    fn remove_takes_out_one_section_and_refuses_an_unknown_name_or_a_dangling_rule() {
        let (_dir, path) = scratch(&format!("{START}\n[servers.git]\ncommand = \"git-mcp\"\n"));
        remove(Some(&path), "git").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("git-mcp") && text.contains("mcp-server-time"),
            "{text}"
        );
        let e = remove(Some(&path), "nope").unwrap_err();
        assert!(e.message.contains("configures no server \"nope\""));
        let with_rule = format!("{START}\n[[rules]]\neffect = \"deny\"\nservers = [\"time\"]\n");
        std::fs::write(&path, &with_rule).unwrap();
        let e = remove(Some(&path), "time").unwrap_err();
        assert!(
            e.message.contains("names no configured server"),
            "{}",
            e.message
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), with_rule);
    }
}
