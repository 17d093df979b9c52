//! `manifold import` of an entry of the official MCP registry (`server.json`): its first package
//! Manifold can run (npm through `npx`, PyPI through `uvx`, over stdio) or, failing that, its first
//! remote, as one `[servers.NAME]` section. Both field spellings the registry's schemas used are
//! read: camelCase (`registryType`, `identifier`, `packageArguments`, `environmentVariables`,
//! `isSecret`, `remotes[].type`) and the earlier snake_case (`registry_name`, `name`,
//! `package_arguments`, `environment_variables`, `is_secret`, `remotes[].transport_type`), and
//! both API shapes of an entry (the server itself, or `{"server": {...}, "_meta": ...}`).
//! Secret values become `${VARIABLE}` references with a comment; nothing is resolved.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Converted, unique_name, write_server};
use crate::error::ImportError;
use crate::toml_text::{comment_text, toml_string};

/// The first of `keys` the object has, as a value.
fn field<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| v.get(*k))
}

fn text<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    field(v, keys)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn flag(v: &Value, keys: &[&str]) -> bool {
    field(v, keys).and_then(Value::as_bool) == Some(true)
}

/// The server object of an entry in either API shape.
pub fn server_of(entry: &Value) -> &Value {
    entry
        .get("server")
        .filter(|s| s.is_object())
        .unwrap_or(entry)
}

/// Whether a JSON document is a registry entry rather than a client's configuration.
pub fn is_registry_entry(json: &Value) -> bool {
    let server = server_of(json);
    server.get("name").is_some_and(Value::is_string)
        && (server.get("packages").is_some() || server.get("remotes").is_some())
}

