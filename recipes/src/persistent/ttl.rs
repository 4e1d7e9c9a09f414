//! [`PersistentTtlNode`]: a container node kept by a child with a TTL that is touched while
//! the process runs (Curator's `PersistentTtlNode`). When the process stops touching it, the
//! child expires after the TTL and the server reaps the container, now empty: a node that
//! outlives sessions but not its owner's absence.

use std::sync::{Mutex as StdMutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;
use zkwire::{path, Client, CreateMode, CreateOptions, Error};

use super::PersistentNode;
use crate::error::LockError;

/// The name of the child that keeps the container, as Curator names it.
pub(crate) const TOUCH_CHILD: &str = "touch";

/// A container node at a path, with our data, kept alive by a `touch` child created with a
/// TTL and written again every half TTL (Curator's `PersistentTtlNode`). The container is a
/// [`PersistentNode`]: it comes back after an outside delete. Once nothing touches the child
/// for the TTL (the process stopped, or lost its session for good), the server deletes the
/// child and then the empty container. The server must allow TTL nodes
/// (`zookeeper.extendedTypesEnabled=true`); without it the touch fails with
/// [`Error::Unimplemented`], logged as a warning, and touching stops: the container then
/// stays until closed, since the server reaps only a container that has had a child.
///
/// [`close`](Self::close) stops touching and deletes the child and the container. Dropping
/// the handle stops touching: the nodes then go at the end of the TTL.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire_recipes::PersistentTtlNode;
///
/// // `/jobs/report-42` stays while this process runs, and at most a minute after.
/// let ttl = Duration::from_secs(60);
/// let node = PersistentTtlNode::new(client, "/jobs/report-42", ttl, "running");
/// node.start();
/// node.wait_for_initial_create(Duration::from_secs(10)).await?;
/// // ... the job ...
/// node.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PersistentTtlNode {
    node: PersistentNode,
    client: Client,
    touch: String,
    ttl: Duration,
    toucher: StdMutex<Option<JoinHandle<()>>>,
}

impl PersistentTtlNode {
    /// A node at `path` holding `data`, kept by a `touch` child with this `ttl`. Nothing is
    /// created until [`start`](Self::start).
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentTtlNode;
    ///
    /// let node = PersistentTtlNode::new(client, "/leases/worker-7", Duration::from_secs(30), "");
    /// assert_eq!(node.touch_path(), "/leases/worker-7/touch");
    /// # }
    /// ```
    pub fn new(
        client: Client,
        path: impl Into<String>,
        ttl: Duration,
        data: impl Into<Bytes>,
    ) -> Self {
        let path = path.into();
        let touch = path::join(&path, TOUCH_CHILD);
        let node = PersistentNode::new(client.clone(), path, CreateMode::Container, data);
        Self {
            node,
            client,
            touch,
            ttl,
            toucher: StdMutex::new(None),
        }
    }

    /// Starts keeping the node: its [`PersistentNode`] task, and the touches of the child
    /// every half TTL. Starting twice does nothing more.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentTtlNode;
    ///
    /// let node = PersistentTtlNode::new(client, "/leases/worker-7", Duration::from_secs(30), "");
    /// node.start();
    /// # }
    /// ```
    pub fn start(&self) {
        self.node.start();
        let mut toucher = self.toucher.lock().unwrap_or_else(PoisonError::into_inner);
        if toucher.is_none() {
            let (client, touch, ttl) = (self.client.clone(), self.touch.clone(), self.ttl);
            *toucher = Some(tokio::spawn(touch_loop(client, touch, ttl)));
        }
    }

    /// Waits up to `timeout` for the container's first create: as
    /// [`PersistentNode::wait_for_initial_create`].
    ///
    /// # Errors
    /// As [`PersistentNode::wait_for_initial_create`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentTtlNode;
    ///
    /// let node = PersistentTtlNode::new(client, "/leases/worker-7", Duration::from_secs(30), "");
    /// node.start();
    /// if !node.wait_for_initial_create(Duration::from_secs(5)).await? {
    ///     eprintln!("not created yet");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<bool, LockError> {
        self.node.wait_for_initial_create(timeout).await
    }

    /// The container's [`PersistentNode`]: its events, its data.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentTtlNode;
    ///
    /// let node = PersistentTtlNode::new(client, "/leases/worker-7", Duration::from_secs(30), "a");
    /// node.start();
    /// node.node().set_data("b").await?;
    /// # Ok(()) }
    /// ```
    pub fn node(&self) -> &PersistentNode {
        &self.node
    }

    /// The path of the child that keeps the container: `<path>/touch`.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentTtlNode;
    ///
    /// let node = PersistentTtlNode::new(client, "/a", Duration::from_secs(30), "");
    /// assert_eq!(node.touch_path(), "/a/touch");
    /// # }
    /// ```
    pub fn touch_path(&self) -> &str {
        &self.touch
    }

    /// Stops touching, deletes the child, then closes the container's [`PersistentNode`]
    /// (which deletes it).
    ///
    /// # Errors
    /// A failed delete of the child (other than its absence), or as
    /// [`PersistentNode::close`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentTtlNode;
    ///
    /// let node = PersistentTtlNode::new(client, "/leases/worker-7", Duration::from_secs(30), "");
    /// node.start();
    /// node.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<(), LockError> {
        self.stop_touching();
        match self.client.delete(&self.touch, None).await {
            Ok(()) | Err(Error::NoNode) => {}
            Err(e) => return Err(e.into()),
        }
        self.node.close().await
    }

    fn stop_touching(&self) {
        let toucher = self
            .toucher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(toucher) = toucher {
            toucher.abort();
        }
    }
}

impl Drop for PersistentTtlNode {
    fn drop(&mut self) {
        self.stop_touching();
    }
}

/// Touches the child every half TTL until aborted, or until the session is gone for good.
async fn touch_loop(client: Client, touch: String, ttl: Duration) {
    let every = (ttl / 2).max(Duration::from_millis(10));
    loop {
        match touch_once(&client, &touch, ttl).await {
            // Closed, or expired without renewal: no session will touch again.
            Err(_) if client.state().is_terminal() => return,
            Err(Error::Unimplemented) => {
                tracing::warn!(path = %touch, "the server does not allow TTL nodes (zookeeper.extendedTypesEnabled): the node is not kept by a TTL, and stays until closed");
                return;
            }
            Err(e) => tracing::debug!(path = %touch, error = %e, "touch failed; trying again"),
            Ok(()) => {}
        }
        tokio::time::sleep(every).await;
    }
}

/// Creates the child with the TTL, or writes it (which restarts its TTL) if it exists. A
/// missing container is not an error: the container's own task creates it.
async fn touch_once(client: &Client, touch: &str, ttl: Duration) -> Result<(), Error> {
    let options = CreateOptions::persistent_with_ttl(ttl);
    match client.create(touch, b"", &options).await {
        Ok(_) | Err(Error::NoNode) => Ok(()),
        Err(Error::NodeExists) => client.set_data(touch, b"", None).await.map(drop),
        Err(e) => Err(e),
    }
}
