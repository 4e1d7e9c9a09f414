//! The error types: [`Error`], which every operation returns, and the types its variants
//! carry.

use std::fmt;
use std::sync::Arc;

pub use crate::connect_string::InvalidConnectString;
pub use crate::jute::{DecodeError, DecodeErrorKind, FrameError};
pub use crate::path::InvalidPath;
use crate::proto::ErrorCode;

/// Everything a zkwire operation can fail with.
///
/// Server error codes map one to one onto variants (`KeeperException.Code`); the rest are
/// raised by the client. [`is_retryable`](Self::is_retryable) says whether the same request
/// may succeed if sent again, [`is_terminal`](Self::is_terminal) whether the session is over.
/// Match on variants, never on the message: its wording may change.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::{CreateMode, CreateOptions, Error};
///
/// let persistent = CreateOptions::persistent();
/// match client.create("/config", b"v1", &persistent).await {
///     Ok(_) | Err(Error::NodeExists) => {} // there now, whoever created it
///     Err(e) if e.is_retryable() => eprintln!("try again: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ----- server: this request -----
    /// The node does not exist.
    #[error("node does not exist")]
    NoNode,
    /// The node already exists.
    #[error("node already exists")]
    NodeExists,
    /// The expected version did not match.
    #[error("version does not match")]
    BadVersion,
    /// The node has children.
    #[error("node has children")]
    NotEmpty,
    /// Ephemeral nodes cannot have children.
    #[error("ephemeral nodes cannot have children")]
    NoChildrenForEphemerals,
    /// The ACL does not allow the operation for this session: the node's, or for a create
    /// or delete its parent's.
    #[error("not authorized by the ACL (a create or delete is checked against the parent's)")]
    NoAuth,
    /// The ACL is invalid (e.g. empty, or `auth` with no authenticated ids).
    #[error("invalid ACL")]
    InvalidAcl,
    /// The server rejected the arguments (flags, TTL, path).
    #[error("bad arguments")]
    BadArguments,
    /// No watch matched a removeWatches or checkWatches request.
    #[error("no such watcher")]
    NoWatcher,
    /// A write was sent to a read-only server.
    #[error("the server is read-only")]
    NotReadOnly,
    /// An ephemeral node cannot be created on a local session.
    #[error("ephemeral node on a local session")]
    EphemeralOnLocalSession,
    /// The operation is not implemented or not enabled on the server (e.g. TTL nodes).
    #[error("operation not implemented or not enabled on the server")]
    Unimplemented,
    /// The server could not decode or handle the request.
    #[error("the server could not handle the request (marshalling error)")]
    MarshallingError,
    /// A multi op was rolled back because another op failed.
    #[error("rolled back with the failed multi")]
    RuntimeInconsistency,
    /// The server found inconsistent data.
    #[error("data inconsistency")]
    DataInconsistency,
    /// A hard quota would be exceeded.
    #[error("quota exceeded")]
    QuotaExceeded,
    /// The server is overloaded; retry with backoff.
    #[error("throttled by the server")]
    Throttled,
    /// Reconfiguration is disabled on the server.
    #[error("reconfiguration is disabled")]
    ReconfigDisabled,
    /// Another reconfiguration is in progress.
    #[error("reconfiguration in progress")]
    ReconfigInProgress,
    /// No quorum of the new configuration is connected.
    #[error("new configuration has no quorum")]
    NewConfigNoQuorum,
    /// The server reported an operation timeout.
    #[error("operation timed out on the server")]
    OperationTimeout,
    /// The session moved to another server.
    #[error("session moved to another server")]
    SessionMoved,
    /// The server reported an unknown session.
    #[error("unknown session")]
    UnknownSession,
    /// The server reported a request timeout.
    #[error("request timed out on the server")]
    RequestTimeout,
    /// The session is closed because the server requires SASL authentication.
    #[error("the server requires SASL authentication")]
    SessionClosedRequireSaslAuth,
    /// Another server error code (including range markers and codes newer than this client).
    #[error("server error code {0}")]
    Server(i32),

    /// A multi transaction failed at op `index` with `error`; none of its ops was applied.
    #[error("multi op {index} failed: {error}")]
    MultiFailed {
        /// Index of the failing op.
        index: usize,
        /// Why it failed.
        error: Box<Self>,
    },

    // ----- session -----
    /// The connection was lost before the reply arrived: the request may or may not have been
    /// applied. Reads can be retried; retry writes only if they are idempotent.
    #[error("connection lost; the request may or may not have been applied")]
    ConnectionLoss,
    /// The session expired; it is over, and so is this client.
    #[error("session expired")]
    SessionExpired,
    /// Authentication failed; the session is over.
    #[error("authentication failed")]
    AuthFailed,
    /// The client was closed.
    #[error("client closed")]
    Closed,
    /// The request's deadline passed before its reply arrived.
    #[error("request deadline passed")]
    Timeout,

    // ----- the caller -----
    /// The path is not a valid ZooKeeper path.
    #[error(transparent)]
    InvalidPath(#[from] InvalidPath),
    /// The connect string cannot be parsed.
    #[error(transparent)]
    InvalidConnectString(#[from] InvalidConnectString),
    /// The encoded request is larger than the server accepts (`jute.maxbuffer`); sending it
    /// would only make the server drop the connection.
    #[error("request of {len} bytes exceeds the {max}-byte limit")]
    RequestTooLarge {
        /// Encoded size of the request.
        len: usize,
        /// The limit in force.
        max: usize,
    },
    /// The arguments are invalid before anything is sent (e.g. a TTL mode without a TTL).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),

    // ----- the server misbehaved, or the network -----
    /// The server sent something that violates the protocol; the connection was dropped
    /// (but for [`ProtocolError::UnexpectedMultiResult`], a reply that came whole: the multi
    /// was applied, and the error is not retryable).
    #[error("protocol violation: {0}")]
    Protocol(ProtocolError),
    /// An I/O error on the connection.
    #[error("I/O error: {0}")]
    Io(IoError),

    // ----- the configuration, client's or server's -----
    /// No server could be connected to, for a reason that retrying will not fix: every host
    /// of the connect string failed the same way (a certificate refused, TLS spoken to a
    /// plaintext port or the reverse, SASL refused before the session started).
    #[error(transparent)]
    Connect(ConnectError),
    /// The reply to this request is larger than the client accepts
    /// ([`ClientBuilder::with_max_frame_len`](crate::ClientBuilder::with_max_frame_len)),
    /// and was thrown away unread (the connection goes on, unless the frame was not a
    /// well-formed reply to this request). Asking again gets the same reply: raise the
    /// limit (up to the servers' `jute.maxbuffer`), or ask for less (a node with fewer
    /// children, less data).
    #[error("reply of {len} bytes exceeds the {max}-byte frame limit")]
    ReplyTooLarge {
        /// The length the reply announced.
        len: usize,
        /// The limit in force.
        max: usize,
    },
}

impl Error {
    /// The error for a non-zero reply code.
    pub(crate) fn from_code(code: ErrorCode) -> Self {
        match code {
            ErrorCode::NoNode => Self::NoNode,
            ErrorCode::NodeExists => Self::NodeExists,
            ErrorCode::BadVersion => Self::BadVersion,
            ErrorCode::NotEmpty => Self::NotEmpty,
            ErrorCode::NoChildrenForEphemerals => Self::NoChildrenForEphemerals,
            ErrorCode::NoAuth => Self::NoAuth,
            ErrorCode::InvalidAcl => Self::InvalidAcl,
            ErrorCode::BadArguments => Self::BadArguments,
            ErrorCode::NoWatcher => Self::NoWatcher,
            ErrorCode::NotReadOnly => Self::NotReadOnly,
            ErrorCode::EphemeralOnLocalSession => Self::EphemeralOnLocalSession,
            ErrorCode::Unimplemented => Self::Unimplemented,
            ErrorCode::MarshallingError => Self::MarshallingError,
            ErrorCode::RuntimeInconsistency => Self::RuntimeInconsistency,
            ErrorCode::DataInconsistency => Self::DataInconsistency,
            ErrorCode::QuotaExceeded => Self::QuotaExceeded,
            ErrorCode::Throttled => Self::Throttled,
            ErrorCode::ReconfigDisabled => Self::ReconfigDisabled,
            ErrorCode::ReconfigInProgress => Self::ReconfigInProgress,
            ErrorCode::NewConfigNoQuorum => Self::NewConfigNoQuorum,
            ErrorCode::OperationTimeout => Self::OperationTimeout,
            ErrorCode::SessionMoved => Self::SessionMoved,
            ErrorCode::UnknownSession => Self::UnknownSession,
            ErrorCode::RequestTimeout => Self::RequestTimeout,
            ErrorCode::SessionClosedRequireSaslAuth => Self::SessionClosedRequireSaslAuth,
            ErrorCode::ConnectionLoss => Self::ConnectionLoss,
            ErrorCode::SessionExpired => Self::SessionExpired,
            ErrorCode::AuthFailed => Self::AuthFailed,
            other => Self::Server(other.as_i32()),
        }
    }

    /// Whether sending the same request again may succeed.
    ///
    /// True for connection loss (and `SessionMoved`: the server closes that connection,
    /// and the client reconnects),
    /// throttling, timeouts, and a connect that reached no server
    /// ([`ConnectError::Unreachable`]: servers down or restarting); not for the other
    /// [`ConnectError`]s, which are configuration. A retried write after
    /// [`ConnectionLoss`](Self::ConnectionLoss) may find its own earlier effect (a create
    /// then fails with `NodeExists`); only idempotent requests should be retried blindly.
    ///
    /// ```
    /// use zkwire::Error;
    /// use zkwire::error::ConnectError;
    /// assert!(Error::ConnectionLoss.is_retryable());
    /// assert!(!Error::NoNode.is_retryable()); // the same request gets the same answer
    /// // No server answered: they may be restarting. A missing chroot stays missing.
    /// assert!(Error::Connect(ConnectError::Unreachable { failures: vec![] }).is_retryable());
    /// let chroot = "/app".to_owned();
    /// assert!(!Error::Connect(ConnectError::NoChroot { chroot }).is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Connect(ConnectError::Unreachable { .. })
                | Self::ConnectionLoss
                | Self::Timeout
                | Self::Throttled
                | Self::OperationTimeout
                | Self::RequestTimeout
                | Self::ReconfigInProgress
                | Self::SessionMoved
                | Self::Io(_)
        ) || matches!(self, Self::Protocol(e) if e.drops_the_connection())
    }

    /// Whether the session is over: no request on this client can succeed any more.
    ///
    /// ```
    /// use zkwire::Error;
    /// assert!(Error::SessionExpired.is_terminal()); // make a new client
    /// assert!(!Error::ConnectionLoss.is_terminal()); // the session lives on
    /// ```
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::SessionExpired
                | Self::AuthFailed
                | Self::Closed
                | Self::SessionClosedRequireSaslAuth
        )
    }
}

