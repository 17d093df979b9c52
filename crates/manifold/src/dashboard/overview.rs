//! The overview: every server with its state, era, sandbox, tools, restarts and uptime, its calls
//! and errors over the last hour (from the audit trail), and what `/readyz` would say.

use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use manifold_store::{AuditFilter, MAX_AUDIT_PAGE};

use super::page::{self, Chrome};
use super::signin::Operator;
use super::state::DashboardState;

/// The chart's span, and its bars.
pub const CHART_SPAN_MS: i64 = 3_600_000;
pub const CHART_BARS: usize = 12;
/// Outcomes the chart counts as errors.
const ERROR_OUTCOMES: &[&str] = &["tool_error", "rpc_error", "transport_failure"];

/// One server's row.
pub struct ServerRow {
    pub name: String,
    pub state: &'static str,
    pub cause: String,
    pub era: String,
    pub revision: String,
    pub sandbox: &'static str,
    pub tools: usize,
    pub restarts: u32,
    pub uptime: String,
    pub calls: usize,
    pub errors: usize,
    /// One bar per slice of the hour: (x, calls height, errors height).
    pub bars: Vec<(usize, usize, usize)>,
}

#[derive(Template)]
#[template(path = "dashboard/servers.html")]
pub struct ServersPart {
    pub ready: bool,
    pub readiness: String,
    pub servers: Vec<ServerRow>,
    pub audit_note: Option<String>,
}

#[derive(Template)]
#[template(path = "dashboard/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    part: String,
}

fn uptime(d: Option<std::time::Duration>) -> String {
    let Some(d) = d else {
        return "-".to_owned();
    };
    crate::approvals_commands::span(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Calls and errors per server over the last hour, in [`CHART_BARS`] slices.
async fn last_hour(
    state: &DashboardState,
) -> (HashMap<String, Vec<(usize, usize)>>, Option<String>) {
    let now = manifold_store::timestamps::now_ms();
    let filter = AuditFilter {
        since_ms: Some(now - CHART_SPAN_MS),
        ..AuditFilter::default()
    };
    let rows = match state.store.audit().search(&filter, MAX_AUDIT_PAGE).await {
        Ok(rows) => rows,
        Err(e) => {
            return (
                HashMap::new(),
                Some(format!("the audit trail could not be read: {e}")),
            );
        }
    };
    let capped = rows.len() >= MAX_AUDIT_PAGE as usize;
    let slice = CHART_SPAN_MS / CHART_BARS as i64;
    let mut per: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    for row in rows {
        let bars = per
            .entry(row.entry.server.clone())
            .or_insert_with(|| vec![(0, 0); CHART_BARS]);
        let age = (now - row.entry.at_ms).max(0);
        let index = CHART_BARS
            - 1
            - usize::try_from(age / slice)
                .unwrap_or(0)
                .min(CHART_BARS - 1);
        if let Some(bar) = bars.get_mut(index) {
            bar.0 += 1;
            if ERROR_OUTCOMES.contains(&row.entry.outcome.as_str()) {
                bar.1 += 1;
            }
        }
    }
    let note =
        capped.then(|| format!("the chart counts the newest {MAX_AUDIT_PAGE} calls of the hour"));
    (per, note)
}

/// The servers table, as the page shows it and the live stream sends it.
pub async fn servers_part(state: &DashboardState) -> String {
    let (ready, body) = manifold_server::http::operator::readiness(&state.gateway);
    let (hour, audit_note) = last_hour(state).await;
    let servers = state
        .gateway
        .upstreams()
        .iter()
        .map(|u| {
            let status = u.status();
            let (word, cause) = status.word_and_cause();
            let info = u.peer_info();
            let sandbox = u.sandbox().map_or("-", |s| s.word());
            let counts = hour
                .get(&u.def.name)
                .cloned()
                .unwrap_or_else(|| vec![(0, 0); CHART_BARS]);
            let peak = counts.iter().map(|c| c.0).max().unwrap_or(0).max(1);
            let bars = counts
                .iter()
                .enumerate()
                .map(|(i, (calls, errors))| (i * 6, calls * 20 / peak, errors * 20 / peak))
                .collect();
            ServerRow {
                name: u.def.name.clone(),
                state: word,
                cause: cause.map(str::to_owned).unwrap_or_default(),
                era: info
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |i| format!("{:?}", i.era).to_lowercase()),
                revision: info
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |i| i.revision.as_str().to_owned()),
                sandbox,
                tools: u.lists().tools.len(),
                restarts: u.restarts(),
                uptime: uptime(u.uptime()),
                calls: counts.iter().map(|c| c.0).sum(),
                errors: counts.iter().map(|c| c.1).sum(),
                bars,
            }
        })
        .collect();
    let part = ServersPart {
        ready,
        readiness: serde_json::to_string_pretty(&body).unwrap_or_default(),
        servers,
        audit_note,
    };
    part.render()
        .unwrap_or_else(|e| format!("the servers could not be shown: {e}"))
}

/// `GET /ui/`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    let part = servers_part(&state).await;
    let chrome = Chrome::new(&operator, "Overview", "overview");
    page::render(StatusCode::OK, &OverviewPage { chrome, part })
}

/// `GET /ui/live/servers`: the servers table again whenever it changes.
pub async fn live(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    let for_render = Arc::clone(&state);
    super::live::changes(state, operator, move || {
        let state = Arc::clone(&for_render);
        async move { servers_part(&state).await }
    })
    .into_response()
}
