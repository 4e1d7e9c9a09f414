//! A granted lock node and its watchdog: lost-lock detection, fencing, release.
//!
//! Every guard wraps a [`Hold`]. Its one background task watches the session's lease, the
//! session state and our own node (a getData watch, re-armed) and publishes the first
//! [`LostReason`]; it ends when that happens or when the guard is released or dropped.
//!
//! The lease rule (docs/lease.md): a hold is trusted until the session's lease deadline (the
//! send instant of the newest request the server answered, plus the session timeout) less
//! [`lease_margin`], whatever the connection state says: received bytes prove nothing about
//! what the server heard from us.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zkwire::{Client, Error, EventType, KeeperState, Op, OpResult, SessionState};

use crate::cleanup::{self, Job};
use crate::error::{LockError, LostReason};
use crate::internals::{backoff, Node};
use crate::options::{lease_margin, LockOptions};

/// A held lock node.
#[derive(Debug)]
pub(crate) struct Hold {
    client: Client,
    node: Node,
    /// The fencing token: our node's czxid, or the tied writer's for a downgrade's read node.
    token: i64,
    /// A margin before the lease deadline larger than the default, if configured.
    margin: Option<Duration>,
    lost: watch::Receiver<Option<LostReason>>,
    monitor: JoinHandle<()>,
    /// Dropping deletes the node (in the background) unless released.
    armed: bool,
}

impl Hold {
    /// Starts watching a node we were just granted.
    pub(crate) fn new(client: Client, node: Node, options: &LockOptions) -> Self {
        let (tx, rx) = watch::channel(None);
        let limits = Limits {
            grace: options.disconnect_grace,
            margin: options.lease_margin,
        };
        let monitor = tokio::spawn(monitor(
            client.clone(),
            node.path.clone(),
            node.stat.mzxid,
            limits,
            tx,
        ));
        Self {
            client,
            token: node.stat.czxid,
            node,
            margin: options.lease_margin,
            lost: rx,
            monitor,
            armed: true,
        }
    }

    pub(crate) fn is_held(&self) -> bool {
        self.lost.borrow().is_none() && !self.monitor.is_finished()
    }

