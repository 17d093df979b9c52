//! The audit trail as the request path sees it: the facts of one finished (or refused) request,
//! and the sink they go to. The sink itself (queue, batches, the store) lives in manifold-audit;
//! the gateway only needs this trait, so it never depends on a database driver.
//!
//! The record's field names are the trail's format: `manifold audit export` prints them and
//! verifiers read them, so they change only with [`AUDIT_RECORD_VERSION`].

use std::fmt;

use futures::future::BoxFuture;

/// The version of the record format, in every record's `v`.
pub const AUDIT_RECORD_VERSION: u64 = 1;

/// How a request ended, as the trail classes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    Ok,
    /// The tool ran and answered `isError: true`.
    ToolError,
    /// A JSON-RPC error answered the request (its code is in `error_code`).
    RpcError,
    /// The upstream could not run it (crashed, unreachable, timed out).
    TransportFailure,
    /// A rule hid or refused the tool, prompt or resource.
    RefusedByPolicy,
    RateLimited,
    /// The client cancelled (or went away) before the answer.
    Cancelled,
    /// The answer asks the client for input (MRTR); the retried call gets its own row.
    InputRequired,
    /// Refused because the audit trail could not be written (`mode = "required"`).
    AuditUnavailable,
    /// Refused at the HTTP edge: no valid credentials (401).
    Unauthenticated,
}

impl AuditOutcome {
    pub const ALL: [AuditOutcome; 10] = [
        AuditOutcome::Ok,
        AuditOutcome::ToolError,
        AuditOutcome::RpcError,
        AuditOutcome::TransportFailure,
        AuditOutcome::RefusedByPolicy,
        AuditOutcome::RateLimited,
        AuditOutcome::Cancelled,
        AuditOutcome::InputRequired,
        AuditOutcome::AuditUnavailable,
        AuditOutcome::Unauthenticated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Ok => "ok",
            AuditOutcome::ToolError => "tool_error",
            AuditOutcome::RpcError => "rpc_error",
            AuditOutcome::TransportFailure => "transport_failure",
            AuditOutcome::RefusedByPolicy => "refused_by_policy",
            AuditOutcome::RateLimited => "rate_limited",
            AuditOutcome::Cancelled => "cancelled",
            AuditOutcome::InputRequired => "input_required",
            AuditOutcome::AuditUnavailable => "audit_unavailable",
            AuditOutcome::Unauthenticated => "unauthenticated",
        }
    }
}

/// Everything the trail records about one request. Owned: it outlives the request on its way
/// to the writer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditFacts {
    /// What an ask rule's approval decided: the approval id, how it was asked, who answered.
    pub approval: Option<String>,
    pub at_ms: i64,
    pub call_id: String,
    /// The API key's name or the token's subject; `anonymous` without authentication.
    pub principal: String,
    pub groups: Vec<String>,
    /// A tag of the legacy session id (never the id itself).
    pub session: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    /// The upstream's configured name; `manifold` for built-in tools, `-` when none resolved.
    pub server: String,
    pub method: String,
    /// The tool's name at its upstream, the URI read, or the prompt's name.
    pub target: String,
    pub outcome: Option<AuditOutcome>,
    pub error_code: Option<i64>,
    /// Manifold's own words for a failure (never the tool's output).
    pub error: Option<String>,
    /// SHA-256 (hex) of the canonical JSON of the arguments (or `params` for other methods).
    pub args_sha256: Option<String>,
    /// SHA-256 (hex) of the result's JSON exactly as Manifold sent it.
    pub result_sha256: Option<String>,
    /// The arguments themselves, redacted, when `[audit] record_arguments = true`.
    pub arguments: Option<String>,
    pub duration_us: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub retries: u32,
    pub trace_id: Option<String>,
}

impl AuditFacts {
    /// The outcome, `cancelled` when none was set (a request dropped before its answer).
    pub fn outcome(&self) -> AuditOutcome {
        self.outcome.unwrap_or(AuditOutcome::Cancelled)
    }

    /// The record as the trail stores and hashes it: one JSON object, keys sorted, absent facts
    /// left out. Written from [`Record`], whose fields are declared in sorted order, straight
    /// into one string (no intermediate map of values: this runs once per call).
    pub fn record_json(&self) -> String {
        let record = Record {
            approval: self.approval.as_deref(),
            args_sha256: self.args_sha256.as_deref(),
            arguments: self.arguments.as_deref(),
            at_ms: self.at_ms,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            call_id: &self.call_id,
            client_name: self.client_name.as_deref(),
            client_version: self.client_version.as_deref(),
            duration_us: self.duration_us,
            error: self.error.as_deref(),
            error_code: self.error_code,
            groups: &self.groups,
            method: &self.method,
            outcome: self.outcome().as_str(),
            principal: &self.principal,
            result_sha256: self.result_sha256.as_deref(),
            retries: self.retries,
            server: &self.server,
            session: self.session.as_deref(),
            target: &self.target,
            trace_id: self.trace_id.as_deref(),
            v: AUDIT_RECORD_VERSION,
        };
        // Sized once for the whole record (keys and digests take about 400 bytes), instead of
        // growing the buffer through several copies as serde writes it.
        let mut out = Vec::with_capacity(RECORD_KEYS_BYTES + self.variable_bytes());
        match serde_json::to_writer(&mut out, &record) {
            Ok(()) => String::from_utf8(out).unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The bytes of the record's free-text facts, before JSON escaping.
    fn variable_bytes(&self) -> usize {
        let texts = [
            self.approval.as_deref(),
            self.args_sha256.as_deref(),
            self.arguments.as_deref(),
            Some(&self.call_id),
            self.client_name.as_deref(),
            self.client_version.as_deref(),
            self.error.as_deref(),
            Some(&self.method),
            Some(&self.principal),
            self.result_sha256.as_deref(),
            Some(&self.server),
            self.session.as_deref(),
            Some(&self.target),
            self.trace_id.as_deref(),
        ];
        let groups: usize = self.groups.iter().map(|g| g.len() + 3).sum();
        texts.iter().flatten().map(|t| t.len()).sum::<usize>() + groups
    }
}

/// Room for a record's keys, punctuation and numbers (every key present, numbers at full width).
const RECORD_KEYS_BYTES: usize = 400;

/// The record's shape. Fields are declared in sorted order, so serde writes the keys sorted;
/// `record_keys_are_written_in_sorted_order` keeps it so.
#[derive(serde::Serialize)]
struct Record<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a str>,
    at_ms: i64,
    bytes_in: u64,
    bytes_out: u64,
    call_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_version: Option<&'a str>,
    duration_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<i64>,
    groups: &'a [String],
    method: &'a str,
    outcome: &'a str,
    principal: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    result_sha256: Option<&'a str>,
    retries: u32,
    server: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
    v: u64,
}

/// Why the trail cannot take a row now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditUnavailable {
    pub reason: String,
}

