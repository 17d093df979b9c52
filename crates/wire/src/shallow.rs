//! Reading the members of a JSON object without parsing what they hold.
//!
//! Two readers need this. A message nested too deep to decode still deserves an error that
//! carries its id, so the caller waiting on that id is answered at once instead of timing out
//! ([`top_level_member`]). And a forwarded call reads about twenty members of text its decoder
//! has already checked (the tool's name, `isError`, `resultType`, task ids, `_meta`): parsing
//! every value on the way again for each of them was a fifth of the gateway's instructions per
//! call, so lookups in decoded text walk only the object's own level ([`member_span`]).
//!
//! The walk skips nested values by counting brackets outside strings, with no recursion, and
//! crosses strings with `memchr`. It does not validate what it skips: on text that is not JSON it
//! stays total (no panic, no read out of bounds) but may misread, which is why only text a decoder
//! accepted is given to it for decisions.

use std::borrow::Cow;
use std::ops::Range;

/// Why a walk over an object's members stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("expected an object")]
    NotAnObject,
    #[error("expected an array")]
    NotAnArray,
    #[error("the object is cut short or malformed at byte {0}")]
    Malformed(usize),
    #[error("the key \"{0}\" appears twice")]
    DuplicateKey(String),
}

/// Index just past the string starting at `start` (which must be a `"`).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    loop {
        let stop = at + memchr::memchr2(b'"', b'\\', bytes.get(at..)?)?;
        if bytes.get(stop) == Some(&b'"') {
            return Some(stop + 1);
        }
        // A backslash: whatever it escapes (a quote included) is part of the string.
        at = stop + 2;
    }
}

/// Index just past the value starting at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => string_end(bytes, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let mut i = start;
            while let Some(&b) = bytes.get(i) {
                if matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace() {
                    break;
                }
                i += 1;
            }
            (i > start).then_some(i)
        }
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// One member of an object: its key as written (quotes included), where that key starts, and
/// its value's span.
struct RawMember<'a> {
    key: &'a str,
    key_at: usize,
    value: Range<usize>,
}

impl RawMember<'_> {
    /// The key as it reads: escapes are decoded only where the key has any. A key whose escapes
    /// do not decode (a lone surrogate) is malformed, as a full parse would say.
    fn name(&self) -> Result<Cow<'_, str>, ScanError> {
        let inner = self
            .key
            .get(1..self.key.len().saturating_sub(1))
            .unwrap_or_default();
        if inner.as_bytes().contains(&b'\\') {
            serde_json::from_str::<String>(self.key)
                .map(Cow::Owned)
                .map_err(|_| ScanError::Malformed(self.value.start))
        } else {
            Ok(Cow::Borrowed(inner))
        }
    }
}

/// The members of the object `text`, in order; the walk ends at the first thing that is not a
/// member, with the byte it stopped at.
struct Members<'a> {
    text: &'a str,
    at: usize,
    first: bool,
    done: bool,
}

