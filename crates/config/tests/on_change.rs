//! `on_change` per server: what a changed tool definition does, with the exact messages a user
//! sees for a wrong value.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use manifold_config::server::OnChange;
use manifold_config::{Config, FixedEnvironment};

fn load(text: &str) -> Result<Config, manifold_config::ConfigErrors> {
    let env = FixedEnvironment::new().with_var("HOME", "/home/ada");
    Config::from_str_with(text, "m.toml", Some(Path::new("/etc/manifold")), &env)
}

#[test]
fn on_change_defaults_to_warn_and_reads_block() {
    let c = load("[servers.a]\ncommand = \"a\"\n\n[servers.b]\ncommand = \"b\"\non_change = \"block\"\n\n[servers.c]\nurl = \"https://example.com/mcp\"\non_change = \"warn\"\n").unwrap();
    assert_eq!(c.server("a").unwrap().on_change, OnChange::Warn);
    assert_eq!(c.server("b").unwrap().on_change, OnChange::Block);
    assert_eq!(c.server("c").unwrap().on_change, OnChange::Warn);
}

#[test]
fn a_wrong_on_change_is_reported_at_its_place_with_a_suggestion() {
    let errors = load("[servers.a]\ncommand = \"a\"\non_change = \"blok\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        errors.lines().next().unwrap(),
        "m.toml:3:13: error: servers.a.on_change = \"blok\": is not one of warn, block; did you mean \"block\"?"
    );
    let errors = load("[servers.a]\ncommand = \"a\"\non_change = true\n")
        .unwrap_err()
        .messages();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("servers.a.on_change"), "{errors:?}");
}
