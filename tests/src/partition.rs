//! Network partitions *inside* a real ZooKeeper ensemble, between the servers themselves.
//!
//! [`PartitionedEnsemble`] starts an N-node ZooKeeper quorum in which no server ever talks to
//! another directly: for every ordered pair of nodes (i, j) there is a quorum relay and an
//! election relay, each a [`LinkRelay`] that forwards to j's real quorum or election port, and
//! server i's `zoo.cfg` names each peer j by the ports of the relays (i→j) (itself by its real
//! ports). Faults are then switched on the relays at runtime — per link and per direction —
//! to cut, one-way cut, isolate, partition or heal nodes, and the effect is observed from the
//! servers' own point of view (`srvr`, `mntr`). Client ports are direct: a test that wants
//! client-side faults puts its own proxy in front of them.
//!
//! # Leader election and the dial-back
//!
//! Leader election connections (ZooKeeper's `QuorumCnxManager`) have a twist. Between any two
//! servers only the connection initiated by the server with the *higher* id is kept: a server
//! that accepts a connection from a lower id closes it and dials the lower server back, at
//! the election address the lower server announced in the connection's first message, not at
//! the address in its own configuration. Left alone, that dial-back would go straight to the
//! real port and bypass the relays. So the election relay (i→j) parses the first message on
//! its forward direction and replaces the announced address with the address of the election
//! relay (j→i) (see [`LinkRelay::rewrite_election_address`]); everything after that message
//! passes through untouched.
//!
//! The first message, as written by `startConnection` and read by `InitialMessage.parse` in
//! `zookeeper-server/src/main/java/org/apache/zookeeper/server/quorum/QuorumCnxManager.java`
//! (3.8), is, big-endian:
//!
//! ```text
//! int64  protocol version   -65536 (V1: one address) or -65535 (V2: several, '|'-separated)
//! int64  sender's server id
//! int32  length of the address string, 1..=2048
//! bytes  the address string, "host:port" (V2: "host1:port1|host2:port2|...")
//! ```
//!
//! A non-negative first long is the pre-3.5 format (the server id alone, no address); such a
//! connection, or one whose message does not parse, is passed through unchanged.
//!
//! # Timing
//!
//! A follower whose link to the leader goes silent notices after `syncLimit * tickTime` (its
//! reads time out, and so do the leader's reads from it); a leader that stops hearing from a
//! quorum steps down after the same time. [`PartitionedEnsemble::sync_timeout`] returns that
//! product. The servers get the JVM property `zookeeper.fastleader.maxNotificationInterval`
//! (default 1000 ms here, 60 s in ZooKeeper) so that a node left alone in leader election
//! retries its peers often enough to rejoin within a second or two of a heal; set it in
//! [`ServerConfig::jvm_props`] to override.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::server::{
    four_letter_word, server_mode, Mode, NodePorts, ServerConfig, ServerError, ZkEnsemble,
    ENSEMBLE_START_TIMEOUT,
};

/// The most bytes a [`LinkRelay`] holds for one direction of one connection. A blackholed
/// direction that goes over it gets its connection reset ([`LinkCounts::overflow_cuts`]), as
/// TCP eventually gives up on a peer that never acknowledges; a direction that is merely
/// delayed or slow stops being read instead (back-pressure).
pub const MAX_HELD: usize = 64 << 20;

/// How long a relay waits for the upstream's TCP handshake.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Bytes read from a socket in one call.
const READ_CHUNK: usize = 64 * 1024;

/// The first long of an election connection using protocol version 1 (one address).
const ELECTION_PROTOCOL_V1: i64 = -65536;
/// The first long of an election connection using protocol version 2 (several addresses).
const ELECTION_PROTOCOL_V2: i64 = -65535;
/// The longest address string a ZooKeeper server accepts in the first election message.
const ELECTION_MAX_ADDRESS: usize = 2048;
/// Bytes before the address string: version, server id, length.
const ELECTION_HEADER: usize = 8 + 8 + 4;

/// Default of `zookeeper.fastleader.maxNotificationInterval` for the servers (milliseconds).
const MAX_NOTIFICATION_INTERVAL_MS: &str = "1000";
/// ZooKeeper's default `initLimit` in this harness (see [`ZkEnsemble`]).
const DEFAULT_INIT_LIMIT: u32 = 20;
/// ZooKeeper's default `syncLimit` in this harness (see [`ZkEnsemble`]).
const DEFAULT_SYNC_LIMIT: u32 = 10;
/// Interval between two looks at the servers while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Locks a mutex, ignoring poisoning: every update leaves the data consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ===========================================================================
// LinkRelay
// ===========================================================================

/// A fault on one direction of a [`LinkRelay`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    /// Bytes stop being delivered in that direction: they are held (up to [`MAX_HELD`] per
    /// connection, beyond which the connection is reset) and delivered, in order, once the
    /// fault is lifted, as TCP retransmission would. A connection accepted while the
    /// *forward* direction is blackholed is not passed on to the upstream until it is lifted
    /// (the acceptor sees nothing, as if the SYN were lost); if the connector closes it
    /// before then, it vanishes without ever reaching the upstream.
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

const FWD: usize = 0;
const BWD: usize = 1;

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
type Faults = [Option<LinkFault>; 2];

fn held(faults: &Faults, flow: usize) -> bool {
    faults[flow] == Some(LinkFault::Blackhole)
}

fn resetting(faults: &Faults) -> bool {
    faults.contains(&Some(LinkFault::Reset))
}

fn delay(faults: &Faults, flow: usize) -> Duration {
    match faults[flow] {
        Some(LinkFault::Delay(d)) => d,
        _ => Duration::ZERO,
    }
}

#[derive(Debug, Default)]
struct Stats {
    counts: LinkCounts,
    /// Local ports of the relay's open upstream sockets, to recognise them from the
    /// upstream's side.
    upstream_ports: HashSet<u16>,
}

/// State shared by the handle, the accept loop and every connection.
#[derive(Debug)]
struct Shared {
    upstream: Mutex<SocketAddr>,
    faults: Mutex<Faults>,
    /// The election address to announce instead of the connector's, if any.
    rewrite: Mutex<Option<SocketAddr>>,
    stats: Mutex<Stats>,
    /// Bumped after every change to `faults`, to wake the connections.
    control: watch::Sender<u64>,
}

