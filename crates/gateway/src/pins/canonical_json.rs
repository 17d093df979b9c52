//! RFC 8785 (JSON Canonicalization Scheme) text of JSON text, so that a pin is a property of what
//! a tool definition means, not of how one server happened to spell it (key order, spaces, `1.0`
//! against `1`, escapes).
//!
//! Written here rather than taken from a crate, and with its own small parser rather than
//! `serde_json::Value`: pins must never change because a dependency (or a cargo feature another
//! crate switches on, such as serde_json's `float_roundtrip`) changed how numbers are read or
//! written. Numbers are read with Rust's correctly rounded `f64` parsing and written as
//! ECMAScript's `Number.prototype.toString` does; duplicate member names, which RFC 8785 forbids,
//! are refused. Total: every input gives canonical text or a typed error, never a panic.

use std::borrow::Cow;

/// Deepest nesting read; tool definitions are shallow, and the recursion must stay bounded.
pub const MAX_CANONICAL_DEPTH: usize = 128;
/// Digits of the exact decimal expansion of a double (at most 767 are significant).
const EXACT_DIGITS: usize = 800;

/// Why JSON text has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    #[error("not valid JSON at byte {0}")]
    Syntax(usize),
    #[error(
        "the number at byte {0} is beyond what an IEEE 754 double holds, which RFC 8785 requires"
    )]
    NotFinite(usize),
    #[error("the member name {0:?} appears twice in one object, which RFC 8785 forbids")]
    DuplicateName(String),
    #[error("nested deeper than {MAX_CANONICAL_DEPTH}")]
    TooDeep,
    #[error("a \\u escape at byte {0} is a lone surrogate, which is not Unicode text")]
    LoneSurrogate(usize),
}

/// A parsed JSON value, members in their original order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value of an object's member.
    pub fn member(&self, name: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Parses JSON text (one value, surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Json, CanonicalError> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    let value = parser.value(0)?;
    parser.skip_space();
    if parser.at != parser.bytes.len() {
        return Err(CanonicalError::Syntax(parser.at));
    }
    Ok(value)
}

/// The canonical text of JSON text.
pub fn canonicalize(text: &str) -> Result<String, CanonicalError> {
    Ok(to_canonical(&parse(text)?))
}

/// The canonical text of JSON text, borrowed when the text is canonical already (arguments
/// written by most clients are: compact, members sorted, plain strings and integers), so the
/// audit digest of a call's arguments costs a scan instead of a parse and a rewrite.
pub fn canonical_form(text: &str) -> Result<Cow<'_, str>, CanonicalError> {
    if is_canonical(text) {
        return Ok(Cow::Borrowed(text));
    }
    canonicalize(text).map(Cow::Owned)
}

/// Whether `text` is its own canonical text, by a scan that allocates nothing. It answers
/// `true` only for the plain case (no whitespace; strings without escapes or control
/// characters; integers of at most [`MAX_PLAIN_INTEGER_DIGITS`] digits; members in strictly
/// ascending UTF-16 order) and `false` for anything else, canonical or not, which then takes
/// the full path: a `true` is always right, a `false` only costs time.
pub fn is_canonical(text: &str) -> bool {
    let mut scan = PlainScan {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    scan.value(0) && scan.at == scan.bytes.len()
}

/// Digits of the longest integer the scan accepts as canonical: every integer below 10^15 is
/// exactly a double and ECMAScript writes it digit for digit.
pub const MAX_PLAIN_INTEGER_DIGITS: usize = 15;

/// The scan behind [`is_canonical`].
struct PlainScan<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl<'a> PlainScan<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn value(&mut self, depth: usize) -> bool {
        if depth > MAX_CANONICAL_DEPTH {
            return false;
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().is_some(),
            Some(b't') => self.word("true"),
            Some(b'f') => self.word("false"),
            Some(b'n') => self.word("null"),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => false,
        }
    }

    fn word(&mut self, word: &str) -> bool {
        let found = self.bytes.get(self.at..self.at + word.len()) == Some(word.as_bytes());
        if found {
            self.at += word.len();
        }
        found
    }

    /// `0`, or a non-zero integer without leading zeros (so never `-0`, which is written `0`).
    fn integer(&mut self) -> bool {
        let negative = self.eat(b'-');
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        let digits = self.bytes.get(start..self.at).unwrap_or_default();
        let plain = match digits {
            [b'0'] => !negative,
            [b'1'..=b'9', ..] => digits.len() <= MAX_PLAIN_INTEGER_DIGITS,
            _ => false,
        };
        plain && !matches!(self.peek(), Some(b'.' | b'e' | b'E'))
    }

    /// A string with nothing to escape: its contents, else `None`.
    fn string(&mut self) -> Option<&'a str> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        loop {
            match self.peek()? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
        let contents = self.text.get(start..self.at);
        self.at += 1;
        contents
    }

    fn array(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b']') {
            return true;
        }
        loop {
            if !self.value(depth + 1) {
                return false;
            }
            if self.eat(b']') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        self.at += 1;
        if self.eat(b'}') {
            return true;
        }
        let mut previous: Option<&'a str> = None;
        loop {
            let Some(name) = self.string() else {
                return false;
            };
            // Strictly ascending: sorted, and no name twice (which has no canonical form).
            if previous.is_some_and(|p| !utf16_less(p, name)) {
                return false;
            }
            previous = Some(name);
            if !self.eat(b':') || !self.value(depth + 1) {
                return false;
            }
            if self.eat(b'}') {
                return true;
            }
            if !self.eat(b',') {
                return false;
            }
        }
    }
}

