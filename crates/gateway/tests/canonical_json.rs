//! Properties of the RFC 8785 canonicalizer that tool pins are computed from, over generated
//! values each written in many spellings (spacing, member order, number forms, escapes):
//! canonical text is a fixed point, does not depend on the spelling, and is byte for byte what
//! the reference writes. The reference is JavaScript itself (the machine's Node): RFC 8785 is
//! defined as ECMAScript's `JSON.stringify` with members sorted by UTF-16 code units.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{LazyLock, Mutex};

use manifold_gateway::pins::{
    MAX_PLAIN_INTEGER_DIGITS, canonical_form, canonicalize, ecmascript_number, is_canonical,
};
use proptest::prelude::*;

/// Reads one JSON string per line (the text to canonicalize) and writes its canonical text, or
/// a number's `String(x)` for lines starting with `#`.
const REFERENCE: &str = r#"
const canon = (v) => Array.isArray(v) ? '[' + v.map(canon).join(',') + ']'
  : (v !== null && typeof v === 'object')
    ? '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}'
    : JSON.stringify(v);
require('readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const out = line.startsWith('#') ? String(Number(line.slice(1))) : canon(JSON.parse(JSON.parse(line)));
  process.stdout.write(JSON.stringify(out) + '\n');
});
"#;

struct Reference {
    _child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

static NODE: LazyLock<Mutex<Reference>> = LazyLock::new(|| {
    let mut child = Command::new(manifold_testkit::node().unwrap())
        .args(["-e", REFERENCE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = child.stdin.take().unwrap();
    let output = BufReader::new(child.stdout.take().unwrap());
    Mutex::new(Reference {
        _child: child,
        input,
        output,
    })
});

fn ask_node(line: &str) -> String {
    let mut node = NODE.lock().unwrap();
    writeln!(node.input, "{line}").unwrap();
    node.input.flush().unwrap();
    let mut answer = String::new();
    node.output.read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap()
}

/// A JSON value with unique member names (RFC 8785 refuses duplicates).
#[derive(Debug, Clone)]
enum Tree {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Tree>),
    Object(Vec<(String, Tree)>),
}

fn finite_double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        any::<i64>().prop_map(|i| i as f64),
        (-1000i32..1000, -30i32..30).prop_map(|(m, e)| f64::from(m) * 10f64.powi(e)),
    ]
    .prop_filter("JSON has no NaN or infinity", |x| x.is_finite())
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,6}",
        "[\\x00-\\x1f\"\\\\/a\u{7f}\u{80}\u{2028}\u{fffd}\u{10000}-\u{10ffff}]{0,6}",
    ]
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = prop_oneof![
        Just(Tree::Null),
        any::<bool>().prop_map(Tree::Bool),
        finite_double().prop_map(Tree::Number),
        text().prop_map(Tree::String),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Tree::Array),
            prop::collection::btree_map(text(), inner, 0..5)
                .prop_map(|m| Tree::Object(m.into_iter().collect())),
        ]
    })
}

/// A value the fast check must recognize once canonical: strings with nothing to escape,
/// integers of at most `MAX_PLAIN_INTEGER_DIGITS` digits.
fn plain_tree() -> impl Strategy<Value = Tree> {
    let limit = 10i64.pow(u32::try_from(MAX_PLAIN_INTEGER_DIGITS).unwrap()) - 1;
    let plain_text = "[^\\x00-\\x1f\"\\\\]{0,6}";
    let leaf = prop_oneof![
        Just(Tree::Null),
        any::<bool>().prop_map(Tree::Bool),
        (-limit..=limit).prop_map(|i| Tree::Number(i as f64)),
        plain_text.prop_map(Tree::String),
    ];
    leaf.prop_recursive(4, 40, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Tree::Array),
            prop::collection::btree_map(plain_text, inner, 0..5)
                .prop_map(|m| Tree::Object(m.into_iter().collect())),
        ]
    })
}

/// Writes a tree one of many ways, every choice drawn from `seed` (a xorshift stream).
struct Speller {
    seed: u64,
    out: String,
    /// No whitespace, no optional escapes, numbers as Rust writes them: spellings that differ
    /// from canonical text in little more than member order.
    compact: bool,
}

