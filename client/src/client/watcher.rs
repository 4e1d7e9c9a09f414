//! Watchers handed to callers: one-shot futures, persistent event streams, the state stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{broadcast, mpsc, oneshot};

use super::Inner;
use crate::driver::Command;
use crate::proto::{EventType, KeeperState};
use crate::session::{SessionState, WatcherId};

pub use crate::session::WatchedEvent;

/// A one-shot watch: resolves with the event that fired it.
///
/// Resolves with an event of type [`EventType::None`] and state `Expired`/`Closed`/
/// `AuthFailed` if the session ends first; it does not resolve on a mere disconnection (the
/// watch is restored on the next connection). Dropping it unregisters the local watcher.
#[derive(Debug)]
#[must_use = "a watcher does nothing unless awaited"]
pub struct OneshotWatcher {
    rx: oneshot::Receiver<WatchedEvent>,
    guard: WatcherGuard,
}

impl OneshotWatcher {
    pub(crate) fn new(
        rx: oneshot::Receiver<WatchedEvent>,
        id: WatcherId,
        inner: Arc<Inner>,
    ) -> Self {
        Self {
            rx,
            guard: WatcherGuard {
                id,
                inner,
                done: false,
            },
        }
    }
}

impl Future for OneshotWatcher {
    type Output = WatchedEvent;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<WatchedEvent> {
        let this = &mut *self;
        match Pin::new(&mut this.rx).poll(cx) {
            Poll::Ready(Ok(event)) => {
                this.guard.done = true;
                Poll::Ready(this.guard.inner.client_event(event))
            }
            // The driver is gone: the client was dropped or closed.
            Poll::Ready(Err(_)) => {
                this.guard.done = true;
                Poll::Ready(closed_event())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A persistent (or persistent recursive) watch: a stream of events.
///
/// Yields every matching event until the watch is removed or the session ends (the last
/// event then has type [`EventType::None`]). The stream holds at most the configured number
/// of undelivered events; a consumer that falls that far behind loses the watch and
/// [`next`](Self::next) returns `None` after the buffered events. Dropping it unregisters the
/// local watcher.
#[derive(Debug)]
pub struct PersistentWatcher {
    rx: mpsc::Receiver<WatchedEvent>,
    guard: WatcherGuard,
}

impl PersistentWatcher {
    pub(crate) fn new(rx: mpsc::Receiver<WatchedEvent>, id: WatcherId, inner: Arc<Inner>) -> Self {
        Self {
            rx,
            guard: WatcherGuard {
                id,
                inner,
                done: false,
            },
        }
    }

    /// The next event, or `None` once the watch has ended.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is never lost by dropping the future.
    pub async fn next(&mut self) -> Option<WatchedEvent> {
        let event = self.rx.recv().await?;
        Some(self.guard.inner.client_event(event))
    }
}

/// The session's state changes, in order.
///
/// A receiver that falls more than 64 changes behind skips the oldest ones.
#[derive(Debug)]
pub struct StateStream {
    rx: broadcast::Receiver<SessionState>,
}

impl StateStream {
    pub(crate) fn new(rx: broadcast::Receiver<SessionState>) -> Self {
        Self { rx }
    }

    /// The next state change, or `None` once the client's driver has stopped.
    pub async fn next(&mut self) -> Option<SessionState> {
        loop {
            match self.rx.recv().await {
                Ok(state) => return Some(state),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// Unregisters the local watcher when its handle is dropped before it finished.
#[derive(Debug)]
struct WatcherGuard {
    id: WatcherId,
    inner: Arc<Inner>,
    done: bool,
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        if !self.done {
            // Best effort: if the command queue is full the entry is dropped when the watch
            // fires or the session ends.
            let _ = self
                .inner
                .commands
                .try_send(Command::RemoveWatcher(self.id));
        }
    }
}

fn closed_event() -> WatchedEvent {
    WatchedEvent {
        event_type: EventType::None,
        state: KeeperState::Closed,
        path: String::new(),
        zxid: -1,
    }
}
