//! Watchers handed to callers: one-shot futures, persistent event streams, the state stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::ReusableBoxFuture;

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
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::EventType;
/// // Keep a local copy of /config up to date: read, wait for the change, read again.
/// loop {
///     let (data, _stat, changed) = client.get_data_and_watch("/config").await?;
///     println!("config is {} bytes", data.len());
///     match changed.await.event_type {
///         EventType::NodeDataChanged => continue,
///         EventType::NodeDeleted => println!("config deleted"),
///         _ => {} // the session ended
///     }
///     break;
/// }
/// # Ok(()) }
/// ```
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
            guard: WatcherGuard::new(id, inner),
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
/// Yields every matching event until the watch is removed (the last event is then
/// [`EventType::PersistentWatchRemoved`]) or the session ends (the last event then has type
/// [`EventType::None`]). The stream holds at most the configured number of undelivered
/// events; a consumer that falls that far behind loses the watch and [`next`](Self::next)
/// returns `None` after the buffered events. Dropping it unregisters the local watcher.
///
/// Neither of those two removes the server's watch: the server goes on sending its events,
/// which the client reads and drops, until the connection ends (the watch is not restored on
/// the next one). [`Client::remove_watches`](crate::Client::remove_watches) removes it, and
/// every local watcher of its kind on that path.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::{AddWatchMode, EventType};
/// // Every change anywhere under /services, until the session ends.
/// let mut changes = client
///     .add_watch("/services", AddWatchMode::PersistentRecursive)
///     .await?;
/// while let Some(event) = changes.next().await {
///     if event.event_type == EventType::None {
///         break; // the session ended
///     }
///     println!("{:?} at {}", event.event_type, event.path);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PersistentWatcher {
    rx: mpsc::Receiver<WatchedEvent>,
    guard: WatcherGuard,
}

impl PersistentWatcher {
    pub(crate) fn new(rx: mpsc::Receiver<WatchedEvent>, id: WatcherId, inner: Arc<Inner>) -> Self {
        Self {
            rx,
            guard: WatcherGuard::new(id, inner),
        }
    }

    /// The next event, or `None` once the watch has ended. The watcher is also a
    /// [`Stream`] of the same events.
    ///
    /// [`Stream`]: https://docs.rs/futures-core/0.3/futures_core/stream/trait.Stream.html
    ///
    /// ```no_run
    /// # async fn run(mut changes: zkwire::PersistentWatcher) {
    /// while let Some(event) = changes.next().await {
    ///     println!("{:?} at {}", event.event_type, event.path);
    /// }
    /// println!("the watch has ended");
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: an event is never lost by dropping the future.
    pub async fn next(&mut self) -> Option<WatchedEvent> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<WatchedEvent>> {
        self.rx
            .poll_recv(cx)
            .map(|e| e.map(|e| self.guard.inner.client_event(e)))
    }
}

impl futures_core::Stream for PersistentWatcher {
    type Item = WatchedEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchedEvent>> {
        self.get_mut().poll_event(cx)
    }
}

/// The session's state changes, in order.
///
/// A receiver that falls more than 64 changes behind skips the oldest ones.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) {
/// use zkwire::SessionState;
/// let mut states = client.state_stream();
/// while let Some(state) = states.next().await {
///     match state {
///         SessionState::Disconnected => eprintln!("connection lost; the session may live on"),
///         SessionState::Connected => eprintln!("connected"),
///         s if s.is_terminal() => {
///             eprintln!("session over: {s:?}");
///             break;
///         }
///         _ => {}
///     }
/// }
/// # }
/// ```
pub struct StateStream {
    /// The receive in progress; it hands the receiver back with what it got.
    next: ReusableBoxFuture<'static, (Option<SessionState>, broadcast::Receiver<SessionState>)>,
}

impl std::fmt::Debug for StateStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStream").finish_non_exhaustive()
    }
}

/// Receives the next state, skipping what a slow receiver missed; `None` once the driver is
/// gone.
async fn next_state(
    mut rx: broadcast::Receiver<SessionState>,
) -> (Option<SessionState>, broadcast::Receiver<SessionState>) {
    loop {
        match rx.recv().await {
            Ok(state) => return (Some(state), rx),
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return (None, rx),
        }
    }
}

impl StateStream {
    pub(crate) fn new(rx: broadcast::Receiver<SessionState>) -> Self {
        Self {
            next: ReusableBoxFuture::new(next_state(rx)),
        }
    }

    /// The next state change, or `None` once the client's driver has stopped and no
    /// [`StatsHandle`](crate::StatsHandle) is left (the terminal state comes first either
    /// way). The stream is also a [`Stream`] of the same states.
    ///
    /// [`Stream`]: https://docs.rs/futures-core/0.3/futures_core/stream/trait.Stream.html
    ///
    /// ```no_run
    /// # async fn run(mut states: zkwire::StateStream) {
    /// while let Some(state) = states.next().await {
    ///     if state.is_terminal() {
    ///         eprintln!("session over: {state:?}");
    ///         break;
    ///     }
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: a state is never lost by dropping the future.
    pub async fn next(&mut self) -> Option<SessionState> {
        std::future::poll_fn(|cx| self.poll_state(cx)).await
    }

    fn poll_state(&mut self, cx: &mut Context<'_>) -> Poll<Option<SessionState>> {
        let (state, rx) = std::task::ready!(self.next.poll(cx));
        self.next.set(next_state(rx));
        Poll::Ready(state)
    }
}

impl futures_core::Stream for StateStream {
    type Item = SessionState;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<SessionState>> {
        self.get_mut().poll_state(cx)
    }
}

/// Unregisters the local watcher when its handle is dropped before it finished.
#[derive(Debug)]
struct WatcherGuard {
    id: WatcherId,
    inner: Arc<Inner>,
    done: bool,
}

impl WatcherGuard {
    fn new(id: WatcherId, inner: Arc<Inner>) -> Self {
        Self {
            id,
            inner,
            done: false,
        }
    }
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let removal = Command::RemoveWatcher(self.id);
        if let Err(TrySendError::Full(removal)) = self.inner.commands.try_send(removal) {
            // A full queue must not lose the removal: the entry of a watcher the server never
            // set (its read failed) would stay for the client's life. Outside a runtime it is
            // lost all the same, with nothing to wait in.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let commands = self.inner.commands.clone();
                runtime.spawn(async move {
                    let _ = commands.send(removal).await;
                });
            }
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
