//! [`RwLock`]: Curator's `InterProcessReadWriteLock` layout and rules.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;
use zkwire::Client;

use crate::error::LockError;
use crate::hold::Hold;
use crate::internals::{acquire, deadline_after, Contest, Dir, Outcome, Tie};
use crate::local::{Owner, Registry};
use crate::options::LockOptions;
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
/// [`read`](Self::read) in the same task, or [`WriteGuard::downgrade`] to also drop the
/// write lock). As in Curator ≥ 5.5 (CURATOR-621) the read node is EPHEMERAL, non-sequential,
/// named with the writer's suffix (`_c_<uuid>-__READ__<writerSeq>`), so it ties with the
/// writer's key and no queued writer can slip in between. It is created in a multi checked
/// against our write node. Ties from any peer are tolerated.
///
/// A read→write upgrade would queue the writer behind our own reader and wait forever, so
/// it is refused: [`ReadGuard::upgrade`] always, and [`write`](Self::write) while the task
/// holds a read guard (and not the write lock), return [`LockError::UpgradeRefused`].
/// Release the read guard first, then take the write lock.
///
/// # Reentrancy
/// As for [`Mutex`](crate::Mutex), the holder is the tokio task (outside a task, the
/// thread), across every `RwLock` of one client on one path: a task holding the write lock
/// that calls `write()` again, or holding a read lock that calls `read()` again, gets a
/// nested guard at once, with no request, sharing the node; the node goes with the last
/// nested guard. Re-entering a lost hold fails with [`LockError::Lost`]. Unlike the mutex,
/// the read/write lock has no in-process queue: each acquire of another task contends in
/// ZooKeeper with its own node.
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

/// The holds of every read/write lock in this process, by session and path.
static HOLDERS: Registry<Holders> = Registry::new();

/// What each task holds of one read/write lock.
#[derive(Debug, Default)]
struct Holders {
    by_owner: StdMutex<HashMap<Owner, Held>>,
    /// Numbers the grants, so that a guard only ever clears its own record.
    grants: AtomicU64,
}

/// What one task holds.
#[derive(Debug, Default)]
struct Held {
    read: Option<(u64, Weak<Granted>)>,
    write: Option<(u64, Weak<Granted>)>,
}

impl Holders {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Owner, Held>> {
        self.by_owner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live read and write holds of `owner`.
    fn of(&self, owner: Owner) -> (Option<Arc<Granted>>, Option<Arc<Granted>>) {
        let by_owner = self.lock();
        let Some(held) = by_owner.get(&owner) else {
            return (None, None);
        };
        let live = |slot: &Option<(u64, Weak<Granted>)>| slot.as_ref()?.1.upgrade();
        (live(&held.read), live(&held.write))
    }
}

/// A granted read or write hold, shared by its task's nested guards.
#[derive(Debug)]
struct Granted {
    hold: Hold,
    registration: HolderRecord,
}

/// Keeps a grant recorded for its task; dropped with the last nested guard.
#[derive(Debug)]
struct HolderRecord {
    holders: Arc<Holders>,
    owner: Owner,
    grant: u64,
    write: bool,
}

impl Drop for HolderRecord {
    fn drop(&mut self) {
        let mut by_owner = self.holders.lock();
        let Some(held) = by_owner.get_mut(&self.owner) else {
            return;
        };
        let slot = if self.write {
            &mut held.write
        } else {
            &mut held.read
        };
        if slot.as_ref().is_some_and(|(grant, _)| *grant == self.grant) {
            *slot = None;
        }
        if held.read.is_none() && held.write.is_none() {
            by_owner.remove(&self.owner);
        }
    }
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
        Ok(Granted { hold, registration }) => {
            drop(registration);
            hold.release().await
        }
        Err(still_nested) => match still_nested.hold.known_lost() {
            Some(reason) => Err(LockError::Lost(reason)),
            None => Ok(()),
        },
    }
}

impl RwLock {
    /// A read/write lock on `path` with default [`LockOptions`].
    pub fn new(client: Client, path: impl Into<String>) -> Self {
        Self::with_options(client, path, LockOptions::default())
    }

    /// A read/write lock on `path` with `options`.
    pub fn with_options(client: Client, path: impl Into<String>, options: LockOptions) -> Self {
        Self {
            dir: Dir {
                client,
                path: path.into(),
                options,
            },
        }
    }

