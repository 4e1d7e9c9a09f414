//! The shared core of every lock, in the shape of Curator's `LockInternals`: protected create
//! with guid recovery, container parents, and the wait loop over a sort rule and a predicate.
//!
//! A recipe describes its contenders with a [`Contest`] (marker, sort markers, predicate)
//! and runs an [`Attempt`]. The semaphore of Curator's `InterProcessSemaphoreV2` layout reuses
//! the same pieces: its internal mutex is a mutex [`Contest`] on `P/locks`, its lease node a
//! protected create ([`Attempt::create`]) under `P/leases` with marker `lease-`, and its lease
//! a `Hold` (`hold/`).
//!
//! The contest, the directory and the [`Attempt`] with what it owns are here; the protected
//! create and its guid recovery in `create.rs`; the wait for the grant in `wait.rs`.

mod create;
#[cfg(test)]
mod tests;
mod wait;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zkwire::{path, Backoff, Client, CreateOptions, Error, Stat};

use crate::cleanup::{self, Job, FOREGROUND_GRACE};
use crate::error::LockError;
use crate::guid::{owned_by_guid, Uuid};
use crate::options::LockOptions;
use crate::sequence::{exclusive, sort_children, Contender, Decision};
use crate::trust::until_trusted;

pub(crate) use create::create_containers;

/// The rule of every retry loop of the recipes, after a failed request: pauses `backoff` when
/// a retry can help ([`Error::is_retryable`]: the connection dropped, the server was busy)
/// and gives the error back when it cannot.
pub(crate) async fn pause_if_retryable(backoff: &mut Backoff, e: Error) -> Result<(), Error> {
    if e.is_retryable() {
        backoff.pause().await;
        Ok(())
    } else {
        Err(e)
    }
}

/// How a recipe's contenders are named, ordered and granted.
#[derive(Debug, Clone)]
pub(crate) struct Contest {
    /// What follows the protected prefix: `lock-`, `__WRIT__`, `__READ__`, `lease-`.
    pub(crate) marker: &'static str,
    /// Curator's sort markers for this directory (every contender family of it).
    pub(crate) sort_markers: &'static [&'static str],
    /// Whether our node (by name) holds, given the sorted children.
    pub(crate) predicate: fn(&[Contender], &str) -> Decision,
    /// Curator ≥ 5.5's downgrade read node: created EPHEMERAL (not sequential) with the
    /// writer's suffix, and held at once.
    pub(crate) tie: Option<Tie>,
    /// Whether the deletion of our predecessor grants us the lock outright when that
    /// predecessor was the first contender of our last listing (see [`Attempt::wait`]). True
    /// only for the exclusive recipes whose contenders are all sequential nodes: the mutex
    /// (and the leader election and semaphore mutex built on it) and the leader latch.
    pub(crate) first_goes_grants: bool,
}

impl Contest {
    /// The exclusive contest of a mutex-like recipe: `marker` nodes, ordered by `sort_markers`,
    /// the first one holds.
    pub(crate) fn exclusive(marker: &'static str, sort_markers: &'static [&'static str]) -> Self {
        Self {
            marker,
            sort_markers,
            predicate: exclusive,
            tie: None,
            first_goes_grants: true,
        }
    }
}

/// A read node tied with a write node we hold.
#[derive(Debug, Clone)]
pub(crate) struct Tie {
    /// The writer's sequence suffix (10 or 11 characters).
    pub(crate) suffix: String,
    /// The writer's node: the create is a multi that first checks it still exists, so a
    /// write lock lost in the meantime cannot turn into a read hold next to a new writer.
    pub(crate) writer_path: String,
    /// The writer's fencing token, which the read hold reports as its own.
    pub(crate) writer_token: i64,
}
/// A lock directory as a recipe sees it: cheap to clone (one shared allocation), so that an
/// acquire borrows nothing it has to copy (BENCHMARKS.md, "Allocations per lock cycle").
#[derive(Debug, Clone)]
pub(crate) struct Dir(Arc<DirParts>);

/// What a [`Dir`] shares among its clones and the acquires made through it.
#[derive(Debug)]
pub(crate) struct DirParts {
    pub(crate) client: Client,
    pub(crate) path: String,
    pub(crate) options: LockOptions,
    /// How contender nodes are created: EPHEMERAL_SEQUENTIAL with the options' ACL, made
    /// once rather than at every create.
    pub(crate) contender: CreateOptions,
}

impl std::ops::Deref for Dir {
    type Target = DirParts;

