use std::time::Duration;

use super::kill_after::{
    kill_after_for, longest_kill_after, shortest_session_timeout, DEFAULT_KILL_AFTER,
};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The sandbox's tick, and ZooKeeper's default one.
const FAST: Duration = ms(200);
const SLOW: Duration = zkwire::DEFAULT_SERVER_TICK;

#[test]
fn kill_after_must_leave_the_healthy_lag_the_margin_and_a_late_renewal() {
    // 10s on a 200ms tick: the lease lags up to 2.73s (two ticks and a 2.33s ping
    // interval), the margin is 667ms: at most 5.93s; the default of 5s fits.
    let longest = longest_kill_after(ms(10_000), FAST).unwrap();
    assert_eq!(longest.as_millis(), 5933);
    assert_eq!(
        kill_after_for(None, ms(10_000), ms(10_000), FAST),
        Ok(DEFAULT_KILL_AFTER)
    );
    // On ZooKeeper's default 2s tick the lease lags up to 6.33s: at most 2.33s, and the
    // default shrinks to fit. (Half the session timeout less the margin, the rule before,
    // allowed 4.33s: SIGTERM came 5s into every hold of a healthy session.)
    let longest = longest_kill_after(ms(10_000), SLOW).unwrap();
    assert_eq!(longest.as_millis(), 2333);
    assert_eq!(
        kill_after_for(None, ms(10_000), ms(10_000), SLOW),
        Ok(longest)
    );
    assert_eq!(
        kill_after_for(Some(ms(1000)), ms(4000), ms(4000), FAST),
        Ok(ms(1000))
    );
    // 4s on a 200ms tick: a lag of 1.73s, a margin of 267ms and 500ms for a late renewal
    // (the healthy control saw 1.69s of trust left, where a rule of two margins allowed a
    // kill-after of 1.73s): 1.5s fits, 1.6s does not.
    assert!(kill_after_for(Some(ms(1500)), ms(4000), ms(4000), FAST).is_ok());
    let refused = kill_after_for(Some(ms(1600)), ms(4000), ms(4000), FAST).unwrap_err();
    assert_eq!(refused.code, crate::fail::USAGE);
    assert_eq!(
        refused.message,
        "--kill-after 1s 600ms does not fit the session timeout 4s: --kill-after, how far the \
         lease may lag on a healthy session (1s 733ms, with servers ticking every 200ms), a \
         margin of 267ms and 500ms for a late renewal must fit in it; use --session-timeout \
         4s 200ms or more, or --kill-after 1s 500ms or less"
    );
    let granted_less = kill_after_for(Some(ms(5000)), ms(4000), ms(10_000), FAST).unwrap_err();
    assert!(
        granted_less
            .message
            .contains("the session timeout 4s (the server's limits; 10s was asked)"),
        "{granted_less:?}"
    );
    // Under 1.5s not even a zero grace fits on a 200ms tick.
    assert_eq!(
        kill_after_for(None, ms(1400), ms(1400), FAST)
            .unwrap_err()
            .message,
        "the session timeout 1s 400ms is too short to run a command under a lock with servers \
         ticking every 200ms; use --session-timeout 1s 500ms or more"
    );
    assert_eq!(
        kill_after_for(Some(Duration::ZERO), ms(1500), ms(1500), FAST),
        Ok(Duration::ZERO)
    );
}

#[test]
fn suggested_session_timeouts_fit() {
    for tick in [FAST, SLOW] {
        for k in [0, 1, 99, 100, 650, 660, 700, 1000, 5000, 3_600_000] {
            let t = shortest_session_timeout(ms(k), tick);
            assert!(
                longest_kill_after(t, tick).is_some_and(|l| l >= ms(k)),
                "{k}ms: {t:?}"
            );
            assert!(
                t < ms(200) || longest_kill_after(t - ms(100), tick).is_none_or(|l| l < ms(k)),
                "{k}ms: {t:?} is not the shortest"
            );
        }
    }
    assert_eq!(shortest_session_timeout(ms(1000), FAST), ms(3200));
    // The default grace on ZooKeeper's default tick.
    assert_eq!(
        shortest_session_timeout(DEFAULT_KILL_AFTER, SLOW),
        ms(15_000)
    );
}

/// zkw's default session timeout is ten ticks, at least 10 s, so that the default
/// `--kill-after` fits on ZooKeeper's default tick with room for a late renewal, and the
/// sandbox's fast tick keeps 10 s.
#[test]
fn the_default_session_leaves_room_for_the_default_kill_after() {
    use crate::connect::default_session_timeout;
    assert_eq!(default_session_timeout(FAST), ms(10_000));
    assert_eq!(default_session_timeout(SLOW), ms(20_000));
    assert_eq!(default_session_timeout(ms(5_000)), ms(50_000));
    for tick in [FAST, SLOW] {
        let t = default_session_timeout(tick);
        let longest = longest_kill_after(t, tick).unwrap();
        // The slack a renewal has before a healthy command would be stopped.
        let slack = longest - DEFAULT_KILL_AFTER;
        assert!(slack >= ms(900), "tick {tick:?}: {slack:?} of slack");
    }
    // 20 s on a 2 s tick: the lease lags up to 9.67 s, two margins are 2.67 s: 7.67 s.
    assert_eq!(
        longest_kill_after(ms(20_000), SLOW).unwrap().as_millis(),
        7666
    );
}
