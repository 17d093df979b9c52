//! The gateway's side of the audit trail: which requests get a row, what the row says, and, in
//! `required` mode, that no answer leaves before its row is durable.
//!
//! Rows are built here, on the request's own task, from what only the request path knows (the
//! caller, the resolved server, digests of the arguments and of the answer); the sink
//! (manifold-audit) queues and writes them. Stages of the path that know more note it in the request's own
//! context ([`RequestNotes`], `ctx.audit`): policy says it refused or rate limited, the approval
//! stage what it decided, `call_record` how a tool call ended and under which call id, so one
//! call has one id in its result, its log line and its row.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use manifold_telemetry::audit::{AuditFacts, AuditOutcome, AuditSink};
use manifold_telemetry::call_log::ANONYMOUS_CALLER;
use manifold_telemetry::redact::Redactor;
use manifold_telemetry::trace_context::hex;
use manifold_telemetry::{CallOutcome, call_id};
use manifold_wire::{ErrorCode, ErrorObject, Kind, Message};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::context::{ClientInfo, RequestContext};
use crate::request_notes::AuditNotes;

/// Longest error text a row keeps (an upstream's error message can be long).
pub const MAX_AUDITED_ERROR_CHARS: usize = 512;
/// Longest recorded arguments (with `record_arguments`); longer ones keep their digest only.
pub const MAX_AUDITED_ARGUMENT_BYTES: usize = 16 * 1024;
/// Deepest nesting of schemas and arguments walked for secret fields.
const MAX_SCHEMA_DEPTH: usize = 64;
/// What a redacted argument value is replaced with.
const REDACTED: &str = "<redacted>";

/// The methods that always get a row; any other request gets one only when it is refused.
pub const AUDITED_METHODS: [&str; 3] = ["tools/call", "resources/read", "prompts/get"];

/// How arguments are recorded, when they are (`record_arguments`).
pub(crate) struct ArgumentRecording<'r> {
    pub redactor: &'r Redactor,
    /// The called tool's fields marked secret ([`secret_fields`]).
    pub secret_fields: Vec<String>,
}

/// Opens `request`'s audit row before it runs: in required mode, refuses it (the returned
/// error is the answer) while rows cannot be written. The caller awaits the route itself and
/// hands the answer to [`PendingRow::finish`]; dropping the row unfinished (the client
/// cancelled) records `cancelled`. Opening and finishing are two calls around the route rather
/// than a wrapper future, so the routing future (tens of KiB) is never moved into another one:
/// each move is a memcpy of its whole size, per call.
pub(crate) fn open_row(
    sink: Arc<dyn AuditSink>,
    ctx: &RequestContext,
    request: &Message,
    method: &str,
) -> Result<PendingRow, Box<Message>> {
    let always = AUDITED_METHODS.contains(&method);
    if always && let Err(unavailable) = sink.admit() {
        return Err(Box::new(Message::error(
            request.id().cloned(),
            &ErrorObject::new(ErrorCode::UpstreamUnavailable, unavailable.to_string()),
        )));
    }
    let started = Instant::now();
    // Other methods (lists, pings) get a row only when refused: nothing is built for them
    // unless that happens, and a cancelled one leaves no row.
    let row = PendingRow {
        sink,
        facts: always.then(|| first_facts(ctx, request, method)),
        always,
        started,
    };
    ctx.audit.start(row.call_id().to_owned());
    Ok(row)
}

/// A row between the request's start and its answer; dropped with facts left, it records a
/// cancellation.
pub(crate) struct PendingRow {
    sink: Arc<dyn AuditSink>,
    facts: Option<AuditFacts>,
    /// Whether the method always gets a row (else only when refused).
    always: bool,
    started: Instant,
}

impl PendingRow {
    fn call_id(&self) -> &str {
        self.facts.as_ref().map_or("", |f| f.call_id.as_str())
    }

    /// Writes the row of `request`, answered with `response`; in required mode the answer
    /// waits for the row, and is replaced by an error if the row cannot be written.
    pub(crate) async fn finish(
        mut self,
        recording: Option<ArgumentRecording<'_>>,
        ctx: &RequestContext,
        request: &Message,
        method: &str,
        response: Message,
    ) -> Message {
        let notes = ctx.audit.take();
        if !self.always && notes.refusal.is_none() {
            return response;
        }
        let mut facts = self
            .facts
            .take()
            .unwrap_or_else(|| first_facts(ctx, request, method));
        finish_facts(
            &mut facts,
            &notes,
            request,
            &response,
            self.started,
            recording.as_ref(),
        );
        let ack = self.sink.record(facts);
        if !self.sink.answers_wait() {
            return response;
        }
        match ack.await {
            Ok(()) => response,
            Err(unavailable) => Message::error(
                request.id().cloned(),
                &ErrorObject::new(
                    ErrorCode::UpstreamUnavailable,
                    format!(
                        "the request ran, but its answer is withheld because its audit row could not be written: {unavailable}"
                    ),
                ),
            ),
        }
    }
}

