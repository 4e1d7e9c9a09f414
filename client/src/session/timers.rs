//! The session's timers, with the Java client's ratios (protocol.md §7.2).
//!
//! With T the negotiated session timeout (the requested one before the first handshake):
//! - **read timeout** = 2/3 T: nothing received for that long drops the connection;
//! - **ping interval** = half the read timeout, less 1 s when that leaves over 1 s, at most
//!   10 s, measured from the last send (any request postpones the ping); one ping at a time,
//!   since ping replies all carry xid -2;
//! - **connect timeout** = T / number of hosts (or as configured): the whole attempt, from
//!   TCP connect to ConnectResponse;
//! - **local expiry** = 4/3 T without receiving anything, while disconnected: the server has
//!   expired the session by then, so we report `Expired` instead of retrying forever
//!   (ZOOKEEPER-4508; the Java client 3.9.3+ uses the same ratio).

use std::time::{Duration, Instant};

use super::types::SessionConfig;

const MAX_PING_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(crate) struct Timers {
    last_send: Instant,
    last_recv: Instant,
    connect_started: Instant,
    ping_outstanding: bool,
}

impl Timers {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            last_send: now,
            last_recv: now,
            connect_started: now,
            ping_outstanding: false,
        }
    }

    pub(crate) fn on_connect(&mut self, now: Instant) {
        self.connect_started = now;
        self.last_send = now;
        self.ping_outstanding = false;
    }

    pub(crate) fn on_receive(&mut self, now: Instant) {
        self.last_recv = now;
    }

    pub(crate) fn on_send(&mut self, now: Instant) {
        self.last_send = now;
    }

    pub(crate) fn on_disconnect(&mut self, _now: Instant) {
        self.ping_outstanding = false;
    }

    pub(crate) fn on_ping_sent(&mut self, now: Instant) {
        self.ping_outstanding = true;
        self.last_send = now;
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
        let hosts = u32::try_from(config.host_count.max(1)).unwrap_or(u32::MAX);
        config.connect_timeout.unwrap_or(timeout / hosts)
    }

    pub(crate) fn connect_deadline(&self, connect_timeout: Duration) -> Instant {
        self.connect_started + connect_timeout
    }

    pub(crate) fn read_deadline(&self, timeout: Duration) -> Instant {
        self.last_recv + read_timeout(timeout)
    }

    pub(crate) fn ping_due(&self, timeout: Duration, now: Instant) -> bool {
        !self.ping_outstanding && self.last_send + ping_interval(timeout) <= now
    }

    /// The next timer while connected: the read timeout, or the next ping.
    pub(crate) fn open_deadline(&self, timeout: Duration) -> Instant {
        let read = self.read_deadline(timeout);
        if self.ping_outstanding {
            read
        } else {
            read.min(self.last_send + ping_interval(timeout))
        }
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
        negotiated.map(|t| self.last_recv + t * 4 / 3)
    }
}

pub(crate) fn read_timeout(timeout: Duration) -> Duration {
    timeout * 2 / 3
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
}
