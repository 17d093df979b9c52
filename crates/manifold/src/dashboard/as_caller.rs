//! Requests the dashboard puts to the gateway on someone's behalf (the catalog's lists, the
//! playground's calls): in process, through the very pipeline an MCP client's request takes (the
//! caller's rules, approvals, rate limits, the audit trail), as a client of the newest revision
//! that asked for every log line and progress notification.

use std::sync::{Arc, Mutex};

use manifold_gateway::{Caller, ClientView, RequestContext};
use manifold_server::session::{ModernPeer, Outlet, run_call};
use manifold_wire::log_level::LogLevel;
use manifold_wire::{Id, Message, Revision};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::signin::Operator;
use super::state::DashboardState;

/// Pages of a list read before the catalog stops (a gateway pages at its own size).
pub const MAX_LIST_PAGES: usize = 100;

/// What the client of an in-process request declares.
const CLIENT_INFO: &str = r#"{"name":"manifold-dashboard","version":"1"}"#;

/// Collects the notifications of one request.
#[derive(Default)]
struct Collected(Mutex<Vec<Message>>);

impl Outlet for Collected {
    fn send(&self, message: &Message) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(message.clone());
        true
    }
}

/// The signed-in operator as the gateway's rules see them (`None` with authentication off: no
/// rule names a caller then).
pub fn caller_of_operator(operator: &Operator) -> Option<Arc<Caller>> {
    (!operator.local).then(|| {
        Arc::new(Caller {
            name: operator.name.clone(),
            groups: operator.groups.clone(),
            scopes: operator.scopes.clone(),
            bearer: None,
        })
    })
}

/// One request's answer: its result, or the error's message; and what was sent meanwhile.
pub struct Answered {
    pub result: Result<Value, String>,
    pub notifications: Vec<Message>,
}

/// Puts `method` with `params` to the gateway as `caller`.
pub async fn request(
    state: &DashboardState,
    caller: Option<Arc<Caller>>,
    method: &str,
    params: &Value,
) -> Answered {
    let collected = Arc::new(Collected::default());
    let ctx = RequestContext {
        client: ClientView {
            revision: Revision::LATEST,
            capabilities: "{}".to_owned(),
            info: Some(CLIENT_INFO.to_owned()),
        },
        peer: Arc::new(ModernPeer {
            outlet: Arc::clone(&collected) as Arc<dyn Outlet>,
            log_level: Some(LogLevel::Debug),
        }),
        session: None,
        caller,
        toolset: None,
        trace: None,
    };
    let params = params.to_string();
    let message = Message::request(&Id::Str(Arc::from("dashboard")), method, Some(&params));
    // The page's request dropping (the operator left) drops this future and the call with it.
    let never = CancellationToken::new();
    let answer = run_call(&state.gateway, ctx, &message, &never).await;
    let notifications = std::mem::take(
        &mut *collected
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let result = match answer {
        None => Err("the request was cancelled".to_owned()),
        Some(answer) => match answer.result_raw() {
            Some(raw) => {
                serde_json::from_str(raw).map_err(|e| format!("the answer is not JSON: {e}"))
            }
            None => Err(answer.error_object().map_or_else(
                || "the gateway answered without a result".to_owned(),
                |e| e.message.to_string(),
            )),
        },
    };
    Answered {
        result,
        notifications,
    }
}

/// Every item of a paginated list (`tools/list` and the like) as `caller` sees it.
pub async fn list_all(
    state: &DashboardState,
    caller: Option<Arc<Caller>>,
    method: &str,
    member: &str,
) -> Result<Vec<Value>, String> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = match &cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        };
        let page = request(state, caller.clone(), method, &params)
            .await
            .result?;
        if let Some(Value::Array(more)) = page.get(member) {
            items.extend(more.iter().cloned());
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(items)
}
