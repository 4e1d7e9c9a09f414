//! [`Mutex`]: Curator's `InterProcessMutex` layout and rules.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use zkwire::Client;

use crate::coordinator::Coordinator;
use crate::error::LockError;
use crate::hold::{Hold, View};
use crate::internals::{acquire, deadline_after, Contest, Dir, Outcome};
use crate::local::Gate;
use crate::options::LockOptions;
use crate::scope;
use crate::sequence::MUTEX_MARKERS;

/// A distributed mutex on a ZooKeeper path, interoperable with Curator's `InterProcessMutex`
/// (and LeaderSelector) on the same path.
///
/// Each acquire creates `path/_c_<uuid>-lock-<seq>` (EPHEMERAL_SEQUENTIAL, missing parents as
/// containers); the node whose key (the text after the last `lock-`) sorts first holds the
/// lock, and every other contender watches only its immediate predecessor.
///
/// # Reentrancy
/// A hold is re-entered through its guard, never by who happens to call:
/// [`MutexGuard::lock_again`] returns a nested guard at once, and inside
/// [`MutexGuard::scope`] every acquire of the same lock (this client, this path, through any
/// handle) does. Nested guards send nothing, share the node, [`lost`](MutexGuard::lost) and
/// the fencing token, and the node is deleted when the last of them is released or dropped.
/// Re-entering a hold that was lost fails with [`LockError::Lost`]. Outside a scope an
/// acquire is a new contender, whichever task makes it: as with `tokio::sync::Mutex`, a task
/// that locks again while its own guard is alive waits for that guard. A scope is Curator's
/// per-thread reentrancy made explicit; it cannot be fooled by moving a guard to another task
/// (docs/recipes.md, "Reentrancy").
///
/// # The local queue
/// Tasks of one client contend first in process: contenders of one client on one lock
/// (through one `Mutex`, its clones, another `Mutex` of the same client and path, a chroot
/// handle, or the path spelled with a trailing `/`) queue FIFO, and only the head of that
/// queue creates a node and contends in ZooKeeper. A client so has at most one node and one
/// watch per lock. Every grant goes back to ZooKeeper: when a holder releases, the next local
/// waiter creates a new node at the end of the distributed queue, so other processes keep
/// their turn. The queue outlives a session renewal: a guard of the old session keeps its
/// place until it is dropped, so tasks of one process never overlap even when the session's
/// hold was lost. Separate clients (sessions) of one process contend through ZooKeeper like
/// separate processes.
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
/// - **Session expiry while waiting** depends on the client: without session renewal it
///   fails the acquire with [`zkwire::Error::SessionExpired`] (the client is over; make a
///   new one); with [`zkwire::ClientBuilder::with_session_renewal`] the acquire starts over
///   on the new session, with a new node (docs/renewal.md in the repository).
/// - **Connection loss** is retried inside the acquire; a create whose reply was lost is
///   recovered by guid (only if our session owns the node found).
/// - **Foreign children or a wrapped sequence** in the directory fail the acquire
///   ([`LockError::ForeignChild`], [`LockError::SequenceWrapped`]).
#[derive(Debug, Clone)]
pub struct Mutex {
    dir: Dir,
    /// The lock's in-process state, looked up on first use and kept by every clone.
    lock: OnceLock<Arc<Lock>>,
}

impl Mutex {
    /// A mutex on `path` with default [`LockOptions`]. Nothing is sent yet; an invalid path
    /// fails the first acquire.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::Mutex;
    /// let mutex = Mutex::new(client, "/locks/reports");
    /// # let _ = mutex;
    /// # }
    /// ```
    pub fn new(client: Client, path: impl Into<String>) -> Self {
        Self::with_options(client, path, LockOptions::default())
    }

    /// A mutex on `path` with `options` (node data, ACLs, foreign-child policy, grace).
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::{LockOptions, Mutex};
    ///
    /// // Say who holds the lock, and give it up at the first disconnection.
    /// let options = LockOptions::new()
    ///     .with_data("worker-7")
    ///     .with_disconnect_grace(Duration::ZERO);
    /// let mutex = Mutex::with_options(client, "/locks/reports", options);
    /// # let _ = mutex;
    /// # }
    /// ```
    pub fn with_options(client: Client, path: impl Into<String>, options: LockOptions) -> Self {
        Self {
            dir: Dir::new(client, path.into(), options),
            lock: OnceLock::new(),
        }
    }