/// Why connecting failed: the client's or the server's configuration is wrong, which
/// retrying will not fix, or ([`Unreachable`](Self::Unreachable)) no server answered, which a
/// later try may ([`Error::is_retryable`]).
///
/// [`ClientBuilder::connect`](crate::ClientBuilder::connect) returns it (as
/// [`Error::Connect`]) once every host of the connect string has failed with one; a running
/// client keeps retrying, with backoff, and reports it through
/// [`Client::connect_error`](crate::Client::connect_error). A custom [`Connect`](crate::Connect)
/// implementation can report one by returning it inside an [`std::io::Error`]
/// (`io::Error::other(ConnectError::…)`).
///
/// ```no_run
/// # async fn run() {
/// use zkwire::error::ConnectError;
/// use zkwire::Error;
///
/// match zkwire::Client::connect("zk1:2181,zk2:2181/app").await {
///     Ok(client) => println!("session {:#x}", client.session_id()),
///     Err(Error::Connect(ConnectError::NoChroot { chroot })) => eprintln!("no {chroot} yet"),
///     Err(Error::Connect(ConnectError::NotTls { host })) => eprintln!("{host} expects TLS"),
///     Err(e) => eprintln!("cannot connect: {e}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The server's certificate was refused: signed by a CA not in the trust roots, issued
    /// for another name than the host connected to, expired, or otherwise invalid.
    #[error("{host}: the server's TLS certificate was refused: {reason}")]
    TlsCertificate {
        /// The host as written in the connect string.
        host: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The server ended the TLS handshake with an alert: typically it requires a client
    /// certificate and none (or one it does not trust) was offered.
    #[error("{host}: the server refused the TLS handshake: {reason}")]
    TlsRefused {
        /// The host as written in the connect string.
        host: String,
        /// The alert or error, as rustls reports it.
        reason: String,
    },
    /// The server closed the connection in the middle of the TLS handshake, which a
    /// plaintext ZooKeeper port does: it reads the TLS hello as an oversized frame.
    #[error(
        "{host}: the server closed the connection during the TLS handshake; is this a \
         plaintext port (clientPort) rather than a TLS one (secureClientPort)?"
    )]
    NotTls {
        /// The host as written in the connect string.
        host: String,
    },
    /// The server closed the connection, without a byte, before answering the ZooKeeper
    /// handshake, and a plaintext probe confirmed it does not speak plaintext: a TLS-only
    /// port (secureClientPort) reached without TLS.
    #[error(
        "{host}: the server closed the connection without answering the plaintext \
         handshake; is this a TLS port (secureClientPort)? Connect with TLS"
    )]
    NotPlaintext {
        /// The host as written in the connect string.
        host: String,
    },
    /// The TLS settings cannot be used (no trust roots, a key that does not match).
    #[error("unusable TLS configuration: {reason}")]
    InvalidTlsConfig {
        /// What is wrong.
        reason: String,
    },
    /// No server could be connected to: every host's latest attempt failed, with these
    /// causes (in the connect string's order). [`ClientBuilder::connect`] returns it when
    /// no handshake completed within the session timeout and some attempt failed, or, with
    /// [`ClientBuilder::with_fail_fast`], as soon as every host has been refused or failed
    /// to resolve once.
    ///
    /// [`ClientBuilder::connect`]: crate::ClientBuilder::connect
    /// [`ClientBuilder::with_fail_fast`]: crate::ClientBuilder::with_fail_fast
    #[error("no ZooKeeper server could be reached: {}", list_failures(.failures))]
    Unreachable {
        /// The latest failure of each host tried.
        failures: Vec<HostFailure>,
    },
    /// The chroot of the connect string does not exist on the server: every path under it
    /// would fail with `NoNode`. Create it first (from a client without the chroot).
    #[error("the chroot {chroot} does not exist")]
    NoChroot {
        /// The chroot, as the connect string gives it.
        chroot: String,
    },
    /// The SASL exchange failed on the client's side: no credentials for the mechanism (no
    /// Kerberos ticket or keytab, a server principal the realm does not know), or the server's
    /// messages were malformed or failed their proof. The session has ended
    /// ([`SessionState::AuthFailed`](crate::SessionState::AuthFailed)); when the server
    /// itself refuses the credentials the error is [`Error::AuthFailed`] instead.
    #[error("{host}: SASL authentication failed: {reason}")]
    Sasl {
        /// The host as written in the connect string.
        host: String,
        /// What went wrong.
        reason: String,
    },
}

