//! The task behind a started [`PersistentNode`](super::PersistentNode): creates the node,
//! watches it, creates it again when it goes, and deletes it on close.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zkwire::{path, Backoff, Client, Error, EventType, Stat};

use super::{NodeEvent, Shared, Spec};
use crate::guid::owned_by_guid;
use crate::internals::create_containers;
use crate::options::LockOptions;

/// The largest pause between two attempts of the task (a create refused by an ACL, a
/// read-only server...): such errors may clear up, and are tried again at this pace.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Why the task stops.
enum Stop {
    Closed,
    Failed(Error),
}

/// Errors no retry fixes: the session is over, or the request itself is wrong.
fn is_fatal(e: &Error) -> bool {
    e.is_terminal()
        || matches!(
            e,
            Error::InvalidPath(_)
                | Error::InvalidArgument(_)
                | Error::BadArguments
                | Error::InvalidAcl
                | Error::Unimplemented
                | Error::RequestTooLarge { .. }
                | Error::EphemeralOnLocalSession
        )
}

/// Whether an `ephemeralOwner` names a session: not 0 (persistent), not ZooKeeper's
/// container marker (`i64::MIN`), not a TTL node's (top byte `0xff`, the TTL below).
pub(super) fn session_owned(owner: i64) -> bool {
    owner != 0 && owner != i64::MIN && owner.to_be_bytes()[0] != 0xff
}

/// The task behind a started [`PersistentNode`](super::PersistentNode).
pub(super) struct Worker {
    /// Which run (start) of the handle this task is.
    pub(super) run: u64,
    /// Our node as we last published it: what a close deletes (the shared status may be a
    /// newer run's by then).
    pub(super) published: Option<String>,
    pub(super) client: Client,
    pub(super) spec: Spec,
    pub(super) shared: Arc<Shared>,
    pub(super) closed: watch::Receiver<bool>,
    /// A protected create failed in a way that leaves unknown whether it applied: look for
    /// our guid before creating again, and for duplicates once created.
    pub(super) unsure: bool,
    /// The same for a create of our fixed (non-sequential) path, until the node is created
    /// or adopted: a close then looks at that path for a node of our session.
    pub(super) unsure_at_path: bool,
    /// An ephemeral node of an unknown session found at our path may still be replaced:
    /// true from start until the node is first created or adopted, or one such node was
    /// replaced. Afterwards such a node is adopted, never deleted: two live nodes on one
    /// path (a duplicate id) would otherwise delete each other's node for ever.
    pub(super) claim: bool,
    /// The sessions that created our node in this run: a node left by one of them is ours
    /// to replace.
    pub(super) sessions: Vec<i64>,
    /// The node we hold: whose it is, and in which session we last saw it as ours.
    pub(super) held: Held,
}

/// The node a [`Worker`] holds (created or adopted).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Held {
    /// Its `ephemeralOwner`: a node at our path with another is not the one we hold (after
    /// a renewal, ours went with the old session and the path may be someone else's).
    pub(super) owner: i64,
    /// The session in which we created, adopted or last watched it: a close deletes it in
    /// that session only.
    pub(super) session: i64,
}

impl Held {
    /// A node owned by `owner`, seen in `client`'s current session.
    fn seen(owner: i64, client: &Client) -> Self {
        Self {
            owner,
            session: client.session_id(),
        }
    }
}

impl Worker {
    pub(super) async fn run(mut self) {
        let failed = match self.keep().await {
            Stop::Closed => self.remove().await,
            Stop::Failed(e) => {
                tracing::warn!(path = self.spec.path, error = %e, "persistent node stopped");
                Some(e)
            }
        };
        let run = self.run;
        self.shared.status.send_if_modified(|s| {
            if s.run != run {
                return false;
            }
            s.running = false;
            s.path = None;
            s.failed.clone_from(&failed);
            true
        });
        self.shared.emit(NodeEvent::Stopped(failed));
    }

    /// Creates the node, watches it, and creates it again when it goes, until closed or
    /// stopped by an error no retry fixes.
    async fn keep(&mut self) -> Stop {
        loop {
            let node = match self.ensure().await {
                Ok(node) => node,
                Err(stop) => return stop,
            };
            self.claim = false;
            if let Err(stop) = self.watch(&node).await {
                return stop;
            }
            tracing::debug!(path = node, "persistent node gone; creating it again");
            self.published = None;
            self.shared.publish(self.run, None);
            self.shared.emit(NodeEvent::Deleted { path: node });
        }
    }

