//! The task behind a [`TreeCache`](super::TreeCache): it owns the watch, reconciles the copy
//! with every node event, and resyncs after what may have been missed.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Sleep;
use zkwire::{
    path, AddWatchMode, Backoff, Client, Error, EventType, PersistentWatcher, SessionState, Stat,
};

use super::diff::{differences, newer};
use super::{CacheEvent, CachedNode, Selection};

/// Whether a read's error means the cache cannot hold the node: not allowed to read it, or
/// its reply is over the client's frame limit (which it skips, keeping the connection).
/// Either stays so until the node (or its ACL) changes; the rest of the tree is cached.
fn unreadable(e: &Error) -> bool {
    matches!(e, Error::NoAuth | Error::ReplyTooLarge { .. })
}

/// Waits for `timer`, for ever when there is none.
async fn until_due(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(timer) => timer.await,
        None => std::future::pending().await,
    }
}

/// Slots of the event stream that ordinary events leave free, so that the last two always
/// fit: a [`CacheEvent::Lagged`] still owed and `Stopped`.
pub(super) const RESERVED: usize = 2;

/// Waits until the stream behind `tx` has room for a [`CacheEvent::Lagged`] beyond the
/// [`RESERVED`] slots (for ever without `tx`); `false` if the consumer dropped the stream.
async fn room_for_lag(tx: Option<&mpsc::Sender<CacheEvent>>) -> bool {
    match tx {
        Some(tx) => tx.reserve_many(RESERVED + 1).await.is_ok(),
        None => std::future::pending().await,
    }
}

/// How long the cache waits for room in a full event stream before it goes on without its
/// consumer ([`Worker::emit`]): long enough for one that reads, even on a loaded machine,
/// to keep every event; short enough that a stream held and never read stalls the copy
/// once, briefly.
const PATIENCE: Duration = Duration::from_secs(1);

/// How long after an event's read failed the whole tree is read again.
const RESYNC_AFTER_FAILED_READ: Duration = Duration::from_millis(500);

/// The task behind a [`TreeCache`](super::TreeCache).
pub(super) struct Worker {
    pub(super) client: Client,
    pub(super) root: String,
    pub(super) selection: Selection,
    pub(super) nodes: Arc<RwLock<BTreeMap<String, CachedNode>>>,
    /// `None` once the consumer dropped the stream.
    pub(super) events: Option<mpsc::Sender<CacheEvent>>,
    /// Events that found the stream full since the consumer last had room
    /// ([`emit`](Self::emit)).
    pub(super) missed: u64,
    /// Nodes found unreadable (announced by [`CacheEvent::Unreadable`]) and not readable since.
    pub(super) unreadable: BTreeSet<String>,
}

/// A subtree as read: the selected nodes, and the nodes (or child lists) that were unreadable.
#[derive(Default)]
struct Read {
    tree: BTreeMap<String, CachedNode>,
    unreadable: BTreeSet<String>,
}

