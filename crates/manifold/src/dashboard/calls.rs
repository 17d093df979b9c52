//! Live calls: the audit trail as it is written, newest first, filtered by caller, server, tool
//! and outcome; new rows arrive over SSE. Read from the store, so a replica's page shows the
//! calls every replica served.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use manifold_store::{AuditFilter, AuditRow, MAX_AUDIT_PAGE};
use serde::Deserialize;
use serde_json::Value;

use super::page::{self, Chrome, shown_ms};
use super::signin::Operator;
use super::state::DashboardState;

/// Rows the page opens with.
pub const FIRST_ROWS: u32 = 100;

/// The filters of the call pages (live calls and audit).
#[derive(Deserialize, Default, Clone)]
pub struct Filters {
    #[serde(default)]
    pub caller: String,
    #[serde(default)]
    pub server: String,
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub outcome: String,
    #[serde(default)]
    pub since: String,
    #[serde(default)]
    pub until: String,
}

impl Filters {
    /// The store's filter; a malformed time is an error naming the field.
    pub fn to_filter(&self) -> Result<AuditFilter, String> {
        let given = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
        let time = |name: &str, s: &str| -> Result<Option<i64>, String> {
            match given(s) {
                None => Ok(None),
                Some(t) => manifold_store::timestamps::parse_rfc3339_ms(&t)
                    .map(Some)
                    .ok_or_else(|| {
                        format!("{name}: {t:?} is not a time such as 2026-12-03T14:00:00Z")
                    }),
            }
        };
        Ok(AuditFilter {
            principal: given(&self.caller),
            server: given(&self.server),
            target: given(&self.tool),
            outcome: given(&self.outcome),
            since_ms: time("since", &self.since)?,
            until_ms: time("until", &self.until)?,
            before_seq: None,
        })
    }

    /// The filters as a query string, for links and streams.
    pub fn query(&self) -> String {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("caller", &self.caller)
            .append_pair("server", &self.server)
            .append_pair("tool", &self.tool)
            .append_pair("outcome", &self.outcome)
            .append_pair("since", &self.since)
            .append_pair("until", &self.until)
            .finish()
    }

    fn admits(&self, row: &AuditRow) -> bool {
        let ok = |want: &str, have: &str| want.trim().is_empty() || want.trim() == have;
        ok(&self.caller, &row.entry.principal)
            && ok(&self.server, &row.entry.server)
            && ok(&self.tool, &row.entry.target)
            && ok(&self.outcome, &row.entry.outcome)
    }
}

/// One call as the tables show it.
pub struct CallRow {
    pub seq: i64,
    pub at: String,
    pub caller: String,
    pub server: String,
    pub tool: String,
    pub outcome: String,
    pub duration: String,
}

impl CallRow {
    pub fn of(row: &AuditRow) -> CallRow {
        let record = serde_json::from_str::<Value>(&row.entry.record_json).unwrap_or(Value::Null);
        CallRow {
            seq: row.seq,
            at: shown_ms(row.entry.at_ms),
            caller: row.entry.principal.clone(),
            server: row.entry.server.clone(),
            tool: row.entry.target.clone(),
            outcome: row.entry.outcome.clone(),
            duration: record
                .get("duration_us")
                .and_then(Value::as_u64)
                .map_or_else(|| "-".to_owned(), crate::audit_commands::shown_duration),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/call_rows.html")]
pub struct CallRows<'a> {
    pub rows: &'a [CallRow],
}

#[derive(Template)]
#[template(path = "dashboard/calls.html")]
struct CallsPage {
    chrome: Chrome,
    filters: Filters,
    query: String,
    rows: String,
    note: Option<String>,
}

pub fn rows_html(rows: &[CallRow]) -> String {
    CallRows { rows }.render().unwrap_or_default()
}

/// `GET /ui/calls`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Query(filters): Query<Filters>,
) -> Response {
    let mut note = None;
    let rows = match filters.to_filter() {
        Ok(filter) => match state.store.audit().search(&filter, FIRST_ROWS).await {
            Ok(rows) => rows.iter().map(CallRow::of).collect(),
            Err(e) => {
                note = Some(format!("the audit trail could not be read: {e}"));
                Vec::new()
            }
        },
        Err(e) => {
            note = Some(e);
            Vec::new()
        }
    };
    let running = state.running.get();
    if !running.audit.enabled {
        note = Some("the audit trail is off ([audit] enabled = false), so no calls are recorded here; turn it on to see them".to_owned());
    }
    let chrome = Chrome::new(&operator, "Live calls", "calls");
    page::render(
        StatusCode::OK,
        &CallsPage {
            chrome,
            query: filters.query(),
            filters,
            rows: rows_html(&rows),
            note,
        },
    )
}

/// `GET /ui/live/calls`: rows written since the stream began, matching the filters.
pub async fn live(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Query(filters): Query<Filters>,
) -> Response {
    let start = match state.store.audit().head().await {
        Ok(head) => head.map_or(0, |(seq, _)| seq),
        Err(e) => {
            return page::refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the audit trail could not be read: {e}"),
            );
        }
    };
    let after = Arc::new(std::sync::atomic::AtomicI64::new(start));
    let store = Arc::clone(&state.store);
    super::live::stream(state, operator, move || {
        let after = Arc::clone(&after);
        let store = Arc::clone(&store);
        let filters = filters.clone();
        async move {
            let from = after.load(std::sync::atomic::Ordering::Relaxed);
            let rows = store.audit().page(from, MAX_AUDIT_PAGE).await.ok()?;
            let last = rows.last()?.seq;
            after.store(last, std::sync::atomic::Ordering::Relaxed);
            // Newest first, as the table reads.
            let shown: Vec<CallRow> = rows
                .iter()
                .rev()
                .filter(|r| filters.admits(r))
                .map(CallRow::of)
                .collect();
            (!shown.is_empty()).then(|| rows_html(&shown))
        }
    })
    .into_response()
}
