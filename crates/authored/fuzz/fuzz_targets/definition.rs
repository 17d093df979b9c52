//! Fuzzes the decoder of authored tool definitions: `manifold_create_tool` and
//! `manifold_update_tool` arguments, as any client may send them.
//!
//! Pinned here: `ToolDefinition::from_arguments` never panics, with or without a base; a definition
//! it accepts has a valid name, bounded code, a timeout within its bounds and object schemas; it
//! survives the store's round trip unchanged; and its listing names it and carries no code.
#![no_main]

use libfuzzer_sys::fuzz_target;
use manifold_authored::ToolDefinition;
use manifold_authored::definition::{MAX_CODE_BYTES, MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, check_name};

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let base = serde_json::json!({"name": "base", "description": "d", "language": "sh", "code": "true"});
    let base = ToolDefinition::from_arguments(&base, None).expect("the base definition is valid");
    for made in [
        ToolDefinition::from_arguments(&args, None),
        ToolDefinition::from_arguments(&args, Some(&base)),
    ] {
        let Ok(d) = made else { continue };
        assert!(check_name(&d.name).is_ok());
        assert!(d.code.len() <= MAX_CODE_BYTES);
        assert!((MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&d.timeout_ms));
        assert_eq!(d.input_schema["type"], "object");
        let stored = serde_json::to_string(&d).expect("a definition serializes");
        let back: ToolDefinition = serde_json::from_str(&stored).expect("and reads back");
        assert_eq!(back, d);
        let listing = d.listing();
        assert_eq!(listing["name"], d.name.as_str());
        assert!(listing.get("code").is_none());
    }
});
