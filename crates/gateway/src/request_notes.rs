//! One request's notes for its audit row. They ride in the request's context (`ctx.audit`), so
//! the stages that know something the row needs (policy's refusal, the resolved server, the
//! approval's decision, how a tool call ended) say it through a value the signatures show, and
//! the recorder (`audit.rs`) reads it once the answer is ready.

use std::sync::{Mutex, PoisonError};

use manifold_telemetry::audit::AuditOutcome;
use manifold_telemetry::{CallOutcome, call_id};

/// What the parts of the path tell the row while a request runs.
#[derive(Debug, Default)]
pub(crate) struct AuditNotes {
    pub(crate) call_id: String,
    pub(crate) refusal: Option<AuditOutcome>,
    pub(crate) server: Option<String>,
    pub(crate) target: Option<String>,
    pub(crate) tool_call: Option<ToolCallNote>,
    /// What the approval stage decided (`approval/`), in words with the approval's id.
    pub(crate) approval: Option<String>,
}

#[derive(Debug)]
pub(crate) struct ToolCallNote {
    pub(crate) outcome: CallOutcome,
    pub(crate) retries: u32,
    pub(crate) error: Option<String>,
}

/// One request's notes for its audit row, carried in its request context (`ctx.audit`) so
/// that any stage can add to them and the signatures show it. Empty until the recorder starts
/// them ([`open_row`](crate::audit::open_row)): a request that gets no row keeps nothing. The edge builds it with
/// `Default`; a context is never shared by two requests, so neither are its notes, and a clone
/// of a context (made only to build another request's) starts with none.
#[derive(Debug, Default)]
pub struct RequestNotes(Mutex<Option<AuditNotes>>);

impl Clone for RequestNotes {
    fn clone(&self) -> RequestNotes {
        RequestNotes::default()
    }
}

impl RequestNotes {
    fn change(&self, change: impl FnOnce(&mut AuditNotes)) {
        let mut notes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notes) = notes.as_mut() {
            change(notes);
        }
    }

    pub(crate) fn start(&self, call_id: String) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(AuditNotes {
            call_id,
            ..AuditNotes::default()
        });
    }

    pub(crate) fn take(&self) -> AuditNotes {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default()
    }

    /// Policy refused the request (a rule) or rate limited it.
    pub(crate) fn refusal(&self, outcome: AuditOutcome) {
        self.change(|n| n.refusal = Some(outcome));
    }

    /// What the approval stage asked and decided, for the row.
    pub(crate) fn approval(&self, text: &str) {
        self.change(|n| n.approval = Some(text.to_owned()));
    }

    /// The server (and the name or URI there) a request resolved to.
    pub(crate) fn target(&self, server: &str, target: &str) {
        self.change(|n| {
            n.server = Some(server.to_owned());
            n.target = Some(target.to_owned());
        });
    }

    /// How a tool call ended, from its call record, and where it went.
    pub(crate) fn tool_call(
        &self,
        upstream: &str,
        tool: &str,
        outcome: CallOutcome,
        retries: u32,
        error: Option<&str>,
    ) {
        self.change(|n| {
            n.server = Some(upstream.to_owned());
            n.target = Some(tool.to_owned());
            n.tool_call = Some(ToolCallNote {
                outcome,
                retries,
                error: error.map(str::to_owned),
            });
        });
    }

    /// The call id of the request being audited, so that the result's `_meta`, the log line
    /// and the row agree; a fresh one for a request that gets no row.
    pub(crate) fn call_id(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|n| n.call_id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(call_id::next_call_id)
    }
}
