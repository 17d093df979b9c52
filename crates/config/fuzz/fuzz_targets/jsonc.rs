//! Fuzzes the JSONC reader of `manifold import` (and `import` itself), which reads whatever file a
//! user points it at: VS Code's `mcp.json` / `settings.json` and the other clients' JSON.
//!
//! Beyond "never panics": stripping keeps every byte where it was (a comment or trailing comma
//! becomes as many spaces as it had bytes, newlines stay), so the line and column of a JSON error
//! are those of the file the user has open; and JSON without comments is read exactly as written.
#![no_main]

use libfuzzer_sys::fuzz_target;
use manifold_config::import;
use manifold_config::import::jsonc::strip_jsonc;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(stripped) = strip_jsonc(&text) else {
        let _ = import(&text, "fuzz.json");
        return;
    };
    let body = text.trim_start_matches('\u{feff}');
    assert_eq!(stripped.len(), body.len(), "stripping moved bytes");
    for (at, (kept, was)) in stripped.bytes().zip(body.bytes()).enumerate() {
        assert!(
            kept == was || (kept == b' ' && was != b'\n'),
            "byte {at} became {kept:#04x} (was {was:#04x})"
        );
    }
    if serde_json::from_str::<serde_json::Value>(body).is_ok() {
        assert_eq!(stripped, body, "plain JSON was changed");
    }
    let _ = import(&text, "fuzz.json");
});
