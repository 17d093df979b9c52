//! The tasks extension (`io.modelcontextprotocol/tasks`) across a gateway.
//!
//! A tool call may answer with a task instead of a result; the client then follows the task with
//! `tasks/get`, `tasks/update` and `tasks/cancel`, naming it by id. Task ids are minted by
//! upstreams, so Manifold exposes each as `SERVER:ID` (server names cannot hold `:`) and routes
//! the follow-up calls back to the server that created the task.

use manifold_wire::id::json_string;
use manifold_wire::patch;

/// The extension's identifier in capabilities.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// Separates the server name from the upstream's own task id.
pub const TASK_ID_SEPARATOR: char = ':';

/// The methods that follow a task by its id.
pub fn is_task_method(method: &str) -> bool {
    matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel")
}

/// The exposed id of an upstream's task.
pub fn expose(server: &str, task_id: &str) -> String {
    format!("{server}{TASK_ID_SEPARATOR}{task_id}")
}

/// Splits an exposed task id into (server, upstream task id).
pub fn split(exposed: &str) -> Option<(&str, &str)> {
    exposed
        .split_once(TASK_ID_SEPARATOR)
        .filter(|(server, id)| !server.is_empty() && !id.is_empty())
}

/// Rewrites a top-level `taskId` (and one inside `task`) of a raw result to its exposed form.
pub fn expose_in_result(raw: &str, server: &str) -> String {
    let mut out = raw.to_owned();
    for path in [&["taskId"][..], &["task", "taskId"][..]] {
        if let Ok(Some(id)) = patch::decoded::get_str(&out, path)
            && let Ok(patched) = patch::decoded::set(&out, path, &json_string(&expose(server, &id)))
        {
            out = patched;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_round_trip_through_their_server() {
        let e = expose("jobs", "abc:123");
        assert_eq!(split(&e), Some(("jobs", "abc:123")));
        assert_eq!(split("no-separator"), None);
        assert_eq!(split(":x"), None);
    }

    #[test]
    fn results_carry_exposed_ids() {
        let raw = r#"{"resultType":"task","taskId":"t1","status":"working"}"#;
        assert_eq!(
            expose_in_result(raw, "jobs"),
            r#"{"resultType":"task","taskId":"jobs:t1","status":"working"}"#
        );
        let nested = r#"{"task":{"taskId":"t2"}}"#;
        assert_eq!(
            expose_in_result(nested, "s"),
            r#"{"task":{"taskId":"s:t2"}}"#
        );
        assert_eq!(expose_in_result("{}", "s"), "{}");
    }
}
