//! `[approvals] webhook`: each out-of-band approval question is POSTed as JSON to a URL, so a
//! chat tool can show it to the people who may answer. The body names the call (id, caller,
//! server, tool, the arguments' digest, who may answer, when it expires) and how to answer; never
//! the arguments themselves, which may be secret (`manifold approvals show` prints them to an
//! operator).

use std::time::Duration;

use futures::future::BoxFuture;
use manifold_gateway::approval::ApprovalAnnouncer;
use manifold_gateway::approval::ledger::LedgerEntry;

/// How long one webhook POST may take; a slow chat tool never delays the held call.
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Posts each question to one URL.
pub struct WebhookAnnouncer {
    url: String,
    client: reqwest::Client,
}

impl WebhookAnnouncer {
    pub fn new(url: &str) -> WebhookAnnouncer {
        // Another part of the process may have installed a provider already; either way one is set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(WEBHOOK_TIMEOUT)
            .build()
            .unwrap_or_default();
        WebhookAnnouncer {
            url: url.to_owned(),
            client,
        }
    }
}

/// The JSON a webhook receives for one question.
pub fn webhook_body(entry: &LedgerEntry, page: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "type": "approval_requested",
        "id": entry.id,
        "caller": entry.caller,
        "server": entry.server,
        "tool": entry.tool,
        "arguments_sha256": entry.arguments_sha256,
        "definition_sha256": entry.definition_sha256,
        "approvers": entry.approvers,
        "rule": entry.rule,
        "created_at_ms": entry.created_at_ms,
        "expires_at_ms": entry.expires_at_ms,
        "approve": format!("manifold approvals approve {}", entry.id),
        "deny": format!("manifold approvals deny {}", entry.id),
        "show": format!("manifold approvals show {}", entry.id),
        "link": page,
    })
}

impl ApprovalAnnouncer for WebhookAnnouncer {
    fn announce(&self, entry: LedgerEntry, page: Option<String>) -> BoxFuture<'static, ()> {
        let request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(webhook_body(&entry, page.as_deref()).to_string());
        let url = self.url.clone();
        Box::pin(async move {
            match request.send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => tracing::warn!(
                    approval = %entry.id,
                    status = r.status().as_u16(),
                    webhook = %url,
                    "the approvals webhook refused the question; it can still be answered with manifold approvals"
                ),
                Err(e) => tracing::warn!(
                    approval = %entry.id,
                    error = %e,
                    webhook = %url,
                    "the approvals webhook could not be reached; the question can still be answered with manifold approvals"
                ),
            }
        })
    }
}