impl Shared {
    fn faults(&self) -> Faults {
        *lock(&self.faults)
    }

    fn stats(&self) -> MutexGuard<'_, Stats> {
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
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl fmt::Debug for LinkRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkRelay")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream())
            .field("faults", &self.shared.faults())
            .finish_non_exhaustive()
    }
}

impl Drop for LinkRelay {
    /// Aborts the accept loop; it owns the connection tasks, which go with it.
    fn drop(&mut self) {
        self.accept.abort();
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
        let std_listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let listener = {
            let _entered = handle.enter();
            TcpListener::from_std(std_listener)?
        };
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            faults: Mutex::new([None; 2]),
            rewrite: Mutex::new(None),
            stats: Mutex::new(Stats::default()),
            control: watch::Sender::new(0),
        });
        let accept = handle.spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self {
            addr,
            shared,
            accept,
        })
    }

    /// The address connectors use.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
    /// first election message on the forward direction (see the [module docs](self)) is
    /// replaced by `advertised` (`"<ip>:<port>"`), so that a server dialling the connector
    /// back reaches `advertised`. `None` turns it off.
    pub fn rewrite_election_address(&self, advertised: Option<SocketAddr>) {
        *lock(&self.shared.rewrite) = advertised;
    }

    /// A snapshot of the counters.
    pub fn counts(&self) -> LinkCounts {
        self.shared.stats().counts
    }

    fn upstream_ports(&self) -> Vec<u16> {
        self.shared.stats().upstream_ports.iter().copied().collect()
    }
}

/// Accepts connections until aborted; the `JoinSet` ties the connections' lifetime to it.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let guard = ActiveGuard::new(Arc::clone(&shared));
                    tasks.spawn(run_connection(stream, guard));
                }
                // Out of descriptors and the like: retry later instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

/// Counts a connection as active for as long as its task exists.
struct ActiveGuard(Arc<Shared>);

impl ActiveGuard {
    fn new(shared: Arc<Shared>) -> Self {
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
struct PortGuard(Arc<Shared>, Option<u16>);

impl Drop for PortGuard {
    fn drop(&mut self) {
        if let Some(port) = self.1 {
            self.0.stats().upstream_ports.remove(&port);
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A peer closed cleanly and what it had sent was delivered: close the other (FIN).
    Closed,
    /// A peer failed (e.g. was reset): reset the other too.
    Failed,
    /// [`LinkFault::Reset`].
    Reset,
    /// A held direction went over [`MAX_HELD`].
    Overflow,
}

/// What became of a connection before its upstream was contacted.
enum Before {
    Connect,
    End(End),
    Abandoned,
}

async fn run_connection(mut client: TcpStream, guard: ActiveGuard) {
    let shared = Arc::clone(&guard.0);
    let _ = client.set_nodelay(true);
    let rewrite = *lock(&shared.rewrite);
    let mut conn = Conn::new(Arc::clone(&shared), rewrite);
    let mut control = shared.control.subscribe();
    let end = match conn.before_upstream(&mut client, &mut control).await {
        Before::Abandoned => {
            shared.stats().counts.abandoned += 1;
            return;
        }
        Before::End(end) => end,
        Before::Connect => {
            let upstream = *lock(&shared.upstream);
            let connected =
                tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream)).await;
            let Ok(Ok(mut server)) = connected else {
                shared.stats().counts.upstream_failures += 1;
                let _ = client.set_zero_linger();
                return;
            };
            let _ = server.set_nodelay(true);
            let port = server.local_addr().ok().map(|a| a.port());
            if let Some(port) = port {
                shared.stats().upstream_ports.insert(port);
            }
            let port_guard = PortGuard(Arc::clone(&shared), port);
            let end = conn.pump(&mut client, &mut server, &mut control).await;
            finish(&shared, end, &mut client, Some(&mut server)).await;
            // Forget the port only once the socket is closed, so that a look at the socket
            // tables never finds the connection open but unknown.
            drop(server);
            drop(port_guard);
            return;
        }
    };
    finish(&shared, end, &mut client, None).await;
}

async fn finish(
    shared: &Shared,
    end: End,
    client: &mut TcpStream,
    mut server: Option<&mut TcpStream>,
) {
    match end {
        End::Closed => {
            let _ = client.shutdown().await;
            if let Some(s) = server.as_mut() {
                let _ = s.shutdown().await;
            }
        }
        End::Failed | End::Reset | End::Overflow => {
            let _ = client.set_zero_linger();
            if let Some(s) = server {
                let _ = s.set_zero_linger();
            }
            let mut stats = shared.stats();
            match end {
                End::Reset => stats.counts.resets += 1,
                End::Overflow => stats.counts.overflow_cuts += 1,
                _ => {}
            }
        }
    }
}

/// Bytes waiting to be written to a peer.
#[derive(Debug)]
struct Chunk {
    bytes: Bytes,
    release_at: Instant,
}

/// How a source peer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eof {
    Clean,
    Failed,
}

/// One direction of a connection.
#[derive(Debug)]
struct Lane {
    flow: usize,
    queue: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    written: usize,
    /// Bytes in `queue`.
    queued: usize,
    eof: Option<Eof>,
    /// The election-message rewriter, until the first message has gone through.
    rewriter: Option<Rewriter>,
}

impl Lane {
    fn new(flow: usize, rewriter: Option<Rewriter>) -> Self {
        Self {
            flow,
            queue: VecDeque::new(),
            written: 0,
            queued: 0,
            eof: None,
            rewriter,
        }
    }

    /// Held directions keep reading (the cap then resets the connection); others stop at
    /// the cap so that a slow reader only slows its writer.
    fn wants_read(&self, faults: &Faults) -> bool {
        self.eof.is_none() && (self.queued < MAX_HELD || held(faults, self.flow))
    }

    fn push(&mut self, bytes: Bytes, release_at: Instant) {
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len();
        self.queue.push_back(Chunk { bytes, release_at });
    }

