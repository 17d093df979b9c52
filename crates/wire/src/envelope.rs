//! The JSON-RPC 2.0 envelope, kept as raw JSON.
//!
//! Manifold forwards content it does not own, so a [`Message`] is the original text plus the byte
//! spans of the envelope members. Decoding is strict about the envelope and blind to the content:
//! params, results and error data are never parsed here, so unknown fields, number forms, key order
//! and escapes cross Manifold byte for byte. Decoding is total: every input yields a message or a
//! [`Fault`], never a panic.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::codes::ErrorCode;
use crate::depth::{MAX_JSON_DEPTH, max_depth};
use crate::id::{Id, IdError, json_string};
use crate::shallow::{self, MemberSpans};

/// What an envelope is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    /// A response carrying `result`.
    Result,
    /// A response carrying `error`.
    Error,
}

/// A decoded message: the original text and where its members are.
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    text: Arc<str>,
    kind: Kind,
    id: Option<Id>,
    id_span: Option<Range<usize>>,
    method: Option<Box<str>>,
    params: Option<Range<usize>>,
    result: Option<Range<usize>>,
    error: Option<Range<usize>>,
    /// The members of the params or the result (a message has one or neither).
    members: PartMembers,
}

/// The top-level members of a message's params or result, found by one walk when a lookup first
/// needs them: a forwarded call looks up about a dozen members, and each lookup used to walk the
/// whole object again (for a large result, every byte of it each time). A cache: it takes no
/// part in comparing messages, and a clone starts without it.
#[derive(Default)]
struct PartMembers(OnceLock<Option<Box<[MemberSpans]>>>);

impl Clone for PartMembers {
    fn clone(&self) -> PartMembers {
        PartMembers::default()
    }
}

impl PartialEq for PartMembers {
    fn eq(&self, _: &PartMembers) -> bool {
        true
    }
}

impl Eq for PartMembers {}

/// A JSON-RPC error object; `data` stays raw.
#[derive(Debug, Clone)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    pub data: Option<Box<RawValue>>,
}

/// Why bytes are not a valid envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultKind {
    #[error("the message is not valid UTF-8 (at byte {0})")]
    InvalidUtf8(usize),
    #[error("the message nests deeper than {limit} levels")]
    TooDeep { limit: usize },
    #[error("the message is not valid JSON: {0}")]
    NotJson(String),
    #[error("the message is a JSON array (batch); MCP does not allow batches since 2025-06-18")]
    Batch,
    #[error("the message is not a JSON object")]
    NotAnObject,
    #[error("the member \"jsonrpc\" is missing")]
    MissingVersion,
    #[error("the member \"jsonrpc\" must be \"2.0\", found {0}")]
    WrongVersion(String),
    #[error("the member \"{0}\" appears twice")]
    DuplicateMember(&'static str),
    #[error("the id is unusable: {0}")]
    BadId(IdError),
    #[error("the member \"method\" must be a string")]
    MethodNotString,
    #[error("the member \"params\" must be an object or an array")]
    ParamsNotStructured,
    #[error("a request or notification must not carry \"result\" or \"error\"")]
    RequestWithOutcome,
    #[error("a response must carry exactly one of \"result\" and \"error\", it has both")]
    ResultAndError,
    #[error("a response must carry exactly one of \"result\" and \"error\", it has neither")]
    NeitherResultNorError,
    #[error("a response must carry an id")]
    ResponseWithoutId,
    #[error("a response with a result must not have a null id")]
    ResultWithNullId,
    #[error("the error object is malformed: {0}")]
    BadErrorObject(String),
}

/// A decoding failure, with the request id when one could still be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct Fault {
    pub kind: FaultKind,
    /// The id of the offending message, when it was readable despite the fault.
    pub id: Option<Id>,
}

impl Fault {
    /// The JSON-RPC code a reply to this fault carries.
    pub fn code(&self) -> ErrorCode {
        match self.kind {
            FaultKind::InvalidUtf8(_) | FaultKind::TooDeep { .. } | FaultKind::NotJson(_) => {
                ErrorCode::ParseError
            }
            _ => ErrorCode::InvalidRequest,
        }
    }

