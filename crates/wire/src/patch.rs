//! In-place patching of raw JSON.
//!
//! The gateway owns only a few things inside messages it forwards: ids, tool and prompt names,
//! resource URIs, progress tokens and its own `_meta`. These functions find one member by key path
//! and splice new JSON text in its place, so every other byte (unknown fields, number forms, key
//! order, escapes) stays exactly as the peer sent it.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::depth::{MAX_JSON_DEPTH, max_depth};
use crate::envelope::{Fault, Message};
use crate::id::{json_string, push_json_string};
use crate::shallow::ScanError;

pub mod decoded;

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("the JSON to patch is malformed: {0}")]
    Malformed(String),
    #[error("\"{0}\" is not an object, so \"{1}\" cannot be set inside it")]
    NotAnObject(String, String),
    #[error("the key \"{0}\" appears twice, so patching it would be ambiguous")]
    DuplicateKey(String),
    #[error("the message has no {0} to patch")]
    NoMember(&'static str),
    #[error("the replacement is not valid JSON: {0}")]
    BadReplacement(String),
    #[error("the patched message no longer decodes: {0}")]
    Broken(Fault),
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
        }
        d.deserialize_str(V)
    }
}

/// Finds the value of `key` among the members of one object.
struct FindKey<'k>(&'k str);

impl<'de> Visitor<'de> for FindKey<'_> {
    type Value = Result<Option<&'de RawValue>, PatchError>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found: Option<&'de RawValue> = None;
        let mut duplicate = false;
        while let Some(k) = map.next_key_seed(KeySeed)? {
            if k == self.0 {
                let v = map.next_value::<&'de RawValue>()?;
                duplicate |= found.is_some();
                found = Some(v);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if duplicate {
            return Ok(Err(PatchError::DuplicateKey(self.0.to_owned())));
        }
        Ok(Ok(found))
    }
}

/// Every member of one object, in order, values raw.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key_seed(KeySeed)? {
            let v = map.next_value::<&'de RawValue>()?;
            out.push((k, v));
        }
        Ok(out)
    }
}

/// The object `json` without its members named in `keys`; the other members' values are kept
/// byte for byte, in order (only the whitespace between members is not). For the gateway's own
/// members (its `requestState`, the answers to its own questions) before a request travels on.
pub fn without_members(json: &str, keys: &[&str]) -> Result<String, PatchError> {
    if !is_object(json) {
        return Err(PatchError::NotAnObject(
            json.chars().take(32).collect(),
            keys.first().copied().unwrap_or_default().to_owned(),
        ));
    }
    if max_depth(json.as_bytes(), MAX_JSON_DEPTH) > MAX_JSON_DEPTH {
        return Err(PatchError::Malformed(format!(
            "nesting deeper than {MAX_JSON_DEPTH}"
        )));
    }
    let mut de = serde_json::Deserializer::from_str(json);
    let members = de
        .deserialize_map(Members)
        .map_err(|e| PatchError::Malformed(e.to_string()))?;
    let mut out = String::with_capacity(json.len());
    out.push('{');
    for (k, v) in members.iter().filter(|(k, _)| !keys.contains(&k.as_ref())) {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(
            &serde_json::to_string(k.as_ref()).map_err(|e| PatchError::Malformed(e.to_string()))?,
        );
        out.push(':');
        out.push_str(v.get());
    }
    out.push('}');
    Ok(out)
}

fn is_object(json: &str) -> bool {
    json.trim_start().starts_with('{')
}

fn offset_of(base: &str, part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(base.as_ptr() as usize)
}

/// Where the text being read or patched comes from, which decides how much a lookup checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Anything: every value on the way is parsed and the depth is bounded first.
    Unchecked,
    /// A part of a decoded message (or text built from one by these functions): the decoder has
    /// checked it, so a lookup walks the object's own level only (`shallow.rs`).
    Decoded,
}

/// The span of the value of `key` directly inside the object `json`, if present.
fn find_member_in(
    json: &str,
    key: &str,
    source: Source,
) -> Result<Option<Range<usize>>, PatchError> {
    match source {
        Source::Unchecked => find_member(json, key),
        Source::Decoded => crate::shallow::member_span(json, key).map_err(|e| match e {
            ScanError::NotAnObject => {
                PatchError::NotAnObject(json.chars().take(32).collect(), key.to_owned())
            }
            ScanError::DuplicateKey(k) => PatchError::DuplicateKey(k),
            ScanError::Malformed(_) | ScanError::NotAnArray => PatchError::Malformed(e.to_string()),
        }),
    }
}