    pub(crate) fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let mut rx = self.lost.clone();
        async move {
            loop {
                if let Some(reason) = *rx.borrow_and_update() {
                    return reason;
                }
                if rx.changed().await.is_err() {
                    return rx.borrow().unwrap_or(LostReason::Released);
                }
            }
        }
    }

    pub(crate) fn fencing_token(&self) -> i64 {
        self.token
    }

    /// A hold tied to a write hold reports the writer's token, so that tokens never go
    /// backwards for the next conflicting holder (a writer queued between our writer and
    /// our read node has a smaller czxid than the read node).
    pub(crate) fn with_fencing_token(mut self, token: i64) -> Self {
        self.token = token;
        self
    }

    /// Until when the hold may be trusted: the lease deadline less the margin; `None` once
    /// lost (or released).
    pub(crate) fn trusted_until(&self) -> Option<std::time::Instant> {
        if !self.is_held() {
            return None;
        }
        let margin = margin_for(&self.client, self.margin);
        self.client.lease_deadline()?.checked_sub(margin)
    }

    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `ops` in a multi preceded by `check(our node, any version)`.
    pub(crate) async fn multi_fenced(&self, ops: &[Op]) -> Result<Vec<OpResult>, LockError> {
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::check(self.node.path.clone(), -1));
        all.extend_from_slice(ops);
        match self.client.multi(&all).await {
            Ok(results) => Ok(results.into_iter().skip(1).collect()),
            Err(Error::MultiFailed { index: 0, error }) => match *error {
                Error::NoNode => Err(LockError::Lost(LostReason::NodeDeleted)),
                other => Err(other.into()),
            },
            Err(Error::MultiFailed { index, error }) => Err(Error::MultiFailed {
                index: index - 1,
                error,
            }
            .into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the node, retrying until it is gone or the session is over.
    ///
    /// Every error but the end of the session is retried with backoff (as Curator's
    /// guaranteed delete): even one a retry cannot fix by itself, such as `NotReadOnly` while
    /// a read-only server serves us, or `NoAuth` after an ACL change, may clear later, and
    /// until then the node would keep the lock from everyone. A caller that cannot wait drops
    /// the future: the cleanup worker then carries on in the background.
    pub(crate) async fn release(mut self) -> Result<(), LockError> {
        self.monitor.abort();
        let lost_before = *self.lost.borrow();
        let mut attempt = 0;
        let mut warned = false;
        let deleted = loop {
            match self.client.delete(&self.node.path, None).await {
                Ok(()) => break Ok(()),
                // After a retry, NoNode most likely means our own earlier delete was applied
                // and only its reply was lost; a deletion by someone else while we held the
                // lock is caught below through `lost_before`.
                Err(Error::NoNode) if attempt > 0 => break Ok(()),
                Err(Error::NoNode) => break Err(LockError::Lost(LostReason::NodeDeleted)),
                Err(e) if e.is_terminal() => {
                    break Err(LockError::Lost(LostReason::SessionEnded(ended(&e))))
                }
                Err(e) => {
                    if !e.is_retryable() && !std::mem::replace(&mut warned, true) {
                        tracing::warn!(node = self.node.path, error = %e, "cannot delete our lock node yet; retrying until the session ends");
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt = attempt.saturating_add(1);
                }
            }
        };
        self.armed = false;
        match (deleted, lost_before) {
            (Ok(()), Some(reason)) => Err(LockError::Lost(reason)),
            (result, _) => result,
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.monitor.abort();
        if self.armed {
            cleanup::enqueue(&self.client, Job::Delete(self.node.path.clone()));
        }
    }
}

/// What, besides the default lease rule, may end a hold early.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Lost after this long disconnected.
    grace: Option<Duration>,
    /// A larger margin before the lease deadline.
    margin: Option<Duration>,
}

/// Publishes the first reason the hold cannot be trusted any more.
async fn monitor(
    client: Client,
    path: String,
    mzxid: i64,
    limits: Limits,
    tx: watch::Sender<Option<LostReason>>,
) {
    let reason = watch_hold(&client, &path, mzxid, limits).await;
    tracing::debug!(node = path, %reason, "lock hold lost");
    let _ = tx.send(Some(reason));
}

async fn watch_hold(client: &Client, path: &str, mzxid: i64, limits: Limits) -> LostReason {
    // Subscribe first, then read the state: no change can slip between the two.
    let mut states = client.state_stream();
    let mut disconnected_at = match client.state() {
        s if s.is_terminal() => return LostReason::SessionEnded(s),
        SessionState::Connected => None,
        _ => Some(Instant::now()),
    };
    let node = node_changed(client, path, mzxid);
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
                    (since, _) => LostReason::Unacknowledged(since.unwrap_or_default()),
                };
            }
            state = states.next() => match state {
                None => return LostReason::SessionEnded(SessionState::Closed),
                Some(s) if s.is_terminal() => return LostReason::SessionEnded(s),
                Some(SessionState::Connected) => disconnected_at = None,
                // Disconnected, Connecting, or a read-only server (not the quorum).
                Some(_) => {
                    disconnected_at.get_or_insert_with(Instant::now);
                }
            },
            () = sleep_until(grace_end) => {
                let since = disconnected_at.map_or(Duration::ZERO, |at| at.elapsed());
                return LostReason::Disconnected(since);
            }
        }
    }
}

/// Resolves when our node is deleted or its data changes (or the session ends), keeping a
/// getData watch on it.
async fn node_changed(client: &Client, path: &str, mzxid: i64) -> LostReason {
    let mut attempt = 0;
    loop {
        match client.get_data_and_watch(path).await {
            Ok((_, stat, _)) if stat.mzxid != mzxid => return LostReason::NodeChanged,
            Ok((_, _, watcher)) => {
                let event = watcher.await;
                match event.event_type {
                    EventType::NodeDeleted => return LostReason::NodeDeleted,
                    EventType::NodeDataChanged => return LostReason::NodeChanged,
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
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(e) => {
                // E.g. NoAuth on our own node: the session state still tells about the hold.
                tracing::warn!(node = path, error = %e, "cannot watch our lock node");
                return std::future::pending().await;
            }
        }
    }
}

/// The margin before the lease deadline: [`lease_margin`] of the negotiated session timeout,
/// or the configured one if larger.
fn margin_for(client: &Client, configured: Option<Duration>) -> Duration {
    let default = client
        .session_timeout()
        .map_or(Duration::ZERO, lease_margin);
    configured.map_or(default, |m| m.max(default))
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The session state a terminal error stands for.
pub(crate) fn ended(e: &Error) -> SessionState {
    match e {
        Error::SessionExpired => SessionState::Expired,
        Error::AuthFailed | Error::SessionClosedRequireSaslAuth => SessionState::AuthFailed,
        _ => SessionState::Closed,
    }
}
