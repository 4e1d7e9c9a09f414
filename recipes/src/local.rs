//! The in-process side of a mutex: the FIFO queue in front of the distributed one.
//!
//! Contenders of one client on one lock first queue here, on a one-permit FIFO semaphore;
//! only the head contends in ZooKeeper. So a client has at most one node per lock, and one
//! watch, however many of its tasks wait (docs/recipes.md, "Reentrancy, the local queue and
//! the coordinator"). A grant goes back to ZooKeeper every time: the next
//! local waiter creates a fresh node at the end of the distributed queue, so other processes
//! keep their FIFO turn — unless the lock's options opt into a local hand-off, which passes
//! the node itself to up to N local waiters in a row.
//!
//! The gate of a lock lives in the client's [`Coordinator`](crate::coordinator::Coordinator),
//! keyed by the lock's server path: every handle of one client on one lock (clones, chroot
//! handles, spellings with a trailing `/`) meets in it, across session renewals too.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::hold::Hold;

/// The in-process state of one lock of one client.
#[derive(Debug)]
pub(crate) struct Gate {
    /// One permit, granted in request order: the local FIFO queue.
    queue: Arc<Semaphore>,
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
struct Waiter<'a> {
    gate: &'a Gate,
    served: bool,
}

impl Drop for Waiter<'_> {
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

impl Default for Gate {
    fn default() -> Self {
        Self {
            queue: Arc::new(Semaphore::new(1)),
            handoff: Mutex::default(),
        }
    }
}

impl Gate {
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
}
