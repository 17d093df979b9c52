//! Approvals: the calls an `ask` rule holds, with the exact arguments, the caller and the window
//! left; approve or deny each as the signed-in operator (the same checks as `manifold approvals
//! approve|deny`: only a rule's approvers may answer, and only a pending question); the history.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use manifold_gateway::approval::ledger::{ApprovalLedger, LedgerEntry, PENDING};
use serde::Deserialize;

use super::page::{self, Chrome, after_action, shown_ms};
use super::signin::{Flash, Operator};
use super::state::DashboardState;
use crate::approval_store::StoreApprovals;
use crate::approvals_commands::{
    ALL_ROWS_SHOWN, Answer, PENDING_ROWS_SHOWN, answer_approval, caller_of, expires_in,
    how_it_ended, span,
};
use manifold_store::timestamps::now_ms;

/// One question as the tables show it.
pub struct Question {
    pub id: String,
    pub state: String,
    pub caller: String,
    pub server: String,
    pub tool: String,
    pub arguments: String,
    pub approvers: String,
    pub rule: String,
    pub channel: String,
    pub asked: String,
    pub window: String,
    pub ended: String,
}

fn question(row: &LedgerEntry, now: i64) -> Question {
    Question {
        id: row.id.clone(),
        state: row.state.clone(),
        caller: caller_of(row).to_owned(),
        server: row.server.clone(),
        tool: row.tool.clone(),
        arguments: row.arguments_json.as_deref().map_or_else(
            || {
                format!(
                    "(not kept: larger than the bound; sha256:{})",
                    row.arguments_sha256
                )
            },
            super::catalog::pretty,
        ),
        approvers: row.approvers.join(", "),
        rule: row.rule.clone(),
        channel: row.channel.clone(),
        asked: format!("{} ago", span(now - row.created_at_ms)),
        window: expires_in(row, now),
        ended: how_it_ended(row),
    }
}

#[derive(Template)]
#[template(path = "dashboard/pending.html")]
struct PendingPart {
    pending: Vec<Question>,
    csrf: String,
    note: Option<String>,
}

#[derive(Template)]
#[template(path = "dashboard/approvals.html")]
struct ApprovalsPage {
    chrome: Chrome,
    part: String,
    history: Vec<Question>,
    at: String,
}

async fn pending_part(state: &DashboardState, csrf: &str) -> String {
    let ledger = StoreApprovals::new(Arc::clone(&state.store));
    let now = now_ms();
    let (pending, note) = match ledger.list(true, PENDING_ROWS_SHOWN).await {
        Ok(rows) => (rows.iter().map(|r| question(r, now)).collect(), None),
        Err(e) => (
            Vec::new(),
            Some(format!("the approvals could not be read: {e}")),
        ),
    };
    PendingPart {
        pending,
        csrf: csrf.to_owned(),
        note,
    }
    .render()
    .unwrap_or_default()
}

/// `GET /ui/approvals`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    let part = pending_part(&state, &operator.csrf).await;
    let ledger = StoreApprovals::new(Arc::clone(&state.store));
    let now = now_ms();
    let history = ledger
        .list(false, ALL_ROWS_SHOWN)
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.state != PENDING)
        .map(|r| question(r, now))
        .collect();
    let chrome = Chrome::new(&operator, "Approvals", "approvals");
    page::render(
        StatusCode::OK,
        &ApprovalsPage {
            chrome,
            part,
            history,
            at: shown_ms(now),
        },
    )
}

/// `GET /ui/live/approvals`: the pending list again whenever it changes.
pub async fn live(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    let for_render = Arc::clone(&state);
    let csrf = operator.csrf.clone();
    super::live::changes(state, operator, move || {
        let state = Arc::clone(&for_render);
        let csrf = csrf.clone();
        async move { pending_part(&state, &csrf).await }
    })
    .into_response()
}

#[derive(Template)]
#[template(path = "dashboard/approval.html")]
struct OnePage {
    chrome: Chrome,
    part: String,
    question: Question,
    pending: bool,
}

/// `GET /ui/approvals/ID`: one question, as a held call's link and URL-mode elicitation open it.
pub async fn one(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(id): Path<String>,
) -> Response {
    let ledger = StoreApprovals::new(Arc::clone(&state.store));
    let row = match ledger.get(&id).await {
        Ok(Some(row)) => row,
        Ok(None) => {
            return page::refused(
                StatusCode::NOT_FOUND,
                &format!("there is no approval {id:?}; the approvals page lists the newest ones"),
            );
        }
        Err(e) => {
            return page::refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the approvals could not be read: {e}"),
            );
        }
    };
    let now = now_ms();
    let pending = row.state == PENDING;
    let part = if pending {
        PendingPart {
            pending: vec![question(&row, now)],
            csrf: operator.csrf.clone(),
            note: None,
        }
        .render()
        .unwrap_or_default()
    } else {
        String::new()
    };
    let chrome = Chrome::new(&operator, &format!("Approval {id}"), "approvals");
    page::render(
        StatusCode::OK,
        &OnePage {
            chrome,
            part,
            question: question(&row, now),
            pending,
        },
    )
}

#[derive(Deserialize, Default)]
pub struct Reason {
    #[serde(default)]
    reason: String,
}

async fn answer(
    state: &DashboardState,
    operator: &Operator,
    id: &str,
    answer: Answer<'_>,
) -> Response {
    let ledger = StoreApprovals::new(Arc::clone(&state.store));
    let flash = match answer_approval(&state.store, &ledger, id, &operator.name, answer, now_ms())
        .await
    {
        Ok(done) => {
            tracing::info!(operator = %operator.name, approval = %id, "{done} (from the dashboard)");
            Flash::Done(done)
        }
        Err(failure) => Flash::Failed(failure.into_error().message),
    };
    after_action(state, operator, "/ui/approvals", flash).await
}

/// `POST /ui/approvals/ID/approve`.
pub async fn approve(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(id): Path<String>,
) -> Response {
    answer(&state, &operator, &id, Answer::Approve).await
}

/// `POST /ui/approvals/ID/deny`, with an optional reason.
pub async fn deny(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(id): Path<String>,
    Form(reason): Form<Reason>,
) -> Response {
    let given = reason.reason.trim();
    let why = (!given.is_empty()).then_some(given);
    answer(&state, &operator, &id, Answer::Deny(why)).await
}