    fn next_write(&self, now: Instant, faults: &Faults) -> Bytes {
        match self.queue.front() {
            Some(c) if !held(faults, self.flow) && c.release_at <= now => {
                c.bytes.slice(self.written..)
            }
            _ => Bytes::new(),
        }
    }

    fn wake_at(&self, now: Instant, faults: &Faults) -> Option<Instant> {
        let front = self.queue.front()?;
        (!held(faults, self.flow) && front.release_at > now).then_some(front.release_at)
    }

    fn advance(&mut self, n: usize) {
        self.written += n;
        let done = self
            .queue
            .front()
            .is_some_and(|c| self.written >= c.bytes.len());
        if done {
            self.written = 0;
            if let Some(chunk) = self.queue.pop_front() {
                self.queued -= chunk.bytes.len();
            }
        }
    }

    /// Queues what was read (through the rewriter while it is active); true when an election
    /// address was rewritten.
    fn on_data(&mut self, data: &[u8], release_at: Instant) -> bool {
        let Some(rewriter) = self.rewriter.as_mut() else {
            self.push(Bytes::copy_from_slice(data), release_at);
            return false;
        };
        match rewriter.feed(data) {
            Some((bytes, rewritten)) => {
                self.rewriter = None;
                self.push(bytes, release_at);
                rewritten
            }
            None => false,
        }
    }

    /// The source is done: whatever the rewriter still buffers goes out as it is.
    fn on_eof(&mut self, eof: Eof, release_at: Instant) {
        self.eof = Some(eof);
        if let Some(rewriter) = self.rewriter.take() {
            self.push(rewriter.buf.freeze(), release_at);
        }
    }
}

/// Rewrites the address in the first election message of a connection.
#[derive(Debug)]
struct Rewriter {
    advertised: Bytes,
    buf: BytesMut,
}

/// How far the first election message has arrived.
#[derive(Debug, PartialEq, Eq)]
enum Initial {
    /// More bytes are needed to decide.
    Incomplete,
    /// Not a message this relay rewrites (old format, or malformed): pass it on unchanged.
    Other,
    /// A whole message of `len` bytes whose address string starts at [`ELECTION_HEADER`].
    Message { len: usize },
}

/// Parses the start of an election connection (see the [module docs](self)).
fn parse_initial(buf: &[u8]) -> Initial {
    let Some(version) = buf.get(..8) else {
        return Initial::Incomplete;
    };
    let version = i64::from_be_bytes(version.try_into().unwrap_or([0; 8]));
    if version != ELECTION_PROTOCOL_V1 && version != ELECTION_PROTOCOL_V2 {
        return Initial::Other;
    }
    let Some(len) = buf.get(16..ELECTION_HEADER) else {
        return Initial::Incomplete;
    };
    let len = i32::from_be_bytes(len.try_into().unwrap_or([0; 4]));
    match usize::try_from(len) {
        Ok(len) if (1..=ELECTION_MAX_ADDRESS).contains(&len) => {
            if buf.len() >= ELECTION_HEADER + len {
                Initial::Message {
                    len: ELECTION_HEADER + len,
                }
            } else {
                Initial::Incomplete
            }
        }
        _ => Initial::Other,
    }
}

impl Rewriter {
    fn new(advertised: SocketAddr) -> Self {
        Self {
            advertised: Bytes::from(advertised.to_string()),
            buf: BytesMut::new(),
        }
    }

    /// Takes more bytes of the forward direction. Returns `None` while the first message is
    /// incomplete, then everything buffered so far (with the message rewritten if it is
    /// one) and whether it was rewritten; the caller then passes the rest through raw.
    fn feed(&mut self, data: &[u8]) -> Option<(Bytes, bool)> {
        self.buf.extend_from_slice(data);
        match parse_initial(&self.buf) {
            Initial::Incomplete => None,
            Initial::Other => Some((self.buf.split().freeze(), false)),
            Initial::Message { len } => {
                let rest = self.buf.split_off(len);
                let mut out =
                    BytesMut::with_capacity(ELECTION_HEADER + self.advertised.len() + rest.len());
                out.extend_from_slice(&self.buf[..16]);
                // The advertised address is an "ip:port" string, far below i32::MAX.
                out.put_i32(i32::try_from(self.advertised.len()).unwrap_or(i32::MAX));
                out.extend_from_slice(&self.advertised);
                out.extend_from_slice(&rest);
                self.buf.clear();
                Some((out.freeze(), true))
            }
        }
    }
}

/// A connection's forwarding state.
#[derive(Debug)]
struct Conn {
    shared: Arc<Shared>,
    lanes: [Lane; 2],
}

impl Conn {
    fn new(shared: Arc<Shared>, rewrite: Option<SocketAddr>) -> Self {
        Self {
            shared,
            lanes: [
                Lane::new(FWD, rewrite.map(Rewriter::new)),
                Lane::new(BWD, None),
            ],
        }
    }

    /// Applies the faults that end a connection; `Some` ends it.
    fn check(&self, faults: &Faults) -> Option<End> {
        if resetting(faults) {
            return Some(End::Reset);
        }
        if self.lanes.iter().any(|l| l.queued > MAX_HELD) {
            return Some(End::Overflow);
        }
        // A peer that stopped ends the connection once what it sent has been delivered.
        self.lanes
            .iter()
            .filter(|l| l.queue.is_empty())
            .find_map(|l| l.eof)
            .map(|eof| match eof {
                Eof::Clean => End::Closed,
                Eof::Failed => End::Failed,
            })
    }

    /// Reads the connector while the forward direction is blackholed, without contacting
    /// the upstream.
    async fn before_upstream(
        &mut self,
        client: &mut TcpStream,
        control: &mut watch::Receiver<u64>,
    ) -> Before {
        let mut buf = vec![0; READ_CHUNK];
        loop {
            control.borrow_and_update();
            let faults = self.shared.faults();
            if resetting(&faults) {
                return Before::End(End::Reset);
            }
            if self.lanes[FWD].eof.is_some() {
                // Closed before it was ever established: nothing reaches the upstream.
                return Before::Abandoned;
            }
            if self.lanes[FWD].queued > MAX_HELD {
                return Before::End(End::Overflow);
            }
            if !held(&faults, FWD) {
                return Before::Connect;
            }
            tokio::select! {
                r = client.read(&mut buf) => self.on_read(FWD, r, &buf),
                changed = control.changed() => {
                    if changed.is_err() {
                        return Before::Abandoned;
                    }
                }
            }
        }
    }

