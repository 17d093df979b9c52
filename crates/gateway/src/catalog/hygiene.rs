//! Hygiene of the text upstreams write for people and models: the `title` and `description` of
//! tools, prompts, resources and templates.
//!
//! Those strings reach a model's context and a person's screen verbatim, so they are where tool
//! poisoning hides: direction overrides that show one text and mean another, terminal control
//! sequences, invisible characters that smuggle instructions, and descriptions long enough to
//! crowd out everything else. This is the one deliberate exception to "forward what Manifold does
//! not own untouched": only those two top-level string values are patched (with
//! `manifold_wire::patch`), every other byte of the entry stays as the server sent it, and an
//! entry with nothing to clean is not touched at all.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use manifold_wire::id::json_string;
use manifold_wire::patch;

/// Longest description offered, in characters (Unicode scalar values), the cut mark included.
/// Real servers stay well below it (server-sequential-thinking, among the longest, is about 2,800).
pub const MAX_DESCRIPTION_CHARS: usize = 4096;
/// Longest title offered, in characters, the cut mark included. Titles are display names.
pub const MAX_TITLE_CHARS: usize = 256;
/// Ends a text that was cut, so a reader knows there was more.
pub const CUT_MARK: char = '…';
/// Cleanings remembered as already logged (per process) before the memory starts afresh.
const MAX_LOGGED_CLEANINGS: usize = 10_000;

/// The cleaned members of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Title,
    Description,
}

impl Member {
    pub const ALL: [Member; 2] = [Member::Title, Member::Description];

    pub fn key(self) -> &'static str {
        match self {
            Member::Title => "title",
            Member::Description => "description",
        }
    }

    /// The member's length bound.
    pub fn max_chars(self) -> usize {
        match self {
            Member::Title => MAX_TITLE_CHARS,
            Member::Description => MAX_DESCRIPTION_CHARS,
        }
    }
}

/// Why a character is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwanted {
    /// C0 and C1 controls and DEL, except tab, line feed and a carriage return before a line
    /// feed: terminal escapes, bells, backspaces that overprint text.
    Control,
    /// Bidirectional controls (the Unicode Bidi_Control property): U+061C, U+200E, U+200F,
    /// U+202A..U+202E, U+2066..U+2069. They make text display in another order than it reads.
    Direction,
    /// Invisible characters that carry no text of their own: U+200B, U+2060..U+2064, U+FEFF and
    /// the tag characters U+E0000..U+E007F (which can spell hidden ASCII).
    Invisible,
}

/// What is removed, and why.
pub fn unwanted(c: char) -> Option<Unwanted> {
    match c {
        '\t' | '\n' => None,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => Some(Unwanted::Control),
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
            Some(Unwanted::Direction)
        }
        '\u{200b}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{e0000}'..='\u{e007f}' => {
            Some(Unwanted::Invisible)
        }
        _ => None,
    }
}

/// What cleaning did to one string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cleaning {
    pub controls: usize,
    pub direction: usize,
    pub invisible: usize,
    /// The length (in characters, after removals) of a text that was cut to its bound.
    pub cut_from: Option<usize>,
}

impl Cleaning {
    pub fn is_clean(&self) -> bool {
        *self == Cleaning::default()
    }

    /// For logs: "removed 2 direction-changing, 1 control character(s); cut from 9000 to 4096".
    pub fn summary(&self, max_chars: usize) -> String {
        let removed: Vec<String> = [
            (self.direction, "direction-changing"),
            (self.controls, "control"),
            (self.invisible, "invisible"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        let mut parts = Vec::new();
        if !removed.is_empty() {
            parts.push(format!("removed {} character(s)", removed.join(", ")));
        }
        if let Some(from) = self.cut_from {
            parts.push(format!("cut from {from} to {max_chars} characters"));
        }
        parts.join("; ")
    }
}

/// `text` without unwanted characters and within `max_chars` (the cut mark included).
pub fn clean_text(text: &str, max_chars: usize) -> (String, Cleaning) {
    let mut report = Cleaning::default();
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            out.push(c);
            continue;
        }
        match unwanted(c) {
            None => out.push(c),
            Some(Unwanted::Control) => report.controls += 1,
            Some(Unwanted::Direction) => report.direction += 1,
            Some(Unwanted::Invisible) => report.invisible += 1,
        }
    }
    let count = out.chars().count();
    if count > max_chars {
        report.cut_from = Some(count);
        out = out
            .chars()
            .take(max_chars.saturating_sub(1))
            .chain(std::iter::once(CUT_MARK))
            .collect();
    }
    (out, report)
}

/// What cleaning one entry did, member by member (only members that changed).
pub type EntryCleaning = Vec<(Member, Cleaning)>;

/// Why an entry could not be cleaned, so it is not offered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its {member} could not be read or rewritten ({detail})")]
pub struct Uncleanable {
    pub member: &'static str,
    pub detail: String,
}

