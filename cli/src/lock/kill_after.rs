//! `--kill-after`: how long a command has between SIGTERM and SIGKILL, and the one rule that
//! it must fit the session timeout.

use std::time::Duration;

use zkwire_recipes::lease_margin;

use crate::cli::show as show_duration;
use crate::fail::Failure;

/// How long a command has between SIGTERM and SIGKILL by default, when the session timeout
/// leaves room for it (see [`longest_kill_after`]).
pub(crate) const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);

/// The longest `--kill-after` that fits the negotiated session timeout `t`:
/// `t / 2 − lease_margin(t)`; `None` when not even zero fits.
///
/// This is the one place the rule lives. The command gets SIGTERM `--kill-after` before the
/// hold stops being trusted, i.e. `t − margin − kill_after` after the newest acknowledged
/// request. That must never happen on a healthy session, which renews its lease at least
/// every `t / 3` plus a round trip. With `kill_after + margin ≤ t / 2`, SIGTERM is due no
/// sooner than `t / 2` after a renewal: a sixth of `t` to spare for the round trip and for
/// late timers.
pub(super) fn longest_kill_after(t: Duration) -> Option<Duration> {
    (t / 2).checked_sub(lease_margin(t))
}

/// The `--kill-after` to use: the one given if it fits the negotiated session timeout
/// `granted` ([`longest_kill_after`]), else a usage failure naming both and the fix; without
/// one, [`DEFAULT_KILL_AFTER`] or the longest that fits if shorter. `asked` is the session
/// timeout zkw asked for.
pub(super) fn kill_after_for(
    given: Option<Duration>,
    granted: Duration,
    asked: Duration,
) -> Result<Duration, Failure> {
    let longest = longest_kill_after(granted);
    match (given, longest) {
        (None, Some(longest)) => return Ok(DEFAULT_KILL_AFTER.min(longest)),
        (Some(k), Some(longest)) if k <= longest => return Ok(k),
        _ => {}
    }
    let timeout = if granted == asked {
        format!("the session timeout {}", show_duration(granted))
    } else {
        format!(
            "the session timeout {} (the server's limits; {} was asked)",
            show_duration(granted),
            show_duration(asked)
        )
    };
    let need = shortest_session_timeout(given.unwrap_or_default());
    let message = match (given, longest) {
        (Some(k), Some(longest)) => format!(
            "--kill-after {} does not fit {timeout}: --kill-after plus a margin of {} must not exceed half the session timeout; use --session-timeout {} or more, or --kill-after {} or less",
            show_duration(k),
            show_duration(lease_margin(granted)),
            show_duration(need),
            show_duration(round_down(longest)),
        ),
        _ => format!(
            "{timeout} is too short to run a command under a lock; use --session-timeout {} or more",
            show_duration(need)
        ),
    };
    Err(Failure::usage(message))
}

/// The shortest session timeout, in whole tenths of a second, that `kill_after` fits.
pub(super) fn shortest_session_timeout(kill_after: Duration) -> Duration {
    let fits = |ms: u64| {
        longest_kill_after(Duration::from_millis(ms)).is_some_and(|longest| longest >= kill_after)
    };
    // The longest kill-after only grows with the session timeout: bisect.
    let (mut low, mut high) = (0_u64, u64::from(u32::MAX));
    if !fits(high) {
        return Duration::from_millis(high);
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Duration::from_millis(high.div_ceil(100) * 100)
}

/// `d` rounded down to a tenth of a second (kept when shorter than that).
fn round_down(d: Duration) -> Duration {
    let tenths = d.as_millis() / 100;
    if tenths == 0 {
        d
    } else {
        Duration::from_millis(u64::try_from(tenths * 100).unwrap_or(u64::MAX))
    }
}