impl Speller {
    fn choose(&mut self, n: u64) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed % n
    }

    fn space(&mut self) {
        if self.compact {
            return;
        }
        for _ in 0..self.choose(3) {
            let c = [" ", "\t", "\n", "\r"][self.choose(4) as usize];
            self.out.push_str(c);
        }
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            let escape = !self.compact && self.choose(3) == 0;
            match c {
                '"' | '\\' => {
                    self.out.push('\\');
                    self.out.push(c);
                }
                '/' if escape => self.out.push_str("\\/"),
                c if escape || u32::from(c) < 0x20 => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let hex = format!("\\u{unit:04x}");
                        let hex = if self.choose(2) == 0 {
                            hex.to_uppercase().replace("\\U", "\\u")
                        } else {
                            hex
                        };
                        self.out.push_str(&hex);
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    fn number(&mut self, x: f64) {
        let form = if self.compact { 0 } else { self.choose(4) };
        let spelled = match form {
            0 => format!("{x}"),
            1 => format!("{x:e}"),
            2 => format!("{x:.17e}"),
            _ => format!("{x:E}"),
        };
        self.out.push_str(&spelled);
    }

    fn tree(&mut self, tree: &Tree) {
        self.space();
        match tree {
            Tree::Null => self.out.push_str("null"),
            Tree::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Tree::Number(x) => self.number(*x),
            Tree::String(s) => self.string(s),
            Tree::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.tree(item);
                }
                self.space();
                self.out.push(']');
            }
            Tree::Object(members) => {
                let mut order: Vec<&(String, Tree)> = members.iter().collect();
                for i in (1..order.len()).rev() {
                    let j = self.choose(i as u64 + 1) as usize;
                    order.swap(i, j);
                }
                self.out.push('{');
                for (i, (name, item)) in order.into_iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.space();
                    self.string(name);
                    self.space();
                    self.out.push(':');
                    self.tree(item);
                }
                self.space();
                self.out.push('}');
            }
        }
        self.space();
    }
}

fn spell(tree: &Tree, seed: u64) -> String {
    spell_as(tree, seed, false)
}

fn spell_as(tree: &Tree, seed: u64, compact: bool) -> String {
    let mut speller = Speller {
        seed: seed | 1,
        out: String::new(),
        compact,
    };
    speller.tree(tree);
    speller.out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn canonical_text_is_a_fixed_point(t in tree(), seed in any::<u64>()) {
        let canonical = canonicalize(&spell(&t, seed)).unwrap();
        prop_assert_eq!(canonicalize(&canonical), Ok(canonical.clone()));
    }

    #[test]
    fn spellings_of_one_value_have_one_canonical_text(t in tree(), a in any::<u64>(), b in any::<u64>()) {
        let (one, other) = (spell(&t, a), spell(&t, b));
        prop_assert_eq!(canonicalize(&one), canonicalize(&other), "{}\n{}", one, other);
    }

    #[test]
    fn canonical_text_is_what_javascript_writes(t in tree(), seed in any::<u64>()) {
        let text = spell(&t, seed);
        let reference = ask_node(&serde_json::to_string(&text).unwrap());
        prop_assert_eq!(canonicalize(&text).unwrap(), reference, "{}", text);
    }

    #[test]
    fn every_double_is_written_as_ecmascript_writes_it(bits in prop::collection::vec(any::<u64>(), 64)) {
        for x in bits.into_iter().map(f64::from_bits).filter(|x| x.is_finite()) {
            // `{:e}` is Rust's shortest round-trip form: it reads back to exactly x in JavaScript too.
            prop_assert_eq!(ecmascript_number(x), ask_node(&format!("#{x:e}")), "bits {:#018x}", x.to_bits());
        }
    }

    #[test]
    fn the_fast_check_never_calls_text_canonical_that_is_not(
        t in prop_oneof![tree(), plain_tree()], seed in any::<u64>(), at in any::<prop::sample::Index>(), insert in "\\PC{0,3}",
    ) {
        let (text, compact) = (spell(&t, seed), spell_as(&t, seed, true));
        let canonical = canonicalize(&text).unwrap();
        let mut cut = at.index(canonical.len() + 1);
        while !canonical.is_char_boundary(cut) {
            cut -= 1;
        }
        let damaged = [&canonical[..cut], insert.as_str(), &canonical[cut..]].concat();
        let candidates = [text.as_str(), compact.as_str(), canonical.as_str(), &canonical[..cut], damaged.as_str()];
        for candidate in candidates {
            if is_canonical(candidate) {
                let full = canonicalize(candidate);
                prop_assert_eq!(full.as_deref(), Ok(candidate), "called canonical: {}", candidate);
            }
            prop_assert_eq!(canonical_form(candidate).map(|c| c.into_owned()), canonicalize(candidate));
        }
    }

    #[test]
    fn the_fast_check_knows_plain_canonical_text(t in plain_tree(), seed in any::<u64>()) {
        let canonical = canonicalize(&spell(&t, seed)).unwrap();
        prop_assert!(is_canonical(&canonical), "plain canonical text not recognized: {}", canonical);
    }

    #[test]
    fn damaged_text_is_an_error_or_canonical_never_a_panic(
        t in tree(), seed in any::<u64>(), at in any::<prop::sample::Index>(), insert in "\\PC{0,3}",
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let text = spell(&t, seed);
        let mut cut = at.index(text.len() + 1);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let damaged = [&text[..cut], insert.as_str(), &text[cut..]].concat();
        for candidate in [&text[..cut], damaged.as_str(), &String::from_utf8_lossy(&bytes)] {
            if let Ok(canonical) = canonicalize(candidate) {
                prop_assert_eq!(canonicalize(&canonical), Ok(canonical.clone()));
            }
        }
    }
}