/// A variable name for a secret without one (a header's), e.g. `X-Api-Key` → `X_API_KEY`.
fn variable_for(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Registry placeholders `{name}` as Manifold references `${NAME}`.
fn placeholders(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 1..start + len];
        out.push_str(&rest[..start]);
        if !inner.is_empty()
            && inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            out.push_str(&format!("${{{}}}", variable_for(inner)));
        } else {
            out.push_str(&rest[start..=start + len]);
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// The words one argument list (`runtimeArguments`/`packageArguments`) gives.
fn arguments(list: Option<&Value>, notes: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for arg in list.and_then(Value::as_array).into_iter().flatten() {
        let kind = text(arg, &["type"]).unwrap_or("positional");
        let value = text(arg, &["value", "default"])
            .map(placeholders)
            .or_else(|| {
                text(arg, &["valueHint", "value_hint", "name"])
                    .filter(|_| kind == "positional")
                    .map(|hint| {
                        notes.push(format!(
                            "argument {hint:?} has no value in the registry; set ${{{}}}",
                            variable_for(hint)
                        ));
                        format!("${{{}}}", variable_for(hint))
                    })
            });
        match kind {
            "named" => {
                if let Some(name) = text(arg, &["name"]) {
                    out.push(name.to_owned());
                }
                if let Some(v) = text(arg, &["value", "default"]) {
                    out.push(placeholders(v));
                }
            }
            _ => out.extend(value),
        }
    }
    out
}

fn environment(package: &Value, c: &mut Converted) {
    let vars = field(package, &["environmentVariables", "environment_variables"])
        .and_then(Value::as_array);
    for var in vars.into_iter().flatten() {
        let Some(name) = text(var, &["name"]) else {
            continue;
        };
        let secret = flag(var, &["isSecret", "is_secret"]);
        let required = flag(var, &["isRequired", "is_required"]);
        let description = text(var, &["description"]).unwrap_or_default();
        let (value, hint) = match text(var, &["value", "default"]) {
            Some(v) if !secret => (placeholders(v), None),
            _ => {
                let why = match (secret, required) {
                    (true, _) => "secret: set it in Manifold's environment, or use ${file:PATH}",
                    (false, true) => "required: set it in Manifold's environment",
                    (false, false) => {
                        "optional: set it in Manifold's environment, or remove this line"
                    }
                };
                (format!("${{{name}}}"), Some(why))
            }
        };
        if !description.is_empty() {
            c.notes.push(format!("{name}: {description}"));
        }
        c.env.push((name.to_owned(), value, hint));
    }
}

/// A package Manifold can run: npm or PyPI over stdio.
fn package(p: &Value) -> Result<Converted, String> {
    let registry = text(p, &["registryType", "registry_type", "registry_name"]).unwrap_or("?");
    let identifier = text(p, &["identifier", "name"]).ok_or("its package has no identifier")?;
    let transport = field(p, &["transport"])
        .and_then(|t| text(t, &["type"]))
        .unwrap_or("stdio");
    if transport != "stdio" {
        return Err(format!(
            "its {registry} package serves {transport}, which needs the server started and its URL; start it yourself and import its URL"
        ));
    }
    let version = text(p, &["version"]);
    let (runner, spec) = match registry {
        "npm" => (
            "npx",
            version.map_or(identifier.to_owned(), |v| format!("{identifier}@{v}")),
        ),
        "pypi" => (
            "uvx",
            version.map_or(identifier.to_owned(), |v| format!("{identifier}=={v}")),
        ),
        "oci" | "docker" => {
            return Err(format!(
                "its package is an OCI image ({identifier}), which needs a container engine; Manifold runs stdio servers in its own sandbox instead"
            ));
        }
        other => {
            return Err(format!(
                "its package comes from {other:?}, which Manifold cannot install"
            ));
        }
    };
    let mut c = Converted::default();
    let mut args: Vec<String> = Vec::new();
    if registry == "npm" {
        args.push("-y".to_owned());
    }
    args.extend(arguments(
        field(p, &["runtimeArguments", "runtime_arguments"]),
        &mut c.notes,
    ));
    if registry == "pypi" {
        args.push("--from".to_owned());
        args.push(spec);
        args.push(identifier.to_owned());
    } else {
        args.push(spec);
    }
    args.extend(arguments(
        field(p, &["packageArguments", "package_arguments"]),
        &mut c.notes,
    ));
    c.lines.push(format!("command = {}", toml_string(runner)));
    let quoted: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
    c.lines.push(format!("args = [{}]", quoted.join(", ")));
    environment(p, &mut c);
    Ok(c)
}

fn remote(r: &Value) -> Result<Converted, String> {
    let url = text(r, &["url"]).ok_or("its remote has no url")?;
    let kind = text(r, &["type", "transport_type"]).unwrap_or("streamable-http");
    let mut c = Converted::default();
    c.lines
        .push(format!("url = {}", toml_string(&placeholders(url))));
    match kind {
        "sse" => c.lines.push("transport = \"sse\"".to_owned()),
        "streamable-http" | "streamable" | "http" => {}
        other => c.notes.push(format!(
            "remote type {other:?} is unknown; read as Streamable HTTP"
        )),
    }
    for h in field(r, &["headers"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = text(h, &["name"]) else {
            continue;
        };
        let secret = flag(h, &["isSecret", "is_secret"]);
        let value = match text(h, &["value", "default"]) {
            Some(v) if !secret => placeholders(v),
            Some(v) if v.contains('{') => placeholders(v),
            _ => format!("${{{}}}", variable_for(name)),
        };
        let hint = secret
            .then_some("secret: set the variable in Manifold's environment, or use ${file:PATH}");
        if let Some(d) = text(h, &["description"]) {
            c.notes.push(format!("header {name}: {d}"));
        }
        c.headers.push((name.to_owned(), value, hint));
    }
    Ok(c)
}

/// Converts one registry entry into Manifold TOML.
pub fn import_entry(entry: &Value, source_name: &str) -> Result<String, ImportError> {
    let server = server_of(entry);
    let source = comment_text(source_name);
    let registry_name = text(server, &["name"]).ok_or_else(|| ImportError::NoServers {
        source_name: source_name.to_owned(),
        found: "the registry entry has no name".to_owned(),
    })?;
    let mut out = format!(
        "# Manifold configuration imported from {source} by `manifold import`.\n# Review it, then run `manifold check` on it. Comments note what did not carry over.\n"
    );
    let version = text(server, &["version"])
        .or_else(|| field(server, &["version_detail"]).and_then(|v| text(v, &["version"])));
    out.push_str(&format!(
        "# Registry entry {}{}{}\n",
        comment_text(registry_name),
        version
            .map(|v| format!(" version {}", comment_text(v)))
            .unwrap_or_default(),
        text(server, &["description"])
            .map(|d| format!(": {}", comment_text(d)))
            .unwrap_or_default()
    ));
    let mut skipped = Vec::new();
    let mut chosen = None;
    let packages = field(server, &["packages"]).and_then(Value::as_array);
    for p in packages.into_iter().flatten() {
        match package(p) {
            Ok(c) if chosen.is_none() => chosen = Some(c),
            Ok(_) => skipped.push(format!(
                "another package ({}) was not used",
                text(p, &["identifier", "name"]).unwrap_or("?")
            )),
            Err(why) => skipped.push(why),
        }
    }
    let remotes = field(server, &["remotes"]).and_then(Value::as_array);
    for r in remotes.into_iter().flatten() {
        match remote(r) {
            Ok(c) if chosen.is_none() => chosen = Some(c),
            Ok(_) => skipped.push(format!(
                "the remote {} was not used (a package, or an earlier remote, was)",
                text(r, &["url"]).unwrap_or("?")
            )),
            Err(why) => skipped.push(why),
        }
    }
    let short = registry_name.rsplit('/').next().unwrap_or(registry_name);
    let name = unique_name(short, &mut BTreeSet::new());
    match chosen {
        Some(mut c) => {
            c.notes.extend(skipped);
            write_server(&mut out, short, &name, &source, &c);
        }
        None => {
            out.push_str(&format!(
                "\n# Not imported: {:?}: {}\n",
                comment_text(registry_name),
                comment_text(&if skipped.is_empty() {
                    "it lists no packages and no remotes".to_owned()
                } else {
                    skipped.join("; ")
                })
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_become_references() {
        assert_eq!(
            placeholders("https://x/{tenant_id}/mcp"),
            "https://x/${TENANT_ID}/mcp"
        );
        assert_eq!(placeholders("Bearer {token}"), "Bearer ${TOKEN}");
        assert_eq!(placeholders("{not closed"), "{not closed");
    }

    #[test]
    fn a_snake_case_entry_reads_like_a_camel_case_one() {
        let camel = json!({"name": "io.github.a/weather", "version": "1.0.0", "packages": [{
            "registryType": "npm", "identifier": "@a/weather", "version": "1.0.0",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "named", "name": "--units", "value": "metric"}],
            "environmentVariables": [{"name": "WEATHER_KEY", "isSecret": true, "isRequired": true}]}]});
        let snake = json!({"server": {"name": "io.github.a/weather", "version_detail": {"version": "1.0.0"}, "packages": [{
            "registry_name": "npm", "name": "@a/weather", "version": "1.0.0",
            "package_arguments": [{"type": "named", "name": "--units", "value": "metric"}],
            "environment_variables": [{"name": "WEATHER_KEY", "is_secret": true, "is_required": true}]}]}});
        let a = import_entry(&camel, "a").unwrap();
        let b = import_entry(&snake, "a").unwrap();
        assert_eq!(a, b);
        assert!(
            a.contains("args = [\"-y\", \"@a/weather@1.0.0\", \"--units\", \"metric\"]"),
            "{a}"
        );
        assert!(
            a.contains("WEATHER_KEY = \"${WEATHER_KEY}\"  # secret"),
            "{a}"
        );
    }
}