impl fmt::Display for AuditUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the audit trail cannot be written ({}); with [audit] mode = \"required\" Manifold refuses calls until it can: check the store (manifold check) or switch to mode = \"best_effort\"",
            self.reason
        )
    }
}

/// Resolves once a row is durable (required mode) or at once (best effort).
pub type AuditAck = BoxFuture<'static, Result<(), AuditUnavailable>>;

/// The trail's state, for `manifold_health`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditStatus {
    pub mode: &'static str,
    pub queue_depth: usize,
    pub queue_capacity: usize,
    pub written: u64,
    pub dropped: u64,
    /// Why the last write failed, while writes are failing.
    pub failing: Option<String>,
}

/// What a call gets while its audit row cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuditMode {
    /// Calls keep being served; rows that cannot be written are dropped and counted.
    #[default]
    BestEffort,
    /// A call's answer is released only once its row is durable; new calls are refused while
    /// rows cannot be written.
    Required,
}

impl AuditMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditMode::BestEffort => "best_effort",
            AuditMode::Required => "required",
        }
    }
}

/// Where the request path hands its audit facts.
pub trait AuditSink: Send + Sync + 'static {
    /// Whether a new request may start: in required mode, refused while rows cannot be written.
    fn admit(&self) -> Result<(), AuditUnavailable>;
    /// Queues one row. In required mode the answer must wait for the returned ack.
    fn record(&self, facts: AuditFacts) -> AuditAck;
    /// Whether the answer waits for its row (required mode).
    fn answers_wait(&self) -> bool;
    /// Whether arguments are kept beside their digest.
    fn records_arguments(&self) -> bool;
    fn status(&self) -> AuditStatus;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_record_has_sorted_keys_and_leaves_unknown_facts_out() {
        let facts = AuditFacts {
            at_ms: 5,
            call_id: "c1".to_owned(),
            principal: "alice".to_owned(),
            server: "fs".to_owned(),
            method: "tools/call".to_owned(),
            target: "read".to_owned(),
            outcome: Some(AuditOutcome::ToolError),
            ..AuditFacts::default()
        };
        let record = facts.record_json();
        let parsed: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&record).unwrap();
        let mut at = 0;
        let mut positions = Vec::new();
        for key in parsed.keys() {
            let quoted = format!("\"{key}\":");
            at = record[at..].find(&quoted).unwrap() + at;
            positions.push((key.clone(), at));
        }
        let mut sorted = positions.clone();
        sorted.sort();
        assert_eq!(positions, sorted, "keys appear in sorted order: {record}");
        assert_eq!(parsed["outcome"], "tool_error");
        assert_eq!(parsed["v"], 1);
        assert!(!parsed.contains_key("error") && !parsed.contains_key("session"));
        assert!(record.starts_with("{\"at_ms\":5,"), "{record}");
    }

    #[test]
    fn record_keys_are_written_in_sorted_order() {
        let all = AuditFacts {
            approval: Some("apr_1 approved by b via elicitation".to_owned()),
            at_ms: 1,
            call_id: "c".to_owned(),
            principal: "p".to_owned(),
            groups: vec!["g".to_owned()],
            session: Some("s".to_owned()),
            client_name: Some("n".to_owned()),
            client_version: Some("1".to_owned()),
            server: "srv".to_owned(),
            method: "m".to_owned(),
            target: "t".to_owned(),
            outcome: Some(AuditOutcome::Ok),
            error_code: Some(-1),
            error: Some("e".to_owned()),
            args_sha256: Some("a".to_owned()),
            result_sha256: Some("r".to_owned()),
            arguments: Some("{}".to_owned()),
            duration_us: 2,
            bytes_in: 3,
            bytes_out: 4,
            retries: 5,
            trace_id: Some("tr".to_owned()),
        };
        let record = all.record_json();
        let parsed: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&record).unwrap();
        assert_eq!(parsed.len(), 23, "every fact is written: {record}");
        let mut at = 0;
        for key in parsed.keys() {
            let quoted = format!("\"{key}\":");
            at = record[at..]
                .find(&quoted)
                .map(|found| found + at)
                .unwrap_or_else(|| panic!("{key} out of order in {record}"));
        }
    }

    #[test]
    fn a_request_dropped_unanswered_is_cancelled() {
        assert_eq!(AuditFacts::default().outcome(), AuditOutcome::Cancelled);
        let names: Vec<&str> = AuditOutcome::ALL.iter().map(|o| o.as_str()).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(names.len(), unique.len());
    }
}
