//! [`FaultProxy`]: the handle a test holds, switching faults and reading what was seen.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;
use zkwire::proto::{OpCode, ReplyHeader, RequestHeader};

use super::accept::admit;
use super::state::{lock, Faults, Jitter, Shared, Stats, Trigger};
use super::{Direction, ProxyCounts};
use crate::listening::Listening;
use crate::rng::SplitMix64;

/// A frame-aware fault-injection proxy (see the [module docs](super)).
///
/// Must be started and used inside a tokio runtime. All methods take `&self` and act at once
/// on every current connection (and, where it makes sense, on later ones).
pub struct FaultProxy {
    /// Dropping it aborts the accept loop and, with it, every connection.
    listening: Listening,
    shared: Arc<Shared>,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr())
            .field("upstream", &self.upstream())
            .finish_non_exhaustive()
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
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            faults: Mutex::new(Faults::default()),
            trigger: Mutex::new(None),
            stats: Mutex::new(Stats::default()),
            jitter_rng: Mutex::new([SplitMix64::default(); 2]),
            control: watch::Sender::new(0),
        });
        let admitted = Arc::clone(&shared);
        let admit = move |client, tasks: &mut _| admit(client, &admitted, tasks);
        let listening = Listening::start(&Handle::current(), admit)?;
        Ok(Self { listening, shared })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.listening.addr()
    }

    /// `"127.0.0.1:<port>"`, to which a chroot can be appended.
    pub fn connect_string(&self) -> String {
        self.addr().to_string()
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
    ///
    /// [`MAX_LOG`]: super::MAX_LOG
    pub fn client_frames(&self) -> Vec<(Option<RequestHeader>, usize)> {
        self.shared.stats().client_frames.clone()
    }

    /// Every server→client frame so far (up to [`MAX_LOG`]), in the order the proxy read them
    /// (connections interleaved): its
    /// header (`None` for the `ConnectResponse` and for a frame too short to hold one) and its
    /// payload length.
    ///
    /// [`MAX_LOG`]: super::MAX_LOG
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
