//! The catalog: every tool, resource, template and prompt the signed-in operator may see (listed
//! through the gateway as they would be to an MCP client), a tool's schema, annotations and pin,
//! and the changed definitions that wait for a person, with a diff and an approve button.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use manifold_gateway::builtin;
use manifold_gateway::pins::{PinFile, PinRepository};
use serde::Deserialize;
use serde_json::Value;

use super::as_caller::{caller_of_operator, list_all};
use super::page::{self, Chrome, after_action};
use super::signin::{Flash, Operator};
use super::state::DashboardState;
use crate::pin_store::StorePins;

/// One row of a list.
pub struct Item {
    pub name: String,
    pub title: String,
    pub description: String,
    pub server: String,
}

/// A changed definition waiting for approval.
pub struct ChangedPin {
    pub server: String,
    pub tool: String,
    pub fields: String,
    pub pinned: String,
    pub seen: String,
    pub seen_at: String,
    pub diff: String,
}

#[derive(Template)]
#[template(path = "dashboard/catalog.html")]
struct CatalogPage {
    chrome: Chrome,
    q: String,
    tools: Vec<Item>,
    resources: Vec<Item>,
    templates: Vec<Item>,
    prompts: Vec<Item>,
    changed: Vec<ChangedPin>,
    problems: Vec<String>,
}

#[derive(Deserialize, Default)]
pub struct Search {
    #[serde(default)]
    q: String,
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Which server a listed tool comes from, as the operator reads it.
pub fn server_of_tool(state: &DashboardState, name: &str) -> String {
    if let Some(entry) = state.gateway.catalog().tool_entry(name) {
        return entry.server.to_string();
    }
    if builtin::NAMES.contains(&name) {
        "(built-in)".to_owned()
    } else {
        "(authored)".to_owned()
    }
}

fn matches(item: &Item, q: &str) -> bool {
    q.is_empty()
        || [&item.name, &item.title, &item.description, &item.server]
            .iter()
            .any(|t| t.to_lowercase().contains(q))
}

/// Pretty JSON, or the text as it came when it is not JSON.
pub fn pretty(raw: &str) -> String {
    serde_json::from_str::<Value>(raw)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| raw.to_owned())
}

/// A unified diff of two texts, for a page.
pub fn diff(before: &str, after: &str, before_name: &str, after_name: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(before_name, after_name)
        .to_string()
}

async fn pins(state: &DashboardState) -> Result<PinFile, String> {
    StorePins::new(Arc::clone(&state.store))
        .snapshot()
        .await
        .map(|(file, _)| file)
        .map_err(|e| e.to_string())
}

fn changed_pins(state: &DashboardState, file: &PinFile) -> Vec<ChangedPin> {
    let catalog = state.gateway.catalog();
    let mut out = Vec::new();
    for (server, tools) in &file.changed {
        for (tool, change) in tools {
            let served = catalog
                .tools
                .iter()
                .find(|e| &*e.server == server && &e.original == tool)
                .map(|e| pretty(&e.raw))
                .unwrap_or_default();
            let seen = change.definition.as_deref().map(pretty).unwrap_or_default();
            out.push(ChangedPin {
                server: server.clone(),
                tool: tool.clone(),
                fields: change.fields.join(", "),
                pinned: change.pinned.clone(),
                seen: change.seen.clone(),
                seen_at: manifold_store::timestamps::utc_rfc3339(change.seen_at),
                diff: diff(&served, &seen, "served now", "offered by the server"),
            });
        }
    }
    out
}

fn items(listed: Vec<Value>, name_key: &str, server: impl Fn(&Value) -> String) -> Vec<Item> {
    listed
        .iter()
        .map(|v| Item {
            name: text(v, name_key),
            title: text(v, "title"),
            description: text(v, "description"),
            server: server(v),
        })
        .collect()
}

