//! Host rotation and reconnect backoff, as the Java client's `StaticHostProvider`.
//!
//! The host list is shuffled once; attempts go round it in order. Before every attempt but
//! the first a random 0–1000 ms pause is taken, and after a full round without success one
//! more second, so that a client never spins on a dead ensemble and a crowd of clients
//! spreads out when a server returns.

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
        Self { hosts, preferred: None, next: 0, failures_in_round: 0, attempts: 0, rng }
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
            let round = if self.failures_in_round >= self.hosts.len() {
                self.failures_in_round = 0;
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            };
            round + Duration::from_millis(self.rng.below(1000))
        };
        self.attempts += 1;
        let host = self.hosts[self.next % self.hosts.len()].clone();
        self.next = (self.next + 1) % self.hosts.len();
        (host, pause)
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

/// A small PRNG for shuffling and jitter; nothing here needs cryptographic quality.
#[derive(Debug)]
struct XorShift(u64);

impl XorShift {
    fn seeded() -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
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
                cs.map(|c| c.hosts()[0].clone()).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect()
    }

    #[test]
    fn rotates_through_every_host_with_backoff_after_a_failed_round() {
        let mut h = Hosts::new(hosts(3));
        let (first, pause) = h.next();
        assert_eq!(pause, Duration::ZERO);
        h.on_failed();
        let (second, p2) = h.next();
        assert!(p2 < Duration::from_secs(1));
        h.on_failed();
        let (third, _) = h.next();
        h.on_failed();
        let mut seen = vec![first.clone(), second, third];
        seen.sort_by_key(|h| h.port());
        assert_eq!(seen, hosts(3));
        let (again, p4) = h.next();
        assert_eq!(again, first);
        assert!(p4 >= Duration::from_secs(1), "a full failed round adds a second");
    }
}
