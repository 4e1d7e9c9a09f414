use std::time::Duration;

use super::kill_after::{
    kill_after_for, longest_kill_after, shortest_session_timeout, DEFAULT_KILL_AFTER,
};

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn kill_after_must_fit_half_the_session_timeout_less_the_margin() {
    // 10s: a margin of 666ms, so at most 4.33s; the default shrinks to fit.
    let longest = longest_kill_after(ms(10_000)).unwrap();
    assert_eq!(longest.as_millis(), 4333);
    assert_eq!(kill_after_for(None, ms(10_000), ms(10_000)), Ok(longest));
    assert_eq!(
        kill_after_for(None, ms(60_000), ms(60_000)),
        Ok(DEFAULT_KILL_AFTER)
    );
    assert_eq!(
        kill_after_for(Some(ms(1000)), ms(4000), ms(4000)),
        Ok(ms(1000))
    );
    // 4s: a margin of 267ms; 1.73s fits, 1.8s does not.
    assert!(kill_after_for(Some(ms(1733)), ms(4000), ms(4000)).is_ok());
    let refused = kill_after_for(Some(ms(1800)), ms(4000), ms(4000)).unwrap_err();
    assert_eq!(refused.code, crate::fail::USAGE);
    assert_eq!(
        refused.message,
        "--kill-after 1s 800ms does not fit the session timeout 4s: --kill-after plus a \
         margin of 267ms must not exceed half the session timeout; use --session-timeout \
         4s 200ms or more, or --kill-after 1s 700ms or less"
    );
    let granted_less = kill_after_for(Some(ms(5000)), ms(4000), ms(10_000)).unwrap_err();
    assert!(
        granted_less
            .message
            .contains("the session timeout 4s (the server's limits; 10s was asked)"),
        "{granted_less:?}"
    );
    // Under 200ms not even a zero grace fits.
    assert_eq!(
        kill_after_for(None, ms(150), ms(150)).unwrap_err().message,
        "the session timeout 150ms is too short to run a command under a lock; use \
         --session-timeout 200ms or more"
    );
    assert_eq!(
        kill_after_for(Some(Duration::ZERO), ms(200), ms(200)),
        Ok(Duration::ZERO)
    );
}

#[test]
fn suggested_session_timeouts_fit() {
    for k in [0, 1, 99, 100, 650, 660, 700, 1000, 5000, 3_600_000] {
        let t = shortest_session_timeout(ms(k));
        assert!(
            longest_kill_after(t).is_some_and(|l| l >= ms(k)),
            "{k}ms: {t:?}"
        );
        assert!(
            t < ms(200) || longest_kill_after(t - ms(100)).is_none_or(|l| l < ms(k)),
            "{k}ms: {t:?} is not the shortest"
        );
    }
    assert_eq!(shortest_session_timeout(ms(1000)), ms(2400));
}
