//! A hold's watchdog: the one task that watches the session's lease, the session state and
//! our node, and publishes the first reason the hold cannot be trusted any more.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zkwire::{Backoff, Client, Error, EventType, KeeperState, SessionState, Stat};

use super::ended;
use crate::error::LostReason;
use crate::internals::Node;
use crate::revoke::REVOKE_MESSAGE;
use crate::trust::margin_for;

/// The watchdog of one hold: what it publishes, and its task once started.
#[derive(Debug)]
pub(super) struct Watchdog {
    lost: watch::Receiver<Option<LostReason>>,
    /// Becomes true when someone writes [`REVOKE_MESSAGE`] into our node.
    revoked: watch::Receiver<bool>,
    /// The senders, kept until a question about the hold is asked inside a tokio runtime,
    /// which starts the task with them. A first question asked outside one (from a plain
    /// thread) must leave neither the hold without a watchdog for its life nor `lost()`
    /// resolving at once; until then only the lease and the session state are consulted.
    unstarted: Mutex<Option<Signals>>,
    task: OnceLock<JoinHandle<()>>,
}

impl Watchdog {
    pub(super) fn new() -> Self {
        let (lost, lost_rx) = watch::channel(None);
        let (revoked, revoked_rx) = watch::channel(false);
        Self {
            lost: lost_rx,
            revoked: revoked_rx,
            unstarted: Mutex::new(Some(Signals { lost, revoked })),
            task: OnceLock::new(),
        }
    }

    /// Starts the task on the current runtime, if it has not started (or been stopped) and
    /// there is one.
    pub(super) fn start(&self, client: &Client, node: &Node, limits: Limits) {
        if self.task.get().is_some() {
            return;
        }
        let Ok(runtime) = Handle::try_current() else {
            return;
        };
        // Held while spawning, so that `stop` finds the task once the signals are gone.
        let mut unstarted = self
            .unstarted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(signals) = unstarted.take() {
            let (path, stat) = (node.path.clone(), node.stat);
            let task = runtime.spawn(monitor(client.clone(), path, stat, limits, signals));
            let _ = self.task.set(task);
        }
    }

    /// Stops the task, or keeps it from ever starting (its receivers then see the end).
    pub(super) fn stop(&self) {
        let mut unstarted = self
            .unstarted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        unstarted.take();
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }

    /// The first reason the hold was lost, once published.
    pub(super) fn lost(&self) -> &watch::Receiver<Option<LostReason>> {
        &self.lost
    }

    /// Whether a revocation was requested.
    pub(super) fn revoked(&self) -> &watch::Receiver<bool> {
        &self.revoked
    }

    /// Whether the task was started (it may have ended since).
    pub(super) fn started(&self) -> bool {
        self.task.get().is_some()
    }

    /// Whether the task ran and has ended (it ends only after publishing, or when stopped).
    pub(super) fn finished(&self) -> bool {
        self.task.get().is_some_and(JoinHandle::is_finished)
    }
}

/// What, besides the default lease rule, may end a hold early.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Lost after this long disconnected.
    pub(super) grace: Option<Duration>,
    /// A larger margin before the lease deadline.
    pub(super) margin: Option<Duration>,
}

/// What the monitor publishes.
#[derive(Debug)]
struct Signals {
    /// The first reason the hold cannot be trusted any more.
    lost: watch::Sender<Option<LostReason>>,
    /// Whether a revocation was requested.
    revoked: watch::Sender<bool>,
}

/// Publishes the first reason the hold cannot be trusted any more, and revocation requests
/// until then.
async fn monitor(client: Client, path: String, stat: Stat, limits: Limits, signals: Signals) {
    let reason = watch_hold(&client, &path, stat, limits, &signals).await;
    tracing::debug!(node = path, %reason, "lock hold lost");
    let _ = signals.lost.send(Some(reason));
}

