//! [`Semaphore`]: Curator's `InterProcessSemaphoreV2` layout and rules.
//!
//! The semaphore and its acquire are here; where its limit comes from (and Curator's
//! `SharedCount` encoding) in `limit.rs`; the [`Lease`] guard in `lease.rs`.

mod lease;
mod limit;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use zkwire::path::{self, parse_sequence};
use zkwire::{Backoff, Client, Error, OneshotWatcher};

pub use lease::Lease;
pub use limit::SemaphoreLimit;

use crate::cleanup::FOREGROUND_GRACE;
use crate::error::LockError;
use crate::hold::Hold;
use crate::internals::{deadline_after, dir_path, pause_if_retryable, Attempt, Contest, Dir};
use crate::mutex::{Mutex, MutexGuard};
use crate::options::LockOptions;
use crate::sequence::{exclusive, sort_key_at, ForeignChildPolicy};

/// Curator `InterProcessSemaphoreV2.LOCK_PARENT`: the internal mutex's directory.
pub(crate) const LOCKS: &str = "locks";
/// Curator `InterProcessSemaphoreV2.LEASE_PARENT`: the lease nodes' directory.
pub(crate) const LEASES: &str = "leases";
/// Curator `InterProcessSemaphoreV2.LEASE_BASE_NAME`.
pub(crate) const LEASE_MARKER: &str = "lease-";
const LEASE_MARKERS: &[&str] = &[LEASE_MARKER];

/// How a lease node is named (the predicate is unused: leases are counted, not ordered).
fn lease_contest() -> Contest {
    Contest {
        marker: LEASE_MARKER,
        sort_markers: LEASE_MARKERS,
        predicate: exclusive,
        tie: None,
        first_goes_grants: false,
    }
}

/// A distributed counting semaphore, interoperable with Curator's
/// `InterProcessSemaphoreV2` (and `InterProcessSemaphoreMutex`, the case of one lease) on
/// the same path.
///
/// # Layout and algorithm (Curator's)
/// - `path/locks/` is an ordinary [`Mutex`] (nodes `_c_<uuid>-lock-<seq>`);
/// - `path/leases/_c_<uuid>-lease-<seq>` are the leases: EPHEMERAL_SEQUENTIAL, guid
///   protected, missing parents created as containers.
///
/// An acquire takes the `locks` mutex, creates a lease node, then lists `leases` with a
/// children watch: the lease is granted when our node is among the children and there are
/// at most `max` of them, **counting our own**; otherwise it waits for the watch (or a change
/// of the SharedCount node) and lists again. The `locks` mutex is released at the end
/// whatever happens, and a lease that was not granted is deleted (in the foreground for up
/// to 500 ms, then by the per-session cleanup worker). Only the `locks` holder watches
/// `leases`, so there is no herd.
///
/// One difference with Curator, invisible to its peers: `acquire(n)` holds the `locks`
/// mutex for its `n` leases, where Curator takes it again for each one. Two of our
/// multi-lease acquires therefore never hold part of their leases each while waiting for the
/// rest (a deadlock Curator's per-lease loop allows).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire::{CreateMode, CreateOptions};
/// use zkwire_recipes::{Semaphore, SemaphoreLimit};
///
/// // At most 5 leases, the limit kept in a Curator SharedCount node (4 bytes, big-endian).
/// let persistent = CreateOptions::persistent();
/// client.create("/config/workers", &5_i32.to_be_bytes(), &persistent).await?;
/// let limit = SemaphoreLimit::SharedCount("/config/workers".into());
/// let sem = Semaphore::new(client, "/sem/workers", limit);
/// let leases = sem.acquire_timeout(2, Duration::from_secs(10)).await?;
/// for lease in leases {
///     // Each lease is a guard: lost(), fencing_token(), multi_fenced(), release().
///     lease.release().await?;
/// }
/// # Ok(()) }
/// ```
///
/// # Interop with Curator
/// Curator's convention mode (`maxLeases` given per instance) checks nothing: a Curator
/// peer configured with a larger limit over-grants, and no participant can tell. Prefer a
/// SharedCount node on both sides ([`SemaphoreLimit::SharedCount`] here,
/// `InterProcessSemaphoreV2(client, path, sharedCount)` there). Lowering the count never
/// revokes leases already granted, on either side: new acquires just wait until the number
/// of leases is below the new limit.
///
/// # What can go wrong
/// - **Lost leases.** A lease is an ephemeral node: it goes with the session. Await
///   [`Lease::lost`] next to the work it protects, and fence what a stale holder could
///   damage ([`Lease::multi_fenced`], [`Lease::fencing_token`]).
/// - **Session expiry while waiting**: the leases obtained so far go with the session;
///   without session renewal the acquire fails with [`zkwire::Error::SessionExpired`]; with
///   [`zkwire::ClientBuilder::with_session_renewal`] its requests wait for the new session
///   instead (docs/renewal.md in the repository).
/// - **A limit that cannot be met** (`n` larger than the limit, now or after a change of the
///   SharedCount while waiting) fails with [`LockError::TooManyLeases`] instead of waiting
///   forever while holding the `locks` mutex.
/// - **Limit disagreements** are errors where they can be seen:
///   [`LockError::LimitMismatch`], [`LockError::BadSharedCount`],
///   [`LockError::SharedCountMissing`].
/// - **Foreign children** of `leases` fail the acquire by default
///   ([`LockError::ForeignChild`]); with [`ForeignChildPolicy::CountLikeCurator`] they are
///   counted as leases, as Curator counts them. Sequence wrap does not matter here (leases
///   are counted, not ordered), but the `locks` mutex refuses it as any [`Mutex`] does.
/// - **A slow holder of `locks`** (a timed acquire waiting for capacity) makes every other
///   acquire queue behind it, as in Curator.
/// - **Curator multi-lease acquires** take `locks` again for each lease, holding the leases
///   they have meanwhile. When such partial holders and the `locks` holder together fill the
///   limit, everyone waits until a timeout (among Curator peers too). Next to Curator peers
///   that take `k` leases at once, keep the limit at least (number of those peers) × (k − 1)
///   + (largest request of anyone), or use timeouts.
#[derive(Debug, Clone)]
pub struct Semaphore {
    path: String,
    leases: Dir,
    locks: Mutex,
    limit: SemaphoreLimit,
}

