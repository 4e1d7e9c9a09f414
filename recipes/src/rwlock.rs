//! [`RwLock`]: Curator's `InterProcessReadWriteLock` layout and rules.

use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use zkwire::Client;

use crate::error::LockError;
use crate::hold::Hold;
use crate::internals::{acquire, deadline_after, Contest, Dir, Outcome, Tie};
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
/// [`read`](Self::read) on the same instance, or [`WriteGuard::downgrade`] to also drop the
/// write lock). As in Curator ≥ 5.5 (CURATOR-621) the read node is EPHEMERAL, non-sequential,
/// named with the writer's suffix (`_c_<uuid>-__READ__<writerSeq>`), so it ties with the
/// writer's key and no queued writer can slip in between. It is created in a multi checked
/// against our write node. Ties from any peer are tolerated.
///
/// A read→write upgrade would queue the writer behind our own reader and wait forever, so
/// it is refused: [`ReadGuard::upgrade`] always, and [`write`](Self::write) while this
/// instance (or a clone of it) holds a read guard, return [`LockError::UpgradeRefused`];
/// `write()` while it holds the write lock returns [`LockError::Reentrant`]. Release the
/// read guard first, then take the write lock.
///
/// An `RwLock` and its clones are one participant for this bookkeeping; tasks that should
/// contend with each other use separate `RwLock::new` values.
///
/// # What can go wrong
/// As for [`Mutex`](crate::Mutex): lost holds ([`WriteGuard::lost`]), fencing, session
/// expiry, foreign children and wrapped sequences. Curator 5.4.0 and older create a
/// downgrade read node with a new sequence (CURATOR-621): next to such peers a queued writer
/// may get in while the downgrader still reads.
#[derive(Debug, Clone)]
pub struct RwLock {
    dir: Dir,
    held: Arc<StdMutex<Held>>,
}

/// What this instance holds.
#[derive(Debug, Default)]
struct Held {
    readers: usize,
    /// Our write node: path, sequence suffix and fencing token.
    writer: Option<(String, String, i64)>,
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
            held: Arc::default(),
        }
    }

    /// The lock directory.
    pub fn path(&self) -> &str {
        &self.dir.path
    }

    /// Waits for the read lock. If this instance holds the write lock, the read lock is
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
    /// [`LockError::UpgradeRefused`] if this instance holds a read guard;
    /// [`LockError::Reentrant`] if it holds the write lock; as
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
        let writer = self.lock_held().writer.clone();
        let tie = writer.map(|(writer_path, suffix, writer_token)| Tie {
            suffix,
            writer_path,
            writer_token,
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
        };
        let Some(hold) = self.acquire(&contest, blocking, deadline).await? else {
            return Ok(None);
        };
        self.lock_held().readers += 1;
        Ok(Some(ReadGuard {
            hold,
            _registered: Registration {
                rw: self.clone(),
                writer_path: None,
            },
        }))
    }

    async fn write_inner(
        &self,
        blocking: bool,
        deadline: Option<Instant>,
    ) -> Result<Option<WriteGuard>, LockError> {
        {
            let held = self.lock_held();
            if held.readers > 0 {
                return Err(LockError::UpgradeRefused);
            }
            if held.writer.is_some() {
                return Err(LockError::Reentrant);
            }
        }
        let contest = Contest {
            marker: WRITE_MARKER,
            sort_markers: RW_MARKERS,
            predicate: exclusive,
            tie: None,
        };
        let Some(hold) = self.acquire(&contest, blocking, deadline).await? else {
            return Ok(None);
        };
        let suffix = suffix_after(&hold.node().name, WRITE_MARKER)
            .unwrap_or_default()
            .to_owned();
        let path = hold.node().path.clone();
        self.lock_held().writer = Some((path.clone(), suffix, hold.fencing_token()));
        Ok(Some(WriteGuard {
            hold,
            registered: Registration {
                rw: self.clone(),
                writer_path: Some(path),
            },
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

    fn lock_held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Proof of holding the read lock of an [`RwLock`], until released or dropped.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct ReadGuard {
    hold: Hold,
    _registered: Registration,
}

/// Proof of holding the write lock of an [`RwLock`], until released or dropped.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct WriteGuard {
    hold: Hold,
    registered: Registration,
}

/// Counts a guard in its instance's bookkeeping until dropped.
#[derive(Debug)]
struct Registration {
    rw: RwLock,
    /// Our write node's path, for a write guard.
    writer_path: Option<String>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut held = self.rw.lock_held();
        match &self.writer_path {
            Some(path) => {
                if held.writer.as_ref().is_some_and(|(p, _, _)| p == path) {
                    held.writer = None;
                }
            }
            None => held.readers = held.readers.saturating_sub(1),
        }
    }
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
        self.hold.release().await
    }

    crate::hold::guard_methods!(hold, rw_token_doc!());

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
        self.hold.release().await
    }

    crate::hold::guard_methods!(hold, rw_token_doc!());

    /// Takes the read lock while holding the write lock (Curator's downgrade, first step):
    /// the read node ties with our write node and is granted at once. Release this guard
    /// afterwards to finish the downgrade.
    ///
    /// # Errors
    /// [`LockError::Lost`] if our write node is gone; the client's errors.
    pub async fn downgrade_read(&self) -> Result<ReadGuard, LockError> {
        let node = self.hold.node();
        let suffix = suffix_after(&node.name, WRITE_MARKER)
            .unwrap_or_default()
            .to_owned();
        let tie = Tie {
            suffix,
            writer_path: node.path.clone(),
            writer_token: self.hold.fencing_token(),
        };
        self.registered
            .rw
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
