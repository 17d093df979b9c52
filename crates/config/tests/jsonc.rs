//! Properties of the JSONC reader behind `manifold import` (VS Code's `mcp.json` and
//! `settings.json` carry comments and trailing commas): generated documents, written once as
//! JSONC and once as the plain JSON a correct reader must see, with comments and trailing commas
//! at every place the format allows them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use manifold_config::import::jsonc::strip_jsonc;
use manifold_config::{ImportError, import};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Text for comments and strings, heavy in what could be mistaken for comment or string syntax.
fn tricky_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("//".to_owned()),
            Just("/*".to_owned()),
            Just("*/".to_owned()),
            Just("*".to_owned()),
            Just("/".to_owned()),
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just(",".to_owned()),
            Just("]".to_owned()),
            Just("}".to_owned()),
            Just("\n".to_owned()),
            Just("\r".to_owned()),
            Just("\t".to_owned()),
            Just("é".to_owned()),
            Just("😀".to_owned()),
            Just("\u{feff}".to_owned()),
            "[a-z ]{1,3}",
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Eighths are exact in binary, so every JSON reader reads them back to the same double.
        (-1_000_000i32..1_000_000).prop_map(|n| Value::from(f64::from(n) / 8.0)),
        tricky_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(tricky_text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// What may sit between two tokens.
#[derive(Debug, Clone)]
enum Piece {
    Space(String),
    Line(String),
    Block(String),
}

fn piece(comments: bool) -> BoxedStrategy<Piece> {
    let space = "[ \t\r\n]{0,3}".prop_map(Piece::Space);
    if !comments {
        return space.boxed();
    }
    prop_oneof![
        space,
        tricky_text().prop_map(|t| Piece::Line(t.replace('\n', " "))),
        // A block comment ends at the first `*/`, so its text cannot hold one.
        tricky_text().prop_map(|t| Piece::Block(t.replace("*/", "* /"))),
    ]
    .boxed()
}

/// Everything a document is written with: the gaps and trailing-comma choices, used in turn.
#[derive(Debug, Clone)]
struct Spelling {
    gaps: Vec<Vec<Piece>>,
    trailing_commas: Vec<bool>,
    bom: bool,
}

fn spelling(jsonc: bool) -> impl Strategy<Value = Spelling> {
    (
        prop::collection::vec(prop::collection::vec(piece(jsonc), 0..3), 1..16),
        prop::collection::vec(any::<bool>().prop_map(move |b| b && jsonc), 1..8),
        any::<bool>().prop_map(move |b| b && jsonc),
    )
        .prop_map(|(gaps, trailing_commas, bom)| Spelling {
            gaps,
            trailing_commas,
            bom,
        })
}

/// Where the writer cuts a document short, to leave something unterminated.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cut {
    Comment,
    String,
}

/// Writes a document twice: as JSONC (`text`) and as the JSON a reader must turn it into
/// (`blank`: each comment character and trailing comma replaced by as many spaces as it has
/// bytes, newlines kept, so every other byte stays at its offset).
struct Writer<'a> {
    spelling: &'a Spelling,
    gap: usize,
    container: usize,
    text: String,
    blank: String,
    /// Cut the document at this gap (counted from 0), and how.
    cut: Option<(usize, Cut)>,
    /// Byte offset of what was left open, once the cut happened.
    cut_at: Option<usize>,
}

