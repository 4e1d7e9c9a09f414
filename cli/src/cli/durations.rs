//! Durations on the command line: read (humantime, or a bare number of seconds) and shown.

use std::time::Duration;

/// A positive duration: humantime's `500ms`, `1.5s`, `2m`, `1h 30m`, or a bare number of
/// seconds.
///
/// # Errors
/// What is wrong with `text`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    match duration_or_zero(text)? {
        d if d.is_zero() => Err("must be positive".to_owned()),
        d => Ok(d),
    }
}

/// As [`duration`], zero allowed (`--timeout 0`: try once).
///
/// # Errors
/// What is wrong with `text`.
pub(crate) fn duration_or_zero(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err("must be positive".to_owned());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| "out of range".to_owned());
    }
    humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 500ms, 5s, 2m)"))
}

/// A duration for messages, rounded: `250ms`, `2s 501ms`, `1m 30s`.
pub(crate) fn show(d: Duration) -> String {
    let unit: u128 = if d >= Duration::from_secs(60) {
        1_000_000_000
    } else {
        1_000_000
    };
    let nanos = (d.as_nanos() + unit / 2) / unit * unit;
    let rounded = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
    humantime::format_duration(rounded).to_string()
}
