//! Requests made inside the process on someone's behalf (the dashboard's lists and playground,
//! the `/rpc` dialect): through the very pipeline an MCP client's request takes (the caller's
//! rules, tool set, approvals, rate limits, the audit trail), as a client of the newest revision
//! that asked for every log line and progress notification, which are collected and handed back.

use std::sync::{Arc, Mutex};

use manifold_gateway::{Caller, ClientView, Gateway, RequestContext};
use manifold_wire::log_level::LogLevel;
use manifold_wire::{Id, Message, Revision};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::session::{ModernPeer, Outlet, run_call};

/// Pages of a list read before [`list_all`] stops (a gateway pages at its own size).
pub const MAX_LIST_PAGES: usize = 100;

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

/// Who a request is made for.
#[derive(Clone, Default)]
pub struct OnBehalf {
    /// `None`: authentication is off (no rule names a caller then).
    pub caller: Option<Arc<Caller>>,
    pub toolset: Option<Arc<str>>,
    /// Raw JSON of the client's name and version, as audit and logs show it.
    pub client_info: &'static str,
}

/// One request's answer: its result, or the error; and what was sent meanwhile.
pub struct Answered {
    pub result: Result<Value, manifold_wire::ErrorObject>,
    pub notifications: Vec<Message>,
}

/// Puts `method` with `params` to the gateway on `who`'s behalf. Dropping the future (the page's
/// or the `/rpc` caller's request went away, a timeout) drops the call with it.
pub async fn request(gateway: &Gateway, who: &OnBehalf, method: &str, params: &Value) -> Answered {
    let collected = Arc::new(Collected::default());
    let ctx = RequestContext {
        client: ClientView {
            revision: Revision::LATEST,
            capabilities: "{}".to_owned(),
            info: Some(manifold_gateway::ClientInfo::new(who.client_info)),
        },
        peer: Arc::new(ModernPeer {
            outlet: Arc::clone(&collected) as Arc<dyn Outlet>,
            log_level: Some(LogLevel::Debug),
        }),
        session: None,
        caller: who.caller.clone(),
        toolset: who.toolset.clone(),
        trace: None,
        audit: Default::default(),
    };
    let params = params.to_string();
    let message = Message::request(&Id::Str(Arc::from("in-process")), method, Some(&params));
    let never = CancellationToken::new();
    let answer = run_call(gateway, ctx, &message, &never).await;
    let notifications = std::mem::take(
        &mut *collected
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let result = match answer {
        None => Err(manifold_wire::ErrorObject::new(
            manifold_wire::ErrorCode::RequestCancelled,
            "the request was cancelled",
        )),
        Some(answer) => match answer.result_raw() {
            Some(raw) => serde_json::from_str(raw).map_err(|e| {
                manifold_wire::ErrorObject::new(
                    manifold_wire::ErrorCode::InternalError,
                    format!("the answer is not JSON: {e}"),
                )
            }),
            None => Err(answer.error_object().unwrap_or_else(|| {
                manifold_wire::ErrorObject::new(
                    manifold_wire::ErrorCode::InternalError,
                    "the gateway answered without a result",
                )
            })),
        },
    };
    Answered {
        result,
        notifications,
    }
}

/// The server a listed tool comes from, as callers outside MCP are told it: `manifold` for
/// Manifold's own tools.
pub fn server_of_tool(catalog: &manifold_gateway::catalog::build::Catalog, tool: &Value) -> String {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    catalog
        .tool_entry(name)
        .map_or_else(|| "manifold".to_owned(), |e| e.server.to_string())
}

/// Every item of a paginated list (`tools/list` and the like) as `who` sees it.
pub async fn list_all(
    gateway: &Gateway,
    who: &OnBehalf,
    method: &str,
    member: &str,
) -> Result<Vec<Value>, manifold_wire::ErrorObject> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = match &cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        };
        let page = request(gateway, who, method, &params).await.result?;
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