impl<'a> Writer<'a> {
    fn new(spelling: &'a Spelling, cut: Option<(usize, Cut)>) -> Writer<'a> {
        Writer {
            spelling,
            gap: 0,
            container: 0,
            text: String::new(),
            blank: String::new(),
            cut,
            cut_at: None,
        }
    }

    fn both(&mut self, s: &str) {
        if self.cut_at.is_none() {
            self.text.push_str(s);
            self.blank.push_str(s);
        }
    }

    fn blanked(&mut self, s: &str) {
        if self.cut_at.is_none() {
            self.text.push_str(s);
            for c in s.chars() {
                if c == '\n' {
                    self.blank.push('\n');
                } else {
                    self.blank.push_str(&" ".repeat(c.len_utf8()));
                }
            }
        }
    }

    fn gap(&mut self) {
        let index = self.gap;
        self.gap += 1;
        if let Some((at, how)) = self.cut
            && at == index
            && self.cut_at.is_none()
        {
            let opened = self.text.len();
            match how {
                Cut::Comment => self.blanked("/* never closed, \"even with a quote"),
                Cut::String => self.both("\"never closed"),
            }
            self.cut_at = Some(opened);
            return;
        }
        let pieces = self.spelling.gaps[index % self.spelling.gaps.len()].clone();
        for piece in pieces {
            match piece {
                Piece::Space(s) => self.both(&s),
                Piece::Line(t) => self.blanked(&format!("//{t}\n")),
                Piece::Block(t) => self.blanked(&format!("/*{t}*/")),
            }
        }
    }

    fn trailing_comma(&mut self) {
        let index = self.container;
        self.container += 1;
        let commas = &self.spelling.trailing_commas;
        if commas[index % commas.len()] {
            self.blanked(",");
            self.gap();
        }
    }

    fn value(&mut self, value: &Value) {
        match value {
            Value::Array(items) => {
                self.both("[");
                self.gap();
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.both(",");
                        self.gap();
                    }
                    self.value(item);
                    self.gap();
                }
                if !items.is_empty() {
                    self.trailing_comma();
                }
                self.both("]");
            }
            Value::Object(members) => {
                self.both("{");
                self.gap();
                for (i, (name, item)) in members.iter().enumerate() {
                    if i > 0 {
                        self.both(",");
                        self.gap();
                    }
                    self.both(&serde_json::to_string(name).unwrap());
                    self.gap();
                    self.both(":");
                    self.gap();
                    self.value(item);
                    self.gap();
                }
                if !members.is_empty() {
                    self.trailing_comma();
                }
                self.both("}");
            }
            scalar => self.both(&serde_json::to_string(scalar).unwrap()),
        }
    }

    fn document(mut self, value: &Value) -> Self {
        self.gap();
        self.value(value);
        self.gap();
        if self.spelling.bom {
            self.text.insert(0, '\u{feff}');
        }
        self
    }
}

/// 1-based line and byte column of a byte offset, as `ImportError::NotJson` gives them.
fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = at - before.rfind('\n').map_or(0, |n| n + 1) + 1;
    (line, column)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn plain_json_is_read_exactly_as_written(v in value(), s in spelling(false)) {
        let w = Writer::new(&s, None).document(&v);
        prop_assert_eq!(strip_jsonc(&w.text), Ok(w.text.clone()));
        let read: Value = serde_json::from_str(&w.text).unwrap();
        prop_assert_eq!(read, v);
    }

    #[test]
    fn comments_and_trailing_commas_anywhere_legal_are_ignored(v in value(), s in spelling(true)) {
        let w = Writer::new(&s, None).document(&v);
        let stripped = strip_jsonc(&w.text).unwrap();
        let read: Value = serde_json::from_str(&stripped)
            .unwrap_or_else(|e| panic!("{e}\n{}\n---\n{stripped}", w.text));
        prop_assert_eq!(read, v);
    }

    /// So that a JSON error's line and column are those of the file the user has open.
    #[test]
    fn stripping_keeps_every_byte_at_its_offset(v in value(), s in spelling(true)) {
        let w = Writer::new(&s, None).document(&v);
        prop_assert_eq!(strip_jsonc(&w.text), Ok(w.blank));
    }

    #[test]
    fn an_unclosed_comment_is_an_error_at_the_comment(
        v in value(), s in spelling(true), at in any::<prop::sample::Index>(),
    ) {
        let gaps = Writer::new(&s, None).document(&v).gap;
        let w = Writer::new(&s, Some((at.index(gaps), Cut::Comment))).document(&v);
        let opened = w.cut_at.expect("every gap can be cut at");
        // Offsets are taken before the byte order mark goes in front, which no column counts.
        let body = w.text.trim_start_matches('\u{feff}');
        let (line, column) = line_and_column(body, opened);
        match import(&w.text, "mcp.json") {
            Err(ImportError::NotJson { line: l, column: c, reason, .. }) => {
                prop_assert_eq!((l, c), (line, column), "{}", w.text);
                prop_assert!(reason.contains("never closed"), "{}", reason);
            }
            other => prop_assert!(false, "{other:?} for\n{}", w.text),
        }
    }

    #[test]
    fn an_unclosed_string_is_an_error_with_a_position(
        v in value(), s in spelling(true), at in any::<prop::sample::Index>(),
    ) {
        let gaps = Writer::new(&s, None).document(&v).gap;
        let w = Writer::new(&s, Some((at.index(gaps), Cut::String))).document(&v);
        match import(&w.text, "mcp.json") {
            Err(ImportError::NotJson { line, column, .. }) => {
                prop_assert!(line >= 1 && line <= w.text.lines().count() + 1);
                prop_assert!(column >= 1, "{}", column);
            }
            other => prop_assert!(false, "{other:?} for\n{}", w.text),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}", bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = strip_jsonc(&text);
        let _ = import(&text, "mcp.json");
        let lossy = String::from_utf8_lossy(&bytes);
        let _ = strip_jsonc(&lossy);
        let _ = import(&lossy, "mcp.json");
    }
}
