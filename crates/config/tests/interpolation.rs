//! `${ENV}` and `${file:PATH}` interpolation, `$$` escapes, and the promise that no resolved
//! value (and no literal environment or header value) reaches an error message or `{:?}`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use manifold_config::{Config, ConfigErrors, FixedEnvironment, ServerKind};

/// Every secret below contains this marker, so one search finds any leak.
const MARK: &str = "SEKRIT";

fn env() -> FixedEnvironment {
    FixedEnvironment::new()
        .with_var("HOME", "/home/ada")
        .with_var("TOKEN", "tok-SEKRIT-1")
        .with_var("BIN", "/opt/SEKRIT/bin/server")
        .with_var("ARG", "--key=SEKRIT-2")
        .with_var("HOST", "SEKRIT.example.com")
        .with_var("KEY_HEX", &"5e".repeat(32))
        .with_file("/etc/manifold/keys/api", b"file-SEKRIT-3\n")
}

fn load(text: &str) -> Result<Config, ConfigErrors> {
    Config::from_str_with(text, "m.toml", Some(Path::new("/etc/manifold")), &env())
}

#[test]
fn references_resolve_in_every_string_value() {
    let c = load(
        r#"
[gateway]
session_key = "${KEY_HEX}"

[servers.local]
command = "${BIN}"
args = ["${ARG}", "plain"]
env = { TOKEN = "${TOKEN}", API = "${file:keys/api}", MIXED = "a-${TOKEN}-b" }

[servers.remote]
url = "https://${HOST}/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
"#,
    )
    .unwrap();
    assert_eq!(
        c.gateway.session_key.as_ref(),
        Some(&manifold_config::SessionKey::from_bytes(&[0x5e; 32]).unwrap())
    );
    let ServerKind::Stdio {
        spec, interpolated, ..
    } = &c.server("local").unwrap().kind
    else {
        panic!("expected stdio")
    };
    assert_eq!(spec.command, "/opt/SEKRIT/bin/server");
    assert_eq!(spec.args, vec!["--key=SEKRIT-2", "plain"]);
    assert_eq!(
        spec.env,
        vec![
            ("API".to_owned(), "file-SEKRIT-3".to_owned()),
            ("MIXED".to_owned(), "a-tok-SEKRIT-1-b".to_owned()),
            ("TOKEN".to_owned(), "tok-SEKRIT-1".to_owned()),
        ]
    );
    let fields: Vec<&str> = interpolated.fields().collect();
    assert_eq!(
        fields,
        vec!["args[0]", "command", "env.API", "env.MIXED", "env.TOKEN"]
    );
    let ServerKind::Http { spec, .. } = &c.server("remote").unwrap().kind else {
        panic!("expected http")
    };
    assert_eq!(spec.url, "https://SEKRIT.example.com/mcp");
    assert_eq!(
        spec.headers,
        vec![("Authorization".to_owned(), "Bearer tok-SEKRIT-1".to_owned())]
    );
    // Every interpolated value is listed for log scrubbing (session key, command, args[0],
    // three env values, url, header).
    let mut secrets: Vec<&str> = c.secrets().iter().map(|s| s.expose().as_str()).collect();
    secrets.sort();
    assert_eq!(secrets.len(), 8);
    assert!(secrets.contains(&"Bearer tok-SEKRIT-1"));
}

#[test]
fn double_dollar_is_a_literal_dollar() {
    let c = load("[servers.a]\ncommand = \"a\"\nargs = [\"$${TOKEN}\", \"$$5\", \"^x$\"]").unwrap();
    let ServerKind::Stdio {
        spec, interpolated, ..
    } = &c.server("a").unwrap().kind
    else {
        panic!("expected stdio")
    };
    assert_eq!(spec.args, vec!["${TOKEN}", "$5", "^x$"]);
    assert_eq!(interpolated.fields().count(), 0);
    assert!(c.secrets().is_empty());
}

#[test]
fn missing_variables_and_files_name_the_field_and_reference_only() {
    let e = load(
        "[servers.a]\ncommand = \"a\"\nenv = { T = \"${NOPE}\", F = \"${file:missing.txt}\" }",
    )
    .unwrap_err();
    assert_eq!(
        e.messages(),
        vec![
            "servers.a.env.T: the environment variable NOPE is not set; set NOPE before starting Manifold, or write the value without ${...}",
            "servers.a.env.F: could not read /etc/manifold/missing.txt (named by ${file:...}): No such file or directory (os error 2); check the path (a relative path is relative to the configuration file's directory) and its permissions",
        ]
    );
}

#[test]
fn malformed_references_are_errors() {
    let e =
        load("[servers.a]\ncommand = \"a\"\nargs = [\"${env:TOKEN}\", \"$TOKEN\", \"${TOKEN\"]")
            .unwrap_err();
    assert_eq!(
        e.messages(),
        vec![
            "servers.a.args[0] = \"${env:TOKEN}\": \"${env:NAME}\" is VS Code's spelling; write ${TOKEN}",
            "servers.a.args[1] = \"$TOKEN\": a \"$\" is followed by a name without braces, which is not interpolated; write ${NAME} to read an environment variable, or $$ for a literal dollar sign",
            "servers.a.args[2] = \"${TOKEN\": a \"${\" is not closed with \"}\"; write ${NAME} for an environment variable or ${file:PATH} for a file's contents, and $$ for a literal dollar sign",
        ]
    );
}

