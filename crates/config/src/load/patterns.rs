//! Lists of name patterns as the file writes them (`[[rules]]`, `[toolsets.NAME]`,
//! `[[rate_limits.tools]]`, a server's `tools` and `idempotent_tools`), checked by the gateway's
//! one compiler (`manifold_gateway::patterns`), so a pattern that loads here is one the gateway
//! compiles, meaning the same thing. This file only places each bad pattern in the file and says
//! what to write instead.

use manifold_gateway::patterns::{BadPattern, NamePatterns};

use super::reader::{Item, Reader, Show, Text};

/// What to write instead of a pattern that is not one.
pub(crate) const PATTERN_FIX: &str = "patterns use * (any characters), ? (one character), [abc] and {a,b}; write [*] to match a literal *";

/// Reports `bad` at the text of the list `texts` it names, or at the whole list (`field`,
/// `item`) when it names no single pattern.
pub(crate) fn report_bad(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    texts: &[Text],
    bad: &BadPattern,
    fix: &str,
) {
    let problem = format!("is not a valid pattern ({})", bad.reason);
    match bad.index.and_then(|index| texts.get(index)) {
        Some(text) => reader.report_text(&text.field, text, problem, fix),
        None => reader.report(&item.span(), field, None, problem, fix),
    }
}

/// Checks the patterns `texts` as the gateway will compile them, reporting every bad one with
/// `fix`; the compiled list when all are good.
pub(crate) fn check_patterns(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    texts: &[Text],
    fix: &str,
) -> Option<NamePatterns> {
    let values = texts.iter().map(|t| t.value.clone()).collect();
    match NamePatterns::compile_all(values) {
        Ok(compiled) => Some(compiled),
        Err(bad) => {
            for b in &bad {
                report_bad(reader, field, item, texts, b, fix);
            }
            None
        }
    }
}

/// Reads a list of patterns at `field`, reporting every one the gateway could not compile; the
/// good ones, as written. (A bad pattern whose value came from a reference that could not be
/// resolved, on a disabled server, is left out without a report.)
pub(crate) fn read_patterns(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    example: &str,
) -> Vec<String> {
    let texts = reader
        .string_list(field, item, Show::Value, example)
        .unwrap_or_default();
    let values: Vec<String> = texts.iter().map(|t| t.value.clone()).collect();
    let bad = match NamePatterns::compile_all(values.clone()) {
        Ok(_) => return values,
        Err(bad) => bad,
    };
    for b in &bad {
        report_bad(reader, field, item, &texts, b, PATTERN_FIX);
    }
    values
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !bad.iter().any(|b| b.index == Some(*i)))
        .map(|(_, v)| v)
        .collect()
}