/// Why one host could not be connected to, the last time it was tried; see
/// [`ConnectError::Unreachable`].
///
/// ```no_run
/// # async fn run() {
/// use zkwire::error::ConnectError;
/// use zkwire::Error;
///
/// if let Err(Error::Connect(ConnectError::Unreachable { failures })) =
///     zkwire::Client::connect("zk1:2181,zk2:2181").await
/// {
///     for failure in &failures {
///         eprintln!("{}: {:?} ({})", failure.host, failure.cause, failure.detail);
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{host}: {detail}")]
#[non_exhaustive]
pub struct HostFailure {
    /// The host as written in the connect string (`host:port`).
    pub host: String,
    /// The kind of failure.
    pub cause: FailureCause,
    /// What the operating system, the resolver or the TLS library said.
    pub detail: String,
}

/// The kind of a [`HostFailure`].
///
/// ```no_run
/// # async fn run() {
/// use zkwire::error::{ConnectError, FailureCause};
/// use zkwire::Error;
///
/// if let Err(Error::Connect(ConnectError::Unreachable { failures })) =
///     zkwire::Client::connect("zk1:2181,zk2:2181").await
/// {
///     if failures.iter().all(|f| f.cause == FailureCause::Unresolvable) {
///         eprintln!("none of the host names resolves: check the connect string");
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureCause {
    /// Nothing listens on the port (connection refused).
    Refused,
    /// The host name does not resolve.
    Unresolvable,
    /// No answer within the connect timeout (TCP connect, TLS or the ZooKeeper handshake).
    TimedOut,
    /// The server closed the connection before the handshake completed (a server that is
    /// not serving yet, or one that refuses the session).
    Closed,
    /// Anything else: see the detail.
    Other,
}