impl Semaphore {
    /// A semaphore on `path` with default [`LockOptions`]. Nothing is sent yet; an invalid
    /// path fails the first acquire.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::{Semaphore, SemaphoreLimit};
    /// let workers = Semaphore::new(client, "/sem/workers", SemaphoreLimit::Fixed(5));
    /// # let _ = workers;
    /// # }
    /// ```
    pub fn new(client: Client, path: impl Into<String>, limit: SemaphoreLimit) -> Self {
        Self::with_options(client, path, limit, LockOptions::default())
    }

    /// A semaphore on `path` with `options`: the data of each lease node (Curator's
    /// `setNodeData`), ACLs, foreign-child policy, disconnection grace of the leases.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::{LockOptions, Semaphore, SemaphoreLimit};
    ///
    /// // Each lease node says who holds it (Curator's `setNodeData`).
    /// let options = LockOptions::new().with_data("host-1");
    /// let limit = SemaphoreLimit::Fixed(5);
    /// let workers = Semaphore::with_options(client, "/sem/workers", limit, options);
    /// # let _ = workers;
    /// # }
    /// ```
    pub fn with_options(
        client: Client,
        path: impl Into<String>,
        limit: SemaphoreLimit,
        options: LockOptions,
    ) -> Self {
        let path = dir_path(path.into());
        let locks = Mutex::with_options(client.clone(), path::join(&path, LOCKS), options.clone());
        let leases = Dir::new(client, path::join(&path, LEASES), options);
        Self {
            path,
            leases,
            locks,
            limit,
        }
    }

    /// The semaphore's directory.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::{Semaphore, SemaphoreLimit};
    /// let workers = Semaphore::new(client, "/sem/workers/", SemaphoreLimit::Fixed(5));
    /// assert_eq!(workers.path(), "/sem/workers"); // a trailing `/` is dropped
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Where the limit comes from.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::{Semaphore, SemaphoreLimit};
    /// let workers = Semaphore::new(client, "/sem/workers", SemaphoreLimit::Fixed(5));
    /// assert_eq!(workers.limit(), &SemaphoreLimit::Fixed(5));
    /// # }
    /// ```
    pub fn limit(&self) -> &SemaphoreLimit {
        &self.limit
    }