    /// Forwards between the two sockets until a peer stops or a fault ends the connection.
    async fn pump(
        &mut self,
        client: &mut TcpStream,
        server: &mut TcpStream,
        control: &mut watch::Receiver<u64>,
    ) -> End {
        let (mut client_rd, mut client_wr) = client.split();
        let (mut server_rd, mut server_wr) = server.split();
        let mut client_buf = vec![0; READ_CHUNK];
        let mut server_buf = vec![0; READ_CHUNK];
        loop {
            // Mark the control version seen before reading the faults, so that a change made
            // after this point wakes the select below.
            control.borrow_and_update();
            let faults = self.shared.faults();
            if let Some(end) = self.check(&faults) {
                return end;
            }
            let now = Instant::now();
            let to_server = self.lanes[FWD].next_write(now, &faults);
            let to_client = self.lanes[BWD].next_write(now, &faults);
            let wake = self
                .lanes
                .iter()
                .filter_map(|l| l.wake_at(now, &faults))
                .min();
            let read_client = self.lanes[FWD].wants_read(&faults);
            let read_server = self.lanes[BWD].wants_read(&faults);
            tokio::select! {
                r = client_rd.read(&mut client_buf), if read_client => {
                    self.on_read(FWD, r, &client_buf);
                }
                r = server_rd.read(&mut server_buf), if read_server => {
                    self.on_read(BWD, r, &server_buf);
                }
                r = server_wr.write(&to_server), if !to_server.is_empty() => {
                    if let Some(end) = self.on_written(FWD, r) {
                        return end;
                    }
                }
                r = client_wr.write(&to_client), if !to_client.is_empty() => {
                    if let Some(end) = self.on_written(BWD, r) {
                        return end;
                    }
                }
                () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
                changed = control.changed() => {
                    // The relay handle is gone; its Drop is aborting us anyway.
                    if changed.is_err() {
                        return End::Closed;
                    }
                }
            }
        }
    }

    /// Queues what was read. The faults are read afresh: a switch made just before the peer
    /// wrote must apply to those bytes.
    fn on_read(&mut self, flow: usize, read: io::Result<usize>, buf: &[u8]) {
        let faults = self.shared.faults();
        let release_at = Instant::now() + delay(&faults, flow);
        let lane = &mut self.lanes[flow];
        match read {
            Ok(0) => lane.on_eof(Eof::Clean, release_at),
            Err(_) => lane.on_eof(Eof::Failed, release_at),
            Ok(n) => {
                if lane.on_data(&buf[..n], release_at) {
                    self.shared.stats().counts.rewrites += 1;
                }
            }
        }
    }

    fn on_written(&mut self, flow: usize, written: io::Result<usize>) -> Option<End> {
        match written {
            Ok(0) | Err(_) => Some(End::Failed),
            Ok(n) => {
                self.lanes[flow].advance(n);
                let mut stats = self.shared.stats();
                let counter = if flow == FWD {
                    &mut stats.counts.forward_bytes
                } else {
                    &mut stats.counts.backward_bytes
                };
                *counter += n as u64;
                None
            }
        }
    }
}

// ===========================================================================
// PartitionedEnsemble
// ===========================================================================

/// Which of the two links from one server to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// The quorum (ZAB) link: a follower's connection to the leader's quorum port.
    Quorum,
    /// The leader-election link.
    Election,
}

/// The two relays that carry what server `from` sends to server `to` on its own initiative.
#[derive(Debug)]
struct Link {
    from: usize,
    to: usize,
    quorum: LinkRelay,
    election: LinkRelay,
}

impl Link {
    fn relays(&self) -> [&LinkRelay; 2] {
        [&self.quorum, &self.election]
    }
}

/// The servers' own view of the ensemble at one moment (see [`PartitionedEnsemble::view`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The mode each node reports with `srvr`, by index; `None` when it is not serving (in
    /// leader election: "This ZooKeeper instance is not currently serving requests") or
    /// cannot be reached.
    pub modes: Vec<Option<Mode>>,
    /// For each node reporting `Mode: leader`, `zk_synced_followers` from its `mntr`
    /// (followers connected and synced); `None` for the others.
    pub synced_followers: Vec<Option<usize>>,
}

impl View {
    /// Nodes reporting `Mode: leader`.
    pub fn leaders(&self) -> Vec<usize> {
        (0..self.modes.len())
            .filter(|&i| self.modes[i] == Some(Mode::Leader))
            .collect()
    }

    /// The leader, when exactly one node reports `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        match self.leaders().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Whether node `i` reports `Mode: follower`.
    pub fn is_following(&self, i: usize) -> bool {
        self.modes.get(i) == Some(&Some(Mode::Follower))
    }

    /// Whether node `i` reports `Mode: leader`.
    pub fn is_leading(&self, i: usize) -> bool {
        self.modes.get(i) == Some(&Some(Mode::Leader))
    }

    /// `zk_synced_followers` of node `i` if it leads.
    pub fn synced_followers_of(&self, i: usize) -> Option<usize> {
        self.synced_followers.get(i).copied().flatten()
    }

    /// Whether the ensemble is whole: one leader, every other node a follower, and the
    /// leader counts all of them as synced.
    pub fn is_whole(&self) -> bool {
        let n = self.modes.len();
        self.leader().is_some_and(|l| {
            (0..n).all(|i| i == l || self.is_following(i))
                && self.synced_followers_of(l) == Some(n - 1)
        })
    }
}

impl fmt::Display for View {
    /// `0:leader(2 synced) 1:follower 2:-`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, mode) in self.modes.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            match mode {
                Some(m) => write!(f, "{i}:{m}")?,
                None => write!(f, "{i}:-")?,
            }
            if let Some(s) = self.synced_followers_of(i) {
                write!(f, "({s} synced)")?;
            }
        }
        Ok(())
    }
}