    /// The error response a peer should get for this fault (id null when unreadable).
    pub fn to_response(&self) -> Message {
        Message::error(
            self.id.clone(),
            &ErrorObject::new(self.code(), self.kind.to_string()),
        )
    }
}

impl ErrorObject {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Box<RawValue>) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// The error object as JSON text.
    pub fn to_json(&self) -> String {
        let mut out = format!(
            "{{\"code\":{},\"message\":{}",
            self.code,
            json_string(&self.message)
        );
        if let Some(d) = &self.data {
            out.push_str(",\"data\":");
            out.push_str(d.get());
        }
        out.push('}');
        out
    }

    fn parse(raw: &str) -> Result<ErrorObject, String> {
        #[derive(Deserialize)]
        struct View<'a> {
            code: serde_json::Number,
            message: String,
            #[serde(borrow, default)]
            data: Option<&'a RawValue>,
        }
        let v: View<'_> = serde_json::from_str(raw).map_err(|e| e.to_string())?;
        let code = v
            .code
            .as_i64()
            .ok_or_else(|| format!("the code must be an integer, found {}", v.code))?;
        Ok(ErrorObject {
            code,
            message: v.message,
            data: v.data.map(|d| d.to_owned()),
        })
    }
}

impl PartialEq for ErrorObject {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.data.as_ref().map(|d| d.get()) == other.data.as_ref().map(|d| d.get())
    }
}

impl Eq for ErrorObject {}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("kind", &self.kind)
            .field("text", &self.text)
            .finish()
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    #[serde(other)]
    Other,
}

#[derive(Default)]
struct Members<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    duplicate: Option<&'static str>,
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut m = Members::default();
        while let Some(key) = map.next_key::<Member>()? {
            let (slot, name) = match key {
                Member::Jsonrpc => (&mut m.jsonrpc, "jsonrpc"),
                Member::Id => (&mut m.id, "id"),
                Member::Method => (&mut m.method, "method"),
                Member::Params => (&mut m.params, "params"),
                Member::Result => (&mut m.result, "result"),
                Member::Error => (&mut m.error, "error"),
                Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let value = map.next_value::<&'de RawValue>()?;
            if slot.is_some() {
                m.duplicate.get_or_insert(name);
            }
            *slot = Some(value);
        }
        Ok(m)
    }
}

/// Where a built message's id goes.
enum IdSlot<'a> {
    Absent,
    Null,
    Id(&'a Id),
}

fn span_of(base: &str, part: &str) -> Range<usize> {
    let start = (part.as_ptr() as usize).saturating_sub(base.as_ptr() as usize);
    start..start + part.len()
}

fn first_byte(text: &str) -> Option<u8> {
    text.bytes().find(|b| !b.is_ascii_whitespace())
}

/// Reads the members of an object without judging them, for id salvage and decoding alike.
fn members(text: &str) -> Result<Members<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let m = (&mut de).deserialize_map(MembersVisitor)?;
    de.end()?;
    Ok(m)
}

