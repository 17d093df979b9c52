//! The audit trail: search it, open one call's record, export what a search found (JSON lines,
//! the form `manifold audit export` writes and verifies offline), and verify the hash chain.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use manifold_store::MAX_AUDIT_PAGE;

use super::calls::{CallRow, Filters, rows_html};
use super::page::{self, Chrome, after_action};
use super::signin::{Flash, Operator};
use super::state::DashboardState;

/// Rows a search shows.
pub const SEARCH_ROWS: u32 = 200;

#[derive(Template)]
#[template(path = "dashboard/audit.html")]
struct AuditPage {
    chrome: Chrome,
    filters: Filters,
    query: String,
    rows: String,
    count: usize,
    note: Option<String>,
    /// What the verification just done found (after `POST /ui/audit/verify`).
    verify_result: Option<(bool, String)>,
}

#[derive(serde::Deserialize, Default)]
pub struct Verified {
    #[serde(default)]
    verified: Option<String>,
}

/// `GET /ui/audit`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Query(filters): Query<Filters>,
    Query(verified): Query<Verified>,
) -> Response {
    let mut note = None;
    let rows: Vec<CallRow> = match filters.to_filter() {
        Ok(filter) => match state.store.audit().search(&filter, SEARCH_ROWS).await {
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
    let mut chrome = Chrome::new(&operator, "Audit", "audit");
    let verify_result = if verified.verified.is_some() {
        match (chrome.flash.take(), chrome.error.take()) {
            (Some(done), _) => Some((true, done)),
            (None, Some(failed)) => Some((false, failed)),
            (None, None) => None,
        }
    } else {
        None
    };
    page::render(
        StatusCode::OK,
        &AuditPage {
            chrome,
            query: filters.query(),
            filters,
            count: rows.len(),
            rows: rows_html(&rows),
            note,
            verify_result,
        },
    )
}

#[derive(Template)]
#[template(path = "dashboard/audit_record.html")]
struct RecordPage {
    chrome: Chrome,
    seq: i64,
    record: String,
    prev_sha256: String,
    row_sha256: String,
}

/// `GET /ui/audit/SEQ`.
pub async fn record(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(seq): Path<i64>,
) -> Response {
    let found = state.store.audit().page(seq.saturating_sub(1), 1).await;
    let row = match found {
        Ok(rows) => rows.into_iter().find(|r| r.seq == seq),
        Err(e) => {
            return page::refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the audit trail could not be read: {e}"),
            );
        }
    };
    let Some(row) = row else {
        return page::refused(
            StatusCode::NOT_FOUND,
            &format!(
                "there is no audit row {seq} (it may have been pruned); search the trail for the rows there are"
            ),
        );
    };
    let chrome = Chrome::new(&operator, &format!("Audit row {seq}"), "audit");
    page::render(
        StatusCode::OK,
        &RecordPage {
            chrome,
            seq,
            record: super::catalog::pretty(&crate::audit_commands::record_line(&row)),
            prev_sha256: row.prev_sha256,
            row_sha256: row.row_sha256,
        },
    )
}

/// `GET /ui/audit/export?...`: the rows a search finds, oldest first, as JSON lines.
pub async fn export(
    State(state): State<Arc<DashboardState>>,
    Query(filters): Query<Filters>,
) -> Response {
    let filter = match filters.to_filter() {
        Ok(f) => f,
        Err(e) => return page::refused(StatusCode::BAD_REQUEST, &e),
    };
    match state.store.audit().search(&filter, MAX_AUDIT_PAGE).await {
        Ok(rows) => {
            let mut body = String::new();
            for row in rows.iter().rev() {
                body.push_str(&crate::audit_commands::export_line(row));
                body.push('\n');
            }
            (
                [
                    (header::CONTENT_TYPE, "application/jsonl"),
                    (
                        header::CONTENT_DISPOSITION,
                        "attachment; filename=\"manifold-audit.jsonl\"",
                    ),
                ],
                body,
            )
                .into_response()
        }
        Err(e) => page::refused(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the audit trail could not be read: {e}"),
        ),
    }
}

/// `POST /ui/audit/verify`: checks every row's hash and link.
pub async fn verify(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    let flash = match state.store.audit().verify().await {
        Ok(report) => {
            let said =
                crate::audit_commands::describe_verify(&report, &state.store.location().shown());
            match &report.first_broken {
                None => Flash::Done(said.trim().replace('\n', "; ")),
                Some((seq, what)) => Flash::Failed(format!(
                    "the audit trail is broken at seq {seq}: {what}; keep the store as it is for the investigation ({})",
                    said.trim().replace('\n', "; ")
                )),
            }
        }
        Err(e) => Flash::Failed(format!("the audit trail could not be read: {e}")),
    };
    after_action(&state, &operator, "/ui/audit?verified=1", flash).await
}
