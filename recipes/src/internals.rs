//! The shared core of every lock, in the shape of Curator's `LockInternals`: protected create
//! with guid recovery, container parents, and the wait loop over a sort rule and a predicate.
//!
//! A recipe describes its contenders with a [`Contest`] (marker, sort markers, predicate)
//! and runs an [`Attempt`]. The semaphore of Curator's `InterProcessSemaphoreV2` layout reuses
//! the same pieces: its internal mutex is a mutex [`Contest`] on `P/locks`, its lease node a
//! protected create ([`Attempt::create`]) under `P/leases` with marker `lease-`, and its lease
//! a `Hold` (`hold.rs`).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use zkwire::{path, Backoff, Client, CreateMode, CreateOptions, Error, EventType, Op, Stat};

use crate::cleanup::{self, Job, FOREGROUND_GRACE};
use crate::error::{LockError, LostReason};
use crate::guid::{owned_by_guid, Uuid};
use crate::options::{check_lease_fits, LockOptions};
use crate::poll::ready_now;
use crate::sequence::{exclusive, sort_children, Contender, Decision, ForeignChildPolicy};

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

/// What ended a wait on the predecessor.
enum Woken {
    /// The lock is ours (the first contender went, ours still there).
    Granted,
    /// List the directory again.
    LookAgain,
}

/// A lock directory as a recipe sees it.
#[derive(Debug, Clone)]
pub(crate) struct Dir {
    pub(crate) client: Client,
    pub(crate) path: String,
    pub(crate) options: LockOptions,
}

impl Dir {
    /// The directory `path` of `client`'s locks; a trailing `/` is another spelling of the
    /// same directory and is dropped, so that both spellings name one lock.
    pub(crate) fn new(client: Client, path: String, options: LockOptions) -> Self {
        Self {
            client,
            path: dir_path(path),
            options,
        }
    }

    /// The directory as the server sees it (chroot resolved): the key of the lock's
    /// in-process state, the same for every handle of the client.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`].
    pub(crate) fn server_path(&self) -> Result<String, LockError> {
        Ok(self.client.server_path(&self.path)?)
    }

