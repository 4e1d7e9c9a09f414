//! [`TreeCache`]: a local copy of a subtree kept current by one persistent recursive watch
//! (Curator's `CuratorCache`).
//!
//! The worker task owns the watch. Every node event is answered by reading that node again
//! (`getData`) and reconciling the copy with what the server says now, so a late or
//! repeated event changes nothing and a burst of changes to one node ends at its last state.
//! Events missed while disconnected (a persistent watch restored on reconnect does not
//! replay them), across a session renewal, or when the watch's own queue overflowed, are
//! recovered by a resync: the subtree is read again and only the differences are emitted.
//! See docs/recipes.md §11.
//!
//! The cache's types and handle are here; its task in `worker.rs`, and the comparison of two
//! reads of the subtree in `diff.rs`.

mod diff;
#[cfg(test)]
mod tests;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinHandle};
use zkwire::{Client, Error, Stat};

use worker::Worker;

/// One cached node: its data and `Stat` as last read.
///
/// ```no_run
/// # fn run(cache: zkwire_recipes::TreeCache) {
/// if let Some(node) = cache.get("/config/limits") {
///     println!("{} bytes at version {}", node.data.len(), node.stat.version);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedNode {
    /// The node's data.
    pub data: Bytes,
    /// The node's `Stat`.
    pub stat: Stat,
}

/// A change to the cache, in the order the cache applied them.
///
/// Replayed in order onto an empty map, the events give the cache's content: the initial
/// tree arrives as `Created` events (and `Unreadable` ones, which change nothing) followed
/// by one `Initialized`.
///
/// ```no_run
/// # async fn run(mut events: zkwire_recipes::CacheEvents) {
/// use zkwire_recipes::CacheEvent;
///
/// while let Some(event) = events.next().await {
///     match event {
///         CacheEvent::Created { path, node } => println!("+ {path}: {:?}", node.data),
///         CacheEvent::Changed { path, new, .. } => println!("~ {path}: {:?}", new.data),
///         CacheEvent::Deleted { path, .. } => println!("- {path}"),
///         CacheEvent::Unreadable { path } => println!("? {path}: not readable"),
///         CacheEvent::Initialized => println!("initial tree loaded"),
///         CacheEvent::Stopped(e) => println!("cache stopped: {e}"),
///         _ => {}
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheEvent {
    /// A node entered the cache (in the initial load, created, or found by a resync).
    Created {
        /// Its full path.
        path: String,
        /// What it holds.
        node: CachedNode,
    },
    /// A cached node's data or `Stat` changed.
    Changed {
        /// Its full path.
        path: String,
        /// What the cache held before.
        old: CachedNode,
        /// What it holds now.
        new: CachedNode,
    },
    /// A node left the cache (deleted, or replaced by a node of the same name: then a
    /// `Created` follows). Descendants leave before their parent.
    Deleted {
        /// Its full path.
        path: String,
        /// What the cache held.
        old: CachedNode,
    },
    /// The cache's session may not read this node (`NoAuth`), or its data or its list of
    /// children is larger than the client accepts (`ReplyTooLarge`, see
    /// `ClientBuilder::with_max_frame_len`): the cache holds neither it nor
    /// anything below it, and says so once, when it first finds it so (in the initial load,
    /// on an event, or in a resync), again only after the node was readable or gone in
    /// between. Changing an ACL fires no watch: a node that becomes readable (once the
    /// session is granted `READ` or authenticates) is noticed at its next data change, and
    /// its subtree is read then; a change either way is also found by the next resync
    /// (after a reconnection or a watch overflow).
    Unreadable {
        /// Its full path.
        path: String,
    },
    /// The initial tree has been delivered.
    Initialized,
    /// The consumer stopped reading: the stream stayed full (the capacity of
    /// [`TreeCacheBuilder::with_event_capacity`] waiting to be read) for over a second, the
    /// cache went on without it, and this one event stands in the place of the `missed`
    /// events that found no room, ahead of any later event. The cache applied them all the
    /// same: its copy is current ([`TreeCache::snapshot`]), and a consumer that replays the
    /// events into a copy of its own takes the snapshot again. A consumer that reads is
    /// waited for and never sees one; a stream held and never read stalls the copy once,
    /// for that second, and costs at most its capacity.
    Lagged {
        /// How many events it stands for.
        missed: u64,
    },
    /// The cache stopped for good (the session is over without renewal, or the client
    /// closed); its content is the last state it knew. The last event.
    Stopped(Error),
}

