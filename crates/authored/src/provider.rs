//! The gateway's hosted-tools seam, implemented: the authoring tools' definitions and behaviour,
//! and calls of the authored tools themselves (checked arguments, a sandboxed run, the result).

use std::sync::Arc;

use futures::future::BoxFuture;
use manifold_gateway::builtin;
use manifold_gateway::hosted::{HostedCall, HostedEntry, HostedTools};
use serde_json::{Value, json};

use crate::definition::ToolDefinition;
use crate::registry::{HISTORY_DEFAULT, LOCAL_AUTHOR, Registry, RegistryError};
use crate::result::{check_arguments, of_run, text_result};
use crate::runner::Runner;

const FIELDS_SCHEMA: &str = r#""name":{"type":"string","description":"The tool's name: letters, digits, '_' and '-'"},"title":{"type":"string"},"description":{"type":"string","description":"What the tool does and when to use it"},"inputSchema":{"type":"object","description":"JSON Schema 2020-12 of the arguments (type object)"},"outputSchema":{"type":"object","description":"JSON Schema of the JSON the code prints (type object); optional"},"annotations":{"type":"object"},"language":{"type":"string","enum":["python","node","sh"]},"code":{"type":"string","description":"The program: arguments as JSON on stdin, result on stdout"},"dependencies":{"type":"array","items":{"type":"string"},"description":"Pinned requirements: name==1.2.3 (python) or name@1.2.3 (node)"},"timeout":{"type":"number","description":"Seconds a call may run"}"#;

fn definitions() -> Vec<&'static str> {
    // Leaked once per process: the gateway lists these as `&'static str` like its own built-ins.
    let create = format!(
        r#"{{"name":"{}","title":"Create a tool","description":"Creates a tool that runs your code in a sandbox and is offered at once to every client of this gateway. Read manifold_instructions first.","inputSchema":{{"type":"object","properties":{{{FIELDS_SCHEMA}}},"required":["name","description","language","code"]}},"annotations":{{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}}}}"#,
        builtin::CREATE_TOOL
    );
    let update = format!(
        r#"{{"name":"{}","title":"Update a tool","description":"Changes an authored tool: the fields given replace the old ones (null removes an optional one); a new version is kept.","inputSchema":{{"type":"object","properties":{{{FIELDS_SCHEMA}}},"required":["name"]}},"annotations":{{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":false}}}}"#,
        builtin::UPDATE_TOOL
    );
    let by_name = |name: &str, title: &str, description: &str, destructive: bool| {
        format!(
            r#"{{"name":"{name}","title":"{title}","description":"{description}","inputSchema":{{"type":"object","properties":{{"name":{{"type":"string","description":"The authored tool's name"}}}},"required":["name"]}},"annotations":{{"readOnlyHint":false,"destructiveHint":{destructive},"idempotentHint":true,"openWorldHint":false}}}}"#
        )
    };
    let all = [
        format!(
            r#"{{"name":"{}","title":"How to author tools","description":"How to create a tool in this Manifold gateway: fields, the call contract, the sandbox, limits and an example.","inputSchema":{{"type":"object","properties":{{}}}},"annotations":{{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}}}}"#,
            builtin::INSTRUCTIONS
        ),
        create,
        update,
        by_name(
            builtin::DISABLE_TOOL,
            "Disable a tool",
            "Takes an authored tool out of every list until it is enabled again; its definition and history stay.",
            false,
        ),
        by_name(
            builtin::ENABLE_TOOL,
            "Enable a tool",
            "Offers a disabled authored tool again.",
            false,
        ),
        by_name(
            builtin::DELETE_TOOL,
            "Delete a tool",
            "Deletes an authored tool; its history stays, and manifold_rollback_tool can bring a version back.",
            true,
        ),
        format!(
            r#"{{"name":"{}","title":"Tool history","description":"The versions of an authored tool, newest first: what changed (a diff), who changed it and when.","inputSchema":{{"type":"object","properties":{{"name":{{"type":"string"}},"limit":{{"type":"integer","minimum":1,"maximum":100,"description":"Versions to show (default 20)"}}}},"required":["name"]}},"annotations":{{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}}}}"#,
            builtin::TOOL_HISTORY
        ),
        format!(
            r#"{{"name":"{}","title":"Roll a tool back","description":"Makes an earlier version of an authored tool the newest (a new version, enabled); works for a deleted tool too.","inputSchema":{{"type":"object","properties":{{"name":{{"type":"string"}},"version":{{"type":"integer","minimum":1}}}},"required":["name","version"]}},"annotations":{{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}}}}"#,
            builtin::ROLLBACK_TOOL
        ),
    ];
    all.into_iter()
        .map(|d| &*Box::leak(d.into_boxed_str()))
        .collect()
}

