//! Reads `[tools.NAME]`: authored tools an operator keeps under version control, for example a
//! wrapper around a command-line program. The shape is checked here with line and column (tables,
//! strings, a readable `code_file`); what the fields mean (schemas, dependencies, bounds) is
//! checked by manifold-authored when the gateway starts, with the same errors as
//! `manifold_create_tool`. Code is taken as written: `${...}` in a shell script is the script's.

use std::time::Duration;

use serde_json::{Map, Value};
use toml::de::{DeTable, DeValue};

use super::reader::{Item, Reader, Show, key_path};

pub(crate) const TOOL_KEYS: &[&str] = &[
    "title",
    "description",
    "input_schema",
    "output_schema",
    "annotations",
    "language",
    "code",
    "code_file",
    "dependencies",
    "timeout",
];

const TOOL_HINTS: &[(&str, &str)] = &[
    (
        "inputSchema",
        "write input_schema = { type = \"object\", ... }",
    ),
    (
        "outputSchema",
        "write output_schema = { type = \"object\", ... }",
    ),
    ("script", "write code = \"...\" or code_file = \"path\""),
    (
        "command",
        "a tool runs code: write language = \"sh\" and code = \"exec PROGRAM ...\"",
    ),
];

/// Largest `code_file` read (manifold-authored's own code bound is lower and names itself).
pub const MAX_CODE_FILE_BYTES: u64 = 1024 * 1024;

/// One `[tools.NAME]`, as the arguments `manifold_create_tool` would take.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfiguredTool {
    pub name: String,
    pub arguments: Value,
}

/// A TOML value as JSON, as written (no interpolation); `None` for a datetime, which no schema
/// needs.
fn to_json(value: &DeValue<'_>) -> Option<Value> {
    Some(match value {
        DeValue::String(s) => Value::String(s.to_string()),
        DeValue::Integer(i) => Value::from(i64::from_str_radix(i.as_str(), i.radix()).ok()?),
        DeValue::Float(f) => Value::from(f.as_str().parse::<f64>().ok()?),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(_) => return None,
        DeValue::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| to_json(i.get_ref()))
                .collect::<Option<Vec<_>>>()?,
        ),
        DeValue::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| Some((k.get_ref().to_string(), to_json(v.get_ref())?)))
                .collect::<Option<Map<_, _>>>()?,
        ),
    })
}

