//! The protected create of our contender node (`_c_<uuid>-<marker>[<seq>]`), the listing sent
//! with it, and the recovery by guid of a create whose outcome was unknown.

use std::borrow::Cow;

use zkwire::{path, Backoff, Children, Client, CreateOptions, Error, Op, Stat};

use super::{Attempt, Contest, Dir, Node};
use crate::error::{LockError, LostReason};
use crate::guid::owned_by_guid;
use crate::options::LockOptions;
use crate::trust::check_lease_fits;

use super::pause_if_retryable;

impl Attempt {
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
    pub(super) async fn create_listing(
        &mut self,
        contest: &Contest,
        mut list: bool,
    ) -> Result<Option<Children>, LockError> {
        const MAX_PARENT_ROUNDS: u32 = 16;
        self.fit_checked = check_lease_fits(&self.dir.client, self.dir.options.lease_margin)?;
        let dir = self.dir.clone();
        let (path, options) = contender_node(&dir, &self.prefix, contest);
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
                    let node = Node::at(created, stat);
                    let listing = listing.filter(|children| children.contains(node.name()));
                    self.node = Some(node);
                    return Ok(listing);
                }
                Err(Error::NoNode) if parent_rounds < MAX_PARENT_ROUNDS => {
                    match create_containers(&self.dir.client, &self.dir.path, &self.dir.options)
                        .await
                    {
                        Ok(()) => parent_rounds += 1,
                        // The next create tells whether the parents are there.
                        Err(e) => pause_if_retryable(&mut backoff, e).await?,
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

    /// One create and, with `list`, the directory's listing sent right behind it in the
    /// same write (see [`create_listing`](Self::create_listing) for why it shows our node);
    /// a failed listing is `None`.
    async fn create_and_list(
        &self,
        contest: &Contest,
        path: &str,
        options: &CreateOptions,
        list: bool,
    ) -> (Result<(String, Stat), Error>, Option<Children>) {
        let create = self.create_once(contest, path, options);
        if !list {
            return (create.await, None);
        }
        // The listing's future is built inside the join, not bound first: moving it in
        // would copy it (BENCHMARKS.md, "Issue 29, tenth pass").
        let (created, listed) =
            tokio::join!(create, self.dir.client.get_children_compact(&self.dir.path));
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
            return self
                .dir
                .client
                .create(path, &self.dir.options.data, options)
                .await;
        };
        let ops = [
            Op::check(tie.writer_path.clone(), None),
            Op::create(path.to_owned(), self.dir.options.data.clone(), options),
        ];
        match self.dir.client.multi(&ops).await {
            Ok(_) => match self.dir.client.exists(path).await? {
                Some(stat) => Ok((path.to_owned(), stat)),
                None => Err(Error::NoNode),
            },
            Err(Error::MultiFailed { index: 1, error }) => Err(*error),
            Err(e) => Err(e),
        }
    }

    /// Our node by guid, after a sync: the first one our session owns; any other one with
    /// our guid and our session (a create that applied twice) is deleted.
    async fn find_ours(&mut self) -> Result<Option<Node>, LockError> {
        let mut owned = owned_by_guid(&self.dir.client, &self.dir.path, &self.prefix)
            .await?
            .into_iter();
        let Some((name, stat)) = owned.next() else {
            return Ok(None);
        };
        for (extra, _) in owned {
            self.remove(&path::join(&self.dir.path, &extra)).await;
        }
        tracing::debug!(node = name, "found our lock node by guid");
        Ok(Some(Node::new(&self.dir.path, &name, stat)))
    }

    /// Deletes children carrying our guid other than our node, if our session owns them
    /// (a late duplicate of a retried create: docs/recipes.md §4, step 3). `children` is a
    /// listing's names, walked once in the common case (no duplicate).
    pub(crate) async fn delete_duplicates<'c, I>(&self, children: I, ours: &str)
    where
        I: IntoIterator<Item = &'c str> + Clone,
    {
        let is_duplicate = |c: &&str| c.starts_with(&self.prefix) && *c != ours;
        if !children.clone().into_iter().any(|c| is_duplicate(&c)) {
            return;
        }
        let session = self.dir.client.session_id();
        for child in children.into_iter().filter(is_duplicate) {
            let child_path = path::join(&self.dir.path, child);
            // Best effort: a duplicate missed now is seen on the next scan or by the sweep.
            if let Ok(Some(stat)) = self.dir.client.exists(&child_path).await {
                if stat.is_owned_by(session) {
                    tracing::warn!(node = child, "deleting a duplicate of our lock node");
                    self.remove(&child_path).await;
                }
            }
        }
    }
}

/// Our contender node's path (`dir/_c_<uuid>-<marker>`, and the writer's suffix for a
/// tied read node), built in one allocation, and how it is created: EPHEMERAL_SEQUENTIAL
/// (made once per directory), or EPHEMERAL for a tied read node.
fn contender_node<'d>(
    dir: &'d Dir,
    prefix: &str,
    contest: &Contest,
) -> (String, Cow<'d, CreateOptions>) {
    let suffix = contest.tie.as_ref().map_or("", |tie| tie.suffix.as_str());
    let name = [prefix, contest.marker, suffix];
    let mut path =
        String::with_capacity(dir.path.len() + 1 + name.iter().map(|s| s.len()).sum::<usize>());
    path.push_str(&dir.path);
    // Only the root ends with '/' among valid paths; don't double it.
    if !dir.path.ends_with('/') {
        path.push('/');
    }
    name.iter().for_each(|part| path.push_str(part));
    let options = match contest.tie {
        Some(_) => Cow::Owned(CreateOptions::ephemeral().with_acl(dir.options.acl.clone())),
        None => Cow::Borrowed(&dir.contender),
    };
    (path, options)
}

/// Creates the missing ancestors of `dir` (and `dir`) as containers, top down, as Curator's
/// `ZKPaths.mkdirs(…, asContainers = true)`: `exists` first, so that an existing node under
/// a parent we may not write to is fine.
pub(crate) async fn create_containers(
    client: &Client,
    dir: &str,
    options: &LockOptions,
) -> Result<(), Error> {
    let container = CreateOptions::container().with_acl(options.parent_acl.clone());
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
