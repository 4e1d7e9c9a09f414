//! The sans-IO session: the ZooKeeper client protocol as a state machine.
//!
//! No sockets, no clock, no runtime: bytes and the current time go in, bytes to send, the
//! next deadline and events come out. A driver (see `crate::driver`) owns one [`Session`] and
//! one transport; tests drive it with a virtual clock and scripted server frames.

mod handshake;
mod inbound;
mod lease;
mod lifecycle;
mod outbound;
mod pending;
mod reply;
mod sasl;
mod timers;
mod types;
mod watches;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

pub use sasl::{SaslExchange, SaslMechanism};
pub use types::{
    DropReason, Effect, Event, Reply, Request, RequestId, SessionConfig, SessionState, WatchKind,
    WatchedEvent, WatcherId,
};
#[cfg(any(test, feature = "unstable"))]
pub use watches::SET_WATCHES_MAX_PATH_BYTES;

pub(crate) use reply::decode_checked;
pub(crate) use timers::ping_interval;

pub(crate) use types::IdMap;

use self::lease::Lease;
use self::pending::{Pending, PendingAuth, Queued, Xids};
use self::timers::{Deadlines, Periods, Timers};
use self::watches::Watches;
use crate::error::Error;
use crate::jute::FrameDecoder;
use crate::proto::{OpCode, NEW_SESSION_PASSWD};

/// One ZooKeeper session, across however many connections it takes.
///
/// # Call order
///
/// Inputs are the `handle_*` methods and the commands [`submit`](Self::submit),
/// [`cancel`](Self::cancel), [`remove_watcher`](Self::remove_watcher) and
/// [`close`](Self::close). After any of them, the driver:
///
/// 1. writes [`poll_transmit`](Self::poll_transmit) to the transport (all pending frames in
///    one buffer),
/// 2. drains [`poll_event`](Self::poll_event) (a [`Event::DropConnection`] means: close the
///    transport now, and do not call [`handle_disconnected`](Self::handle_disconnected) for
///    it),
/// 3. sleeps until [`poll_timeout`](Self::poll_timeout) and then calls
///    [`handle_timeout`](Self::handle_timeout).
///
/// When [`wants_connection`](Self::wants_connection) is true the driver opens a transport
/// (to a host of its choosing, after its own backoff) and calls
/// [`handle_connected`](Self::handle_connected); received bytes go to
/// [`handle_input`](Self::handle_input) (or into [`recv_buffer`](Self::recv_buffer) followed
/// by [`handle_received`](Self::handle_received)); a transport that fails or reaches EOF is
/// reported with [`handle_disconnected`](Self::handle_disconnected).
///
/// # Guarantees
///
/// - Every submitted request gets exactly one [`Event::Reply`], unless it is cancelled first.
/// - Replies are matched to requests in order; a reply whose xid does not match the oldest
///   request in flight is a protocol error: the connection is dropped and every request in
///   flight fails with [`Error::ConnectionLoss`].
/// - Requests not yet written stay queued across reconnects until their deadline; written
///   requests fail with `ConnectionLoss` when the connection drops.
/// - Expiry, auth failure and close are terminal and reported once.
///
/// `Debug` shows the state and counts, never the password or credentials.
pub struct Session {
    config: SessionConfig,
    state: SessionState,
    conn: Conn,
    session_id: i64,
    passwd: Bytes,
    negotiated: Option<Duration>,
    /// The periods of the negotiated timeout, or of the requested one until negotiated.
    periods: Periods,
    last_zxid: i64,
    xids: Xids,
    next_id: u64,
    queued: VecDeque<Queued>,
    pending: VecDeque<Pending>,
    pending_auth: VecDeque<PendingAuth>,
    auths: Vec<Bytes>,
    watches: Watches,
    decoder: FrameDecoder,
    transmit: BytesMut,
    events: VecDeque<Event>,
    timers: Timers,
    /// What the quorum is known to keep the session alive for (docs/lease.md).
    lease: Lease,
    /// The deadlines of the unanswered requests that have one, in order.
    deadlines: Deadlines,
    /// A close the caller asked for, until the session has ended.
    closing: Option<Closing>,
    /// Later closes asked for while that one runs: answered when the session has ended.
    closers: Vec<RequestId>,
    /// Whether a read/write server has accepted the session (or it was given to resume).
    seen_rw: bool,
    /// The SASL exchange of the current connection, while it runs.
    sasl: Option<Box<dyn SaslExchange>>,
    /// The host the current connection was opened to.
    server_host: String,
    /// Why the SASL exchange failed on the client's side, once it has.
    sasl_failure: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("state", &self.state)
            .field("conn", &self.conn)
            .field("session_id", &format_args!("{:#x}", self.session_id))
            .field("negotiated", &self.negotiated)
            .field("last_zxid", &self.last_zxid)
            .field("queued", &self.queued.len())
            .field("in_flight", &self.pending.len())
            .field("auth_in_flight", &self.pending_auth.len())
            .field("credentials", &self.auths.len())
            .field("watches", &self.watches.len())
            .finish_non_exhaustive()
    }
}

