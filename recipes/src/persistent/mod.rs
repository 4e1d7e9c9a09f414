//! [`PersistentNode`]: a node that stays (Curator's `PersistentNode` and
//! `PersistentEphemeralNode`), kept by one background task per started node.
//!
//! The task creates the node (missing parents as containers), watches it with `exists`, and
//! creates it again when it goes: deleted from outside, reaped with an expired session on a
//! client that renews its session, or taken by the server (a container, a TTL). The data
//! last given to [`PersistentNode::set_data`] is what the node holds and what every
//! re-create writes. When a node already stands at our path the rules of docs/recipes.md
//! §12 decide whether it is ours, someone else's to adopt, or a stale node of ours to
//! replace.
//!
//! The handle and the state it shares with its task are here; the events in `events.rs`; the
//! task itself in `worker.rs`; [`PersistentTtlNode`], a container kept by a TTL child, in
//! `ttl.rs`.

mod events;
#[cfg(test)]
mod tests;
mod ttl;
mod worker;

use std::sync::{Arc, Mutex as StdMutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch};
use zkwire::{path, Acl, Backoff, Client, CreateMode, CreateOptions, Error};

pub use events::{NodeEvent, NodeEvents};
pub use ttl::PersistentTtlNode;

use crate::error::LockError;
use crate::guid::Uuid;
use crate::internals::pause_if_retryable;
use crate::task::Task;
use events::EVENT_CAPACITY;
use worker::{Held, Worker};

/// A node that stays, as Curator's `PersistentNode` (and `PersistentEphemeralNode`): once
/// [started](Self::start), a background task creates it and creates it again whenever it
/// goes, with the data last [set](Self::set_data), until [closed](Self::close) (which
/// deletes it).
///
/// - **Modes**: any [`CreateMode`]. Ephemeral nodes come back after a session renewal
///   ([`zkwire::ClientBuilder::with_session_renewal`]) owned by the new session; without
///   renewal an expired session stops the task ([`NodeEvent::Stopped`]). TTL modes need
///   [`with_ttl`](Self::with_ttl) (and a server with TTL nodes enabled).
/// - **Sequential modes** get a new sequence number at each re-create, so
///   [`actual_path`](Self::actual_path) changes. They are *protected* by default: the name
///   carries Curator's `_c_<uuid>-` prefix, so that a create whose reply was lost is found
///   again instead of being made twice.
/// - **Parents** missing are created as containers (Curator's
///   `creatingParentContainersIfNeeded`), unless
///   [`with_parent_creation`](Self::with_parent_creation) is off.
/// - **A node already at our path** (non-sequential modes): ours if our session owns it;
///   deleted and made again if it is an ephemeral node of another session found at start (a
///   previous run of this process whose session has not expired yet) or of an earlier
///   session of ours; otherwise adopted with our data, as Curator does (docs/recipes.md §12).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use std::time::Duration;
/// use zkwire::CreateMode;
/// use zkwire_recipes::PersistentNode;
///
/// let mode = CreateMode::EphemeralSequential;
/// let node = PersistentNode::new(client, "/services/api/instance-", mode, "10.0.0.7:8080");
/// node.start();
/// if node.wait_for_initial_create(Duration::from_secs(5)).await? {
///     println!("registered at {:?}", node.actual_path());
/// }
/// node.set_data("10.0.0.7:8081").await?; // kept across re-creates
/// node.close().await?; // deleted
/// # Ok(()) }
/// ```
///
/// Dropping the handle stops the task, which deletes the node in the background.
#[derive(Debug)]
pub struct PersistentNode {
    client: Client,
    spec: Spec,
    shared: Arc<Shared>,
    task: Task,
}

/// What to create: fixed before [`PersistentNode::start`].
#[derive(Debug, Clone)]
struct Spec {
    /// The path as given (the base path of a sequential mode).
    path: String,
    mode: CreateMode,
    ttl: Option<Duration>,
    acl: Vec<Acl>,
    protected: bool,
    parents: bool,
    /// `_c_<uuid>-`, drawn once per node: a protected name carries it.
    prefix: String,
}

/// What the handle and the task share.
#[derive(Debug)]
struct Shared {
    /// The data the node should hold: what `set_data` wrote last, what a create writes.
    data: StdMutex<Bytes>,
    /// Held over every request that writes our data (creates and setData), with the path
    /// published before it is let go: the data set last is the data written last.
    writes: tokio::sync::Mutex<()>,
    status: watch::Sender<Status>,
    events: broadcast::Sender<NodeEvent>,
}