impl Worker {
    pub(super) async fn run(mut self, ready: oneshot::Sender<Result<(), Error>>) {
        let mut states = self.client.state_stream();
        let start = async {
            let watcher = self.watch().await?;
            let tree = self.read_tree().await?;
            Ok::<_, Error>((watcher, tree))
        };
        let (mut watcher, read) = match start.await {
            Ok(started) => started,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        *self.write() = read.tree.clone();
        let _ = ready.send(Ok(()));
        for (path, node) in read.tree {
            self.emit(CacheEvent::Created { path, node }).await;
        }
        self.note_unreadable(read.unreadable).await;
        self.emit(CacheEvent::Initialized).await;
        let stopped = self.follow(&mut watcher, &mut states).await;
        tracing::debug!(root = self.root, error = %stopped, "tree cache stopped");
        self.finish(stopped);
    }

    /// Applies events until the cache must stop; returns why.
    async fn follow(
        &mut self,
        watcher: &mut PersistentWatcher,
        states: &mut zkwire::StateStream,
    ) -> Error {
        let mut connected = self.client.state() == SessionState::Connected;
        // A resync due because an event's read failed (see below).
        let mut resync_due: Option<Pin<Box<Sleep>>> = None;
        loop {
            let lag = self.lag_sender();
            tokio::select! {
                open = room_for_lag(lag.as_ref()) => {
                    if open {
                        self.offer_lag(RESERVED);
                    } else {
                        self.events = None;
                    }
                }
                event = watcher.next() => match event {
                    // A session marker: the state stream says what to do.
                    Some(event) if event.event_type == EventType::None => {}
                    Some(event) => {
                        if let Err(e) = self.reconcile(&event.path).await {
                            // The resync after the next connection covers this node when
                            // the connection went; not when it stayed up (a request timeout,
                            // a busy server): then the change would be missed until the
                            // node changes again. So the tree is read again shortly.
                            tracing::debug!(path = event.path, error = %e, "cache read failed");
                            resync_due.get_or_insert_with(|| {
                                Box::pin(tokio::time::sleep(RESYNC_AFTER_FAILED_READ))
                            });
                        }
                    }
                    // The watch is gone: its queue overflowed, or the session ended. Setting
                    // it again tells which (it waits for a renewed session, and fails on a
                    // session that is over).
                    None => {
                        match self.watch().await {
                            Ok(renewed) => *watcher = renewed,
                            Err(e) => return e,
                        }
                        if let Err(e) = self.resync().await {
                            return e;
                        }
                    }
                },
                () = until_due(&mut resync_due) => {
                    resync_due = None;
                    if let Err(e) = self.resync().await {
                        return e;
                    }
                }
                state = states.next() => match state {
                    None => return Error::Closed,
                    Some(SessionState::Connected) if !connected => {
                        connected = true;
                        resync_due = None;
                        if let Err(e) = self.resync().await {
                            return e;
                        }
                    }
                    Some(SessionState::Connected) => {}
                    // Disconnected, Connecting, read-only, Expired (renewal may follow).
                    Some(_) => connected = false,
                },
            }
        }
    }

    /// The persistent recursive watch on the root, retried while the error is retryable.
    async fn watch(&self) -> Result<PersistentWatcher, Error> {
        let mut backoff = Backoff::new();
        loop {
            match self
                .client
                .add_watch(&self.root, AddWatchMode::PersistentRecursive)
                .await
            {
                Err(e) if e.is_retryable() => {
                    backoff.pause().await;
                }
                other => return other,
            }
        }
    }

    /// Reads the subtree again and emits the differences with the copy.
    async fn resync(&mut self) -> Result<(), Error> {
        let Read {
            tree: mut fresh,
            unreadable,
        } = self.read_tree().await?;
        let old = std::mem::take(&mut *self.write());
        // A node whose data did not change keeps the copy we had (and announced), even if
        // its child counters moved: the copy stays exactly what the events describe.
        for (path, node) in &mut fresh {
            if let Some(before) = old.get(path) {
                if !newer(&node.stat, &before.stat) && node.stat.czxid == before.stat.czxid {
                    *node = before.clone();
                }
            }
        }
        *self.write() = fresh.clone();
        for event in differences(&old, &fresh) {
            self.emit(event).await;
        }
        self.note_unreadable(unreadable).await;
        Ok(())
    }

    /// Makes `now` the set of unreadable nodes, announcing those not already in it.
    async fn note_unreadable(&mut self, now: BTreeSet<String>) {
        let new: Vec<String> = now.difference(&self.unreadable).cloned().collect();
        self.unreadable = now;
        for path in new {
            self.emit(CacheEvent::Unreadable { path }).await;
        }
    }

    /// The subtree as the server has it now, within the selection; retryable errors are
    /// retried from the start.
    async fn read_tree(&self) -> Result<Read, Error> {
        let mut backoff = Backoff::new();
        loop {
            match self.read_tree_once().await {
                Err(e) if e.is_retryable() => {
                    backoff.pause().await;
                }
                other => return other,
            }
        }
    }

    async fn read_tree_once(&self) -> Result<Read, Error> {
        let mut read = Read::default();
        let mut pending = vec![(self.root.clone(), 0usize)];
        while let Some((node_path, depth)) = pending.pop() {
            let (data, stat) = match self.client.get_data(&node_path).await {
                Ok(found) => found,
                // Deleted since its parent was listed (or no root yet).
                Err(Error::NoNode) => continue,
                Err(e) if unreadable(&e) => {
                    if self.selects(&node_path) {
                        read.unreadable.insert(node_path);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if self.selects(&node_path) {
                read.tree.insert(node_path.clone(), kept(&data, stat));
            }
            if stat.num_children == 0 || self.selection.max_depth.is_some_and(|max| depth >= max) {
                continue;
            }
            match self.client.get_children(&node_path).await {
                Ok(children) => pending.extend(
                    children
                        .iter()
                        .map(|child| (path::join(&node_path, child), depth + 1)),
                ),
                Err(Error::NoNode) => {}
                // READ covers both reads: the ACL changed in between; or the list alone is
                // too large. Unreadable now.
                Err(e) if unreadable(&e) => {
                    if self.selects(&node_path) {
                        read.tree.remove(&node_path);
                        read.unreadable.insert(node_path);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(read)
    }

    /// Brings the copy of `node_path` in line with the server after an event on it.
    async fn reconcile(&mut self, node_path: &str) -> Result<(), Error> {
        // Below an unreadable node nothing is held (a resync could not list it either).
        if !self.within_depth(node_path)
            || !self.selects(node_path)
            || self.below_unreadable(node_path)
        {
            return Ok(());
        }
        let (read, denied) = match self.client.get_data(node_path).await {
            Ok((data, stat)) => (Some(kept(&data, stat)), false),
            Err(Error::NoNode) => (None, false),
            // Held no longer: what we cannot read, we cannot vouch for.
            Err(e) if unreadable(&e) => (None, true),
            Err(e) => return Err(e),
        };
        if read.is_some() && self.unreadable.contains(node_path) {
            // Readable again: what lies below it was never listed.
            return self.resync().await;
        }
        let events = self.apply(node_path, read);
        for event in events {
            self.emit(event).await;
        }
        if !denied {
            self.unreadable.remove(node_path);
        } else if self.unreadable.insert(node_path.to_owned()) {
            let path = node_path.to_owned();
            self.emit(CacheEvent::Unreadable { path }).await;
        }
        Ok(())
    }

    /// Whether a strict ancestor of `node_path` is unreadable.
    fn below_unreadable(&self, node_path: &str) -> bool {
        !self.unreadable.is_empty()
            && node_path
                .match_indices('/')
                .map(|(i, _)| if i == 0 { "/" } else { &node_path[..i] })
                .any(|ancestor| ancestor != node_path && self.unreadable.contains(ancestor))
    }

    /// Records what the server said of `node_path` (`None`: absent); the events it makes.
    fn apply(&self, node_path: &str, read: Option<CachedNode>) -> Vec<CacheEvent> {
        let mut nodes = self.write();
        let mut events = Vec::new();
        let replaced = match (nodes.get(node_path), &read) {
            (Some(old), Some(new)) => old.stat.czxid != new.stat.czxid,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if replaced {
            // Gone (or deleted and created again): it and whatever we held below it leave.
            let prefix = format!("{node_path}/");
            let below: Vec<String> = nodes
                .range(prefix.clone()..)
                .take_while(|(p, _)| p.starts_with(&prefix))
                .map(|(p, _)| p.clone())
                .collect();
            for gone in below.into_iter().rev().chain([node_path.to_owned()]) {
                if let Some(old) = nodes.remove(&gone) {
                    events.push(CacheEvent::Deleted { path: gone, old });
                }
            }
        }
        let Some(new) = read else { return events };
        match nodes.get(node_path) {
            None => {
                nodes.insert(node_path.to_owned(), new.clone());
                events.push(CacheEvent::Created {
                    path: node_path.to_owned(),
                    node: new,
                });
            }
            // Only a newer read replaces a cached node: a late event's read may be older
            // than what a resync already stored.
            Some(old) if newer(&new.stat, &old.stat) => {
                let old = old.clone();
                nodes.insert(node_path.to_owned(), new.clone());
                events.push(CacheEvent::Changed {
                    path: node_path.to_owned(),
                    old,
                    new,
                });
            }
            Some(_) => {}
        }
        events
    }

    fn within_depth(&self, node_path: &str) -> bool {
        let Some(max) = self.selection.max_depth else {
            return true;
        };
        let rest = node_path.strip_prefix(&self.root).unwrap_or(node_path);
        rest.split('/').filter(|s| !s.is_empty()).count() <= max
    }

    fn selects(&self, node_path: &str) -> bool {
        self.selection.filter.as_ref().is_none_or(|f| f(node_path))
    }

    /// Hands `event` to the stream. A consumer that reads gets every event: a full stream
    /// is waited on, for [`PATIENCE`] at most. One that has stopped reading for longer must
    /// not freeze the copy: the cache then goes on without waiting, counting the events that
    /// find the stream full, and [`CacheEvent::Lagged`] takes their place as soon as there is
    /// room, ahead of any later event. Once it is delivered, the consumer is waited on again.
    async fn emit(&mut self, event: CacheEvent) {
        if self.missed > 0 && !self.offer_lag(RESERVED) {
            self.missed += 1;
        } else if !(self.room_within(PATIENCE).await && self.offer(event, RESERVED)) {
            self.missed = 1;
        }
    }

    /// Whether the stream has room for an ordinary event, waiting for it up to `patience`
    /// (true at once if the consumer dropped the stream).
    async fn room_within(&mut self, patience: Duration) -> bool {
        let Some(tx) = &self.events else {
            return true;
        };
        if tx.capacity() > RESERVED {
            return true;
        }
        // The permits only prove the room: dropped at once, they leave it to the send.
        let room = async { tx.reserve_many(RESERVED + 1).await.map(drop) };
        let (room, open) = match tokio::time::timeout(patience, room).await {
            Ok(Ok(())) => (true, true),
            Ok(Err(_closed)) => (true, false),
            Err(_elapsed) => (false, true),
        };
        if !open {
            self.events = None;
        }
        room
    }

    /// The last events, in the slots [`RESERVED`] for them: any [`CacheEvent::Lagged`] still
    /// owed, then `Stopped`.
    fn finish(&mut self, stopped: Error) {
        if self.missed > 0 {
            self.offer_lag(0);
        }
        self.offer(CacheEvent::Stopped(stopped), 0);
    }

    /// Sends the [`CacheEvent::Lagged`] owed if more than `keep_free` slots are free.
    fn offer_lag(&mut self, keep_free: usize) -> bool {
        let missed = self.missed;
        let sent = self.offer(CacheEvent::Lagged { missed }, keep_free);
        if sent {
            self.missed = 0;
        }
        sent
    }

    /// Sends `event` if more than `keep_free` slots are free; `false` if not (true as well
    /// once the consumer has dropped the stream: nothing is owed to it then).
    fn offer(&mut self, event: CacheEvent, keep_free: usize) -> bool {
        let Some(tx) = &self.events else {
            return true;
        };
        if tx.capacity() <= keep_free {
            return false;
        }
        // The only sender, and room checked: an error means the stream was dropped.
        if tx.try_send(event).is_err() {
            self.events = None;
        }
        true
    }

    /// A sender to wait for room on while a [`CacheEvent::Lagged`] is owed.
    fn lag_sender(&self) -> Option<mpsc::Sender<CacheEvent>> {
        self.events.as_ref().filter(|_| self.missed > 0).cloned()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, CachedNode>> {
        self.nodes.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A node as the cache keeps it: its data copied out of the reply, which is a slice of the
/// connection's receive buffer and would keep all of it (up to 64 KiB, and a frame's worth
/// for a large reply) for as long as the node is cached.
fn kept(data: &Bytes, stat: Stat) -> CachedNode {
    CachedNode {
        data: Bytes::copy_from_slice(data),
        stat,
    }
}
