//! [`Mutex`]: Curator's `InterProcessMutex` layout and rules.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use zkwire::{Client, Op, OpResult};

use crate::error::{LockError, LostReason};
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
    /// Whether the hold is still trusted: not lost (see [`lost`](Self::lost)).
    pub fn is_held(&self) -> bool {
        self.hold.is_held()
    }

    /// Resolves when the hold can no longer be trusted: the session's lease is within its
    /// margin of ending without renewal (see [`trusted_until`](Self::trusted_until)), the
    /// session ended, our node was deleted or its data changed, or an option shortened the
    /// hold ([`LockOptions::with_disconnect_grace`]). Resolves with [`LostReason::Released`]
    /// once the guard is gone.
    ///
    /// The future is `'static`: it can be moved into another task.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        self.hold.lost()
    }

    /// Until when the hold may be trusted as things stand: the session's lease deadline
    /// ([`zkwire::Client::lease_deadline`]) less the margin ([`crate::lease_margin`], or the
    /// larger one of [`LockOptions::with_lease_margin`]); [`lost`](Self::lost) fires then
    /// unless the lease is renewed first. `None` once the hold is lost or released.
    ///
    /// It moves forward as the server acknowledges requests (at least every third of the
    /// session timeout on a healthy session): read it again after waiting. A supervisor that
    /// must stop work before the lock can pass to someone else schedules from it:
    ///
    /// ```no_run
    /// # async fn run(guard: zkwire_recipes::MutexGuard) {
    /// while let Some(until) = guard.trusted_until() {
    ///     let stop_at = tokio::time::Instant::from_std(until);
    ///     tokio::time::sleep_until(stop_at).await; // then re-read: usually renewed by now
    ///     if guard.trusted_until().is_some_and(|u| u <= until) {
    ///         break; // not renewed: stop the work now
    ///     }
    /// }
    /// # }
    /// ```
    pub fn trusted_until(&self) -> Option<std::time::Instant> {
        self.hold.trusted_until()
    }

    /// The fencing token: the `czxid` of our lock node. Strictly increasing across the
    /// successive holders of the lock (unlike the sequence suffix, which restarts when a
    /// container directory is recreated and wraps at 2^31). Pass it to the resource you
    /// protect and have it refuse tokens older than the newest it has seen.
    pub fn fencing_token(&self) -> i64 {
        self.hold.fencing_token()
    }

    /// The full path of our lock node.
    pub fn path(&self) -> &str {
        &self.hold.node().path
    }

    /// The client the lock was taken with.
    pub fn client(&self) -> &Client {
        self.hold.client()
    }

    /// Runs `ops` atomically, on condition that our lock node still exists: a multi of
    /// `check(lock node, any version)` followed by `ops`. Returns the results of `ops`.
    ///
    /// # Errors
    /// [`LockError::Lost`] with [`LostReason::NodeDeleted`] when the lock node is gone
    /// (nothing was applied); [`zkwire::Error::MultiFailed`] with the index into `ops` of
    /// the op that failed; the client's errors.
    pub async fn multi_fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>, LockError> {
        self.hold.multi_fenced(ops).await
    }

    /// Deletes the lock node and reports the outcome.
    ///
    /// `Ok(())` means this call deleted the node and the hold was never reported lost.
    ///
    /// # Errors
    /// [`LockError::Lost`] when the node was already gone (deleted, session over) or
    /// [`lost`](Self::lost) had fired before the release: the critical section may not have
    /// been exclusive. Retryable errors are retried until the session ends.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the delete to the background worker.
    pub async fn release(self) -> Result<(), LockError> {
        self.hold.release().await
    }
}