#[derive(Debug, Clone, Default)]
struct Status {
    /// Which run (start) this is of: a task still closing after a new start leaves the new
    /// run's status alone.
    run: u64,
    /// The task runs.
    running: bool,
    /// Our node, while it is known to exist.
    path: Option<String>,
    /// Created (or adopted) at least once since the last start.
    initialized: bool,
    /// Why the task stopped, if not closed.
    failed: Option<Error>,
}

impl PersistentNode {
    /// A node at `path` of `mode` holding `data`; nothing is sent until
    /// [`start`](Self::start). Protected when `mode` is sequential; parents created as
    /// containers; open ACL.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire::CreateMode;
    /// use zkwire_recipes::PersistentNode;
    ///
    /// // A persistent node put back whenever someone deletes it.
    /// let mode = CreateMode::Persistent;
    /// let node = PersistentNode::new(client, "/config/feature-flags", mode, "{}");
    /// node.start();
    /// # Ok(()) }
    /// ```
    pub fn new(
        client: Client,
        path: impl Into<String>,
        mode: CreateMode,
        data: impl Into<Bytes>,
    ) -> Self {
        let (status, _) = watch::channel(Status::default());
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        Self {
            client,
            spec: Spec {
                path: path.into(),
                mode,
                ttl: None,
                acl: Acl::open_unsafe(),
                protected: mode.is_sequential(),
                parents: true,
                prefix: Uuid::new_v4().protected_prefix(),
            },
            shared: Arc::new(Shared {
                data: StdMutex::new(data.into()),
                writes: tokio::sync::Mutex::new(()),
                status,
                events,
            }),
            task: Task::default(),
        }
    }