/// A wait of [`PartitionedEnsemble`] that timed out.
#[derive(Debug, Clone)]
pub struct WaitError {
    /// What was waited for.
    pub what: String,
    /// How long it was waited for.
    pub waited: Duration,
    /// The last view seen.
    pub last: View,
    /// Every node's status and every relay's faults and counters at the time.
    pub status: String,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out after {:?} waiting until {}; last view: {}\n{}",
            self.waited, self.what, self.last, self.status
        )
    }
}

impl std::error::Error for WaitError {}

/// Where the servers' sockets between each other come from (see
/// [`PartitionedEnsemble::peer_sockets`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerSockets {
    /// Established connections to a server's real quorum or election port that come from
    /// a relay.
    pub via_relay: usize,
    /// Established connections to a server's real quorum or election port that do not come
    /// from a relay, as `"<server port> <- <peer port>"`; empty when no link bypasses the
    /// relays.
    pub bypassing: Vec<String>,
}

/// Shuts the relays' runtime down without blocking, last of all (also inside async code).
#[derive(Debug)]
struct RuntimeGuard(Option<Runtime>);

impl Drop for RuntimeGuard {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A real ZooKeeper ensemble whose servers reach each other only through [`LinkRelay`]s (see
/// the [module docs](self)), so that the network between them can be partitioned at runtime.
///
/// Nodes are addressed by index `0..node_count()`; node `i` has `myid` `i + 1`. Methods
/// taking node indexes panic when one is out of range. The waits and four-letter-word probes
/// block the calling thread (from async code, use `spawn_blocking` or `block_in_place`); the
/// relays run on a runtime of their own. Dropping it kills every server and stops every
/// relay.
#[derive(Debug)]
pub struct PartitionedEnsemble {
    // Fields drop in order: servers first, then relays, then their runtime.
    ensemble: ZkEnsemble,
    links: Vec<Link>,
    ports: Vec<NodePorts>,
    sync_limit: u32,
    init_limit: u32,
    _runtime: RuntimeGuard,
}

impl PartitionedEnsemble {
    /// Starts an `n`-node ensemble (`n >= 2`; 3 or 5 are typical) with `config` behind
    /// relays, and returns once the servers themselves say it is whole: one leader, every
    /// other node a follower, and the leader counting `n - 1` synced followers.
    ///
    /// `syncLimit` and `initLimit` default to 10 and 20 ticks; set them with
    /// [`ServerConfig::extra`] (`.extra("syncLimit", "5")`). `tickTime` is
    /// [`ServerConfig::tick_time_ms`] (200 ms by default).
    ///
    /// # Errors
    /// As [`ZkEnsemble::start_with`], and [`ServerError::Startup`] when the ensemble does not
    /// become whole within the startup timeout (default 30 s); [`ServerError::Io`] for
    /// `n < 2` or when the relays cannot be set up.
    pub fn start(n: usize, config: ServerConfig) -> Result<Self, ServerError> {
        if n < 2 {
            return Err(ServerError::Io {
                context: "starting a partitioned ensemble".to_owned(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "it needs at least 2 nodes"),
            });
        }
        let relay_err = |e: io::Error| ServerError::Io {
            context: "setting up the relays between the servers".to_owned(),
            source: e,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("zkwire-partition")
            .enable_all()
            .build()
            .map_err(relay_err)?;
        let runtime = RuntimeGuard(Some(runtime));
        let Some(handle) = runtime.0.as_ref().map(|r| r.handle().clone()) else {
            return Err(relay_err(io::Error::other("no runtime")));
        };

        let mut config = config;
        if !config
            .jvm_props
            .iter()
            .any(|(k, _)| k == "zookeeper.fastleader.maxNotificationInterval")
        {
            config.jvm_props.insert(
                0,
                (
                    "zookeeper.fastleader.maxNotificationInterval".to_owned(),
                    MAX_NOTIFICATION_INTERVAL_MS.to_owned(),
                ),
            );
        }
        let sync_limit = limit(&config, "syncLimit").unwrap_or(DEFAULT_SYNC_LIMIT);
        let init_limit = limit(&config, "initLimit").unwrap_or(DEFAULT_INIT_LIMIT);

        // Bind every relay before the servers' ports are picked, so they cannot collide; the
        // upstreams are filled in once the ports are known.
        let unset = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let mut links = Vec::with_capacity(n * (n - 1));
        for from in 0..n {
            for to in (0..n).filter(|&to| to != from) {
                links.push(Link {
                    from,
                    to,
                    quorum: LinkRelay::start_on(&handle, unset).map_err(relay_err)?,
                    election: LinkRelay::start_on(&handle, unset).map_err(relay_err)?,
                });
            }
        }
        for link in &links {
            if let Some(back) = links
                .iter()
                .find(|l| l.from == link.to && l.to == link.from)
            {
                link.election
                    .rewrite_election_address(Some(back.election.addr()));
            }
        }

        let mut ports = Vec::new();
        let ensemble = ZkEnsemble::start_with_layout(n, config.clone(), &mut |picked| {
            let real = |p: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, p));
            for link in &links {
                link.quorum.set_upstream(real(picked[link.to].quorum));
                link.election.set_upstream(real(picked[link.to].election));
            }
            ports = picked.to_vec();
            Ok((0..n)
                .map(|i| {
                    let mut lines =
                        format!("initLimit={DEFAULT_INIT_LIMIT}\nsyncLimit={DEFAULT_SYNC_LIMIT}\n");
                    for (j, p) in picked.iter().enumerate() {
                        let (quorum, election) =
                            match links.iter().find(|l| l.from == i && l.to == j) {
                                Some(l) => (l.quorum.addr().port(), l.election.addr().port()),
                                None => (p.quorum, p.election),
                            };
                        lines
                            .push_str(&format!("server.{}=127.0.0.1:{quorum}:{election}\n", j + 1));
                    }
                    lines
                })
                .collect())
        })?;
        let this = Self {
            ensemble,
            links,
            ports,
            sync_limit,
            init_limit,
            _runtime: runtime,
        };
        let timeout = config.startup_timeout.unwrap_or(ENSEMBLE_START_TIMEOUT);
        if let Err(e) = this.wait_healed(timeout) {
            let culprit = e.last.leader().unwrap_or(0);
            return Err(ServerError::Startup {
                what: format!("{n}-node partitioned ensemble {}", this.connect_string()),
                reason: e.to_string(),
                log_path: this.ensemble.node_log_path(culprit).to_path_buf(),
                log_tail: this.ensemble.node_log_tail(culprit, 60),
            });
        }
        Ok(this)
    }

    fn check_node(&self, i: usize) {
        let n = self.node_count();
        assert!(i < n, "node index {i} out of range 0..{n}");
    }

    fn link(&self, from: usize, to: usize) -> &Link {
        self.check_node(from);
        self.check_node(to);
        match self.links.iter().find(|l| l.from == from && l.to == to) {
            Some(link) => link,
            None => panic!("no link from node {from} to node {to}"),
        }
    }

    // ===== the servers =====

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.ensemble.node_count()
    }