/// The span of the value of `key` directly inside the object `json`, if present (every value
/// parsed on the way).
fn find_member(json: &str, key: &str) -> Result<Option<Range<usize>>, PatchError> {
    if !is_object(json) {
        return Err(PatchError::NotAnObject(
            json.chars().take(32).collect(),
            key.to_owned(),
        ));
    }
    let mut de = serde_json::Deserializer::from_str(json);
    let found = de
        .deserialize_map(FindKey(key))
        .map_err(|e| PatchError::Malformed(e.to_string()))??;
    Ok(found.map(|v| {
        let start = offset_of(json, v.get());
        start..start + v.get().len()
    }))
}

/// The span of the value at `path` inside `json`, if every key on the way exists.
pub fn locate(json: &str, path: &[&str]) -> Result<Option<Range<usize>>, PatchError> {
    locate_in(json, path, Source::Unchecked)
}

pub(crate) fn locate_in(
    json: &str,
    path: &[&str],
    source: Source,
) -> Result<Option<Range<usize>>, PatchError> {
    if source == Source::Unchecked && max_depth(json.as_bytes(), MAX_JSON_DEPTH) > MAX_JSON_DEPTH {
        return Err(PatchError::Malformed(format!(
            "nesting deeper than {MAX_JSON_DEPTH}"
        )));
    }
    let mut span = 0..json.len();
    for key in path {
        let inner = json.get(span.clone()).unwrap_or_default();
        match find_member_in(inner, key, source)? {
            Some(r) => span = (span.start + r.start)..(span.start + r.end),
            None => return Ok(None),
        }
    }
    Ok(Some(span))
}

/// The raw value at `path`, if present.
pub fn get<'a>(json: &'a str, path: &[&str]) -> Result<Option<&'a str>, PatchError> {
    Ok(locate(json, path)?.and_then(|r| json.get(r)))
}

/// The string at `path`, decoded, if present and a string.
pub fn get_str(json: &str, path: &[&str]) -> Result<Option<String>, PatchError> {
    Ok(get(json, path)?.and_then(|raw| serde_json::from_str::<String>(raw).ok()))
}

fn check_replacement(value: &str) -> Result<(), PatchError> {
    if serde_json::from_str::<IgnoredAny>(value).is_err()
        || max_depth(value.as_bytes(), MAX_JSON_DEPTH) > MAX_JSON_DEPTH
    {
        return Err(PatchError::BadReplacement(value.chars().take(64).collect()));
    }
    Ok(())
}

/// Which of `keys` are members of the object `json`.
struct PresentKeys<'k>(&'k [&'k str]);

impl<'de> Visitor<'de> for PresentKeys<'_> {
    type Value = Vec<bool>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut present = vec![false; self.0.len()];
        while let Some(k) = map.next_key_seed(KeySeed)? {
            if let Some(i) = self.0.iter().position(|want| *want == k)
                && let Some(slot) = present.get_mut(i)
            {
                *slot = true;
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(present)
    }
}

/// Members (key, raw JSON value) whose values were checked when they were made, so that adding
/// them to each of many messages does not parse the same values again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedMembers {
    members: Vec<(String, String)>,
    /// The deepest of the values ([`deepest_value`]).
    depth: usize,
}

