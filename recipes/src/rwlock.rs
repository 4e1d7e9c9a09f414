//! [`RwLock`]: Curator's `InterProcessReadWriteLock` layout and rules.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zkwire::Client;

use crate::coordinator::Coordinator;
use crate::error::LockError;
use crate::hold::{Hold, View};
use crate::internals::{acquire, deadline_after, Contest, Dir, Outcome, Tie};
use crate::options::LockOptions;
use crate::scope;
use crate::sequence::{exclusive, shared, suffix_after, READ_MARKER, RW_MARKERS, WRITE_MARKER};

/// A distributed read/write lock, interoperable with Curator's `InterProcessReadWriteLock`
/// on the same path.
///
/// Nodes are `path/_c_<uuid>-__WRIT__<seq>` and `path/_c_<uuid>-__READ__<seq>`, keyed by the
/// text after the last `__READ__`, then after the last `__WRIT__`. A writer holds when its
/// node sorts first among all children (it watches its immediate predecessor); a reader holds
/// when no writer sorts before it (it watches the **nearest** lower writer, where Curator
/// watches the first one: same grants, fewer wake-ups).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{LockError, RwLock};
///
/// let rw = RwLock::new(client, "/locks/catalog");
/// let write = rw.write().await?;
/// // ...update the catalog, then keep reading it without letting a writer in:
/// let read = write.downgrade().await?;
/// assert_eq!(rw.write().await.err(), Some(LockError::UpgradeRefused));
/// read.release().await?;
/// # Ok(()) }
/// ```
///
/// # Downgrade and upgrade
/// A write holder may take the read lock ([`WriteGuard::downgrade_read`], or
/// [`read`](Self::read) inside the write guard's [`scope`](WriteGuard::scope), or
/// [`WriteGuard::downgrade`] to also drop the write lock). As in Curator ≥ 5.5
/// (CURATOR-621) the read node is EPHEMERAL, non-sequential, named with the writer's suffix
/// (`_c_<uuid>-__READ__<writerSeq>`), so it ties with the writer's key and no queued writer
/// can slip in between. It is created in a multi checked against our write node. Ties from
/// any peer are tolerated.
///
/// A read→write upgrade would queue the writer behind our own reader and wait forever, so
/// it is refused: [`ReadGuard::upgrade`] always, and [`write`](Self::write) inside a read
/// guard's scope (without the write lock), return [`LockError::UpgradeRefused`]. Release the
/// read guard first, then take the write lock.
///
/// # Reentrancy
/// As for [`Mutex`](crate::Mutex), a hold is re-entered through its guard: `lock_again`
/// ([`ReadGuard::lock_again`], [`WriteGuard::lock_again`]), or an acquire inside the guard's
/// `scope` ([`ReadGuard::scope`], [`WriteGuard::scope`]) on the same client and path: a
/// write inside a write scope, or a read inside a read scope, is a nested guard at once,
/// with no request, sharing the node; the node goes with the last nested guard. Re-entering
/// a lost hold fails with [`LockError::Lost`]. Outside a scope every acquire is a new
/// contender with its own node (the read/write lock has no in-process queue).
///
/// # What can go wrong
/// As for [`Mutex`](crate::Mutex): lost holds ([`WriteGuard::lost`]), fencing, session
/// expiry, foreign children and wrapped sequences. Curator 5.4.0 and older create a
/// downgrade read node with a new sequence (CURATOR-621): next to such peers a queued writer
/// may get in while the downgrader still reads.
#[derive(Debug, Clone)]
pub struct RwLock {
    dir: Dir,
}

/// A granted read or write hold, shared by its nested guards.
#[derive(Debug)]
struct Granted {
    hold: Hold,
    write: bool,
    /// The client's coordinator and the lock's server path, which name the lock for scopes.
    coordinator: Arc<Coordinator>,
    key: String,
}

/// Shares `granted` with a nested guard, unless its hold was lost.
fn nested(granted: Arc<Granted>) -> Result<Arc<Granted>, LockError> {
    match granted.hold.known_lost() {
        Some(reason) => Err(LockError::Lost(reason)),
        None => Ok(granted),
    }
}

/// Ends a guard: the last of a hold's nested guards deletes the node.
async fn release_granted(granted: Arc<Granted>) -> Result<(), LockError> {
    match Arc::try_unwrap(granted) {
        Ok(Granted { hold, .. }) => hold.release().await,
        Err(still_nested) => match still_nested.hold.known_lost() {
            Some(reason) => Err(LockError::Lost(reason)),
            None => Ok(()),
        },
    }
}

impl RwLock {
    /// A read/write lock on `path` with default [`LockOptions`].
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use zkwire_recipes::RwLock;
    /// let catalog = RwLock::new(client, "/locks/catalog");
    /// # let _ = catalog;
    /// # }
    /// ```
    pub fn new(client: Client, path: impl Into<String>) -> Self {
        Self::with_options(client, path, LockOptions::default())
    }