/// A path filter: whether the cache holds the node at this full path.
type PathFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Which nodes a [`TreeCache`] holds.
#[derive(Clone)]
struct Selection {
    /// The deepest level held below the root (0: the root alone).
    max_depth: Option<usize>,
    filter: Option<PathFilter>,
}

impl fmt::Debug for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Selection")
            .field("max_depth", &self.max_depth)
            .field("filter", &self.filter.as_ref().map(|_| "Fn(&str) -> bool"))
            .finish()
    }
}

/// How to build a [`TreeCache`]: [`TreeCache::builder`].
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire_recipes::TreeCache;
///
/// let (cache, events) = TreeCache::builder(client, "/config")
///     .with_max_depth(2)
///     .with_filter(|path| !path.ends_with(".tmp"))
///     .with_event_capacity(256)
///     .start()
///     .await?;
/// # let _ = (cache, events);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TreeCacheBuilder {
    client: Client,
    root: String,
    selection: Selection,
    capacity: usize,
}

impl TreeCacheBuilder {
    /// Holds nodes at most `depth` levels below the root (0: the root alone, a
    /// `NodeCache`). Deeper nodes are neither read nor held.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire_recipes::TreeCache;
    ///
    /// // The services registered under /services, not what each one keeps below its node.
    /// let (services, _events) = TreeCache::builder(client, "/services")
    ///     .with_max_depth(1)
    ///     .start()
    ///     .await?;
    /// println!("{} services", services.children("/services").len());
    /// # Ok(()) }
    /// ```
    pub fn with_max_depth(mut self, depth: usize) -> Self {
        self.selection.max_depth = Some(depth);
        self
    }

    /// Holds only the nodes whose full path `filter` accepts (their descendants are still
    /// considered on their own).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire_recipes::TreeCache;
    ///
    /// // Leave the editors' scratch nodes out.
    /// let (cache, _events) = TreeCache::builder(client, "/config")
    ///     .with_filter(|path| !path.ends_with(".tmp"))
    ///     .start()
    ///     .await?;
    /// # let _ = cache;
    /// # Ok(()) }
    /// ```
    pub fn with_filter(mut self, filter: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.selection.filter = Some(Arc::new(filter));
        self
    }

    /// How many events may wait for the consumer (default 1024). A full queue is waited on,
    /// so that a consumer that reads gets every event (a tree larger than the capacity
    /// included), but for a second at most: one that has stopped reading must not freeze the
    /// copy. The events that then find the queue full become one [`CacheEvent::Lagged`],
    /// delivered once there is room. Nothing grows without bound.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire_recipes::TreeCache;
    ///
    /// let (cache, _events) = TreeCache::builder(client, "/config")
    ///     .with_event_capacity(64)
    ///     .start()
    ///     .await?;
    /// # let _ = cache;
    /// # Ok(()) }
    /// ```
    pub fn with_event_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// Sets the watch, reads the subtree, and returns the cache with its event stream
    /// (which starts with the initial tree). Dropping the stream is fine: the cache then
    /// stops sending events, and stays current. So is not reading it: after a second of a
    /// full stream the cache goes on without it, and the events it missed become one
    /// [`CacheEvent::Lagged`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire_recipes::TreeCache;
    ///
    /// let (cache, mut events) = TreeCache::builder(client, "/config").start().await?;
    /// // The initial tree is in the cache already, and arrives as events too.
    /// println!("{} nodes", cache.len());
    /// while let Some(event) = events.next().await {
    ///     println!("{event:?}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The client's errors while setting the watch or reading the initial tree (a retryable
    /// error is retried until the session ends).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future stops the cache's task, and with it the watch.
    pub async fn start(self) -> Result<(TreeCache, CacheEvents), Error> {
        let nodes = Arc::new(RwLock::new(BTreeMap::new()));
        let (tx, rx) = mpsc::channel(self.capacity + worker::RESERVED);
        let worker = Worker {
            client: self.client,
            root: self.root.clone(),
            selection: self.selection,
            nodes: Arc::clone(&nodes),
            events: Some(tx),
            missed: 0,
            unreadable: BTreeSet::new(),
        };
        let (ready_tx, ready_rx) = oneshot::channel();
        let task = tokio::spawn(worker.run(ready_tx));
        // Until the cache is handed out, dropping this future is the only way to stop the
        // worker: it would otherwise keep its watch, and a client clone, for ever.
        let mut starting = Starting(Some(task.abort_handle()));
        match ready_rx.await {
            Ok(Ok(())) => {
                starting.0 = None;
                Ok((
                    TreeCache {
                        root: self.root,
                        nodes,
                        task,
                    },
                    CacheEvents { rx },
                ))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Closed),
        }
    }
}

