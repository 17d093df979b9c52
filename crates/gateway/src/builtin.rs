//! Tools Manifold owns: health, search, and calling a tool found by search.
//!
//! They are listed first and their names are reserved, so no upstream can shadow them. In
//! `discovery = "search"` mode they are the only tools a client sees: it starts small and finds
//! the rest by keyword.

use serde_json::{Value, json};

use crate::context::RequestContext;
use crate::upstream::{Sandbox, Status};

pub mod names;

pub use names::{
    AUTHORING, AUTHORING_CHANGES, CALL, CORE, CREATE_TOOL, DELETE_TOOL, DISABLE_TOOL, ENABLE_TOOL,
    HEALTH, INSTRUCTIONS, NAMES, ROLLBACK_TOOL, SEARCH, TOOL_HISTORY, UPDATE_TOOL,
};

/// Results a search returns by default, and at most.
pub const SEARCH_DEFAULT_LIMIT: usize = 10;
pub const SEARCH_MAX_LIMIT: usize = 50;

/// The built-in tools' definitions, raw JSON, in listing order.
pub fn definitions() -> [&'static str; 3] {
    [
        r#"{"name":"manifold_health","title":"Manifold health","description":"Shows whether every server behind this Manifold gateway is up: per server its state, protocol era and revision, tool count, last error, restarts and uptime; and what Manifold knows about you, the client.","inputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}}"#,
        r#"{"name":"manifold_search_tools","title":"Search tools","description":"Finds tools of the servers behind this gateway by keywords in their names and descriptions, best match first, with their input schemas. Call one with manifold_call_tool.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"Keywords, e.g. 'read file' or 'git commit'"},"limit":{"type":"integer","minimum":1,"maximum":50,"description":"How many tools to return (default 10)"}},"required":["query"]},"annotations":{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}}"#,
        r#"{"name":"manifold_call_tool","title":"Call a tool","description":"Calls a tool found with manifold_search_tools, by its exact name, with its arguments.","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name as manifold_search_tools returned it"},"arguments":{"type":"object","description":"The tool's arguments, matching its input schema"}},"required":["name"]}}"#,
    ]
}

fn text_result(text: &str, structured: Option<Value>, is_error: bool) -> String {
    let mut v = json!({ "content": [{ "type": "text", "text": text }], "isError": is_error });
    if let (Some(s), Some(obj)) = (structured, v.as_object_mut()) {
        obj.insert("structuredContent".to_owned(), s);
    }
    v.to_string()
}

/// What `manifold_health` reads of the gateway, and nothing more.
pub struct HealthView<'a> {
    /// The upstreams in force.
    pub upstreams: &'a [std::sync::Arc<crate::upstream::Upstream>],
    /// With rules: the servers the caller may reach, with how many of their tools it sees.
    pub visible: Option<std::collections::HashMap<String, usize>>,
    pub pins: Option<&'a crate::pins::Pins>,
    /// The audit trail's status, when there is a trail.
    pub audit: Option<manifold_telemetry::audit::AuditStatus>,
    /// Why the last catalog rebuild was refused, if it was.
    pub catalog_error: Option<String>,
}

/// What `manifold_search_tools` reads: the catalog, the caller's view of the rules, and the
/// hosted tools listed now.
pub struct SearchView<'a> {
    pub catalog: &'a crate::catalog::build::Catalog,
    pub rules: &'a crate::policy::CallerRules<'a>,
    pub hosted: std::sync::Arc<Vec<crate::hosted::HostedEntry>>,
}

