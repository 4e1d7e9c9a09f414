//! A frame-aware TCP fault-injection proxy between a client and a ZooKeeper server.
//!
//! [`FaultProxy`] listens on `127.0.0.1:0` and forwards every accepted connection to an
//! upstream address. It reassembles the ZooKeeper frames (`int32 len | payload`) in both
//! directions, so faults can be aimed at protocol events ("cut the connection right after the
//! second create reaches the server") rather than at byte offsets. Every fault is switched at
//! runtime through `&self`, and every injected fault is counted ([`ProxyCounts`]).
//!
//! Faults can be aimed at one direction only: hold it ([`FaultProxy::hold_client_to_server`]),
//! drop its frames ([`FaultProxy::drop_direction`]) or delay them by a seeded random amount
//! ([`FaultProxy::delay_direction`]), while the other direction flows as usual. That is how a
//! one-way partition looks to a client: requests vanish while replies and notifications keep
//! arriving.
//!
//! # Framing
//!
//! The first client→server frame of a connection is a `ConnectRequest` and the first
//! server→client frame a `ConnectResponse`, neither with a header; every later client frame
//! starts with a [`RequestHeader`] and every later server frame with a [`ReplyHeader`]. Frames
//! are forwarded whole: a frame's bytes go out only once all of them have arrived. A stream
//! that stops looking like frames (a negative length, or one over [`MAX_PARSED_FRAME`], as a
//! four-letter word such as `ruok` does) switches that direction to raw pass-through for the
//! rest of the connection.
//!
//! # Resources
//!
//! Each connection is one task that owns both sockets. Bytes waiting to be forwarded (held,
//! delayed or not yet written) are capped at [`MAX_BUFFERED`] per direction: a direction that
//! is being held (blackhole) and goes over the cap has its connection cut; otherwise the proxy
//! just stops reading that side until the queue drains. Logs are capped at [`MAX_LOG`]
//! entries. Dropping the [`FaultProxy`] aborts the accept loop, which aborts every connection
//! task and closes every socket.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::rng::SplitMix64;
use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use zkwire::jute::{Decode, FrameDecoder, Reader};
use zkwire::proto::{OpCode, ReplyHeader, RequestHeader, SetWatches, SetWatches2, PING_XID};

/// The most bytes waiting to be forwarded in one direction of one connection.
///
/// A held direction (blackhole, one-way hold) that goes over it gets its connection cut
/// ([`ProxyCounts::overflow_cuts`]); a direction that is merely slow or delayed stops being
/// read instead (back-pressure).
pub const MAX_BUFFERED: usize = 64 << 20;

/// The largest frame payload the proxy reassembles; a larger (or negative) length prefix
/// switches the direction to raw pass-through. Well above ZooKeeper's 1 MiB `jute.maxbuffer`,
/// so that oversized requests still reach the server and get rejected there.
pub const MAX_PARSED_FRAME: usize = 16 << 20;

/// The most entries each frame log ([`FaultProxy::client_frames`],
/// [`FaultProxy::server_frames`], [`FaultProxy::set_watches_path_bytes`]) keeps; later
/// frames are still counted but no longer logged.
pub const MAX_LOG: usize = 1 << 16;

/// How long a new connection waits for the upstream's TCP handshake before giving up (the
/// client then sees its connection closed).
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Bytes read from a socket in one call.
const READ_CHUNK: usize = 64 * 1024;

/// Which way bytes flow through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server: requests.
    ClientToServer,
    /// From the server to the client: replies and notifications.
    ServerToClient,
}

impl Direction {
    const fn index(self) -> usize {
        match self {
            Self::ClientToServer => 0,
            Self::ServerToClient => 1,
        }
    }
}

/// How many faults the proxy has injected, by kind (a snapshot).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    /// Connections closed (FIN) by [`FaultProxy::cut_all`].
    pub cut_connections: usize,
    /// Connections reset (RST) by [`FaultProxy::reset_all`].
    pub reset_connections: usize,
    /// Triggers of [`FaultProxy::cut_after_request`] that fired.
    pub triggered: usize,
    /// Client pings swallowed by [`FaultProxy::drop_pings`].
    pub pings_dropped: usize,
    /// Frames (or raw chunks) thrown away by [`FaultProxy::blackhole_drop`].
    pub frames_discarded: usize,
    /// Client→server frames (or raw chunks) thrown away by
    /// [`FaultProxy::drop_direction`]`(ClientToServer, true)`.
    pub client_frames_dropped: usize,
    /// Server→client frames (or raw chunks) thrown away by
    /// [`FaultProxy::drop_direction`]`(ServerToClient, true)`.
    pub server_frames_dropped: usize,
    /// Connections refused by [`FaultProxy::refuse`].
    pub refused: usize,
    /// Connections cut because a held direction went over [`MAX_BUFFERED`].
    pub overflow_cuts: usize,
    /// SetWatches/SetWatches2 frames whose body did not decode.
    pub undecodable_set_watches: usize,
}

