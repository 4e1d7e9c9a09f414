//! The session's timers and its lease (docs/lease.md explains both).
//!
//! With T the negotiated session timeout (the requested one before the first handshake):
//! - **acknowledged instant**: the send instant of the newest request a server answered (or
//!   of the ConnectRequest of the newest handshake); the pings below are paced from it. The
//!   lease (`lease.rs`) keeps its own record: a read/write server's answers only, counted
//!   once the quorum's leader has vouched for them;
//! - **ping interval** = half the read timeout, less 1 s when that leaves over 1 s, at most
//!   10 s (the Java client's ratio, always ≤ T/3), measured from the acknowledged instant:
//!   a busy session whose requests are answered sends no pings, and one whose traffic is only
//!   notifications (or requests left unanswered) still keeps the server hearing from it. One
//!   ping at a time, since ping replies all carry xid -2. With the lease's syncs flowing (a
//!   **vouch interval**, half the ping interval, apart) no ping goes out;
//! - **read timeout** = 2/3 T: the connection is dropped when nothing has been received for
//!   that long, *or* when the oldest request in flight (a sync or ping included) has waited
//!   that long for its answer, even while notifications keep arriving. The client then moves
//!   to another server, which may still save the session, though not always the lease;
//! - **connect timeout** = T / number of hosts, at most T/2 (or as configured): the whole
//!   attempt, from TCP connect to ConnectResponse. A server can take a connection and never
//!   answer it (ZooKeeper 3.8 does so to one it closes while starting up), and a restarted
//!   server expires the sessions it restored T after loading them: with a single host an
//!   attempt of T would lose the session to one such stall, T/2 leaves time for another;
//! - **local expiry** = 4/3 T without receiving anything, while disconnected: the server has
//!   most likely expired the session by then, so we report `Expired` instead of retrying
//!   forever (the Java client 3.9.3+ uses the same ratio). Not surely: a ConnectRequest that
//!   reached a server whose answer was lost revalidated the session. Holds trust the lease,
//!   never this report (docs/lease.md, "Timers").

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::types::{IdMap, RequestId, SessionConfig};

const MAX_PING_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(crate) struct Timers {
    last_recv: Instant,
    connect_started: Instant,
    /// The send instant of the newest request a server has answered; `None` before the
    /// first handshake.
    acknowledged: Option<Instant>,
    ping_outstanding: bool,
}

impl Timers {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            last_recv: now,
            connect_started: now,
            acknowledged: None,
            ping_outstanding: false,
        }
    }

    /// A transport is up and the ConnectRequest written at `now`.
    pub(crate) fn on_connect(&mut self, now: Instant) {
        self.connect_started = now;
        self.ping_outstanding = false;
    }

    pub(crate) fn on_receive(&mut self, now: Instant) {
        self.last_recv = now;
    }

    /// A ConnectResponse: the server touched the session when it read our ConnectRequest.
    /// Returns when that was sent.
    pub(crate) fn on_handshake(&mut self) -> Instant {
        self.acknowledge(self.connect_started);
        self.connect_started
    }

    /// A server answered a request we sent at `sent`.
    pub(crate) fn acknowledge(&mut self, sent: Instant) {
        self.acknowledged = Some(self.acknowledged.map_or(sent, |a| a.max(sent)));
    }

    pub(crate) fn on_disconnect(&mut self) {
        self.ping_outstanding = false;
    }

    pub(crate) fn on_ping_sent(&mut self) {
        self.ping_outstanding = true;
    }

    pub(crate) fn on_ping_reply(&mut self) {
        self.ping_outstanding = false;
    }

    pub(crate) fn connect_timeout(
        &self,
        config: &SessionConfig,
        negotiated: Option<Duration>,
    ) -> Duration {
        let timeout = negotiated.unwrap_or(config.session_timeout);
        let shares = u32::try_from(config.host_count.max(2)).unwrap_or(u32::MAX);
        config.connect_timeout.unwrap_or(timeout / shares)
    }

    pub(crate) fn connect_deadline(&self, connect_timeout: Duration) -> Option<Instant> {
        self.connect_started.checked_add(connect_timeout)
    }

    /// When the connection counts as dead: `timeout`'s read timeout after the last byte
    /// received, or after the send instant of the oldest request still unanswered.
    pub(crate) fn read_deadline(
        &self,
        periods: &Periods,
        oldest_unanswered: Option<Instant>,
    ) -> Option<Instant> {
        let since = oldest_unanswered.map_or(self.last_recv, |s| s.min(self.last_recv));
        since.checked_add(periods.read)
    }

    /// When the next ping is due, if none is outstanding.
    pub(crate) fn ping_at(&self, periods: &Periods) -> Option<Instant> {
        if self.ping_outstanding {
            return None;
        }
        let base = self.acknowledged.unwrap_or(self.connect_started);
        base.checked_add(periods.ping)
    }

    /// When a disconnected session is to be reported expired.
    pub(crate) fn expiry_at(
        &self,
        negotiated: Option<Duration>,
        session_id: i64,
    ) -> Option<Instant> {
        if session_id == 0 {
            return None;
        }
        negotiated.and_then(|t| self.last_recv.checked_add(t.saturating_mul(4) / 3))
    }
}

