//! [`LinkRelay`]: a TCP relay whose two directions can each be held, delayed, slowed or
//! reset at runtime, and what it counts.

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

use super::conn::run_connection;
use super::lock;
use crate::listening::Listening;

/// A fault on one direction of a [`LinkRelay`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    /// Bytes stop being delivered in that direction: they are held (up to [`MAX_HELD`] per
    /// connection, beyond which the connection is reset) and delivered, in order, once the
    /// fault is lifted, as TCP retransmission would. A connection accepted while the
    /// *forward* direction is blackholed is not passed on to the upstream until it is lifted
    /// (the acceptor sees nothing, as if the SYN were lost); if the connector closes it
    /// before then, it vanishes without ever reaching the upstream.
    ///
    /// [`MAX_HELD`]: super::MAX_HELD
    Blackhole,
    /// Every chunk read in that direction is delivered this much later (order is kept).
    Delay(Duration),
    /// Every current connection of the relay is reset (RST to both peers, `SO_LINGER` 0),
    /// and so is every new one, at once, while the fault is on. A reset ends both directions
    /// of a connection, so this fault acts on the whole relay whichever direction it is set
    /// on.
    Reset,
}

/// Which way bytes flow through a [`LinkRelay`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// From the connecting side to the accepting side (the upstream).
    Forward,
    /// From the accepting side (the upstream) back to the connecting side.
    Backward,
}

impl Flow {
    const fn index(self) -> usize {
        match self {
            Self::Forward => 0,
            Self::Backward => 1,
        }
    }
}

pub(super) const FWD: usize = 0;
pub(super) const BWD: usize = 1;

/// What a [`LinkRelay`] has done so far (a snapshot).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounts {
    /// Connections accepted.
    pub accepted: usize,
    /// Connections open right now.
    pub active: usize,
    /// Connections reset by [`LinkFault::Reset`] (current ones, and new ones refused that way).
    pub resets: usize,
    /// Connections reset because a blackholed direction held more than [`MAX_HELD`] bytes.
    ///
    /// [`MAX_HELD`]: super::MAX_HELD
    pub overflow_cuts: usize,
    /// Connections closed by the connector while still held back by a forward blackhole:
    /// they never reached the upstream.
    pub abandoned: usize,
    /// Connections whose upstream could not be reached (reset towards the connector).
    pub upstream_failures: usize,
    /// Bytes delivered from the connector to the upstream.
    pub forward_bytes: u64,
    /// Bytes delivered from the upstream to the connector.
    pub backward_bytes: u64,
    /// Election first messages whose address was rewritten.
    pub rewrites: usize,
}

/// The faults, indexed by [`Flow::index`]; a copy is taken at every turn of a connection.
pub(super) type Faults = [Option<LinkFault>; 2];

pub(super) fn held(faults: &Faults, flow: usize) -> bool {
    faults[flow] == Some(LinkFault::Blackhole)
}

pub(super) fn resetting(faults: &Faults) -> bool {
    faults.contains(&Some(LinkFault::Reset))
}

pub(super) fn delay(faults: &Faults, flow: usize) -> Duration {
    match faults[flow] {
        Some(LinkFault::Delay(d)) => d,
        _ => Duration::ZERO,
    }
}

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) counts: LinkCounts,
    /// Local ports of the relay's open upstream sockets, to recognise them from the
    /// upstream's side.
    pub(super) upstream_ports: HashSet<u16>,
}

/// State shared by the handle, the accept loop and every connection.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) upstream: Mutex<SocketAddr>,
    pub(super) faults: Mutex<Faults>,
    /// The election address to announce instead of the connector's, if any.
    pub(super) rewrite: Mutex<Option<SocketAddr>>,
    pub(super) stats: Mutex<Stats>,
    /// Bumped after every change to `faults`, to wake the connections.
    pub(super) control: watch::Sender<u64>,
}

impl Shared {
    pub(super) fn faults(&self) -> Faults {
        *lock(&self.faults)
    }

    pub(super) fn stats(&self) -> MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut lock(&self.faults));
        self.control.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// A raw TCP relay between two ZooKeeper servers, with faults switched at runtime.
