//! Whether a log line reaches a client, given the least severity it asked for.
//!
//! A legacy client sets its level with `logging/setLevel`; a modern client states it per request
//! in `_meta`. Either way the server drops log lines below it rather than flooding the client.
//! The levels themselves live once, in `manifold_wire::log_level`.

use manifold_wire::log_level::LogLevel;

/// Whether a `notifications/message` (its raw params) is at or above `minimum` (`None`: no
/// minimum). A line without a readable level passes: dropping what cannot be judged would hide
/// errors.
pub fn admits(minimum: Option<LogLevel>, params: Option<&str>) -> bool {
    let Some(minimum) = minimum else {
        return true;
    };
    let level = params
        .and_then(|p| manifold_wire::patch::get_str(p, &["level"]).ok().flatten())
        .and_then(|l| LogLevel::parse(&l));
    level.is_none_or(|l| l >= minimum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_below_the_minimum_are_dropped_and_unreadable_ones_pass() {
        let warn = Some(LogLevel::Warning);
        assert!(!admits(warn, Some(r#"{"level":"info","data":"x"}"#)));
        assert!(admits(warn, Some(r#"{"level":"error","data":"x"}"#)));
        assert!(admits(None, Some(r#"{"level":"debug"}"#)));
        assert!(admits(warn, Some(r#"{"data":"no level"}"#)));
    }
}
