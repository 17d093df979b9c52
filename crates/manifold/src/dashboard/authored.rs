//! Authored tools: every tool authored at run time (and the file's `[tools.NAME]`), each one's
//! versions with the diff that made them, and enable, disable and rollback as the signed-in
//! operator. Changes run through the authoring tools' own code (the same checks, history and
//! `tools/list_changed` as `manifold_disable_tool` and the rest), called as the operator.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use manifold_gateway::builtin;
use manifold_gateway::hosted::{HostedCall, HostedTools, name_taken};
use serde::Deserialize;
use serde_json::{Value, json};

use super::page::{self, Chrome, after_action, shown_ms};
use super::signin::{Flash, Operator};
use super::state::DashboardState;

/// Versions the history shows.
pub const HISTORY_SHOWN: usize = 50;

pub struct ToolRow {
    pub name: String,
    pub version: i64,
    pub state: &'static str,
    pub language: String,
    pub author: String,
    pub at: String,
    pub description: String,
    pub from_file: bool,
}

#[derive(Template)]
#[template(path = "dashboard/authored.html")]
struct AuthoredPage {
    chrome: Chrome,
    tools: Vec<ToolRow>,
}

/// `GET /ui/authored`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    let mut tools: Vec<ToolRow> = state
        .authored
        .registry()
        .in_force()
        .into_iter()
        .map(|t| ToolRow {
            name: t.definition.name.clone(),
            version: t.version.version,
            state: if t.version.enabled {
                "enabled"
            } else {
                "disabled"
            },
            language: format!("{:?}", t.definition.language).to_lowercase(),
            author: t.version.author.clone(),
            at: shown_ms(t.version.created_at_ms),
            description: t.definition.description.clone(),
            from_file: false,
        })
        .collect();
    tools.extend(state.authored.configured_tools().iter().map(|d| ToolRow {
        name: d.name.clone(),
        version: manifold_authored::provider::CONFIGURED_VERSION,
        state: "enabled",
        language: format!("{:?}", d.language).to_lowercase(),
        author: "the configuration file".to_owned(),
        at: "-".to_owned(),
        description: d.description.clone(),
        from_file: true,
    }));
    let chrome = Chrome::new(&operator, "Authored tools", "authored");
    page::render(StatusCode::OK, &AuthoredPage { chrome, tools })
}

pub struct VersionRow {
    pub version: i64,
    pub action: String,
    pub author: String,
    pub at: String,
    pub enabled: bool,
    pub deleted: bool,
    pub diff: String,
    /// The version whose diff the page shows.
    pub here: bool,
}

#[derive(Template)]
#[template(path = "dashboard/authored_tool.html")]
struct ToolPage {
    chrome: Chrome,
    name: String,
    current: Option<ToolRow>,
    definition: String,
    versions: Vec<VersionRow>,
    shown: Option<i64>,
    diff: String,
}

#[derive(Deserialize, Default)]
pub struct Shown {
    version: Option<i64>,
}

/// `GET /ui/authored/NAME?version=N`.
pub async fn tool(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(name): Path<String>,
    Query(shown): Query<Shown>,
) -> Response {
    let history = match state
        .authored
        .registry()
        .history(&name, HISTORY_SHOWN)
        .await
    {
        Ok(h) => h,
        Err(e) => return page::refused(StatusCode::NOT_FOUND, &e.to_string()),
    };
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let versions: Vec<VersionRow> = history
        .get("versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .map(|v| VersionRow {
                    version: v.get("version").and_then(Value::as_i64).unwrap_or(0),
                    action: text(v, "action"),
                    author: text(v, "author"),
                    at: text(v, "at"),
                    enabled: v.get("enabled").and_then(Value::as_bool).unwrap_or(false),
                    deleted: v.get("deleted").and_then(Value::as_bool).unwrap_or(false),
                    diff: text(v, "diff"),
                    here: false,
                })
                .collect()
        })
        .unwrap_or_default();
    let chosen = shown
        .version
        .or_else(|| versions.first().map(|v| v.version));
    let mut versions = versions;
    for v in &mut versions {
        v.here = Some(v.version) == chosen;
    }
    let diff = versions
        .iter()
        .find(|v| Some(v.version) == chosen)
        .map(|v| v.diff.clone())
        .unwrap_or_default();
    let current = state.authored.registry().current(&name);
    let definition = current
        .as_ref()
        .map(|c| serde_json::to_string_pretty(&c.definition).unwrap_or_default())
        .unwrap_or_else(|| "(deleted: roll back to a version to bring it back)".to_owned());
    let current = current.map(|t| ToolRow {
        name: t.definition.name.clone(),
        version: t.version.version,
        state: if t.version.enabled {
            "enabled"
        } else {
            "disabled"
        },
        language: format!("{:?}", t.definition.language).to_lowercase(),
        author: t.version.author.clone(),
        at: shown_ms(t.version.created_at_ms),
        description: t.definition.description.clone(),
        from_file: false,
    });
    let chrome = Chrome::new(&operator, &name, "authored");
    page::render(
        StatusCode::OK,
        &ToolPage {
            chrome,
            name,
            current,
            definition,
            versions,
            shown: chosen,
            diff,
        },
    )
}

/// Runs one authoring tool as the operator and says what it answered.
async fn manage(
    state: &DashboardState,
    operator: &Operator,
    tool: &str,
    arguments: Value,
) -> Flash {
    let catalog = state.gateway.catalog();
    let taken = move |candidate: &str| name_taken(&catalog, candidate);
    let caller = (!operator.local).then_some(operator.name.as_str());
    let call = HostedCall {
        name: tool,
        arguments,
        caller,
        progress: Arc::new(|_| {}),
        taken: &taken,
    };
    let answer = state.authored.call(call).await;
    let parsed: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
    let said = parsed
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("the authoring tool gave no answer")
        .to_owned();
    tracing::info!(operator = %operator.name, tool, "{said} (from the dashboard)");
    if parsed
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(true)
    {
        Flash::Failed(said)
    } else {
        Flash::Done(said)
    }
}

fn back_to(name: &str) -> String {
    format!(
        "/ui/authored/{}",
        url::form_urlencoded::byte_serialize(name.as_bytes()).collect::<String>()
    )
}

/// `POST /ui/authored/NAME/enable`.
pub async fn enable(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(name): Path<String>,
) -> Response {
    let flash = manage(
        &state,
        &operator,
        builtin::ENABLE_TOOL,
        json!({ "name": name }),
    )
    .await;
    after_action(&state, &operator, &back_to(&name), flash).await
}

/// `POST /ui/authored/NAME/disable`.
pub async fn disable(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(name): Path<String>,
) -> Response {
    let flash = manage(
        &state,
        &operator,
        builtin::DISABLE_TOOL,
        json!({ "name": name }),
    )
    .await;
    after_action(&state, &operator, &back_to(&name), flash).await
}

#[derive(Deserialize)]
pub struct RollbackTo {
    version: i64,
}

/// `POST /ui/authored/NAME/rollback` with `version`.
pub async fn rollback(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(name): Path<String>,
    Form(to): Form<RollbackTo>,
) -> Response {
    let flash = manage(
        &state,
        &operator,
        builtin::ROLLBACK_TOOL,
        json!({ "name": name, "version": to.version }),
    )
    .await;
    after_action(&state, &operator, &back_to(&name), flash).await
}