/// The failures of [`ConnectError::Unreachable`], one per host, `; `-separated.
fn list_failures(failures: &[HostFailure]) -> String {
    let all: Vec<String> = failures.iter().map(ToString::to_string).collect();
    all.join("; ")
}

/// How the server violated the protocol.
///
/// ```
/// # fn report(error: &zkwire::Error) {
/// use zkwire::error::ProtocolError;
/// use zkwire::Error;
///
/// // The client has dropped the connection and reconnects; worth a warning in the logs.
/// if let Error::Protocol(ProtocolError::Frame(e)) = error {
///     eprintln!("a server sent an unacceptable frame: {e}");
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A frame or record could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A frame length was negative or over the cap.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A reply's xid did not match the oldest request in flight.
    #[error("reply xid {got} does not match the oldest request in flight (xid {expected:?})")]
    XidMismatch {
        /// The xid of the oldest request in flight, if any.
        expected: Option<i32>,
        /// The xid received.
        got: i32,
    },
    /// A reply arrived for an auth packet that was never sent.
    #[error("unexpected auth reply")]
    UnexpectedAuthReply,
    /// A multi reply held a result of a kind its request cannot produce, or not one result
    /// per op. The reply came whole, so the server applied the multi (if it wrote anything):
    /// not retryable, and the connection stays.
    #[error("unexpected results in a multi reply")]
    UnexpectedMultiResult,
}

