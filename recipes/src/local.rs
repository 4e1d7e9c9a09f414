//! The in-process side of a lock: who in this process holds it, and the FIFO queue in front
//! of the distributed one.
//!
//! Contenders of one session on one lock path first queue here, on a one-permit FIFO
//! semaphore; only the head contends in ZooKeeper. So a process has at most one node per lock
//! and session, and one watch, however many of its tasks wait (docs/recipes.md,
//! "Reentrancy and the local queue"). A grant goes back to ZooKeeper every time: the next
//! local waiter creates a fresh node at the end of the distributed queue, so other processes
//! keep their FIFO turn — unless the lock's options opt into a local hand-off, which passes
//! the node itself to up to N local waiters in a row.
//!
//! The holder is a tokio task, as Curator's is a thread: the same task locking again only
//! counts, with no request. Outside a task (inside `block_on`), the thread is the holder.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::hold::Hold;

/// Who holds a lock within this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// A tokio task.
    Task(tokio::task::Id),
    /// A thread running a future outside any task (`Runtime::block_on`).
    Thread(std::thread::ThreadId),
}

impl Owner {
    /// The caller's identity.
    pub(crate) fn current() -> Self {
        tokio::task::try_id().map_or_else(|| Self::Thread(std::thread::current().id()), Self::Task)
    }
}

/// The in-process state of one lock (one session, one path).
#[derive(Debug)]
pub(crate) struct Gate<T> {
    /// One permit, granted in request order: the local FIFO queue.
    queue: Arc<Semaphore>,
    /// The current holder and its shared hold, while one is granted.
    holder: Mutex<Option<Holder<T>>>,
    /// Numbers the grants, so that a grant only ever clears its own record.
    grants: AtomicU64,
    /// The local waiters and a hold handed to them.
    handoff: Mutex<Handoff>,
}

/// The local waiters, and a hold parked for the next of them (the opt-in local hand-off).
/// One lock covers both, so that a hold is never parked with no one left to take it.
#[derive(Debug, Default)]
struct Handoff {
    waiting: usize,
    /// The hold and how many hand-offs it has had.
    parked: Option<(Hold, u32)>,
}

/// A hold handed over in process: the node and how many hand-offs it has had.
pub(crate) type Parked = (Hold, u32);

/// Counts a task waiting for the local queue's head; dropped unserved (cancelled), it gives
/// a parked hold back if no one else waits for it.
struct Waiter<'a, T> {
    gate: &'a Gate<T>,
    served: bool,
}

impl<T> Drop for Waiter<'_, T> {
    fn drop(&mut self) {
        if self.served {
            return;
        }
        let orphan = {
            let mut handoff = self.gate.lock_handoff();
            handoff.waiting -= 1;
            if handoff.waiting == 0 {
                handoff.parked.take()
            } else {
                None
            }
        };
        // Dropped outside the lock: the hold's node goes to the cleanup worker.
        drop(orphan);
    }
}

#[derive(Debug)]
struct Holder<T> {
    owner: Owner,
    grant: u64,
    hold: Weak<T>,
}

/// Keeps a grant recorded as the lock's holder; dropped (with the outermost guard), it
/// clears the record.
#[derive(Debug)]
pub(crate) struct Registration<T> {
    gate: Arc<Gate<T>>,
    grant: u64,
}

impl<T> Registration<T> {
    /// The gate this grant belongs to.
    pub(crate) fn gate(&self) -> &Arc<Gate<T>> {
        &self.gate
    }
}

impl<T> Drop for Registration<T> {
    fn drop(&mut self) {
        let mut holder = self.gate.lock_holder();
        if holder.as_ref().is_some_and(|h| h.grant == self.grant) {
            *holder = None;
        }
    }
}

impl<T> Default for Gate<T> {
    fn default() -> Self {
        Self {
            queue: Arc::new(Semaphore::new(1)),
            holder: Mutex::new(None),
            grants: AtomicU64::new(0),
            handoff: Mutex::default(),
        }
    }
}

impl<T> Gate<T> {
    /// The hold `owner` already has, if any (a reentrant acquire).
    pub(crate) fn held_by(&self, owner: Owner) -> Option<Arc<T>> {
        match &*self.lock_holder() {
            Some(h) if h.owner == owner => h.hold.upgrade(),
            _ => None,
        }
    }

    /// Waits for the head of the local queue; with it comes the hold the previous holder
    /// handed over, if it did. Cancel safe: a dropped wait leaves the queue (and gives back a
    /// hold parked for it if no one else waits).
    pub(crate) async fn enter(&self) -> (OwnedSemaphorePermit, Option<Parked>) {
        self.lock_handoff().waiting += 1;
        let mut waiter = Waiter {
            gate: self,
            served: false,
        };
        let Ok(permit) = Arc::clone(&self.queue).acquire_owned().await else {
            unreachable!("the local lock queue is never closed")
        };
        waiter.served = true;
        let mut handoff = self.lock_handoff();
        handoff.waiting -= 1;
        (permit, handoff.parked.take())
    }

    /// The head of the local queue if no one is in it, without waiting (and a hold parked
    /// for it, if any).
    pub(crate) fn try_enter(&self) -> Option<(OwnedSemaphorePermit, Option<Parked>)> {
        let permit = Arc::clone(&self.queue).try_acquire_owned().ok()?;
        Some((permit, self.lock_handoff().parked.take()))
    }

    /// Parks `hold` for the next local waiter, if one waits; otherwise gives it back. The
    /// caller lets the queue's head go after parking.
    pub(crate) fn park(&self, hold: Hold, handoffs: u32) -> Option<Hold> {
        let mut handoff = self.lock_handoff();
        if handoff.waiting == 0 {
            return Some(hold);
        }
        handoff.parked = Some((hold, handoffs));
        None
    }

    fn lock_handoff(&self) -> std::sync::MutexGuard<'_, Handoff> {
        self.handoff.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new grant's registration; [`record`](Self::record) it once its hold is shared.
    pub(crate) fn register(self: &Arc<Self>) -> Registration<T> {
        Registration {
            gate: Arc::clone(self),
            grant: self.grants.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Records `owner` as the holder of `hold`, granted under `registration`.
    pub(crate) fn record(&self, registration: &Registration<T>, owner: Owner, hold: &Arc<T>) {
        *self.lock_holder() = Some(Holder {
            owner,
            grant: registration.grant,
            hold: Arc::downgrade(hold),
        });
    }

    fn lock_holder(&self) -> std::sync::MutexGuard<'_, Option<Holder<T>>> {
        self.holder.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// States by session id and lock path.
type StateMap<S> = HashMap<(i64, String), Weak<S>>;

/// The in-process state of every lock of one kind, by session id and path: a [`Gate`] for
/// the mutex, the holders of each task for the read/write lock.
pub(crate) struct Registry<S> {
    states: OnceLock<Mutex<StateMap<S>>>,
}

impl<S: Default> Registry<S> {
    pub(crate) const fn new() -> Self {
        Self {
            states: OnceLock::new(),
        }
    }

    /// The state of `path` for session `session_id`, created on first use. It lives as long
    /// as an acquire or a guard of the lock holds it.
    pub(crate) fn get(&self, session_id: i64, path: &str) -> Arc<S> {
        let mut states = self
            .states
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Drop the entries no one holds any more, so the map stays as small as the set of
        // locks in use.
        states.retain(|_, state| state.strong_count() > 0);
        let key = (session_id, path.to_owned());
        if let Some(state) = states.get(&key).and_then(Weak::upgrade) {
            return state;
        }
        let state = Arc::new(S::default());
        states.insert(key, Arc::downgrade(&state));
        state
    }
}
