//! The dashboard's requests through the gateway (the catalog's lists, the playground's calls),
//! made on the operator's or a chosen identity's behalf by manifold-server's `in_process`, so they
//! take the very pipeline an MCP client's request takes.

use std::sync::Arc;

use manifold_gateway::Caller;
use manifold_server::in_process::{self, OnBehalf};
use serde_json::Value;

use super::signin::Operator;
use super::state::DashboardState;

/// What the client of a dashboard request declares (audit rows name it).
const CLIENT_INFO: &str = r#"{"name":"manifold-dashboard","version":"1"}"#;

pub use in_process::Answered;

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

fn on_behalf(caller: Option<Arc<Caller>>) -> OnBehalf {
    OnBehalf {
        caller,
        toolset: None,
        client_info: CLIENT_INFO,
    }
}

/// Puts `method` with `params` to the gateway as `caller`.
pub async fn request(
    state: &DashboardState,
    caller: Option<Arc<Caller>>,
    method: &str,
    params: &Value,
) -> Answered {
    in_process::request(&state.gateway, &on_behalf(caller), method, params).await
}

/// Every item of a paginated list as `caller` sees it, or why it could not be read.
pub async fn list_all(
    state: &DashboardState,
    caller: Option<Arc<Caller>>,
    method: &str,
    member: &str,
) -> Result<Vec<Value>, String> {
    in_process::list_all(&state.gateway, &on_behalf(caller), method, member)
        .await
        .map_err(|e| e.message)
}