fn raw_string(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Option<String> {
    match item.get_ref() {
        DeValue::String(s) => Some(s.to_string()),
        _ => {
            reader.report_value(
                field,
                item,
                Show::Value,
                "must be a string",
                "write a string; use ''' ... ''' for several lines",
            );
            None
        }
    }
}

/// Reads every `[tools.NAME]` (absent: none).
pub(crate) fn read_tools(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
) -> Vec<ConfiguredTool> {
    let Some(section) = section else {
        return Vec::new();
    };
    let Some(tools) = reader.table("tools", section, "write one [tools.NAME] section per tool")
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, item) in tools {
        let name = name.get_ref().to_string();
        let path = key_path("tools", &name);
        let Some(table) = reader.table(
            &path,
            item,
            "write [tools.NAME] with description, language and code",
        ) else {
            continue;
        };
        reader.check_keys(&path, table, TOOL_KEYS, TOOL_HINTS);
        if let Some(tool) = read_tool(reader, &path, &name, table) {
            out.push(tool);
        }
    }
    out
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
fn read_tool(
    reader: &mut Reader<'_>,
    path: &str,
    name: &str,
    table: &DeTable<'_>,
) -> Option<ConfiguredTool> {
    let field = |key: &str| key_path(path, key);
    let mut arguments = Map::new();
    arguments.insert("name".into(), Value::String(name.to_owned()));
    for (key, json_key) in [
        ("title", "title"),
        ("description", "description"),
        ("language", "language"),
        ("code", "code"),
    ] {
        if let Some(item) = table.get(key)
            && let Some(text) = raw_string(reader, &field(key), item)
        {
            arguments.insert(json_key.into(), Value::String(text));
        }
    }
    for (key, json_key) in [
        ("input_schema", "inputSchema"),
        ("output_schema", "outputSchema"),
        ("annotations", "annotations"),
    ] {
        let Some(item) = table.get(key) else { continue };
        match item.get_ref() {
            DeValue::Table(_) => match to_json(item.get_ref()) {
                Some(v) => {
                    arguments.insert(json_key.into(), v);
                }
                None => reader.report_value(
                    &field(key),
                    item,
                    Show::Value,
                    "holds a date-time, which JSON has no value for",
                    "write the date as a string",
                ),
            },
            _ => reader.report_value(
                &field(key),
                item,
                Show::Value,
                "must be a table",
                format!("write {key} = {{ type = \"object\", properties = {{ ... }} }}"),
            ),
        }
    }
    if let Some(item) = table.get("code_file") {
        let f = field("code_file");
        if table.contains_key("code") {
            reader.report_value(
                &f,
                item,
                Show::Value,
                "is given beside code",
                "keep one of code and code_file",
            );
        } else if let Some(text) =
            reader.string(&f, item, Show::Value, "write code_file = \"tools/rc.sh\"")
            && let Some(file) = reader.path(&f, &text)
        {
            match std::fs::metadata(&file).and_then(|m| {
                if m.len() > MAX_CODE_FILE_BYTES {
                    Err(std::io::Error::other(format!(
                        "it is {} bytes, more than {MAX_CODE_FILE_BYTES}",
                        m.len()
                    )))
                } else {
                    std::fs::read_to_string(&file)
                }
            }) {
                Ok(code) => {
                    arguments.insert("code".into(), Value::String(code));
                }
                Err(e) => reader.report_text(
                    &f,
                    &text,
                    format!("cannot be read ({}): {e}", file.display()),
                    "point it at the tool's code, relative to this file",
                ),
            }
        }
    }
    if let Some(item) = table.get("dependencies")
        && let Some(list) = reader.string_list(
            &field("dependencies"),
            item,
            Show::Value,
            "write dependencies = [\"requests==2.32.3\"]",
        )
    {
        arguments.insert(
            "dependencies".into(),
            Value::from(list.into_iter().map(|t| t.value).collect::<Vec<_>>()),
        );
    }
    if let Some(item) = table.get("timeout")
        && let Some((d, _)) = reader.duration(&field("timeout"), item)
    {
        arguments.insert("timeout".into(), Value::from(Duration::as_secs_f64(&d)));
    }
    Some(ConfiguredTool {
        name: name.to_owned(),
        arguments: Value::Object(arguments),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::{Config, FixedEnvironment};

    fn load(text: &str, dir: Option<&std::path::Path>) -> Result<Config, crate::ConfigErrors> {
        Config::from_str_with(
            text,
            "m.toml",
            dir,
            &FixedEnvironment::new().with_var("HOME", "/home/t"),
        )
    }

    #[test]
    fn a_tool_is_read_as_create_arguments_with_code_as_written() {
        let c = load(
            "[tools.rc]\ndescription = \"RC\"\nlanguage = \"sh\"\ncode = 'echo ${HOME}'\ntimeout = \"90s\"\ninput_schema = { type = \"object\", properties = { r = { type = \"number\", minimum = 0.5 } } }\n",
            None,
        )
        .unwrap();
        let tool = &c.tools[0];
        assert_eq!(tool.name, "rc");
        assert_eq!(tool.arguments["code"], "echo ${HOME}");
        assert_eq!(tool.arguments["timeout"], 90.0);
        assert_eq!(
            tool.arguments["inputSchema"]["properties"]["r"]["minimum"],
            0.5
        );
    }

    #[test]
    fn code_file_is_read_relative_to_the_file_and_mistakes_name_their_line() {
        let dir =
            std::env::temp_dir().join(format!("manifold-config-tools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("t.py"), "print(1)\n").unwrap();
        let c = load(
            "[tools.t]\ndescription = \"d\"\nlanguage = \"python\"\ncode_file = \"t.py\"\n",
            Some(&dir),
        )
        .unwrap();
        assert_eq!(c.tools[0].arguments["code"], "print(1)\n");
        let e = load(
            "[tools.t]\ndescription = \"d\"\nlanguage = \"python\"\ncode_file = \"missing.py\"\n",
            Some(&dir),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("m.toml:4") && e.contains("cannot be read"),
            "{e}"
        );
        std::fs::write(
            dir.join("big.py"),
            vec![b'#'; usize::try_from(super::MAX_CODE_FILE_BYTES).unwrap() + 1],
        )
        .unwrap();
        let e = load(
            "[tools.t]\ndescription = \"d\"\nlanguage = \"python\"\ncode_file = \"big.py\"\n",
            Some(&dir),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("more than 1048576"), "{e}");
        let e = load("[tools.t]\ninputSchema = {}\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("input_schema"), "{e}");
        let e = load("[tools.t]\ninput_schema = \"{}\"\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be a table"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
