//! The sans-IO session: the ZooKeeper client protocol as a state machine.
//!
//! No sockets, no clock, no runtime: bytes and the current time go in, bytes to send, the
//! next deadline and events come out. A driver (see `crate::driver`) owns one [`Session`] and
//! one transport; tests drive it with a virtual clock and scripted server frames.

mod lease;
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

use bytes::{BufMut, Bytes, BytesMut};

pub use sasl::{SaslExchange, SaslMechanism};
pub use types::{
    DropReason, Effect, Event, Reply, Request, RequestId, SessionConfig, SessionState, WatchKind,
    WatchedEvent, WatcherId,
};
pub use watches::SET_WATCHES_MAX_PATH_BYTES;

pub(crate) use timers::ping_interval;

pub(crate) use types::IdMap;

use self::lease::Lease;
use self::pending::{Pending, PendingAuth, Queued, Target, Xids};
use self::timers::{Deadlines, Timers};
use self::watches::{SetWatchesBatch, Watches};
use crate::error::{Error, ProtocolError};
use crate::jute::{encode_frame, Decode, Encode, FrameDecoder, Reader};
use crate::proto::{
    ConnectRequest, ConnectResponse, ErrorCode, EventType, KeeperState, OpCode, ReplyHeader,
    RequestHeader, SaslToken, SyncRequest, WatcherEvent, AUTH_XID, NOTIFICATION_XID, PING_XID,
};

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
            .unwrap_or((0, Bytes::from_static(&[0; 16])));
        let decoder = FrameDecoder::new(config.max_frame_len);
        let relay = config.relay_bound;
        let auths = config.auth.clone();
        let seen_rw = config.resume.is_some();
        Self {
            config,
            state: SessionState::Connecting,
            conn: Conn::Idle,
            session_id,
            passwd,
            negotiated: None,
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
            Conn::Authenticating { .. } => {
                let timeout = self.negotiated_or_requested();
                self.timers.read_deadline(timeout, self.oldest_unanswered())
            }
            Conn::Open => {
                let timeout = self.negotiated_or_requested();
                let read = self.timers.read_deadline(timeout, self.oldest_unanswered());
                let ping = self.timers.ping_at(timeout);
                read.into_iter()
                    .chain(ping)
                    .chain(self.vouch_at(timeout))
                    .min()
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
    /// or when larger than the server's limit ([`Error::RequestTooLarge`]).
    pub fn submit(&mut self, now: Instant, request: Request) -> RequestId {
        let id = self.next_request_id();
        let len = 8 + request.body.len();
        if let Some(err) = self.refusal() {
            self.answer(id, Err(err));
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
        if let Some(err) = self.refusal() {
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

    // ===== inputs =====

    /// A transport is up: writes the handshake (ConnectRequest, then auth replays and
    /// SetWatches, or, with SASL, nothing more until the exchange completes).
    ///
    /// User requests are held until the ConnectResponse arrives (and the SASL exchange has
    /// completed), so that an "expired" reply can never be lost behind them.
    ///
    /// `server_host` is the host the transport was opened to, as the connect string names it
    /// (for a SASL mechanism that authenticates the server by name, such as Kerberos).
    pub fn handle_connected(&mut self, now: Instant, server_host: &str) {
        if !self.wants_connection() {
            return;
        }
        self.server_host.clear();
        self.server_host.push_str(server_host);
        self.conn = Conn::AwaitingConnectResponse;
        self.decoder.clear();
        self.transmit.clear();
        self.timers.on_connect(now);
        self.write_connect_request();
        if self.config.sasl.is_none() {
            self.write_restore(now);
        }
    }

    /// Writes what a new connection owes the session before user requests: the credentials
    /// added so far, and the watches to restore.
    fn write_restore(&mut self, now: Instant) {
        for body in self.auths.clone() {
            self.write_frame(AUTH_XID, OpCode::Auth, &body);
            let replay = PendingAuth {
                id: None,
                body,
                replay: false,
                sent: now,
            };
            self.pending_auth.push_back(replay);
        }
        for batch in self.watches.set_watches_batches(self.last_zxid) {
            let xid = self.xids.next();
            let (op, body) = match batch {
                SetWatchesBatch::V1(w) => (OpCode::SetWatches, w.to_bytes()),
                SetWatchesBatch::V2(w) => (OpCode::SetWatches2, w.to_bytes()),
            };
            self.write_frame(xid, op, &body);
            self.pending.push_back(Pending {
                xid,
                op,
                target: Target::SetWatches,
                sent: now,
            });
        }
    }

    /// Bytes received from the transport.
    pub fn handle_input(&mut self, now: Instant, data: &[u8]) {
        self.decoder.push(data);
        self.handle_received(now);
    }

    /// Processes bytes placed in [`recv_buffer`](Self::recv_buffer).
    pub fn handle_received(&mut self, now: Instant) {
        if self.conn == Conn::Idle {
            self.decoder.clear();
            return;
        }
        self.timers.on_receive(now);
        loop {
            let frame = match self.decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(e) => return self.drop_connection(DropReason::Protocol(e.into())),
            };
            if let Err(e) = self.handle_frame(now, frame) {
                return self.drop_connection(DropReason::Protocol(e));
            }
            if self.conn == Conn::Idle {
                return;
            }
        }
    }

    /// The transport closed or failed.
    pub fn handle_disconnected(&mut self, _now: Instant) {
        self.lose_connection();
    }

    /// Fires due timers: request deadlines, connect and read timeouts, pings, expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire_deadlines(now);
        match self.conn {
            Conn::Idle => {
                if self
                    .timers
                    .expiry_at(self.negotiated, self.session_id)
                    .is_some_and(|t| t <= now)
                    && !self.state.is_terminal()
                {
                    self.expire();
                }
            }
            Conn::AwaitingConnectResponse => {
                let deadline = self.timers.connect_deadline(self.connect_timeout());
                if deadline.is_some_and(|d| d <= now) {
                    self.drop_connection(DropReason::ConnectTimeout);
                }
            }
            Conn::Authenticating { .. } => {
                let timeout = self.negotiated_or_requested();
                let read_deadline = self.timers.read_deadline(timeout, self.oldest_unanswered());
                if read_deadline.is_some_and(|d| d <= now) {
                    self.drop_connection(DropReason::ReadTimeout);
                }
            }
            Conn::Open => self.handle_open_timers(now),
        }
    }

    // ===== internals: frames in =====

    fn handle_frame(&mut self, now: Instant, frame: Bytes) -> Result<(), ProtocolError> {
        if self.conn == Conn::AwaitingConnectResponse {
            let response = ConnectResponse::decode_exact(&frame)?;
            self.handle_connect_response(now, response);
            return Ok(());
        }
        let mut r = Reader::new(&frame);
        let header = r.read::<ReplyHeader>()?;
        let body = frame.slice(r.position()..);
        match header.xid {
            NOTIFICATION_XID => self.handle_notification(header, &body),
            AUTH_XID => self.handle_auth_reply(header),
            _ => self.handle_pipeline_reply(now, header, body),
        }
    }

    fn handle_connect_response(&mut self, now: Instant, response: ConnectResponse) {
        if response.is_expired() {
            self.expire();
            return;
        }
        // We asked for a new session (id 0), or were given another one.
        let created =
            !self.seen_rw || self.session_id == 0 || self.session_id != response.session_id;
        self.session_id = response.session_id;
        self.passwd = response.passwd;
        self.negotiated = Some(Duration::from_millis(u64::from(
            response.timeout.unsigned_abs(),
        )));
        let read_only = response.read_only == Some(true);
        self.seen_rw |= !read_only;
        if !read_only {
            let sent = self.timers.on_handshake();
            let timeout = self.negotiated_or_requested();
            self.lease.touched(sent, now, timeout);
            if created {
                // A new session is made by the leader, and a quorum agrees to it, after our
                // ConnectRequest was sent (docs/lease.md, "A new session").
                self.lease.vouched_directly(sent, timeout);
            }
        }
        match self.config.sasl.clone() {
            Some(mechanism) => self.start_sasl(now, &*mechanism, read_only),
            None => self.open(now, read_only),
        }
    }

    /// The connection is ready for user requests.
    fn open(&mut self, now: Instant, read_only: bool) {
        self.conn = Conn::Open;
        self.set_state(if read_only {
            SessionState::ConnectedReadOnly
        } else {
            SessionState::Connected
        });
        self.flush(now);
    }

    fn start_sasl(&mut self, now: Instant, mechanism: &dyn SaslMechanism, read_only: bool) {
        let mut exchange = mechanism.start(&self.server_host);
        match exchange.initial_response() {
            Ok(token) => {
                self.conn = Conn::Authenticating { read_only };
                self.sasl = Some(exchange);
                self.write_sasl(now, token);
            }
            Err(reason) => {
                tracing::warn!(mechanism = mechanism.name(), %reason, "SASL cannot start");
                self.sasl_failure = Some(reason);
                self.end(SessionState::AuthFailed, Error::AuthFailed);
            }
        }
    }

    fn write_sasl(&mut self, now: Instant, token: Vec<u8>) {
        let xid = self.xids.next();
        let body = SaslToken {
            token: Some(token.into()),
        }
        .to_bytes();
        self.write_frame(xid, OpCode::Sasl, &body);
        self.pending.push_back(Pending {
            xid,
            op: OpCode::Sasl,
            target: Target::Sasl,
            sent: now,
        });
    }

    /// The server's answer to a SASL step: refusal is terminal (retrying the same
    /// credentials cannot succeed), success opens the connection.
    fn handle_sasl_reply(&mut self, now: Instant, header: ReplyHeader, body: &Bytes) {
        let Conn::Authenticating { read_only } = self.conn else {
            return;
        };
        if header.err != ErrorCode::Ok {
            tracing::warn!(
                code = header.err.as_i32(),
                "the server refused SASL authentication"
            );
            return self.end(SessionState::AuthFailed, Error::AuthFailed);
        }
        let token = SaslToken::decode_exact(body)
            .ok()
            .and_then(|t| t.token)
            .unwrap_or_default();
        let Some(exchange) = self.sasl.as_mut() else {
            return;
        };
        match exchange.step(&token) {
            Ok(Some(next)) => self.write_sasl(now, next),
            Ok(None) => {
                self.sasl = None;
                self.write_restore(now);
                self.open(now, read_only);
            }
            Err(reason) => {
                tracing::warn!(%reason, "SASL authentication failed on the client's side");
                self.sasl_failure = Some(reason);
                self.end(SessionState::AuthFailed, Error::AuthFailed);
            }
        }
    }

    fn handle_notification(
        &mut self,
        header: ReplyHeader,
        body: &Bytes,
    ) -> Result<(), ProtocolError> {
        let event = WatcherEvent::decode_exact(body)?;
        // Servers only ever send SyncConnected here; the other states are client-local. Any
        // other state comes from a broken or hostile server: ignore the notification, as one
        // of an unknown type, rather than hand watchers a state that ends them (a persistent
        // watch's stream ends on a non-SyncConnected event).
        if event.state != KeeperState::SyncConnected {
            return Ok(());
        }
        for watcher in self.watches.fire(event.event_type, &event.path) {
            let event = WatchedEvent {
                event_type: event.event_type,
                state: event.state,
                path: event.path.clone(),
                zxid: header.zxid,
            };
            self.events.push_back(Event::Watch { watcher, event });
        }
        Ok(())
    }

    fn handle_auth_reply(&mut self, header: ReplyHeader) -> Result<(), ProtocolError> {
        let auth = self
            .pending_auth
            .pop_front()
            .ok_or(ProtocolError::UnexpectedAuthReply)?;
        if header.err == ErrorCode::AuthFailed {
            if let Some(id) = auth.id {
                self.answer(id, Err(Error::AuthFailed));
            }
            self.end(SessionState::AuthFailed, Error::AuthFailed);
            return Ok(());
        }
        let result = reply_result(header, Bytes::new());
        if result.is_ok() && auth.replay {
            // Replayed on every reconnect, before anything else.
            self.auths.push(auth.body);
        }
        if let Some(id) = auth.id {
            self.answer(id, result);
        }
        Ok(())
    }

    fn handle_pipeline_reply(
        &mut self,
        now: Instant,
        header: ReplyHeader,
        body: Bytes,
    ) -> Result<(), ProtocolError> {
        let expected = self.pending.front().map(|p| (p.xid, p.op));
        let op = match expected {
            Some((xid, op)) if xid == header.xid => op,
            _ => {
                return Err(ProtocolError::XidMismatch {
                    expected: expected.map(|e| e.0),
                    got: header.xid,
                })
            }
        };
        // Checked while the request is still in flight, so that a malformed reply fails it
        // with ConnectionLoss along with everything else when the connection drops.
        if header.err == ErrorCode::Ok {
            reply::check_reply_body(op, &body)?;
        }
        let Some(pending) = self.pending.pop_front() else {
            return Err(ProtocolError::XidMismatch {
                expected: None,
                got: header.xid,
            });
        };
        if header.zxid > 0 && pending.op != OpCode::Ping {
            self.last_zxid = self.last_zxid.max(header.zxid);
        }
        self.note_answer(now, &pending, header.err);
        if header.err == ErrorCode::SessionClosedRequireSaslAuth
            && !matches!(pending.target, Target::Sasl)
        {
            // The server requires SASL and closes the connection: no request of this session
            // can succeed without it, on any connection.
            tracing::warn!("the server requires SASL authentication");
            if let Some(id) = pending.waiting_id() {
                self.answer(id, Err(Error::SessionClosedRequireSaslAuth));
            }
            self.end(
                SessionState::AuthFailed,
                Error::SessionClosedRequireSaslAuth,
            );
            return Ok(());
        }
        match pending.target {
            Target::Ping => self.timers.on_ping_reply(),
            Target::Vouch => self.lease.on_vouch_done(),
            Target::SetWatches => {}
            Target::Sasl => self.handle_sasl_reply(now, header, &body),
            Target::User {
                id,
                effect,
                abandoned,
                ..
            } => {
                let result = reply_result(header, body);
                if !abandoned {
                    self.apply_effect(pending.op, &effect, &result);
                    self.answer(id, result);
                }
                if pending.op == OpCode::CloseSession {
                    self.end(SessionState::Closed, Error::Closed);
                }
            }
        }
        Ok(())
    }

    fn apply_effect(&mut self, op: OpCode, effect: &Effect, result: &Result<Reply, Error>) {
        match (effect, result) {
            (
                Effect::Watch {
                    path,
                    kind,
                    watcher,
                },
                Ok(_),
            ) => self.watches.add(path, *kind, *watcher),
            // exists on a missing node leaves an exist watch (DataTree.statNode).
            (Effect::Watch { path, watcher, .. }, Err(Error::NoNode)) if op == OpCode::Exists => {
                self.watches.add(path, WatchKind::Exist, *watcher);
            }
            (Effect::RemoveWatches { path, watcher_type }, Ok(_)) => {
                for (watcher, event_type) in self.watches.remove_matching(path, *watcher_type) {
                    let event = WatchedEvent {
                        event_type,
                        state: KeeperState::SyncConnected,
                        path: path.clone(),
                        zxid: -1,
                    };
                    self.events.push_back(Event::Watch { watcher, event });
                }
            }
            _ => {}
        }
    }

    // ===== internals: frames out =====

    fn flush(&mut self, now: Instant) {
        if self.conn != Conn::Open {
            return;
        }
        while let Some(Queued { id, request }) = self.queued.pop_front() {
            // A driver may handle input (e.g. the ConnectResponse) before a timer that is
            // already due: a request whose deadline passed must still never be written.
            if request.deadline.is_some_and(|d| d <= now) {
                self.answer(id, Err(Error::Timeout));
                continue;
            }
            if request.op == OpCode::Auth {
                self.write_frame(AUTH_XID, OpCode::Auth, &request.body);
                let auth = PendingAuth {
                    id: Some(id),
                    body: request.body,
                    replay: true,
                    sent: now,
                };
                self.pending_auth.push_back(auth);
                continue;
            }
            let xid = self.xids.next();
            self.write_frame(xid, request.op, &request.body);
            let target = Target::User {
                id,
                effect: request.effect,
                abandoned: false,
            };
            self.pending.push_back(Pending {
                xid,
                op: request.op,
                target,
                sent: now,
            });
        }
    }

    fn write_connect_request(&mut self) {
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            timeout: i32::try_from(self.config.session_timeout.as_millis()).unwrap_or(i32::MAX),
            // A session made by a read-only server is local to it: a read/write server would
            // refuse it as expired. Until a read/write server has served us, ask for a new
            // session, as the Java client does (`seenRwServerBefore`).
            session_id: if self.seen_rw { self.session_id } else { 0 },
            passwd: if self.seen_rw {
                self.passwd.clone()
            } else {
                Bytes::from_static(&[0; 16])
            },
            read_only: self.config.read_only,
        };
        encode_frame(&mut self.transmit, |buf| request.encode(buf));
    }

    fn write_frame(&mut self, xid: i32, op: OpCode, body: &[u8]) {
        // One reservation per frame (length, header, body), not one per put.
        self.transmit.reserve(12 + body.len());
        encode_frame(&mut self.transmit, |buf| {
            RequestHeader { xid, op }.encode(buf);
            buf.put_slice(body);
        });
    }

    fn handle_open_timers(&mut self, now: Instant) {
        let timeout = self.negotiated_or_requested();
        let read_deadline = self.timers.read_deadline(timeout, self.oldest_unanswered());
        if read_deadline.is_some_and(|d| d <= now) {
            self.drop_connection(DropReason::ReadTimeout);
        } else if self.timers.ping_at(timeout).is_some_and(|d| d <= now) {
            self.write_frame(PING_XID, OpCode::Ping, &[]);
            self.pending.push_back(Pending {
                xid: PING_XID,
                op: OpCode::Ping,
                target: Target::Ping,
                sent: now,
            });
            self.timers.on_ping_sent();
        } else if self.vouch_at(timeout).is_some_and(|d| d <= now) {
            self.write_vouch(now);
        }
    }

    /// When our next `sync` is due, on a connection to a read/write server.
    fn vouch_at(&self, timeout: Duration) -> Option<Instant> {
        if self.state != SessionState::Connected {
            return None;
        }
        self.lease.vouch_at(timers::vouch_interval(timeout))
    }

    /// Sends a `sync` of the root: the leader answers it only while the server we talk to
    /// follows it, which vouches for our earlier requests (docs/lease.md).
    fn write_vouch(&mut self, now: Instant) {
        let body = SyncRequest {
            path: "/".to_owned(),
        }
        .to_bytes();
        let xid = self.xids.next();
        self.write_frame(xid, OpCode::Sync, &body);
        self.pending.push_back(Pending {
            xid,
            op: OpCode::Sync,
            target: Target::Vouch,
            sent: now,
        });
        self.lease.on_vouch_sent(now);
    }

    /// What an answer tells about the session's lease. Answers come in order, so the server
    /// read this request, and recorded the session as alive, no sooner than we sent it; SASL
    /// steps (like auth packets) are handled outside that path, and a read-only server's
    /// record is not the quorum's.
    fn note_answer(&mut self, now: Instant, pending: &Pending, err: ErrorCode) {
        if self.state == SessionState::ConnectedReadOnly || matches!(pending.target, Target::Sasl) {
            return;
        }
        self.timers.acknowledge(pending.sent);
        let timeout = self.negotiated_or_requested();
        self.lease.touched(pending.sent, now, timeout);
        if err == ErrorCode::Ok && vouches(pending.op) {
            self.lease.vouched_by(pending.sent);
        }
    }

    fn expire_deadlines(&mut self, now: Instant) {
        while let Some(id) = self.deadlines.pop_due(now) {
            if let Some(at) = self.queued.iter().position(|q| q.id == id) {
                self.queued.remove(at);
            } else {
                // Written: the reply, when it comes, only keeps the FIFO in step.
                let _ = self.pending.iter_mut().any(|p| p.abandon(id))
                    || self.pending_auth.iter_mut().any(|p| p.abandon(id));
            }
            self.answer(id, Err(Error::Timeout));
        }
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

    fn negotiated_or_requested(&self) -> Duration {
        self.negotiated.unwrap_or(self.config.session_timeout)
    }

    /// Why a new request would be refused, if it would.
    fn refusal(&self) -> Option<Error> {
        match self.state {
            SessionState::Expired => Some(Error::SessionExpired),
            SessionState::AuthFailed => Some(Error::AuthFailed),
            SessionState::Closed => Some(Error::Closed),
            _ if self.closing.is_some() => Some(Error::Closed),
            _ => None,
        }
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

    /// Drops the current connection on the session's own initiative.
    fn drop_connection(&mut self, reason: DropReason) {
        self.conn_to_idle(Some(reason));
        self.after_connection_lost();
    }

    /// The transport went away under us.
    fn lose_connection(&mut self) {
        if self.conn == Conn::Idle {
            return;
        }
        self.conn_to_idle(None);
        self.after_connection_lost();
    }

    fn conn_to_idle(&mut self, reason: Option<DropReason>) {
        if self.conn == Conn::Idle {
            return;
        }
        self.conn = Conn::Idle;
        self.sasl = None;
        self.decoder.clear();
        self.transmit.clear();
        self.fail_in_flight(&Error::ConnectionLoss);
        if let Some(reason) = reason {
            self.events.push_back(Event::DropConnection(reason));
        }
    }

    fn after_connection_lost(&mut self) {
        if let Some(closing) = self.closing {
            // The server closes the socket right after confirming closeSession; either way
            // the session is over for us.
            self.end(SessionState::Closed, Error::Closed);
            if let Closing::CutOff(id) = closing {
                self.answer(
                    id,
                    Ok(Reply {
                        zxid: self.last_zxid,
                        body: Bytes::new(),
                    }),
                );
            }
            return;
        }
        if self.state.is_connected() {
            self.set_state(SessionState::Disconnected);
        }
        self.timers.on_disconnect();
        self.lease.on_disconnect();
    }

    fn fail_in_flight(&mut self, err: &Error) {
        for pending in std::mem::take(&mut self.pending) {
            let Some(id) = pending.waiting_id() else {
                continue;
            };
            if pending.op == OpCode::CloseSession && *err == Error::ConnectionLoss {
                // A close cut off by the connection still ends the session, which is what
                // the caller asked for: it succeeds (answered when the session ends).
                self.closing = Some(Closing::CutOff(id));
                continue;
            }
            self.answer(id, Err(err.clone()));
        }
        for auth in std::mem::take(&mut self.pending_auth) {
            if let Some(id) = auth.id {
                self.answer(id, Err(err.clone()));
            }
        }
    }

    /// The session expired: it ends, or, when configured to renew, a new one begins.
    fn expire(&mut self) {
        if self.config.renew_on_expiry && self.closing.is_none() {
            self.renew();
        } else {
            self.end(SessionState::Expired, Error::SessionExpired);
        }
    }

    /// Replaces an expired session with a new one (`docs/renewal.md`): what the old session
    /// sent is answered `SessionExpired`, one-shot watchers end with an `Expired` event,
    /// persistent ones get that event as a marker and stay, to be registered again on the
    /// new session with the credentials; requests not yet sent wait for it. The state goes
    /// `Expired`, then `Connecting`, then `Connected` with the new session's id.
    fn renew(&mut self) {
        self.fail_in_flight(&Error::SessionExpired);
        let reason = if self.conn == Conn::Idle {
            None
        } else {
            Some(DropReason::SessionEnded)
        };
        self.conn_to_idle(reason);
        let marker = WatchedEvent {
            event_type: EventType::None,
            state: KeeperState::Expired,
            path: String::new(),
            zxid: -1,
        };
        let (ended, kept) = self.watches.drain_one_shot();
        for watcher in ended.into_iter().chain(kept) {
            let event = marker.clone();
            self.events.push_back(Event::Watch { watcher, event });
        }
        self.session_id = 0;
        self.passwd = Bytes::from_static(&[0; 16]);
        self.negotiated = None;
        self.seen_rw = false;
        self.lease.forget();
        self.set_state(SessionState::Expired);
        self.set_state(SessionState::Connecting);
    }

    /// Ends the session for good: every waiter and watcher is told, once.
    fn end(&mut self, state: SessionState, err: Error) {
        if self.state.is_terminal() {
            return;
        }
        // Fail what is in flight with the terminal error *before* dropping the transport,
        // which would answer it with ConnectionLoss: after AuthFailed those requests can
        // never be answered on this session, and callers must not retry them as if the
        // connection had merely dropped (Java's conLossPacket reports AUTHFAILED too).
        self.fail_in_flight(&err);
        let reason = if self.conn == Conn::Idle {
            None
        } else {
            Some(DropReason::SessionEnded)
        };
        self.conn_to_idle(reason);
        for Queued { id, .. } in std::mem::take(&mut self.queued) {
            self.answer(id, Err(err.clone()));
        }
        let keeper_state = match state {
            SessionState::Expired => KeeperState::Expired,
            SessionState::AuthFailed => KeeperState::AuthFailed,
            _ => KeeperState::Closed,
        };
        for watcher in self.watches.drain() {
            let event = WatchedEvent {
                event_type: EventType::None,
                state: keeper_state,
                path: String::new(),
                zxid: -1,
            };
            self.events.push_back(Event::Watch { watcher, event });
        }
        self.set_state(state);
    }

    /// Test hook: start xids just below the wrap.
    #[cfg(any(test, fuzzing, feature = "fuzzing"))]
    pub(crate) fn set_next_xid(&mut self, xid: i32) {
        self.xids = Xids::starting_at(xid);
    }
}

fn reply_result(header: ReplyHeader, body: Bytes) -> Result<Reply, Error> {
    match header.err {
        ErrorCode::Ok => Ok(Reply {
            zxid: header.zxid,
            body,
        }),
        code => Err(Error::from_code(code)),
    }
}

/// Whether a successful answer to `op` shows that the quorum's leader handled the request
/// after we sent it: a `sync` is answered only once the leader has, and a write only once a
/// quorum has committed what the leader made of it (docs/lease.md).
fn vouches(op: OpCode) -> bool {
    matches!(
        op,
        OpCode::Sync
            | OpCode::Create
            | OpCode::Create2
            | OpCode::CreateContainer
            | OpCode::CreateTtl
            | OpCode::Delete
            | OpCode::SetData
            | OpCode::SetAcl
            | OpCode::Multi
    )
}
