//! Barriers in Curator's layouts: [`DistributedBarrier`] (one node: waiters wait while it
//! exists) and [`DistributedDoubleBarrier`] (`barrierPath/<uuid>` EPHEMERAL members and a
//! `barrierPath/ready` node). See docs/recipes.md §14.

use std::future::Future;
use std::time::Duration;

use zkwire::{path, Backoff, Client, CreateOptions, Error};

use crate::cleanup::{self, Job};
use crate::error::LockError;
use crate::guid::Uuid;
use crate::internals::dir_path;

/// The name of the double barrier's node that says "everyone entered" (Curator's
/// `READY_NODE`).
const READY: &str = "ready";

/// Runs `op` again while it fails with a retryable error (a connection loss); every other
/// outcome, the end of the session included, is returned.
async fn retrying<T, F, Fut>(mut op: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut backoff = Backoff::new();
    loop {
        match op().await {
            Err(e) if e.is_retryable() => {
                backoff.pause().await;
            }
            other => return other,
        }
    }
}

/// Deletes `node`, retrying across connection losses; a missing node is deleted already.
async fn delete(client: &Client, node: &str) -> Result<(), Error> {
    match retrying(|| client.delete(node, None)).await {
        Ok(()) | Err(Error::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Curator's `DistributedBarrier`: while the barrier node exists, [`wait_on_barrier`]
/// waits; [`remove_barrier`] lets every waiter go.
///
/// The node is PERSISTENT, with missing parents created as containers, and holds no data,
/// so zkwire and Curator processes share one barrier. Requests are retried across
/// connection losses.
///
/// [`wait_on_barrier`]: Self::wait_on_barrier
/// [`remove_barrier`]: Self::remove_barrier
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire_recipes::DistributedBarrier;
///
/// let barrier = DistributedBarrier::new(client, "/barriers/deploy");
/// barrier.set_barrier().await?;
/// // ...elsewhere, workers wait:
/// if barrier.wait_on_barrier(Duration::from_secs(30)).await? {
///     println!("go");
/// }
/// barrier.remove_barrier().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedBarrier {
    client: Client,
    path: String,
}

impl DistributedBarrier {
    /// The barrier at `path`; nothing is sent yet.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::DistributedBarrier;
    ///
    /// // Shared by the coordinator and the workers: clones talk to the same node.
    /// let barrier = DistributedBarrier::new(client, "/barriers/deploy");
    /// let worker = barrier.clone();
    /// # let _ = worker;
    /// # Ok(()) }
    /// ```
    pub fn new(client: Client, path: impl Into<String>) -> Self {
        Self {
            client,
            path: dir_path(path.into()),
        }
    }

    /// The barrier node's path.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::DistributedBarrier;
    ///
    /// let barrier = DistributedBarrier::new(client, "/barriers/deploy");
    /// assert_eq!(barrier.path(), "/barriers/deploy");
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sets the barrier: creates its node (already set is fine).
    ///
    /// # Errors
    /// The client's errors other than connection loss.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::DistributedBarrier;
    ///
    /// // Hold the workers back until the new configuration is in place.
    /// let barrier = DistributedBarrier::new(client, "/barriers/deploy");
    /// barrier.set_barrier().await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_barrier(&self) -> Result<(), LockError> {
        let options = CreateOptions::persistent().with_container_parents();
        match retrying(|| self.client.create_all(&self.path, b"", &options)).await {
            Ok(_) | Err(Error::NodeExists) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the barrier: deletes its node (not set is fine), which lets the waiters go.
    ///
    /// # Errors
    /// The client's errors other than connection loss.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::DistributedBarrier;
    ///
    /// let barrier = DistributedBarrier::new(client, "/barriers/deploy");
    /// // ...the new configuration is written: let every waiting worker go.
    /// barrier.remove_barrier().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_barrier(&self) -> Result<(), LockError> {
        Ok(delete(&self.client, &self.path).await?)
    }

    /// Waits until the barrier is not set, at most `timeout`: `true` once its node is gone
    /// (at once if it is not set), `false` when it still stands at the deadline.
    ///
    /// # Errors
    /// The client's errors other than connection loss (the session's end...).
    ///
    /// # Cancel safety
    /// Cancel safe: waiting leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::DistributedBarrier;
    ///
    /// let barrier = DistributedBarrier::new(client, "/barriers/deploy");
    /// if barrier.wait_on_barrier(Duration::from_secs(60)).await? {
    ///     println!("barrier removed: starting");
    /// } else {
    ///     println!("still held back after a minute");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_on_barrier(&self, timeout: Duration) -> Result<bool, LockError> {
        let removed = async {
            loop {
                let (stat, watcher) = retrying(|| self.client.exists_and_watch(&self.path)).await?;
                if stat.is_none() {
                    return Ok(true);
                }
                watcher.await;
            }
        };
        // A timeout too long to add to now (`Duration::MAX`) waits for ever.
        tokio::time::timeout(timeout, removed)
            .await
            .unwrap_or(Ok(false))
    }
}

/// Curator's `DistributedDoubleBarrier`: `member_qty` members [`enter`](Self::enter)
/// together and [`leave`](Self::leave) together.
///
/// Layout (Curator's): a member is the EPHEMERAL node `barrierPath/<uuid>` (missing
/// parents created as containers); entering, a member that counts at least `member_qty`
/// children creates the PERSISTENT node `barrierPath/ready`, whose creation lets the
/// members waiting in `enter` go. Leaving, a member deletes its node and waits until the
/// highest-named member node is gone, again and again until none is left; then the
/// `ready` node is deleted. `member_qty` is a threshold, not a limit: more may enter.
/// zkwire and Curator members of one barrier enter and leave together.
///
/// Unlike Curator, an [`enter`](Self::enter) that times out (or is dropped) deletes its
/// member node, so a member that gave up does not count (if the last member entered at that
/// very moment, the others may have counted it); and a [`leave`](Self::leave) that times out
/// leaves the `ready` node, where Curator deletes it.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire_recipes::DistributedDoubleBarrier;
///
/// let mut barrier = DistributedDoubleBarrier::new(client, "/barriers/round-1", 4);
/// if barrier.enter(Duration::from_secs(30)).await? {
///     // ...compute along with the three others...
///     barrier.leave(Duration::from_secs(30)).await?;
/// }
/// # Ok(()) }
/// ```
///
/// Dropped while entered, the member's node is deleted in the background.
#[derive(Debug)]
pub struct DistributedDoubleBarrier {
    client: Client,
    path: String,
    member_qty: usize,
    /// Our member node while entered (or while its delete may still be needed).
    node: Option<String>,
    /// A leave has begun and not finished (it may have deleted our node already): another
    /// `leave` goes on waiting for the others.
    leaving: bool,
}

/// Deletes a member node in the background when dropped armed: an `enter` that did not
/// finish.
struct Pending {
    client: Client,
    node: Option<String>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            cleanup::enqueue(&self.client, Job::Delete(node));
        }
    }
}