/// The deadlines of the requests still unanswered, in order: the next one is the first, and
/// the expired ones pop from the front. A request is in here from its submission (if it has
/// a deadline) until it is answered or cancelled.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    order: BTreeSet<(Instant, RequestId)>,
    by_id: IdMap<RequestId, Instant>,
}

impl Deadlines {
    pub(crate) fn insert(&mut self, id: RequestId, at: Instant) {
        self.order.insert((at, id));
        self.by_id.insert(id, at);
    }

    /// Forgets `id` (answered or cancelled); cheap when no request has a deadline.
    pub(crate) fn remove(&mut self, id: RequestId) {
        if self.by_id.is_empty() {
            return;
        }
        if let Some(at) = self.by_id.remove(&id) {
            self.order.remove(&(at, id));
        }
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.order.first().map(|(at, _)| *at)
    }

    /// Takes the first request whose deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<RequestId> {
        let (at, id) = *self.order.first()?;
        if at > now {
            return None;
        }
        self.order.pop_first();
        self.by_id.remove(&id);
        Some(id)
    }
}

/// The periods that follow from a session timeout, worked out once per timeout: the session
/// asks for its next deadline at every step of a request's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Periods {
    /// The session timeout they follow from.
    pub(crate) timeout: Duration,
    /// [`read_timeout`].
    pub(crate) read: Duration,
    /// [`ping_interval`].
    pub(crate) ping: Duration,
    /// [`vouch_interval`] of the lease's timeout.
    pub(crate) vouch: Duration,
}

impl Periods {
    /// The periods of a connection under `timeout`, for a lease reckoned with
    /// `lease_timeout` (no more than `timeout`).
    pub(crate) fn of(timeout: Duration, lease_timeout: Duration) -> Self {
        Self {
            timeout,
            read: read_timeout(timeout),
            ping: ping_interval(timeout),
            vouch: vouch_interval(lease_timeout),
        }
    }
}

pub(crate) fn read_timeout(timeout: Duration) -> Duration {
    timeout.saturating_mul(2) / 3
}

/// How often the lease asks the leader to vouch for it: twice per ping interval, so that a
/// vouch reaches back one interval at most (docs/lease.md, "Timers").
pub(crate) fn vouch_interval(timeout: Duration) -> Duration {
    ping_interval(timeout) / 2
}

pub(crate) fn ping_interval(timeout: Duration) -> Duration {
    let half = read_timeout(timeout) / 2;
    let bias = if half > Duration::from_secs(2) {
        Duration::from_secs(1)
    } else {
        Duration::ZERO
    };
    (half - bias).min(MAX_PING_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_match_the_java_client() {
        let t = Duration::from_secs(30);
        assert_eq!(read_timeout(t), Duration::from_secs(20));
        assert_eq!(ping_interval(t), Duration::from_secs(9));
        assert_eq!(ping_interval(Duration::from_secs(60)), MAX_PING_INTERVAL);
        assert_eq!(
            ping_interval(Duration::from_secs(3)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn the_ping_interval_never_exceeds_a_third_of_the_timeout() {
        for ms in (1..=120_000).step_by(7) {
            let t = Duration::from_millis(ms);
            assert!(ping_interval(t) <= t / 3, "T = {t:?}");
        }
    }

    #[test]
    fn deadlines_pop_in_order_and_forget_answered_requests() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        d.insert(RequestId(1), t0 + Duration::from_secs(3));
        d.insert(RequestId(2), t0 + Duration::from_secs(1));
        d.insert(RequestId(3), t0 + Duration::from_secs(1));
        d.insert(RequestId(4), t0 + Duration::from_secs(2));
        d.remove(RequestId(4));
        assert_eq!(d.next(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(d.pop_due(t0), None);
        let due: Vec<_> = std::iter::from_fn(|| d.pop_due(t0 + Duration::from_secs(2))).collect();
        assert_eq!(due, [RequestId(2), RequestId(3)]);
        assert_eq!(d.next(), Some(t0 + Duration::from_secs(3)));
        d.remove(RequestId(1));
        assert_eq!(d.next(), None);
    }

    #[test]
    fn huge_timeouts_do_not_overflow() {
        let timers = Timers::new(Instant::now());
        assert_eq!(timers.connect_deadline(Duration::MAX), None);
        assert!(read_timeout(Duration::MAX) > Duration::ZERO);
        let _ = timers.read_deadline(&Periods::of(Duration::MAX, Duration::MAX), None);
        let _ = timers.ping_at(&Periods::of(Duration::MAX, Duration::MAX));
        let _ = timers.expiry_at(Some(Duration::MAX), 1);
    }
}
