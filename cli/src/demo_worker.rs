//! The demo's critical section (`zkw __demo-worker DIR`, run by `zkw lock`) and the analysis
//! of what the workers recorded.
//!
//! Files in DIR:
//! - `inside`: exists while a worker is in its critical section, created with `O_EXCL`; a
//!   worker that finds it already there records an overlap;
//! - `counter`: `<count> <last fencing token>`, read, incremented and replaced (rename) by
//!   each holder, which also checks that its token is newer than the last one, as a fenced
//!   resource would;
//! - `log`: one line per critical section, `<count> <token> <enter µs> <exit µs>`;
//! - `violations`: one line per overlap or stale token seen.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::fail::{Failure, FAILED};
use crate::lock::FENCING_TOKEN_ENV;

/// How long a worker stays in its critical section (long enough for an overlap to show).
const INSIDE: Duration = Duration::from_millis(2);

/// The exit code of a worker that saw a violation.
const VIOLATION: u8 = 3;

/// Runs one critical section in `dir`; returns the exit code.
///
/// # Errors
/// A failure when the files cannot be read or written, or the token is missing.
pub(crate) fn run(dir: &Path) -> Result<u8, Failure> {
    let token: i64 = std::env::var(FENCING_TOKEN_ENV)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| {
            Failure::new(
                FAILED,
                format!("{FENCING_TOKEN_ENV} is not set: run me under zkw lock"),
            )
        })?;
    let enter = now_us();
    let marker = dir.join("inside");
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
    {
        Ok(mut file) => file
            .write_all(token.to_string().as_bytes())
            .map_err(io_failure)?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            record_violation(
                dir,
                &format!("overlap: token {token} entered while another holder was inside"),
            )?;
            return Ok(VIOLATION);
        }
        Err(e) => return Err(io_failure(e)),
    }
    let outcome = update_counter(dir, token);
    std::thread::sleep(INSIDE);
    let exit = now_us();
    fs::remove_file(&marker).map_err(io_failure)?;
    let count = match outcome? {
        Ok(count) => count,
        Err(stale) => {
            record_violation(dir, &stale)?;
            return Ok(VIOLATION);
        }
    };
    append(
        &dir.join("log"),
        &format!("{count} {token} {enter} {exit}\n"),
    )
    .map_err(io_failure)?;
    Ok(0)
}

/// Increments the counter if `token` is newer than the last one; `Ok(Err(why))` otherwise.
fn update_counter(dir: &Path, token: i64) -> Result<Result<u64, String>, Failure> {
    let path = dir.join("counter");
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_failure(e)),
    };
    let (count, last) = parse_counter(&text);
    if token <= last {
        return Ok(Err(format!(
            "stale token {token}: the resource has already seen {last}"
        )));
    }
    let tmp = dir.join("counter.tmp");
    fs::write(&tmp, format!("{} {token}\n", count + 1))
        .and_then(|()| fs::rename(&tmp, &path))
        .map_err(io_failure)?;
    Ok(Ok(count + 1))
}

/// `<count> <last token>`; an empty file is `(0, 0)`.
pub(crate) fn parse_counter(text: &str) -> (u64, i64) {
    let mut fields = text.split_whitespace();
    let count = fields.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let last = fields.next().and_then(|t| t.parse().ok()).unwrap_or(0);
    (count, last)
}

fn record_violation(dir: &Path, what: &str) -> Result<(), Failure> {
    append(&dir.join("violations"), &format!("{what}\n")).map_err(io_failure)
}

/// Appends one line with a single write (`O_APPEND`: lines from several processes do not mix).
fn append(path: &Path, line: &str) -> io::Result<()> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

/// Wall-clock microseconds since the epoch (comparable across processes).
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn io_failure(e: io::Error) -> Failure {
    Failure::new(FAILED, format!("demo worker: {e}"))
}

/// One critical section, as logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Section {
    /// The counter value it wrote (its place in the order of acquisitions).
    pub(crate) count: u64,
    /// Its fencing token.
    pub(crate) token: i64,
    /// When it entered, µs since the epoch.
    pub(crate) enter_us: u64,
    /// When it left.
    pub(crate) exit_us: u64,
}

/// Parses the `log` file; malformed lines are skipped.
pub(crate) fn parse_log(text: &str) -> Vec<Section> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                [count, token, enter, exit] => Some(Section {
                    count: count.parse().ok()?,
                    token: token.parse().ok()?,
                    enter_us: enter.parse().ok()?,
                    exit_us: exit.parse().ok()?,
                }),
                _ => None,
            }
        })
        .collect()
}