///
/// It listens on `127.0.0.1:0` and forwards every accepted connection to an upstream address,
/// passing the byte stream through unchanged in both directions (server-to-server streams are
/// not client frames and are never parsed, except for the first election message when
/// [`rewrite_election_address`](Self::rewrite_election_address) is set). Each direction has
/// its own [`LinkFault`], switched through `&self` at any time; it applies to every current
/// and future connection. Bytes are never thrown away mid-stream.
///
/// The relay runs on a tokio runtime (the one given to [`start_on`](Self::start_on), or the
/// current one for [`start`](Self::start)). Dropping it stops the accept loop and every
/// connection, closing their sockets.
pub struct LinkRelay {
    /// Dropping it aborts the accept loop and, with it, every connection.
    listening: Listening,
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for LinkRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkRelay")
            .field("addr", &self.addr())
            .field("upstream", &self.upstream())
            .field("faults", &self.shared.faults())
            .finish_non_exhaustive()
    }
}

impl LinkRelay {
    /// Listens on `127.0.0.1:0` and relays each accepted connection to `upstream`, on the
    /// current tokio runtime.
    ///
    /// # Errors
    /// When the listening socket cannot be set up.
    ///
    /// # Panics
    /// When called outside a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        Self::start_on(&Handle::current(), upstream)
    }

    /// Like [`start`](Self::start), on the runtime of `handle`; callable from any thread,
    /// inside a runtime or not.
    ///
    /// # Errors
    /// When the listening socket cannot be set up.
    pub fn start_on(handle: &Handle, upstream: SocketAddr) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            faults: Mutex::new([None; 2]),
            rewrite: Mutex::new(None),
            stats: Mutex::new(Stats::default()),
            control: watch::Sender::new(0),
        });
        let admitted = Arc::clone(&shared);
        let listening = Listening::start(handle, move |stream, tasks| {
            let guard = ActiveGuard::new(Arc::clone(&admitted));
            tasks.spawn(run_connection(stream, guard));
        })?;
        Ok(Self { listening, shared })
    }

    /// The address connectors use.
    pub fn addr(&self) -> SocketAddr {
        self.listening.addr()
    }

    /// Where new connections are forwarded.
    pub fn upstream(&self) -> SocketAddr {
        *lock(&self.shared.upstream)
    }

    /// Forwards connections accepted from now on to `upstream`; current ones keep theirs.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *lock(&self.shared.upstream) = upstream;
    }

    /// Sets (`Some`) or lifts (`None`) the fault of one direction. Lifting a
    /// [`LinkFault::Blackhole`] delivers what was held; chunks already delayed keep their due
    /// times.
    pub fn set_fault(&self, flow: Flow, fault: Option<LinkFault>) {
        self.shared.update(|f| f[flow.index()] = fault);
    }

    /// Sets `fault` on both directions.
    pub fn set_both(&self, fault: LinkFault) {
        self.shared.update(|f| *f = [Some(fault); 2]);
    }

    /// The fault of one direction, if any.
    pub fn fault(&self, flow: Flow) -> Option<LinkFault> {
        self.shared.faults()[flow.index()]
    }

    /// Back to plain pass-through in both directions; held bytes are delivered.
    pub fn heal(&self) {
        self.shared.update(|f| *f = [None; 2]);
    }

    /// Makes this an election relay: in connections accepted from now on, the address in the
    /// first election message on the forward direction (see the [module docs](super)) is
    /// replaced by `advertised` (`"<ip>:<port>"`), so that a server dialling the connector
    /// back reaches `advertised`. `None` turns it off.
    pub fn rewrite_election_address(&self, advertised: Option<SocketAddr>) {
        *lock(&self.shared.rewrite) = advertised;
    }

    /// A snapshot of the counters.
    pub fn counts(&self) -> LinkCounts {
        self.shared.stats().counts
    }

    pub(super) fn upstream_ports(&self) -> Vec<u16> {
        self.shared.stats().upstream_ports.iter().copied().collect()
    }
}

/// Counts a connection as active for as long as its task exists.
pub(super) struct ActiveGuard(pub(super) Arc<Shared>);

impl ActiveGuard {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        let mut stats = shared.stats();
        stats.counts.accepted += 1;
        stats.counts.active += 1;
        drop(stats);
        Self(shared)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.stats().counts.active -= 1;
    }
}

/// Removes an upstream socket's local port from the shared set when the connection ends.
pub(super) struct PortGuard(pub(super) Arc<Shared>, pub(super) Option<u16>);

impl Drop for PortGuard {
    fn drop(&mut self) {
        if let Some(port) = self.1 {
            self.0.stats().upstream_ports.remove(&port);
        }
    }
}