impl CheckedMembers {
    /// Checks each value as a patch would; the first that is not JSON (or nests too deep) is the
    /// error.
    pub fn new(members: &[(&str, &str)]) -> Result<CheckedMembers, PatchError> {
        let checked = members
            .iter()
            .map(|(key, value)| {
                check_replacement(value)?;
                Ok(((*key).to_owned(), (*value).to_owned()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CheckedMembers {
            depth: deepest_value(members),
            members: checked,
        })
    }
}

/// The deepest nesting among `members`' values.
fn deepest_value(members: &[(&str, &str)]) -> usize {
    members
        .iter()
        .map(|(_, value)| max_depth(value.as_bytes(), MAX_JSON_DEPTH))
        .max()
        .unwrap_or(0)
}

/// How deep, counted from the message's own braces, a patch at `path` can reach with values
/// `value_depth` deep: the envelope, the params or result object, one object per key (the
/// last one's too, for members added inside it), then the value. A bound, never below the truth.
fn reach(path: &[&str], value_depth: usize) -> usize {
    2 + path.len() + value_depth
}

/// `"k1":v1,"k2":v2` for raw JSON values.
fn members_text<'a>(members: impl Iterator<Item = &'a (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (key, value) in members {
        if !out.is_empty() {
            out.push(',');
        }
        push_json_string(&mut out, key);
        out.push(':');
        out.push_str(value);
    }
    out
}

/// Adds to the object at `path` each of `members` (key, raw JSON value) it lacks, in one splice,
/// creating that object (and the ones on its way) when missing. Members already there keep their
/// values. `None` when nothing was missing.
///
/// This is how a request gains several `_meta` defaults at once: one parse of the object instead
/// of a lookup and a patch per key.
pub fn set_missing(
    json: &str,
    path: &[&str],
    members: &[(&str, &str)],
) -> Result<Option<String>, PatchError> {
    set_missing_in(json, path, members, Source::Unchecked)
}

pub(crate) fn set_missing_in(
    json: &str,
    path: &[&str],
    members: &[(&str, &str)],
    source: Source,
) -> Result<Option<String>, PatchError> {
    for (_, value) in members {
        check_replacement(value)?;
    }
    set_checked_missing(json, path, members, source)
}

/// [`set_missing_in`] for values already checked.
fn set_checked_missing(
    json: &str,
    path: &[&str],
    members: &[(&str, &str)],
    source: Source,
) -> Result<Option<String>, PatchError> {
    let obj = match walk_or_insert(json, path, source, || {
        format!("{{{}}}", members_text(members.iter()))
    })? {
        Walk::Found(obj) => obj,
        Walk::Inserted(out) => return Ok(Some(out)),
    };
    let inner = json.get(obj.clone()).unwrap_or_default();
    if !is_object(inner) {
        return Err(PatchError::NotAnObject(
            inner.chars().take(32).collect(),
            path.last().copied().unwrap_or_default().to_owned(),
        ));
    }
    let keys: Vec<&str> = members.iter().map(|(k, _)| *k).collect();
    let present = match source {
        Source::Unchecked => serde_json::Deserializer::from_str(inner)
            .deserialize_map(PresentKeys(&keys))
            .map_err(|e| PatchError::Malformed(e.to_string()))?,
        Source::Decoded => crate::shallow::members_present(inner, &keys)
            .map_err(|e| PatchError::Malformed(e.to_string()))?,
    };
    let missing = members_text(
        members
            .iter()
            .zip(present)
            .filter(|(_, there)| !there)
            .map(|(m, _)| m),
    );
    if missing.is_empty() {
        return Ok(None);
    }
    insert_members(json, obj, &missing).map(Some)
}

/// `value` inside one object per key of `path`, the last key innermost: `{"a":{"b":value}}`.
fn nested_in(path: &[&str], value: String) -> String {
    path.iter().rev().fold(value, |inner, k| {
        format!("{{{}:{}}}", json_string(k), inner)
    })
}

/// Where a walk down a key path ended.
enum Walk {
    /// Every key was there: the span of the last one's value.
    Found(Range<usize>),
    /// A key was missing: the text with the rest of the path inserted there.
    Inserted(String),
}

/// Follows `path` down from the object `json`. Where a key is missing, the rest of the path is
/// inserted there as nested objects around `innermost()`.
fn walk_or_insert(
    json: &str,
    path: &[&str],
    source: Source,
    innermost: impl FnOnce() -> String,
) -> Result<Walk, PatchError> {
    let mut obj = 0..json.len();
    for (depth, key) in path.iter().enumerate() {
        let inner = json.get(obj.clone()).unwrap_or_default();
        match find_member_in(inner, key, source)? {
            Some(r) => obj = (obj.start + r.start)..(obj.start + r.end),
            None => {
                let rest = path.get(depth + 1..).unwrap_or_default();
                let nested = nested_in(rest, innermost());
                return insert_member(json, obj, key, &nested).map(Walk::Inserted);
            }
        }
    }
    Ok(Walk::Found(obj))
}

fn splice(json: &str, at: Range<usize>, with: &str) -> String {
    let mut out = String::with_capacity(json.len() + with.len());
    out.push_str(json.get(..at.start).unwrap_or_default());
    out.push_str(with);
    out.push_str(json.get(at.end..).unwrap_or_default());
    out
}

/// Sets the value at `path` to the raw JSON `value`, creating missing objects on the way.
///
/// Existing members are replaced in place; a missing member is inserted first in its object.
pub fn set(json: &str, path: &[&str], value: &str) -> Result<String, PatchError> {
    set_in(json, path, value, Source::Unchecked)
}

pub(crate) fn set_in(
    json: &str,
    path: &[&str],
    value: &str,
    source: Source,
) -> Result<String, PatchError> {
    check_replacement(value)?;
    let Some((last, parents)) = path.split_last() else {
        return Ok(value.to_owned());
    };
    let obj = match walk_or_insert(json, parents, source, || {
        nested_in(&[*last], value.to_owned())
    })? {
        Walk::Found(obj) => obj,
        Walk::Inserted(out) => return Ok(out),
    };
    let inner = json.get(obj.clone()).unwrap_or_default();
    match find_member_in(inner, last, source)? {
        Some(r) => Ok(splice(
            json,
            (obj.start + r.start)..(obj.start + r.end),
            value,
        )),
        None => insert_member(json, obj, last, value),
    }
}

fn insert_member(
    json: &str,
    obj: Range<usize>,
    key: &str,
    value: &str,
) -> Result<String, PatchError> {
    let inner = json.get(obj.clone()).unwrap_or_default();
    if !is_object(inner) {
        return Err(PatchError::NotAnObject(
            inner.chars().take(32).collect(),
            key.to_owned(),
        ));
    }
    let mut member = String::with_capacity(key.len() + value.len() + 3);
    push_json_string(&mut member, key);
    member.push(':');
    member.push_str(value);
    insert_members(json, obj, &member)
}

/// Inserts `members` (`"k":v,...`, at least one) first in the object spanning `obj`.
fn insert_members(json: &str, obj: Range<usize>, members: &str) -> Result<String, PatchError> {
    let inner = json.get(obj.clone()).unwrap_or_default();
    let Some(open) = inner.find('{').filter(|_| is_object(inner)) else {
        return Err(PatchError::NotAnObject(
            inner.chars().take(32).collect(),
            members.chars().take(32).collect(),
        ));
    };
    let at = obj.start + open + 1;
    let after = json.get(at..obj.end).unwrap_or_default();
    let comma = if after.trim_start().starts_with('}') {
        ""
    } else {
        ","
    };
    let mut out = String::with_capacity(json.len() + members.len() + 1);
    out.push_str(json.get(..at).unwrap_or_default());
    out.push_str(members);
    out.push_str(comma);
    out.push_str(json.get(at..).unwrap_or_default());
    Ok(out)
}

/// Where in a message a patch applies.
#[derive(Debug, Clone, Copy)]
pub enum Part {
    Params,
    Result,
}

impl Message {
    /// Sets `path` inside the params or result to raw JSON `value`, leaving every other byte as is.
    pub fn patch(&self, part: Part, path: &[&str], value: &str) -> Result<Message, PatchError> {
        self.patch_member(
            part,
            path,
            reach(path, max_depth(value.as_bytes(), MAX_JSON_DEPTH)),
            |inner| set_in(inner, path, value, Source::Decoded).map(Some),
            || {
                check_replacement(value)?;
                Ok(value.to_owned())
            },
        )
    }

    /// Adds to the object at `path` inside the params or result each of `members` (key, raw
    /// JSON value) it lacks, in one splice; members already there keep their values.
    pub fn patch_missing(
        &self,
        part: Part,
        path: &[&str],
        members: &[(&str, &str)],
    ) -> Result<Message, PatchError> {
        self.patch_member(
            part,
            path,
            reach(path, deepest_value(members)),
            |inner| set_missing_in(inner, path, members, Source::Decoded),
            || {
                for (_, value) in members {
                    check_replacement(value)?;
                }
                Ok(format!("{{{}}}", members_text(members.iter())))
            },
        )
    }

    /// [`Message::patch_missing`] with members checked once beforehand, for the same members
    /// added to many messages (the `_meta` of every request to a modern upstream).
    pub fn patch_missing_checked(
        &self,
        part: Part,
        path: &[&str],
        members: &CheckedMembers,
    ) -> Result<Message, PatchError> {
        let depth = members.depth;
        let members: Vec<(&str, &str)> = members
            .members
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.patch_member(
            part,
            path,
            reach(path, depth),
            |inner| set_checked_missing(inner, path, &members, Source::Decoded),
            || Ok(format!("{{{}}}", members_text(members.iter()))),
        )
    }

    /// Applies `edit` to the params (or result) text and splices its answer back in; a request
    /// without params gains them, holding `path` set to `fresh()`. `reach` bounds how deep what
    /// the edit writes can nest in the message ([`reach`]).
    fn patch_member(
        &self,
        part: Part,
        path: &[&str],
        reach: usize,
        edit: impl FnOnce(&str) -> Result<Option<String>, PatchError>,
        fresh: impl FnOnce() -> Result<String, PatchError>,
    ) -> Result<Message, PatchError> {
        let (span, name) = match part {
            Part::Params => (self.params_span(), "params"),
            Part::Result => (self.result_span(), "result"),
        };
        let text = self.as_str();
        match span {
            Some(span) => {
                let inner = text.get(span.clone()).unwrap_or_default();
                match edit(inner)? {
                    // Replacing the whole params (an empty path) must leave them an object or
                    // an array, as the decoder requires of any request.
                    Some(patched)
                        if matches!(part, Part::Params)
                            && !matches!(
                                patched.trim_start().as_bytes().first(),
                                Some(b'{' | b'[')
                            ) =>
                    {
                        Err(PatchError::Broken(Fault {
                            kind: crate::envelope::FaultKind::ParamsNotStructured,
                            id: self.id().cloned(),
                        }))
                    }
                    // Whitespace around a whole replacement belongs to no member: a decoder
                    // would leave it out of the span, so it is left out here too.
                    Some(patched) => self
                        .with_member_value(
                            span,
                            patched.trim_matches([' ', '\t', '\n', '\r']),
                            reach,
                        )
                        .map_err(PatchError::Broken),
                    None => Ok(self.clone()),
                }
            }
            None if matches!(part, Part::Params) && self.method().is_some() => {
                let nested = nested_in(path, fresh()?);
                let new_text = insert_member(text, 0..text.len(), "params", &nested)?;
                Message::with_text(new_text).map_err(PatchError::Broken)
            }
            None => Err(PatchError::NoMember(name)),
        }
    }

    /// The raw value at `path` inside the params or the result, if every key on the way exists.
    /// The first key is found among the members the message indexed once
    /// ([`Message::part_members`]); deeper keys walk their own level only. An unreadable path
    /// gives `None`, as it always did for these lookups.
    fn part_lookup(&self, part: Part, path: &[&str]) -> Option<&str> {
        let span = match part {
            Part::Params => self.params_span(),
            Part::Result => self.result_span(),
        }?;
        let text = self.as_str().get(span.clone())?;
        let (Some((first, rest)), Some(members)) = (path.split_first(), self.part_members(&span))
        else {
            return decoded::get(text, path).ok().flatten();
        };
        let value = text.get(crate::shallow::indexed_member_span(text, members, first).ok()??)?;
        if rest.is_empty() {
            Some(value)
        } else {
            decoded::get(value, rest).ok().flatten()
        }
    }

    /// Reads a string inside the params (e.g. `["name"]`, `["uri"]`).
    pub fn params_str(&self, path: &[&str]) -> Option<String> {
        self.params_raw(path)
            .and_then(|raw| serde_json::from_str::<String>(raw).ok())
    }

    /// Reads a raw value inside the params (e.g. `["_meta", "progressToken"]`).
    pub fn params_raw(&self, path: &[&str]) -> Option<&str> {
        self.part_lookup(Part::Params, path)
    }

    /// Reads a raw value inside the result (e.g. `["isError"]`).
    pub fn result_at(&self, path: &[&str]) -> Option<&str> {
        self.part_lookup(Part::Result, path)
    }

    /// Reads a string inside the result (e.g. `["resultType"]`).
    pub fn result_str(&self, path: &[&str]) -> Option<String> {
        self.result_at(path)
            .and_then(|raw| serde_json::from_str::<String>(raw).ok())
    }

    /// Renames the tool (or prompt) a `tools/call` (`prompts/get`) names.
    pub fn with_name(&self, name: &str) -> Result<Message, PatchError> {
        self.patch(Part::Params, &["name"], &json_string(name))
    }

    /// Rewrites the resource URI of a `resources/*` request.
    pub fn with_uri(&self, uri: &str) -> Result<Message, PatchError> {
        self.patch(Part::Params, &["uri"], &json_string(uri))
    }

    /// Sets the progress token (raw JSON: an integer or a string).
    pub fn with_progress_token(&self, token_json: &str) -> Result<Message, PatchError> {
        self.patch(Part::Params, &["_meta", "progressToken"], token_json)
    }
}

#[cfg(test)]
mod tests;
