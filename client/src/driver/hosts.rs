//! Host rotation and reconnect backoff.
//!
//! The host list is shuffled once (as the Java client's `StaticHostProvider`); attempts go
//! round it in order, and host names are resolved again at every attempt by the connector.
//!
//! Backoff: the first attempt is immediate. After that, the pause before an attempt grows
//! with the failures since the last successful handshake — 50 ms doubling to at most
//! 500 ms — and is drawn at random from the upper half of that range. A client therefore
//! never spins on a dead ensemble (at most about 2–4 attempts a second), a crowd of clients
//! spreads out when a server returns, and a client is back within about half a second of
//! its server (the Java client sleeps up to 1 s before every reconnect, plus 1 s per
//! failed round).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::connect_string::HostPort;

#[derive(Debug)]
pub(crate) struct Hosts {
    hosts: Vec<HostPort>,
    preferred: Option<HostPort>,
    next: usize,
    failures_in_round: usize,
    attempts: u64,
    rng: XorShift,
}

impl Hosts {
    pub(crate) fn new(mut hosts: Vec<HostPort>) -> Self {
        let mut rng = XorShift::seeded();
        for i in (1..hosts.len()).rev() {
            hosts.swap(i, rng.below(i as u64 + 1) as usize);
        }
        Self {
            hosts,
            preferred: None,
            next: 0,
            failures_in_round: 0,
            attempts: 0,
            rng,
        }
    }

    /// The host to try next and how long to wait before trying it.
    pub(crate) fn next(&mut self) -> (HostPort, Duration) {
        if let Some(host) = self.preferred.take() {
            self.attempts += 1;
            return (host, Duration::ZERO);
        }
        let pause = if self.attempts == 0 {
            Duration::ZERO
        } else {
            self.backoff()
        };
        self.attempts += 1;
        let host = self.hosts[self.next % self.hosts.len()].clone();
        self.next = (self.next + 1) % self.hosts.len();
        (host, pause)
    }

    fn backoff(&mut self) -> Duration {
        let exp = u32::try_from(self.failures_in_round.min(4)).unwrap_or(4);
        let ceiling = (BACKOFF_BASE_MS << exp).min(BACKOFF_MAX_MS);
        Duration::from_millis(ceiling / 2 + self.rng.below(ceiling / 2 + 1))
    }

    /// The last attempt reached a server and completed the handshake.
    pub(crate) fn on_connected(&mut self) {
        self.failures_in_round = 0;
    }

    /// The last attempt failed before the handshake completed.
    pub(crate) fn on_failed(&mut self) {
        self.failures_in_round += 1;
    }

    /// Makes `host` the next attempt, without a pause (a read/write server was found).
    pub(crate) fn prefer(&mut self, host: HostPort) {
        self.preferred = Some(host);
    }

    /// Every host, in rotation order.
    pub(crate) fn all(&self) -> &[HostPort] {
        &self.hosts
    }
}

const BACKOFF_BASE_MS: u64 = 50;
const BACKOFF_MAX_MS: u64 = 500;

/// A small PRNG for shuffling and jitter; nothing here needs cryptographic quality.
#[derive(Debug)]
struct XorShift(u64);

impl XorShift {
    fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
        Self(seed.max(1))
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: u16) -> Vec<HostPort> {
        (0..n)
            .map(|i| {
                let cs = crate::connect_string::ConnectString::parse(&format!("h{i}:{}", 2000 + i));
                cs.map(|c| c.hosts()[0].clone())
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect()
    }

    #[test]
    fn rotates_through_every_host_with_growing_bounded_backoff() {
        let mut h = Hosts::new(hosts(3));
        let (first, pause) = h.next();
        assert_eq!(pause, Duration::ZERO);
        h.on_failed();
        let (second, p2) = h.next();
        assert!(
            p2 >= Duration::from_millis(50) && p2 <= Duration::from_millis(100),
            "{p2:?}"
        );
        h.on_failed();
        let (third, _) = h.next();
        h.on_failed();
        let mut seen = vec![first.clone(), second, third];
        seen.sort_by_key(|h| h.port());
        assert_eq!(seen, hosts(3));
        for _ in 0..20 {
            let (_, p) = h.next();
            h.on_failed();
            assert!(
                p >= Duration::from_millis(25) && p <= Duration::from_millis(500),
                "{p:?}"
            );
        }
        let (_, capped) = h.next();
        assert!(
            capped >= Duration::from_millis(250),
            "never a tight loop: {capped:?}"
        );
        h.on_connected();
        let (_, after_success) = h.next();
        assert!(
            after_success <= Duration::from_millis(50),
            "{after_success:?}"
        );
    }

    #[test]
    fn a_preferred_host_goes_next_without_pause() {
        let mut h = Hosts::new(hosts(3));
        h.next();
        h.on_failed();
        let want = hosts(3).remove(2);
        h.prefer(want.clone());
        assert_eq!(h.next(), (want, Duration::ZERO));
    }
}
