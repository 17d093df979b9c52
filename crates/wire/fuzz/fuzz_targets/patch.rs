//! Fuzzes raw-JSON patching (`patch::set`, `Message::patch` and its wrappers): the gateway rewrites
//! a few members of messages it forwards, and every other byte must cross untouched. On valid
//! JSON the lookups for decoded text (`patch::decoded`, which walk only the key path's levels)
//! must answer exactly as the checked ones do.
//!
//! JSON comes either straight from the fuzzer or rendered from an arbitrary tree with odd
//! spacing, escaped keys and number forms, so valid documents are common.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use manifold_wire::Message;
use manifold_wire::depth::{MAX_JSON_DEPTH, max_depth};
use manifold_wire::patch::{Part, PatchError, decoded, get, locate, set};
use serde::de::IgnoredAny;

/// Keys the gateway patches, plus spellings that must be recognised as the same key.
#[derive(Arbitrary, Debug, Clone)]
enum Key {
    Name,
    NameEscaped,
    Meta,
    ProgressToken,
    Uri,
    Other(String),
}

impl Key {
    fn text(&self) -> String {
        match self {
            Key::Name | Key::NameEscaped => "name".into(),
            Key::Meta => "_meta".into(),
            Key::ProgressToken => "progressToken".into(),
            Key::Uri => "uri".into(),
            Key::Other(s) => s.clone(),
        }
    }