/// Aborts a cache's worker that never got to its [`TreeCache`].
struct Starting(Option<AbortHandle>);

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(worker) = &self.0 {
            worker.abort();
        }
    }
}

/// A local copy of the subtree under a path, kept current by one persistent recursive watch,
/// as Curator's `CuratorCache` (which replaced `NodeCache`, `PathChildrenCache` and
/// `TreeCache`).
///
/// [`get`](Self::get) and [`snapshot`](Self::snapshot) read the copy; [`CacheEvents`] says
/// what changed, with old and new data and `Stat`. After a reconnection, a session renewal
/// ([`zkwire::ClientBuilder::with_session_renewal`]) or an overflow of the watch's queue the
/// cache reads the subtree again and emits exactly the differences. The copy may be ahead of
/// the events not yet received; it is never ahead of the server.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire_recipes::{CacheEvent, TreeCache};
///
/// let (cache, mut events) = TreeCache::builder(client, "/config").start().await?;
/// if let Some(node) = cache.get("/config/limits") {
///     println!("limits: {:?}", node.data);
/// }
/// while let Some(event) = events.next().await {
///     match event {
///         CacheEvent::Changed { path, new, .. } => println!("{path} is now {:?}", new.data),
///         CacheEvent::Stopped(e) => return Err(e),
///         other => println!("{other:?}"),
///     }
/// }
/// # Ok(()) }
/// ```
///
/// Dropping the cache stops its task and removes its local watcher. The server keeps its
/// watch until the connection ends, sending events the client reads and drops (see
/// [`zkwire::PersistentWatcher`]): servers before 3.9 cannot remove one persistent watch alone.
#[derive(Debug)]
pub struct TreeCache {
    root: String,
    nodes: Arc<RwLock<BTreeMap<String, CachedNode>>>,
    task: JoinHandle<()>,
}

impl TreeCache {
    /// A cache of the subtree at `root` (the root itself included; it may not exist yet).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire_recipes::TreeCache;
    ///
    /// let (cache, _events) = TreeCache::builder(client, "/config").start().await?;
    /// println!("{:?}", cache.get("/config/db"));
    /// # Ok(()) }
    /// ```
    pub fn builder(client: Client, root: impl Into<String>) -> TreeCacheBuilder {
        TreeCacheBuilder {
            client,
            root: root.into(),
            selection: Selection {
                max_depth: None,
                filter: None,
            },
            capacity: 1024,
        }
    }

    /// A cache of one node (Curator's `NodeCache`): [`builder`](Self::builder) with depth 0.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire_recipes::{CacheEvent, TreeCache};
    ///
    /// // Curator's NodeCache: one node, kept current.
    /// let (db, mut events) = TreeCache::node(client, "/config/db").await?;
    /// while let Some(event) = events.next().await {
    ///     if let CacheEvent::Changed { new, .. } = event {
    ///         println!("database is now {:?}", new.data);
    ///     }
    /// }
    /// # let _ = db;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`TreeCacheBuilder::start`].
    pub async fn node(
        client: Client,
        path: impl Into<String>,
    ) -> Result<(Self, CacheEvents), Error> {
        Self::builder(client, path).with_max_depth(0).start().await
    }