#[test]
fn disabled_servers_may_reference_absent_secrets() {
    let c = load(
        "[servers.a]\ncommand = \"a\"\nenabled = false\nenv = { T = \"${NOT_SET}\" }\n\
         [servers.b]\nurl = \"${NOT_SET}\"\nenabled = false\ntimeout = \"${NOT_SET}\"\n\
         [servers.c]\ncommand = \"${NOT_SET}\"\ncwd = \"${NOT_SET}\"\nenabled = false",
    )
    .unwrap();
    assert!(!c.server("a").unwrap().enabled);
    // They are still listed (as disabled), with the values that could be read.
    assert_eq!(c.servers.len(), 3);
    assert!(c.enabled_servers().next().is_none());
    // Malformed references are still errors, enabled or not.
    assert_eq!(
        load("[servers.a]\ncommand = \"a\"\nenabled = false\nenv = { T = \"${}\" }")
            .unwrap_err()
            .messages(),
        vec![
            "servers.a.env.T: \"${}\" names nothing; write ${NAME} for an environment variable or ${file:PATH} for a file's contents, and $$ for a literal dollar sign"
        ]
    );
}

#[test]
fn no_secret_reaches_any_error_text() {
    let env = env()
        .with_var("BAD_URL", "ftp://SEKRIT.example/mcp")
        .with_var("BAD_TIMEOUT", "SEKRIT-seconds")
        .with_var("BAD_ERA", "SEKRIT")
        .with_var("BAD_KEY", "SEKRIT-not-a-key")
        .with_var("BAD_HEADER", "a\nSEKRIT")
        .with_var("BAD_COMMAND", "SEKRIT run now")
        .with_var("BAD_PREFIX", "SEKRIT.x")
        .with_var("BAD_LISTEN", "SEKRIT:99")
        .with_var("BAD_TRANSPORT", "SEKRIT");
    let text = r#"
[gateway]
listen = "${BAD_LISTEN}"
session_key = "${BAD_KEY}"

[servers.a]
command = "${BAD_COMMAND}"
timeout = "${BAD_TIMEOUT}"
era = "${BAD_ERA}"
prefix = "${BAD_PREFIX}"
env = { LITERAL = "literal-SEKRIT", BAD = "${NOT_SET}" }

[servers.b]
url = "${BAD_URL}"
transport = "${BAD_TRANSPORT}"
headers = { X-Key = "${BAD_HEADER}", X-Lit = 5 }

[servers.c]
url = "https://h.example/${TOKEN}"
headers = { Authorization = "Bearer literal-SEKRIT", Host = "h" }
"#;
    let e = Config::from_str_with(text, "m.toml", None, &env).unwrap_err();
    assert_eq!(e.len(), 12, "expected one error per bad field, got:\n{e}");
    let display = e.to_string();
    let debug = format!("{e:?}");
    assert!(!display.contains(MARK), "a secret leaked into:\n{display}");
    assert!(!debug.contains(MARK), "a secret leaked into:\n{debug}");
    // The errors quote what the file says, which is the reference, not its value.
    assert!(display.contains("servers.a.timeout = \"${BAD_TIMEOUT}\": not a duration"));
}

#[test]
fn debug_output_of_a_loaded_config_redacts_values() {
    let c = load(
        r#"
[gateway]
session_key = "${KEY_HEX}"

[servers.local]
command = "${BIN}"
args = ["${ARG}", "visible-arg"]
env = { TOKEN = "${TOKEN}", LITERAL = "literal-SEKRIT-4" }

[servers.remote]
url = "https://${HOST}/mcp"
headers = { Authorization = "Bearer literal-SEKRIT-5" }

[servers.zapier]
url = "https://mcp.example.com/s/SEKRIT-6/mcp?key=SEKRIT-7"
"#,
    )
    .unwrap();
    let debug = format!("{c:?}");
    assert!(
        debug.contains("url: \"https://mcp.example.com/…\""),
        "{debug}"
    );
    assert!(!debug.contains(MARK), "a secret leaked into:\n{debug}");
    assert!(!debug.contains(&"5e".repeat(4)));
    assert!(debug.contains("visible-arg"));
    assert!(debug.contains("<redacted>"));
    let pretty = format!("{c:#?}");
    assert!(!pretty.contains(MARK));
    let secrets = format!("{:?}", c.secrets());
    assert!(!secrets.contains(MARK));
}

#[test]
fn files_are_read_relative_to_the_configuration_file_on_disk() {
    let dir = std::env::temp_dir().join(format!("manifold-config-it-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    std::fs::write(dir.join("keys/token"), "disk-SEKRIT\n").unwrap();
    let path = dir.join("manifold.toml");
    std::fs::write(
        &path,
        "[servers.a]\ncommand = \"./run\"\ncwd = \"work\"\nenv = { T = \"${file:keys/token}\" }\n",
    )
    .unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(c.origin, path.display().to_string());
    let ServerKind::Stdio { spec, .. } = &c.server("a").unwrap().kind else {
        panic!("expected stdio")
    };
    assert_eq!(spec.env, vec![("T".to_owned(), "disk-SEKRIT".to_owned())]);
    assert_eq!(spec.cwd, Some(dir.join("work")));
    assert_eq!(PathBuf::from(&spec.command), dir.join("./run"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unreadable_configuration_is_one_error() {
    let e = Config::load("/nonexistent/manifold.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "/nonexistent/manifold.toml: error: could not read the configuration: No such file or directory (os error 2); check the path (`manifold import` can write a first configuration)\n1 problem in /nonexistent/manifold.toml; nothing was loaded"
    );
}

#[test]
fn suggestions_are_not_made_from_interpolated_values() {
    let env = env().with_var("ERA", "moden");
    let e = Config::from_str_with(
        "[servers.a]\ncommand = \"a\"\nera = \"${ERA}\"",
        "m.toml",
        None,
        &env,
    )
    .unwrap_err();
    assert_eq!(
        e.messages(),
        vec![
            "servers.a.era = \"${ERA}\": is not one of auto, legacy, modern; write one of \"auto\", \"legacy\", \"modern\""
        ]
    );
}