/// `a < b` in UTF-16 code units (RFC 8785 3.2.3); for ASCII names, as bytes.
fn utf16_less(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a < b;
    }
    a.encode_utf16().lt(b.encode_utf16())
}

/// The canonical text of a parsed value.
pub fn to_canonical(value: &Json) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), CanonicalError> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(CanonicalError::Syntax(self.at))
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, CanonicalError> {
        if self.bytes.get(self.at..self.at + word.len()) == Some(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(CanonicalError::Syntax(self.at))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, CanonicalError> {
        if depth > MAX_CANONICAL_DEPTH {
            return Err(CanonicalError::TooDeep);
        }
        self.skip_space();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(CanonicalError::Syntax(self.at)),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, CanonicalError> {
        self.expect(b'{')?;
        let mut members: Vec<(String, Json)> = Vec::new();
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_space();
            let name = self.string()?;
            self.skip_space();
            self.expect(b':')?;
            let value = self.value(depth + 1)?;
            if members.iter().any(|(k, _)| *k == name) {
                return Err(CanonicalError::DuplicateName(name));
            }
            members.push((name, value));
            self.skip_space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                _ => return Err(CanonicalError::Syntax(self.at)),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, CanonicalError> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.skip_space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(CanonicalError::Syntax(self.at)),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, CanonicalError> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or(CanonicalError::Syntax(self.at))?;
        let value = u32::from_str_radix(digits, 16).map_err(|_| CanonicalError::Syntax(self.at))?;
        self.at += 4;
        Ok(value)
    }

    fn string(&mut self) -> Result<String, CanonicalError> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.at;
            // Copy the run of plain characters at once (the input is valid UTF-8 text).
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.at += 1;
            }
            out.push_str(self.text.get(start..self.at).unwrap_or_default());
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escape = self.peek().ok_or(CanonicalError::Syntax(self.at))?;
                    self.at += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let at = self.at;
                            let first = self.hex4()?;
                            let code = match first {
                                0xD800..=0xDBFF => {
                                    if self.bytes.get(self.at..self.at + 2) != Some(b"\\u") {
                                        return Err(CanonicalError::LoneSurrogate(at));
                                    }
                                    self.at += 2;
                                    let second = self.hex4()?;
                                    if !(0xDC00..=0xDFFF).contains(&second) {
                                        return Err(CanonicalError::LoneSurrogate(at));
                                    }
                                    0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                                }
                                0xDC00..=0xDFFF => return Err(CanonicalError::LoneSurrogate(at)),
                                c => c,
                            };
                            out.push(
                                char::from_u32(code).ok_or(CanonicalError::LoneSurrogate(at))?,
                            );
                        }
                        _ => return Err(CanonicalError::Syntax(self.at - 1)),
                    }
                }
                // A raw control character, or the end of the text.
                _ => return Err(CanonicalError::Syntax(self.at)),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Result<Json, CanonicalError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(CanonicalError::Syntax(self.at)),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(CanonicalError::Syntax(self.at));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(CanonicalError::Syntax(self.at));
            }
        }
        let text = self
            .text
            .get(start..self.at)
            .ok_or(CanonicalError::Syntax(start))?;
        // Rust's float parsing is correctly rounded, as RFC 8785 (through ECMAScript) requires.
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Json::Number(v)),
            Ok(_) => Err(CanonicalError::NotFinite(start)),
            Err(_) => Err(CanonicalError::Syntax(start)),
        }
    }
}