/// Where a close the caller asked for stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// closeSession is queued or written; its reply ends the session.
    Requested(RequestId),
    /// The connection dropped with closeSession in flight. The session is over for us all
    /// the same, which is what the caller asked for: it is answered `Ok` when it ends.
    CutOff(RequestId),
}

/// The connection phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    /// No transport.
    Idle,
    /// ConnectRequest sent, waiting for the ConnectResponse.
    AwaitingConnectResponse,
    /// The server accepted the session; the SASL exchange runs, and nothing else is sent.
    Authenticating {
        /// Whether the server is read-only.
        read_only: bool,
    },
    /// Handshake done.
    Open,
}

impl Session {
    /// A session that has not connected yet.
    pub fn new(config: SessionConfig, now: Instant) -> Self {
        let (session_id, passwd) = config
            .resume
            .clone()
            .unwrap_or((0, Bytes::from_static(&NEW_SESSION_PASSWD)));
        let decoder = FrameDecoder::new(config.max_frame_len);
        let relay = config.relay_bound;
        let auths = config.auth.clone();
        let seen_rw = config.resume.is_some();
        let periods = Periods::of(config.session_timeout, config.session_timeout);
        Self {
            config,
            state: SessionState::Connecting,
            conn: Conn::Idle,
            session_id,
            passwd,
            negotiated: None,
            periods,
            last_zxid: 0,
            xids: Xids::default(),
            next_id: 0,
            queued: VecDeque::new(),
            pending: VecDeque::new(),
            pending_auth: VecDeque::new(),
            auths,
            watches: Watches::default(),
            decoder,
            transmit: BytesMut::new(),
            events: VecDeque::new(),
            timers: Timers::new(now),
            lease: Lease::new(relay),
            deadlines: Deadlines::default(),
            closing: None,
            closers: Vec::new(),
            seen_rw,
            sasl: None,
            server_host: String::new(),
            sasl_failure: None,
        }
    }

    // ===== getters =====

    /// The reported session state.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// The session id, 0 before the first handshake.
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// The session password (16 bytes; zeros before the first handshake).
    pub fn session_password(&self) -> &Bytes {
        &self.passwd
    }

    /// The negotiated session timeout, once known.
    pub fn session_timeout(&self) -> Option<Duration> {
        self.negotiated
    }

    /// The session timeout [`lease_deadline`](Self::lease_deadline) is reckoned with: the
    /// smallest negotiated in this session (the server re-times the session with each).
    pub fn lease_timeout(&self) -> Option<Duration> {
        self.lease.timeout()
    }

