//! The background task of a started recipe handle (a [`LeaderLatch`](crate::LeaderLatch), a
//! [`PersistentNode`](crate::PersistentNode)): at most one at a time, stopped by a close
//! signal that it watches.
//!
//! A task stays in its slot until it has ended, not only until it was told to close: a start
//! while it is still closing (deleting its node) gets a new task that waits for the old one's
//! end before it runs. Two would otherwise run side by side on one handle's state, the old
//! one's cleanup reading or undoing what the new one made.

use std::future::Future;
use std::sync::{Mutex as StdMutex, PoisonError};

use tokio::sync::watch;

/// The slot of a handle's background task.
#[derive(Debug, Default)]
pub(crate) struct Task(StdMutex<Option<Running>>);

#[derive(Debug)]
struct Running {
    close: watch::Sender<bool>,
    /// `true` once the task has ended (set by a drop guard: on a panic or an abort too).
    ended: watch::Receiver<bool>,
}

/// Marks its task ended when dropped.
struct EndedOnDrop(watch::Sender<bool>);

impl Drop for EndedOnDrop {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

impl Task {
    /// Whether the task runs (started, and neither told to close nor finished).
    pub(crate) fn is_running(&self) -> bool {
        self.slot().as_ref().is_some_and(Running::is_live)
    }

    /// Starts the task unless it runs: `make` is given the close signal (`true` once closed)
    /// and returns the task's work, spawned once any task still closing has ended. Holds the
    /// slot meanwhile, so that two starts at once start one task.
    pub(crate) fn start<F>(&self, make: impl FnOnce(watch::Receiver<bool>) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut slot = self.slot();
        if slot.as_ref().is_some_and(Running::is_live) {
            return;
        }
        let closing = slot.take().map(|old| old.ended);
        *slot = Some(Running::spawn(closing, make));
    }

    /// As [`start`](Self::start), in place of any task there is (told to close, and waited
    /// for); `make` also returns what this returns.
    pub(crate) fn replace<T, F>(&self, make: impl FnOnce(watch::Receiver<bool>) -> (F, T)) -> T
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut slot = self.slot();
        let closing = slot.take().map(|old| {
            old.close.send_replace(true);
            old.ended
        });
        let mut out = None;
        *slot = Some(Running::spawn(closing, |closed| {
            let (work, value) = make(closed);
            out = Some(value);
            work
        }));
        out.unwrap_or_else(|| unreachable!("Running::spawn calls make"))
    }

    /// Signals the task to close and waits until it has ended.
    ///
    /// # Cancel safety
    /// Cancel safe: the signal is sent at the first poll, and the task stays in the slot
    /// until it has ended, so that a start meanwhile waits for it.
    pub(crate) async fn close(&self) {
        let mut ended = {
            let slot = self.slot();
            let Some(running) = slot.as_ref() else { return };
            running.close.send_replace(true);
            running.ended.clone()
        };
        // The task ends by itself on the signal; a panic in it is not ours to resume.
        let _ = ended.wait_for(|ended| *ended).await;
        let mut slot = self.slot();
        if slot.as_ref().is_some_and(|r| r.ended.same_channel(&ended)) {
            *slot = None;
        }
    }

    /// Signals the task to close, without waiting (for `Drop`).
    pub(crate) fn signal_close(&mut self) {
        let slot = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = slot.as_ref() {
            running.close.send_replace(true);
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Running {
    /// Spawns `make`'s work, run once the task `after` (one still closing) has ended.
    fn spawn<F>(
        after: Option<watch::Receiver<bool>>,
        make: impl FnOnce(watch::Receiver<bool>) -> F,
    ) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (close, closed) = watch::channel(false);
        let (ended_tx, ended) = watch::channel(false);
        let work = make(closed);
        tokio::spawn(async move {
            let _ended = EndedOnDrop(ended_tx);
            if let Some(mut previous) = after {
                let _ = previous.wait_for(|ended| *ended).await;
            }
            work.await;
        });
        Self { close, ended }
    }

    /// Started, not told to close, not ended.
    fn is_live(&self) -> bool {
        !*self.close.borrow() && !*self.ended.borrow()
    }
}