/// Authored tools behind the gateway: the file's (`[tools.NAME]`, version 0, changed by editing
/// the file) and the store's.
#[derive(Debug)]
pub struct AuthoredTools {
    registry: Arc<Registry>,
    runner: Runner,
    authoring: Vec<&'static str>,
    configured: std::sync::RwLock<Arc<Vec<ToolDefinition>>>,
}

/// The version a tool from the configuration file runs as.
pub const CONFIGURED_VERSION: i64 = 0;

impl AuthoredTools {
    pub fn new(registry: Arc<Registry>, runner: Runner) -> AuthoredTools {
        static DEFINITIONS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        AuthoredTools {
            registry,
            runner,
            authoring: DEFINITIONS.get_or_init(definitions).clone(),
            configured: std::sync::RwLock::default(),
        }
    }

    /// Puts the file's tools in force (at start and on every reload) and tells every session.
    pub fn configure(&self, tools: Vec<ToolDefinition>) {
        let tools = Arc::new(tools);
        let changed = {
            let mut slot = self
                .configured
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let changed = **slot != *tools;
            *slot = tools;
            changed
        };
        if changed {
            self.registry.announce_change();
        }
    }

    /// The store's tools and their versions (the dashboard reads them).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The file's tools in force (`[tools.NAME]`).
    pub fn configured_tools(&self) -> Arc<Vec<ToolDefinition>> {
        self.configured()
    }

