//! The background task of a started recipe handle (a [`LeaderLatch`](crate::LeaderLatch), a
//! [`PersistentNode`](crate::PersistentNode)): at most one at a time, stopped by a close
//! signal that it watches.

use std::sync::{Mutex as StdMutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The slot of a handle's background task.
#[derive(Debug, Default)]
pub(crate) struct Task(StdMutex<Option<Running>>);

#[derive(Debug)]
struct Running {
    close: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

impl Task {
    /// Whether the task runs (started, and neither closed nor finished).
    pub(crate) fn is_running(&self) -> bool {
        let slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().is_some_and(|r| !r.handle.is_finished())
    }

    /// Starts the task unless it runs: `spawn` is given the close signal (`true` once closed)
    /// and returns the spawned task. Holds the slot meanwhile, so that two starts at once
    /// spawn one task.
    pub(crate) fn start(&self, spawn: impl FnOnce(watch::Receiver<bool>) -> JoinHandle<()>) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_none_or(|r| r.handle.is_finished()) {
            *slot = Some(Running::spawn(spawn));
        }
    }

    /// As [`start`](Self::start), in place of any task there is; `spawn` also returns what
    /// this returns.
    pub(crate) fn replace<T>(
        &self,
        spawn: impl FnOnce(watch::Receiver<bool>) -> (JoinHandle<()>, T),
    ) -> T {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = None;
        *slot = Some(Running::spawn(|closed| {
            let (handle, value) = spawn(closed);
            out = Some(value);
            handle
        }));
        out.unwrap_or_else(|| unreachable!("Running::spawn calls spawn"))
    }

    /// Signals the task to close and waits until it has ended.
    pub(crate) async fn close(&self) {
        let running = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(Running { close, handle }) = running {
            close.send_replace(true);
            // The task ends by itself on the signal; a panic in it is not ours to resume.
            let _ = handle.await;
        }
    }

    /// Signals the task to close, without waiting (for `Drop`).
    pub(crate) fn signal_close(&mut self) {
        let slot = self.0.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = slot.take() {
            running.close.send_replace(true);
        }
    }
}

impl Running {
    fn spawn(spawn: impl FnOnce(watch::Receiver<bool>) -> JoinHandle<()>) -> Self {
        let (close, closed) = watch::channel(false);
        Self {
            close,
            handle: spawn(closed),
        }
    }
}