    /// The lock directory.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// let mutex = zkwire_recipes::Mutex::new(client, "/locks/reports/");
    /// assert_eq!(mutex.path(), "/locks/reports"); // a trailing `/` is dropped
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.dir.path
    }

    /// The full path of the node that holds the lock now (the first contender in lock
    /// order, of any client), `None` if no one holds or waits. A snapshot: pass it to
    /// [`revoke`](crate::revoke) to ask that holder to release.
    ///
    /// ```no_run
    /// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
    /// match mutex.holder().await? {
    ///     Some(node) => println!("held through {node}"),
    ///     None => println!("free"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client's errors; [`LockError::ForeignChild`] and [`LockError::SequenceWrapped`]
    /// as for an acquire.
    pub async fn holder(&self) -> Result<Option<String>, LockError> {
        let contenders = self.dir.contender_names(MUTEX_MARKERS).await?;
        Ok(contenders
            .first()
            .map(|name| zkwire::path::join(&self.dir.path, name)))
    }

    /// Waits until the lock is ours.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// let mutex = zkwire_recipes::Mutex::new(client, "/locks/reports");
    /// let guard = mutex.lock().await?;
    /// // ...the critical section...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
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
    /// ```no_run
    /// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
    /// match mutex.try_lock().await? {
    ///     Some(guard) => {
    ///         // ...the nightly report, by whichever process got there first...
    ///         guard.release().await?;
    ///     }
    ///     None => println!("another process is on it"),
    /// }
    /// # Ok(()) }
    /// ```
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
    /// ```no_run
    /// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::LockError;
    ///
    /// match mutex.lock_timeout(Duration::from_secs(5)).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(LockError::Timeout) => println!("still busy after 5 s"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
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
        let lock = self.local()?;
        if let Some(granted) = scope::held::<Granted>(&lock.coordinator, &lock.key).pop() {
            let view = granted.hold.view_from(&self.dir.client);
            return nested(granted, view).map(Some);
        }
        let gate = &lock.gate;
        let (permit, parked) = match (self.dir.options.local_queue, blocking, deadline) {
            (false, _, _) => (None, None),
            (true, false, _) => match gate.try_enter() {
                Some((permit, parked)) => (Some(permit), parked),
                None => return Ok(None),
            },
            (true, true, None) => {
                let (permit, parked) = gate.enter().await;
                (Some(permit), parked)
            }
            (true, true, Some(at)) => {
                let (permit, parked) = tokio::time::timeout_at(at, gate.enter())
                    .await
                    .map_err(|_| LockError::Timeout)?;
                (Some(permit), parked)
            }
        };
        // A node handed over by the previous local holder: ours at once, if still trusted
        // (which includes: owned by the client's current session).
        if let Some((hold, handoffs)) = parked {
            if hold.known_lost().is_none() {
                // Taken through another handle, perhaps: seen as this one names it.
                let view = hold.view_from(&self.dir.client);
                return Ok(Some(self.grant(lock, hold, permit, handoffs, view)));
            }
        }
        let contest = Contest::exclusive(MUTEX_MARKERS[0], MUTEX_MARKERS);
        match acquire(&self.dir, &contest, blocking, deadline).await? {
            Outcome::Held(node) => {
                let hold = Hold::new(self.dir.client.clone(), node, &self.dir.options);
                // Our own handle's node: no view (and no string built to tell).
                Ok(Some(self.grant(lock, hold, permit, 0, None)))
            }
            Outcome::Busy => Ok(None),
        }
    }

    /// Wraps `hold` in the outermost guard.
    /// The lock's key (its server path), the client's coordinator and the lock's local queue.
    fn local(&self) -> Result<Arc<Lock>, LockError> {
        if let Some(lock) = self.lock.get() {
            return Ok(Arc::clone(lock));
        }
        let key = self.dir.server_path()?;
        let coordinator = Coordinator::of(&self.dir.client);
        let gate = coordinator.state::<Gate>(&key);
        let lock = Arc::new(Lock {
            coordinator,
            key,
            gate,
        });
        Ok(Arc::clone(self.lock.get_or_init(|| lock)))
    }

    fn grant(
        &self,
        lock: Arc<Lock>,
        hold: Hold,
        permit: Option<OwnedSemaphorePermit>,
        handoffs: u32,
        view: Option<Box<View>>,
    ) -> MutexGuard {
        MutexGuard {
            view,
            granted: Arc::new(Granted {
                hold,
                lock,
                handoffs_left: self.dir.options.local_handoffs.saturating_sub(handoffs),
                handoffs,
                _permit: permit,
            }),
        }
    }
}

/// A nested guard of `granted` seen with `view`, unless its hold was lost.
fn nested(granted: Arc<Granted>, view: Option<Box<View>>) -> Result<MutexGuard, LockError> {
    match granted.hold.known_lost() {
        Some(reason) => Err(LockError::Lost(reason)),
        None => Ok(MutexGuard { granted, view }),
    }
}

/// Which lock a hold is of, in process: its client's coordinator, its server path and its
/// local queue.
#[derive(Debug)]
struct Lock {
    coordinator: Arc<Coordinator>,
    key: String,
    gate: Arc<Gate>,
}

