//! [`Mutex`]: Curator's `InterProcessMutex` layout and rules.

use std::time::Duration;

use tokio::time::Instant;
use zkwire::Client;

use crate::error::LockError;
use crate::hold::Hold;
use crate::internals::{acquire, deadline_after, Contest, Dir, Outcome};
use crate::options::LockOptions;
use crate::sequence::{exclusive, MUTEX_MARKERS};

/// A distributed mutex on a ZooKeeper path, interoperable with Curator's `InterProcessMutex`
/// (and LeaderSelector) on the same path.
///
/// Each acquire creates `path/_c_<uuid>-lock-<seq>` (EPHEMERAL_SEQUENTIAL, missing parents as
/// containers); the node whose key (the text after the last `lock-`) sorts first holds the
/// lock, and every other contender watches only its immediate predecessor.
///
/// The value is cheap to clone; every `lock()` call is a separate contender, so tasks of one
/// process contend with each other through ZooKeeper. It is not reentrant: calling `lock()`
/// while holding a guard of the same path waits for yourself (use
/// [`lock_timeout`](Self::lock_timeout) if unsure).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire_recipes::{LockError, Mutex};
///
/// let mutex = Mutex::new(client, "/locks/reports");
/// match mutex.lock_timeout(Duration::from_secs(5)).await {
///     Ok(guard) => {
///         // The critical section; `guard.lost()` says when to stop trusting it.
///         guard.release().await?;
///     }
///     Err(LockError::Timeout) => println!("busy elsewhere; try later"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
///
/// # What can go wrong
/// - **Lost locks.** An ephemeral node is only as good as its session. A GC pause, a partition
///   or a killed session ends the hold while your code still runs: await
///   [`MutexGuard::lost`] next to the critical section, and use
///   [`fencing_token`](MutexGuard::fencing_token) or
///   [`multi_fenced`](MutexGuard::multi_fenced) wherever a stale holder could do damage.
/// - **Session expiry while waiting** fails the acquire with
///   [`zkwire::Error::SessionExpired`] (the client is over; make a new one).
/// - **Connection loss** is retried inside the acquire; a create whose reply was lost is
///   recovered by guid (only if our session owns the node found).
/// - **Foreign children or a wrapped sequence** in the directory fail the acquire
///   ([`LockError::ForeignChild`], [`LockError::SequenceWrapped`]).
#[derive(Debug, Clone)]
pub struct Mutex {
    dir: Dir,
}

impl Mutex {
    /// A mutex on `path` with default [`LockOptions`]. Nothing is sent yet; an invalid path
    /// fails the first acquire.
    pub fn new(client: Client, path: impl Into<String>) -> Self {
        Self::with_options(client, path, LockOptions::default())
    }

    /// A mutex on `path` with `options` (node data, ACLs, foreign-child policy, grace).
    pub fn with_options(client: Client, path: impl Into<String>, options: LockOptions) -> Self {
        Self {
            dir: Dir {
                client,
                path: path.into(),
                options,
            },
        }
    }

    /// The lock directory.
    pub fn path(&self) -> &str {
        &self.dir.path
    }

    /// Waits until the lock is ours.
    ///
    /// # Errors
    /// [`LockError::Client`] with a non-retryable error (session over, ACL, invalid path);
    /// [`LockError::ForeignChild`]; [`LockError::SequenceWrapped`]. Retryable errors are
    /// retried for as long as the session lives.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future removes its node (in the background, retried until
    /// it succeeds or the session ends), so `select!` and `timeout` may be used around it.
    pub async fn lock(&self) -> Result<MutexGuard, LockError> {
        self.acquire(true, None).await?.ok_or(LockError::Timeout)
    }

    /// Takes the lock if no one else holds or waits for it, without waiting; `Ok(None)`
    /// otherwise (our node is removed before returning, when connected).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<MutexGuard>, LockError> {
        self.acquire(false, None).await
    }

    /// As [`lock`](Self::lock), giving up after `timeout`: one monotonic deadline for the
    /// whole call (create, retries and waits). On timeout our node is removed (in the
    /// foreground for up to 500 ms, then in the background) and [`LockError::Timeout`]
    /// returned.
    ///
    /// # Errors
    /// [`LockError::Timeout`]; as [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<MutexGuard, LockError> {
        self.acquire(true, deadline_after(timeout))
            .await?
            .ok_or(LockError::Timeout)
    }

    async fn acquire(
        &self,
        blocking: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<MutexGuard>, LockError> {
        let contest = Contest {
            marker: MUTEX_MARKERS[0],
            sort_markers: MUTEX_MARKERS,
            predicate: exclusive,
            tie: None,
        };
        match acquire(&self.dir, &contest, blocking, deadline).await? {
            Outcome::Held(node) => {
                let hold = Hold::new(self.dir.client.clone(), node, &self.dir.options);
                Ok(Some(MutexGuard { hold }))
            }
            Outcome::Busy => Ok(None),
        }
    }
}

/// Proof of holding a [`Mutex`], until released or dropped.
///
/// Dropping it deletes the lock node in the background (retried until it succeeds or the
/// session ends); [`release`](Self::release) does it in the foreground and reports how it
/// went.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct MutexGuard {
    hold: Hold,
}

impl MutexGuard {
    crate::hold::guard_methods!(
        "The fencing token: the `czxid` of our lock node. Strictly increasing across the \
         successive holders of the lock (unlike the sequence suffix, which restarts when a \
         container directory is recreated and wraps at 2^31). Pass it to the resource you \
         protect and have it refuse tokens older than the newest it has seen."
    );
}