/// `GET /ui/catalog?q=TEXT`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Query(search): Query<Search>,
) -> Response {
    let caller = caller_of_operator(&operator);
    let mut problems = Vec::new();
    let mut listed = |what: &str, r: Result<Vec<Value>, String>| {
        r.unwrap_or_else(|e| {
            problems.push(format!("{what} could not be listed: {e}"));
            Vec::new()
        })
    };
    let tools = listed(
        "tools",
        list_all(&state, caller.clone(), "tools/list", "tools").await,
    );
    let resources = listed(
        "resources",
        list_all(&state, caller.clone(), "resources/list", "resources").await,
    );
    let templates = listed(
        "resource templates",
        list_all(
            &state,
            caller.clone(),
            "resources/templates/list",
            "resourceTemplates",
        )
        .await,
    );
    let prompts = listed(
        "prompts",
        list_all(&state, caller, "prompts/list", "prompts").await,
    );
    let catalog = state.gateway.catalog();
    let by_uri = |v: &Value, key: &str| {
        let uri = text(v, key);
        catalog
            .resources
            .iter()
            .chain(catalog.templates.iter())
            .find(|e| e.exposed == uri)
            .map_or_else(String::new, |e| e.server.to_string())
    };
    let q = search.q.trim().to_lowercase();
    let keep = |list: Vec<Item>| {
        list.into_iter()
            .filter(|i| matches(i, &q))
            .collect::<Vec<_>>()
    };
    let tools = keep(items(tools, "name", |v| {
        server_of_tool(&state, &text(v, "name"))
    }));
    let resources = keep(items(resources, "uri", |v| by_uri(v, "uri")));
    let templates = keep(items(templates, "uriTemplate", |v| {
        by_uri(v, "uriTemplate")
    }));
    let prompts = keep(items(prompts, "name", |v| {
        catalog
            .prompts
            .iter()
            .find(|e| e.exposed == text(v, "name"))
            .map_or_else(String::new, |e| e.server.to_string())
    }));
    let changed = match pins(&state).await {
        Ok(file) => changed_pins(&state, &file),
        Err(e) => {
            problems.push(format!("the pins could not be read: {e}"));
            Vec::new()
        }
    };
    let chrome = Chrome::new(&operator, "Catalog", "catalog");
    page::render(
        StatusCode::OK,
        &CatalogPage {
            chrome,
            q: search.q,
            tools,
            resources,
            templates,
            prompts,
            changed,
            problems,
        },
    )
}

#[derive(Template)]
#[template(path = "dashboard/tool.html")]
struct ToolPage {
    chrome: Chrome,
    name: String,
    server: String,
    title: String,
    description: String,
    schema: String,
    output_schema: String,
    annotations: String,
    pin: String,
}

/// `GET /ui/catalog/tools/NAME`.
pub async fn tool(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(name): Path<String>,
) -> Response {
    let tools = list_all(&state, caller_of_operator(&operator), "tools/list", "tools").await;
    let Some(tool) = tools
        .unwrap_or_default()
        .into_iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name.as_str()))
    else {
        return page::refused(
            StatusCode::NOT_FOUND,
            &format!("there is no tool {name:?} that you may see; the catalog lists every tool"),
        );
    };
    let entry = state.gateway.catalog().tool_entry(&name).cloned();
    let pin = match (&entry, pins(&state).await) {
        (Some(e), Ok(file)) => file
            .pins
            .get(&*e.server)
            .and_then(|p| p.get(&e.original))
            .map_or_else(
                || "not pinned yet".to_owned(),
                |p| format!("sha256:{}", p.sha256),
            ),
        (Some(_), Err(e)) => format!("the pins could not be read: {e}"),
        (None, _) => "not pinned (built-in and authored tools are Manifold's own)".to_owned(),
    };
    let shown = |key: &str| {
        tool.get(key)
            .map(|v| serde_json::to_string_pretty(v).unwrap_or_default())
            .unwrap_or_else(|| "(none)".to_owned())
    };
    let chrome = Chrome::new(&operator, &name, "catalog");
    page::render(
        StatusCode::OK,
        &ToolPage {
            chrome,
            server: server_of_tool(&state, &name),
            title: text(&tool, "title"),
            description: text(&tool, "description"),
            schema: shown("inputSchema"),
            output_schema: shown("outputSchema"),
            annotations: shown("annotations"),
            pin,
            name,
        },
    )
}

/// `POST /ui/catalog/pins/SERVER/approve`: the server's changed definitions become its pins.
pub async fn approve_pins(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(server): Path<String>,
) -> Response {
    let pins = StorePins::new(Arc::clone(&state.store));
    let flash = match crate::pins_commands::approve_changed(&pins, &server).await {
        Ok(done) => {
            tracing::info!(operator = %operator.name, server = %server, "changed tool definitions approved from the dashboard");
            Flash::Done(done)
        }
        Err(e) => Flash::Failed(e.message),
    };
    after_action(&state, &operator, "/ui/catalog", flash).await
}
