//! API keys: every key (never a secret), a new key shown once, and revocation, which also ends
//! at once every dashboard session the key opened (other replicas' sessions end at their next
//! request, which checks the store).

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::page::{self, Chrome, after_action};
use super::signin::{Flash, Operator};
use super::state::DashboardState;

pub struct KeyRow {
    pub name: String,
    pub id: String,
    pub scopes: String,
    pub groups: String,
    pub created: String,
    pub state: &'static str,
}

#[derive(Template)]
#[template(path = "dashboard/keys.html")]
struct KeysPage {
    chrome: Chrome,
    keys: Vec<KeyRow>,
    new_key: Option<(String, String)>,
    api_keys_on: bool,
}

async fn render(
    state: &DashboardState,
    operator: &Operator,
    new_key: Option<(String, String)>,
) -> Response {
    let mut chrome = Chrome::new(operator, "Keys", "keys");
    let keys = match state.keys.list().await {
        Ok(keys) => keys
            .into_iter()
            .rev()
            .map(|k| KeyRow {
                state: if k.is_active() { "active" } else { "revoked" },
                name: k.name,
                id: k.id,
                scopes: k.scopes.join(", "),
                groups: k.groups.join(", "),
                created: manifold_store::timestamps::utc_rfc3339(k.created),
            })
            .collect(),
        Err(e) => {
            chrome.error = Some(crate::keys::store_error(e).message);
            Vec::new()
        }
    };
    page::render(
        StatusCode::OK,
        &KeysPage {
            chrome,
            keys,
            new_key,
            api_keys_on: state.running.get().auth.api_keys,
        },
    )
}

/// `GET /ui/keys`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    render(&state, &operator, None).await
}

#[derive(Deserialize)]
pub struct NewKeyForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    scopes: String,
    #[serde(default)]
    groups: String,
}

fn list_of(text: &str) -> Vec<String> {
    text.split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `POST /ui/keys`: makes a key and shows it, this once.
pub async fn create(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Form(form): Form<NewKeyForm>,
) -> Response {
    let name = form.name.trim();
    match state
        .keys
        .create(name, &list_of(&form.scopes), &list_of(&form.groups))
        .await
    {
        Ok(new) => {
            tracing::info!(operator = %operator.name, key = %new.record.name, id = %new.record.id, "API key created from the dashboard");
            render(&state, &operator, Some((new.record.name, new.key))).await
        }
        Err(e) => {
            after_action(
                &state,
                &operator,
                "/ui/keys",
                Flash::Failed(format!(
                    "no key was made: {}",
                    crate::keys::store_error(e).message
                )),
            )
            .await
        }
    }
}

/// `POST /ui/keys/NAME/revoke`.
pub async fn revoke(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Path(name): Path<String>,
) -> Response {
    let flash = match state.keys.revoke(&name).await {
        Ok(revoked) => {
            let ids: Vec<String> = revoked.iter().map(|k| k.id.clone()).collect();
            state.signins.close_for_keys(&ids).await;
            tracing::info!(operator = %operator.name, key = %name, "API key revoked from the dashboard");
            Flash::Done(format!(
                "revoked {} key(s) named {name} ({}); gateways refuse them from the next request on",
                ids.len(),
                ids.join(", ")
            ))
        }
        Err(e) => Flash::Failed(format!(
            "nothing was revoked: {}",
            crate::keys::store_error(e).message
        )),
    };
    after_action(&state, &operator, "/ui/keys", flash).await
}