    /// A read/write lock on `path` with `options`.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::{LockOptions, RwLock};
    ///
    /// // Holds end 5 s before the server may expire the session, to leave time to stop.
    /// let options = LockOptions::new().with_lease_margin(Duration::from_secs(5));
    /// let catalog = RwLock::with_options(client, "/locks/catalog", options);
    /// # let _ = catalog;
    /// # }
    /// ```
    pub fn with_options(client: Client, path: impl Into<String>, options: LockOptions) -> Self {
        Self {
            dir: Dir::new(client, path.into(), options),
        }
    }

    /// The read and write holds the running scopes carry on this lock, and what names the
    /// lock for them.
    fn scoped(&self) -> Result<Scoped, LockError> {
        let key = self.dir.server_path()?;
        let coordinator = Coordinator::of(&self.dir.client);
        let holds = scope::held::<Granted>(&coordinator, &key);
        let last = |write: bool| holds.iter().rev().find(|g| g.write == write).cloned();
        Ok(Scoped {
            read: last(false),
            write: last(true),
            key,
        })
    }

    /// The lock directory.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// let catalog = zkwire_recipes::RwLock::new(client, "/locks/catalog");
    /// assert_eq!(catalog.path(), "/locks/catalog");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.dir.path
    }

    /// Waits for the read lock. Inside a write guard's scope the read lock is granted at
    /// once (a downgrade node, see the type docs).
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let read = catalog.read().await?;
    /// // ...read the catalog: other readers may too, writers wait...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future removes its node.
    pub async fn read(&self) -> Result<ReadGuard, LockError> {
        self.read_inner(true, None).await?.ok_or(LockError::Timeout)
    }

    /// The read lock if no writer holds or waits before us, without waiting.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// match catalog.try_read().await? {
    ///     Some(read) => read.release().await?,
    ///     None => println!("a writer holds the catalog or waits for it"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub async fn try_read(&self) -> Result<Option<ReadGuard>, LockError> {
        self.read_inner(false, None).await
    }

    /// As [`read`](Self::read), with one monotonic deadline for the whole call.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::LockError;
    ///
    /// match catalog.read_timeout(Duration::from_secs(2)).await {
    ///     Ok(read) => read.release().await?,
    ///     Err(LockError::Timeout) => println!("the catalog is being rewritten; using the cache"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Timeout`]; as [`read`](Self::read).
    pub async fn read_timeout(&self, timeout: Duration) -> Result<ReadGuard, LockError> {
        self.read_inner(true, deadline_after(timeout))
            .await?
            .ok_or(LockError::Timeout)
    }

    /// Waits for the write lock.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let write = catalog.write().await?;
    /// // ...rewrite the catalog: no reader and no other writer meanwhile...
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::UpgradeRefused`] inside a read guard's scope without the write lock;
    /// [`LockError::Lost`] if it re-enters a write hold that was lost; as
    /// [`Mutex::lock`](crate::Mutex::lock).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future removes its node.
    pub async fn write(&self) -> Result<WriteGuard, LockError> {
        self.write_inner(true, None)
            .await?
            .ok_or(LockError::Timeout)
    }

    /// The write lock if no one else holds or waits for the lock, without waiting.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// if let Some(write) = catalog.try_write().await? {
    ///     // ...compact the catalog while nobody uses it...
    ///     write.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn try_write(&self) -> Result<Option<WriteGuard>, LockError> {
        self.write_inner(false, None).await
    }

    /// As [`write`](Self::write), with one monotonic deadline for the whole call.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::LockError;
    ///
    /// match catalog.write_timeout(Duration::from_secs(30)).await {
    ///     Ok(write) => write.release().await?,
    ///     Err(LockError::Timeout) => println!("readers kept the catalog for 30 s; retry later"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Timeout`]; as [`write`](Self::write).
    pub async fn write_timeout(&self, timeout: Duration) -> Result<WriteGuard, LockError> {
        self.write_inner(true, deadline_after(timeout))
            .await?
            .ok_or(LockError::Timeout)
    }

    async fn read_inner(
        &self,
        blocking: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<ReadGuard>, LockError> {
        let scoped = self.scoped()?;
        if let Some(granted) = scoped.read {
            let view = granted.hold.view_from(&self.dir.client);
            return nested(granted).map(|granted| Some(ReadGuard { granted, view }));
        }
        let tie = scoped.write.map(|w| {
            let view = w.hold.view_from(&self.dir.client);
            tie_with(&w.hold, view.as_deref())
        });
        self.read_with(tie, blocking, deadline).await
    }

    async fn read_with(
        &self,
        tie: Option<Tie>,
        blocking: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<ReadGuard>, LockError> {
        let contest = Contest {
            marker: READ_MARKER,
            sort_markers: RW_MARKERS,
            predicate: shared,
            tie,
            // A downgrade may add a read node at the writer's key: always list again.
            first_goes_grants: false,
        };
        let key = self.dir.server_path()?;
        let Some(hold) = self.acquire(&contest, blocking, deadline).await? else {
            return Ok(None);
        };
        let granted = self.granted(hold, false, key);
        Ok(Some(ReadGuard {
            granted,
            view: None,
        }))
    }

    /// A new hold, shared by the guards to come.
    fn granted(&self, hold: Hold, write: bool, key: String) -> Arc<Granted> {
        Arc::new(Granted {
            hold,
            write,
            coordinator: Coordinator::of(&self.dir.client),
            key,
        })
    }

    async fn write_inner(
        &self,
        blocking: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<WriteGuard>, LockError> {
        let scoped = self.scoped()?;
        match (scoped.read, scoped.write) {
            (_, Some(granted)) => {
                let view = granted.hold.view_from(&self.dir.client);
                return nested(granted).map(|granted| {
                    Some(WriteGuard {
                        granted,
                        rw: self.clone(),
                        view,
                    })
                });
            }
            (Some(_), None) => return Err(LockError::UpgradeRefused),
            (None, None) => {}
        }
        let contest = Contest {
            marker: WRITE_MARKER,
            sort_markers: RW_MARKERS,
            predicate: exclusive,
            tie: None,
            // A downgrade may add a read node at the writer's key: always list again.
            first_goes_grants: false,
        };
        let Some(hold) = self.acquire(&contest, blocking, deadline).await? else {
            return Ok(None);
        };
        let granted = self.granted(hold, true, scoped.key);
        Ok(Some(WriteGuard {
            granted,
            rw: self.clone(),
            view: None,
        }))
    }

    async fn acquire(
        &self,
        contest: &Contest,
        blocking: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<Hold>, LockError> {
        Ok(
            match acquire(&self.dir, contest, blocking, deadline).await? {
                Outcome::Held(node) => {
                    let hold = Hold::new(self.dir.client.clone(), node, &self.dir.options);
                    Some(match &contest.tie {
                        Some(tie) => hold.with_fencing_token(tie.writer_token),
                        None => hold,
                    })
                }
                Outcome::Busy => None,
            },
        )
    }
}

/// What the running scopes carry of one lock.
struct Scoped {
    read: Option<Arc<Granted>>,
    write: Option<Arc<Granted>>,
    key: String,
}

/// The tie of a downgrade read node with the write hold `writer`, for a read acquired
/// through a handle that sees the hold with `view` (the writer's node is checked through it).
fn tie_with(writer: &Hold, view: Option<&View>) -> Tie {
    let node = writer.node();
    Tie {
        suffix: suffix_after(node.name(), WRITE_MARKER)
            .unwrap_or_default()
            .to_owned(),
        writer_path: writer.path_in(view).to_owned(),
        writer_token: writer.fencing_token(),
    }
}

/// Proof of holding the read lock of an [`RwLock`], until released or dropped.
///
/// ```no_run
/// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
/// let read = catalog.read().await?;
/// println!("reading through {}", read.path());
/// read.release().await?; // or drop it: the node is then deleted in the background
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct ReadGuard {
    granted: Arc<Granted>,
    /// How this guard names the hold, when it was nested through another handle.
    view: Option<Box<View>>,
}

/// Proof of holding the write lock of an [`RwLock`], until released or dropped.
///
/// ```no_run
/// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire::Op;
///
/// let write = catalog.write().await?;
/// // Written only while the write lock is ours.
/// write.multi_fenced(&[Op::set_data("/catalog", "v2", None)]).await?;
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct WriteGuard {
    granted: Arc<Granted>,
    /// For the downgrade's read acquire.
    rw: RwLock,
    /// How this guard names the hold, when it was nested through another handle.
    view: Option<Box<View>>,
}

/// What a read/write hold's fencing token orders.
macro_rules! rw_token_doc {
    () => {
        "The fencing token: the `czxid` of our node, or, for a read hold taken while holding \
         the write lock (a downgrade), the write node's. Every hold's token is larger than \
         the token of every earlier hold it conflicts with (writers are ordered among \
         themselves and against readers; concurrent readers are not)."
    };
}

impl ReadGuard {
    async fn release_hold(self) -> Result<(), LockError> {
        release_granted(self.granted).await
    }

    fn view(&self) -> Option<&View> {
        self.view.as_deref()
    }

    /// A nested guard of this hold, at once and with no request (as
    /// [`MutexGuard::lock_again`](crate::MutexGuard::lock_again)).
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let read = catalog.read().await?;
    /// let for_task = read.lock_again()?;
    /// tokio::spawn(async move {
    ///     // ...read under the same hold; it lasts until both guards are gone...
    ///     drop(for_task);
    /// });
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] if the hold was lost.
    pub fn lock_again(&self) -> Result<Self, LockError> {
        nested(Arc::clone(&self.granted)).map(|granted| Self {
            granted,
            view: self.view.clone(),
        })
    }

    /// Runs `future` with this hold re-entrant (as
    /// [`MutexGuard::scope`](crate::MutexGuard::scope)); see the [`RwLock`] type for what
    /// an acquire inside the scope gets.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let read = catalog.read().await?;
    /// // Inside the scope a read of the same lock is a nested guard: no request, no new node.
    /// let nested = read.scope(catalog.read()).await?;
    /// assert_eq!(nested.path(), read.path());
    /// drop(nested);
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn scope<F: Future>(&self, future: F) -> F::Output {
        let granted = &self.granted;
        scope::enter(&granted.coordinator, &granted.key, granted, future).await
    }

    crate::hold::guard_methods!(granted.hold, rw_token_doc!());

    /// Always [`LockError::UpgradeRefused`]: in Curator's layout a writer would wait behind
    /// this very read node forever. Release the read lock, then take the write lock.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::LockError;
    ///
    /// let read = catalog.read().await?;
    /// assert_eq!(read.upgrade().err(), Some(LockError::UpgradeRefused));
    /// // Release the read lock first, then queue for the write lock.
    /// read.release().await?;
    /// let write = catalog.write().await?;
    /// # drop(write);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Always.
    pub fn upgrade(&self) -> Result<WriteGuard, LockError> {
        Err(LockError::UpgradeRefused)
    }
}

impl WriteGuard {
    async fn release_hold(self) -> Result<(), LockError> {
        release_granted(self.granted).await
    }

    fn view(&self) -> Option<&View> {
        self.view.as_deref()
    }

    /// A nested guard of this hold, at once and with no request (as
    /// [`MutexGuard::lock_again`](crate::MutexGuard::lock_again)).
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let write = catalog.write().await?;
    /// let for_task = write.lock_again()?;
    /// tokio::spawn(async move {
    ///     // ...write under the same hold; it lasts until both guards are gone...
    ///     drop(for_task);
    /// });
    /// write.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] if the hold was lost.
    pub fn lock_again(&self) -> Result<Self, LockError> {
        nested(Arc::clone(&self.granted)).map(|granted| Self {
            granted,
            rw: self.rw.clone(),
            view: self.view.clone(),
        })
    }

    /// Runs `future` with this hold re-entrant (as
    /// [`MutexGuard::scope`](crate::MutexGuard::scope)); see the [`RwLock`] type for what
    /// an acquire inside the scope gets.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let write = catalog.write().await?;
    /// // Inside the scope a read of the same lock is granted at once (a downgrade read node).
    /// let read = write.scope(catalog.read()).await?;
    /// write.release().await?; // still reading, and no writer got in between
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn scope<F: Future>(&self, future: F) -> F::Output {
        let granted = &self.granted;
        scope::enter(&granted.coordinator, &granted.key, granted, future).await
    }

    crate::hold::guard_methods!(granted.hold, rw_token_doc!());

    /// Takes the read lock while holding the write lock (Curator's downgrade, first step):
    /// the read node ties with our write node and is granted at once. Release this guard
    /// afterwards to finish the downgrade.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let write = catalog.write().await?;
    /// // ...rewrite the catalog...
    /// let read = write.downgrade_read().await?;
    /// write.release().await?; // the downgrade is complete
    /// // ...go on reading what was written: no writer got in between...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LockError::Lost`] if our write node is gone; the client's errors.
    pub async fn downgrade_read(&self) -> Result<ReadGuard, LockError> {
        // The read is taken through this guard's `RwLock`, which names paths as `view` does.
        let tie = tie_with(&self.granted.hold, self.view());
        self.rw
            .read_with(Some(tie), true, None)
            .await?
            .ok_or(LockError::Timeout)
    }

    /// Downgrades: takes the read lock, then releases the write lock. No writer can get in
    /// between.
    ///
    /// ```no_run
    /// # async fn run(catalog: zkwire_recipes::RwLock) -> Result<(), zkwire_recipes::LockError> {
    /// let write = catalog.write().await?;
    /// // ...rewrite the catalog...
    /// let read = write.downgrade().await?;
    /// // ...go on reading what was written: no writer got in between...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`downgrade_read`](Self::downgrade_read), and as [`release`](Self::release) (the
    /// read guard is then dropped).
    pub async fn downgrade(self) -> Result<ReadGuard, LockError> {
        let read = self.downgrade_read().await?;
        self.release().await?;
        Ok(read)
    }
}