/// `manifold_health`.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub fn health(gateway: HealthView<'_>, ctx: &RequestContext) -> String {
    let mut healthy = true;
    let mut lines = Vec::new();
    let pins = gateway.pins;
    // With rules, a caller sees only the servers it may reach, and their tools it may see.
    let visible = gateway.visible;
    let upstreams: Vec<Value> = gateway
        .upstreams
        .iter()
        .filter(|u| visible.as_ref().is_none_or(|v| v.contains_key(&u.def.name)))
        .map(|u| {
            let status = u.status();
            let info = u.peer_info();
            let (state, cause) = status.word_and_cause();
            let cause = cause.map(str::to_owned);
            if !matches!(status, Status::Up | Status::Idle) {
                healthy = false;
            }
            lines.push(format!(
                "{}: {state}{}",
                u.def.name,
                cause
                    .as_ref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default()
            ));
            let sandbox = u.sandbox();
            let (sandbox_json, sandbox_line) = sandbox_health(&u.def.name, sandbox.as_ref());
            // A server running weaker than configured is up but not as promised: the status
            // says so, so an operator's alert on "degraded" catches it.
            if sandbox.as_ref().is_some_and(Sandbox::is_degraded) {
                healthy = false;
            }
            lines.extend(sandbox_line);
            let definitions = pins.map(|p| crate::pins::health_of(p, &u.def.name));
            if let Some((_, Some(changed))) = &definitions {
                lines.push(changed.clone());
            }
            json!({
                "name": u.def.name,
                "state": state,
                "reachable": status == Status::Up,
                "era": info.as_ref().map(|i| format!("{:?}", i.era).to_lowercase()),
                "revision": info.as_ref().map(|i| i.revision.as_str()),
                "server": info.as_ref().and_then(|i| i.server_name.clone()),
                "tools": visible
                    .as_ref()
                    .and_then(|v| v.get(&u.def.name).copied())
                    .unwrap_or_else(|| u.lists().tools.len()),
                "lastError": u.last_error(),
                "restarts": u.restarts(),
                "uptimeSeconds": u.uptime().map(|d| d.as_secs()),
                "definitions": definitions.map(|(v, _)| v),
                "sandbox": sandbox_json,
            })
        })
        .collect();
    let client_revision = ctx.client.revision.as_str();
    let skew = (ctx.client.revision != manifold_wire::Revision::LATEST
        && ctx.client.revision != manifold_wire::Revision::LATEST_LEGACY)
        .then(|| {
            format!(
                "the client speaks {client_revision}; Manifold's newest revisions are {} and {}",
                manifold_wire::Revision::LATEST_LEGACY,
                manifold_wire::Revision::LATEST
            )
        });
    let client_info: Value = ctx
        .client
        .info
        .as_ref()
        .and_then(|i| serde_json::from_str(i.raw()).ok())
        .unwrap_or(Value::Null);
    let audit = gateway.audit;
    if let Some(trail) = &audit {
        if let Some(why) = &trail.failing {
            healthy = false;
            lines.push(format!("audit trail ({}): failing ({why})", trail.mode));
        } else if trail.dropped > 0 {
            lines.push(format!(
                "audit trail ({}): {} row(s) dropped since start",
                trail.mode, trail.dropped
            ));
        }
    }
    let status = if healthy { "healthy" } else { "degraded" };
    let structured = json!({
        "status": status,
        "upstreams": upstreams,
        "audit": audit.map(|a| json!({
            "mode": a.mode,
            "queueDepth": a.queue_depth,
            "queueCapacity": a.queue_capacity,
            "written": a.written,
            "dropped": a.dropped,
            "failing": a.failing,
        })),
        "catalogError": gateway.catalog_error,
        "pinsError": pins.and_then(crate::pins::Pins::error),
        "client": { "revision": client_revision, "info": client_info, "revisionSkew": skew },
    });
    let text = format!("Manifold is {status}.\n{}", lines.join("\n"));
    text_result(&text, Some(structured), false)
}