/// What the demo checks and reports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Analysis {
    /// Critical sections logged.
    pub(crate) acquisitions: usize,
    /// The most sections inside at once (by their logged intervals; 1 when exclusive).
    pub(crate) max_concurrent: usize,
    /// Whether the tokens grow strictly in the order of acquisition.
    pub(crate) tokens_increasing: bool,
    /// Whether the counter values are exactly 1..=acquisitions.
    pub(crate) counts_sequential: bool,
    /// Hand-off latencies: one holder's exit to the next one's entry, in order.
    pub(crate) handoffs: Vec<Duration>,
}

/// Analyses the logged sections.
pub(crate) fn analyse(mut sections: Vec<Section>) -> Analysis {
    sections.sort_by_key(|s| s.count);
    let tokens_increasing = sections.windows(2).all(|w| w[0].token < w[1].token);
    let counts_sequential = sections.iter().zip(1..).all(|(s, n)| s.count == n);
    let max_concurrent = max_overlap(&sections);
    sections.sort_by_key(|s| s.enter_us);
    let handoffs = sections
        .windows(2)
        .map(|w| Duration::from_micros(w[1].enter_us.saturating_sub(w[0].exit_us)))
        .collect();
    Analysis {
        acquisitions: sections.len(),
        max_concurrent,
        tokens_increasing,
        counts_sequential,
        handoffs,
    }
}

/// The largest number of intervals that contain a common instant (an exit at the same
/// microsecond as an entry does not overlap it).
fn max_overlap(sections: &[Section]) -> usize {
    let mut edges: Vec<(u64, i32)> = sections
        .iter()
        .flat_map(|s| [(s.enter_us, 1), (s.exit_us, -1)])
        .collect();
    // Exits sort before entries at the same instant.
    edges.sort_unstable();
    let (mut inside, mut most) = (0i32, 0i32);
    for (_, delta) in edges {
        inside += delta;
        most = most.max(inside);
    }
    usize::try_from(most).unwrap_or(0)
}

/// The `q` quantile (0..=1) of `samples`, nearest rank.
pub(crate) fn quantile(samples: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let last = sorted.len().checked_sub(1)?;
    // Nearest rank: ceil(q·n), counted from 1.
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.saturating_sub(1).min(last)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`analyse`] of sections given as `(count, token, enter_us, exit_us)`.
    fn analyse_rows(rows: &[(u64, i64, u64, u64)]) -> Analysis {
        let sections = rows
            .iter()
            .map(|&(count, token, enter_us, exit_us)| Section {
                count,
                token,
                enter_us,
                exit_us,
            });
        analyse(sections.collect())
    }

    #[test]
    fn exclusive_run_passes() {
        let a = analyse_rows(&[(2, 20, 300, 400), (1, 10, 100, 200), (3, 30, 450, 500)]);
        assert_eq!(a.acquisitions, 3);
        assert_eq!(a.max_concurrent, 1);
        assert!(a.tokens_increasing && a.counts_sequential);
        assert_eq!(
            a.handoffs,
            [Duration::from_micros(100), Duration::from_micros(50)]
        );
    }

    #[test]
    fn violations_are_seen() {
        let a = analyse_rows(&[(1, 10, 100, 300), (2, 5, 200, 400), (2, 30, 400, 500)]);
        assert_eq!(a.max_concurrent, 2);
        assert!(!a.tokens_increasing);
        assert!(!a.counts_sequential);
    }

    #[test]
    fn log_and_counter_parsing() {
        assert_eq!(parse_log("1 5 10 20\nbad line\n2 6 30 40\n").len(), 2);
        assert_eq!(parse_counter("7 42\n"), (7, 42));
        assert_eq!(parse_counter(""), (0, 0));
    }

    #[test]
    fn quantiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&samples, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(quantile(&samples, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(quantile(&samples, 1.0), Some(Duration::from_millis(100)));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn worker_in_a_directory() {
        let dir = std::env::temp_dir().join(format!("zkw-worker-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap_or_default();
        assert_eq!(update_counter(&dir, 5).ok(), Some(Ok(1)));
        assert_eq!(update_counter(&dir, 9).ok(), Some(Ok(2)));
        assert!(matches!(update_counter(&dir, 9), Ok(Err(_))));
        let _ = fs::remove_dir_all(&dir);
    }
}