    /// Waits for `n` leases, all or nothing. `n = 0` returns no lease at once.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LockError, Semaphore};
    /// # async fn run(workers: Semaphore) -> Result<(), LockError> {
    /// let leases = workers.acquire(2).await?; // both, or none
    /// // ...run two jobs...
    /// for lease in leases {
    ///     lease.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::TooManyLeases`]; the limit errors ([`LockError::LimitMismatch`],
    /// [`LockError::SharedCountMissing`], [`LockError::BadSharedCount`]);
    /// [`LockError::ForeignChild`]; as [`Mutex::lock`]. The leases obtained so far are
    /// returned first.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future removes its nodes (leases obtained so far, the lease
    /// being created, the `locks` node) in the background.
    pub async fn acquire(&self, n: usize) -> Result<Vec<Lease>, LockError> {
        self.acquire_inner(n, None).await
    }

    /// As [`acquire`](Self::acquire), giving up after `timeout`: one monotonic deadline for
    /// the whole call (the `locks` mutex, every lease, retries and waits). On timeout the
    /// leases already obtained are given back and [`LockError::Timeout`] returned.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LockError, Semaphore};
    /// # async fn run(workers: Semaphore) -> Result<(), LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::LockError;
    ///
    /// match workers.acquire_timeout(2, Duration::from_secs(10)).await {
    ///     Ok(leases) => drop(leases), // ...after the two jobs ran; dropping returns them...
    ///     Err(LockError::Timeout) => println!("no room for two jobs within 10 s"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Timeout`]; as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_timeout(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<Lease>, LockError> {
        self.acquire_inner(n, deadline_after(timeout)).await
    }

    /// One lease: [`acquire(1)`](Self::acquire).
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LockError, Semaphore};
    /// # async fn run(workers: Semaphore) -> Result<(), LockError> {
    /// let lease = workers.acquire_one().await?;
    /// // ...run the job...
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_one(&self) -> Result<Lease, LockError> {
        self.acquire_inner(1, None)
            .await?
            .pop()
            .ok_or(LockError::Timeout)
    }

    /// One lease with a deadline: [`acquire_timeout(1, timeout)`](Self::acquire_timeout).
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LockError, Semaphore};
    /// # async fn run(workers: Semaphore) -> Result<(), LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::LockError;
    ///
    /// match workers.acquire_one_timeout(Duration::from_secs(10)).await {
    ///     Ok(lease) => lease.release().await?,
    ///     Err(LockError::Timeout) => println!("every worker slot stayed taken for 10 s"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire_timeout`](Self::acquire_timeout).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_one_timeout(&self, timeout: Duration) -> Result<Lease, LockError> {
        self.acquire_inner(1, deadline_after(timeout))
            .await?
            .pop()
            .ok_or(LockError::Timeout)
    }

    /// One lease if one is free now, without waiting: `Ok(None)` when another participant
    /// holds the `locks` mutex or every lease is taken (what it created is removed first).
    /// Curator's `acquire(1, 0, unit)`.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LockError, Semaphore};
    /// # async fn run(workers: Semaphore) -> Result<(), LockError> {
    /// match workers.try_acquire_one().await? {
    ///     Some(lease) => lease.release().await?,
    ///     None => println!("every worker slot is taken; skipping this round"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_one(&self) -> Result<Option<Lease>, LockError> {
        let (max, _) = self.limit_and_watch().await?;
        check_quantity(1, max)?;
        let Some(locks) = self.locks.try_lock().await? else {
            return Ok(None);
        };
        let mut attempt = Attempt::new(&self.leases);
        let turn = self.one_lease(&mut attempt, 1, false).await;
        let lease = match (turn, attempt.node().cloned()) {
            (Ok(Turn::Granted), Some(node)) => {
                attempt.disarm();
                let hold = Hold::new(self.leases.client.clone(), node, &self.leases.options);
                Ok(Some(Lease { hold }))
            }
            (Ok(_), _) => {
                attempt.abandon().await;
                Ok(None)
            }
            (Err(e), _) => {
                attempt.abandon().await;
                Err(e)
            }
        };
        release_quietly(locks).await;
        lease
    }

    /// The current limit: the fixed number, or the SharedCount node's value (checked against
    /// the fixed one for [`SemaphoreLimit::FixedChecked`], whose node is created if missing).
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LockError, Semaphore};
    /// # async fn run(workers: Semaphore) -> Result<(), LockError> {
    /// let max = workers.max_leases().await?;
    /// println!("at most {max} workers");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The limit errors of [`acquire`](Self::acquire); the client's non-retryable errors.
    pub async fn max_leases(&self) -> Result<u32, LockError> {
        Ok(self.limit_and_watch().await?.0)
    }

    /// The names of the lease nodes, granted or waiting (at most one waits: the `locks`
    /// holder's), as Curator's `getParticipantNodes`. Empty when the directory is absent.
    ///
    /// ```no_run
    /// # use zkwire_recipes::{LockError, Semaphore};
    /// # async fn run(workers: Semaphore) -> Result<(), LockError> {
    /// let taken = workers.lease_nodes().await?.len();
    /// let max = workers.max_leases().await?;
    /// println!("{taken} of {max} worker slots taken");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client's errors.
    pub async fn lease_nodes(&self) -> Result<Vec<String>, LockError> {
        match self.leases.client.get_children(&self.leases.path).await {
            Ok(children) => Ok(children),
            Err(Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    async fn acquire_inner(
        &self,
        n: usize,
        deadline: Option<Instant>,
    ) -> Result<Vec<Lease>, LockError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        // Fail fast, before queueing on the mutex.
        let (max, _) = within(deadline, self.limit_and_watch()).await?;
        check_quantity(n, max)?;
        loop {
            let locks = match deadline {
                Some(at) if at <= Instant::now() => return Err(LockError::Timeout),
                Some(at) => {
                    self.locks
                        .lock_timeout(at.saturating_duration_since(Instant::now()))
                        .await?
                }
                None => self.locks.lock().await?,
            };
            // `n` is the caller's and may be huge: the leases are counted as they come.
            let mut leases = Vec::new();
            let result = self.fill(&mut leases, n, deadline, locks.session()).await;
            if !matches!(result, Ok(true)) {
                return_all(std::mem::take(&mut leases)).await;
            }
            release_quietly(locks).await;
            match result {
                Ok(true) => return Ok(leases),
                // The session ended under us (the client renewed it), and with it the mutex
                // and any lease taken: all or nothing, so queue for the mutex again, as
                // Curator does when its node goes missing.
                Ok(false) => tracing::debug!(
                    path = self.leases.path,
                    "session renewed while acquiring leases; starting over"
                ),
                Err(e) => return Err(e),
            }
        }
    }

    /// Obtains leases until there are `n`, while we hold the `locks` mutex of `session`:
    /// `Ok(false)` when the client runs another session meanwhile (the mutex went with the
    /// old one, and the leases it took).
    async fn fill(
        &self,
        leases: &mut Vec<Lease>,
        n: usize,
        deadline: Option<Instant>,
        session: i64,
    ) -> Result<bool, LockError> {
        let current = || self.leases.client.session_id() == session;
        while leases.len() < n {
            if !current() {
                return Ok(false);
            }
            let mut attempt = Attempt::new(&self.leases);
            match within(deadline, self.one_lease(&mut attempt, n, true)).await {
                Ok(Turn::Granted) => {
                    let Some(node) = attempt.node().cloned() else {
                        continue;
                    };
                    attempt.disarm();
                    let hold = Hold::new(self.leases.client.clone(), node, &self.leases.options);
                    leases.push(Lease { hold });
                }
                // Our node vanished (deleted by someone): a new one, as Curator's
                // RETRY_DUE_TO_MISSING_NODE. (Busy only comes without waiting.)
                Ok(Turn::Vanished | Turn::Busy) => attempt.abandon().await,
                Err(e) => {
                    attempt.abandon().await;
                    return Err(e);
                }
            }
        }
        Ok(current())
    }

    /// Creates a lease node and waits until it is granted or found missing (or, without
    /// `blocking`, reports it busy instead of waiting). `requested` is the whole acquire's
    /// count, checked against the limit at every turn.
    async fn one_lease(
        &self,
        attempt: &mut Attempt,
        requested: usize,
        blocking: bool,
    ) -> Result<Turn, LockError> {
        attempt.create(&lease_contest()).await?;
        let Some(ours) = attempt.node().map(|node| node.name().to_owned()) else {
            return Ok(Turn::Vanished);
        };
        let client = &self.leases.client;
        let mut backoff = Backoff::new();
        loop {
            let (max, limit_changed) = self.limit_and_watch().await?;
            check_quantity(requested, max)?;
            let (children, _, children_changed) =
                match client.get_children_and_watch(&self.leases.path).await {
                    Ok(listed) => listed,
                    Err(Error::NoNode) => return Ok(Turn::Vanished),
                    Err(e) => {
                        pause_if_retryable(&mut backoff, e).await?;
                        continue;
                    }
                };
            let names = children.iter().map(String::as_str);
            attempt.delete_duplicates(names, &ours).await;
            if !children.contains(&ours) {
                tracing::debug!(node = ours, "our lease node vanished; creating a new one");
                return Ok(Turn::Vanished);
            }
            check_children(&children, self.leases.options.foreign_children)?;
            // Curator: `children.size() <= maxLeases`, our own node included.
            if children.len() <= usize::try_from(max).unwrap_or(usize::MAX) {
                return Ok(Turn::Granted);
            }
            if !blocking {
                return Ok(Turn::Busy);
            }
            // Any event (a lease gone or added, the count changed, the session over): list
            // again.
            tokio::select! {
                _ = children_changed => {}
                () = fired(limit_changed) => {}
            }
        }
    }
}

/// How one lease node's turn ended.
enum Turn {
    Granted,
    /// Deleted under us: create another.
    Vanished,
    /// Every lease taken, and we were not to wait.
    Busy,
}

/// Runs `fut` before `deadline`, if any.
async fn within<T>(
    deadline: Option<Instant>,
    fut: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at, fut)
            .await
            .unwrap_or(Err(LockError::Timeout)),
        None => fut.await,
    }
}