    fn holders(&self) -> Arc<Holders> {
        HOLDERS.get(self.dir.client.session_id(), &self.dir.path)
    }

    /// The lock directory.
    pub fn path(&self) -> &str {
        &self.dir.path
    }

    /// Waits for the read lock. If this task holds the write lock, the read lock is
    /// granted at once (a downgrade node, see the type docs).
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
    /// # Errors
    /// As [`read`](Self::read).
    pub async fn try_read(&self) -> Result<Option<ReadGuard>, LockError> {
        self.read_inner(false, None).await
    }

    /// As [`read`](Self::read), with one monotonic deadline for the whole call.
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
    /// # Errors
    /// [`LockError::UpgradeRefused`] if this task holds a read guard and not the write lock;
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
    /// # Errors
    /// As [`write`](Self::write).
    pub async fn try_write(&self) -> Result<Option<WriteGuard>, LockError> {
        self.write_inner(false, None).await
    }

    /// As [`write`](Self::write), with one monotonic deadline for the whole call.
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
        let (read, write) = self.holders().of(Owner::current());
        if let Some(granted) = read {
            return nested(granted).map(|granted| Some(ReadGuard { granted }));
        }
        let tie = write.map(|w| tie_with(&w.hold));
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
        let Some(hold) = self.acquire(&contest, blocking, deadline).await? else {
            return Ok(None);
        };
        let granted = self.record(hold, false);
        Ok(Some(ReadGuard { granted }))
    }

    /// Records a new hold as the calling task's read or write hold.
    fn record(&self, hold: Hold, write: bool) -> Arc<Granted> {
        let holders = self.holders();
        let owner = Owner::current();
        let grant = holders.grants.fetch_add(1, Ordering::Relaxed);
        let granted = Arc::new(Granted {
            hold,
            registration: HolderRecord {
                holders: Arc::clone(&holders),
                owner,
                grant,
                write,
            },
        });
        let mut by_owner = holders.lock();
        let held = by_owner.entry(owner).or_default();
        let slot = if write {
            &mut held.write
        } else {
            &mut held.read
        };
        *slot = Some((grant, Arc::downgrade(&granted)));
        granted
    }

    async fn write_inner(
        &self,
        blocking: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<WriteGuard>, LockError> {
        match self.holders().of(Owner::current()) {
            (_, Some(granted)) => {
                return nested(granted).map(|granted| {
                    Some(WriteGuard {
                        granted,
                        rw: self.clone(),
                    })
                })
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
        let granted = self.record(hold, true);
        Ok(Some(WriteGuard {
            granted,
            rw: self.clone(),
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

/// The tie of a downgrade read node with the write hold `writer`.
fn tie_with(writer: &Hold) -> Tie {
    let node = writer.node();
    Tie {
        suffix: suffix_after(&node.name, WRITE_MARKER)
            .unwrap_or_default()
            .to_owned(),
        writer_path: node.path.clone(),
        writer_token: writer.fencing_token(),
    }
}

/// Proof of holding the read lock of an [`RwLock`], until released or dropped.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct ReadGuard {
    granted: Arc<Granted>,
}

/// Proof of holding the write lock of an [`RwLock`], until released or dropped.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct WriteGuard {
    granted: Arc<Granted>,
    /// For the downgrade's read acquire.
    rw: RwLock,
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

    crate::hold::guard_methods!(granted.hold, rw_token_doc!());

    /// Always [`LockError::UpgradeRefused`]: in Curator's layout a writer would wait behind
    /// this very read node forever. Release the read lock, then take the write lock.
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

    crate::hold::guard_methods!(granted.hold, rw_token_doc!());

    /// Takes the read lock while holding the write lock (Curator's downgrade, first step):
    /// the read node ties with our write node and is granted at once. Release this guard
    /// afterwards to finish the downgrade.
    ///
    /// # Errors
    /// [`LockError::Lost`] if our write node is gone; the client's errors.
    pub async fn downgrade_read(&self) -> Result<ReadGuard, LockError> {
        let tie = tie_with(&self.granted.hold);
        self.rw
            .read_with(Some(tie), true, None)
            .await?
            .ok_or(LockError::Timeout)
    }

    /// Downgrades: takes the read lock, then releases the write lock. No writer can get in
    /// between.
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
