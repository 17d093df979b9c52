//! Keeping oversized tool results out of a model's context.
//!
//! A server can answer with megabytes (logs, files, whole databases). Past a named size a result
//! is cut: text is kept up to the budget, binary blocks and structured content that do not fit are
//! dropped, and a last text block says what happened and what to do. Results under the cap are
//! never touched, byte for byte.

use serde_json::{Value, json};

/// The default largest tool result forwarded whole (1 MiB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;

/// Returns `raw` unchanged when it fits, otherwise a truncated result with a note.
pub fn cap_tool_result(raw: &str, max: usize) -> String {
    if raw.len() <= max {
        return raw.to_owned();
    }
    let original: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let mut budget = max.saturating_sub(512);
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    for block in original
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let size = block.to_string().len();
        if size <= budget {
            budget -= size;
            kept.push(block.clone());
            continue;
        }
        match block.get("text").and_then(Value::as_str) {
            Some(text) if budget > 64 => {
                let mut end = budget.saturating_sub(64).min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                let mut b = block.clone();
                if let Some(obj) = b.as_object_mut() {
                    obj.insert(
                        "text".to_owned(),
                        Value::from(text.get(..end).unwrap_or_default()),
                    );
                }
                budget = 0;
                kept.push(b);
            }
            _ => dropped += 1,
        }
    }
    let structured_fits = original
        .get("structuredContent")
        .is_some_and(|s| s.to_string().len() <= budget);
    let note = format!(
        "[Manifold truncated this result: it was {} bytes, over the limit of {max} bytes{}{}. Ask the tool for less (a narrower query, a page, a range), or raise result_max_bytes.]",
        raw.len(),
        if dropped > 0 {
            format!("; {dropped} content block(s) were dropped")
        } else {
            String::new()
        },
        if original.get("structuredContent").is_some() && !structured_fits {
            "; structuredContent was dropped"
        } else {
            ""
        },
    );
    kept.push(json!({ "type": "text", "text": note }));
    let mut out = json!({ "content": kept });
    if let Some(obj) = out.as_object_mut() {
        if let Some(e) = original.get("isError") {
            obj.insert("isError".to_owned(), e.clone());
        }
        if structured_fits && let Some(s) = original.get("structuredContent") {
            obj.insert("structuredContent".to_owned(), s.clone());
        }
        if let Some(t) = original.get("resultType") {
            obj.insert("resultType".to_owned(), t.clone());
        }
    }
    out.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn results_under_the_cap_are_untouched() {
        let raw = r#"{"content":[{"type":"text","text":"x"}],"n":1.0}"#;
        assert_eq!(cap_tool_result(raw, 1000), raw);
    }

    #[test]
    fn an_oversized_result_is_cut_with_a_note_and_stays_under_the_cap() {
        let big = "é".repeat(5000);
        let raw = json!({"content":[{"type":"text","text":big},{"type":"image","data":"A".repeat(4000),"mimeType":"image/png"}],"isError":false,"structuredContent":{"k":"v".repeat(3000)}}).to_string();
        let out = cap_tool_result(&raw, 4096);
        assert!(out.len() <= 4096, "{} bytes", out.len());
        let v: Value = serde_json::from_str(&out).unwrap();
        let blocks = v["content"].as_array().unwrap();
        assert!(blocks[0]["text"].as_str().unwrap().starts_with("éé"));
        let note = blocks.last().unwrap()["text"].as_str().unwrap();
        assert!(
            note.contains("truncated")
                && note.contains("1 content block(s) were dropped")
                && note.contains("structuredContent was dropped"),
            "{note}"
        );
        assert_eq!(v["isError"], false);
    }

    #[test]
    fn the_default_cap_is_one_mebibyte() {
        assert_eq!(DEFAULT_MAX_RESULT_BYTES, 1_048_576);
    }
}
