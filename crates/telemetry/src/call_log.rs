//! One log line per tool call: the record operators search when a client reports a failed call
//! by the call id it found in the result's `_meta`.
//!
//! The line is an `INFO` event with target [`CALL_TARGET`], so it can be kept or dropped on its
//! own (`RUST_LOG=manifold::call=info`). Nothing of it is computed when that target is off.

use std::time::Duration;

use crate::labels::CallOutcome;
use crate::redact::{self, Redactor};

/// The `tracing` target of call lines.
pub const CALL_TARGET: &str = "manifold::call";
/// The `_meta` key of the call id on every tool result.
pub const CALL_ID_META: &str = "io.manifold/callId";
/// The `caller` of a call that presented no credentials (authentication off).
pub const ANONYMOUS_CALLER: &str = "anonymous";

/// How much of a call's arguments its line shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArgumentLogging {
    /// Argument names, every value replaced by `<redacted>`.
    #[default]
    Redacted,
    /// No `arguments` field at all.
    None,
    /// The arguments as sent (configured secrets still cut out, capped in length). For
    /// debugging only: values reach the log collector.
    Full,
}

/// What call lines may contain.
#[derive(Debug, Clone, Default)]
pub struct CallLogPolicy {
    pub arguments: ArgumentLogging,
    /// Cuts configured secrets out of error text and logged arguments.
    pub redactor: Redactor,
}

/// One finished (or cancelled) tool call.
#[derive(Debug, Clone)]
pub struct CallRecord<'a> {
    pub call_id: &'a str,
    /// Who called: the API key's name or the token's subject, [`ANONYMOUS_CALLER`] without
    /// authentication. Never the credential itself.
    pub caller: &'a str,
    /// The caller's groups (logged comma-separated, `-` when none).
    pub groups: &'a [String],
    /// The legacy session's redacted tag ([`redact::session_tag`] of its id), when there is one;
    /// the id itself is never logged.
    pub session_tag: Option<&'a str>,
    pub upstream: &'a str,
    /// The tool's name at its upstream.
    pub tool: &'a str,
    pub duration: Duration,
    pub outcome: CallOutcome,
    /// Attempts beyond the first (idempotent calls retried after an upstream failure).
    pub retries: u32,
    /// Why it failed, when Manifold knows (its own words, never the tool's output).
    pub error: Option<&'a str>,
    /// JSON-RPC error code, for an error response.
    pub error_code: Option<i64>,
    /// The raw `arguments` JSON.
    pub arguments: Option<&'a str>,
    /// The trace the call belongs to (32 hex digits).
    pub trace_id: Option<&'a str>,
}

impl CallLogPolicy {
    /// Whether call lines are wanted at all (so callers can skip building a record).
    pub fn enabled(&self) -> bool {
        tracing::enabled!(target: CALL_TARGET, tracing::Level::INFO)
    }

    /// The `arguments` field for a record, per policy.
    pub fn arguments_field(&self, raw: Option<&str>) -> Option<String> {
        let raw = raw?;
        match self.arguments {
            ArgumentLogging::None => None,
            ArgumentLogging::Redacted => Some(redact::argument_names(raw)),
            ArgumentLogging::Full => Some(
                redact::capped(&self.redactor.scrub(raw), redact::MAX_LOGGED_ARGUMENTS)
                    .into_owned(),
            ),
        }
    }

    /// Writes the line for a call.
    pub fn emit(&self, record: &CallRecord<'_>) {
        if !self.enabled() {
            return;
        }
        let error = record.error.map(|e| {
            redact::capped(&self.redactor.scrub(e), redact::MAX_LOGGED_ERROR).into_owned()
        });
        let arguments = self.arguments_field(record.arguments);
        let duration_ms = (record.duration.as_secs_f64() * 1_000_000.0).round() / 1000.0;
        let groups = if record.groups.is_empty() {
            "-".to_owned()
        } else {
            record.groups.join(",")
        };
        tracing::info!(
            target: CALL_TARGET,
            call_id = record.call_id,
            caller = record.caller,
            groups = groups.as_str(),
            session = record.session_tag.unwrap_or("-"),
            upstream = record.upstream,
            tool = record.tool,
            duration_ms,
            outcome = record.outcome.as_str(),
            retries = record.retries,
            error = error.as_deref(),
            error_code = record.error_code,
            arguments = arguments.as_deref(),
            trace_id = record.trace_id,
            "tool call"
        );
    }
}

#[cfg(test)]
mod tests;