    fn deref(&self) -> &DirParts {
        &self.0
    }
}

impl Dir {
    /// The directory `path` of `client`'s locks; a trailing `/` is another spelling of the
    /// same directory and is dropped, so that both spellings name one lock.
    pub(crate) fn new(client: Client, path: String, options: LockOptions) -> Self {
        let contender = CreateOptions::ephemeral_sequential().with_acl(options.acl.clone());
        Self(Arc::new(DirParts {
            client,
            path: dir_path(path),
            options,
            contender,
        }))
    }

    /// The directory as the server sees it (chroot resolved): the key of the lock's
    /// in-process state, the same for every handle of the client.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`].
    pub(crate) fn server_path(&self) -> Result<String, LockError> {
        Ok(self.client.server_path(&self.path)?)
    }

    /// The names of the contenders in the directory now, in lock order (none if it does not
    /// exist).
    pub(crate) async fn contender_names(&self, markers: &[&str]) -> Result<Vec<String>, LockError> {
        let children = match self.client.get_children_compact(&self.path).await {
            Ok(children) => children,
            Err(Error::NoNode) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let sorted = sort_children(&children, markers, self.options.foreign_children)?;
        Ok(sorted.into_iter().map(|c| c.name.to_owned()).collect())
    }
}

/// A lock directory's path without a trailing `/` (the root excepted): `/a/b/` and `/a/b`
/// name one directory, and so one lock.
pub(crate) fn dir_path(path: String) -> String {
    match path.strip_suffix('/') {
        Some(trimmed) if !trimmed.is_empty() => trimmed.to_owned(),
        _ => path,
    }
}

/// Our lock node, confirmed to exist and to be owned by our session when found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// Full path, as the client sees it.
    pub(crate) path: String,
    /// Where the last segment starts in `path` (one string, not two, per acquire).
    name_at: usize,
    /// From create2, or from `exists` when found by guid.
    pub(crate) stat: Stat,
}

impl Node {
    fn new(dir: &str, name: &str, stat: Stat) -> Self {
        let path = path::join(dir, name);
        Self {
            name_at: path.len() - name.len(),
            path,
            stat,
        }
    }

    /// The node at `path` (the full path a create returned).
    fn at(path: String, stat: Stat) -> Self {
        let name_at = path.rfind('/').map_or(0, |slash| slash + 1);
        Self {
            path,
            name_at,
            stat,
        }
    }

    /// The last segment of the path: the node's name among its siblings.
    pub(crate) fn name(&self) -> &str {
        &self.path[self.name_at..]
    }
}

/// How an acquire ends.
#[derive(Debug)]
pub(crate) enum Outcome {
    Held(Node),
    /// Not granted without waiting (`try_lock`); the node was removed.
    Busy,
}

/// Acquires `contest` in `dir`: creates a protected node, then waits (or not, if
/// `!blocking`) until the predicate grants it, all before `deadline`.
///
/// # Cancel safety
/// Dropping the future removes whatever it created, in the background (the per-session
/// cleanup worker); a create whose outcome is unknown is swept by guid.
pub(crate) async fn acquire(
    dir: &Dir,
    contest: &Contest,
    blocking: bool,
    deadline: Option<Instant>,
) -> Result<Outcome, LockError> {
    let timeout = async move {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
        LockError::Timeout
    };
    acquire_until(dir, contest, blocking, timeout).await
}

/// [`acquire`], ended early with the error `end` resolves to (a deadline, a recipe being
/// closed); what was created is then removed as on a timeout.
pub(crate) async fn acquire_until(
    dir: &Dir,
    contest: &Contest,
    blocking: bool,
    end: impl Future<Output = LockError>,
) -> Result<Outcome, LockError> {
    let mut attempt = Attempt::new(dir);
    let result = tokio::select! {
        // A grant that is ready wins over the end, as a timeout polls its future first.
        biased;
        result = attempt.run(contest, blocking) => result,
        error = end => Err(error),
    };
    match result {
        Ok(Some(node)) => {
            attempt.disarm();
            Ok(Outcome::Held(node))
        }
        Ok(None) => {
            attempt.abandon().await;
            Ok(Outcome::Busy)
        }
        Err(e) => {
            attempt.abandon().await;
            Err(e)
        }
    }
}

/// One acquire in progress. It owns what it may have created: dropped, it hands that to the
/// cleanup worker.
#[derive(Debug)]
pub(crate) struct Attempt {
    dir: Dir,
    /// `_c_<uuid>-`: one guid per node we try to create, kept across the create's retries.
    prefix: String,
    node: Option<Node>,
    /// A create with this guid failed in a way that may have applied it.
    unsure: bool,
    /// The lease-fit check before the create ran with the session timeout known.
    fit_checked: bool,
}

impl Attempt {
    pub(crate) fn new(dir: &Dir) -> Self {
        Self {
            dir: dir.clone(),
            prefix: Uuid::new_v4().protected_prefix(),
            node: None,
            unsure: false,
            fit_checked: false,
        }
    }