fn write_value(value: &Json, out: &mut String) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => out.push_str(&ecmascript_number(*n)),
        Json::String(s) => write_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Json::Object(members) => {
            let mut sorted: Vec<&(String, Json)> = members.iter().collect();
            // RFC 8785 3.2.3: names sorted by their UTF-16 code units, not UTF-8 bytes or chars.
            sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (name, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(name, out);
                out.push(':');
                write_value(item, out);
            }
            out.push('}');
        }
    }
}

/// A string as ECMAScript's `JSON.stringify` writes it: the two-character escapes where they
/// exist, `\u00xx` (lower-case hex) for other controls, every other character as itself.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The decimal digits (no leading or trailing zeros) and exponent `n` of `x` > 0 as ECMAScript
/// chooses them: the fewest digits that read back as `x` (Rust's shortest formatting finds how
/// many), and of those the decimal nearest to `x`, ties to an even last digit (rounded here from
/// the exact expansion, so no formatting library's tie rule matters).
fn shortest_digits(x: f64) -> (String, i64) {
    let shortest = format!("{x:e}");
    let count = shortest
        .split('e')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .count()
        .max(1);
    let exact = format!("{x:.EXACT_DIGITS$e}");
    let (mantissa, exponent) = exact.split_once('e').unwrap_or((exact.as_str(), "0"));
    let mut exponent: i64 = exponent.parse().unwrap_or(0);
    let all: Vec<u8> = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    let mut head: Vec<u8> = all.iter().take(count).copied().collect();
    let rest = all.get(count..).unwrap_or_default();
    let round_up = match rest.split_first() {
        Some((first, _)) if *first > 5 => true,
        Some((5, tail)) => tail.iter().any(|d| *d != 0) || head.last().is_some_and(|d| d % 2 == 1),
        _ => false,
    };
    if round_up {
        let mut carry = true;
        for d in head.iter_mut().rev() {
            if *d == 9 {
                *d = 0;
            } else {
                *d += 1;
                carry = false;
                break;
            }
        }
        if carry {
            head.insert(0, 1);
            exponent += 1;
        }
    }
    while head.len() > 1 && head.last() == Some(&0) {
        head.pop();
    }
    let digits: String = head.iter().map(|d| char::from(b'0' + d)).collect();
    // The spec's n: the decimal point sits n digits after the first digit's position.
    (digits, exponent + 1)
}