impl Message {
    /// Decodes one message from bytes (one line of stdio, one SSE `data`, one HTTP body).
    pub fn decode(bytes: &[u8]) -> Result<Message, Fault> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Message::decode_str(text),
            Err(e) => {
                let lossy = String::from_utf8_lossy(bytes);
                Err(Fault {
                    kind: FaultKind::InvalidUtf8(e.valid_up_to()),
                    id: salvage_id(&lossy),
                })
            }
        }
    }

    /// Decodes one message from text.
    pub fn decode_str(text: &str) -> Result<Message, Fault> {
        let fault = |kind| Fault { kind, id: None };
        if max_depth(text.as_bytes(), MAX_JSON_DEPTH) > MAX_JSON_DEPTH {
            // Too deep to decode, but the id usually sits at the top level: keep it.
            return Err(Fault {
                kind: FaultKind::TooDeep {
                    limit: MAX_JSON_DEPTH,
                },
                id: crate::shallow::top_level_member(text, "id")
                    .and_then(|raw| Id::from_raw(raw).ok()),
            });
        }
        match first_byte(text) {
            Some(b'{') => {}
            Some(b'[') => return Err(fault(FaultKind::Batch)),
            _ => {
                return Err(match serde_json::from_str::<IgnoredAny>(text) {
                    Ok(_) => fault(FaultKind::NotAnObject),
                    Err(e) => fault(FaultKind::NotJson(e.to_string())),
                });
            }
        }
        let m = members(text).map_err(|e| fault(FaultKind::NotJson(e.to_string())))?;
        Message::from_members(text, m)
    }

    fn from_members(text: &str, m: Members<'_>) -> Result<Message, Fault> {
        // The id is read first so that every later fault can carry it.
        let id_raw = m.id.map(|r| r.get());
        let id = match id_raw {
            None => None,
            Some("null") => None,
            Some(raw) => match Id::from_raw(raw) {
                Ok(id) => Some(id),
                Err(e) => {
                    return Err(Fault {
                        kind: FaultKind::BadId(e),
                        id: None,
                    });
                }
            },
        };
        let fault = |kind| Fault {
            kind,
            id: id.clone(),
        };
        if let Some(name) = m.duplicate {
            return Err(fault(FaultKind::DuplicateMember(name)));
        }
        match m.jsonrpc.map(|r| r.get()) {
            None => return Err(fault(FaultKind::MissingVersion)),
            Some("\"2.0\"") => {}
            Some(other) => {
                // Owned, so that an escaped spelling such as "2\u002e0" is read as what it says.
                if serde_json::from_str::<String>(other).ok().as_deref() != Some("2.0") {
                    return Err(fault(FaultKind::WrongVersion(
                        other.chars().take(64).collect(),
                    )));
                }
            }
        }
        let id_is_null = id_raw == Some("null");
        let base = |r: &RawValue| span_of(text, r.get());
        if let Some(method_raw) = m.method {
            let method: String = serde_json::from_str(method_raw.get())
                .map_err(|_| fault(FaultKind::MethodNotString))?;
            if m.result.is_some() || m.error.is_some() {
                return Err(fault(FaultKind::RequestWithOutcome));
            }
            if id_is_null {
                return Err(fault(FaultKind::BadId(IdError::Null)));
            }
            if let Some(p) = m.params
                && !matches!(first_byte(p.get()), Some(b'{' | b'['))
            {
                return Err(fault(FaultKind::ParamsNotStructured));
            }
            return Ok(Message {
                text: Arc::from(text),
                kind: if id.is_some() {
                    Kind::Request
                } else {
                    Kind::Notification
                },
                id_span: m.id.map(base),
                id,
                method: Some(method.into_boxed_str()),
                params: m.params.map(base),
                result: None,
                error: None,
                members: PartMembers::default(),
            });
        }
        if m.id.is_none() {
            return Err(fault(FaultKind::ResponseWithoutId));
        }
        let kind = match (m.result, m.error) {
            (Some(_), Some(_)) => return Err(fault(FaultKind::ResultAndError)),
            (None, None) => return Err(fault(FaultKind::NeitherResultNorError)),
            (Some(_), None) if id_is_null => return Err(fault(FaultKind::ResultWithNullId)),
            (Some(_), None) => Kind::Result,
            (None, Some(e)) => {
                ErrorObject::parse(e.get()).map_err(|why| fault(FaultKind::BadErrorObject(why)))?;
                Kind::Error
            }
        };
        Ok(Message {
            text: Arc::from(text),
            kind,
            id_span: m.id.map(base),
            id,
            method: None,
            params: None,
            result: m.result.map(base),
            error: m.error.map(base),
            members: PartMembers::default(),
        })
    }

    /// Builds a request. `params` must be raw JSON (an object) when given.
    pub fn request(id: &Id, method: &str, params: Option<&str>) -> Message {
        Message::build(IdSlot::Id(id), Some(method), params, None, None)
    }

    /// Builds a notification.
    pub fn notification(method: &str, params: Option<&str>) -> Message {
        Message::build(IdSlot::Absent, Some(method), params, None, None)
    }

    /// Builds a success response around a raw result.
    pub fn result(id: &Id, result: &str) -> Message {
        Message::build(IdSlot::Id(id), None, None, Some(result), None)
    }

    /// Builds an error response; a `None` id is written as `null`.
    pub fn error(id: Option<Id>, error: &ErrorObject) -> Message {
        let slot = id.as_ref().map_or(IdSlot::Null, IdSlot::Id);
        Message::build(slot, None, None, None, Some(&error.to_json()))
    }

    fn build(
        id: IdSlot<'_>,
        method: Option<&str>,
        params: Option<&str>,
        result: Option<&str>,
        error: Option<&str>,
    ) -> Message {
        let mut text = String::with_capacity(
            64 + params.map_or(0, str::len)
                + result.map_or(0, str::len)
                + error.map_or(0, str::len),
        );
        text.push_str("{\"jsonrpc\":\"2.0\"");
        let push = |text: &mut String, key: &str, value: &str| -> Range<usize> {
            text.push_str(",\"");
            text.push_str(key);
            text.push_str("\":");
            let start = text.len();
            text.push_str(value);
            start..text.len()
        };
        let (id_value, id_span) = match id {
            IdSlot::Absent => (None, None),
            IdSlot::Null => (None, Some(push(&mut text, "id", "null"))),
            IdSlot::Id(i) => (Some(i.clone()), Some(push(&mut text, "id", &i.to_json()))),
        };
        if let Some(m) = method {
            push(&mut text, "method", &json_string(m));
        }
        let params_span = params.map(|p| push(&mut text, "params", p));
        let result_span = result.map(|r| push(&mut text, "result", r));
        let error_span = error.map(|e| push(&mut text, "error", e));
        text.push('}');
        Message {
            kind: match (method, &id_value, error) {
                (Some(_), Some(_), _) => Kind::Request,
                (Some(_), None, _) => Kind::Notification,
                (None, _, Some(_)) => Kind::Error,
                (None, _, None) => Kind::Result,
            },
            id: id_value,
            id_span,
            method: method.map(Box::from),
            params: params_span,
            result: result_span,
            error: error_span,
            text: Arc::from(text),
            members: PartMembers::default(),
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn is_response(&self) -> bool {
        matches!(self.kind, Kind::Result | Kind::Error)
    }

    /// The id; `None` for notifications and for error responses with a null id.
    pub fn id(&self) -> Option<&Id> {
        self.id.as_ref()
    }

    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// The whole message as JSON text, exactly as received or built.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The shared text, for cheap fan-out.
    pub fn text(&self) -> Arc<str> {
        Arc::clone(&self.text)
    }

    fn slice(&self, span: &Option<Range<usize>>) -> Option<&str> {
        span.as_ref().and_then(|r| self.text.get(r.clone()))
    }

    /// The raw `params` text, untouched.
    pub fn params(&self) -> Option<&str> {
        self.slice(&self.params)
    }

    /// The raw `result` text, untouched.
    pub fn result_raw(&self) -> Option<&str> {
        self.slice(&self.result)
    }

    /// The top-level members of `part` (the span of this message's params or result), found by
    /// one walk the first time and kept ([`PartMembers`]); `None` for any other span, or a part
    /// that is not an object.
    pub(crate) fn part_members(&self, part: &Range<usize>) -> Option<&[MemberSpans]> {
        // The index belongs to the one part a message has (params or result).
        if self.params.as_ref().or(self.result.as_ref()) != Some(part) {
            return None;
        }
        let text = self.text.get(part.clone())?;
        self.members
            .0
            .get_or_init(|| shallow::member_index(text).ok().map(Vec::into_boxed_slice))
            .as_deref()
    }

    /// The raw `error` text, untouched.
    pub fn error_raw(&self) -> Option<&str> {
        self.slice(&self.error)
    }

    /// The error object of an error response (already validated at decode time).
    pub fn error_object(&self) -> Option<ErrorObject> {
        self.error_raw().and_then(|e| ErrorObject::parse(e).ok())
    }

    /// The same message with another id, every other byte unchanged.
    pub fn with_id(&self, id: &Id) -> Message {
        let Some(span) = self.id_span.clone() else {
            return self.clone();
        };
        let mut out = self.with_span_replaced(span, &id.to_json());
        out.id = Some(id.clone());
        out
    }

    /// The same message with the member value at `span` (params or result) replaced by `value`.
    ///
    /// The text around it is already a decoded envelope and `value` is valid JSON (the patch
    /// functions check both), so only the depth guard has to be applied again: the envelope adds
    /// one level to whatever `value` nests. Re-decoding the whole text instead cost a full parse
    /// of every forwarded call (and of a 32 KiB argument) per patch.
    ///
    /// `reach` bounds how deep the edit that made `value` can nest in the message. Within the
    /// guard, the scan is skipped: the message was within it before, and the edit added nothing
    /// deeper (a renamed tool, a `_meta` member), so a large argument is not scanned again.
    pub(crate) fn with_member_value(
        &self,
        span: Range<usize>,
        value: &str,
        reach: usize,
    ) -> Result<Message, Fault> {
        if reach > MAX_JSON_DEPTH
            && max_depth(value.as_bytes(), MAX_JSON_DEPTH) + 1 > MAX_JSON_DEPTH
        {
            return Err(Fault {
                kind: FaultKind::TooDeep {
                    limit: MAX_JSON_DEPTH,
                },
                id: self.id.clone(),
            });
        }
        Ok(self.with_span_replaced(span, value))
    }

    /// The text with `span` replaced, and every member span moved to where its bytes now are.
    fn with_span_replaced(&self, span: Range<usize>, new: &str) -> Message {
        let mut text = String::with_capacity(self.text.len() + new.len());
        text.push_str(self.text.get(..span.start).unwrap_or_default());
        text.push_str(new);
        text.push_str(self.text.get(span.end..).unwrap_or_default());
        let new_end = span.start + new.len();
        let moved = |r: Range<usize>| -> Range<usize> {
            if r == span {
                span.start..new_end
            } else if r.start >= span.end {
                (r.start - span.end + new_end)..(r.end - span.end + new_end)
            } else {
                r
            }
        };
        Message {
            text: Arc::from(text),
            kind: self.kind,
            id: self.id.clone(),
            id_span: self.id_span.clone().map(moved),
            method: self.method.clone(),
            params: self.params.clone().map(moved),
            result: self.result.clone().map(moved),
            error: self.error.clone().map(moved),
            members: PartMembers::default(),
        }
    }

    /// Re-reads a patched text as a message (used by patching when a member is added).
    ///
    /// This is the full decoder, depth guard included: a patch can nest a value deeper than the
    /// guard allows, and a message that exists must always re-decode from its own text.
    pub(crate) fn with_text(text: String) -> Result<Message, Fault> {
        Message::decode_str(&text)
    }

    /// Span of the params member, for patching.
    pub(crate) fn params_span(&self) -> Option<Range<usize>> {
        self.params.clone()
    }

    /// Span of the result member, for patching.
    pub(crate) fn result_span(&self) -> Option<Range<usize>> {
        self.result.clone()
    }
}

/// Reads the id of a message that failed to decode, when its text is still JSON.
fn salvage_id(text: &str) -> Option<Id> {
    if max_depth(text.as_bytes(), MAX_JSON_DEPTH) > MAX_JSON_DEPTH {
        return None;
    }
    let m = members(text).ok()?;
    Id::from_raw(m.id?.get()).ok()
}

#[cfg(test)]
mod tests;
