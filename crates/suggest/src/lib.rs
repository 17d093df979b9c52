//! manifold-suggest: "did you mean" for a word a person mistyped.
//!
//! An error that names what the person probably meant ("unknown key \"listne\"; did you mean
//! \"listen\"?") saves a round of guessing. The configuration file and the gateway both need it
//! for words of different kinds, so the mechanism lives here once and each caller states its own
//! [`Tolerance`].

/// How far a word may be from a candidate and still be taken for a typo of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tolerance {
    /// Compare without regard to ASCII case (for words whose case carries no meaning).
    pub ignore_case: bool,
    /// Edits allowed however short the word is. Longer words allow one edit per three
    /// characters, so a long word is not matched to something merely of the same length.
    pub min_edits: usize,
}

impl Tolerance {
    /// The edits allowed for a word of `chars` characters.
    pub fn edits_for(self, chars: usize) -> usize {
        (chars / 3).max(self.min_edits)
    }
}

/// The candidate nearest to `wanted` by edit distance, if it is within the tolerance. Among
/// equally near candidates the shortest wins, then the first given, so the answer does not
/// depend on anything but the candidates' order.
pub fn closest<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    tolerance: Tolerance,
) -> Option<&'a str> {
    let fold = |s: &str| {
        if tolerance.ignore_case {
            s.to_ascii_lowercase()
        } else {
            s.to_owned()
        }
    };
    let wanted = fold(wanted);
    let wanted_chars = wanted.chars().count();
    let limit = tolerance.edits_for(wanted_chars);
    candidates
        .into_iter()
        // The distance is at least the difference in length: skipping those that differ by
        // more than the limit changes no answer, and keeps a huge mistyped word cheap.
        .filter(|c| c.chars().count().abs_diff(wanted_chars) <= limit)
        .map(|c| (edit_distance(&wanted, &fold(c)), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, c.len()))
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters: the fewest insertions, deletions and substitutions
/// that turn `a` into `b`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    // previous[j]: the distance between the characters of `a` read so far and the first j of `b`.
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = Vec::with_capacity(b.len() + 1);
    for (i, ca) in a.chars().enumerate() {
        current.clear();
        current.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            // Both rows hold b.len() + 1 cells by the time they are read, so these lookups
            // always succeed.
            let substitute = previous.get(j).copied().unwrap_or(0) + usize::from(ca != *cb);
            let delete = previous.get(j + 1).copied().unwrap_or(0) + 1;
            let insert = current.get(j).copied().unwrap_or(0) + 1;
            current.push(substitute.min(delete).min(insert));
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STRICT: Tolerance = Tolerance {
        ignore_case: false,
        min_edits: 2,
    };
    const CASELESS: Tolerance = Tolerance {
        ignore_case: true,
        min_edits: 1,
    };

    #[test]
    fn distance_is_levenshtein() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("flaw", "lawn"), 2);
        assert_eq!(edit_distance("héllo", "hello"), 1);
    }

    #[test]
    fn the_limit_is_a_third_of_the_word_but_never_below_the_minimum() {
        assert_eq!(STRICT.edits_for(3), 2);
        assert_eq!(STRICT.edits_for(9), 3);
        assert_eq!(CASELESS.edits_for(2), 1);
        assert_eq!(CASELESS.edits_for(12), 4);
    }

    #[test]
    fn case_counts_only_when_the_tolerance_says_so() {
        assert_eq!(closest("ECHO", ["echo"], CASELESS), Some("echo"));
        assert_eq!(closest("ECHO", ["echo"], STRICT), None);
        // The candidate is returned as given, not folded.
        assert_eq!(
            closest("transport", ["Transport"], CASELESS),
            Some("Transport")
        );
    }

    #[test]
    fn the_nearest_wins_then_the_shortest_then_the_first() {
        assert_eq!(closest("tme", ["tame", "time"], STRICT), Some("tame"));
        assert_eq!(closest("abcd", ["abcdef", "abcde"], STRICT), Some("abcde"));
        assert_eq!(
            closest("abcd", ["xbcd", "abcx", "abc"], STRICT),
            Some("abc")
        );
        assert_eq!(closest("nothing", [], STRICT), None);
    }

    #[test]
    fn a_huge_word_is_near_nothing_short() {
        let huge = "a".repeat(1_000_000);
        assert_eq!(closest(&huge, ["a", "aa", "echo"], STRICT), None);
    }

    proptest! {
        /// The length pre-check is only a shortcut: the answer is what comparing every
        /// candidate in full gives.
        #[test]
        fn skipping_by_length_changes_no_answer(
            wanted in "[a-cA-C]{0,9}",
            candidates in proptest::collection::vec("[a-cA-C]{0,9}", 0..6),
            ignore_case in any::<bool>(),
            min_edits in 0usize..4,
        ) {
            let tolerance = Tolerance { ignore_case, min_edits };
            let fold = |s: &str| if ignore_case { s.to_ascii_lowercase() } else { s.to_owned() };
            let limit = tolerance.edits_for(wanted.chars().count());
            let expected = candidates
                .iter()
                .map(|c| (edit_distance(&fold(&wanted), &fold(c)), c.as_str()))
                .filter(|(d, _)| *d <= limit)
                .min_by_key(|(d, c)| (*d, c.len()))
                .map(|(_, c)| c);
            prop_assert_eq!(
                closest(&wanted, candidates.iter().map(String::as_str), tolerance),
                expected
            );
        }

        /// Distance is a metric: zero to itself, symmetric, and at least the length difference.
        #[test]
        fn distance_is_symmetric_and_bounded_by_lengths(a in "\\PC{0,12}", b in "\\PC{0,12}") {
            let d = edit_distance(&a, &b);
            prop_assert_eq!(d, edit_distance(&b, &a));
            prop_assert_eq!(edit_distance(&a, &a), 0);
            let (la, lb) = (a.chars().count(), b.chars().count());
            prop_assert!(d >= la.abs_diff(lb));
            prop_assert!(d <= la.max(lb));
        }
    }
}