    /// Our node, created, found by guid or adopted; tried again with backoff until then.
    async fn ensure(&mut self) -> Result<String, Stop> {
        let mut backoff = Backoff::new().with_delays(Duration::from_millis(50), MAX_PAUSE);
        let mut raced = 0;
        loop {
            if *self.closed.borrow() {
                return Err(Stop::Closed);
            }
            let e = match self.attempt().await {
                Ok(Some(node)) => {
                    self.unsure_at_path = false;
                    return Ok(node);
                }
                // The node at our path changed while we looked at it, or a stale one went:
                // again at once, but not for ever at full speed.
                Ok(None) => {
                    raced += 1;
                    if raced > 3 {
                        self.pause(&mut backoff).await?;
                    }
                    continue;
                }
                Err(e) => e,
            };
            if is_fatal(&e) {
                return Err(Stop::Failed(e));
            }
            if e.is_retryable() {
                // A protected create may have applied: find it by guid next time. One at a
                // fixed path is adopted by the next try, or deleted on close.
                self.unsure |= self.spec.protected;
                self.unsure_at_path |= !self.spec.mode.is_sequential();
                tracing::debug!(path = self.spec.path, error = %e, "persistent node create retried");
            } else {
                tracing::warn!(path = self.spec.path, error = %e, "persistent node create failed; retrying");
                self.shared.emit(NodeEvent::Error(e));
            }
            self.pause(&mut backoff).await?;
        }
    }

