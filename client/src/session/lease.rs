//! The session lease: until when the quorum is known to keep the session alive.
//!
//! docs/lease.md states the rule and its argument; in short, with T the session timeout and P
//! the relay bound (two ticks of the ensemble's clock):
//! - a **touch** is a request a read/write server answered: that server recorded our session
//!   as alive no sooner than we sent it. On a follower the record reaches the leader, which
//!   expires sessions, only with the follower's answer to the leader's next ping;
//! - a **vouch** is an answered request the leader itself handled after we sent it (a `sync`,
//!   or a successful write): the server we talk to was still the leader's follower then;
//! - a touch answered at `a` is vouched for by a vouch sent at or after `a + P`: the follower
//!   answered a leader ping in between, carrying the touch, and the leader read that answer
//!   before the vouch. A leader cut off from its quorum steps down within P of the moment a
//!   new leader can start, and a new leader restarts every session's clock when it starts;
//! - the lease deadline is the newest vouched touch's send instant plus the *smallest* T
//!   negotiated in the session: a server re-times the session to now + T at every touch, so
//!   a smaller T from a reconnect can bring the expiry forward, and a new leader restarts
//!   the session with the T of its creation. Without a relay bound (a caller that trusts
//!   the server it talks to) every touch counts at once.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The most touches kept while they wait for a vouch. A touch replaces the one before it
/// unless P/8 has passed since the one before that, so this covers about 2·P of history:
/// the touch a vouch needs (answered P before it) is among them unless the vouch's answer
/// took longer than about P. Dropping one only ever makes the lease shorter.
const MAX_TOUCHES: usize = 32;

/// Our own `sync`s in flight at once. Two keep the pace when answers are slower than the
/// pace (each vouch reaches back a relay bound plus two answer delays, not three), and bound
/// what a slow server holds of ours.
const MAX_VOUCHES_IN_FLIGHT: u8 = 2;

/// A request a read/write server answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Touch {
    sent: Instant,
    answered: Instant,
}

/// The lease's bookkeeping (see the module docs).
#[derive(Debug)]
pub(crate) struct Lease {
    /// P; `None` trusts every touch at once.
    relay: Option<Duration>,
    /// Touches not vouched for yet, in answer order (the newest vouched one stays at the
    /// front).
    touches: VecDeque<Touch>,
    /// The newest vouched touch.
    vouched: Option<Touch>,
    /// The smallest session timeout negotiated in this session.
    timeout: Option<Duration>,
    /// The send instant of the newest vouching request (ours or the caller's).
    last_vouch: Option<Instant>,
    /// Our own `sync`s in flight (at most [`MAX_VOUCHES_IN_FLIGHT`]).
    vouches_in_flight: u8,
}

impl Lease {
    pub(crate) fn new(relay: Option<Duration>) -> Self {
        Self {
            relay,
            touches: VecDeque::new(),
            vouched: None,
            timeout: None,
            last_vouch: None,
            vouches_in_flight: 0,
        }
    }