/// The switchable faults; a copy is taken at every turn of a connection's loop.
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    blackhole: bool,
    blackhole_drop: bool,
    /// One-way holds, indexed by [`Direction::index`].
    hold: [bool; 2],
    /// One-way drops, indexed by [`Direction::index`].
    drop: [bool; 2],
    delay: Duration,
    /// Per-direction random delays, indexed by [`Direction::index`].
    jitter: [Option<Jitter>; 2],
    drop_pings: bool,
    split: bool,
    refuse: bool,
    /// Bumped by `cut_all`; connections born under an older value close.
    cut_epoch: u64,
    /// Bumped by `reset_all`; connections born under an older value reset.
    reset_epoch: u64,
}

impl Faults {
    fn held(&self, dir: Direction) -> bool {
        self.blackhole || self.blackhole_drop || self.hold[dir.index()]
    }

    /// Whether frames read in `dir` are thrown away.
    fn drops(&self, dir: Direction) -> bool {
        self.blackhole_drop || self.drop[dir.index()]
    }
}

/// The bounds of a [`FaultProxy::delay_direction`] (`min <= max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Jitter {
    min: Duration,
    max: Duration,
}

/// An armed [`FaultProxy::cut_after_request`].
#[derive(Debug, Clone, Copy)]
struct Trigger {
    op: OpCode,
    remaining: usize,
}

/// What the proxy has seen.
#[derive(Debug, Default)]
struct Stats {
    connections: usize,
    active: usize,
    frames: [usize; 2],
    requests: HashMap<i32, usize>,
    max_len: HashMap<i32, usize>,
    client_frames: Vec<(Option<RequestHeader>, usize)>,
    server_frames: Vec<(Option<ReplyHeader>, usize)>,
    set_watches_path_bytes: Vec<usize>,
    counts: ProxyCounts,
}

/// State shared by the handle, the accept loop and every connection.
#[derive(Debug)]
struct Shared {
    upstream: Mutex<SocketAddr>,
    faults: Mutex<Faults>,
    trigger: Mutex<Option<Trigger>>,
    stats: Mutex<Stats>,
    /// The generators of the per-direction delays, indexed by [`Direction::index`]; shared
    /// by every connection, so the n-th frame delayed in a direction since
    /// [`FaultProxy::delay_direction`] gets the n-th draw.
    jitter_rng: Mutex<[SplitMix64; 2]>,
    /// Bumped after every change to `faults`, to wake the connections.
    control: watch::Sender<u64>,
}

/// Locks a mutex, ignoring poisoning: every update leaves the data consistent, so a panic
/// elsewhere must not take the proxy down with it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn faults(&self) -> Faults {
        *lock(&self.faults)
    }

    fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut lock(&self.faults));
        self.control.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn stats(&self) -> MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    /// Counts one `op` request against the armed trigger; true when it fires.
    fn fire_trigger(&self, op: OpCode) -> bool {
        let mut trigger = lock(&self.trigger);
        let Some(t) = trigger.as_mut().filter(|t| t.op == op) else {
            return false;
        };
        t.remaining = t.remaining.saturating_sub(1);
        if t.remaining > 0 {
            return false;
        }
        *trigger = None;
        self.stats().counts.triggered += 1;
        true
    }

    /// The random part of the delay of a frame read in `dir` now.
    fn jitter(&self, dir: Direction, faults: &Faults) -> Duration {
        faults.jitter[dir.index()].map_or(Duration::ZERO, |j| {
            lock(&self.jitter_rng)[dir.index()].between(j.min, j.max)
        })
    }

    /// Counts `n` frames thrown away in `dir`, under the fault that threw them away.
    fn count_dropped(&self, dir: Direction, faults: &Faults, n: usize) {
        let mut stats = self.stats();
        let counter = match dir {
            _ if !faults.drop[dir.index()] => &mut stats.counts.frames_discarded,
            Direction::ClientToServer => &mut stats.counts.client_frames_dropped,
            Direction::ServerToClient => &mut stats.counts.server_frames_dropped,
        };
        *counter += n;
    }
}

/// A frame-aware fault-injection proxy (see the [module docs](self)).
///
/// Must be started and used inside a tokio runtime. All methods take `&self` and act at once
/// on every current connection (and, where it makes sense, on later ones).
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.upstream())
            .finish_non_exhaustive()
    }
}

