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
use crate::error::{ConnectError, FailureCause, HostFailure};

#[derive(Debug)]
pub(crate) struct Diagnosis {
    /// The distinct hosts of the connect string, in its order.
    hosts: Vec<HostPort>,
    /// Each host's hopeless failure since the last handshake.
    failures: HashMap<HostPort, ConnectError>,
    /// Each host's latest failure of any kind since the last handshake.
    latest: HashMap<HostPort, HostFailure>,
    /// Hosts already probed after a silent close since the last handshake: one probe each.
    probed: HashSet<HostPort>,
    /// Give up as soon as every host was refused or did not resolve.
    fail_fast: bool,
}

impl Diagnosis {
    pub(crate) fn new(hosts: &[HostPort]) -> Self {
        let mut distinct: Vec<HostPort> = Vec::new();
        for host in hosts {
            if !distinct.contains(host) {
                distinct.push(host.clone());
            }
        }
        Self {
            hosts: distinct,
            failures: HashMap::new(),
            latest: HashMap::new(),
            probed: HashSet::new(),
            fail_fast: false,
        }
    }

    /// Every host refused or unresolvable once is a verdict
    /// ([`ClientBuilder::with_fail_fast`](crate::ClientBuilder::with_fail_fast)).
    pub(crate) fn set_fail_fast(&mut self, on: bool) {
        self.fail_fast = on;
    }

    /// An attempt to open a stream to `host` failed with `err`.
    pub(crate) fn on_connect_failed(&mut self, host: &HostPort, err: &io::Error) {
        self.note(host, classify(err), err.to_string());
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

    /// `host` closed the connection before the handshake completed.
    pub(crate) fn on_closed_in_handshake(&mut self, host: &HostPort) {
        let detail = "the server closed the connection before the handshake completed";
        self.note(host, FailureCause::Closed, detail.to_owned());
    }

    /// `host` accepted the connection but did not complete the handshake in time.
    pub(crate) fn on_handshake_timeout(&mut self, host: &HostPort) {
        let detail = "no handshake reply within the connect timeout";
        self.note(host, FailureCause::TimedOut, detail.to_owned());
    }

    fn note(&mut self, host: &HostPort, cause: FailureCause, detail: String) {
        let failure = HostFailure {
            host: host.to_string(),
            cause,
            detail,
        };
        self.latest.insert(host.clone(), failure);
    }

    /// The latest failure of each host that has failed since the last handshake, in the
    /// connect string's order.
    pub(crate) fn latest(&self) -> Vec<HostFailure> {
        let failed = self.hosts.iter().filter_map(|h| self.latest.get(h));
        failed.cloned().collect()
    }

    /// A hopeless failure found otherwise (a probe, SASL).
    pub(crate) fn record(&mut self, host: &HostPort, verdict: ConnectError) {
        self.failures.insert(host.clone(), verdict);
    }

    /// A handshake completed: whatever failed before may have been transient.
    pub(crate) fn on_handshake(&mut self) {
        self.failures.clear();
        self.latest.clear();
        self.probed.clear();
    }

    /// The verdict, once every host has failed hopelessly (or, failing fast, once every
    /// host was refused or did not resolve).
    pub(crate) fn verdict(&self) -> Option<ConnectError> {
        if self.hosts.is_empty() {
            return None;
        }
        if self.failures.len() >= self.hosts.len() {
            // The first host's, in the connect string's order: the same every run (a map's
            // own order changes from one process to the next).
            return self.hosts.iter().find_map(|h| self.failures.get(h)).cloned();
        }
        let refused = |h: &HostPort| {
            self.latest.get(h).is_some_and(|f| {
                matches!(f.cause, FailureCause::Refused | FailureCause::Unresolvable)
            })
        };
        if self.fail_fast && self.hosts.iter().all(refused) {
            return Some(ConnectError::Unreachable {
                failures: self.latest(),
            });
        }
        None
    }
}

/// What kind of failure `err` is: a [`NameNotResolved`] the TCP connector wraps, or the
/// operating system's error kind.
fn classify(err: &io::Error) -> FailureCause {
    if err.get_ref().is_some_and(|e| e.is::<NameNotResolved>()) {
        return FailureCause::Unresolvable;
    }
    match err.kind() {
        io::ErrorKind::ConnectionRefused => FailureCause::Refused,
        io::ErrorKind::TimedOut => FailureCause::TimedOut,
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => FailureCause::Closed,
        _ => FailureCause::Other,
    }
}

/// A host name the resolver could not turn into addresses.
#[derive(Debug)]
pub(crate) struct NameNotResolved(pub(crate) String);

impl std::fmt::Display for NameNotResolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the name does not resolve: {}", self.0)
    }
}

impl std::error::Error for NameNotResolved {}

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

    /// Hosts that fail each their own way: the verdict is the first host's, in every run.
    #[test]
    fn the_verdict_is_the_first_hosts() {
        let (a, b) = (host("a:1"), host("b:1"));
        for _ in 0..64 {
            let mut d = Diagnosis::new(&[a.clone(), b.clone()]);
            let plaintext = ConnectError::NotPlaintext { host: "b:1".into() };
            d.on_connect_failed(&b, &io::Error::other(plaintext));
            let not_tls = ConnectError::NotTls { host: "a:1".into() };
            d.on_connect_failed(&a, &io::Error::other(not_tls));
            assert!(matches!(d.verdict(), Some(ConnectError::NotTls { .. })));
        }
    }

    #[test]
    fn failing_fast_needs_every_host_refused_or_unresolvable() {
        let (a, b) = (host("a:1"), host("b:1"));
        let mut d = Diagnosis::new(&[a.clone(), b.clone()]);
        d.set_fail_fast(true);
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let unresolved = io::Error::new(
            io::ErrorKind::NotFound,
            NameNotResolved("b: no such host".into()),
        );
        d.on_connect_failed(&a, &refused);
        assert_eq!(d.verdict(), None, "b not tried yet");
        d.on_connect_failed(&b, &io::Error::from(io::ErrorKind::TimedOut));
        assert_eq!(d.verdict(), None, "b timed out: it may answer later");
        d.on_connect_failed(&b, &unresolved);
        let Some(ConnectError::Unreachable { failures }) = d.verdict() else {
            panic!("{:?}", d.verdict())
        };
        let causes: Vec<_> = failures
            .iter()
            .map(|f| (f.host.as_str(), f.cause))
            .collect();
        assert_eq!(
            causes,
            [
                ("a:1", FailureCause::Refused),
                ("b:1", FailureCause::Unresolvable)
            ]
        );
        d.set_fail_fast(false);
        assert_eq!(
            d.verdict(),
            None,
            "without fail-fast, refused hosts are retried"
        );
        assert_eq!(d.latest().len(), 2, "the causes are kept all the same");
        d.on_handshake();
        assert!(d.latest().is_empty());
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