impl ProtocolError {
    /// Whether the connection was dropped for it, failing the request with it: then, as for
    /// [`Error::ConnectionLoss`], the request may or may not have been applied, and asking
    /// again may succeed. A reply that came whole but made no sense
    /// ([`UnexpectedMultiResult`](Self::UnexpectedMultiResult)) was applied.
    fn drops_the_connection(&self) -> bool {
        !matches!(self, Self::UnexpectedMultiResult)
    }
}

/// An I/O error, shareable so that one failure can be reported to many waiters.
///
/// ```
/// # fn report(error: &zkwire::Error) {
/// use zkwire::Error;
///
/// if let Error::Io(e) = error {
///     eprintln!("connection failed: {e}");
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct IoError(Arc<std::io::Error>);

impl IoError {
    /// The underlying error.
    ///
    /// ```
    /// # fn report(error: &zkwire::Error) {
    /// use std::io::ErrorKind;
    /// use zkwire::Error;
    ///
    /// if let Error::Io(e) = error {
    ///     if e.get_ref().kind() == ErrorKind::ConnectionReset {
    ///         eprintln!("the server reset the connection");
    ///     }
    /// }
    /// # }
    /// ```
    pub fn get_ref(&self) -> &std::io::Error {
        &self.0
    }
}

impl From<std::io::Error> for IoError {
    fn from(e: std::io::Error) -> Self {
        Self(Arc::new(e))
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind() == other.0.kind()
    }
}

impl Eq for IoError {}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_variants_and_unknown_codes_survive() {
        assert_eq!(Error::from_code(ErrorCode::NoNode), Error::NoNode);
        assert_eq!(
            Error::from_code(ErrorCode::SessionExpired),
            Error::SessionExpired
        );
        assert_eq!(
            Error::from_code(ErrorCode::from_i32(-999)),
            Error::Server(-999)
        );
    }

    #[test]
    fn classification() {
        assert!(Error::ConnectionLoss.is_retryable());
        assert!(!Error::NodeExists.is_retryable());
        assert!(Error::SessionExpired.is_terminal());
        assert!(!Error::ConnectionLoss.is_terminal());
    }
}