    fn json(&self) -> String {
        match self {
            Key::NameEscaped => r#""n\u0061me""#.into(),
            k => quote(&k.text()),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    /// A number written as the peer wrote it: fraction, exponent, huge.
    Number(u8),
    Str(String),
    Arr(Vec<Node>),
    Obj(Vec<(Key, Node)>),
    /// A value wrapped in many arrays or objects, to reach the nesting guard.
    Deep(u8, bool, Box<Node>),
}

const NUMBER_FORMS: [&str; 6] = [
    "1.0",
    "1e400",
    "-0",
    "1.50",
    "12345678901234567890123",
    "2E-3",
];
const SPACES: [&str; 4] = ["", " ", "\n\t", "\r\n  "];

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn render(
    node: &Node,
    depth: usize,
    spacing: &mut impl Iterator<Item = &'static str>,
    out: &mut String,
) {
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Node::Int(i) => out.push_str(&i.to_string()),
        Node::Number(n) => out.push_str(NUMBER_FORMS[usize::from(*n) % NUMBER_FORMS.len()]),
        Node::Str(s) => out.push_str(&quote(s)),
        Node::Deep(levels, arrays, inner) => {
            let (open, close) = if *arrays {
                ("[", "]")
            } else {
                (r#"{"d":"#, "}")
            };
            out.push_str(&open.repeat(usize::from(*levels)));
            render(inner, depth + usize::from(*levels), spacing, out);
            out.push_str(&close.repeat(usize::from(*levels)));
        }
        Node::Arr(_) | Node::Obj(_) if depth > 10 => out.push_str("{}"),
        Node::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(spacing.next().unwrap_or(""));
                render(item, depth + 1, spacing, out);
            }
            out.push(']');
        }
        Node::Obj(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(spacing.next().unwrap_or(""));
                out.push_str(&k.json());
                out.push(':');
                out.push_str(spacing.next().unwrap_or(""));
                render(v, depth + 1, spacing, out);
            }
            out.push_str(spacing.next().unwrap_or(""));
            out.push('}');
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Doc {
    Raw(String),
    Tree(Node, Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    doc: Doc,
    path: Vec<Key>,
    value: Doc,
}

fn text_of(doc: &Doc) -> String {
    match doc {
        Doc::Raw(s) => s.clone(),
        Doc::Tree(node, spaces) => {
            let mut spacing = spaces
                .iter()
                .map(|b| SPACES[usize::from(*b) % SPACES.len()]);
            let mut out = String::new();
            render(node, 0, &mut spacing, &mut out);
            out
        }
    }
}

fn is_json(s: &str) -> bool {
    serde_json::from_str::<IgnoredAny>(s).is_ok()
        && max_depth(s.as_bytes(), MAX_JSON_DEPTH) <= MAX_JSON_DEPTH
}

fn json_trim(s: &str) -> &str {
    s.trim_matches([' ', '\t', '\n', '\r'])
}

/// Checks `out` is `before` with exactly one region replaced, and returns that region's bounds
/// in `before` (prefix length, suffix length).
fn one_region(before: &str, out: &str) -> (usize, usize) {
    let (a, b) = (before.as_bytes(), out.as_bytes());
    let p = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - p;
    let s = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    (p, s)
}

/// A result with its error reduced to its kind: the two lookups word a malformed key apart.
fn same_kind<T: Clone>(r: &Result<T, PatchError>) -> Result<T, std::mem::Discriminant<PatchError>> {
    r.clone().map_err(|e| std::mem::discriminant(&e))
}

fn check_set(json: &str, path: &[String], value: &str) {
    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
    let value_ok = is_json(value);
    let before = locate(json, &keys);
    let result = set(json, &keys, value);
    assert_eq!(
        same_kind(&decoded::locate(json, &keys)),
        same_kind(&before),
        "decoded and checked lookups disagree"
    );
    assert_eq!(
        same_kind(&decoded::set(json, &keys, value)),
        same_kind(&result),
        "decoded and checked patches disagree"
    );
    let out = match result {
        Ok(out) => out,
        Err(PatchError::BadReplacement(_)) => {
            assert!(!value_ok, "a valid replacement was refused");
            return;
        }
        Err(PatchError::Malformed(why)) => panic!("valid JSON was called malformed: {why}"),
        Err(PatchError::NotAnObject(..) | PatchError::DuplicateKey(_)) => return,
        Err(e) => panic!("set cannot fail this way: {e}"),
    };
    assert!(value_ok, "an invalid replacement was accepted");
    assert!(
        serde_json::from_str::<IgnoredAny>(&out).is_ok(),
        "the patched JSON is invalid: {out}"
    );
    if keys.is_empty() {
        assert_eq!(out, value);
        return;
    }
    // `set` may nest past the guard (Message::patch refuses that); `get` then refuses to read.
    if max_depth(out.as_bytes(), MAX_JSON_DEPTH) <= MAX_JSON_DEPTH {
        let found = get(&out, &keys).expect("the patched JSON can be read");
        assert_eq!(
            found,
            Some(json_trim(value)),
            "the member does not hold the new value"
        );
    }
    match before.expect("locate agrees with set on valid JSON") {
        Some(span) => {
            let expected = format!("{}{}{}", &json[..span.start], value, &json[span.end..]);
            assert_eq!(out, expected, "bytes outside the patched member changed");
        }
        None => {
            // Insertion: every original byte is still there, around one inserted run.
            let (p, s) = one_region(json, &out);
            assert!(
                p + s >= json.len(),
                "bytes outside the inserted member changed"
            );
        }
    }
}

fn check_message(params: &str, path: &[String], value: &str) {
    let prefix = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"#;
    let suffix = r#","x":1.0}"#;
    // Text that is not one JSON value could smuggle in members of its own (`{}, "y": 2`).
    if !is_json(params) {
        return;
    }
    let Ok(m) = Message::decode_str(&format!("{prefix}{params}{suffix}")) else {
        return;
    };
    // The params member is the value without the whitespace around it; that whitespace belongs
    // to the envelope and must survive the patch too.
    let raw = json_trim(params);
    let lead = params.len() - params.trim_start_matches([' ', '\t', '\n', '\r']).len();
    assert_eq!(m.params(), Some(raw));
    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
    let patched = m.patch(Part::Params, &keys, value);
    let expected = set(raw, &keys, value);
    match (patched, expected) {
        (Ok(p), Ok(new_params)) => {
            let again = Message::decode_str(p.as_str()).expect("a patched message must decode");
            assert_eq!(again, p);
            assert_eq!(p.params(), Some(json_trim(&new_params)));
            let (before, after) = (&params[..lead], &params[lead + raw.len()..]);
            assert_eq!(
                p.as_str(),
                format!("{prefix}{before}{}{after}{suffix}", json_trim(&new_params)),
                "bytes outside the patched member changed"
            );
        }
        (Err(PatchError::Broken(_)), Ok(_)) => {}
        (Err(a), Err(b)) => assert_eq!(std::mem::discriminant(&a), std::mem::discriminant(&b)),
        (p, e) => panic!("Message::patch and set disagree: {p:?} vs {e:?}"),
    }
    for r in [m.with_name("t\u{e9}"), m.with_uri("file:///a\"b")]
        .into_iter()
        .flatten()
    {
        assert_eq!(Message::decode_str(r.as_str()).as_ref(), Ok(&r));
    }
    if let Ok(r) = m.with_progress_token("\"p-1\"") {
        assert_eq!(r.params_raw(&["_meta", "progressToken"]), Some("\"p-1\""));
    }
}

fuzz_target!(|input: Input| {
    let json = text_of(&input.doc);
    let value = text_of(&input.value);
    let path: Vec<String> = input.path.iter().take(4).map(Key::text).collect();
    if is_json(&json) {
        check_set(&json, &path, &value);
    }
    check_message(&json, &path, &value);
});
