//! Why connecting keeps failing, when retrying cannot help.
//!
//! Most failed attempts are worth retrying: a server restarting, an election, a partition.
//! Some are not: a certificate refused, TLS spoken to a plaintext port or the reverse, SASL
//! refused. Each host's latest such failure is kept until a handshake succeeds; once every
//! host of the connect string has one, connecting is hopeless as configured, and the driver
//! publishes the verdict (`docs/security.md`, "Failing fast").

use std::collections::{HashMap, HashSet};
use std::io;

use crate::connect_string::HostPort;
use crate::error::ConnectError;

#[derive(Debug)]
pub(crate) struct Diagnosis {
    /// The distinct hosts of the connect string.
    hosts: usize,
    /// Each host's hopeless failure since the last handshake.
    failures: HashMap<HostPort, ConnectError>,
    /// Hosts already probed after a silent close since the last handshake: one probe each.
    probed: HashSet<HostPort>,
}

impl Diagnosis {
    pub(crate) fn new(hosts: &[HostPort]) -> Self {
        let distinct: HashSet<&HostPort> = hosts.iter().collect();
        Self {
            hosts: distinct.len(),
            failures: HashMap::new(),
            probed: HashSet::new(),
        }
    }

    /// An attempt to open a stream to `host` failed with `err`.
    pub(crate) fn on_connect_failed(&mut self, host: &HostPort, err: &io::Error) {
        match connect_error(err) {
            Some(verdict) => self.record(host, verdict),
            None => {
                self.failures.remove(host);
            }
        }
    }

    /// `host` closed the connection before answering the handshake. Returns whether to probe
    /// it (the first time since the last handshake).
    pub(crate) fn on_silent_close(&mut self, host: &HostPort) -> bool {
        self.probed.insert(host.clone())
    }

    /// A hopeless failure found otherwise (a probe, SASL).
    pub(crate) fn record(&mut self, host: &HostPort, verdict: ConnectError) {
        self.failures.insert(host.clone(), verdict);
    }

    /// A handshake completed: whatever failed before may have been transient.
    pub(crate) fn on_handshake(&mut self) {
        self.failures.clear();
        self.probed.clear();
    }

    /// The verdict, once every host has failed hopelessly.
    pub(crate) fn verdict(&self) -> Option<ConnectError> {
        if self.hosts == 0 || self.failures.len() < self.hosts {
            return None;
        }
        self.failures.values().next().cloned()
    }
}

/// The [`ConnectError`] a connector wrapped in `err`, if any.
pub(crate) fn connect_error(err: &io::Error) -> Option<ConnectError> {
    err.get_ref()?.downcast_ref::<ConnectError>().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> HostPort {
        crate::connect_string::ConnectString::parse(s)
            .unwrap()
            .hosts()[0]
            .clone()
    }

    #[test]
    fn a_verdict_needs_every_host_and_a_handshake_clears_it() {
        let (a, b) = (host("a:1"), host("b:1"));
        let mut d = Diagnosis::new(&[a.clone(), b.clone(), a.clone()]);
        let refused = io::Error::other(ConnectError::NotTls { host: "a:1".into() });
        d.on_connect_failed(&a, &refused);
        assert_eq!(d.verdict(), None, "one host of two");
        d.on_connect_failed(&b, &io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(d.verdict(), None, "b may come back");
        d.on_connect_failed(&b, &refused);
        assert!(matches!(d.verdict(), Some(ConnectError::NotTls { .. })));
        d.on_connect_failed(&b, &io::Error::from(io::ErrorKind::TimedOut));
        assert_eq!(d.verdict(), None, "b's newest failure is transient");
        d.on_connect_failed(&b, &refused);
        d.on_handshake();
        assert_eq!(d.verdict(), None);
    }

    #[test]
    fn each_host_is_probed_once_per_streak() {
        let a = host("a:1");
        let mut d = Diagnosis::new(std::slice::from_ref(&a));
        assert!(d.on_silent_close(&a));
        assert!(!d.on_silent_close(&a));
        d.on_handshake();
        assert!(d.on_silent_close(&a));
    }
}