/// One upstream's `sandbox` block and, when it is off or degraded, its text line (the form of
/// docs/security.md: each partial or missing control with what the kernel said and the fix).
fn sandbox_health(name: &str, sandbox: Option<&Sandbox>) -> (Value, Option<String>) {
    let Some(sandbox) = sandbox else {
        return (Value::Null, None);
    };
    let (profile, running) = match sandbox {
        Sandbox::Off => {
            let line = format!(
                "{name}: sandbox off (profile = \"off\"): it runs with the gateway's access to files and network"
            );
            let block = json!({ "profile": "off", "controls": null, "degraded": false });
            return (block, Some(line));
        }
        Sandbox::On { profile, report } => (*profile, report.is_some()),
        Sandbox::Container { report } => ("default", report.is_some()),
    };
    let controls = sandbox.controls();
    let map: serde_json::Map<String, Value> = controls
        .iter()
        .map(|e| {
            (
                e.control.as_str().to_owned(),
                json!({ "state": e.state.as_str(), "detail": e.detail }),
            )
        })
        .collect();
    let degraded = sandbox.is_degraded();
    let block = json!({
        "profile": profile,
        "controls": running.then_some(Value::Object(map)),
        "degraded": degraded,
    });
    let line = degraded.then(|| {
        let weak: Vec<String> = controls
            .iter()
            .filter(|e| e.state.is_degraded())
            .map(|e| format!("{}={} ({})", e.control.as_str(), e.state.as_str(), e.detail))
            .collect();
        let enforced: Vec<&str> = controls
            .iter()
            .filter(|e| e.state == manifold_upstream::transport::stdio::SandboxState::Enforced)
            .map(|e| e.control.as_str())
            .collect();
        format!(
            "{name}: sandbox DEGRADED (profile {profile}): {}; enforced: {}",
            weak.join("; "),
            if enforced.is_empty() {
                "nothing".to_owned()
            } else {
                enforced.join(", ")
            }
        )
    });
    (block, line)
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// `manifold_search_tools`: ranks exposed tools by keyword matches.
pub fn search(gateway: SearchView<'_>, arguments: &Value) -> String {
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return text_result(
            "manifold_search_tools needs a \"query\" string, e.g. {\"query\":\"read file\"}",
            None,
            true,
        );
    };
    let limit = arguments
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(SEARCH_DEFAULT_LIMIT, |l| {
            usize::try_from(l).unwrap_or(SEARCH_MAX_LIMIT)
        })
        .clamp(1, SEARCH_MAX_LIMIT);
    let terms = words(query);
    let catalog = gateway.catalog;
    let view = gateway.rules;
    // Server tools and authored tools (a server tool of the same name shadows an authored one).
    let hosted = gateway.hosted;
    let candidates = catalog
        .tools
        .iter()
        .filter(|e| view.sees_entry(crate::policy::ItemKind::Tool, e))
        .map(|e| (e.exposed.as_ref(), e.server.as_ref(), e.raw.as_str()))
        .chain(
            hosted
                .iter()
                .filter(|h| catalog.tool(&h.name).is_none())
                .filter(|h| view.sees(crate::policy::ItemKind::Tool, None, &h.name))
                .map(|h| {
                    (
                        h.name.as_str(),
                        manifold_telemetry::labels::AUTHORED_UPSTREAM,
                        h.raw.as_str(),
                    )
                }),
        );
    let mut scored: Vec<(u32, &str, &str, Value)> = candidates
        .filter_map(|(exposed, server, raw)| {
            let v: Value = serde_json::from_str(raw).ok()?;
            let name = exposed.to_lowercase();
            let name_words = words(exposed);
            let desc = v.get("description").and_then(Value::as_str).unwrap_or("");
            let desc_words = words(desc);
            let mut score = 0u32;
            for t in &terms {
                if name_words.contains(t) {
                    score += 5;
                } else if name.contains(t.as_str()) {
                    score += 3;
                }
                if desc_words.contains(t) {
                    score += 2;
                } else if desc.to_lowercase().contains(t.as_str()) {
                    score += 1;
                }
            }
            (score > 0).then_some((score, exposed, server, v))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let found: Vec<Value> = scored
        .iter()
        .take(limit)
        .map(|(score, exposed, server, v)| {
            json!({
                "name": exposed,
                "server": server,
                "description": v.get("description"),
                "inputSchema": v.get("inputSchema"),
                "score": score,
            })
        })
        .collect();
    let text = if found.is_empty() {
        format!(
            "No tool matches {query:?}. manifold_health lists the servers and their tool counts."
        )
    } else {
        let names: Vec<String> = found
            .iter()
            .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        format!(
            "{} tool(s) match {query:?}: {}. Call one with manifold_call_tool.",
            names.len(),
            names.join(", ")
        )
    };
    text_result(&text, Some(json!({ "tools": found })), false)
}

/// An `isError` tool result with a message (for failures of a tool that did run or could not).
pub fn error_result(text: &str) -> String {
    text_result(text, None, true)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use manifold_upstream::transport::stdio::{
        SandboxControl as Control, SandboxEnforcement as Enforcement, SandboxReport as Report,
        SandboxState as State,
    };

    use super::*;

    fn fallback_report() -> Report {
        Report {
            enforcements: vec![
                Enforcement::new(Control::Memory, State::Enforced, "cgroup v1 memory.limit"),
                Enforcement::new(
                    Control::Namespaces,
                    State::Missing,
                    "fallback tier: unshare: EPERM; allow unprivileged user namespaces",
                ),
                Enforcement::new(Control::Filesystem, State::Partial, "Landlock paths only"),
                Enforcement::new(Control::Seccomp, State::Enforced, "deny filter"),
            ],
        }
    }

    #[test]
    fn a_partial_or_missing_control_is_degraded_with_a_line_naming_errno_and_fix() {
        let sandbox = Sandbox::On {
            profile: "strict",
            report: Some(Arc::new(fallback_report())),
        };
        let (block, line) = sandbox_health("fs", Some(&sandbox));
        assert_eq!(block["profile"], "strict");
        assert_eq!(block["degraded"], true);
        assert_eq!(block["controls"]["namespaces"]["state"], "missing");
        assert_eq!(block["controls"]["filesystem"]["state"], "partial");
        assert_eq!(block["controls"]["memory"]["state"], "enforced");
        let line = line.unwrap_or_default();
        assert!(
            line.starts_with("fs: sandbox DEGRADED (profile strict): namespaces=missing (fallback tier: unshare: EPERM; allow unprivileged user namespaces); filesystem=partial"),
            "{line}"
        );
        assert!(line.ends_with("enforced: memory, seccomp"), "{line}");
    }

    #[test]
    fn enforced_off_unset_and_not_running_are_not_degraded() {
        let mut all = Report::default();
        all.enforcements.push(Enforcement::new(
            Control::Network,
            State::Off,
            "network: host (unrestricted)",
        ));
        all.enforcements
            .push(Enforcement::new(Control::Seccomp, State::Enforced, "deny"));
        let enforced = Sandbox::On {
            profile: "network",
            report: Some(Arc::new(all)),
        };
        let (block, line) = sandbox_health("web", Some(&enforced));
        assert_eq!((block["degraded"].clone(), line), (json!(false), None));
        assert_eq!(block["controls"]["network"]["state"], "off");
        let idle = Sandbox::On {
            profile: "strict",
            report: None,
        };
        let (block, line) = sandbox_health("lazy", Some(&idle));
        assert_eq!(block["controls"], Value::Null);
        assert!(line.is_none() && !idle.is_degraded());
        let (block, line) = sandbox_health("loud", Some(&Sandbox::Off));
        assert_eq!(block["profile"], "off");
        assert!(line.unwrap_or_default().contains("sandbox off"));
        assert_eq!(sandbox_health("plain", None), (Value::Null, None));
    }
}
