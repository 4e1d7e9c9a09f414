//! Durations on the command line: `500ms`, `5s`, `1.5s`, `2m`, `1h`; a bare number is seconds.

use std::time::Duration;

/// Parses a duration such as `500ms`, `5s`, `1.5s`, `2m` or `1h` (a bare number is seconds).
///
/// # Errors
/// A message saying what is wrong.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {text:?} (use ms, s, m or h)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text:?} (e.g. 500ms, 5s, 2m)"))?;
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("duration out of range: {text:?}"))
}

/// A duration as a person would write it: `250ms`, `1.5s`, `90s`.
pub(crate) fn show_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{:.0}µs", d.as_secs_f64() * 1e6)
    } else if ms < 10.0 {
        format!("{ms:.1}ms")
    } else if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1e400").is_err());
    }

    #[test]
    fn shows_durations() {
        assert_eq!(show_duration(Duration::from_micros(250)), "250µs");
        assert_eq!(show_duration(Duration::from_micros(4200)), "4.2ms");
        assert_eq!(show_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(show_duration(Duration::from_millis(1500)), "1.5s");
    }
}