/// A granted hold, shared by its nested guards.
///
/// Fields drop in order: the node's delete is queued before the local queue's next waiter
/// is let in.
#[derive(Debug)]
struct Granted {
    hold: Hold,
    lock: Arc<Lock>,
    /// Hand-offs this node has had, and how many more it may have.
    handoffs: u32,
    handoffs_left: u32,
    /// The head of the local queue (none with the queue off).
    _permit: Option<OwnedSemaphorePermit>,
}

/// Proof of holding a [`Mutex`], until released or dropped.
///
/// Dropping the outermost guard of a hold (see the type's reentrancy rules) deletes the lock
/// node in the background (retried until it succeeds or the session ends);
/// [`release`](Self::release) does it in the foreground and reports how it went. Releasing
/// or dropping a nested guard only ends that nesting level.
///
/// ```no_run
/// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
/// let guard = mutex.lock().await?;
/// println!("holding {} with fencing token {}", guard.path(), guard.fencing_token());
/// guard.release().await?; // or drop it: the node is then deleted in the background
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct MutexGuard {
    granted: Arc<Granted>,
    /// How this guard names the hold, when it was nested through another handle.
    view: Option<Box<View>>,
}

impl MutexGuard {
    fn view(&self) -> Option<&View> {
        self.view.as_deref()
    }

    /// The session the lock node belongs to.
    pub(crate) fn session(&self) -> i64 {
        self.granted.hold.session()
    }

    /// Deletes the node if this is the last guard of the hold; a nested guard only reports
    /// whether the hold is still trusted.
    async fn release_hold(self) -> Result<(), LockError> {
        match Arc::try_unwrap(self.granted) {
            Ok(Granted {
                hold,
                lock,
                handoffs,
                handoffs_left,
                _permit,
            }) => {
                // The opt-in local hand-off: the next local waiter takes the node as it is.
                // `_permit` goes at the end of this scope, after the parking.
                let hold = if handoffs_left > 0 && hold.known_lost().is_none() {
                    match lock.gate.park(hold, handoffs + 1) {
                        None => return Ok(()),
                        Some(hold) => hold,
                    }
                } else {
                    hold
                };
                hold.release().await
            }
            Err(nested) => match nested.hold.known_lost() {
                Some(reason) => Err(LockError::Lost(reason)),
                None => Ok(()),
            },
        }
    }

    /// A nested guard of this hold, at once and with no request: it shares the node, and
    /// the node stays until the last guard is released or dropped.
    ///
    /// ```no_run
    /// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
    /// let guard = mutex.lock().await?;
    /// let for_worker = guard.lock_again()?;
    /// tokio::spawn(async move {
    ///     // ...work under the lock; it stays held until both guards are gone.
    ///     drop(for_worker);
    /// });
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] if the hold was lost.
    pub fn lock_again(&self) -> Result<Self, LockError> {
        nested(Arc::clone(&self.granted), self.view.clone())
    }

    /// Runs `future` with this hold re-entrant: inside it, an acquire of the same lock (this
    /// client, this path, through any handle) returns a nested guard at once, with no
    /// request, as Curator's per-thread reentrancy does for a thread. The scope is the
    /// future, not the task: tasks spawned from it do not inherit it.
    ///
    /// ```no_run
    /// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{LockError, Mutex};
    ///
    /// async fn update_report(mutex: &Mutex) -> Result<(), LockError> {
    ///     let guard = mutex.lock().await?; // nested inside a scope: no request
    ///     // ...
    ///     guard.release().await
    /// }
    ///
    /// let guard = mutex.lock().await?;
    /// guard.scope(update_report(&mutex)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn scope<F: std::future::Future>(&self, future: F) -> F::Output {
        let lock = &self.granted.lock;
        scope::enter(&lock.coordinator, &lock.key, &self.granted, future).await
    }

    /// How many guards share this hold (1 when not nested).
    ///
    /// ```no_run
    /// # async fn run(mutex: zkwire_recipes::Mutex) -> Result<(), zkwire_recipes::LockError> {
    /// let guard = mutex.lock().await?;
    /// assert_eq!(guard.nesting(), 1);
    /// let nested = guard.lock_again()?;
    /// assert_eq!(guard.nesting(), 2);
    /// drop(nested);
    /// assert_eq!(guard.nesting(), 1);
    /// # Ok(()) }
    /// ```
    pub fn nesting(&self) -> usize {
        Arc::strong_count(&self.granted)
    }

    crate::hold::guard_methods!(
        granted.hold,
        "The fencing token: the `czxid` of our lock node. Strictly increasing across the \
         successive holders of the lock (unlike the sequence suffix, which restarts when a \
         container directory is recreated and wraps at 2^31). Pass it to the resource you \
         protect and have it refuse tokens older than the newest it has seen."
    );
}