impl Drop for FaultProxy {
    /// Aborts the accept loop; it owns the connection tasks, which are aborted with it, so
    /// every socket closes.
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FaultProxy {
    /// Listens on `127.0.0.1:0` and forwards each accepted connection to `upstream`.
    ///
    /// # Errors
    /// When the listening socket cannot be bound.
    ///
    /// # Panics
    /// When called outside a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            faults: Mutex::new(Faults::default()),
            trigger: Mutex::new(None),
            stats: Mutex::new(Stats::default()),
            jitter_rng: Mutex::new([SplitMix64::default(); 2]),
            control: watch::Sender::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self {
            addr,
            shared,
            accept,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `"127.0.0.1:<port>"`, to which a chroot can be appended.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Where new connections are forwarded.
    pub fn upstream(&self) -> SocketAddr {
        *lock(&self.shared.upstream)
    }

    /// Forwards connections accepted from now on to `addr`; current ones keep their server.
    pub fn set_upstream(&self, addr: SocketAddr) {
        *lock(&self.shared.upstream) = addr;
    }

    // ===== faults =====

    /// Closes every current connection now (FIN to both peers; an RST may follow where a
    /// peer had sent bytes the proxy had not read yet). Connections accepted later are
    /// forwarded as usual.
    pub fn cut_all(&self) {
        self.shared.update(|f| f.cut_epoch += 1);
    }

    /// Resets every current connection now: `SO_LINGER` 0 then close, so both peers get an
    /// RST and unsent bytes are lost. Connections accepted later are forwarded as usual.
    pub fn reset_all(&self) {
        self.shared.update(|f| f.reset_epoch += 1);
    }

    /// Arms a one-shot trigger, replacing any armed one: the `n`-th client request with
    /// opcode `op` seen from now on (counted over all connections, 1-based; 0 counts as 1) is
    /// forwarded to the server, and its connection is then closed as soon as that frame has
    /// been written, before the reply can come back. Client frames after it are never
    /// forwarded, and server bytes not yet delivered are dropped. [`triggered`](Self::triggered)
    /// counts the firings.
    ///
    /// Ops are matched exactly: the client's creates use `Create2` (15), containers
    /// `CreateContainer` (19), TTL nodes `CreateTtl` (21).
    pub fn cut_after_request(&self, op: OpCode, n: usize) {
        *lock(&self.shared.trigger) = Some(Trigger {
            op,
            remaining: n.max(1),
        });
    }

    /// Disarms the [`cut_after_request`](Self::cut_after_request) trigger, if armed.
    pub fn disarm(&self) {
        *lock(&self.shared.trigger) = None;
    }

    /// How many [`cut_after_request`](Self::cut_after_request) triggers have fired.
    pub fn triggered(&self) -> usize {
        self.shared.stats().counts.triggered
    }

    /// While on, holds every byte in both directions of every connection (current and new)
    /// without closing anything; switched off, the held bytes are delivered in order (unless
    /// [`blackhole_drop`](Self::blackhole_drop) or a one-way hold is still on).
    pub fn blackhole(&self, on: bool) {
        self.shared.update(|f| f.blackhole = on);
    }

    /// Like [`blackhole`](Self::blackhole), but what is held is lost: while on, every frame
    /// read in either direction is thrown away (whole frames, so the stream stays framed),
    /// along with anything queued when it is switched on; a frame already partly written is
    /// finished first. Switching it off resumes plain forwarding.
    pub fn blackhole_drop(&self, on: bool) {
        self.shared.update(|f| f.blackhole_drop = on);
    }

    /// One-way stall: while on, server→client bytes are held (client→server bytes still
    /// flow); switched off, they are delivered in order.
    pub fn hold_server_to_client(&self, on: bool) {
        self.shared
            .update(|f| f.hold[Direction::ServerToClient.index()] = on);
    }

    /// One-way stall: while on, client→server bytes are held (server→client bytes still
    /// flow); switched off, they are delivered in order.
    pub fn hold_client_to_server(&self, on: bool) {
        self.shared
            .update(|f| f.hold[Direction::ClientToServer.index()] = on);
    }

    /// Delays every frame read from now on, in both directions, by `d` (zero turns it off).
    /// Order is preserved: a frame never overtakes an earlier one.
    pub fn delay(&self, d: Duration) {
        self.shared.update(|f| f.delay = d);
    }

    /// One-way loss: while on, every frame read in `direction` (of every connection, current
    /// and new, handshake frames included) is thrown away whole, so the stream stays framed,
    /// along with the frames of that direction queued when it is switched on (a frame already
    /// partly written is finished first). The other direction flows as usual. Switched off,
    /// plain forwarding resumes; what was dropped never arrives. Dropped frames are still
    /// logged, are counted in [`ProxyCounts::client_frames_dropped`] /
    /// [`ProxyCounts::server_frames_dropped`], and never fire a
    /// [`cut_after_request`](Self::cut_after_request) trigger.
    pub fn drop_direction(&self, direction: Direction, on: bool) {
        self.shared.update(|f| f.drop[direction.index()] = on);
    }

    /// [`drop_direction`](Self::drop_direction) for client→server: requests (pings and
    /// ConnectRequests included) vanish, while replies to requests already forwarded and
    /// watch notifications still reach the client.
    pub fn drop_client_to_server(&self, on: bool) {
        self.drop_direction(Direction::ClientToServer, on);
    }

    /// [`drop_direction`](Self::drop_direction) for server→client: replies and notifications
    /// vanish, while requests still reach the server.
    pub fn drop_server_to_client(&self, on: bool) {
        self.drop_direction(Direction::ServerToClient, on);
    }

    /// Delays every frame read in `direction` from now on (every connection, current and new)
    /// by a pseudo-random duration drawn uniformly from `[min, max]` (the bounds are swapped
    /// if given in the wrong order), on top of any [`delay`](Self::delay). The draws come
    /// from a generator seeded with `seed` at this call and shared by all connections: the
    /// same seed and the same frames give the same delays. Order is preserved: a frame is
    /// due at the later of its own due time and that of the frame before it, so it never
    /// overtakes an earlier one. `min = max = 0` turns it off; frames already queued keep
    /// their due times.
    pub fn delay_direction(&self, direction: Direction, min: Duration, max: Duration, seed: u64) {
        let (min, max) = if min <= max { (min, max) } else { (max, min) };
        let jitter = (!max.is_zero()).then_some(Jitter { min, max });
        lock(&self.shared.jitter_rng)[direction.index()] = SplitMix64(seed);
        self.shared.update(|f| f.jitter[direction.index()] = jitter);
    }

    /// While on, client pings (`xid -2`, op 11) are swallowed: the server sees no traffic
    /// from an idle client, and the client gets no ping replies.
    pub fn drop_pings(&self, on: bool) {
        self.shared.update(|f| f.drop_pings = on);
    }

    /// While on, bytes are written one byte per write call in both directions (with
    /// `TCP_NODELAY`), to exercise the peers' frame reassembly.
    pub fn split_frames(&self, on: bool) {
        self.shared.update(|f| f.split = on);
    }

    /// While on, new connections are accepted and closed at once, without contacting the
    /// upstream ([`ProxyCounts::refused`]); current connections are unaffected.
    pub fn refuse(&self, on: bool) {
        self.shared.update(|f| f.refuse = on);
    }

    /// Switches every fault off and disarms the trigger: blackholes and holds release their
    /// held bytes in order, one-way drops stop, delays (both the common one and the
    /// per-direction ones) go to zero for frames read from now on. Counters and logs are
    /// kept.
    pub fn heal(&self) {
        self.disarm();
        self.shared.update(|f| {
            *f = Faults {
                cut_epoch: f.cut_epoch,
                reset_epoch: f.reset_epoch,
                ..Faults::default()
            }
        });
    }

    // ===== observation =====

    /// Connections accepted so far and not refused (including any whose upstream could not
    /// be reached).
    pub fn connections(&self) -> usize {
        self.shared.stats().connections
    }

    /// Connections currently open through the proxy.
    pub fn active(&self) -> usize {
        self.shared.stats().active
    }

    /// Whole frames parsed so far in `direction` (handshake frames included), whatever
    /// became of them.
    pub fn frames_seen(&self, direction: Direction) -> usize {
        self.shared.stats().frames[direction.index()]
    }

    /// Client requests with opcode `op` seen so far, including swallowed pings and the
    /// frames that fired a trigger.
    pub fn requests_seen(&self, op: OpCode) -> usize {
        self.shared
            .stats()
            .requests
            .get(&op.as_i32())
            .copied()
            .unwrap_or(0)
    }

    /// The largest payload (the frame's length prefix: header plus record) of a client
    /// request with opcode `op`, 0 if none was seen.
    pub fn max_frame_len(&self, op: OpCode) -> usize {
        self.shared
            .stats()
            .max_len
            .get(&op.as_i32())
            .copied()
            .unwrap_or(0)
    }

    /// Every client→server frame so far (up to [`MAX_LOG`]), in the order the proxy read them
    /// (connections interleaved): its
    /// header (`None` for the `ConnectRequest` and for a frame too short to hold one) and its
    /// payload length (the length prefix).
    pub fn client_frames(&self) -> Vec<(Option<RequestHeader>, usize)> {
        self.shared.stats().client_frames.clone()
    }

    /// Every server→client frame so far (up to [`MAX_LOG`]), in the order the proxy read them
    /// (connections interleaved): its
    /// header (`None` for the `ConnectResponse` and for a frame too short to hold one) and its
    /// payload length.
    pub fn server_frames(&self) -> Vec<(Option<ReplyHeader>, usize)> {
        self.shared.stats().server_frames.clone()
    }

    /// For each SetWatches (101) and SetWatches2 (105) frame so far, in order: the total
    /// UTF-8 bytes of all the paths it carries (every list; a path in two lists counts
    /// twice). Frames whose body does not decode are left out and counted in
    /// [`ProxyCounts::undecodable_set_watches`].
    pub fn set_watches_path_bytes(&self) -> Vec<usize> {
        self.shared.stats().set_watches_path_bytes.clone()
    }

    /// A snapshot of the fault counters.
    pub fn counts(&self) -> ProxyCounts {
        self.shared.stats().counts
    }
}

// ===== accepting =====

/// Accepts connections until aborted. Owning the connection tasks in a `JoinSet` is what
/// ties their lifetime to this loop: aborting it drops the set, which aborts them all.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => admit(stream, &shared, &mut tasks),
                // Out of descriptors and the like: retry later instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

fn admit(client: TcpStream, shared: &Arc<Shared>, tasks: &mut JoinSet<()>) {
    let faults = shared.faults();
    if faults.refuse {
        shared.stats().counts.refused += 1;
        return; // dropping the stream closes it
    }
    // The epochs are read here, not in the task, so that a cut issued after this accept
    // reaches the connection even if its task has not run yet.
    let birth = Birth {
        cut: faults.cut_epoch,
        reset: faults.reset_epoch,
    };
    let guard = ActiveGuard::new(Arc::clone(shared));
    tasks.spawn(run_connection(client, guard, birth));
}

/// Counts a connection as active for as long as its task (or its unpolled future) exists.
struct ActiveGuard(Arc<Shared>);

impl ActiveGuard {
    fn new(shared: Arc<Shared>) -> Self {
        let mut stats = shared.stats();
        stats.connections += 1;
        stats.active += 1;
        drop(stats);
        Self(shared)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.stats().active -= 1;
    }
}

/// The fault epochs a connection was accepted under.
#[derive(Debug, Clone, Copy)]
struct Birth {
    cut: u64,
    reset: u64,
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A peer closed or failed and what it had sent was forwarded.
    Closed,
    /// Closed by a fault: shut both sockets down (FIN).
    Cut,
    /// Reset by a fault: RST to both peers.
    Reset,
}

async fn run_connection(mut client: TcpStream, guard: ActiveGuard, birth: Birth) {
    let shared = Arc::clone(&guard.0);
    let upstream = *lock(&shared.upstream);
    let Ok(Ok(mut server)) =
        tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream)).await
    else {
        return; // the client sees its connection closed, as if the server were down
    };
    // Forward small frames at once; split mode relies on each 1-byte write leaving alone.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let end = Conn::new(shared, birth)
        .pump(&mut client, &mut server)
        .await;
    match end {
        End::Reset => {
            let _ = client.set_zero_linger();
            let _ = server.set_zero_linger();
        }
        End::Cut => {
            let _ = client.shutdown().await;
            let _ = server.shutdown().await;
        }
        End::Closed => {}
    }
    drop(guard);
}

