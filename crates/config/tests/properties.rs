//! Properties over arbitrary input: loading and importing never panic, and whatever `import`
//! produces loads (at most missing the environment variables it references).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use manifold_config::{Config, FixedEnvironment, import};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn env() -> FixedEnvironment {
    FixedEnvironment::new().with_var("HOME", "/home/ada")
}

/// Text with the characters that matter to TOML, JSON, URLs and interpolation.
fn awkward_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("$".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("${A}".to_owned()),
            Just("${env:B}".to_owned()),
            Just("${input:c}".to_owned()),
            Just("${X:-d}".to_owned()),
            Just("${workspaceFolder}".to_owned()),
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("\n".to_owned()),
            Just(" ".to_owned()),
            Just("/".to_owned()),
            Just("-".to_owned()),
            Just("https://".to_owned()),
            Just("http://".to_owned()),
            Just("localhost".to_owned()),
            Just("=".to_owned()),
            "[a-zA-Z0-9_.]{1,6}",
            "\\PC{1,3}",
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

fn server_entry() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop_oneof![
            Just("stdio"),
            Just("http"),
            Just("sse"),
            Just("weird")
        ]),
        prop::option::of(awkward_text()),
        prop::collection::vec(awkward_text(), 0..4),
        prop::collection::btree_map(awkward_text(), awkward_text(), 0..3),
        prop::option::of(awkward_text()),
        prop::collection::btree_map(awkward_text(), awkward_text(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(kind, command, args, env, url, headers, disabled)| {
            let mut entry = Map::new();
            if let Some(k) = kind {
                entry.insert("type".into(), json!(k));
            }
            if let Some(c) = command {
                entry.insert("command".into(), json!(c));
            }
            entry.insert("args".into(), json!(args));
            entry.insert("env".into(), json!(env));
            if let Some(u) = url {
                entry.insert("url".into(), json!(u));
            }
            entry.insert("headers".into(), json!(headers));
            entry.insert("disabled".into(), json!(disabled));
            Value::Object(entry)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn loading_arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = Config::from_str_with(&text, "fuzz.toml", None, &env());
    }

    #[test]
    fn loading_damaged_configurations_never_panics(cut in 0usize..400, insert in "\\PC{0,4}") {
        let good = "[gateway]\nlisten = \"127.0.0.1:1\"\nallowed_origins = [\"http://localhost:*\"]\n[servers.a]\ncommand = \"a\"\nargs = [\"${A}\"]\ntimeout = \"5s\"\ntools.allow = [\"x*\"]\n[servers.b]\nurl = \"https://b.example/mcp\"\nheaders = { X = \"$$y\" }\n";
        let mut text = good.to_owned();
        let mut at = cut.min(text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.insert_str(at, &insert);
        let _ = Config::from_str_with(&text, "fuzz.toml", None, &env());
    }

    #[test]
    fn importing_arbitrary_json_never_panics(text in "\\PC{0,200}") {
        let _ = import(&text, "fuzz.json");
    }

    #[test]
    fn whatever_import_writes_loads(
        servers in prop::collection::btree_map(awkward_text(), server_entry(), 0..5),
        vscode in any::<bool>(),
    ) {
        let json = if vscode {
            json!({ "servers": servers })
        } else {
            json!({ "mcpServers": servers })
        };
        let toml = import(&json.to_string(), "fuzz.json").unwrap();
        if let Err(errors) = Config::from_str_with(&toml, "imported.toml", None, &env()) {
            // The only acceptable failures are references to variables this environment lacks.
            for e in &errors {
                prop_assert!(
                    e.problem.starts_with("the environment variable ") && e.problem.ends_with(" is not set"),
                    "import wrote a configuration that does not load: {}\n---\n{}\n---\n{}",
                    e, toml, json
                );
            }
        }
    }
}