async fn watch_hold(
    client: &Client,
    path: &str,
    stat: Stat,
    limits: Limits,
    signals: &Signals,
) -> LostReason {
    // Subscribe first, then read the state: no change can slip between the two.
    let mut states = client.state_stream();
    let ours = || stat.is_owned_by(client.session_id());
    // Started late (the watchdog starts at the first question about the hold), it counts
    // the grace from the disconnection itself, not from its own start.
    let mut disconnected_at = match client.state() {
        s if s.is_terminal() => return LostReason::SessionEnded(s),
        _ if !ours() => return LostReason::SessionEnded(SessionState::Expired),
        SessionState::Connected => None,
        _ => Some(disconnection(client)),
    };
    let node = node_changed(client, path, stat, &signals.revoked);
    tokio::pin!(node);
    let lease = client.lease_expiring(margin_for(client, limits.margin));
    tokio::pin!(lease);
    loop {
        let grace_end = limits
            .grace
            .zip(disconnected_at)
            .and_then(|(grace, at)| at.checked_add(grace));
        tokio::select! {
            reason = &mut node => return reason,
            unacknowledged = &mut lease => {
                return match (unacknowledged, client.state()) {
                    (_, s) if s.is_terminal() => LostReason::SessionEnded(s),
                    _ if !ours() => LostReason::SessionEnded(SessionState::Expired),
                    (since, _) => LostReason::Unacknowledged(since.unwrap_or_default()),
                };
            }
            state = states.next() => match state {
                None => return LostReason::SessionEnded(SessionState::Closed),
                Some(s) if s.is_terminal() => return LostReason::SessionEnded(s),
                Some(_) if !ours() => return LostReason::SessionEnded(SessionState::Expired),
                Some(SessionState::Connected) => {
                    disconnected_at = None;
                    // The handshake may have negotiated another T, and the margin follows
                    // it: judge by the same margin as `trusted_until` does.
                    lease.set(client.lease_expiring(margin_for(client, limits.margin)));
                }
                // Disconnected, Connecting, or a read-only server (not the quorum).
                Some(_) => {
                    disconnected_at.get_or_insert_with(|| disconnection(client));
                }
            },
            () = sleep_until(grace_end) => {
                let since = disconnected_at.map_or(Duration::ZERO, |at| at.elapsed());
                return LostReason::Disconnected(since);
            }
        }
    }
}

/// When `client`'s connection was lost (now, if it is connected again already).
fn disconnection(client: &Client) -> Instant {
    client
        .disconnected_since()
        .map_or_else(Instant::now, Instant::from_std)
}

/// Resolves when our node is deleted or its data changes (or the session ends), keeping a
/// getData watch on it. A write of [`REVOKE_MESSAGE`] is a revocation request, published on
/// `revoked`, not a loss (docs/recipes.md, "Revocation").
async fn node_changed(
    client: &Client,
    path: &str,
    mut known: Stat,
    revoked: &watch::Sender<bool>,
) -> LostReason {
    let mut backoff = Backoff::new();
    loop {
        match client.get_data_and_watch(path).await {
            Ok((data, stat, watcher)) => {
                if stat.mzxid != known.mzxid {
                    // The data now asks for revocation: however many writes led there (two
                    // revokers may race), it is a request, as Curator judges it by the data
                    // alone. Any other content is someone else's write: lost.
                    if data != REVOKE_MESSAGE {
                        return LostReason::NodeChanged;
                    }
                    if !revoked.send_replace(true) {
                        tracing::info!(node = path, "revocation requested");
                    }
                    known = stat;
                }
                let event = watcher.await;
                match event.event_type {
                    EventType::NodeDeleted => return LostReason::NodeDeleted,
                    // Re-read: a revocation, or a loss.
                    EventType::NodeDataChanged => {}
                    EventType::None => match event.state {
                        KeeperState::Expired => {
                            return LostReason::SessionEnded(SessionState::Expired)
                        }
                        KeeperState::AuthFailed => {
                            return LostReason::SessionEnded(SessionState::AuthFailed)
                        }
                        KeeperState::Closed => {
                            return LostReason::SessionEnded(SessionState::Closed)
                        }
                        _ => {}
                    },
                    // Nothing else fires a data watch; re-arm.
                    _ => {}
                }
            }
            Err(Error::NoNode) => return LostReason::NodeDeleted,
            Err(e) if e.is_terminal() => return LostReason::SessionEnded(ended(&e)),
            Err(e) if e.is_retryable() => {
                backoff.pause().await;
            }
            Err(e) => {
                // E.g. NoAuth on our own node: the session state still tells about the hold.
                tracing::warn!(node = path, error = %e, "cannot watch our lock node");
                return std::future::pending().await;
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
