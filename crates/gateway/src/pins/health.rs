//! What clients and operators are told about pins: the `manifold_health` block and line per
//! server, and the message a call to a withheld tool gets.

use serde_json::Value;

use super::*;

/// What `manifold_health` shows of one server's pins: a JSON value, and a line of text when a
/// definition changed.
pub fn health_of(pins: &Pins, server: &str) -> (Value, Option<String>) {
    let report = pins.server_report(server);
    let withheld = report.on_change == OnChange::Block;
    let changed: Vec<Value> = report
        .changed
        .iter()
        .map(|(tool, c)| {
            serde_json::json!({
                "tool": tool,
                "fields": c.fields,
                "pinnedSha256": c.pinned,
                "seenSha256": c.seen,
                "seenAt": c.seen_at,
                "withheld": withheld,
            })
        })
        .collect();
    let line = (!report.changed.is_empty()).then(|| {
        let tools: Vec<String> = report
            .changed
            .iter()
            .map(|(tool, c)| {
                if c.fields.is_empty() {
                    tool.clone()
                } else {
                    format!("{tool} ({})", c.fields.join(", "))
                }
            })
            .collect();
        format!(
            "{server}: {} tool definition(s) changed since pinned: {}; {} (on_change = {:?}); if expected, run `manifold pins approve {server}`",
            tools.len(),
            tools.join(", "),
            if withheld { "withheld" } else { "still served" },
            report.on_change.as_str()
        )
    });
    let value = serde_json::json!({
        "onChange": report.on_change.as_str(),
        "pinned": report.pinned,
        "changed": changed,
    });
    (value, line)
}

/// The message a call to a withheld tool gets.
pub fn withheld_message(exposed: &str, change: &ChangedTool) -> String {
    let members = if change.fields.is_empty() {
        String::new()
    } else {
        format!(" ({})", change.fields.join(", "))
    };
    format!(
        "the tool {exposed:?} is withheld: server {:?} changed its definition{members} since it was pinned, and its on_change policy is \"block\"; if the change is expected, approve it with `manifold pins approve {}` (a running Manifold picks the approval up within {} s); manifold_health shows what changed",
        change.server,
        change.server,
        PIN_FILE_POLL.as_secs()
    )
}