    /// The earliest instant the quorum's leader may expire this session (docs/lease.md): the
    /// send instant of the newest request a read/write server answered *and* the leader is
    /// known to have heard of, plus the session timeout it was sent under. With
    /// [`SessionConfig::relay_bound`] unset, every answer of a read/write server counts at
    /// once (a standalone server, or a caller that trusts the server it talks to).
    /// Notifications never move it, and a late reply moves it only to its own request's send
    /// instant. It never moves back within a session.
    ///
    /// `None` until the leader has vouched for a request, and once the session has ended. It
    /// stays put while disconnected: the leader's clock runs on.
    pub fn lease_deadline(&self) -> Option<Instant> {
        if self.state.is_terminal() {
            return None;
        }
        self.lease.deadline()
    }

    /// The highest zxid seen in a normal reply.
    #[cfg(any(test, feature = "unstable"))]
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Why the SASL exchange failed on the client's side (no credentials, a server that
    /// could not prove itself), once the session has ended with
    /// [`SessionState::AuthFailed`] for that reason; `None` when the server refused.
    pub fn sasl_failure(&self) -> Option<&str> {
        self.sasl_failure.as_deref()
    }

    /// Whether the driver should open a transport now.
    pub fn wants_connection(&self) -> bool {
        self.conn == Conn::Idle && !self.state.is_terminal()
    }

    /// How long one connection attempt may take (TCP connect plus handshake).
    pub fn connect_timeout(&self) -> Duration {
        self.timers.connect_timeout(&self.config, self.negotiated)
    }

    /// Requests written and awaiting their reply (pings and SetWatches included).
    pub fn in_flight(&self) -> usize {
        self.pending.len() + self.pending_auth.len()
    }

    /// Requests submitted but not written yet.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// Local watchers registered.
    pub fn watch_count(&self) -> usize {
        self.watches.len()
    }

    /// The receive buffer, for reading from the transport into it directly.
    pub fn recv_buffer(&mut self) -> &mut BytesMut {
        self.decoder.buffer_mut()
    }

    // ===== outputs =====