impl DistributedDoubleBarrier {
    /// A barrier at `path` for `member_qty` members (0 is taken as 1); nothing is sent yet.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::DistributedDoubleBarrier;
    ///
    /// // One per member process: each of the 4 makes its own.
    /// let barrier = DistributedDoubleBarrier::new(client, "/barriers/round-1", 4);
    /// # let _ = barrier;
    /// # Ok(()) }
    /// ```
    pub fn new(client: Client, path: impl Into<String>, member_qty: usize) -> Self {
        Self {
            client,
            path: dir_path(path.into()),
            member_qty: member_qty.max(1),
            node: None,
            leaving: false,
        }
    }

    /// The barrier's path.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::DistributedDoubleBarrier;
    ///
    /// let barrier = DistributedDoubleBarrier::new(client, "/barriers/round-1", 4);
    /// assert_eq!(barrier.path(), "/barriers/round-1");
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Our member node while entered.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::DistributedDoubleBarrier;
    ///
    /// let mut barrier = DistributedDoubleBarrier::new(client, "/barriers/round-1", 4);
    /// assert_eq!(barrier.member_path(), None);
    /// if barrier.enter(Duration::from_secs(30)).await? {
    ///     println!("entered as {:?}", barrier.member_path());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn member_path(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// Enters: creates our member node and waits until `member_qty` members have entered
    /// (the `ready` node exists), at most `timeout`. `true` once entered; `false` at the
    /// deadline, with our node deleted again, unless the barrier is found filled with our
    /// node in it then (our own `ready` create may have been in flight): that is `true`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when entered already (leave first); the client's errors
    /// other than connection loss (our node is deleted then too).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it returns, our node is deleted in the background.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::DistributedDoubleBarrier;
    ///
    /// let mut barrier = DistributedDoubleBarrier::new(client, "/barriers/round-1", 4);
    /// if !barrier.enter(Duration::from_secs(30)).await? {
    ///     eprintln!("the other members did not all come within 30 s");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn enter(&mut self, timeout: Duration) -> Result<bool, LockError> {
        if self.node.is_some() {
            return Err(Error::InvalidArgument("the double barrier is entered already").into());
        }
        let node = path::join(&self.path, &Uuid::new_v4().to_string());
        let mut pending = Pending {
            client: self.client.clone(),
            node: Some(node.clone()),
        };
        match tokio::time::timeout(timeout, self.enter_as(&node)).await {
            Ok(Ok(())) => {
                self.node = pending.node.take();
                Ok(true)
            }
            Ok(Err(e)) => Err(e.into()),
            Err(_) if self.filled_with(&node).await? => {
                self.node = pending.node.take();
                Ok(true)
            }
            Err(_) => {
                delete(&self.client, &node).await?;
                pending.node = None;
                Ok(false)
            }
        }
    }

    /// At the deadline: whether the barrier filled with our `node` in it all the same (the
    /// `ready` create that completed the count may be our own, still unanswered). Then we
    /// are in: leaving now would let the others through one member short.
    async fn filled_with(&self, node: &str) -> Result<bool, Error> {
        let ready = path::join(&self.path, READY);
        if retrying(|| self.client.exists(&ready)).await?.is_none() {
            return Ok(false);
        }
        Ok(retrying(|| self.client.exists(node)).await?.is_some())
    }

    /// Creates `node` and waits for the `ready` node, creating it when we are the one that
    /// completes the count.
    async fn enter_as(&self, node: &str) -> Result<(), Error> {
        let ready = path::join(&self.path, READY);
        let options = CreateOptions::ephemeral().with_container_parents();
        let name = node.rsplit('/').next().unwrap_or(node);
        let mut create = true;
        loop {
            if create {
                // Our name is a fresh uuid: a create that applied unseen is ours.
                match retrying(|| self.client.create_all(node, b"", &options)).await {
                    Ok(_) | Err(Error::NodeExists) => {}
                    Err(e) => return Err(e),
                }
            }
            let (stat, watcher) = retrying(|| self.client.exists_and_watch(&ready)).await?;
            if stat.is_some() {
                return Ok(());
            }
            let members = retrying(|| self.client.get_children(&self.path)).await?;
            // Our node went with an expired session (the client renewed it): come in again,
            // or the barrier would wait for a member that is not counted.
            create = !members.iter().any(|member| member == name);
            if create {
                continue;
            }
            if members.len() >= self.member_qty {
                let persistent = CreateOptions::persistent();
                return match retrying(|| self.client.create(&ready, b"", &persistent)).await {
                    Ok(_) | Err(Error::NodeExists) => Ok(()),
                    Err(e) => Err(e),
                };
            }
            // Woken by the creation of `ready` (or a session event): look again.
            let _ = watcher.await;
        }
    }

    /// Leaves: deletes our member node and waits until every member has left, at most
    /// `timeout`; then deletes the `ready` node. `true` once all have left, `false` at the
    /// deadline (our node is deleted all the same, unless the deadline came first).
    ///
    /// A member node of ours found gone (deleted from outside, or with an expired session)
    /// counts as left, where Curator fails.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when not entered (and no earlier `leave` is still
    /// unfinished); the client's errors other than connection loss.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, it may have deleted our node or not
    /// ([`member_path`](Self::member_path) says); `leave` may be called again.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::DistributedDoubleBarrier;
    ///
    /// let mut barrier = DistributedDoubleBarrier::new(client, "/barriers/round-1", 4);
    /// if barrier.enter(Duration::from_secs(30)).await? {
    ///     // ...this member's share of the round...
    ///     while !barrier.leave(Duration::from_secs(30)).await? {
    ///         eprintln!("still waiting for the others to finish");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leave(&mut self, timeout: Duration) -> Result<bool, LockError> {
        if self.node.is_none() && !self.leaving {
            return Err(Error::InvalidArgument("the double barrier is not entered").into());
        }
        self.leaving = true;
        let Ok(left) = tokio::time::timeout(timeout, self.leave_all()).await else {
            return Ok(false);
        };
        left?;
        delete(&self.client, &path::join(&self.path, READY)).await?;
        self.leaving = false;
        Ok(true)
    }

    /// Deletes our node and waits for the highest member node to go until none is left.
    async fn leave_all(&mut self) -> Result<(), Error> {
        loop {
            let mut members = match retrying(|| self.client.get_children(&self.path)).await {
                Ok(members) => members,
                Err(Error::NoNode) => Vec::new(),
                Err(e) => return Err(e),
            };
            members.retain(|m| m != READY);
            members.sort();
            let ours = self
                .node
                .as_deref()
                .map(|n| n.rsplit('/').next().unwrap_or(n));
            let others: Vec<&String> = members
                .iter()
                .filter(|m| Some(m.as_str()) != ours)
                .collect();
            let Some(highest) = others.last().map(|m| path::join(&self.path, m)) else {
                self.delete_ours().await?;
                return Ok(());
            };
            let (stat, watcher) = retrying(|| self.client.exists_and_watch(&highest)).await?;
            self.delete_ours().await?;
            if stat.is_some() {
                let _ = watcher.await;
            }
        }
    }

    async fn delete_ours(&mut self) -> Result<(), Error> {
        if let Some(node) = &self.node {
            delete(&self.client, node).await?;
            self.node = None;
        }
        Ok(())
    }
}

impl Drop for DistributedDoubleBarrier {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            cleanup::enqueue(&self.client, Job::Delete(node));
        }
    }
}