    /// An [`Ephemeral`](CreateMode::Ephemeral) node (Curator's `PersistentEphemeralNode`
    /// in mode `EPHEMERAL`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentNode;
    ///
    /// // Curator's `PersistentEphemeralNode`: there while this process runs.
    /// let node = PersistentNode::ephemeral(client, "/live/worker-7", "10.0.0.7");
    /// node.start();
    /// node.wait_for_initial_create(Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub fn ephemeral(client: Client, path: impl Into<String>, data: impl Into<Bytes>) -> Self {
        Self::new(client, path, CreateMode::Ephemeral, data)
    }

    /// Names the node with Curator's protected prefix `_c_<uuid>-` before the last segment
    /// of the path (Curator's `withProtection()`, `PROTECTED_*` modes). On by default for
    /// the sequential modes, where it is what lets a create whose reply was lost be found.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire::CreateMode;
    /// use zkwire_recipes::PersistentNode;
    ///
    /// // Plain `/jobs/job-<seq>` names, as consumers that parse them expect.
    /// let mode = CreateMode::EphemeralSequential;
    /// let node = PersistentNode::new(client, "/jobs/job-", mode, "payload")
    ///     .with_protection(false);
    /// node.start();
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_protection(mut self, protected: bool) -> Self {
        self.spec.protected = protected;
        self
    }

    /// The TTL of a TTL mode (refused by the server for the others).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire::CreateMode;
    /// use zkwire_recipes::PersistentNode;
    ///
    /// // Removed by the server an hour after this process stops keeping it (and it is emptied).
    /// let mode = CreateMode::PersistentWithTtl;
    /// let node = PersistentNode::new(client, "/heartbeats/worker-7", mode, "")
    ///     .with_ttl(Duration::from_secs(3600));
    /// node.start();
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.spec.ttl = Some(ttl);
        self
    }

    /// The node's ACL (open by default). Parents are created open.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire::{Acl, CreateMode};
    /// use zkwire_recipes::PersistentNode;
    ///
    /// client.add_auth("digest", "alice:alice-secret").await?;
    /// // Only alice's sessions may change or delete the node.
    /// let node = PersistentNode::new(client, "/config/alice", CreateMode::Persistent, "settings")
    ///     .with_acl(Acl::creator_all());
    /// node.start();
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.spec.acl = acl;
        self
    }

    /// Whether missing parents are created, as containers (default: yes). Off, a missing
    /// parent is reported ([`NodeEvent::Error`] with `NoNode`) and waited for.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::PersistentNode;
    ///
    /// // `/services/api` is created by the operator: wait for it rather than make it.
    /// let node = PersistentNode::ephemeral(client, "/services/api/worker-7", "10.0.0.7")
    ///     .with_parent_creation(false);
    /// node.start();
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_parent_creation(mut self, create: bool) -> Self {
        self.spec.parents = create;
        self
    }

    /// The path as given (a sequential mode's base path).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire::CreateMode;
    /// use zkwire_recipes::PersistentNode;
    ///
    /// let mode = CreateMode::EphemeralSequential;
    /// let node = PersistentNode::new(client, "/queue/item-", mode, "job");
    /// assert_eq!(node.path(), "/queue/item-"); // the base path, not the created node's
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> &str {
        &self.spec.path
    }

    /// The node's full path while it is known to exist: `None` before the first create,
    /// while it is being created again, and once closed.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire::CreateMode;
    /// use zkwire_recipes::PersistentNode;
    ///
    /// let mode = CreateMode::EphemeralSequential;
    /// let node = PersistentNode::new(client, "/queue/item-", mode, "job");
    /// assert_eq!(node.actual_path(), None);
    /// node.start();
    /// if node.wait_for_initial_create(Duration::from_secs(5)).await? {
    ///     // Such as `/queue/_c_<uuid>-item-0000000042`, while it exists.
    ///     println!("created {:?}", node.actual_path());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn actual_path(&self) -> Option<String> {
        self.shared.status.borrow().path.clone()
    }

    /// The data the node holds, or will hold once created (as last set).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::PersistentNode;
    ///
    /// let node = PersistentNode::ephemeral(client, "/live/worker-7", "idle");
    /// node.set_data("busy").await?; // not started: only kept for the create
    /// assert_eq!(&node.data()[..], b"busy");
    /// # Ok(()) }
    /// ```
    pub fn data(&self) -> Bytes {
        self.shared.data().clone()
    }

    /// The events from now on.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{NodeEvent, PersistentNode};
    ///
    /// let node = PersistentNode::ephemeral(client, "/live/worker-7", "idle");
    /// let mut events = node.events();
    /// node.start();
    /// if let Some(NodeEvent::Created { path }) = events.next().await {
    ///     println!("created {path}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> NodeEvents {
        NodeEvents {
            rx: self.shared.events.subscribe(),
        }
    }

    /// Starts the background task (a no-op while it runs). Needs a tokio runtime. After a
    /// [`close`](Self::close), even one dropped before it returned, the new task waits
    /// until the old one has deleted its node.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::PersistentNode;
    ///
    /// let node = PersistentNode::ephemeral(client, "/live/worker-7", "idle");
    /// node.start(); // returns at once: the node is created in the background
    /// node.start(); // no-op: already running
    /// # Ok(()) }
    /// ```
    pub fn start(&self) {
        self.task.start(|closed| {
            let run = self.shared.status.borrow().run + 1;
            self.shared.status.send_replace(Status {
                run,
                running: true,
                ..Status::default()
            });
            let worker = Worker {
                run,
                published: None,
                client: self.client.clone(),
                spec: self.spec.clone(),
                shared: Arc::clone(&self.shared),
                closed,
                unsure: false,
                unsure_at_path: false,
                claim: true,
                sessions: Vec::new(),
                held: Held::default(),
            };
            worker.run()
        });
    }

    /// Waits until the node has been created (or adopted) since [`start`](Self::start), at
    /// most `timeout`; `false` when it has not been by then (Curator's
    /// `waitForInitialCreate`).
    ///
    /// # Errors
    /// [`LockError::Closed`] when the node is not started, or closed;
    /// [`LockError::Client`] with the error that stopped the task.
    ///
    /// # Cancel safety
    /// Cancel safe: waiting sends nothing.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::PersistentNode;
    ///
    /// let node = PersistentNode::ephemeral(client, "/live/worker-7", "idle");
    /// node.start();
    /// if !node.wait_for_initial_create(Duration::from_secs(5)).await? {
    ///     eprintln!("not created yet; still trying in the background");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<bool, LockError> {
        let mut status = self.shared.status.subscribe();
        let done = |s: &Status| s.initialized || !s.running;
        let Ok(Ok(status)) = tokio::time::timeout(timeout, status.wait_for(done)).await else {
            return Ok(false);
        };
        if status.running {
            return Ok(true);
        }
        Err(status
            .failed
            .clone()
            .map_or(LockError::Closed, LockError::from))
    }

    /// Sets the node's data: every later re-create writes it, and the node, if it exists
    /// now, gets it at once (an unconditional `setData`, retried across connection losses).
    /// While the task does not run (before [`start`](Self::start), after a close or a
    /// stop) it only replaces the data the next create writes.
    ///
    /// # Errors
    /// The client's errors other than connection loss (`NoAuth`, the session's end...). A
    /// node that vanished meanwhile is not an error: it is created again with this data.
    ///
    /// # Cancel safety
    /// The write runs in a task of its own: dropping the future does not cancel it.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::PersistentNode;
    ///
    /// let node = PersistentNode::ephemeral(client, "/live/worker-7", "idle");
    /// node.start();
    /// // Written now if the node exists, and by every later re-create.
    /// node.set_data("busy").await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_data(&self, data: impl Into<Bytes>) -> Result<(), LockError> {
        let shared = Arc::clone(&self.shared);
        let client = self.client.clone();
        let data = data.into();
        let write = tokio::spawn(async move { shared.write(&client, data).await });
        // A join error: the runtime is shutting down.
        write.await.unwrap_or(Err(LockError::Closed))
    }

    /// Stops the task and deletes the node (retrying across connection losses). A delete the
    /// server refuses (`NotEmpty`: someone made a child under it; `NoAuth`) is reported and
    /// not retried: the node stays, and a later [`start`](Self::start), which may run it
    /// again, adopts it.
    ///
    /// # Errors
    /// The error that had stopped the task, or that refused the delete.
    ///
    /// # Cancel safety
    /// Dropping the future still closes the node; it is then deleted in the background.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::PersistentNode;
    ///
    /// let node = PersistentNode::ephemeral(client, "/live/worker-7", "idle");
    /// node.start();
    /// // ... serve ...
    /// node.close().await?; // the task stops and the node is deleted
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<(), LockError> {
        let run = self.shared.status.borrow().run;
        self.task.close().await;
        // Unless started again meanwhile: that run's status is its own.
        let mut failed = None;
        self.shared.status.send_if_modified(|s| {
            if s.run != run {
                return false;
            }
            failed.clone_from(&s.failed);
            s.running = false;
            true
        });
        failed.map_or(Ok(()), |e| Err(e.into()))
    }
}