/// The entry with its title and description cleaned; `Ok(None)` when there was nothing to clean
/// (the entry is then offered byte for byte). A member that is present but cannot be read or
/// patched (it appears twice, say) makes the entry uncleanable: a client might read the copy
/// Manifold did not check.
pub fn clean_entry(raw: &str) -> Result<Option<(String, EntryCleaning)>, Uncleanable> {
    let mut current: Option<String> = None;
    let mut report = Vec::new();
    for member in Member::ALL {
        let text = current.as_deref().unwrap_or(raw);
        let value = patch::get_str(text, &[member.key()]).map_err(|e| Uncleanable {
            member: member.key(),
            detail: e.to_string(),
        })?;
        let Some(value) = value else {
            continue;
        };
        let (cleaned, cleaning) = clean_text(&value, member.max_chars());
        if cleaning.is_clean() {
            continue;
        }
        let patched =
            patch::set(text, &[member.key()], &json_string(&cleaned)).map_err(|e| Uncleanable {
                member: member.key(),
                detail: e.to_string(),
            })?;
        current = Some(patched);
        report.push((member, cleaning));
    }
    Ok(current.map(|c| (c, report)))
}

static LOGGED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

/// Whether this exact cleaning has not been logged yet in this process (catalogs are rebuilt
/// often; the same finding is worth one line).
fn first_time(key: &(&str, &str, &str, &str)) -> bool {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    let digest = hasher.finish();
    let mut logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    let set = logged.get_or_insert_with(HashSet::new);
    if set.len() >= MAX_LOGGED_CLEANINGS {
        set.clear();
    }
    set.insert(digest)
}

/// Cleans one catalog entry for offering, logging what changed. `kind` is "tool", "prompt",
/// "resource" or "template", `name` its upstream name or URI. `None`: do not offer it.
pub fn offered_entry<'a>(
    server: &str,
    kind: &str,
    name: &str,
    raw: &'a str,
) -> Option<std::borrow::Cow<'a, str>> {
    match clean_entry(raw) {
        Ok(None) => Some(std::borrow::Cow::Borrowed(raw)),
        Ok(Some((cleaned, report))) => {
            if first_time(&(server, kind, name, raw)) {
                for (member, cleaning) in &report {
                    tracing::warn!(
                        server,
                        kind,
                        name,
                        member = member.key(),
                        "cleaned the {} of {kind} {name:?} of server {server:?}: {}",
                        member.key(),
                        cleaning.summary(member.max_chars())
                    );
                }
            }
            Some(std::borrow::Cow::Owned(cleaned))
        }
        Err(e) => {
            if first_time(&(server, kind, name, raw)) {
                tracing::warn!(server, kind, name, error = %e, "not offering {kind} {name:?} of server {server:?}: {e}");
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn direction_controls_invisibles_and_controls_are_removed() {
        let text = "Reads a file.\u{202e}txt.exe\u{202c} \u{2066}x\u{2069}\u{200b}\u{7}\u{1b}[31m\u{e0041}\u{feff}done";
        let (clean, report) = clean_text(text, MAX_DESCRIPTION_CHARS);
        assert_eq!(clean, "Reads a file.txt.exe x[31mdone");
        assert_eq!(
            report,
            Cleaning {
                controls: 2,
                direction: 4,
                invisible: 3,
                cut_from: None
            }
        );
        assert_eq!(
            report.summary(MAX_DESCRIPTION_CHARS),
            "removed 4 direction-changing, 2 control, 3 invisible character(s)"
        );
    }

    #[test]
    fn line_breaks_tabs_and_ordinary_text_stay() {
        let text = "Line one\r\nline two\n\tindented; emoji \u{1f600}, joiner \u{200d}, Hebrew \u{5d0}, ZWNJ \u{200c}";
        let (clean, report) = clean_text(text, MAX_DESCRIPTION_CHARS);
        assert_eq!(clean, text);
        assert!(report.is_clean());
        let (clean, report) = clean_text("over\rprint", MAX_DESCRIPTION_CHARS);
        assert_eq!((clean.as_str(), report.controls), ("overprint", 1));
    }

    #[test]
    fn long_text_is_cut_to_exactly_its_bound_with_a_mark() {
        let long = "é".repeat(MAX_DESCRIPTION_CHARS + 100);
        let (clean, report) = clean_text(&long, MAX_DESCRIPTION_CHARS);
        assert_eq!(clean.chars().count(), MAX_DESCRIPTION_CHARS);
        assert!(clean.ends_with(CUT_MARK));
        assert_eq!(report.cut_from, Some(MAX_DESCRIPTION_CHARS + 100));
        let exact = "a".repeat(MAX_TITLE_CHARS);
        assert_eq!(clean_text(&exact, MAX_TITLE_CHARS).0, exact);
    }

    #[test]
    fn a_clean_entry_is_left_byte_for_byte() {
        let raw = r#"{"name":"echo", "description":"Fine \u0041 text","x":1.0}"#;
        assert_eq!(clean_entry(raw), Ok(None));
    }

    #[test]
    fn only_title_and_description_values_are_patched() {
        let raw = r#"{"name":"t\u202e","title":"Ti\u0007tle","description":"D\u202eesc","inputSchema":{"description":"in\u202eside"},"n":1.0}"#;
        let (cleaned, report) = clean_entry(raw).unwrap().unwrap();
        assert_eq!(
            cleaned,
            r#"{"name":"t\u202e","title":"Title","description":"Desc","inputSchema":{"description":"in\u202eside"},"n":1.0}"#
        );
        assert_eq!(
            report.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
            [Member::Title, Member::Description]
        );
    }

    #[test]
    fn non_string_members_are_left_alone_and_duplicates_are_refused() {
        assert_eq!(clean_entry(r#"{"name":"x","description":42}"#), Ok(None));
        let twice = r#"{"name":"x","description":"ok","description":"\u202ehidden"}"#;
        assert_eq!(clean_entry(twice).unwrap_err().member, "description");
        assert!(offered_entry("s", "tool", "x", twice).is_none());
    }
}
