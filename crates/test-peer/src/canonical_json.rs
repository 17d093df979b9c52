//! Serialising a `serde_json::Value` with object keys in sorted order, always.
//!
//! serde_json's own order depends on a cargo feature (`preserve_order`) that any crate in the
//! workspace could switch on for everyone; the README quotes exact bytes, so the peer must not
//! depend on it.

use serde_json::Value;

/// Compact JSON text of `value`, object keys sorted by their UTF-8 bytes.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_come_out_sorted_at_every_level() {
        let value = json!({"b": 1, "a": {"z": [true, null, "x\"y"], "m": 1.5}});
        assert_eq!(
            to_string(&value),
            r#"{"a":{"m":1.5,"z":[true,null,"x\"y"]},"b":1}"#
        );
    }
}