impl<'a> Members<'a> {
    fn of(text: &'a str) -> Result<Members<'a>, ScanError> {
        let bytes = text.as_bytes();
        let at = skip_ws(bytes, 0);
        if bytes.get(at) != Some(&b'{') {
            return Err(ScanError::NotAnObject);
        }
        Ok(Members {
            text,
            at: at + 1,
            first: true,
            done: false,
        })
    }

    fn step(&mut self) -> Result<Option<RawMember<'a>>, ScanError> {
        let bytes = self.text.as_bytes();
        let mut i = skip_ws(bytes, self.at);
        let bad = ScanError::Malformed;
        match bytes.get(i) {
            Some(b'}') => return Ok(None),
            Some(b',') if !self.first => i = skip_ws(bytes, i + 1),
            Some(b'"') if self.first => {}
            _ => return Err(bad(i)),
        }
        self.first = false;
        if bytes.get(i) != Some(&b'"') {
            return Err(bad(i));
        }
        let i_key = i;
        let key_end = string_end(bytes, i).ok_or(bad(i))?;
        let key = self.text.get(i..key_end).ok_or(bad(i))?;
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return Err(bad(i));
        }
        let start = skip_ws(bytes, i + 1);
        let end = value_end(bytes, start).ok_or(bad(start))?;
        self.at = end;
        Ok(Some(RawMember {
            key,
            key_at: i_key,
            value: start..end,
        }))
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = Result<RawMember<'a>, ScanError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step().transpose();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

/// The span of the value of member `key` of the object `text` (valid JSON, as a decoder left
/// it), or `None` when it has no such member. Two members of that name are an error: which one
/// a peer reads is up to the peer, so neither may be trusted.
pub fn member_span(text: &str, key: &str) -> Result<Option<Range<usize>>, ScanError> {
    let mut found = None;
    for member in Members::of(text)? {
        let member = member?;
        if member.name()? == key {
            if found.is_some() {
                return Err(ScanError::DuplicateKey(key.to_owned()));
            }
            found = Some(member.value);
        }
    }
    Ok(found)
}

/// Where one member of an object lies in its text: the key as written (quotes included) and
/// the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpans {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// Every member of the object `text` (valid JSON, as a decoder left it), in order: one walk,
/// for a reader that then looks up many members ([`indexed_member_span`]).
pub fn member_index(text: &str) -> Result<Vec<MemberSpans>, ScanError> {
    Members::of(text)?
        .map(|member| {
            member.map(|m| MemberSpans {
                key: m.key_at..m.key_at + m.key.len(),
                value: m.value,
            })
        })
        .collect()
}

/// [`member_span`] over the members [`member_index`] found in `text`: the same answer, the same
/// refusal of a name given twice, without walking the object again.
pub fn indexed_member_span(
    text: &str,
    members: &[MemberSpans],
    key: &str,
) -> Result<Option<Range<usize>>, ScanError> {
    let mut found = None;
    for member in members {
        let raw = RawMember {
            key: text.get(member.key.clone()).unwrap_or_default(),
            key_at: member.key.start,
            value: member.value.clone(),
        };
        if raw.name()? == key {
            if found.is_some() {
                return Err(ScanError::DuplicateKey(key.to_owned()));
            }
            found = Some(raw.value);
        }
    }
    Ok(found)
}

/// Which of `keys` are members of the object `text` (valid JSON, as a decoder left it).
pub fn members_present(text: &str, keys: &[&str]) -> Result<Vec<bool>, ScanError> {
    let mut present = vec![false; keys.len()];
    for member in Members::of(text)? {
        let member = member?;
        let name = member.name()?;
        if let Some(slot) = keys
            .iter()
            .position(|k| *k == name)
            .and_then(|i| present.get_mut(i))
        {
            *slot = true;
        }
    }
    Ok(present)
}

/// The spans of the elements of the array `text` (valid JSON, as a decoder left it), in order.
pub fn element_spans(text: &str) -> Result<Vec<Range<usize>>, ScanError> {
    let bytes = text.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'[') {
        return Err(ScanError::NotAnArray);
    }
    i = skip_ws(bytes, i + 1);
    let mut spans = Vec::new();
    if bytes.get(i) == Some(&b']') {
        return Ok(spans);
    }
    loop {
        let end = value_end(bytes, i).ok_or(ScanError::Malformed(i))?;
        spans.push(i..end);
        i = skip_ws(bytes, end);
        match bytes.get(i) {
            Some(b',') => i = skip_ws(bytes, i + 1),
            Some(b']') => return Ok(spans),
            _ => return Err(ScanError::Malformed(i)),
        }
    }
}

/// Whether some object in `text` (JSON as a decoder left it) may have a member named `key`, a
/// name of plain ASCII without quotes or backslashes. False only when `"key"` never appears and
/// no `\u` escape could spell it: a look over the bytes that lets a caller skip a walk that would
/// find nothing. A string value that reads `key` makes it true. On a hot path, keep a
/// [`NameProbe`] instead: this builds its searcher each time.
pub fn may_name(text: &str, key: &str) -> bool {
    NameProbe::new(key).may_be_named_in(text)
}

/// [`may_name`] for one name looked for again and again: the searcher for `"name"` is built
/// once (building it cost more than the small walk it spared, about 700 instructions).
pub struct NameProbe {
    quoted: memchr::memmem::Finder<'static>,
}

impl NameProbe {
    pub fn new(key: &str) -> NameProbe {
        let quoted = format!("\"{key}\"");
        NameProbe {
            quoted: memchr::memmem::Finder::new(quoted.as_bytes()).into_owned(),
        }
    }

    /// Whether some object in `text` may have a member of this name ([`may_name`]).
    pub fn may_be_named_in(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        memchr::memchr_iter(b'\\', bytes).any(|at| bytes.get(at + 1) == Some(&b'u'))
            || self.quoted.find(bytes).is_some()
    }
}

/// The raw text of member `key` of the top-level object in `text`, if it can be found before
/// anything malformed; the first of that name wins. For salvaging an id from a message too deep
/// to decode.
pub fn top_level_member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    for member in Members::of(text).ok()? {
        let member = member.ok()?;
        if member.name().ok()? == key {
            return text.get(member.value);
        }
    }
    None
}

#[cfg(test)]
mod tests;
