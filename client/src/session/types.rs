//! Values that cross the session's boundary: requests in; replies, watch events and state
//! changes out.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::error::Error;
use crate::proto::{EventType, KeeperState, OpCode, WatcherType};

/// Identifies a submitted request; its reply carries the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Identifies one local watcher (a one-shot watch or a persistent watch stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatcherId(pub u64);

/// A map keyed by [`RequestId`] or [`WatcherId`]: both are counters we hand out ourselves,
/// so no one can choose keys that collide, and SipHash (the default, which resists that)
/// is wasted on them (a measurable share of a request's CPU).
pub(crate) type IdMap<K, V> = std::collections::HashMap<K, V, BuildIdHasher>;

/// Builds [`IdHasher`]s.
pub(crate) type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;

/// Hashes one `u64` id by a multiplication (Fibonacci hashing), which spreads consecutive
/// ids over the whole word, high bits included (the hash table takes its tag from those).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only ids reach this hasher, through `write_u64`; fold anything else in anyway.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = (self.0 ^ id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The kinds of watch a session keeps, one server registration per (path, kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WatchKind {
    /// One-shot, set by getData, or by exists on an existing node.
    Data,
    /// One-shot, set by exists on a missing node.
    Exist,
    /// One-shot, set by getChildren.
    Child,
    /// Set by addWatch (persistent); stays after firing.
    Persistent,
    /// Set by addWatch (persistent recursive); fires for the whole subtree and stays.
    PersistentRecursive,
}

impl WatchKind {
    /// Whether the watch stays after it fires.
    #[cfg(any(test, feature = "unstable"))]
    pub fn is_persistent(self) -> bool {
        matches!(self, Self::Persistent | Self::PersistentRecursive)
    }
}

/// What a request does to the local watch registry when it succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Nothing.
    None,
    /// Register `watcher` on `path` (server path) as `kind`. For exists, `kind` is
    /// [`WatchKind::Data`] and becomes [`WatchKind::Exist`] if the node is missing.
    Watch {
        /// Server path.
        path: String,
        /// Kind of watch.
        kind: WatchKind,
        /// The local watcher to notify.
        watcher: WatcherId,
    },
    /// Remove every local watcher of `watcher_type` on `path` (removeWatches).
    RemoveWatches {
        /// Server path.
        path: String,
        /// Which watches.
        watcher_type: WatcherType,
    },
}

/// A request to submit: the op and its already-encoded record.
#[derive(Debug, Clone)]
pub struct Request {
    /// The op code.
    pub op: OpCode,
    /// The encoded request record (empty for ops without one).
    pub body: Bytes,
    /// What the request does to the watch registry on success.
    pub effect: Effect,
    /// When to give up waiting; `None` waits as long as the session lives.
    pub deadline: Option<Instant>,
    /// The session it is for, `None` for any: a request still unwritten when another
    /// session is current (a renewal took its session's place) fails with
    /// [`Error::SessionExpired`](crate::Error::SessionExpired) rather than run there.
    pub session: Option<i64>,
}

impl Request {
    /// A request with no watch effect, no deadline, for any session.
    pub fn new(op: OpCode, body: Bytes) -> Self {
        Self {
            op,
            body,
            effect: Effect::None,
            deadline: None,
            session: None,
        }
    }
}

/// A successful reply: the header's zxid and the undecoded reply record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The server's last processed zxid when it replied.
    pub zxid: i64,
    /// The reply record's bytes, a zero-copy slice of the received frame.
    pub body: Bytes,
}

/// A watch notification for one watcher.
///
/// The session reports server paths; [`Client`](crate::Client) watchers report the path as
/// the application sees it (chroot stripped).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// let (_children, _stat, watcher) = client.get_children_and_watch("/jobs").await?;
/// let event = watcher.await;
/// println!("{:?} on {} (state {:?})", event.event_type, event.path, event.state);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    /// What happened; [`EventType::None`] when the session ended before the watch fired.
    pub event_type: EventType,
    /// `SyncConnected` for node events; `Expired`, `AuthFailed` or `Closed` when the session
    /// ended.
    pub state: KeeperState,
    /// The node's path (empty for session events).
    pub path: String,
    /// The zxid of the change (servers 3.9+), -1 when unknown.
    pub zxid: i64,
}

/// The session's state, as reported on the state stream.
///
/// ```no_run
/// # fn run(client: zkwire::Client) {
/// use zkwire::SessionState;
///
/// match client.state() {
///     SessionState::Connected => println!("connected"),
///     SessionState::ConnectedReadOnly => println!("connected to a read-only server"),
///     SessionState::Connecting | SessionState::Disconnected => println!("requests wait"),
///     state => println!("the session is over: {state:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionState {
    /// Not connected yet, or looking for a server.
    Connecting,
    /// Connected to a read/write server.
    Connected,
    /// Connected to a read-only server: writes fail with `NotReadOnly`.
    ConnectedReadOnly,
    /// The connection dropped; the session may still be alive and is being resumed.
    Disconnected,
    /// The session expired (terminal).
    Expired,
    /// Authentication failed (terminal).
    AuthFailed,
    /// The client was closed (terminal).
    Closed,
}