    fn configured(&self) -> Arc<Vec<ToolDefinition>> {
        self.configured
            .read()
            .map(|c| Arc::clone(&c))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    fn configured_tool(&self, name: &str) -> Option<ToolDefinition> {
        self.configured().iter().find(|d| d.name == name).cloned()
    }

    async fn manage(&self, call: &HostedCall<'_>) -> String {
        let author = call.caller.unwrap_or(LOCAL_AUTHOR);
        let args = &call.arguments;
        let name_arg = || {
            args.get("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| RegistryError::Refused("name: is required".into()))
        };
        let changed = |definition_name: &str, version: i64, action: &str| {
            json!({
                "content": [{"type": "text", "text": format!("{definition_name}: version {version} ({action})")}],
                "structuredContent": {"name": definition_name, "version": version, "action": action},
                "isError": false,
            })
            .to_string()
        };
        let in_file = |name: &str| self.configured_tool(name).is_some();
        let taken = |name: &str| in_file(name) || (call.taken)(name);
        if call.name != builtin::CREATE_TOOL
            && call.name != builtin::INSTRUCTIONS
            && let Some(name) = args.get("name").and_then(Value::as_str)
            && in_file(name)
        {
            return text_result(
                &format!(
                    "{}: {name} is defined in the configuration file ([tools.{name}]); change it there (a reload applies it)",
                    call.name
                ),
                true,
            );
        }
        let outcome: Result<String, RegistryError> = match call.name {
            builtin::INSTRUCTIONS => Ok(text_result(&crate::instructions::text(), false)),
            builtin::CREATE_TOOL => self
                .registry
                .create(args, author, &taken)
                .await
                .map(|(d, v)| changed(&d.name, v, "created")),
            builtin::UPDATE_TOOL => self
                .registry
                .update(args, author)
                .await
                .map(|(d, v)| changed(&d.name, v, "updated")),
            builtin::DISABLE_TOOL | builtin::ENABLE_TOOL => match name_arg() {
                Ok(name) => {
                    let enable = call.name == builtin::ENABLE_TOOL;
                    self.registry
                        .set_enabled(&name, enable, author)
                        .await
                        .map(|v| changed(&name, v, if enable { "enabled" } else { "disabled" }))
                }
                Err(e) => Err(e),
            },
            builtin::DELETE_TOOL => match name_arg() {
                Ok(name) => self
                    .registry
                    .delete(&name, author)
                    .await
                    .map(|v| changed(&name, v, "deleted")),
                Err(e) => Err(e),
            },
            builtin::TOOL_HISTORY => match name_arg() {
                Ok(name) => {
                    let limit = args
                        .get("limit")
                        .and_then(Value::as_u64)
                        .and_then(|n| usize::try_from(n).ok())
                        .unwrap_or(HISTORY_DEFAULT);
                    self.registry.history(&name, limit).await.map(|history| {
                        json!({
                            "content": [{"type": "text", "text": serde_json::to_string_pretty(&history).unwrap_or_default()}],
                            "structuredContent": history,
                            "isError": false,
                        })
                        .to_string()
                    })
                }
                Err(e) => Err(e),
            },
            builtin::ROLLBACK_TOOL => match (name_arg(), args.get("version").and_then(Value::as_i64)) {
                (Ok(name), Some(to)) => self
                    .registry
                    .rollback(&name, to, author, &taken)
                    .await
                    .map(|(d, v)| changed(&d.name, v, &format!("rolled back to version {to}"))),
                (Err(e), _) => Err(e),
                (_, None) => Err(RegistryError::Refused(
                    "version: is required: the version to roll back to (manifold_tool_history lists them)".into(),
                )),
            },
            other => Err(RegistryError::Refused(format!("{other} is not an authoring tool"))),
        };
        outcome.unwrap_or_else(|e| text_result(&format!("{}: {e}", call.name), true))
    }

    async fn run(&self, call: &HostedCall<'_>) -> String {
        let current = match self.configured_tool(call.name) {
            Some(definition) => Some((definition, CONFIGURED_VERSION)),
            None => self
                .registry
                .current(call.name)
                .filter(|c| c.version.enabled)
                .map(|c| (c.definition, c.version.version)),
        };
        let Some((definition, version)) = current else {
            return text_result(
                &format!(
                    "{} is not an enabled authored tool (it was disabled or deleted meanwhile)",
                    call.name
                ),
                true,
            );
        };
        if let Some(refusal) = check_arguments(&definition, &call.arguments) {
            return refusal;
        }
        match self
            .runner
            .run(&definition, version, &call.arguments, &call.progress)
            .await
        {
            Ok(run) => of_run(&definition, &run),
            Err(e) => text_result(&format!("{}: {e}", call.name), true),
        }
    }
}

impl HostedTools for AuthoredTools {
    fn authoring(&self) -> &[&'static str] {
        &self.authoring
    }

    fn listed(&self) -> Arc<Vec<HostedEntry>> {
        let configured = self.configured();
        let stored = self.registry.listed();
        if configured.is_empty() {
            return stored;
        }
        let mut all: Vec<HostedEntry> = configured
            .iter()
            .map(|d| HostedEntry {
                name: d.name.clone(),
                raw: d.listing().to_string(),
            })
            .collect();
        all.extend(
            stored
                .iter()
                .filter(|e| !configured.iter().any(|d| d.name == e.name))
                .cloned(),
        );
        Arc::new(all)
    }

    fn call<'a>(&'a self, call: HostedCall<'a>) -> BoxFuture<'a, String> {
        Box::pin(async move {
            if builtin::AUTHORING.contains(&call.name) {
                self.manage(&call).await
            } else {
                self.run(&call).await
            }
        })
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.registry.changes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_authoring_tool_has_a_definition_in_order_with_a_valid_schema() {
        let defs = definitions();
        assert_eq!(defs.len(), builtin::AUTHORING.len());
        for (raw, name) in defs.iter().zip(builtin::AUTHORING) {
            let v: Value = serde_json::from_str(raw).unwrap();
            assert_eq!(v["name"], *name);
            jsonschema::draft202012::meta::validate(&v["inputSchema"]).unwrap();
        }
    }
}