impl Drop for PendingRow {
    fn drop(&mut self) {
        if let Some(mut facts) = self.facts.take() {
            facts.outcome = Some(AuditOutcome::Cancelled);
            facts.duration_us = micros(self.started);
            // Nobody waits for a cancelled call's answer; its ack has no one to tell.
            drop(self.sink.record(facts));
        }
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// What is known before the request runs.
fn first_facts(ctx: &RequestContext, request: &Message, method: &str) -> AuditFacts {
    let caller = ctx.caller.as_deref();
    let info = ctx.client.info.as_ref();
    let target = match method {
        "tools/call" | "prompts/get" => request.params_str(&["name"]),
        "resources/read" => request.params_str(&["uri"]),
        _ => None,
    };
    AuditFacts {
        at_ms: now_ms(),
        call_id: call_id::next_call_id(),
        principal: caller
            .map_or(ANONYMOUS_CALLER, |c| c.name.as_str())
            .to_owned(),
        groups: caller.map(|c| c.groups.clone()).unwrap_or_default(),
        session: ctx.session.as_ref().map(|s| s.tag().to_owned()),
        client_name: info.and_then(ClientInfo::name).map(str::to_owned),
        client_version: info.and_then(ClientInfo::version).map(str::to_owned),
        server: "-".to_owned(),
        method: method.to_owned(),
        target: target.unwrap_or_default(),
        bytes_in: u64::try_from(request.as_str().len()).unwrap_or(u64::MAX),
        trace_id: ctx
            .trace
            .as_ref()
            .and_then(|t| manifold_telemetry::TraceParent::parse(&t.traceparent).ok())
            .map(|p| p.trace_id_hex()),
        ..AuditFacts::default()
    }
}

/// What the answer and the notes add.
fn finish_facts(
    facts: &mut AuditFacts,
    notes: &AuditNotes,
    request: &Message,
    response: &Message,
    started: Instant,
    recording: Option<&ArgumentRecording<'_>>,
) {
    facts.duration_us = micros(started);
    facts.bytes_out = u64::try_from(response.as_str().len()).unwrap_or(u64::MAX);
    if let Some(server) = &notes.server {
        facts.server.clone_from(server);
    }
    if let Some(target) = &notes.target {
        facts.target.clone_from(target);
    }
    facts.approval.clone_from(&notes.approval);
    let arguments = if facts.method == "tools/call" {
        request.params_raw(&["arguments"])
    } else {
        request.params()
    };
    if let Some(raw) = arguments {
        // Text with no canonical form (a duplicate member name, say) is digested as sent.
        let canonical = crate::pins::canonical_form(raw);
        let digested = canonical.as_deref().unwrap_or(raw);
        facts.args_sha256 = Some(sha256_hex(digested.as_bytes()));
        if let Some(recording) = recording
            && raw.len() <= MAX_AUDITED_ARGUMENT_BYTES
        {
            facts.arguments = Some(redacted_arguments(
                raw,
                &recording.secret_fields,
                recording.redactor,
            ));
        }
    }
    if let Some(result) = response.result_raw() {
        facts.result_sha256 = Some(sha256_hex(result.as_bytes()));
    }
    let error = response.error_raw();
    facts.error_code = error
        .and_then(|e| manifold_wire::patch::get(e, &["code"]).ok().flatten())
        .and_then(|c| c.trim().parse().ok());
    let error_message = error
        .and_then(|e| manifold_wire::patch::get(e, &["message"]).ok().flatten())
        .and_then(|m| serde_json::from_str::<String>(m).ok());
    let (outcome, error) = match (&notes.refusal, &notes.tool_call) {
        (Some(refusal), _) => (*refusal, error_message),
        (None, Some(call)) => {
            facts.retries = call.retries;
            let outcome = match call.outcome {
                CallOutcome::Ok => AuditOutcome::Ok,
                CallOutcome::ToolError => AuditOutcome::ToolError,
                CallOutcome::UpstreamError => AuditOutcome::TransportFailure,
                CallOutcome::Error => AuditOutcome::RpcError,
                CallOutcome::Cancelled => AuditOutcome::Cancelled,
                CallOutcome::InputRequired => AuditOutcome::InputRequired,
            };
            (outcome, call.error.clone().or(error_message))
        }
        (None, None) if response.kind() == Kind::Result => (AuditOutcome::Ok, None),
        (None, None) => (AuditOutcome::RpcError, error_message),
    };
    facts.outcome = Some(outcome);
    facts.error = error.map(|e| e.chars().take(MAX_AUDITED_ERROR_CHARS).collect());
}

/// The property names a tool's input schema marks secret (`x-secret: true`, `writeOnly: true`,
/// `format: "password"`), at any depth of `properties`.
pub(crate) fn secret_fields(tool_definition: &str) -> Vec<String> {
    fn walk(schema: &Value, out: &mut Vec<String>, depth: usize) {
        if depth > MAX_SCHEMA_DEPTH {
            return;
        }
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, property) in properties {
            let marked = property.get("x-secret").and_then(Value::as_bool) == Some(true)
                || property.get("writeOnly").and_then(Value::as_bool) == Some(true)
                || property.get("format").and_then(Value::as_str) == Some("password");
            if marked {
                out.push(name.clone());
            }
            walk(property, out, depth + 1);
        }
    }
    let mut out = Vec::new();
    if let Ok(definition) = serde_json::from_str::<Value>(tool_definition)
        && let Some(schema) = definition.get("inputSchema")
    {
        walk(schema, &mut out, 0);
    }
    out
}

/// The arguments with secret-marked fields (at any depth) replaced and configured secrets cut
/// out of every string.
fn redacted_arguments(raw: &str, secret_fields: &[String], redactor: &Redactor) -> String {
    fn hide(value: &mut Value, fields: &[String], depth: usize) {
        if depth > MAX_SCHEMA_DEPTH {
            return;
        }
        match value {
            Value::Object(map) => {
                for (name, member) in map.iter_mut() {
                    if fields.iter().any(|f| f == name) {
                        *member = Value::String(REDACTED.to_owned());
                    } else {
                        hide(member, fields, depth + 1);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| hide(i, fields, depth + 1)),
            _ => {}
        }
    }
    let hidden = match serde_json::from_str::<Value>(raw) {
        Ok(mut value) => {
            hide(&mut value, secret_fields, 0);
            value.to_string()
        }
        Err(_) => return REDACTED.to_owned(),
    };
    redactor.scrub(&hidden).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn context() -> RequestContext {
        RequestContext::silent(manifold_wire::Revision::LATEST)
    }

    #[test]
    fn long_errors_are_cut_and_oversized_arguments_keep_only_their_digest() {
        let id = manifold_wire::Id::Num(1);
        let big = "x".repeat(MAX_AUDITED_ARGUMENT_BYTES + 1);
        let request = Message::request(
            &id,
            "tools/call",
            Some(&format!(r#"{{"name":"t","arguments":{{"v":"{big}"}}}}"#)),
        );
        let long_error = "e".repeat(MAX_AUDITED_ERROR_CHARS * 2);
        let response = Message::error(
            Some(id),
            &ErrorObject::new(ErrorCode::InvalidParams, long_error),
        );
        let mut facts = first_facts(&context(), &request, "tools/call");
        let redactor = Redactor::new(Vec::<String>::new());
        let recording = ArgumentRecording {
            redactor: &redactor,
            secret_fields: Vec::new(),
        };
        finish_facts(
            &mut facts,
            &AuditNotes::default(),
            &request,
            &response,
            Instant::now(),
            Some(&recording),
        );
        assert_eq!(facts.arguments, None, "over the cap: digest only");
        assert_eq!(facts.args_sha256.as_deref().map(str::len), Some(64));
        assert_eq!(
            facts.error.as_deref().map(|e| e.chars().count()),
            Some(MAX_AUDITED_ERROR_CHARS)
        );
        assert_eq!(facts.outcome, Some(AuditOutcome::RpcError));
        assert_eq!(facts.error_code, Some(-32602));
    }

    #[test]
    fn secret_marked_fields_are_found_at_any_depth() {
        let tool = r#"{"name":"deploy","inputSchema":{"type":"object","properties":{
            "token":{"type":"string","x-secret":true},
            "target":{"type":"object","properties":{"password":{"type":"string","format":"password"},"host":{"type":"string"}}},
            "note":{"type":"string","writeOnly":true},
            "plain":{"type":"string","x-secret":false}}}}"#;
        let mut fields = secret_fields(tool);
        fields.sort();
        assert_eq!(fields, ["note", "password", "token"]);
    }

    #[test]
    fn recorded_arguments_hide_marked_fields_and_configured_secrets() {
        let redactor = Redactor::new(["hunter22".to_owned()]);
        let fields = vec!["token".to_owned(), "password".to_owned()];
        let raw = r#"{"token":"t-1","target":{"password":"p","host":"h"},"list":[{"token":"x"}],"msg":"pw is hunter22"}"#;
        let shown: Value =
            serde_json::from_str(&redacted_arguments(raw, &fields, &redactor)).unwrap();
        assert_eq!(shown["token"], REDACTED);
        assert_eq!(shown["target"]["password"], REDACTED);
        assert_eq!(shown["target"]["host"], "h");
        assert_eq!(shown["list"][0]["token"], REDACTED);
        assert_eq!(shown["msg"], "pw is <redacted>");
        assert_eq!(redacted_arguments("not json", &fields, &redactor), REDACTED);
    }
}
