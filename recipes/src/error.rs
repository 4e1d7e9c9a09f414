//! The recipes' error type and the reason a hold was lost.

use std::time::Duration;

use zkwire::SessionState;

/// Everything acquiring, holding or releasing a lock can fail with.
///
/// Match on variants, never on the message. [`is_retryable`](Self::is_retryable) says whether
/// calling the same acquire again may succeed.
///
/// ```no_run
/// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire_recipes::LockError;
///
/// match mutex.lock_timeout(Duration::from_secs(5)).await {
///     Ok(guard) => guard.release().await?,
///     Err(e) if e.is_retryable() => eprintln!("not this time ({e}); trying later"),
///     Err(LockError::ForeignChild { name }) => eprintln!("remove {name} from the lock directory"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// A ZooKeeper request failed (session expired, client closed, ACL denied, invalid path…).
    #[error(transparent)]
    Client(#[from] zkwire::Error),
    /// The deadline of [`lock_timeout`](crate::Mutex::lock_timeout) (or of a timed read/write
    /// acquire) passed before the lock was granted. The contender node was removed.
    #[error("lock not acquired before the deadline")]
    Timeout,
    /// The hold ended before it was released: see [`LostReason`]. Returned by `release()` and
    /// by the fenced multi when the lock node is gone.
    #[error("the lock was lost: {0}")]
    Lost(LostReason),
    /// A read→write upgrade was attempted. In Curator's read/write layout the writer would
    /// queue behind its own reader and wait forever, so it is refused; release the read lock
    /// and then take the write lock.
    #[error("read-to-write upgrade refused: it would deadlock on our own read node")]
    UpgradeRefused,
    /// The lock directory's sequence counter (the parent's 32-bit `cversion`) has wrapped:
    /// `name` carries a negative suffix. Curator's string ordering (and ours, which must match
    /// it) puts such nodes in the wrong order, so no grant is safe. The directory must be
    /// emptied and recreated (a container directory is reaped once empty, which resets the
    /// counter).
    #[error("the sequence counter of the lock directory wrapped ({name})")]
    SequenceWrapped {
        /// The child with a negative sequence suffix.
        name: String,
    },
    /// A child of the lock directory is not a contender of this recipe (no recognised marker
    /// followed by a sequence suffix). Curator would count it as a contender and order it by
    /// its whole name; this crate refuses by default
    /// ([`ForeignChildPolicy`](crate::ForeignChildPolicy)).
    #[error("foreign child {name:?} in the lock directory")]
    ForeignChild {
        /// The child's name.
        name: String,
    },
    /// A [`Semaphore`](crate::Semaphore) acquire asked for more leases than the limit allows
    /// (checked before queueing and again while waiting): it could never be granted. A
    /// Curator peer would wait forever instead, holding the semaphore's internal mutex.
    #[error("{requested} leases requested, but the semaphore allows at most {max}")]
    TooManyLeases {
        /// Leases asked for in one acquire.
        requested: usize,
        /// The limit when the request was checked.
        max: u32,
    },
    /// The semaphore's fixed limit differs from the value of its SharedCount node
    /// ([`SemaphoreLimit::FixedChecked`](crate::SemaphoreLimit::FixedChecked)): the
    /// participants disagree on the limit, and would over-grant.
    #[error("semaphore limit mismatch: configured {configured}, shared count {shared}")]
    LimitMismatch {
        /// The limit this participant was configured with.
        configured: u32,
        /// The limit found in the SharedCount node.
        shared: u32,
    },
    /// The semaphore's SharedCount node does not exist
    /// ([`SemaphoreLimit::SharedCount`](crate::SemaphoreLimit::SharedCount) never creates
    /// it: seed it first, as Curator's `SharedCount` does).
    #[error("the semaphore's SharedCount node {path} does not exist")]
    SharedCountMissing {
        /// The SharedCount node's path.
        path: String,
    },
    /// The semaphore's SharedCount node does not hold a Curator `SharedCount`: a 4-byte
    /// big-endian, non-negative integer.
    #[error("the SharedCount node {path} does not hold a 4-byte non-negative count ({data:02x?})")]
    BadSharedCount {
        /// The SharedCount node's path.
        path: String,
        /// What it holds.
        data: Vec<u8>,
    },
    /// The recipe was closed (or never started): a [`LeaderLatch`](crate::LeaderLatch)
    /// waited on after [`close`](crate::LeaderLatch::close), a
    /// [`LeaderElection`](crate::LeaderElection) stopped.
    #[error("the recipe is closed")]
    Closed,
    /// The session's lease cannot keep a hold: on a healthy session the lease may fall
    /// `staleness` behind the session timeout (two server ticks, for the leader to vouch for
    /// what our server heard, plus the ping interval: [`zkwire::Client::lease_staleness`]),
    /// and the hold needs `margin` more, so a hold would be lost as soon as it was granted.
    /// Raise the session timeout, or tell the client the ensemble's real `tickTime`
    /// (`ClientBuilder::with_server_tick`) if it is below the 2 s assumed. Checked before
    /// the contender node is created, once the session timeout is known (docs/lease.md,
    /// "What the session timeout must cover").
    #[error(
        "a hold cannot be kept with a session timeout of {session_timeout:?}: the lease may \
         lag {staleness:?} behind it (two server ticks plus the ping interval) and the hold \
         needs a {margin:?} margin; raise the session timeout, or set the ensemble's tickTime \
         with ClientBuilder::with_server_tick"
    )]
    LeaseTooShort {
        /// The negotiated session timeout.
        session_timeout: Duration,
        /// How far the lease may lag behind it on a healthy session.
        staleness: Duration,
        /// The hold's lease margin.
        margin: Duration,
    },
}