    /// The underlying ensemble: logs, directories, process ids, status.
    pub fn ensemble(&self) -> &ZkEnsemble {
        &self.ensemble
    }

    /// `syncLimit` in ticks, as configured.
    pub fn sync_limit(&self) -> u32 {
        self.sync_limit
    }

    /// `initLimit` in ticks, as configured.
    pub fn init_limit(&self) -> u32 {
        self.init_limit
    }

    /// `tickTime`.
    pub fn tick_time(&self) -> Duration {
        Duration::from_millis(u64::from(self.ensemble.config().tick_time_ms))
    }

    /// `syncLimit * tickTime`: how long a silent link to the leader takes to be noticed.
    pub fn sync_timeout(&self) -> Duration {
        self.tick_time() * self.sync_limit
    }

    /// Connect string of every node's client port, in index order.
    pub fn connect_string(&self) -> String {
        self.ensemble.connect_string()
    }

    /// Connect string of node `i`'s client port, `"127.0.0.1:<port>"`.
    pub fn node_connect_string(&self, i: usize) -> String {
        self.ensemble.node_connect_string(i)
    }

    /// Client port of node `i`.
    pub fn node_port(&self, i: usize) -> u16 {
        self.ensemble.node_port(i)
    }

    /// Client address of node `i`.
    pub fn node_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.node_port(i)))
    }

    /// The mode node `i` reports with `srvr`; `None` when not serving or unreachable.
    pub fn mode(&self, i: usize) -> Option<Mode> {
        self.check_node(i);
        server_mode(self.node_addr(i)).ok().flatten()
    }

    /// The leader, when exactly one node reports `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        self.view().leader()
    }

    /// Node `i`'s whole answer to `srvr`.
    ///
    /// # Errors
    /// When it cannot be reached.
    pub fn srvr(&self, i: usize) -> io::Result<String> {
        self.check_node(i);
        four_letter_word(self.node_addr(i), "srvr")
    }

    /// Node `i`'s whole answer to `mntr`.
    ///
    /// # Errors
    /// When it cannot be reached.
    pub fn mntr(&self, i: usize) -> io::Result<String> {
        self.check_node(i);
        four_letter_word(self.node_addr(i), "mntr")
    }

    /// `zk_synced_followers` from node `i`'s `mntr`: the followers it leads that are
    /// connected and synced. `None` unless node `i` is serving as a leader.
    pub fn synced_followers(&self, i: usize) -> Option<usize> {
        let mntr = self.mntr(i).ok()?;
        mntr.lines().find_map(|line| {
            let mut cols = line.split_whitespace();
            (cols.next() == Some("zk_synced_followers"))
                .then(|| cols.next()?.parse().ok())
                .flatten()
        })
    }

    /// Every node's mode, and the synced followers of every node that leads.
    pub fn view(&self) -> View {
        let modes: Vec<Option<Mode>> = (0..self.node_count()).map(|i| self.mode(i)).collect();
        let synced_followers = modes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if *m == Some(Mode::Leader) {
                    self.synced_followers(i)
                } else {
                    None
                }
            })
            .collect();
        View {
            modes,
            synced_followers,
        }
    }

    /// Every node's status, and every relay's faults and counters, for assertion messages.
    pub fn status(&self) -> String {
        let mut out = self.ensemble.status();
        for link in &self.links {
            for (kind, relay) in [("quorum", &link.quorum), ("election", &link.election)] {
                let faults = relay.shared.faults();
                out.push_str(&format!(
                    "\n{kind} {}->{}: faults {:?}/{:?} {:?}",
                    link.from,
                    link.to,
                    faults[FWD],
                    faults[BWD],
                    relay.counts()
                ));
            }
        }
        out
    }

    /// Kills node `i` (`SIGKILL`); its relays stay up.
    ///
    /// # Errors
    /// As [`ZkEnsemble::kill`].
    pub fn kill(&mut self, i: usize) -> Result<(), ServerError> {
        self.ensemble.kill(i)
    }

    /// Kills node `i` if running and starts it again with the same ports and data; returns
    /// once it serves as leader or follower (which needs a quorum reachable through the
    /// current faults).
    ///
    /// # Errors
    /// As [`ZkEnsemble::restart`].
    pub fn restart(&mut self, i: usize) -> Result<(), ServerError> {
        self.ensemble.restart(i)
    }

    // ===== the relays =====

    /// The relay carrying the connections that node `from` opens to node `to` on `kind`.
    pub fn relay(&self, kind: LinkKind, from: usize, to: usize) -> &LinkRelay {
        let link = self.link(from, to);
        match kind {
            LinkKind::Quorum => &link.quorum,
            LinkKind::Election => &link.election,
        }
    }

    /// The counters of [`relay`](Self::relay)`(kind, from, to)`.
    pub fn link_counts(&self, kind: LinkKind, from: usize, to: usize) -> LinkCounts {
        self.relay(kind, from, to).counts()
    }

    /// Sets `fault` on the bytes flowing from node `from` to node `to`, on every link between
    /// them whichever side opened it; bytes from `to` to `from` are not touched (but see
    /// [`LinkFault::Reset`], which ends whole connections).
    pub fn cut_one_way(&self, from: usize, to: usize, fault: LinkFault) {
        for relay in self.link(from, to).relays() {
            relay.set_fault(Flow::Forward, Some(fault));
        }
        for relay in self.link(to, from).relays() {
            relay.set_fault(Flow::Backward, Some(fault));
        }
    }

    /// Sets `fault` on every link between nodes `a` and `b`, both ways.
    pub fn cut(&self, a: usize, b: usize, fault: LinkFault) {
        for relay in self
            .link(a, b)
            .relays()
            .into_iter()
            .chain(self.link(b, a).relays())
        {
            relay.set_both(fault);
        }
    }

    /// Sets `fault` on every link of node `i`, both ways: it can reach nobody and nobody can
    /// reach it (its client port stays reachable).
    pub fn isolate(&self, i: usize, fault: LinkFault) {
        self.check_node(i);
        for j in (0..self.node_count()).filter(|&j| j != i) {
            self.cut(i, j, fault);
        }
    }

    /// Splits the ensemble into `groups`: every link between nodes of different groups gets
    /// `fault`, both ways; nodes listed in no group form one more group together.
    pub fn partition(&self, groups: &[&[usize]], fault: LinkFault) {
        let n = self.node_count();
        let group_of = |i: usize| groups.iter().position(|g| g.contains(&i));
        for g in groups {
            for &i in *g {
                self.check_node(i);
            }
        }
        for a in 0..n {
            for b in (a + 1)..n {
                if group_of(a) != group_of(b) {
                    self.cut(a, b, fault);
                }
            }
        }
    }

    /// Lifts every fault on every link; held bytes are delivered.
    pub fn heal(&self) {
        for link in &self.links {
            for relay in link.relays() {
                relay.heal();
            }
        }
    }

    /// Finds the established TCP connections to the servers' real quorum and election ports
    /// (Linux `/proc/net/tcp` and `tcp6`) and sorts them by whether they come from a relay.
    /// A connection from anywhere else means a link bypasses the relays. Each bypass is
    /// confirmed by a second look 300 ms later, to rule out connections caught between
    /// their handshake and the relay noting their port.
    ///
    /// # Errors
    /// When procfs cannot be read.
    pub fn peer_sockets(&self) -> io::Result<PeerSockets> {
        let first = self.peer_sockets_once()?;
        if first.bypassing.is_empty() {
            return Ok(first);
        }
        std::thread::sleep(Duration::from_millis(300));
        let second = self.peer_sockets_once()?;
        Ok(PeerSockets {
            via_relay: second.via_relay,
            bypassing: second
                .bypassing
                .into_iter()
                .filter(|b| first.bypassing.contains(b))
                .collect(),
        })
    }

    fn peer_sockets_once(&self) -> io::Result<PeerSockets> {
        let server_ports: HashSet<u16> = self
            .ports
            .iter()
            .flat_map(|p| [p.quorum, p.election])
            .collect();
        // Relay ports first, then the sockets: a relay connection made in between is then
        // the only kind of false alarm, which the caller's second look clears.
        let relay_ports: HashSet<u16> = self
            .links
            .iter()
            .flat_map(|l| l.relays())
            .flat_map(LinkRelay::upstream_ports)
            .collect();
        let mut out = PeerSockets::default();
        let mut found_table = false;
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let text = match std::fs::read_to_string(table) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            found_table = true;
            for line in text.lines().skip(1) {
                let cols: Vec<&str> = line.split_whitespace().collect();
                let port = |col: usize| {
                    cols.get(col)
                        .and_then(|a| a.rsplit(':').next())
                        .and_then(|p| u16::from_str_radix(p, 16).ok())
                };
                // State 01 is ESTABLISHED.
                let (Some(local), Some(remote), Some(&"01")) = (port(1), port(2), cols.get(3))
                else {
                    continue;
                };
                if !server_ports.contains(&local) {
                    continue;
                }
                if relay_ports.contains(&remote) {
                    out.via_relay += 1;
                } else {
                    out.bypassing.push(format!("{local} <- {remote}"));
                }
            }
        }
        if !found_table {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no /proc/net/tcp: socket tables are only read on Linux",
            ));
        }
        Ok(out)
    }

    // ===== waiting =====

    /// Polls [`view`](Self::view) every 100 ms until `done` accepts one, and returns it.
    ///
    /// # Errors
    /// [`WaitError`] (naming `what`, with the last view and the status) after `timeout`.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&View) -> bool,
    ) -> Result<View, WaitError> {
        let start = std::time::Instant::now();
        loop {
            let view = self.view();
            if done(&view) {
                return Ok(view);
            }
            if start.elapsed() >= timeout {
                return Err(WaitError {
                    what: what.to_owned(),
                    waited: start.elapsed(),
                    last: view,
                    status: self.status(),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Waits until the ensemble is whole ([`View::is_whole`]) and returns the leader.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_healed(&self, timeout: Duration) -> Result<usize, WaitError> {
        let view = self.wait_until("the ensemble is whole", timeout, View::is_whole)?;
        // `is_whole` implies one leader.
        view.leader().ok_or_else(|| WaitError {
            what: "the ensemble is whole".to_owned(),
            waited: timeout,
            last: view.clone(),
            status: self.status(),
        })
    }

    /// Waits until node `i` no longer reports `Mode: follower` (in leader election it
    /// answers that it is not serving requests).
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_until_not_following(&self, i: usize, timeout: Duration) -> Result<View, WaitError> {
        self.check_node(i);
        self.wait_until(&format!("node {i} stops following"), timeout, |v| {
            !v.is_following(i)
        })
    }

    /// Waits until node `i` no longer reports `Mode: leader`.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_until_not_leading(&self, i: usize, timeout: Duration) -> Result<View, WaitError> {
        self.check_node(i);
        self.wait_until(&format!("node {i} stops leading"), timeout, |v| {
            !v.is_leading(i)
        })
    }

    /// Waits until a node other than `old` leads with at least a majority (itself included)
    /// synced, and returns it.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_for_leader_change(
        &self,
        old: usize,
        timeout: Duration,
    ) -> Result<usize, WaitError> {
        self.check_node(old);
        let majority = self.node_count() / 2 + 1;
        let new_leader = |v: &View| {
            v.leaders()
                .into_iter()
                .find(|&l| l != old && v.synced_followers_of(l).is_some_and(|s| s + 1 >= majority))
        };
        let view = self.wait_until(
            &format!("a node other than {old} leads a majority"),
            timeout,
            |v| new_leader(v).is_some(),
        )?;
        new_leader(&view).ok_or_else(|| WaitError {
            what: format!("a node other than {old} leads a majority"),
            waited: timeout,
            last: view.clone(),
            status: self.status(),
        })
    }

    /// Waits until node `leader` leads with exactly `count` synced followers.
    ///
    /// # Errors
    /// [`WaitError`] after `timeout`.
    pub fn wait_synced_followers(
        &self,
        leader: usize,
        count: usize,
        timeout: Duration,
    ) -> Result<View, WaitError> {
        self.check_node(leader);
        self.wait_until(
            &format!("node {leader} leads {count} synced followers"),
            timeout,
            |v| v.is_leading(leader) && v.synced_followers_of(leader) == Some(count),
        )
    }
}

/// The value of `key` (`syncLimit`, `initLimit`) among the extra `zoo.cfg` lines; the last
/// one wins, as in ZooKeeper.
fn limit(config: &ServerConfig, key: &str) -> Option<u32> {
    config
        .extra
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// The servers' configuration the partition tests share: tickTime `tick_ms`, syncLimit 5 (a
/// silent link is noticed after 5 ticks), initLimit 10, session timeouts from 2 ticks to
/// 60 s.
pub fn partition_config(tick_ms: u32) -> ServerConfig {
    ServerConfig::default()
        .tick_time_ms(tick_ms)
        .min_session_timeout_ms(tick_ms.saturating_mul(2))
        .max_session_timeout_ms(60_000)
        .extra("syncLimit", "5")
        .extra("initLimit", "10")
}

/// The partitions a lock holder is tested under (docs/faults.md #28): which server the
/// holder talks to, and what is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldScenario {
    /// Every link of the holder's follower blackholed, both ways.
    FollowerBlackhole,
    /// Every link of the holder's follower reset, and reset again on every reconnect.
    FollowerReset,
    /// Every link of the leader, which the holder talks to, blackholed.
    LeaderIsolated,
    /// The holder's follower cut from the leader only: the other follower sees both.
    Bridge,
    /// Only what the leader sends to the holder's follower is lost.
    OneWayFromLeader,
}

impl HoldScenario {
    /// Whether the holder talks to the leader (else to a follower).
    pub fn holder_on_leader(self) -> bool {
        self == Self::LeaderIsolated
    }

    /// Cuts `victim` (the holder's server) off as the scenario says; `leader` leads now.
    pub fn apply(self, ensemble: &PartitionedEnsemble, victim: usize, leader: usize) {
        match self {
            Self::FollowerBlackhole | Self::LeaderIsolated => {
                ensemble.isolate(victim, LinkFault::Blackhole);
            }
            Self::FollowerReset => ensemble.isolate(victim, LinkFault::Reset),
            Self::Bridge => ensemble.cut(victim, leader, LinkFault::Blackhole),
            Self::OneWayFromLeader => ensemble.cut_one_way(leader, victim, LinkFault::Blackhole),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(version: i64, sid: i64, addr: &str) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&version.to_be_bytes());
        m.extend_from_slice(&sid.to_be_bytes());
        m.extend_from_slice(&i32::try_from(addr.len()).unwrap_or(0).to_be_bytes());
        m.extend_from_slice(addr.as_bytes());
        m
    }

    #[test]
    fn rewriter_replaces_the_address_and_keeps_the_rest() {
        let advertised = SocketAddr::from((Ipv4Addr::LOCALHOST, 4242));
        let mut input = message(ELECTION_PROTOCOL_V1, 3, "127.0.0.1:39999");
        input.extend_from_slice(b"tail");
        // Fed one byte at a time: nothing comes out until the message is whole.
        let mut rw = Rewriter::new(advertised);
        let mut out = None;
        for (k, b) in input.iter().enumerate() {
            let got = rw.feed(&[*b]);
            if k + 1 < input.len() - 4 {
                assert!(got.is_none(), "output after {k} bytes");
            } else if got.is_some() {
                out = got;
                break;
            }
        }
        let (bytes, rewritten) = out.unwrap_or_default();
        assert!(rewritten);
        assert_eq!(
            bytes.as_ref(),
            message(ELECTION_PROTOCOL_V1, 3, "127.0.0.1:4242").as_slice()
        );

        let mut rw = Rewriter::new(advertised);
        let (bytes, rewritten) = rw.feed(&input).unwrap_or_default();
        assert!(rewritten);
        let mut expected = message(ELECTION_PROTOCOL_V1, 3, "127.0.0.1:4242");
        expected.extend_from_slice(b"tail");
        assert_eq!(bytes.as_ref(), expected.as_slice());

        // Version 2 with several addresses becomes the one advertised address.
        let v2 = message(ELECTION_PROTOCOL_V2, 1, "127.0.0.1:1|10.0.0.1:2");
        let (bytes, _) = Rewriter::new(advertised).feed(&v2).unwrap_or_default();
        assert_eq!(
            bytes.as_ref(),
            message(ELECTION_PROTOCOL_V2, 1, "127.0.0.1:4242").as_slice()
        );
    }

    #[test]
    fn rewriter_passes_other_streams_through() {
        let advertised = SocketAddr::from((Ipv4Addr::LOCALHOST, 4242));
        // The pre-3.5 format: the server id alone.
        let old = 7_i64.to_be_bytes();
        assert_eq!(
            Rewriter::new(advertised).feed(&old),
            Some((Bytes::copy_from_slice(&old), false))
        );
        // A length ZooKeeper would refuse.
        let mut bad = message(ELECTION_PROTOCOL_V1, 1, "x");
        bad[16..20].copy_from_slice(&5000_i32.to_be_bytes());
        assert_eq!(
            Rewriter::new(advertised).feed(&bad),
            Some((Bytes::from(bad.clone()), false))
        );
    }
}
