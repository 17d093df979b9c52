//! Durations as people write them in configuration ("500ms", "60s", "5m", "1h30m"), parsed here
//! rather than by a dependency so that every refusal can say exactly what to write instead.

use std::time::Duration;

/// The longest duration any setting accepts.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Not of the form number + unit.
    NotADuration,
    /// A bare number: the unit is missing.
    NoUnit,
    /// A unit this parser does not know.
    UnknownUnit(String),
    Zero,
    TooLong,
}

impl DurationError {
    /// (problem, what to write instead) for a configuration error.
    pub fn describe(&self, written: &str) -> (String, String) {
        match self {
            DurationError::NotADuration => (
                "not a duration".to_owned(),
                "write e.g. \"60s\" or \"2m\"".to_owned(),
            ),
            DurationError::NoUnit => (
                "a duration needs a unit".to_owned(),
                format!(
                    "write e.g. \"{t}s\" (seconds) or \"{t}ms\" (milliseconds)",
                    t = written.trim()
                ),
            ),
            DurationError::UnknownUnit(unit) => (
                format!("{unit:?} is not a unit of time"),
                "use ms, s, m, h or d, e.g. \"500ms\", \"60s\", \"5m\", \"1h\", \"90d\"".to_owned(),
            ),
            DurationError::Zero => (
                "must be longer than zero".to_owned(),
                "write e.g. \"60s\"".to_owned(),
            ),
            DurationError::TooLong => (
                format!("is longer than {}", format_duration(MAX_DURATION)),
                format!("write at most \"{}\"", format_duration(MAX_DURATION)),
            ),
        }
    }
}

/// Parses one or more `<integer><unit>` parts (spaces allowed between them), e.g. `"1m 30s"`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    parse_duration_up_to(text, MAX_DURATION)
}

/// [`parse_duration`] with another longest value (retention periods run to years; timeouts and
/// periods stop at [`MAX_DURATION`]).
pub fn parse_duration_up_to(text: &str, longest: Duration) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::NotADuration);
    }
    if text.chars().all(|c| c.is_ascii_digit()) {
        return Err(DurationError::NoUnit);
    }
    let mut total_ms: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return Err(DurationError::NotADuration);
        }
        let (digits, after) = rest
            .split_at_checked(digits_end)
            .ok_or(DurationError::NotADuration)?;
        let after = after.trim_start();
        let unit_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after
            .split_at_checked(unit_end)
            .ok_or(DurationError::NotADuration)?;
        if unit.is_empty() {
            return Err(DurationError::NotADuration);
        }
        let per_unit_ms: u128 = match unit.to_ascii_lowercase().as_str() {
            "ms" | "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => 1,
            "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            _ => return Err(DurationError::UnknownUnit(unit.to_owned())),
        };
        let amount: u128 = digits.parse().map_err(|_| DurationError::TooLong)?;
        total_ms = amount
            .checked_mul(per_unit_ms)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or(DurationError::TooLong)?;
        if total_ms > longest.as_millis() {
            return Err(DurationError::TooLong);
        }
        rest = after.trim_start();
    }
    if total_ms == 0 {
        return Err(DurationError::Zero);
    }
    let ms = u64::try_from(total_ms).map_err(|_| DurationError::TooLong)?;
    Ok(Duration::from_millis(ms))
}

/// The shortest form `parse_duration` reads back: "10m", "1m30s", "500ms".
pub fn format_duration(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, size) in [("h", 3_600_000u128), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_usual_forms() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration(" 1m 30s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2 minutes"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("24h"), Ok(MAX_DURATION));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        assert_eq!(parse_duration("sixty"), Err(DurationError::NotADuration));
        assert_eq!(parse_duration(""), Err(DurationError::NotADuration));
        assert_eq!(parse_duration("1.5s"), Err(DurationError::NotADuration));
        assert_eq!(parse_duration("-5s"), Err(DurationError::NotADuration));
        assert_eq!(parse_duration("60"), Err(DurationError::NoUnit));
        assert_eq!(parse_duration("3 days"), Err(DurationError::TooLong));
        assert_eq!(
            parse_duration_up_to("3 days", Duration::from_secs(7 * 86_400)),
            Ok(Duration::from_secs(3 * 86_400))
        );
        assert_eq!(
            parse_duration("3 weeks"),
            Err(DurationError::UnknownUnit("weeks".into()))
        );
        assert_eq!(parse_duration("0s"), Err(DurationError::Zero));
        assert_eq!(parse_duration("25h"), Err(DurationError::TooLong));
        assert_eq!(
            parse_duration("99999999999999999999999999999999999999999h"),
            Err(DurationError::TooLong)
        );
    }

    #[test]
    fn formats_read_back() {
        for text in ["10m", "1m30s", "500ms", "1h", "1h0m1s"] {
            let d = parse_duration(text).unwrap();
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
    }
}