    /// The cached root path.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (cache, _events) = zkwire_recipes::TreeCache::builder(client, "/config").start().await?;
    /// assert_eq!(cache.root(), "/config");
    /// # Ok(()) }
    /// ```
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The cached node at `path`, if any.
    ///
    /// ```no_run
    /// # fn run(cache: zkwire_recipes::TreeCache) {
    /// match cache.get("/config/db") {
    ///     Some(node) => println!("database: {}", String::from_utf8_lossy(&node.data)),
    ///     None => println!("no database configured"),
    /// }
    /// # }
    /// ```
    pub fn get(&self, path: &str) -> Option<CachedNode> {
        self.read().get(path).cloned()
    }

    /// The names of the cached children of `path`, sorted.
    ///
    /// ```no_run
    /// # fn run(cache: zkwire_recipes::TreeCache) {
    /// for name in cache.children("/services") {
    ///     println!("service {name}");
    /// }
    /// # }
    /// ```
    pub fn children(&self, path: &str) -> Vec<String> {
        let nodes = self.read();
        let prefix = if path == "/" {
            "/".to_owned()
        } else {
            format!("{path}/")
        };
        nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter_map(|(p, _)| p.get(prefix.len()..))
            .filter(|rest| !rest.is_empty() && !rest.contains('/'))
            .map(str::to_owned)
            .collect()
    }

    /// The whole copy, path to node.
    ///
    /// ```no_run
    /// # fn run(cache: zkwire_recipes::TreeCache) {
    /// for (path, node) in cache.snapshot() {
    ///     println!("{path}: {} bytes", node.data.len());
    /// }
    /// # }
    /// ```
    pub fn snapshot(&self) -> BTreeMap<String, CachedNode> {
        self.read().clone()
    }

    /// How many nodes the cache holds.
    ///
    /// ```no_run
    /// # fn run(cache: zkwire_recipes::TreeCache) {
    /// println!("{} nodes cached under {}", cache.len(), cache.root());
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the cache holds no node.
    ///
    /// ```no_run
    /// # fn run(cache: zkwire_recipes::TreeCache) {
    /// if cache.is_empty() {
    ///     println!("{} does not exist (yet)", cache.root());
    /// }
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Whether the cache has stopped (see [`CacheEvent::Stopped`]).
    ///
    /// ```no_run
    /// # fn run(cache: zkwire_recipes::TreeCache) {
    /// if cache.is_stopped() {
    ///     eprintln!("the cache's session is over: its content no longer changes");
    /// }
    /// # }
    /// ```
    pub fn is_stopped(&self) -> bool {
        self.task.is_finished()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, CachedNode>> {
        self.nodes.read().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TreeCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The events of a [`TreeCache`], in order.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// let (_cache, mut events) = zkwire_recipes::TreeCache::builder(client, "/jobs").start().await?;
/// tokio::spawn(async move {
///     while let Some(event) = events.next().await {
///         println!("{event:?}");
///     }
/// });
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CacheEvents {
    rx: mpsc::Receiver<CacheEvent>,
}

impl CacheEvents {
    /// The next event; `None` once the cache is dropped (after [`CacheEvent::Stopped`] if
    /// it stopped by itself).
    ///
    /// ```no_run
    /// # async fn run(mut events: zkwire_recipes::CacheEvents) {
    /// use zkwire_recipes::CacheEvent;
    ///
    /// // Wait until the initial tree is in.
    /// while let Some(event) = events.next().await {
    ///     if event == CacheEvent::Initialized {
    ///         break;
    ///     }
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: an event is never lost by dropping the future.
    pub async fn next(&mut self) -> Option<CacheEvent> {
        self.rx.recv().await
    }
}
