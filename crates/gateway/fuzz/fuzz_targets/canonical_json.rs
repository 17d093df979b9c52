//! Fuzzes the RFC 8785 canonicalizer that pins are computed from: tool definitions come from
//! servers Manifold does not control, so any text must give canonical text or a typed error.
//!
//! Beyond "never panics": text the fast check (`is_canonical`) accepts is canonical; canonical
//! text is a fixed point (canonicalizing it again changes nothing), and it means what the input
//! meant (both parse to the same value once object members are put in one order), so a pin never
//! depends on how a server spelled a definition.
#![no_main]

use libfuzzer_sys::fuzz_target;
use manifold_gateway::pins::{Json, canonicalize, is_canonical, parse};

/// The value with every object's members sorted, so two spellings of one value compare equal.
fn ordered(value: Json) -> Json {
    match value {
        Json::Array(items) => Json::Array(items.into_iter().map(ordered).collect()),
        Json::Object(members) => {
            let mut members: Vec<(String, Json)> =
                members.into_iter().map(|(k, v)| (k, ordered(v))).collect();
            members.sort_by(|a, b| a.0.cmp(&b.0));
            Json::Object(members)
        }
        other => other,
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if is_canonical(&text) {
        assert_eq!(
            canonicalize(&text).as_deref(),
            Ok(&*text),
            "the fast check called text canonical that is not"
        );
    }
    let Ok(canonical) = canonicalize(&text) else {
        return;
    };
    assert_eq!(
        canonicalize(&canonical).as_deref(),
        Ok(canonical.as_str()),
        "canonical text is not a fixed point"
    );
    let (Ok(read), Ok(again)) = (parse(&text), parse(&canonical)) else {
        panic!("text that canonicalizes does not parse, or its canonical text does not");
    };
    assert_eq!(
        ordered(read),
        ordered(again),
        "canonical text changed the value"
    );
});