    /// Everything to write to the transport, as one buffer.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        (!self.transmit.is_empty()).then(|| self.transmit.split().freeze())
    }

    /// The next output event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    ///
    /// Changes after any input; call it again after every `handle_*` or command.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = match self.conn {
            Conn::Idle if self.state.is_terminal() => None,
            Conn::Idle => self.timers.expiry_at(self.negotiated, self.session_id),
            Conn::AwaitingConnectResponse => self.timers.connect_deadline(self.connect_timeout()),
            Conn::Authenticating { .. } => self
                .timers
                .read_deadline(&self.periods, self.oldest_unanswered()),
            Conn::Open => {
                let read = self
                    .timers
                    .read_deadline(&self.periods, self.oldest_unanswered());
                let ping = self.timers.ping_at(&self.periods);
                read.into_iter().chain(ping).chain(self.vouch_at()).min()
            }
        };
        self.deadlines.next().into_iter().chain(timer).min()
    }

    // ===== commands =====

    /// Submits a request; its reply comes later as an [`Event::Reply`] with the returned id.
    ///
    /// Requests are written in submission order, and only once a handshake has completed.
    /// A request that can never be sent is answered at once (in `poll_event`): after the
    /// session ended ([`Error::SessionExpired`], [`Error::AuthFailed`], [`Error::Closed`]),
    /// when bound to a session that is not the current one ([`Error::SessionExpired`]), or
    /// when larger than the server's limit ([`Error::RequestTooLarge`]).
    pub fn submit(&mut self, now: Instant, request: Request) -> RequestId {
        let id = self.next_request_id();
        let len = 8 + request.body.len();
        if let Some(err) = self.refusal() {
            self.answer(id, Err(err));
        } else if request.session.is_some_and(|s| s != self.session_id) {
            // Bound to a session another has replaced (or is replacing: a renewal under
            // way has none yet): it can never run (docs/renewal.md).
            self.answer(id, Err(Error::SessionExpired));
        } else if len > self.config.max_request_len {
            self.answer(
                id,
                Err(Error::RequestTooLarge {
                    len,
                    max: self.config.max_request_len,
                }),
            );
        } else if request.deadline.is_some_and(|d| d <= now) {
            self.answer(id, Err(Error::Timeout));
        } else {
            if let Some(at) = request.deadline {
                self.deadlines.insert(id, at);
            }
            self.queued.push_back(Queued { id, request });
            self.flush(now);
        }
        id
    }

    /// Forgets a request whose caller stopped waiting: no reply event will come for it.
    ///
    /// A request not yet written is removed and never sent; one already written still gets
    /// its reply from the server, which is then discarded. Returns whether the request was
    /// still unanswered.
    pub fn cancel(&mut self, id: RequestId) -> bool {
        self.deadlines.remove(id);
        if let Some(at) = self.queued.iter().position(|q| q.id == id) {
            self.queued.remove(at);
            return true;
        }
        if let Some(at) = self.closers.iter().position(|c| *c == id) {
            self.closers.remove(at);
            return true;
        }
        self.pending.iter_mut().any(|p| p.abandon(id))
            || self.pending_auth.iter_mut().any(|p| p.abandon(id))
    }

    /// Drops a local watcher (its server registration stays until it fires).
    pub fn remove_watcher(&mut self, watcher: WatcherId) -> bool {
        self.watches.remove(watcher)
    }

    /// Whether `watcher` is still registered: a persistent watcher whose event was a session
    /// renewal's marker (state `Expired`) goes on; one the session has let go of has ended.
    pub fn is_watching(&self, watcher: WatcherId) -> bool {
        self.watches.contains(watcher)
    }

    /// Closes the session: sends closeSession and ends in [`SessionState::Closed`] when the
    /// server confirms or the connection drops. Without a connection, closes at once (the
    /// server then expires the session after its timeout).
    pub fn close(&mut self, now: Instant) -> RequestId {
        let id = self.next_request_id();
        if self.closing.is_some() && !self.state.is_terminal() {
            // A close is under way: this one returns when it has ended the session too.
            self.closers.push(id);
        } else if let Some(err) = self.refusal() {
            self.answer(id, Err(err));
        } else if self.conn == Conn::Open {
            self.closing = Some(Closing::Requested(id));
            let request = Request::new(OpCode::CloseSession, Bytes::new());
            self.queued.push_back(Queued { id, request });
            self.flush(now);
        } else {
            self.end(SessionState::Closed, Error::Closed);
            self.answer(
                id,
                Ok(Reply {
                    zxid: self.last_zxid,
                    body: Bytes::new(),
                }),
            );
        }
        id
    }

    // ===== internals: state =====

    fn next_request_id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId(self.next_id)
    }

    /// The send instant of the oldest request still awaiting its answer.
    fn oldest_unanswered(&self) -> Option<Instant> {
        let pipeline = self.pending.front().map(|p| p.sent);
        let auth = self.pending_auth.front().map(|p| p.sent);
        pipeline.into_iter().chain(auth).min()
    }

    /// Sets the negotiated timeout (`None`: not known, the requested one applies) and the
    /// periods that follow from it. Vouches are paced on the lease's timeout, the smallest
    /// of the session: a reconnect that negotiated more must not let the lease lag further.
    fn set_negotiated(&mut self, negotiated: Option<Duration>) {
        self.negotiated = negotiated;
        let timeout = negotiated.unwrap_or(self.config.session_timeout);
        let lease = self.lease.timeout().map_or(timeout, |t| t.min(timeout));
        self.periods = Periods::of(timeout, lease);
    }

    fn answer(&mut self, id: RequestId, result: Result<Reply, Error>) {
        self.deadlines.remove(id);
        self.events.push_back(Event::Reply { id, result });
    }

    fn set_state(&mut self, state: SessionState) {
        if self.state != state {
            self.state = state;
            self.events.push_back(Event::State(state));
        }
    }

    /// Test hook: start xids just below the wrap.
    #[cfg(any(test, fuzzing, feature = "fuzzing"))]
    pub(crate) fn set_next_xid(&mut self, xid: i32) {
        self.xids = Xids::starting_at(xid);
    }
}