impl Drop for PersistentNode {
    fn drop(&mut self) {
        // The task deletes the node and ends.
        self.task.signal_close();
    }
}

impl Spec {
    /// The path a create is sent to: the protected name when protected.
    fn target(&self) -> String {
        if !self.protected {
            return self.path.clone();
        }
        let (parent, name) = split(&self.path);
        path::join(parent, &format!("{}{name}", self.prefix))
    }

    /// The directory our node lives in.
    fn parent(&self) -> &str {
        split(&self.path).0
    }

    fn create_options(&self) -> CreateOptions {
        let options = CreateOptions::new(self.mode).with_acl(self.acl.clone());
        match self.ttl {
            Some(ttl) => options.with_ttl(ttl),
            None => options,
        }
    }
}

/// A path's directory and last segment (`/a/b-` gives `/a` and `b-`; `/a/` gives `/a` and
/// an empty name, a sequential base path).
fn split(node_path: &str) -> (&str, &str) {
    let parent = path::parent(node_path).unwrap_or("/");
    let name = node_path.rsplit('/').next().unwrap_or("");
    (parent, name)
}

impl Shared {
    fn data(&self) -> MutexGuard<'_, Bytes> {
        self.data.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn emit(&self, event: NodeEvent) {
        // No receiver is fine.
        let _ = self.events.send(event);
    }

    /// Publishes our node's path (`None`: gone) in run `run`'s status; the first one
    /// initializes the run.
    fn publish(&self, run: u64, node: Option<String>) {
        self.status.send_if_modified(|s| {
            if s.run != run {
                return false;
            }
            s.initialized |= node.is_some();
            s.path = node;
            true
        });
    }

    /// [`PersistentNode::set_data`]: stores `data` and writes it into the node, if any.
    async fn write(&self, client: &Client, data: Bytes) -> Result<(), LockError> {
        let _writing = self.writes.lock().await;
        *self.data() = data.clone();
        let Some(node) = self.status.borrow().path.clone() else {
            // Not created yet, or being created again: the create writes it.
            return Ok(());
        };
        let mut backoff = Backoff::new();
        loop {
            match client.set_data(&node, &data, None).await {
                Ok(stat) => {
                    let version = stat.version;
                    self.emit(NodeEvent::DataSet {
                        path: node,
                        version,
                    });
                    return Ok(());
                }
                // Gone: the task creates it again, with this data.
                Err(Error::NoNode) => return Ok(()),
                Err(e) => pause_if_retryable(&mut backoff, e).await?,
            }
        }
    }
}
