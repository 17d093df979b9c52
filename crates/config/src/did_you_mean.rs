//! "Did you mean" suggestions for misspelled keys and values: a typo'd key is an error, and the
//! error is far more useful when it names the key the user probably meant.

/// The candidate closest to `word` by edit distance (ignoring case), if it is close enough to be
/// a plausible typo.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(&word, &c.to_ascii_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = Vec::with_capacity(b.len() + 1);
        row.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            // The rows are b.len() + 1 long, so these lookups always succeed.
            let diagonal = previous.get(j).copied().unwrap_or(0) + usize::from(ca != *cb);
            let up = previous.get(j + 1).copied().unwrap_or(0) + 1;
            let left = row.get(j).copied().unwrap_or(0) + 1;
            row.push(diagonal.min(up).min(left));
        }
        previous = row;
    }
    previous.last().copied().unwrap_or(0)
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
    fn distance_is_levenshtein() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
    }
}