    /// Creates our node, then waits for the grant: our node, or `None` when not granted and
    /// `!blocking`.
    ///
    /// The first listing of the directory rides in the same write as the create (see
    /// [`create_listing`](Self::create_listing)): an uncontended acquire is one round trip.
    async fn run(&mut self, contest: &Contest, blocking: bool) -> Result<Option<Node>, LockError> {
        if contest.tie.is_some() {
            self.create(contest).await?;
            return Ok(self.node.take());
        }
        let listing = self.create_listing(contest, true).await?;
        if !self.wait(contest, blocking, listing).await? {
            return Ok(None);
        }
        if let Some(node) = &self.node {
            let (client, margin) = (&self.dir.client, self.dir.options.lease_margin);
            let owner = node.stat.ephemeral_owner;
            until_trusted(client, margin, owner, self.fit_checked).await?;
        }
        // The node is the caller's now (taken, not copied): nothing left to clean up for it.
        Ok(self.node.take())
    }

    /// Deletes a node of ours now, leaving it to the cleanup worker if that fails.
    async fn remove(&self, node_path: &str) {
        if !delete_now(&self.dir.client, node_path).await {
            cleanup::enqueue(&self.dir.client, Job::Delete(node_path.to_owned()));
        }
    }

    /// Forgets the current guid and node (sweeping the guid if a create with it may have
    /// applied).
    fn renew_guid(&mut self) {
        self.node = None;
        self.hand_off();
        self.prefix = Uuid::new_v4().protected_prefix();
    }

    /// Our node, once [`create`](Self::create) has succeeded.
    pub(crate) fn node(&self) -> Option<&Node> {
        self.node.as_ref()
    }

    /// The node is the caller's now: nothing to clean up.
    pub(crate) fn disarm(&mut self) {
        self.unsure = false;
        self.node = None;
    }

    /// Removes what this attempt created: in the foreground for up to
    /// [`FOREGROUND_GRACE`], then (on drop) in the background.
    pub(crate) async fn abandon(mut self) {
        if let Ok(true) = tokio::time::timeout(FOREGROUND_GRACE, self.remove_all()).await {
            self.disarm();
        }
    }

    /// Deletes our node, or every node of our session with our guid; whether all went.
    async fn remove_all(&mut self) -> bool {
        if self.unsure {
            let Ok(owned) = owned_by_guid(&self.dir.client, &self.dir.path, &self.prefix).await
            else {
                return false;
            };
            for (name, _) in owned {
                if !delete_now(&self.dir.client, &path::join(&self.dir.path, &name)).await {
                    return false;
                }
            }
            true
        } else if let Some(node) = &self.node {
            delete_now(&self.dir.client, &node.path).await
        } else {
            true
        }
    }

    /// Hands what this attempt may have created to the cleanup worker.
    fn hand_off(&mut self) {
        if self.unsure {
            // Covers the node too: it carries the guid.
            cleanup::enqueue(
                &self.dir.client,
                Job::Sweep {
                    dir: self.dir.path.clone(),
                    prefix: self.prefix.clone(),
                },
            );
        } else if let Some(node) = &self.node {
            cleanup::enqueue(&self.dir.client, Job::Delete(node.path.clone()));
        }
        self.disarm();
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.hand_off();
    }
}

/// Deletes a node now; whether it is gone (deleted, already absent, or the session is over).
async fn delete_now(client: &Client, node_path: &str) -> bool {
    match client.delete(node_path, None).await {
        Ok(()) | Err(Error::NoNode) => true,
        Err(e) => e.is_terminal(),
    }
}

/// The deadline `timeout` from now; `None` (no deadline) when the clock cannot represent it,
/// which for any practical purpose is never.
pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}