    /// One try: our node by guid if a create may have applied unseen, else a create; a
    /// non-sequential path already taken goes by the rules of [`taken`](Self::taken).
    pub(super) async fn attempt(&mut self) -> Result<Option<String>, Error> {
        if self.unsure && self.spec.mode.is_sequential() {
            if let Some(node) = self.find_ours().await? {
                return Ok(Some(node));
            }
        }
        match self.create().await {
            Ok(node) => {
                if self.unsure {
                    self.delete_duplicates(&node).await?;
                }
                Ok(Some(node))
            }
            Err(Error::NodeExists) if !self.spec.mode.is_sequential() => self.taken().await,
            // A container parent was reaped between its create and ours: again.
            Err(Error::NoNode) if self.spec.parents => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends the create (with the parents as containers if one is missing), publishes the
    /// path before letting writes go.
    async fn create(&mut self) -> Result<String, Error> {
        let target = self.spec.target();
        let options = self.spec.create_options();
        let _writing = self.shared.writes.lock().await;
        let data = self.shared.data().clone();
        let created = match self.client.create(&target, &data, &options).await {
            Err(Error::NoNode) if self.spec.parents => {
                let parents = LockOptions::default();
                create_containers(&self.client, self.spec.parent(), &parents).await?;
                self.client.create(&target, &data, &options).await
            }
            other => other,
        };
        let (node, stat) = created?;
        // An ephemeral node of ours belongs to the session that made it, whatever the
        // session is by the time we look.
        let owner = stat.ephemeral_owner;
        self.held = if session_owned(owner) {
            Held {
                owner,
                session: owner,
            }
        } else {
            Held::seen(owner, &self.client)
        };
        self.published = Some(node.clone());
        self.shared.publish(self.run, Some(node.clone()));
        let owner = stat.ephemeral_owner;
        if session_owned(owner) && !self.sessions.contains(&owner) {
            self.sessions.push(owner);
        }
        tracing::debug!(path = node, "persistent node created");
        self.shared.emit(NodeEvent::Created { path: node.clone() });
        Ok(node)
    }

    /// A node stands at our (non-sequential) path: ours (our session's), a stale one of
    /// ours to replace, or someone's to adopt (docs/recipes.md §12). `None`: it went or
    /// changed meanwhile, try again.
    async fn taken(&mut self) -> Result<Option<String>, Error> {
        let target = self.spec.target();
        let Some(stat) = self.client.exists(&target).await? else {
            return Ok(None);
        };
        let owner = stat.ephemeral_owner;
        let session = self.client.session_id();
        let stale = session_owned(owner)
            && owner != session
            && self.spec.mode.is_ephemeral()
            && (self.spec.protected || self.claim || self.sessions.contains(&owner));
        if stale {
            return match self.client.delete(&target, Some(stat.version)).await {
                Ok(()) => {
                    self.claim = false;
                    tracing::info!(path = target, owner, "replaced a node of another session");
                    self.shared.emit(NodeEvent::Replaced {
                        path: target,
                        owner,
                    });
                    Ok(None)
                }
                Err(Error::NoNode | Error::BadVersion) => Ok(None),
                Err(e) => Err(e),
            };
        }
        if session_owned(owner) != self.spec.mode.is_ephemeral() {
            tracing::warn!(
                path = target,
                owner,
                "adopting a node whose mode differs from ours"
            );
        }
        self.adopt(target).await
    }

    /// Takes the node at `target` as ours, writing our data into it if it holds other data.
    /// `None`: it went, or changed, meanwhile.
    async fn adopt(&mut self, target: String) -> Result<Option<String>, Error> {
        let _writing = self.shared.writes.lock().await;
        let data = self.shared.data().clone();
        let (current, stat) = match self.client.get_data(&target).await {
            Ok(read) => read,
            Err(Error::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let owner = stat.ephemeral_owner;
        let written = if current == data {
            None
        } else {
            match self
                .client
                .set_data(&target, &data, Some(stat.version))
                .await
            {
                Ok(stat) => Some(stat),
                Err(Error::NoNode | Error::BadVersion) => return Ok(None),
                Err(e) => return Err(e),
            }
        };
        self.held = Held::seen(owner, &self.client);
        self.published = Some(target.clone());
        self.shared.publish(self.run, Some(target.clone()));
        tracing::debug!(path = target, owner, "persistent node adopted");
        let path = target.clone();
        self.shared.emit(NodeEvent::Adopted { path, owner });
        if let Some(Stat { version, .. }) = written {
            let path = target.clone();
            self.shared.emit(NodeEvent::DataSet { path, version });
        }
        Ok(Some(target))
    }
}

impl Worker {
    /// The nodes with our guid that belong to us: owned by our session for an ephemeral
    /// mode, any for a persistent one (nobody else has our guid), first by name.
    async fn ours_by_guid(&self) -> Result<Vec<String>, Error> {
        let dir = self.spec.parent();
        let prefix = &self.spec.prefix;
        if self.spec.mode.is_ephemeral() {
            let owned = owned_by_guid(&self.client, dir, prefix).await?;
            return Ok(owned
                .into_iter()
                .map(|(name, _)| path::join(dir, &name))
                .collect());
        }
        match self.client.sync(dir).await {
            Ok(()) | Err(Error::NoNode) => {}
            Err(e) => return Err(e),
        }
        let mut children = match self.client.get_children(dir).await {
            Ok(children) => children,
            Err(Error::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        children.retain(|c| c.starts_with(prefix.as_str()));
        children.sort();
        Ok(children.iter().map(|name| path::join(dir, name)).collect())
    }

    /// After a create whose outcome was unknown: our node by guid, adopted; duplicates
    /// deleted.
    async fn find_ours(&mut self) -> Result<Option<String>, Error> {
        let found = self.ours_by_guid().await?;
        let Some(node) = found.first().cloned() else {
            return Ok(None);
        };
        self.delete_duplicates(&node).await?;
        tracing::debug!(path = node, "found our persistent node by guid");
        self.adopt(node).await
    }

    /// Deletes every node with our guid but `keep` (a create applied twice), and trusts
    /// the guid again.
    async fn delete_duplicates(&mut self, keep: &str) -> Result<(), Error> {
        for extra in self.ours_by_guid().await? {
            if extra != keep {
                tracing::warn!(path = extra, "deleting a duplicate of our persistent node");
                match self.client.delete(&extra, None).await {
                    Ok(()) | Err(Error::NoNode) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.unsure = false;
        Ok(())
    }

    /// Watches our node until it is gone (`Ok`), re-arming the watch after data changes
    /// and session events; a session that ended without renewal fails the next `exists`.
    async fn watch(&mut self, node: &str) -> Result<(), Stop> {
        let mut backoff = Backoff::new();
        loop {
            if *self.closed.borrow() {
                return Err(Stop::Closed);
            }
            let watcher = match self.client.exists_and_watch(node).await {
                // Another session's node now stands at the path (ours went with the session
                // a renewal replaced): ours is gone, and the rules of `taken` apply.
                Ok((Some(stat), _)) if self.spec.mode.is_ephemeral() && !self.holds(&stat) => {
                    return Ok(());
                }
                Ok((Some(_), watcher)) => {
                    self.held.session = self.client.session_id();
                    watcher
                }
                Ok((None, _)) => return Ok(()),
                Err(e) if is_fatal(&e) => return Err(Stop::Failed(e)),
                Err(e) => {
                    tracing::debug!(path = node, error = %e, "persistent node watch retried");
                    self.pause(&mut backoff).await?;
                    continue;
                }
            };
            backoff = Backoff::new();
            tokio::select! {
                event = watcher => if event.event_type == EventType::NodeDeleted {
                    return Ok(());
                },
                _ = self.closed.wait_for(|closed| *closed) => return Err(Stop::Closed),
            }
        }
    }

    /// Whether the ephemeral node `stat` describes is still the one we hold: owned as it was,
    /// and, if one of our sessions made it, by the current one. A node of an earlier session
    /// of ours (a local expiry can come before the server's) is gone for us: its session
    /// will take it, so it is replaced, not watched and not deleted in our new session.
    fn holds(&self, stat: &Stat) -> bool {
        let owner = stat.ephemeral_owner;
        owner == self.held.owner
            && (owner == self.client.session_id() || !self.sessions.contains(&owner))
    }

    /// The next pause of `backoff`, cut short by the close signal.
    async fn pause(&mut self, backoff: &mut Backoff) -> Result<(), Stop> {
        let delay = backoff.next_delay().unwrap_or(MAX_PAUSE);
        tokio::select! {
            () = tokio::time::sleep(delay) => Ok(()),
            _ = self.closed.wait_for(|closed| *closed) => Err(Stop::Closed),
        }
    }

    /// On close: deletes our node (and, after a create of unknown outcome, every node with
    /// our guid). Retried while retryable; a refused delete is reported, and the node stays.
    async fn remove(&mut self) -> Option<Error> {
        let node = self.published.clone();
        let mut doomed: Vec<(String, i64)> =
            node.into_iter().map(|n| (n, self.held.session)).collect();
        // What the look-ups below find is our current session's.
        let session = self.client.session_id();
        if self.unsure {
            // Best effort: a create that applied unseen is found by its guid.
            let found = self.ours_by_guid().await.unwrap_or_default();
            doomed.extend(found.into_iter().map(|n| (n, session)));
        }
        if self.unsure_at_path && doomed.is_empty() {
            doomed.extend(self.ours_at_path().await.map(|n| (n, session)));
        }
        let mut refused = None;
        for (node, session) in doomed {
            if let Err(e) = self.delete(&node, session).await {
                refused = Some(e);
            }
        }
        refused
    }

    /// The node at our fixed path if our session created it: after a create of unknown
    /// outcome, only the owner tells ours from someone else's. A persistent node has none,
    /// and stays. Looked at in the current session only, retried while retryable.
    async fn ours_at_path(&self) -> Option<String> {
        let target = self.spec.target();
        let session = self.client.session_id();
        let look = self.client.bound_to_session(session);
        let mut backoff = Backoff::new();
        // Retried as the delete is: a look given up on a request timeout or a lost
        // connection left the node for the session's life, while close said `Ok`.
        let stat = loop {
            match look.exists(&target).await {
                Ok(stat) => break stat?,
                Err(e) if e.is_retryable() => {
                    backoff.pause().await;
                }
                // The session is over, and an ephemeral node of ours with it.
                Err(_) => return None,
            }
        };
        let ours = session_owned(stat.ephemeral_owner) && stat.ephemeral_owner == session;
        ours.then_some(target)
    }

    /// Deletes `node`, retrying across connection losses; an ephemeral one in `session`
    /// alone (`Client::bound_to_session`), the session in which it was seen as ours: once a
    /// renewal has replaced that session, the server has deleted the node with it, and the
    /// path may be someone else's (a delete queued before the renewal would otherwise run
    /// on the new session and take their node).
    async fn delete(&self, node: &str, session: i64) -> Result<(), Error> {
        let client = if self.spec.mode.is_ephemeral() {
            self.client.bound_to_session(session)
        } else {
            self.client.clone()
        };
        let mut backoff = Backoff::new();
        loop {
            match client.delete(node, None).await {
                Ok(()) | Err(Error::NoNode) => return Ok(()),
                Err(e) if e.is_retryable() => {
                    backoff.pause().await;
                }
                // An ephemeral node went with the session; a persistent one cannot be
                // deleted by this client any more.
                Err(e) if e.is_terminal() && self.spec.mode.is_ephemeral() => return Ok(()),
                Err(e) if e.is_terminal() => return Err(e),
                // Refused (a child under it, an ACL): reported, and not retried later. A
                // retry in the background would delete the node a run started again has
                // adopted (or anyone's node at this path) once the refusal lifts.
                Err(e) => {
                    tracing::warn!(path = node, error = %e, "persistent node delete refused; the node stays");
                    return Err(e);
                }
            }
        }
    }
}