// ===== framing =====

/// What the reader of one direction produced.
#[derive(Debug)]
enum Piece {
    /// A whole frame's payload (without its length prefix).
    Frame(Bytes),
    /// Bytes of a stream that is not (or no longer) framed.
    Raw(Bytes),
}

/// Splits one direction's byte stream into frames, falling back to raw pass-through.
#[derive(Debug)]
struct Framer {
    decoder: FrameDecoder,
    raw: bool,
}

impl Framer {
    fn new() -> Self {
        Self {
            decoder: FrameDecoder::new(MAX_PARSED_FRAME),
            raw: false,
        }
    }

    fn push(&mut self, data: &[u8]) -> Vec<Piece> {
        if self.raw {
            return vec![Piece::Raw(Bytes::copy_from_slice(data))];
        }
        self.decoder.push(data);
        let mut pieces = Vec::new();
        loop {
            match self.decoder.next_frame() {
                Ok(Some(payload)) => pieces.push(Piece::Frame(payload)),
                Ok(None) => break,
                Err(_) => {
                    // The decoder keeps the offending prefix buffered: pass it on verbatim.
                    self.raw = true;
                    pieces.push(Piece::Raw(self.decoder.buffer_mut().split().freeze()));
                    break;
                }
            }
        }
        pieces
    }
}

