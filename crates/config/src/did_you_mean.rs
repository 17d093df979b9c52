//! "Did you mean" for misspelled keys and values: a typo'd key is an error, and the error is far
//! more useful when it names the key the user probably meant. The matching is manifold-suggest's;
//! this module holds the file's tolerance.

use manifold_suggest::Tolerance;

/// Keys and choices are lower-case words whose case means nothing ("Transport" is a typo of
/// "transport"), and most are short, so a short word may be only one edit off.
const KEYS_AND_CHOICES: Tolerance = Tolerance {
    ignore_case: true,
    min_edits: 1,
};

/// The candidate closest to `word`, if it is close enough to be a plausible typo.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    manifold_suggest::closest(word, candidates.iter().copied(), KEYS_AND_CHOICES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_only() {
        let keys = ["timeout", "max_timeout", "transport", "command"];
        assert_eq!(closest("timout", &keys), Some("timeout"));
        assert_eq!(closest("comand", &keys), Some("command"));
        assert_eq!(closest("Transport", &keys), Some("transport"));
        assert_eq!(closest("max-timeout", &keys), Some("max_timeout"));
        assert_eq!(closest("banana", &keys), None);
    }

    #[test]
    fn a_short_word_may_be_one_edit_off_only() {
        let keys = ["url", "env"];
        assert_eq!(closest("urk", &keys), Some("url"));
        assert_eq!(closest("uxk", &keys), None);
    }
}
