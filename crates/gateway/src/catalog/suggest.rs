//! "Did you mean" for tool names a user mistyped. The matching is manifold-suggest's; this module
//! holds the tolerance for tool names, which the router and the CLI client share.

use manifold_suggest::Tolerance;

/// Tool names are case-sensitive (`Echo` is not `echo`). The call has failed anyway, so a hint
/// two edits off is still worth giving, even for a short name.
const TOOL_NAMES: Tolerance = Tolerance {
    ignore_case: false,
    min_edits: 2,
};

/// The closest candidate within a small edit distance, if any.
pub fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    manifold_suggest::closest(wanted, candidates, TOOL_NAMES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        let names = ["echo", "add", "get-sum", "longRunningOperation"];
        assert_eq!(closest("ecoh", names), Some("echo"));
        assert_eq!(closest("longRunningOp", names), None);
        assert_eq!(closest("zzzzzz", names), None);
    }

    #[test]
    fn case_counts_and_short_names_may_be_two_edits_off() {
        assert_eq!(closest("ECHO", ["echo"]), None);
        assert_eq!(closest("ad", ["add"]), Some("add"));
        assert_eq!(closest("dda", ["add"]), Some("add"));
        assert_eq!(closest("xy", ["add"]), None);
    }
}
