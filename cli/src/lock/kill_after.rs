//! `--kill-after`: how long a command has between SIGTERM and SIGKILL, and the one rule that
//! it must fit the session timeout.

use std::time::Duration;

use zkwire::lease_staleness;
use zkwire_recipes::lease_margin;

use crate::cli::show as show_duration;
use crate::fail::Failure;

/// How long a command has between SIGTERM and SIGKILL by default, when the session timeout
/// leaves room for it (see [`longest_kill_after`]).
pub(crate) const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);

/// How late a renewal may come on a healthy session beyond [`zkwire::lease_staleness`], at
/// the least: the round trips of the vouching `sync`, the runtime's timers and the servers'
/// queues on a loaded host. The 30-minute healthy control of docs/lease.md saw 0.31 s on a
/// 2-core machine running the ensemble and the holders.
const LATE_RENEWAL: Duration = Duration::from_millis(500);

/// The longest `--kill-after` that fits the negotiated session timeout `t` on servers ticking
/// every `tick`: `t − lag − margin − late`, where `lag` is how far the lease may fall behind
/// on a healthy session ([`zkwire::lease_staleness`]: two ticks plus the ping interval),
/// `margin` is `lease_margin(t)` and `late` the larger of that margin and [`LATE_RENEWAL`];
/// `None` when not even zero fits.
///
/// This is the one place the rule lives. The command gets SIGTERM `--kill-after` before the
/// hold stops being trusted, i.e. once the lease has fallen `t − margin − kill_after` behind.
/// That must never happen on a healthy session, whose lease falls up to `lag` behind, plus
/// what a loaded host adds: so `kill_after + margin + lag + late` must fit in `t`.
pub(super) fn longest_kill_after(t: Duration, tick: Duration) -> Option<Duration> {
    let margin = lease_margin(t);
    t.checked_sub(lease_staleness(t, tick))?
        .checked_sub(margin)?
        .checked_sub(late_renewal(t))
}

/// The room left for a renewal later than the lag formula: [`LATE_RENEWAL`], or the margin
/// if larger.
fn late_renewal(t: Duration) -> Duration {
    lease_margin(t).max(LATE_RENEWAL)
}

/// The `--kill-after` to use: the one given if it fits the negotiated session timeout
/// `granted` on servers ticking every `tick` ([`longest_kill_after`]), else a usage failure
/// naming both and the fix; without one, [`DEFAULT_KILL_AFTER`] or the longest that fits if
/// shorter. `asked` is the session timeout zkw asked for.
pub(super) fn kill_after_for(
    given: Option<Duration>,
    granted: Duration,
    asked: Duration,
    tick: Duration,
) -> Result<Duration, Failure> {
    let longest = longest_kill_after(granted, tick);
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
    let need = shortest_session_timeout(given.unwrap_or_default(), tick);
    let message = match (given, longest) {
        (Some(k), Some(longest)) => format!(
            "--kill-after {} does not fit {timeout}: --kill-after, how far the lease may lag on a healthy session ({}, with servers ticking every {}), a margin of {} and {} for a late renewal must fit in it; use --session-timeout {} or more, or --kill-after {} or less",
            show_duration(k),
            show_duration(lease_staleness(granted, tick)),
            show_duration(tick),
            show_duration(lease_margin(granted)),
            show_duration(late_renewal(granted)),
            show_duration(need),
            show_duration(round_down(longest)),
        ),
        _ => format!(
            "{timeout} is too short to run a command under a lock with servers ticking every {}; use --session-timeout {} or more",
            show_duration(tick),
            show_duration(need)
        ),
    };
    Err(Failure::usage(message))
}

/// The shortest session timeout, in whole tenths of a second, that `kill_after` fits with
/// servers ticking every `tick`.
pub(super) fn shortest_session_timeout(kill_after: Duration, tick: Duration) -> Duration {
    let fits = |ms: u64| {
        longest_kill_after(Duration::from_millis(ms), tick)
            .is_some_and(|longest| longest >= kill_after)
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