impl LockError {
    /// Whether trying the same acquire again may succeed: retryable client errors (connection
    /// loss, timeouts, throttling), [`Timeout`](Self::Timeout) and [`Lost`](Self::Lost)
    /// (unless the session is over). Terminal session errors, refused upgrades, wrapped
    /// sequences, foreign children and semaphore limit problems need someone to act first.
    ///
    /// ```
    /// use zkwire_recipes::LockError;
    /// assert!(LockError::Timeout.is_retryable());
    /// assert!(LockError::Client(zkwire::Error::ConnectionLoss).is_retryable());
    /// assert!(!LockError::Client(zkwire::Error::SessionExpired).is_retryable());
    /// assert!(!LockError::UpgradeRefused.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Client(e) => e.is_retryable(),
            Self::Timeout => true,
            Self::Lost(reason) => !matches!(reason, LostReason::SessionEnded(_)),
            Self::UpgradeRefused
            | Self::SequenceWrapped { .. }
            | Self::ForeignChild { .. }
            | Self::TooManyLeases { .. }
            | Self::LimitMismatch { .. }
            | Self::SharedCountMissing { .. }
            | Self::BadSharedCount { .. }
            | Self::LeaseTooShort { .. }
            | Self::Closed => false,
        }
    }
}

/// Why a hold can no longer be trusted ([`lost`](crate::MutexGuard::lost)).
///
/// ```no_run
/// # async fn run(guard: zkwire_recipes::MutexGuard) {
/// use zkwire_recipes::LostReason;
///
/// match guard.lost().await {
///     LostReason::SessionEnded(state) => eprintln!("session over ({state:?}): make a new client"),
///     LostReason::Unacknowledged(silent) => eprintln!("no word from the quorum for {silent:?}"),
///     reason => eprintln!("lock lost: {reason}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The session ended: `Expired`, `Closed` or `AuthFailed`. Its ephemeral nodes are gone.
    SessionEnded(SessionState),
    /// Our lock node was deleted (by someone else, or by an administrator).
    NodeDeleted,
    /// Our lock node's data changed (e.g. a Curator-style revocation request).
    NodeChanged,
    /// The quorum's leader is known to have heard of none of our requests sent in the last
    /// `.0`: the session's lease is within its margin of ending
    /// ([`lease_margin`](crate::lease_margin)), and the leader may expire the session, and
    /// hand the lock to someone else, from the lease deadline on. Connection state plays no
    /// part: bytes received (notifications, late replies, answers of a server cut off from
    /// the quorum) prove nothing about what the leader heard from us.
    Unacknowledged(Duration),
    /// The client stayed disconnected for this long, past the configured grace
    /// ([`LockOptions::with_disconnect_grace`](crate::LockOptions::with_disconnect_grace)).
    Disconnected(Duration),
    /// The guard was released or dropped.
    Released,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SessionEnded(state) => write!(f, "session ended ({state:?})"),
            Self::NodeDeleted => f.write_str("lock node deleted"),
            Self::NodeChanged => f.write_str("lock node data changed"),
            Self::Unacknowledged(d) => write!(
                f,
                "the quorum's leader has not confirmed this session for {} ms (ZooKeeper \
                 unreachable, or our server cut off from the quorum): it may expire",
                d.as_millis()
            ),
            Self::Disconnected(d) => write!(f, "disconnected for {} ms", d.as_millis()),
            Self::Released => f.write_str("released"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_classification() {
        assert!(LockError::Client(zkwire::Error::ConnectionLoss).is_retryable());
        assert!(!LockError::Client(zkwire::Error::SessionExpired).is_retryable());
        assert!(LockError::Timeout.is_retryable());
        assert!(LockError::Lost(LostReason::NodeDeleted).is_retryable());
        assert!(!LockError::Lost(LostReason::SessionEnded(SessionState::Expired)).is_retryable());
        assert!(!LockError::UpgradeRefused.is_retryable());
        assert!(!LockError::Closed.is_retryable());
        assert!(!LockError::SequenceWrapped { name: "x".into() }.is_retryable());
        assert!(!LockError::ForeignChild { name: "x".into() }.is_retryable());
        assert!(!LockError::TooManyLeases {
            requested: 3,
            max: 2
        }
        .is_retryable());
        assert!(!LockError::LimitMismatch {
            configured: 3,
            shared: 2
        }
        .is_retryable());
        assert!(!LockError::SharedCountMissing { path: "/c".into() }.is_retryable());
        assert!(!LockError::BadSharedCount {
            path: "/c".into(),
            data: vec![1]
        }
        .is_retryable());
    }
}