    /// The lease deadline: the newest vouched touch's send instant plus the smallest T the
    /// session has had. It moves back only when a smaller T is negotiated.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.vouched?.sent.checked_add(self.timeout?)
    }

    /// The session timeout the deadline is reckoned with: the smallest negotiated so far.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// A handshake negotiated `timeout` for the session.
    pub(crate) fn negotiated(&mut self, timeout: Duration) {
        self.timeout = Some(self.timeout.map_or(timeout, |t| t.min(timeout)));
    }

    /// A read/write server answered at `answered` a request we sent at `sent`, under session
    /// timeout `timeout`.
    pub(crate) fn touched(&mut self, sent: Instant, answered: Instant, timeout: Duration) {
        self.negotiated(timeout);
        // `vouched_by` relies on answer order; a clock that went back (only a test's can)
        // counts as answered with the newest touch, which only delays a vouch.
        let answered = self
            .touches
            .back()
            .map_or(answered, |newest| newest.answered.max(answered));
        let touch = Touch { sent, answered };
        let Some(relay) = self.relay else {
            return self.vouch(touch);
        };
        // Keep touches spread out: a newer touch close to the one before it replaces it.
        let close = match self.touches.len() {
            n if n >= 2 => {
                answered.saturating_duration_since(self.touches[n - 2].answered) < relay / 8
            }
            _ => false,
        };
        if close {
            self.touches.pop_back();
        }
        self.touches.push_back(touch);
        if self.touches.len() > MAX_TOUCHES {
            self.touches.pop_front();
        }
    }

    /// The leader handled a request we sent at `sent`: every touch answered at least P before
    /// it is vouched for.
    pub(crate) fn vouched_by(&mut self, sent: Instant) {
        self.last_vouch = Some(self.last_vouch.map_or(sent, |l| l.max(sent)));
        let Some(relay) = self.relay else {
            return;
        };
        // Touches are kept in answer order, so those answered by `sent - P` are a prefix:
        // the newest of them is found by bisection (a reply costs one lookup, not one per
        // touch of the last P). No touch qualifies when `sent - P` is before any instant.
        let Some(latest) = sent.checked_sub(relay) else {
            return;
        };
        let vouchable = self.touches.partition_point(|t| t.answered <= latest);
        if let Some(at) = vouchable.checked_sub(1) {
            let touch = self.touches[at];
            self.touches.drain(..at);
            self.vouch(touch);
        }
    }

    /// The leader itself handled a request we sent at `sent` under `timeout`, and a quorum
    /// agreed to it (the creation of a new session).
    pub(crate) fn vouched_directly(&mut self, sent: Instant, timeout: Duration) {
        self.negotiated(timeout);
        self.vouch(Touch {
            sent,
            answered: sent,
        });
    }

    fn vouch(&mut self, touch: Touch) {
        if self.vouched.is_none_or(|v| touch.sent > v.sent) {
            self.vouched = Some(touch);
        }
    }

    /// When our next `sync` should go out: `interval` after the last vouching request, or as
    /// soon as there is a touch when none went out yet. Each one vouches for the newest touch
    /// answered P before it, so a steady pace keeps the vouched touch at most P + 2·interval
    /// old on a healthy connection, whatever P is.
    pub(crate) fn vouch_at(&self, interval: Duration) -> Option<Instant> {
        self.relay?;
        if self.vouches_in_flight >= MAX_VOUCHES_IN_FLIGHT {
            return None;
        }
        match self.last_vouch {
            Some(last) => last.checked_add(interval),
            None => self.touches.front().map(|t| t.answered),
        }
    }

    /// Our `sync` went out at `now`.
    pub(crate) fn on_vouch_sent(&mut self, now: Instant) {
        self.vouches_in_flight = self.vouches_in_flight.saturating_add(1);
        self.last_vouch = Some(self.last_vouch.map_or(now, |l| l.max(now)));
    }

    /// One of our `sync`s was answered (or failed).
    pub(crate) fn on_vouch_done(&mut self) {
        self.vouches_in_flight = self.vouches_in_flight.saturating_sub(1);
    }

    /// The connection dropped: none of our `sync`s will be answered.
    pub(crate) fn on_disconnect(&mut self) {
        self.vouches_in_flight = 0;
    }

    /// A new session begins: nothing of it is known yet.
    pub(crate) fn forget(&mut self) {
        *self = Self::new(self.relay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(4);
    const P: Duration = Duration::from_millis(400);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_touch_waits_for_a_vouch_sent_p_after_its_answer() {
        let t0 = Instant::now();
        let mut lease = Lease::new(Some(P));
        lease.touched(t0, t0 + ms(10), T);
        assert_eq!(lease.deadline(), None, "a touch alone proves nothing");
        lease.vouched_by(t0 + ms(409));
        assert_eq!(
            lease.deadline(),
            None,
            "sent 399 ms after the answer: too soon"
        );
        lease.vouched_by(t0 + ms(410));
        assert_eq!(lease.deadline(), Some(t0 + T));
    }

    #[test]
    fn the_newest_vouchable_touch_wins_and_the_lease_never_goes_back() {
        let t0 = Instant::now();
        let mut lease = Lease::new(Some(P));
        for i in 0..10 {
            lease.touched(t0 + ms(100 * i), t0 + ms(100 * i + 5), T);
        }
        // Touches answered at 5, 105, …, 905 ms; a vouch sent at 1000 ms reaches back to the
        // one answered at 505 or before (kept touches are at least P/8 = 50 ms apart).
        lease.vouched_by(t0 + ms(1000));
        let d = lease.deadline().expect("vouched");
        assert!(
            d <= t0 + ms(500) + T && d >= t0 + ms(400) + T,
            "{:?}",
            d - t0
        );
        lease.vouched_by(t0 + ms(600));
        assert_eq!(
            lease.deadline(),
            Some(d),
            "an older vouch never shortens it"
        );
    }

    #[test]
    fn without_a_relay_bound_every_touch_counts_at_once() {
        let t0 = Instant::now();
        let mut lease = Lease::new(None);
        lease.touched(t0 + ms(7), t0 + ms(9), T);
        assert_eq!(lease.deadline(), Some(t0 + ms(7) + T));
        assert_eq!(lease.vouch_at(ms(100)), None, "no syncs are needed");
    }

    /// A server re-times the session at every touch with the T of that connection, so a
    /// smaller T negotiated later can bring the expiry forward: the smallest T counts.
    #[test]
    fn a_smaller_timeout_later_shortens_the_lease() {
        let t0 = Instant::now();
        let mut lease = Lease::new(None);
        lease.touched(t0, t0, T);
        lease.touched(t0 + ms(10), t0 + ms(20), ms(1000));
        assert_eq!(lease.deadline(), Some(t0 + ms(1010)));
        lease.touched(t0 + ms(30), t0 + ms(40), T);
        assert_eq!(
            lease.deadline(),
            Some(t0 + ms(1030)),
            "the smallest T stays"
        );
    }

    #[test]
    fn vouches_are_paced_two_at_most_in_flight() {
        let t0 = Instant::now();
        let mut lease = Lease::new(Some(P));
        assert_eq!(lease.vouch_at(ms(600)), None, "nothing to vouch for yet");
        lease.touched(t0, t0 + ms(10), T);
        assert_eq!(
            lease.vouch_at(ms(600)),
            Some(t0 + ms(10)),
            "the first one at once"
        );
        lease.on_vouch_sent(t0 + ms(10));
        assert_eq!(lease.vouch_at(ms(600)), Some(t0 + ms(610)), "paced");
        lease.on_vouch_sent(t0 + ms(610));
        assert_eq!(lease.vouch_at(ms(600)), None, "two in flight at most");
        // Both answered late, at 900 ms: the first is too early to vouch for the handshake,
        // the second is not.
        lease.touched(t0 + ms(10), t0 + ms(900), T);
        lease.vouched_by(t0 + ms(10));
        lease.on_vouch_done();
        assert_eq!(lease.deadline(), None);
        assert_eq!(
            lease.vouch_at(ms(600)),
            Some(t0 + ms(1210)),
            "paced from the last one"
        );
        lease.touched(t0 + ms(610), t0 + ms(900), T);
        lease.vouched_by(t0 + ms(610));
        lease.on_vouch_done();
        assert_eq!(
            lease.deadline(),
            Some(t0 + T),
            "the handshake, answered 600 ms before"
        );
        lease.on_vouch_sent(t0 + ms(1210));
        lease.on_disconnect();
        assert_eq!(
            lease.vouch_at(ms(600)),
            Some(t0 + ms(1810)),
            "none in flight after a drop"
        );
    }

    /// A relay bound larger than the pace: each sync reaches back to the newest touch answered
    /// P before it, so the vouched touch is never older than P + 2 intervals.
    #[test]
    fn a_steady_pace_keeps_the_lease_within_p_plus_two_intervals() {
        let t0 = Instant::now();
        let p = ms(4000);
        let interval = ms(1000);
        let mut lease = Lease::new(Some(p));
        lease.touched(t0, t0 + ms(5), T * 3);
        lease.vouched_directly(t0, T * 3);
        let mut now = t0 + ms(5);
        for _ in 0..100 {
            let at = lease.vouch_at(interval).expect("a sync is due");
            assert!(at >= now);
            now = at;
            lease.on_vouch_sent(now);
            now += ms(5);
            lease.touched(at, now, T * 3);
            lease.vouched_by(at);
            lease.on_vouch_done();
            let age = (T * 3).saturating_sub(lease.deadline().expect("a lease") - now);
            assert!(age <= p + interval * 2, "{age:?}");
        }
    }

    #[test]
    fn touches_stay_bounded() {
        let t0 = Instant::now();
        let mut lease = Lease::new(Some(P));
        for i in 0..10_000 {
            lease.touched(t0 + ms(i), t0 + ms(i + 1), T);
        }
        assert!(lease.touches.len() <= MAX_TOUCHES);
        lease.vouched_by(t0 + ms(10_001));
        let d = lease.deadline().expect("vouched");
        assert!(d >= t0 + ms(9_500) + T, "{:?}", d - t0);
    }

    /// The rule as the module docs state it, checked the slow way: the newest touch answered
    /// at least P before one of the vouches, over every touch ever answered.
    fn deadline_by_definition(touches: &[Touch], vouches: &[Instant]) -> Option<Instant> {
        let vouched = touches
            .iter()
            .filter(|t| vouches.iter().any(|&v| t.answered + P <= v))
            .map(|t| t.sent)
            .max()?;
        Some(vouched + T)
    }

    proptest::proptest! {
        /// Bisection finds the touch the definition names, or one a replaced touch stood
        /// for (never newer than the definition's); and never a lease the definition lacks.
        #[test]
        fn the_lease_never_outruns_its_definition(
            steps in proptest::collection::vec((0u64..300, 0u64..50, proptest::bool::ANY), 1..80)
        ) {
            let t0 = Instant::now();
            let mut lease = Lease::new(Some(P));
            let (mut now, mut touches, mut vouches) = (t0, Vec::new(), Vec::new());
            for (gap, wait, vouch) in steps {
                now += ms(gap);
                let sent = now;
                now += ms(wait);
                lease.touched(sent, now, T);
                touches.push(Touch { sent, answered: now });
                if vouch {
                    lease.vouched_by(sent);
                    vouches.push(sent);
                }
                let ours = lease.deadline();
                let defined = deadline_by_definition(&touches, &vouches);
                proptest::prop_assert!(ours <= defined, "{ours:?} > {defined:?}");
                proptest::prop_assert_eq!(ours.is_some(), defined.is_some());
            }
        }
    }
}