/// The wire bytes of a frame: its length prefix, then its payload.
fn with_prefix(payload: &Bytes) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + payload.len());
    // Payloads are at most MAX_PARSED_FRAME, so the length fits.
    out.put_u32(u32::try_from(payload.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(payload);
    out.freeze()
}

fn decode_prefix<T: Decode>(payload: &Bytes) -> Option<T> {
    Reader::new(payload).read::<T>().ok()
}

/// The total bytes of the paths in a SetWatches (`op` 101) or SetWatches2 (105) body.
fn set_watches_path_bytes(op: OpCode, body: &Bytes) -> Option<usize> {
    let total = |lists: &[&Vec<String>]| lists.iter().flat_map(|l| l.iter()).map(String::len).sum();
    match op {
        OpCode::SetWatches => {
            let w = SetWatches::decode_exact(body).ok()?;
            Some(total(&[
                &w.data_watches,
                &w.exist_watches,
                &w.child_watches,
            ]))
        }
        OpCode::SetWatches2 => {
            let w = SetWatches2::decode_exact(body).ok()?;
            Some(total(&[
                &w.data_watches,
                &w.exist_watches,
                &w.child_watches,
                &w.persistent_watches,
                &w.persistent_recursive_watches,
            ]))
        }
        _ => None,
    }
}

impl Stats {
    fn log_client(&mut self, header: Option<&RequestHeader>, payload: &Bytes) {
        self.frames[Direction::ClientToServer.index()] += 1;
        if let Some(h) = header {
            let op = h.op.as_i32();
            *self.requests.entry(op).or_default() += 1;
            let max = self.max_len.entry(op).or_default();
            *max = (*max).max(payload.len());
            if matches!(h.op, OpCode::SetWatches | OpCode::SetWatches2) {
                self.log_set_watches(h.op, payload);
            }
        }
        if self.client_frames.len() < MAX_LOG {
            self.client_frames.push((header.cloned(), payload.len()));
        }
    }

    fn log_set_watches(&mut self, op: OpCode, payload: &Bytes) {
        let body = payload.slice(payload.len().min(8)..);
        match set_watches_path_bytes(op, &body) {
            Some(n) if self.set_watches_path_bytes.len() < MAX_LOG => {
                self.set_watches_path_bytes.push(n)
            }
            Some(_) => {}
            None => self.counts.undecodable_set_watches += 1,
        }
    }

    fn log_server(&mut self, header: Option<ReplyHeader>, payload: &Bytes) {
        self.frames[Direction::ServerToClient.index()] += 1;
        if self.server_frames.len() < MAX_LOG {
            self.server_frames.push((header, payload.len()));
        }
    }
}

// ===== one connection =====

/// Bytes waiting to be written to a peer.
#[derive(Debug)]
struct Chunk {
    bytes: Bytes,
    release_at: Instant,
    /// Written last: the connection is cut once this chunk is out (a fired trigger).
    last: bool,
}

/// One direction of a connection.
#[derive(Debug)]
struct Lane {
    dir: Direction,
    framer: Framer,
    /// Whether the next frame is the handshake frame (no header).
    first: bool,
    queue: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    written: usize,
    /// Bytes in `queue`.
    queued: usize,
    /// The source peer closed (or failed): nothing more will be read.
    eof: bool,
}

impl Lane {
    fn new(dir: Direction) -> Self {
        Self {
            dir,
            framer: Framer::new(),
            first: true,
            queue: VecDeque::new(),
            written: 0,
            queued: 0,
            eof: false,
        }
    }

    /// Held directions keep reading (the test asked for the bytes to be held, and the cap
    /// then cuts); others stop at the cap so that a slow reader only slows its writer.
    fn wants_read(&self, faults: &Faults) -> bool {
        !self.eof && (self.queued < MAX_BUFFERED || faults.held(self.dir))
    }

    fn overflowed(&self) -> bool {
        self.queued > MAX_BUFFERED
    }

    fn push(&mut self, bytes: Bytes, release_at: Instant, last: bool) {
        self.queued += bytes.len();
        self.queue.push_back(Chunk {
            bytes,
            release_at,
            last,
        });
    }

    /// What to write next (empty for nothing): the rest of the front chunk, or one byte of
    /// it in split mode.
    fn next_write(&self, now: Instant, faults: &Faults) -> Bytes {
        match self.queue.front() {
            Some(c) if !faults.held(self.dir) && c.release_at <= now => {
                let rest = c.bytes.slice(self.written..);
                if faults.split {
                    rest.slice(..rest.len().min(1))
                } else {
                    rest
                }
            }
            _ => Bytes::new(),
        }
    }

    /// When the front chunk becomes writable, if it is waiting on its delay only.
    fn wake_at(&self, now: Instant, faults: &Faults) -> Option<Instant> {
        let front = self.queue.front()?;
        (!faults.held(self.dir) && front.release_at > now).then_some(front.release_at)
    }

    /// Records `n` bytes written; returns the chunk if it is now fully written.
    fn advance(&mut self, n: usize) -> Option<Chunk> {
        self.written += n;
        let done = self
            .queue
            .front()
            .is_some_and(|c| self.written >= c.bytes.len());
        if !done {
            return None;
        }
        self.written = 0;
        let chunk = self.queue.pop_front()?;
        self.queued -= chunk.bytes.len();
        Some(chunk)
    }

    /// Drops every queued chunk except a partly written front one (dropping that would
    /// break the framing). Returns how many were dropped and whether a `last` one was.
    fn discard(&mut self) -> (usize, bool) {
        let keep = usize::from(self.written > 0);
        let dropped: Vec<Chunk> = self.queue.drain(keep.min(self.queue.len())..).collect();
        self.queued -= dropped.iter().map(|c| c.bytes.len()).sum::<usize>();
        (dropped.len(), dropped.iter().any(|c| c.last))
    }
}

/// A connection's forwarding state; both sockets are borrowed by [`Conn::pump`].
#[derive(Debug)]
struct Conn {
    shared: Arc<Shared>,
    birth: Birth,
    lanes: [Lane; 2],
    /// A trigger fired: no more client bytes are read, and the connection ends once the
    /// triggering frame is written.
    doomed: bool,
}

const C2S: usize = 0;
const S2C: usize = 1;

impl Conn {
    fn new(shared: Arc<Shared>, birth: Birth) -> Self {
        Self {
            shared,
            birth,
            lanes: [
                Lane::new(Direction::ClientToServer),
                Lane::new(Direction::ServerToClient),
            ],
            doomed: false,
        }
    }

    /// Forwards between the two sockets until a peer closes or a fault ends the connection.
    async fn pump(&mut self, client: &mut TcpStream, server: &mut TcpStream) -> End {
        let mut control = self.shared.control.subscribe();
        let (mut client_rd, mut client_wr) = client.split();
        let (mut server_rd, mut server_wr) = server.split();
        let mut client_buf = vec![0; READ_CHUNK];
        let mut server_buf = vec![0; READ_CHUNK];
        loop {
            // Mark the current control version seen before reading the faults, so a change
            // made after this point wakes the select below.
            control.borrow_and_update();
            let faults = self.shared.faults();
            if let Some(end) = self.check(&faults) {
                return end;
            }
            let now = Instant::now();
            let to_server = self.lanes[C2S].next_write(now, &faults);
            let to_client = self.lanes[S2C].next_write(now, &faults);
            let wake = self
                .lanes
                .iter()
                .filter_map(|l| l.wake_at(now, &faults))
                .min();
            let read_client = !self.doomed && self.lanes[C2S].wants_read(&faults);
            let read_server = self.lanes[S2C].wants_read(&faults);
            tokio::select! {
                r = client_rd.read(&mut client_buf), if read_client => {
                    self.on_read(Direction::ClientToServer, r, &client_buf);
                }
                r = server_rd.read(&mut server_buf), if read_server => {
                    self.on_read(Direction::ServerToClient, r, &server_buf);
                }
                r = server_wr.write(&to_server), if !to_server.is_empty() => {
                    if let Some(end) = self.on_written(C2S, r) {
                        return end;
                    }
                }
                r = client_wr.write(&to_client), if !to_client.is_empty() => {
                    if let Some(end) = self.on_written(S2C, r) {
                        return end;
                    }
                }
                () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
                changed = control.changed() => {
                    // The proxy handle is gone; its Drop is aborting us anyway.
                    if changed.is_err() {
                        return End::Cut;
                    }
                }
            }
        }
    }

    /// Applies the faults that end or empty the connection; `Some` ends it.
    fn check(&mut self, faults: &Faults) -> Option<End> {
        if faults.reset_epoch > self.birth.reset {
            self.shared.stats().counts.reset_connections += 1;
            return Some(End::Reset);
        }
        if faults.cut_epoch > self.birth.cut {
            self.shared.stats().counts.cut_connections += 1;
            return Some(End::Cut);
        }
        if self.discard_dropped(faults) {
            return Some(End::Cut);
        }
        if self.lanes.iter().any(Lane::overflowed) {
            self.shared.stats().counts.overflow_cuts += 1;
            return Some(End::Cut);
        }
        // A peer that closed ends the connection once what it sent has been forwarded (a
        // closeSession, or an "expired" ConnectResponse, must get through).
        self.lanes
            .iter()
            .any(|l| l.eof && l.queue.is_empty())
            .then_some(End::Closed)
    }

    /// Empties the queues of the directions being dropped; true when that threw away a
    /// trigger's frame, which leaves nothing to wait for before the cut.
    fn discard_dropped(&mut self, faults: &Faults) -> bool {
        let mut lost_last = false;
        for lane in &mut self.lanes {
            if !faults.drops(lane.dir) {
                continue;
            }
            let (n, last) = lane.discard();
            lost_last |= last;
            if n > 0 {
                self.shared.count_dropped(lane.dir, faults, n);
            }
        }
        lost_last
    }

    fn on_written(&mut self, lane: usize, written: io::Result<usize>) -> Option<End> {
        match written {
            Ok(0) | Err(_) => Some(End::Closed),
            Ok(n) => match self.lanes[lane].advance(n) {
                Some(chunk) if chunk.last => Some(End::Cut),
                _ => None,
            },
        }
    }

    /// Frames what was read and queues it. The faults are read afresh rather than taken from
    /// the loop's snapshot: a switch made just before the peer wrote (both ready when the
    /// loop wakes) must apply to those bytes.
    fn on_read(&mut self, dir: Direction, read: io::Result<usize>, buf: &[u8]) {
        let faults = &self.shared.faults();
        let lane = &mut self.lanes[dir.index()];
        let n = match read {
            Ok(0) | Err(_) => {
                lane.eof = true;
                return;
            }
            Ok(n) => n,
        };
        let read_at = Instant::now() + faults.delay;
        for piece in lane.framer.push(&buf[..n]) {
            // After a trigger fired nothing more from the client may reach the server.
            if self.doomed && dir == Direction::ClientToServer {
                break;
            }
            self.on_piece(dir, piece, read_at, faults);
        }
    }

    /// Logs one piece and queues it (due at `read_at` plus its random delay) unless a fault
    /// swallows it.
    fn on_piece(&mut self, dir: Direction, piece: Piece, read_at: Instant, faults: &Faults) {
        let (bytes, last) = match piece {
            Piece::Raw(bytes) => (bytes, false),
            Piece::Frame(payload) => match dir {
                Direction::ClientToServer => match self.on_request(&payload, faults) {
                    Some(last) => (with_prefix(&payload), last),
                    None => return,
                },
                Direction::ServerToClient => {
                    self.on_reply(&payload);
                    (with_prefix(&payload), false)
                }
            },
        };
        if faults.drops(dir) && !last {
            self.shared.count_dropped(dir, faults, 1);
            return;
        }
        // The queue is written strictly in order, so a frame due before the one ahead of it
        // simply waits for it: its effective due time is the later of the two.
        let release_at = read_at + self.shared.jitter(dir, faults);
        self.doomed |= last;
        self.lanes[dir.index()].push(bytes, release_at, last);
    }

    /// Logs a client frame and applies the request faults: `None` swallows it, `Some(true)`
    /// forwards it as the connection's last frame (a fired trigger).
    fn on_request(&mut self, payload: &Bytes, faults: &Faults) -> Option<bool> {
        let lane = &mut self.lanes[C2S];
        let header = if std::mem::take(&mut lane.first) {
            None
        } else {
            decode_prefix::<RequestHeader>(payload)
        };
        self.shared.stats().log_client(header.as_ref(), payload);
        if faults.drop[C2S] {
            // Dropped here, before the trigger can count it: it never reaches the server.
            self.shared
                .count_dropped(Direction::ClientToServer, faults, 1);
            return None;
        }
        let Some(header) = header else {
            return Some(false);
        };
        if faults.drop_pings && header.xid == PING_XID && header.op == OpCode::Ping {
            self.shared.stats().counts.pings_dropped += 1;
            return None;
        }
        Some(self.shared.fire_trigger(header.op))
    }

    fn on_reply(&mut self, payload: &Bytes) {
        let lane = &mut self.lanes[S2C];
        let header = if std::mem::take(&mut lane.first) {
            None
        } else {
            decode_prefix::<ReplyHeader>(payload)
        };
        self.shared.stats().log_server(header, payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_draws_stay_in_bounds_and_follow_the_seed() {
        let (min, max) = (Duration::from_millis(500), Duration::from_millis(1500));
        let draws = |seed| {
            let mut rng = SplitMix64(seed);
            (0..1000).map(|_| rng.between(min, max)).collect::<Vec<_>>()
        };
        let a = draws(7);
        assert!(a.iter().all(|d| (min..=max).contains(d)));
        assert_eq!(a, draws(7), "same seed, same delays");
        assert_ne!(a, draws(8));
        // Spread over the whole range: both ends' tenths get draws.
        let tenth = (max - min) / 10;
        assert!(a.iter().any(|d| *d < min + tenth));
        assert!(a.iter().any(|d| *d > max - tenth));
        // Degenerate ranges.
        let mut rng = SplitMix64(1);
        assert_eq!(rng.between(min, min), min);
        assert!(rng.between(Duration::ZERO, Duration::MAX) <= Duration::MAX);
    }
}