    /// The contenders in the directory now, in lock order (none if it does not exist).
    pub(crate) async fn contenders(&self, markers: &[&str]) -> Result<Vec<Contender>, LockError> {
        let children = match self.client.get_children(&self.path).await {
            Ok(children) => children,
            Err(Error::NoNode) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        sort_children(children, markers, self.options.foreign_children)
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
    /// The last segment.
    pub(crate) name: String,
    /// From create2, or from `exists` when found by guid.
    pub(crate) stat: Stat,
}

impl Node {
    fn new(dir: &str, name: String, stat: Stat) -> Self {
        Self {
            path: path::join(dir, &name),
            name,
            stat,
        }
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
    client: Client,
    dir: String,
    options: LockOptions,
    /// `_c_<uuid>-`: one guid per node we try to create, kept across the create's retries.
    prefix: String,
    node: Option<Node>,
    /// A create with this guid failed in a way that may have applied it.
    unsure: bool,
}

impl Attempt {
    pub(crate) fn new(dir: &Dir) -> Self {
        Self {
            client: dir.client.clone(),
            dir: dir.path.clone(),
            options: dir.options.clone(),
            prefix: Uuid::new_v4().protected_prefix(),
            node: None,
            unsure: false,
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
            return Ok(self.node.clone());
        }
        let listing = self.create_listing(contest, true).await?;
        if !self.wait(contest, blocking, listing).await? {
            return Ok(None);
        }
        Ok(self.node.clone())
    }

    /// Creates our protected node (`dir/_c_<uuid>-<marker>[<seq>]`): see
    /// [`create_listing`](Self::create_listing).
    pub(crate) async fn create(&mut self, contest: &Contest) -> Result<(), LockError> {
        self.create_listing(contest, false).await.map(drop)
    }

    /// Creates our protected node (`dir/_c_<uuid>-<marker>[<seq>]`), and with `list` also
    /// lists the directory in the same write; returns that listing when both succeeded on the
    /// first try and it shows our node (else the caller lists again).
    ///
    /// - `NoNode`: the parents are created as containers and the create is sent again (a
    ///   container reaped in between just means another round);
    /// - a retryable error (the create may or may not have applied): after a backoff, a
    ///   sync + getChildren looks for our guid and adopts a node only if its ephemeral
    ///   owner is our session (extra ones are deleted); otherwise the create is sent again
    ///   with the same guid.
    ///
    /// Why the listing sent right behind the create always shows our node (docs/recipes.md
    /// §3, "One round trip"): the client hands requests to its connection in the order their
    /// futures are first polled, and `join!` polls the create first; ZooKeeper answers one
    /// session's requests in the order it received them, a read waiting for the session's
    /// earlier writes to be applied; so a successful listing is of the tree after our
    /// create. If the connection drops in between, the create's reply is a connection loss
    /// (its listing is not used), or the listing is sent again on the next connection, to a
    /// server that has seen at least every zxid this session has (ZooKeeper refuses a
    /// session on a server behind what the client saw), our create's included. The node is
    /// still checked for, and a listing without it is dropped.
    async fn create_listing(
        &mut self,
        contest: &Contest,
        mut list: bool,
    ) -> Result<Option<Vec<String>>, LockError> {
        const MAX_PARENT_ROUNDS: u32 = 16;
        check_lease_fits(&self.client, self.options.lease_margin)?;
        let (path, options) = self.contender_node(contest);
        let (mut backoff, mut parent_rounds) = (Backoff::new(), 0);
        loop {
            if self.unsure {
                match self.find_ours().await {
                    Ok(Some(node)) => {
                        self.node = Some(node);
                        return Ok(None);
                    }
                    Ok(None) => {}
                    Err(e) if e.is_retryable() => {
                        backoff.pause().await;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            // Until the reply is in, a drop must sweep by guid: the create may apply even if
            // this future is gone before its reply is read.
            let was_unsure = std::mem::replace(&mut self.unsure, true);
            let list_too = std::mem::take(&mut list) && contest.tie.is_none();
            let (result, listing) = self
                .create_and_list(contest, &path, &options, list_too)
                .await;
            if !matches!(&result, Err(e) if e.is_retryable()) {
                self.unsure = was_unsure;
            }
            match result {
                Ok((created, stat)) => {
                    let name = created.rsplit('/').next().unwrap_or_default().to_owned();
                    let listing = listing.filter(|children| children.contains(&name));
                    self.node = Some(Node::new(&self.dir, name, stat));
                    return Ok(listing);
                }
                Err(Error::NoNode) if parent_rounds < MAX_PARENT_ROUNDS => {
                    match create_containers(&self.client, &self.dir, &self.options).await {
                        Ok(()) => parent_rounds += 1,
                        // The next create tells whether the parents are there.
                        Err(e) if e.is_retryable() => {
                            backoff.pause().await;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(Error::MultiFailed { index: 0, .. }) => {
                    return Err(LockError::Lost(LostReason::NodeDeleted));
                }
                // A fixed name that exists: our own earlier create, or nothing we may touch.
                Err(Error::NodeExists) if contest.tie.is_some() => {
                    self.unsure = true;
                    return match self.find_ours().await? {
                        Some(node) => {
                            self.node = Some(node);
                            Ok(None)
                        }
                        None => Err(Error::NodeExists.into()),
                    };
                }
                Err(e) if e.is_retryable() => {
                    tracing::debug!(path, error = %e, "lock node create may have applied; looking for our guid");
                    backoff.pause().await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The path (a sequential prefix, or a tie's fixed name) and the options of our
    /// contender node.
    fn contender_node(&self, contest: &Contest) -> (String, CreateOptions) {
        let base = format!("{}{}", self.prefix, contest.marker);
        let (path, mode) = match &contest.tie {
            Some(tie) => (
                path::join(&self.dir, &format!("{base}{}", tie.suffix)),
                CreateMode::Ephemeral,
            ),
            None => (
                path::join(&self.dir, &base),
                CreateMode::EphemeralSequential,
            ),
        };
        let options = CreateOptions::new(mode).with_acl(self.options.acl.clone());
        (path, options)
    }

    /// One create and, with `list`, the directory's listing sent right behind it in the
    /// same write (see [`create_listing`](Self::create_listing) for why it shows our node);
    /// a failed listing is `None`.
    async fn create_and_list(
        &self,
        contest: &Contest,
        path: &str,
        options: &CreateOptions,
        list: bool,
    ) -> (Result<(String, Stat), Error>, Option<Vec<String>>) {
        let create = self.create_once(contest, path, options);
        if !list {
            return (create.await, None);
        }
        let (created, listed) = tokio::join!(create, self.client.get_children(&self.dir));
        (created, listed.ok())
    }

    /// One create: plain (create2, for the Stat), or for a tie a multi guarded by the
    /// writer's node followed by `exists` for the Stat (a create inside a multi returns none).
    /// A failed guard comes back as `MultiFailed { index: 0 }`, other multi failures as the
    /// create's own error.
    async fn create_once(
        &self,
        contest: &Contest,
        path: &str,
        options: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        let Some(tie) = &contest.tie else {
            return self.client.create(path, &self.options.data, options).await;
        };
        let ops = [
            Op::check(tie.writer_path.clone(), None),
            Op::create(path.to_owned(), self.options.data.clone(), options),
        ];
        match self.client.multi(&ops).await {
            Ok(_) => match self.client.exists(path).await? {
                Some(stat) => Ok((path.to_owned(), stat)),
                None => Err(Error::NoNode),
            },
            Err(Error::MultiFailed { index: 1, error }) => Err(*error),
            Err(e) => Err(e),
        }
    }

    /// Lists the directory until the predicate grants our node, watching the node it names;
    /// `listing` is a first listing already in hand.
    ///
    /// One notification per hand-off: when the node we watch was the first contender of our
    /// listing and the contest allows it ([`Contest::first_goes_grants`]), its deletion
    /// grants us the lock without listing again, provided our own node is still there (see
    /// [`await_predecessor`](Self::await_predecessor)). Every node created after that
    /// listing got a larger sequence number from the directory (sequence numbers only grow,
    /// and every contender here is sequential), so once the first one is gone nothing sorts
    /// before us. Any other wake-up (a data change, a session event, a predecessor that was
    /// not first, anything happening to our node) lists again.
    async fn wait(
        &mut self,
        contest: &Contest,
        blocking: bool,
        mut listing: Option<Vec<String>>,
    ) -> Result<bool, LockError> {
        let mut backoff = Backoff::new();
        loop {
            let Some(ours) = self.node.as_ref().map(|n| n.name.clone()) else {
                self.create(contest).await?;
                continue;
            };
            let children = match listing.take() {
                Some(children) => children,
                None => match self.client.get_children(&self.dir).await {
                    Ok(children) => children,
                    Err(Error::NoNode) => Vec::new(),
                    Err(e) if e.is_retryable() => {
                        backoff.pause().await;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                },
            };
            self.delete_duplicates(&children, &ours).await;
            let sorted = sort_children(
                children,
                contest.sort_markers,
                self.options.foreign_children,
            )?;
            match (contest.predicate)(&sorted, &ours) {
                Decision::Held => return Ok(true),
                Decision::Missing => {
                    // Deleted under us (by someone else; an expired session fails the list
                    // instead). Start over with a fresh guid and node, as Curator does.
                    tracing::debug!(node = ours, "our lock node vanished; creating a new one");
                    self.renew_guid();
                }
                Decision::Wait(_) if !blocking => return Ok(false),
                Decision::Wait(predecessor) => {
                    let first = self.first_goes_grants(contest, &sorted, &predecessor);
                    match self.await_predecessor(&predecessor, &ours, first).await {
                        Ok(Woken::Granted) => return Ok(true),
                        Ok(Woken::LookAgain) => {}
                        Err(e) if e.is_retryable() => {
                            backoff.pause().await;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
    }

    /// Watches `predecessor` until something happens to it; with `first`, also watches our
    /// own node `ours` (both requests in one write), and reports a grant when the
    /// predecessor is deleted while our node still exists.
    ///
    /// Why our node is watched too: someone may delete it while we wait (an operator, a
    /// revoker); the predecessor's deletion must not then grant a lock we have no node for.
    /// On one connection a session's watch events arrive in the order of the changes that
    /// fired them, so if our node went before the predecessor did, its event is already in
    /// when the predecessor's is; one deleted later is a loss of a lock that was ours. After
    /// a reconnect that no longer holds: the server answers the restored watches with the
    /// events of what changed meanwhile in the order of the paths listed, not of the
    /// changes, and the two may be handled apart. So a predecessor's deletion heard on
    /// another connection than the one the watches were set on only means "list again".
    async fn await_predecessor(
        &self,
        predecessor: &str,
        ours: &str,
        first: bool,
    ) -> Result<Woken, Error> {
        let watched = path::join(&self.dir, predecessor);
        if !first {
            return match self.client.get_data_and_watch(&watched).await {
                // Any event (deleted, changed, session over) means: look again.
                Ok((_, _, watcher)) => {
                    drop(watcher.await);
                    Ok(Woken::LookAgain)
                }
                Err(Error::NoNode) => Ok(Woken::LookAgain),
                Err(e) => Err(e),
            };
        }
        let own_path = path::join(&self.dir, ours);
        // Transports opened so far: read before the watches are set, so that any event that
        // comes on a later connection is seen as such.
        let connection = self.client.stats().connections;
        let (theirs, own) = tokio::join!(
            self.client.get_data_and_watch(&watched),
            self.client.get_data_and_watch(&own_path)
        );
        let mut own = match own {
            Ok((_, _, watcher)) => watcher,
            // Ours is gone (the listing says so next), or the session is in trouble.
            Err(Error::NoNode) => return Ok(Woken::LookAgain),
            Err(e) => return Err(e),
        };
        let theirs = match theirs {
            Ok((_, _, watcher)) => watcher,
            // Deleted between our listing and the watch, ours still there: granted.
            Err(Error::NoNode) => return Ok(Woken::Granted),
            Err(e) => return Err(e),
        };
        tokio::select! {
            // Our node first: an event for it that came in with the predecessor's wins.
            biased;
            _ = &mut own => Ok(Woken::LookAgain),
            event = theirs => {
                let gone = event.event_type == EventType::NodeDeleted;
                let ours_untouched = ready_now(&mut own).is_none();
                let live = self.client.stats().connections == connection;
                Ok(if gone && ours_untouched && live { Woken::Granted } else { Woken::LookAgain })
            }
        }
    }

    /// Whether the deletion of `predecessor` grants us the lock without a new listing: the
    /// contest allows it, `predecessor` is the first of `sorted`, and no child can sort
    /// before a sequential node created later (no foreign children counted by name).
    fn first_goes_grants(
        &self,
        contest: &Contest,
        sorted: &[Contender],
        predecessor: &str,
    ) -> bool {
        contest.first_goes_grants
            && contest.tie.is_none()
            && self.options.foreign_children != ForeignChildPolicy::CountLikeCurator
            && sorted.first().is_some_and(|c| c.name == predecessor)
            && sorted.iter().all(|c| c.seq.is_some())
    }

    /// Our node by guid, after a sync: the first one our session owns; any other one with
    /// our guid and our session (a create that applied twice) is deleted.
    async fn find_ours(&mut self) -> Result<Option<Node>, LockError> {
        let mut owned = owned_by_guid(&self.client, &self.dir, &self.prefix)
            .await?
            .into_iter();
        let Some((name, stat)) = owned.next() else {
            return Ok(None);
        };
        for (extra, _) in owned {
            self.remove(&path::join(&self.dir, &extra)).await;
        }
        tracing::debug!(node = name, "found our lock node by guid");
        Ok(Some(Node::new(&self.dir, name, stat)))
    }

    /// Deletes children carrying our guid other than our node, if our session owns them
    /// (a late duplicate of a retried create: docs/recipes.md §4, step 3).
    pub(crate) async fn delete_duplicates(&mut self, children: &[String], ours: &str) {
        if !children
            .iter()
            .any(|c| c.starts_with(&self.prefix) && c != ours)
        {
            return;
        }
        let session = self.client.session_id();
        for child in children
            .iter()
            .filter(|c| c.starts_with(&self.prefix) && *c != ours)
        {
            let child_path = path::join(&self.dir, child);
            // Best effort: a duplicate missed now is seen on the next scan or by the sweep.
            if let Ok(Some(stat)) = self.client.exists(&child_path).await {
                if stat.ephemeral_owner == session {
                    tracing::warn!(node = child, "deleting a duplicate of our lock node");
                    self.remove(&child_path).await;
                }
            }
        }
    }

    /// Deletes a node of ours now, leaving it to the cleanup worker if that fails.
    async fn remove(&self, node_path: &str) {
        if !delete_now(&self.client, node_path).await {
            cleanup::enqueue(&self.client, Job::Delete(node_path.to_owned()));
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
            let Ok(owned) = owned_by_guid(&self.client, &self.dir, &self.prefix).await else {
                return false;
            };
            for (name, _) in owned {
                if !delete_now(&self.client, &path::join(&self.dir, &name)).await {
                    return false;
                }
            }
            true
        } else if let Some(node) = &self.node {
            delete_now(&self.client, &node.path).await
        } else {
            true
        }
    }

    /// Hands what this attempt may have created to the cleanup worker.
    fn hand_off(&mut self) {
        if self.unsure {
            // Covers the node too: it carries the guid.
            cleanup::enqueue(
                &self.client,
                Job::Sweep {
                    dir: self.dir.clone(),
                    prefix: self.prefix.clone(),
                },
            );
        } else if let Some(node) = &self.node {
            cleanup::enqueue(&self.client, Job::Delete(node.path.clone()));
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

/// Creates the missing ancestors of `dir` (and `dir`) as containers, top down, as Curator's
/// `ZKPaths.mkdirs(…, asContainers = true)`: `exists` first, so that an existing node under
/// a parent we may not write to is fine.
pub(crate) async fn create_containers(
    client: &Client,
    dir: &str,
    options: &LockOptions,
) -> Result<(), Error> {
    let container = CreateOptions::new(CreateMode::Container).with_acl(options.parent_acl.clone());
    let mut prefix = String::with_capacity(dir.len());
    for segment in dir.split('/').filter(|s| !s.is_empty()) {
        prefix.push('/');
        prefix.push_str(segment);
        if client.exists(&prefix).await?.is_some() {
            continue;
        }
        match client.create(&prefix, b"", &container).await {
            // NoNode: a parent was reaped in between; the caller's next create tells.
            Ok(_) | Err(Error::NodeExists) | Err(Error::NoNode) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The deadline `timeout` from now; `None` (no deadline) when the clock cannot represent it,
/// which for any practical purpose is never.
pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

#[cfg(test)]
mod tests {
    //! Guid protection against a real server: adoption only of our own session's node.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use zkwire_testing::support::fresh_chroot;

    use super::*;
    use crate::sequence::MUTEX_MARKERS;

    fn mutex_contest() -> Contest {
        Contest::exclusive("lock-", MUTEX_MARKERS)
    }

    async fn setup(name: &str) -> (Dir, Client) {
        let cs = fresh_chroot(name).await;
        let a = Client::connect(&cs).await.unwrap();
        let b = Client::connect(&cs).await.unwrap();
        let dir = Dir {
            client: a,
            path: "/lock".into(),
            options: LockOptions::default(),
        };
        (dir, b)
    }

    async fn plant(client: &Client, prefix: &str) -> String {
        let opts = CreateOptions::new(CreateMode::EphemeralSequential);
        client
            .create(&format!("/lock/{prefix}lock-"), b"", &opts)
            .await
            .unwrap()
            .0
    }

    async fn children(client: &Client) -> Vec<String> {
        let mut c = client.get_children("/lock").await.unwrap();
        c.sort();
        c
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_of_our_session_with_our_guid_is_adopted() {
        let (dir, _b) = setup("guid_adopt").await;
        let mut attempt = Attempt::new(&dir);
        create_containers(&dir.client, "/lock", &dir.options)
            .await
            .unwrap();
        // As if an earlier create had applied but its reply was lost.
        let planted = plant(&dir.client, &attempt.prefix).await;
        attempt.unsure = true;
        attempt.create(&mutex_contest()).await.unwrap();
        let node = attempt.node.clone().unwrap();
        assert_eq!(node.path, planted, "adopted, not created again");
        assert_eq!(node.stat.ephemeral_owner, dir.client.session_id());
        assert!(
            node.stat.czxid > 0,
            "the Stat comes from exists: {:?}",
            node.stat
        );
        assert_eq!(children(&dir.client).await.len(), 1);
        attempt.abandon().await;
        assert!(children(&dir.client).await.is_empty(), "abandon removed it");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_of_another_session_with_our_guid_is_not_adopted() {
        let (dir, b) = setup("guid_foreign_session").await;
        let mut attempt = Attempt::new(&dir);
        create_containers(&dir.client, "/lock", &dir.options)
            .await
            .unwrap();
        // Same guid, another session (an old session of ours, CURATOR-498, or an impostor).
        let theirs = plant(&b, &attempt.prefix).await;
        attempt.unsure = true;
        attempt.create(&mutex_contest()).await.unwrap();
        let ours = attempt.node.clone().unwrap();
        assert_ne!(ours.path, theirs);
        assert_eq!(ours.stat.ephemeral_owner, dir.client.session_id());
        assert_eq!(
            children(&dir.client).await.len(),
            2,
            "theirs untouched, ours created"
        );
        // Abandoning sweeps by guid but only our session's nodes.
        attempt.abandon().await;
        assert_eq!(
            children(&dir.client).await,
            vec![theirs.trim_start_matches("/lock/").to_owned()]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn duplicates_of_our_session_are_deleted() {
        let (dir, b) = setup("guid_duplicates").await;
        let mut attempt = Attempt::new(&dir);
        create_containers(&dir.client, "/lock", &dir.options)
            .await
            .unwrap();
        let first = plant(&dir.client, &attempt.prefix).await;
        let _second = plant(&dir.client, &attempt.prefix).await;
        let theirs = plant(&b, &attempt.prefix).await;
        attempt.unsure = true;
        attempt.create(&mutex_contest()).await.unwrap();
        assert_eq!(
            attempt.node.as_ref().unwrap().path,
            first,
            "the earliest one is kept"
        );
        let left = children(&dir.client).await;
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(
            left.iter()
                .all(|c| first.ends_with(c.as_str()) || theirs.ends_with(c.as_str())),
            "{left:?}"
        );

        // The wait loop's scan also deletes a late duplicate.
        let late = plant(&dir.client, &attempt.prefix).await;
        attempt
            .delete_duplicates(
                &children(&dir.client).await,
                &attempt.node.clone().unwrap().name,
            )
            .await;
        assert_eq!(dir.client.exists(&late).await.unwrap(), None);
        attempt.disarm();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_an_unsure_attempt_sweeps_its_guid_in_the_background() {
        let (dir, b) = setup("guid_sweep").await;
        let mut attempt = Attempt::new(&dir);
        create_containers(&dir.client, "/lock", &dir.options)
            .await
            .unwrap();
        let ours = plant(&dir.client, &attempt.prefix).await;
        let theirs = plant(&b, &attempt.prefix).await;
        attempt.unsure = true;
        drop(attempt);
        let deadline = Instant::now() + Duration::from_secs(5);
        while (pending_or_present(&dir.client, &ours).await) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(dir.client.exists(&ours).await.unwrap(), None, "swept");
        assert!(
            dir.client.exists(&theirs).await.unwrap().is_some(),
            "another session's node is kept"
        );
        assert_eq!(cleanup::pending(&dir.client), 0);
    }

    async fn pending_or_present(client: &Client, path: &str) -> bool {
        cleanup::pending(client) > 0 || client.exists(path).await.unwrap().is_some()
    }

    /// The listing sent in the create's write always shows our node, while another session
    /// adds and removes contenders in the same directory all along (the ordering argument of
    /// `create_listing`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_listing_sent_with_the_create_always_shows_our_node() {
        const ACQUIRES: usize = 200;
        let (dir, b) = setup("pipelined_listing").await;
        create_containers(&dir.client, "/lock", &dir.options)
            .await
            .unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = tokio::spawn({
            let stop = std::sync::Arc::clone(&stop);
            async move {
                let mut rounds = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && rounds < 100_000 {
                    let planted = plant(&b, "_c_churn-").await;
                    b.delete(&planted, None).await.unwrap();
                    rounds += 1;
                }
                rounds
            }
        });
        for _ in 0..ACQUIRES {
            let mut attempt = Attempt::new(&dir);
            let listing = attempt
                .create_listing(&mutex_contest(), true)
                .await
                .unwrap();
            let ours = attempt.node().unwrap().name.clone();
            let listing = listing.expect("the listing came back with our node in it");
            assert!(listing.contains(&ours));
            attempt.abandon().await;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(
            churn.await.unwrap() > 0,
            "the other session was busy meanwhile"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missing_parents_are_created() {
        let cs = fresh_chroot("guid_parents").await;
        let a = Client::connect(&cs).await.unwrap();
        let dir = Dir {
            client: a.clone(),
            path: "/x/y/z".into(),
            options: LockOptions::default(),
        };
        let mut attempt = Attempt::new(&dir);
        attempt.create(&mutex_contest()).await.unwrap();
        let node = attempt.node.clone().unwrap();
        assert!(
            node.path.starts_with("/x/y/z/_c_") && node.path.ends_with("-lock-0000000000"),
            "{}",
            node.path
        );
        assert_eq!(node.path.len(), "/x/y/z/".len() + 40 + "lock-".len() + 10);
        attempt.abandon().await;
        // Containers: empty data, open ACL, and (below) reaped once empty on a server that
        // checks often (tests/containers.rs).
        let (data, _) = a.get_data("/x/y/z").await.unwrap();
        assert!(data.is_empty());
    }
}