/// `Number.prototype.toString(x)` for a finite double (ECMA-262, Number::toString, radix 10).
pub fn ecmascript_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        // Both zeros. (Non-finite numbers never get here: the parser refuses them.)
        return "0".to_owned();
    }
    let mut out = String::new();
    let magnitude = if x < 0.0 {
        out.push('-');
        -x
    } else {
        x
    };
    let (digits, n) = shortest_digits(magnitude);
    let k = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let zeros = |count: i64| "0".repeat(usize::try_from(count).unwrap_or(0));
    let split = |at: i64| {
        let at = usize::try_from(at).unwrap_or(0);
        (
            digits.get(..at).unwrap_or_default(),
            digits.get(at..).unwrap_or_default(),
        )
    };
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.push_str(&zeros(n - k));
    } else if 0 < n && n <= 21 {
        let (int, frac) = split(n);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.push_str(&zeros(-n));
        out.push_str(&digits);
    } else {
        let (first, rest) = split(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let e = n - 1;
        out.push('e');
        out.push(if e >= 0 { '+' } else { '-' });
        out.push_str(&e.abs().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn canonical(text: &str) -> String {
        canonicalize(text).unwrap()
    }

    /// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
    #[test]
    fn numbers_follow_the_rfc_8785_appendix_b_samples() {
        let samples: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, want) in samples {
            assert_eq!(
                ecmascript_number(f64::from_bits(*bits)),
                *want,
                "bits {bits:#018x}"
            );
        }
    }

    /// RFC 8785 3.2.2: the example input and its canonical form.
    #[test]
    fn the_rfc_8785_serialisation_example_comes_out_byte_for_byte() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        assert_eq!(
            canonical(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn the_fast_check_accepts_plain_canonical_text_and_nothing_near_it() {
        let canonical_texts = [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"x y/z"}}"#,
            "0",
            "-999999999999999",
            "[\"\u{7f}\u{e9}\"]",
            // U+1F600 (surrogates D83D DE00) sorts before U+FB33 in UTF-16 code units.
            "{\"\u{1f600}\":1,\"\u{fb33}\":2}",
        ];
        for text in canonical_texts {
            assert!(is_canonical(text), "{text}");
            assert_eq!(canonicalize(text).as_deref(), Ok(text));
            assert!(matches!(canonical_form(text), Ok(Cow::Borrowed(_))));
        }
        let not_plain = [
            "-0",
            "1.0",
            "1e2",
            "01",
            "1234567890123456",
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            "{\"\u{fb33}\":2,\"\u{1f600}\":1}",
            r#"{"a": 1}"#,
            " 1",
            "[1,]",
            "[1]x",
            "\"tab\there\"",
            r#""a\nb""#,
            "\"",
            "",
        ];
        for text in not_plain {
            assert!(!is_canonical(text), "{text:?}");
            assert_eq!(
                canonical_form(text).map(Cow::into_owned),
                canonicalize(text)
            );
        }
    }

    /// RFC 8785 3.2.3: property names sort by UTF-16 code units (the emoji's surrogates sort
    /// before U+FB33, although its code point is larger).
    #[test]
    fn keys_sort_by_utf16_code_units_as_in_rfc_8785_section_3_2_3() {
        let input = r#"{
          "\u20ac": "Euro Sign",
          "\r": "Carriage Return",
          "\ufb33": "Hebrew Letter Dalet With Dagesh",
          "1": "One",
          "\ud83d\ude00": "Emoji: Grinning Face",
          "\u0080": "Control",
          "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        assert_eq!(
            canonical(input),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
    }

    #[test]
    fn spelling_differences_vanish() {
        assert_eq!(
            canonical(r#"{ "b" : [1.0, 10e-1, 100], "a":"\u0041" }"#),
            r#"{"a":"A","b":[1,1,100]}"#
        );
        assert_eq!(canonical(r#""\u007f/\t""#), "\"\u{7f}/\\t\"");
        assert_eq!(canonical("-0.0"), "0");
    }

    #[test]
    fn integers_beyond_2_pow_53_become_doubles_as_rfc_8785_requires() {
        assert_eq!(canonical("9007199254740993"), "9007199254740992");
        assert_eq!(canonical("18446744073709551615"), "18446744073709552000");
        assert_eq!(canonical("-9223372036854775808"), "-9223372036854776000");
    }

    #[test]
    fn what_has_no_canonical_form_is_a_typed_error() {
        assert_eq!(canonicalize("[1e400]"), Err(CanonicalError::NotFinite(1)));
        assert_eq!(
            canonicalize(r#"{"a":1,"a":2}"#),
            Err(CanonicalError::DuplicateName("a".to_owned()))
        );
        // A name spelled with an escape is still the same name.
        assert_eq!(
            canonicalize(r#"{"a":1,"\u0061":2}"#),
            Err(CanonicalError::DuplicateName("a".to_owned()))
        );
        assert_eq!(
            canonicalize(r#""\ud800""#),
            Err(CanonicalError::LoneSurrogate(3))
        );
        assert_eq!(
            canonicalize(r#""\udc00\ud800""#),
            Err(CanonicalError::LoneSurrogate(3))
        );
        assert_eq!(canonicalize("[1,]"), Err(CanonicalError::Syntax(3)));
        assert_eq!(canonicalize("01"), Err(CanonicalError::Syntax(1)));
        assert_eq!(canonicalize("1."), Err(CanonicalError::Syntax(2)));
        assert_eq!(canonicalize("\"a\u{1}b\""), Err(CanonicalError::Syntax(2)));
        assert_eq!(canonicalize("{} x"), Err(CanonicalError::Syntax(3)));
        assert_eq!(canonicalize(""), Err(CanonicalError::Syntax(0)));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(canonicalize(&deep), Err(CanonicalError::TooDeep));
        let fine = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(canonicalize(&fine).unwrap(), fine);
    }

    #[test]
    fn numbers_are_read_correctly_rounded() {
        // A lax reader lands one unit in the last place off here (RFC 8785's own example).
        assert_eq!(canonical("333333333.33333329"), "333333333.3333333");
        assert_eq!(canonical("0.1"), "0.1");
        assert_eq!(canonical("1e-7"), "1e-7");
        assert_eq!(
            canonical("123456789012345678901234"),
            "1.2345678901234569e+23"
        );
        assert_eq!(canonical("-1.5E+3"), "-1500");
    }

    #[test]
    fn surrogate_pairs_and_escapes_decode_to_their_characters() {
        assert_eq!(
            canonical(r#""\ud83d\ude00\/\u00e9""#),
            "\"\u{1f600}/\u{e9}\""
        );
    }
}
