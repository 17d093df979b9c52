//! Timestamps as people read and write them (`manifold keys`, `pins`, `audit`, authored tools' history): stored as
//! seconds (or milliseconds) since the Unix epoch, shown as RFC 3339 UTC, and read back from
//! RFC 3339 for `manifold audit search --since`. Both directions here, without a date library.

/// Milliseconds since the Unix epoch now, as the store's `*_ms` columns keep time (0 on a clock
/// before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar, by the
/// days-to-civil algorithm).
pub fn utc_rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Milliseconds since the Unix epoch of an RFC 3339 time (`2026-12-01T09:30:00Z`, fractional
/// seconds and a `+HH:MM` offset allowed, `t`/`z` in either case) or of a bare date
/// (`2026-12-01`, midnight UTC). `None` for anything else, including impossible dates.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(at) => (text.get(..at)?, Some(text.get(at + 1..)?)),
        None => (text, None),
    };
    let days = civil_days(date)?;
    let (clock_ms, offset_ms) = match time {
        None => (0, 0),
        Some(time) => clock_and_offset(time)?,
    };
    days.checked_mul(86_400_000)?
        .checked_add(clock_ms)?
        .checked_sub(offset_ms)
}

/// Exactly `n` ASCII digits as a number.
fn digits(text: &str, n: usize) -> Option<i64> {
    (text.len() == n && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Days since 1970-01-01 of `YYYY-MM-DD` (the inverse of the days-to-civil step above).
fn civil_days(date: &str) -> Option<i64> {
    let mut parts = date.split('-');
    let (year, month, day) = (
        digits(parts.next()?, 4)?,
        digits(parts.next()?, 2)?,
        digits(parts.next()?, 2)?,
    );
    if parts.next().is_some() || !(1..=12).contains(&month) {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=month_days).contains(&day) {
        return None;
    }
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// `HH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)` as (milliseconds into the day, offset milliseconds).
fn clock_and_offset(time: &str) -> Option<(i64, i64)> {
    let (clock, offset_ms) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (clock, offset) = (time.get(..at)?, time.get(at..)?);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = offset.get(1..)?.split_once(':')?;
        let (hours, minutes) = (digits(hours, 2)?, digits(minutes, 2)?);
        if hours > 23 || minutes > 59 {
            return None;
        }
        (clock, sign * (hours * 60 + minutes) * 60_000)
    };
    let (whole, fraction) = match clock.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (clock, None),
    };
    let mut parts = whole.split(':');
    let (hour, minute, second) = (
        digits(parts.next()?, 2)?,
        digits(parts.next()?, 2)?,
        digits(parts.next()?, 2)?,
    );
    // 60 is a leap second, which Unix time folds into the next one.
    if parts.next().is_some() || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let millis = match fraction {
        None => 0,
        Some(f) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => f
            .bytes()
            .chain(std::iter::repeat(b'0'))
            .take(3)
            .fold(0, |ms, b| ms * 10 + i64::from(b - b'0')),
        Some(_) => return None,
    };
    Some((
        ((hour * 60 + minute) * 60 + second) * 1000 + millis,
        offset_ms,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_read_back_to_what_they_show() {
        for secs in [0, 951_782_400, 1_764_417_845, 4_107_542_399] {
            let shown = utc_rfc3339(secs);
            assert_eq!(
                parse_rfc3339_ms(&shown),
                Some(i64::try_from(secs).unwrap_or(0) * 1000),
                "{shown}"
            );
        }
        assert_eq!(parse_rfc3339_ms("2025-11-29"), Some(1_764_374_400_000));
        assert_eq!(
            parse_rfc3339_ms("2025-11-29t12:04:05.25z"),
            Some(1_764_417_845_250)
        );
        assert_eq!(
            parse_rfc3339_ms("2025-11-29T13:04:05.123456+01:00"),
            Some(1_764_417_845_123)
        );
        assert_eq!(
            parse_rfc3339_ms("2025-11-29T07:34:05-04:30"),
            Some(1_764_417_845_000)
        );
        assert_eq!(parse_rfc3339_ms("1969-12-31T23:59:59Z"), Some(-1000));
    }

    #[test]
    fn what_is_not_an_rfc3339_time_is_refused() {
        for text in [
            "",
            "1h",
            "2025-13-01",
            "2025-02-29",
            "2024-02-30",
            "2025-11-29T12:04",
            "2025-11-29T24:00:00Z",
            "2025-11-29T12:04:05",
            "2025-11-29T12:04:05.Z",
            "2025-11-29T12:04:05+1:00",
            "25-11-29",
            "2025-11-29-01",
        ] {
            assert_eq!(parse_rfc3339_ms(text), None, "{text:?}");
        }
        assert!(parse_rfc3339_ms("2024-02-29").is_some());
    }

    #[test]
    fn timestamps_are_civil_dates_in_utc() {
        assert_eq!(utc_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_rfc3339(1_764_417_845), "2025-11-29T12:04:05Z");
        assert_eq!(utc_rfc3339(1_795_000_000), "2026-11-18T11:06:40Z");
        assert_eq!(utc_rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
    }
}