/// Resolves when the watch fires; never without one.
async fn fired(watcher: Option<OneshotWatcher>) {
    match watcher {
        Some(watcher) => drop(watcher.await),
        None => std::future::pending().await,
    }
}

fn check_quantity(requested: usize, max: u32) -> Result<(), LockError> {
    if u32::try_from(requested).map_or(true, |r| r > max) {
        return Err(LockError::TooManyLeases { requested, max });
    }
    Ok(())
}

/// A lease node is `[_c_<uuid>-]lease-<seq>`; anything else is foreign.
fn check_children(children: &[String], policy: ForeignChildPolicy) -> Result<(), LockError> {
    if policy == ForeignChildPolicy::CountLikeCurator {
        return Ok(());
    }
    for name in children {
        let (at, found) = sort_key_at(name, LEASE_MARKERS);
        let is_lease = found && name.get(at..).and_then(parse_sequence).is_some();
        if !is_lease {
            return Err(LockError::ForeignChild { name: name.clone() });
        }
    }
    Ok(())
}

/// Gives leases back: in the foreground for up to [`FOREGROUND_GRACE`], the rest (on drop)
/// in the background.
async fn return_all(leases: Vec<Lease>) {
    let all = async move {
        for lease in leases {
            if let Err(e) = lease.release().await {
                tracing::debug!(error = %e, "returning a lease");
            }
        }
    };
    let _ = tokio::time::timeout(FOREGROUND_GRACE, all).await;
}

/// Releases the `locks` mutex: in the foreground for up to [`FOREGROUND_GRACE`], then in the
/// background. Its outcome does not matter to the leases.
async fn release_quietly(locks: MutexGuard) {
    if let Ok(Err(e)) = tokio::time::timeout(FOREGROUND_GRACE, locks.release()).await {
        tracing::debug!(error = %e, "releasing the semaphore's locks mutex");
    }
}
