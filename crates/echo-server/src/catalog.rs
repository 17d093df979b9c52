//! Why: `tools/list` is the fan-out benchmark's subject, so its answer is built once at start-up
//! (per era) and every request only copies it; `--tools N` decides how many echo tools there are.

use crate::protocol::Era;

/// The echo tools this process offers: `echo`, then `echo_1` .. `echo_{N-1}`.
pub struct Catalog {
    count: usize,
    legacy_list: Vec<u8>,
    modern_list: Vec<u8>,
}

impl Catalog {
    /// A catalog of `count` echo tools (at least one).
    pub fn new(count: usize) -> Self {
        let count = count.max(1);
        let mut tools = String::with_capacity(count * 220);
        for index in 0..count {
            if index > 0 {
                tools.push(',');
            }
            tools.push_str(r#"{"name":""#);
            tools.push_str(&tool_name(index));
            tools.push_str(
                r#"","description":"Returns arguments.message as text.","inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]},"annotations":{"readOnlyHint":true,"idempotentHint":true}}"#,
            );
        }
        let legacy_list = format!(r#"{{"tools":[{tools}]}}"#).into_bytes();
        let modern_list = format!(
            r#"{{"tools":[{tools}],"ttlMs":60000,"cacheScope":"public","resultType":"complete"}}"#
        )
        .into_bytes();
        Catalog {
            count,
            legacy_list,
            modern_list,
        }
    }

    /// Whether `name` is one of the echo tools.
    pub fn has(&self, name: &str) -> bool {
        if name == "echo" {
            return true;
        }
        name.strip_prefix("echo_")
            .filter(|n| !n.starts_with('0') && !n.starts_with('+'))
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n >= 1 && n < self.count)
    }

    /// The whole `tools/list` result, as JSON.
    pub fn list(&self, era: Era) -> &[u8] {
        match era {
            Era::Legacy => &self.legacy_list,
            Era::Modern => &self.modern_list,
        }
    }
}

/// The name of the tool at `index`.
pub fn tool_name(index: usize) -> String {
    if index == 0 {
        "echo".to_owned()
    } else {
        format!("echo_{index}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn names_are_echo_then_numbered_and_nothing_else_matches() {
        let catalog = Catalog::new(3);
        assert!(catalog.has("echo") && catalog.has("echo_1") && catalog.has("echo_2"));
        for other in [
            "echo_3", "echo_0", "echo_01", "echo_+1", "echo_", "ech", "echo_x",
        ] {
            assert!(!catalog.has(other), "{other}");
        }
    }

    #[test]
    fn the_list_holds_every_tool_once_in_order() {
        let catalog = Catalog::new(100);
        let value: serde_json::Value = serde_json::from_slice(catalog.list(Era::Modern)).unwrap();
        let names: Vec<&str> = value["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 100);
        assert_eq!(names[0], "echo");
        assert_eq!(names[99], "echo_99");
        assert_eq!(value["resultType"], "complete");
    }
}
