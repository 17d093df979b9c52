//! Why: every scenario reports the same summary of the same kind of samples (median, p99, and how
//! far the rounds disagree), so it is computed once, here, the same way for every contender.

use std::time::Duration;

/// Latencies of one case, kept per round so the spread between rounds can be told.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    rounds: Vec<Vec<u64>>,
    errors: u64,
    first_error: Option<String>,
}

/// What a table row shows about a set of samples.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub calls: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Range of the per-round medians, in percent of the overall median.
    pub spread_pct: Option<f64>,
}

impl Samples {
    /// Starts a new round; later `record` calls go into it.
    pub fn start_round(&mut self) {
        self.rounds.push(Vec::new());
    }

    pub fn record(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        match self.rounds.last_mut() {
            Some(round) => round.push(nanos),
            None => self.rounds.push(vec![nanos]),
        }
    }

    /// Adds a whole round at once.
    pub fn push_round(&mut self, latencies: Vec<u64>) {
        self.rounds.push(latencies);
    }

    /// Takes in another set's rounds and errors (sessions measured apart, reported as one).
    pub fn merge(&mut self, other: Samples) {
        self.rounds.extend(other.rounds);
        self.record_errors(other.errors, other.first_error);
    }

    pub fn record_error(&mut self, error: impl std::fmt::Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(error.to_string());
        }
    }

    /// Counts `count` failures at once, keeping the first message.
    pub fn record_errors(&mut self, count: u64, first: Option<String>) {
        self.errors += count;
        if self.first_error.is_none() {
            self.first_error = first;
        }
    }

    pub fn errors(&self) -> u64 {
        self.errors
    }

    pub fn first_error(&self) -> Option<&str> {
        self.first_error.as_deref()
    }

    /// The slowest sample, in microseconds.
    pub fn max_us(&self) -> Option<f64> {
        self.rounds
            .iter()
            .flatten()
            .max()
            .map(|n| *n as f64 / 1000.0)
    }

    /// Median, p99 and spread; `None` without a single successful call.
    pub fn summary(&self) -> Option<Summary> {
        let mut all: Vec<u64> = self.rounds.iter().flatten().copied().collect();
        if all.is_empty() {
            return None;
        }
        all.sort_unstable();
        let p50 = percentile(&all, 50.0)?;
        let p99 = percentile(&all, 99.0)?;
        let medians: Vec<f64> = self
            .rounds
            .iter()
            .filter_map(|round| {
                let mut sorted = round.clone();
                sorted.sort_unstable();
                percentile(&sorted, 50.0).map(|m| m as f64)
            })
            .collect();
        Some(Summary {
            calls: all.len() as u64,
            p50_us: p50 as f64 / 1000.0,
            p99_us: p99 as f64 / 1000.0,
            spread_pct: spread_pct(&medians, p50 as f64),
        })
    }
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.saturating_sub(1).min(sorted.len() - 1))
        .copied()
}

/// The median of per-round figures (the mean of the middle two for an even count); `None` for
/// none. A round the machine disturbed moves it less than it moves a mean.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted.get(middle).copied()
    } else {
        Some((sorted.get(middle - 1)? + sorted.get(middle)?) / 2.0)
    }
}

/// (max - min) of per-round values in percent of `center`; `None` with fewer than two rounds.
pub fn spread_pct(per_round: &[f64], center: f64) -> Option<f64> {
    if per_round.len() < 2 || center <= 0.0 {
        return None;
    }
    let max = per_round.iter().copied().fold(f64::MIN, f64::max);
    let min = per_round.iter().copied().fold(f64::MAX, f64::min);
    Some((max - min) / center * 100.0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), Some(50));
        assert_eq!(percentile(&values, 99.0), Some(99));
        assert_eq!(percentile(&values, 100.0), Some(100));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn the_median_of_rounds_ignores_one_outlier() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 100.0, 1.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 1000.0]), Some(3.0));
    }

    #[test]
    fn spread_is_the_range_of_round_medians_over_the_median() {
        let mut samples = Samples::default();
        samples.push_round(vec![1000, 1000, 1000]);
        samples.push_round(vec![1100, 1100, 1100]);
        let summary = samples.summary().unwrap();
        assert_eq!(summary.calls, 6);
        assert_eq!(summary.p50_us, 1.0);
        let spread = summary.spread_pct.unwrap();
        assert!((spread - 10.0).abs() < 1e-9, "{spread}");
    }
}
