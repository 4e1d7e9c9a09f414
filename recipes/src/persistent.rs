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

use std::sync::{Arc, Mutex as StdMutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use zkwire::{path, Acl, Backoff, Client, CreateMode, CreateOptions, Error, EventType, Stat};

use crate::cleanup::{self, Job};
use crate::error::LockError;
use crate::guid::{owned_by_guid, Uuid};
use crate::internals::create_containers;
use crate::options::LockOptions;

/// How many events a [`NodeEvents`] receiver may fall behind before it misses the oldest.
const EVENT_CAPACITY: usize = 64;

/// The largest pause between two attempts of the task (a create refused by an ACL, a
/// read-only server...): such errors may clear up, and are tried again at this pace.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What happened to a [`PersistentNode`], in order, from [`PersistentNode::events`].
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{NodeEvent, PersistentNode};
///
/// let node = PersistentNode::ephemeral(client, "/services/api/leader", "10.0.0.7:8080");
/// let mut events = node.events();
/// node.start();
/// while let Some(event) = events.next().await {
///     match event {
///         NodeEvent::Created { path } | NodeEvent::Adopted { path, .. } => println!("up: {path}"),
///         NodeEvent::Deleted { path } => eprintln!("{path} gone, creating it again"),
///         NodeEvent::Error(e) => eprintln!("create failed, retrying: {e}"),
///         NodeEvent::Stopped(error) => {
///             eprintln!("stopped: {error:?}");
///             break;
///         }
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeEvent {
    /// Our session created the node at `path` (with its sequence number, for a sequential
    /// mode).
    Created {
        /// The node's full path.
        path: String,
    },
    /// A node already stood at our path and was taken as ours (docs/recipes.md §12): our
    /// data was written into it if it held other data. `owner` is its ephemeral owner (0
    /// for a persistent node; our session's id when a create of ours applied unseen).
    Adopted {
        /// The node's full path.
        path: String,
        /// Its `ephemeralOwner`.
        owner: i64,
    },
    /// An ephemeral node of another session stood at our path and was deleted, so that our
    /// session creates its own (a `Created` follows): the node of a previous run of this
    /// process, or of our own expired session.
    Replaced {
        /// The path.
        path: String,
        /// The session that owned the deleted node.
        owner: i64,
    },
    /// Our node is gone (deleted, or with an expired session); the task creates it again.
    Deleted {
        /// The path it had.
        path: String,
    },
    /// Our data was written into the node.
    DataSet {
        /// The node's full path.
        path: String,
        /// The node's data version after the write.
        version: i32,
    },
    /// A create failed with an error that may clear up (`NoAuth`, `NoNode` with parent
    /// creation off, a read-only server...): the task tries again with backoff. Connection
    /// losses are retried without an event.
    Error(Error),
    /// The task stopped: [`close`](PersistentNode::close)d or dropped (`None`), or on an
    /// error no retry fixes (`Some`: the session ended without renewal, the client was
    /// closed, an invalid path or mode...). The last event of a run.
    Stopped(Option<Error>),
    /// This receiver fell behind and missed that many events.
    Missed(u64),
}

/// The events of a [`PersistentNode`], from [`PersistentNode::events`].
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{NodeEvent, PersistentNode};
///
/// let node = PersistentNode::ephemeral(client, "/workers/worker-7", "idle");
/// let mut events = node.events(); // before start: the first `Created` is not missed
/// node.start();
/// tokio::spawn(async move {
///     while let Some(event) = events.next().await {
///         if let NodeEvent::Missed(n) = event {
///             eprintln!("fell behind: {n} events missed");
///         }
///     }
/// });
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct NodeEvents {
    rx: broadcast::Receiver<NodeEvent>,
}

impl NodeEvents {
    /// The next event; `None` once the node and its task are gone.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is never lost by dropping the future.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{NodeEvent, PersistentNode};
    ///
    /// let node = PersistentNode::ephemeral(client, "/workers/worker-7", "idle");
    /// let mut events = node.events();
    /// node.start();
    /// // Wait for the first create (or adoption) of the node.
    /// while let Some(event) = events.next().await {
    ///     match event {
    ///         NodeEvent::Created { path } | NodeEvent::Adopted { path, .. } => {
    ///             println!("registered at {path}");
    ///             break;
    ///         }
    ///         NodeEvent::Stopped(error) => {
    ///             eprintln!("stopped before creating it: {error:?}");
    ///             break;
    ///         }
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Option<NodeEvent> {
        match self.rx.recv().await {
            Ok(event) => Some(event),
            Err(broadcast::error::RecvError::Lagged(n)) => Some(NodeEvent::Missed(n)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

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
    task: StdMutex<Option<Running>>,
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
    /// The task runs.
    running: bool,
    /// Our node, while it is known to exist.
    path: Option<String>,
    /// Created (or adopted) at least once since the last start.
    initialized: bool,
    /// Why the task stopped, if not closed.
    failed: Option<Error>,
}

#[derive(Debug)]
struct Running {
    close: watch::Sender<bool>,
    handle: JoinHandle<()>,
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
            task: StdMutex::new(None),
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

    /// Starts the background task (a no-op while it runs). Needs a tokio runtime.
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
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if task.as_ref().is_some_and(|r| !r.handle.is_finished()) {
            return;
        }
        let (close, closed) = watch::channel(false);
        self.shared.status.send_replace(Status {
            running: true,
            ..Status::default()
        });
        let worker = Worker {
            client: self.client.clone(),
            spec: self.spec.clone(),
            shared: Arc::clone(&self.shared),
            closed,
            unsure: false,
            claim: true,
            sessions: Vec::new(),
        };
        let handle = tokio::spawn(worker.run());
        *task = Some(Running { close, handle });
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

    /// Stops the task and deletes the node (retrying across connection losses; a delete
    /// still refused is left to the client's cleanup worker). [`start`](Self::start) may
    /// run it again later.
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
        let running = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Running { close, handle }) = running {
            close.send_replace(true);
            // The task ends by itself on the signal; a panic in it is not ours to resume.
            let _ = handle.await;
        }
        let failed = self.shared.status.borrow().failed.clone();
        self.shared.status.send_modify(|s| s.running = false);
        failed.map_or(Ok(()), |e| Err(e.into()))
    }
}

impl Drop for PersistentNode {
    fn drop(&mut self) {
        let task = self.task.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = task.take() {
            // The task deletes the node and ends.
            running.close.send_replace(true);
        }
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

    /// Publishes our node's path (`None`: gone); the first one initializes the run.
    fn publish(&self, node: Option<String>) {
        self.status.send_modify(|s| {
            s.initialized |= node.is_some();
            s.path = node;
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
                Err(e) if e.is_retryable() => {
                    backoff.pause().await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

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
fn session_owned(owner: i64) -> bool {
    owner != 0 && owner != i64::MIN && owner.to_be_bytes()[0] != 0xff
}

/// The task behind a started [`PersistentNode`].
struct Worker {
    client: Client,
    spec: Spec,
    shared: Arc<Shared>,
    closed: watch::Receiver<bool>,
    /// A protected create failed in a way that leaves unknown whether it applied: look for
    /// our guid before creating again, and for duplicates once created.
    unsure: bool,
    /// An ephemeral node of an unknown session found at our path may still be replaced:
    /// true from start until the node is first created or adopted, or one such node was
    /// replaced. Afterwards such a node is adopted, never deleted: two live nodes on one
    /// path (a duplicate id) would otherwise delete each other's node for ever.
    claim: bool,
    /// The sessions that created our node in this run: a node left by one of them is ours
    /// to replace.
    sessions: Vec<i64>,
}

impl Worker {
    async fn run(mut self) {
        let failed = match self.keep().await {
            Stop::Closed => self.remove().await,
            Stop::Failed(e) => {
                tracing::warn!(path = self.spec.path, error = %e, "persistent node stopped");
                Some(e)
            }
        };
        self.shared.status.send_modify(|s| {
            s.running = false;
            s.path = None;
            s.failed.clone_from(&failed);
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
            self.shared.publish(None);
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
                Ok(Some(node)) => return Ok(node),
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
                // A protected create may have applied: find it by guid next time.
                self.unsure |= self.spec.protected;
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
    async fn attempt(&mut self) -> Result<Option<String>, Error> {
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
        self.shared.publish(Some(node.clone()));
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
        self.shared.publish(Some(target.clone()));
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
                Ok((Some(_), watcher)) => watcher,
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

    /// The next pause of `backoff`, cut short by the close signal.
    async fn pause(&mut self, backoff: &mut Backoff) -> Result<(), Stop> {
        let delay = backoff.next_delay().unwrap_or(MAX_PAUSE);
        tokio::select! {
            () = tokio::time::sleep(delay) => Ok(()),
            _ = self.closed.wait_for(|closed| *closed) => Err(Stop::Closed),
        }
    }

    /// On close: deletes our node (and, after a create of unknown outcome, every node with
    /// our guid). Retried while retryable; a refused delete goes to the cleanup worker and
    /// is reported.
    async fn remove(&mut self) -> Option<Error> {
        let node = self.shared.status.borrow().path.clone();
        let mut doomed: Vec<String> = node.into_iter().collect();
        if self.unsure {
            // Best effort: a create that applied unseen is found by its guid.
            doomed.extend(self.ours_by_guid().await.unwrap_or_default());
        }
        let mut refused = None;
        for node in doomed {
            if let Err(e) = self.delete(&node).await {
                refused = Some(e);
            }
        }
        refused
    }

    /// Deletes `node`, retrying across connection losses.
    async fn delete(&self, node: &str) -> Result<(), Error> {
        let mut backoff = Backoff::new();
        loop {
            match self.client.delete(node, None).await {
                Ok(()) | Err(Error::NoNode) => return Ok(()),
                Err(e) if e.is_retryable() => {
                    backoff.pause().await;
                }
                // An ephemeral node went with the session; a persistent one cannot be
                // deleted by this client any more.
                Err(e) if e.is_terminal() && self.spec.mode.is_ephemeral() => return Ok(()),
                Err(e) if e.is_terminal() => return Err(e),
                Err(e) => {
                    tracing::warn!(path = node, error = %e, "persistent node delete refused; left to the cleanup worker");
                    cleanup::enqueue(&self.client, Job::Delete(node.to_owned()));
                    return Err(e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Names and owners here; guid recovery against a real server (the rest is in
    //! `recipes/tests/persistent.rs`).
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use zkwire_testing::support::fresh_chroot;

    use super::*;

    /// A worker for `node`, as `start` makes it, without running it.
    fn worker(node: &PersistentNode, close: &watch::Sender<bool>) -> Worker {
        Worker {
            client: node.client.clone(),
            spec: node.spec.clone(),
            shared: Arc::clone(&node.shared),
            closed: close.subscribe(),
            unsure: false,
            claim: true,
            sessions: Vec::new(),
        }
    }

    /// Creates `n` nodes named with `node`'s guid under `/q`, as creates applied unseen.
    async fn plant(
        client: &Client,
        node: &PersistentNode,
        mode: CreateMode,
        n: usize,
    ) -> Vec<String> {
        let options = CreateOptions::new(mode).with_container_parents();
        let mut planted = Vec::new();
        for _ in 0..n {
            let (path, _) = client
                .create_all(&node.spec.target(), b"", &options)
                .await
                .unwrap();
            planted.push(path);
        }
        planted
    }

    async fn children(client: &Client) -> Vec<String> {
        let mut names = client.get_children("/q").await.unwrap();
        names.sort();
        names.into_iter().map(|n| path::join("/q", &n)).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unsure_create_adopts_our_sessions_node_and_deletes_its_duplicates() {
        let cs = fresh_chroot("persistent_guid_ours").await;
        let c = Client::connect(&cs).await.unwrap();
        let mode = CreateMode::EphemeralSequential;
        let node = PersistentNode::new(c.clone(), "/q/item-", mode, "data");
        let (close, _) = watch::channel(false);
        let mut worker = worker(&node, &close);
        let planted = plant(&c, &node, mode, 2).await;
        worker.unsure = true;
        let adopted = worker.attempt().await.unwrap();
        assert_eq!(
            adopted.as_ref(),
            Some(&planted[0]),
            "the first one, not a new one"
        );
        assert_eq!(children(&c).await, planted[..1], "the duplicate is gone");
        assert!(!worker.unsure);
        let (data, _) = c.get_data(&planted[0]).await.unwrap();
        assert_eq!(&data[..], b"data", "our data written into it");
        assert_eq!(node.actual_path(), Some(planted[0].clone()));
        c.close().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unsure_create_ignores_another_sessions_ephemeral_node_with_our_guid() {
        let cs = fresh_chroot("persistent_guid_theirs").await;
        let c = Client::connect(&cs).await.unwrap();
        let other = Client::connect(&cs).await.unwrap();
        let mode = CreateMode::EphemeralSequential;
        let node = PersistentNode::new(c.clone(), "/q/item-", mode, "data");
        let (close, _) = watch::channel(false);
        let mut worker = worker(&node, &close);
        // An old session of ours: its node goes with it.
        let theirs = plant(&other, &node, mode, 1).await;
        worker.unsure = true;
        let ours = worker.attempt().await.unwrap().unwrap();
        assert_ne!(ours, theirs[0]);
        assert_eq!(children(&c).await.len(), 2, "theirs untouched");
        let (_, stat) = c.get_data(&ours).await.unwrap();
        assert_eq!(stat.ephemeral_owner, c.session_id());
        c.close().await.unwrap();
        other.close().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unsure_persistent_create_adopts_the_first_node_with_our_guid() {
        let cs = fresh_chroot("persistent_guid_persistent").await;
        let c = Client::connect(&cs).await.unwrap();
        let mode = CreateMode::PersistentSequential;
        let node = PersistentNode::new(c.clone(), "/q/item-", mode, "data");
        let (close, _) = watch::channel(false);
        let mut worker = worker(&node, &close);
        // Persistent nodes have no owner: the guid alone says they are ours.
        let planted = plant(&c, &node, mode, 3).await;
        worker.unsure = true;
        let adopted = worker.attempt().await.unwrap();
        assert_eq!(adopted.as_ref(), Some(&planted[0]));
        assert_eq!(children(&c).await, planted[..1]);
        c.close().await.unwrap();
    }

    #[test]
    fn split_and_protected_target() {
        assert_eq!(split("/a/b-"), ("/a", "b-"));
        assert_eq!(split("/a/"), ("/a", ""));
        assert_eq!(split("/b"), ("/", "b"));
        let spec = Spec {
            path: "/svc/node-".into(),
            mode: CreateMode::EphemeralSequential,
            ttl: None,
            acl: Acl::open_unsafe(),
            protected: true,
            parents: true,
            prefix: "_c_00000000-0000-4000-8000-000000000000-".into(),
        };
        assert_eq!(
            spec.target(),
            "/svc/_c_00000000-0000-4000-8000-000000000000-node-"
        );
        assert_eq!(spec.parent(), "/svc");
        let plain = Spec {
            protected: false,
            ..spec
        };
        assert_eq!(plain.target(), "/svc/node-");
    }

    #[test]
    fn owners_that_are_sessions() {
        assert!(session_owned(0x0100_0000_0000_0001));
        assert!(!session_owned(0), "persistent");
        assert!(!session_owned(i64::MIN), "container");
        let ttl = i64::from_be_bytes([0xff, 0, 0, 0, 0, 0, 0xea, 0x60]);
        assert!(!session_owned(ttl), "TTL");
    }
}
