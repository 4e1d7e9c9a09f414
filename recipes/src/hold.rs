//! A granted lock node and its watchdog: lost-lock detection, fencing, release.
//!
//! Every guard wraps a [`Hold`]. Its one background task watches the session state and our
//! own node (a getData watch, re-armed) and publishes the first [`LostReason`]; it ends when
//! that happens or when the guard is released or dropped.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zkwire::{Client, Error, EventType, KeeperState, Op, OpResult, SessionState};

use crate::cleanup::{self, Job};
use crate::error::{LockError, LostReason};
use crate::internals::{backoff, Node};
use crate::options::DISCONNECT_GRACE_RATIO;

/// A held lock node.
#[derive(Debug)]
pub(crate) struct Hold {
    client: Client,
    node: Node,
    lost: watch::Receiver<Option<LostReason>>,
    monitor: JoinHandle<()>,
    /// Dropping deletes the node (in the background) unless released.
    armed: bool,
}

impl Hold {
    /// Starts watching a node we were just granted.
    pub(crate) fn new(client: Client, node: Node, grace: Option<Duration>) -> Self {
        let (tx, rx) = watch::channel(None);
        let monitor = tokio::spawn(monitor(
            client.clone(),
            node.path.clone(),
            node.stat.mzxid,
            grace,
            tx,
        ));
        Self {
            client,
            node,
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
        self.node.stat.czxid
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

    /// Deletes the node, retrying retryable errors until it is gone or the session is over.
    pub(crate) async fn release(mut self) -> Result<(), LockError> {
        self.monitor.abort();
        let lost_before = *self.lost.borrow();
        let mut attempt = 0;
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
                Err(e) if e.is_retryable() => {
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => break Err(e.into()),
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

/// Publishes the first reason the hold cannot be trusted any more.
async fn monitor(
    client: Client,
    path: String,
    mzxid: i64,
    grace: Option<Duration>,
    tx: watch::Sender<Option<LostReason>>,
) {
    let reason = watch_hold(&client, &path, mzxid, grace).await;
    tracing::debug!(node = path, %reason, "lock hold lost");
    let _ = tx.send(Some(reason));
}

async fn watch_hold(
    client: &Client,
    path: &str,
    mzxid: i64,
    grace: Option<Duration>,
) -> LostReason {
    // Subscribe first, then read the state: no change can slip between the two.
    let mut states = client.state_stream();
    let mut disconnected_at = match client.state() {
        s if s.is_terminal() => return LostReason::SessionEnded(s),
        SessionState::Connected => None,
        _ => Some(Instant::now()),
    };
    let node = node_changed(client, path, mzxid);
    tokio::pin!(node);
    loop {
        let deadline = disconnected_at.map(|at| at + grace_for(client, grace));
        tokio::select! {
            reason = &mut node => return reason,
            state = states.next() => match state {
                None => return LostReason::SessionEnded(SessionState::Closed),
                Some(s) if s.is_terminal() => return LostReason::SessionEnded(s),
                Some(SessionState::Connected) => disconnected_at = None,
                // Disconnected, Connecting, or a read-only server (not the quorum).
                Some(_) => {
                    disconnected_at.get_or_insert_with(Instant::now);
                }
            },
            () = sleep_until(deadline) => {
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

/// The grace before a disconnection counts as lost: the configured one, or T/4 of the
/// negotiated session timeout T.
fn grace_for(client: &Client, grace: Option<Duration>) -> Duration {
    grace.unwrap_or_else(|| {
        let (num, den) = DISCONNECT_GRACE_RATIO;
        client
            .session_timeout()
            .map_or(Duration::ZERO, |t| t * num / den)
    })
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