impl SessionState {
    /// Whether the session is over for good.
    ///
    /// ```
    /// use zkwire::SessionState;
    /// assert!(SessionState::Expired.is_terminal());
    /// assert!(!SessionState::Disconnected.is_terminal()); // the session may be resumed
    /// ```
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Expired | Self::AuthFailed | Self::Closed)
    }

    /// Whether requests can be sent now.
    ///
    /// ```
    /// use zkwire::SessionState;
    /// assert!(SessionState::ConnectedReadOnly.is_connected());
    /// assert!(!SessionState::Disconnected.is_connected());
    /// ```
    pub fn is_connected(self) -> bool {
        matches!(self, Self::Connected | Self::ConnectedReadOnly)
    }
}

/// Why the session dropped a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// No ConnectResponse within the connect timeout.
    ConnectTimeout,
    /// Nothing received within the read timeout (2/3 of the session timeout).
    ReadTimeout,
    /// The server violated the protocol.
    Protocol(crate::error::ProtocolError),
    /// The server refused or ended the session (expired, auth failed, closed).
    SessionEnded,
}

/// Something for the driver to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The answer to a submitted request; every request gets exactly one.
    Reply {
        /// The request.
        id: RequestId,
        /// Its outcome.
        result: Result<Reply, Error>,
    },
    /// A watch fired for `watcher`. One-shot watchers are removed after this event; so is
    /// any watcher whose event has state `Expired`, `AuthFailed` or `Closed`.
    Watch {
        /// The watcher.
        watcher: WatcherId,
        /// The event.
        event: WatchedEvent,
    },
    /// The session state changed.
    State(SessionState),
    /// The session gave up on the current connection: the driver must close the transport.
    DropConnection(DropReason),
}

/// Session parameters fixed at construction. `Debug` redacts the password and credentials.
#[derive(Clone)]
pub struct SessionConfig {
    /// The session timeout to request.
    pub session_timeout: Duration,
    /// How long one connection attempt may take until the ConnectResponse; `None` means
    /// session timeout / host count (as the Java client), at most half the session timeout.
    pub connect_timeout: Option<Duration>,
    /// Number of hosts in the connect string (for the default connect timeout).
    pub host_count: usize,
    /// Whether a read-only server may serve the session.
    pub read_only: bool,
    /// The largest request payload the server accepts (its `jute.maxbuffer`).
    pub max_request_len: usize,
    /// The largest reply payload accepted from the server.
    pub max_frame_len: usize,
    /// An existing session to resume: (session id, password).
    pub resume: Option<(i64, Bytes)>,
    /// Credentials sent right after every ConnectRequest, before any request: encoded
    /// `AuthPacket`s. A refusal is terminal ([`SessionState::AuthFailed`]).
    pub auth: Vec<Bytes>,
    /// A SASL mechanism to authenticate with on every connection, before anything else.
    /// A refusal is terminal ([`SessionState::AuthFailed`]).
    pub sasl: Option<std::sync::Arc<dyn super::sasl::SaslMechanism>>,
    /// After an expiry, start a new session instead of ending (see `docs/renewal.md`).
    pub renew_on_expiry: bool,
    /// How long a follower may take to pass on to the leader that we were heard, and a
    /// leader cut off from its quorum may outlast a new one: two ticks of the ensemble's
    /// clock (docs/lease.md). With it the lease counts an answer only once the leader has
    /// vouched for it (a `sync` at least this long after the answer); `None` counts every
    /// answer of a read/write server at once.
    pub relay_bound: Option<Duration>,
}

impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionConfig")
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("host_count", &self.host_count)
            .field("read_only", &self.read_only)
            .field("max_request_len", &self.max_request_len)
            .field("max_frame_len", &self.max_frame_len)
            .field(
                "resume",
                &self
                    .resume
                    .as_ref()
                    .map(|(id, _)| format!("{id:#x} <redacted>")),
            )
            .field("auth", &format_args!("[{} redacted]", self.auth.len()))
            .field("sasl", &self.sasl.as_ref().map(|m| m.name()))
            .field("renew_on_expiry", &self.renew_on_expiry)
            .field("relay_bound", &self.relay_bound)
            .finish()
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            session_timeout: Duration::from_secs(30),
            connect_timeout: None,
            host_count: 1,
            read_only: false,
            max_request_len: crate::jute::JUTE_MAX_BUFFER,
            max_frame_len: crate::jute::DEFAULT_MAX_FRAME_LEN,
            resume: None,
            auth: Vec::new(),
            sasl: None,
            renew_on_expiry: false,
            relay_bound: None,
        }
    }
}
