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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zkwire::{path, AddWatchMode, Backoff, Client, Error, EventType, PersistentWatcher};
use zkwire::{SessionState, Stat};

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
    /// The cache's session may not read this node (`NoAuth`): the cache holds neither it nor
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

    /// How many events may wait for the consumer (default 1024). A full queue makes the
    /// cache wait; if the consumer stays away long enough for the watch's own queue to
    /// overflow, the cache resyncs once it is read again. Nothing grows without bound.
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
    /// stops sending events, and stays current.
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
    pub async fn start(self) -> Result<(TreeCache, CacheEvents), Error> {
        let nodes = Arc::new(RwLock::new(BTreeMap::new()));
        let (tx, rx) = mpsc::channel(self.capacity);
        let worker = Worker {
            client: self.client,
            root: self.root.clone(),
            selection: self.selection,
            nodes: Arc::clone(&nodes),
            events: Some(tx),
            unreadable: BTreeSet::new(),
        };
        let (ready_tx, ready_rx) = oneshot::channel();
        let task = tokio::spawn(worker.run(ready_tx));
        match ready_rx.await {
            Ok(Ok(())) => Ok((
                TreeCache {
                    root: self.root,
                    nodes,
                    task,
                },
                CacheEvents { rx },
            )),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Closed),
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
/// Dropping the cache stops its task and removes its local watcher.
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

/// The task behind a [`TreeCache`].
struct Worker {
    client: Client,
    root: String,
    selection: Selection,
    nodes: Arc<RwLock<BTreeMap<String, CachedNode>>>,
    /// `None` once the consumer dropped the stream.
    events: Option<mpsc::Sender<CacheEvent>>,
    /// Nodes found unreadable (announced by [`CacheEvent::Unreadable`]) and not readable since.
    unreadable: BTreeSet<String>,
}

/// A subtree as read: the selected nodes, and the nodes (or child lists) that were unreadable.
#[derive(Default)]
struct Read {
    tree: BTreeMap<String, CachedNode>,
    unreadable: BTreeSet<String>,
}

impl Worker {
    async fn run(mut self, ready: oneshot::Sender<Result<(), Error>>) {
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
        self.emit(CacheEvent::Stopped(stopped)).await;
    }

    /// Applies events until the cache must stop; returns why.
    async fn follow(
        &mut self,
        watcher: &mut PersistentWatcher,
        states: &mut zkwire::StateStream,
    ) -> Error {
        let mut connected = self.client.state() == SessionState::Connected;
        loop {
            tokio::select! {
                event = watcher.next() => match event {
                    // A session marker: the state stream says what to do.
                    Some(event) if event.event_type == EventType::None => {}
                    Some(event) => {
                        if let Err(e) = self.reconcile(&event.path).await {
                            // The connection or the session went: the resync that follows
                            // the next connection covers this node.
                            tracing::debug!(path = event.path, error = %e, "cache read failed");
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
                state = states.next() => match state {
                    None => return Error::Closed,
                    Some(SessionState::Connected) if !connected => {
                        connected = true;
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
                Err(Error::NoAuth) => {
                    if self.selects(&node_path) {
                        read.unreadable.insert(node_path);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            if self.selects(&node_path) {
                read.tree
                    .insert(node_path.clone(), CachedNode { data, stat });
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
                // READ covers both reads: the ACL changed in between. Unreadable now.
                Err(Error::NoAuth) => {
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
            Ok((data, stat)) => (Some(CachedNode { data, stat }), false),
            Err(Error::NoNode) => (None, false),
            // Held no longer: what we cannot read, we cannot vouch for.
            Err(Error::NoAuth) => (None, true),
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

    async fn emit(&mut self, event: CacheEvent) {
        if let Some(tx) = &self.events {
            if tx.send(event).await.is_err() {
                self.events = None;
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, CachedNode>> {
        self.nodes.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `new` is a later version of the same node's data than `old`. The child counters
/// (`cversion`, `numChildren`, `pzxid`) are as of the node's last read: a recursive watch
/// says nothing to a parent whose children change.
fn newer(new: &Stat, old: &Stat) -> bool {
    new.mzxid > old.mzxid
}

/// The events that turn `old` into `new`: deletions (descendants first), then creations
/// (parents first) and changes.
///
/// A node of `old` that is gone or was replaced (another `czxid`) leaves with everything held
/// below it, even descendants that `new` still has: the copy may have held a stale parent
/// over a current child (events for a node can come before the resync that finds its parent
/// replaced), and a deletion is only ever announced after its descendants'. Those
/// descendants then come back as creations.
fn differences(
    old: &BTreeMap<String, CachedNode>,
    new: &BTreeMap<String, CachedNode>,
) -> Vec<CacheEvent> {
    let mut removed: BTreeSet<&str> = BTreeSet::new();
    // Sorted order visits every ancestor before its descendants.
    for (path, before) in old {
        let replaced = new
            .get(path)
            .is_none_or(|after| after.stat.czxid != before.stat.czxid);
        if replaced || ancestors(path).any(|a| removed.contains(a)) {
            removed.insert(path);
        }
    }
    let mut events: Vec<CacheEvent> = removed
        .iter()
        .rev()
        .map(|path| CacheEvent::Deleted {
            path: (*path).to_owned(),
            old: old[*path].clone(),
        })
        .collect();
    for (path, after) in new {
        match old.get(path) {
            Some(before) if !removed.contains(path.as_str()) => {
                if before != after {
                    events.push(CacheEvent::Changed {
                        path: path.clone(),
                        old: before.clone(),
                        new: after.clone(),
                    });
                }
            }
            _ => events.push(CacheEvent::Created {
                path: path.clone(),
                node: after.clone(),
            }),
        }
    }
    events
}

/// The proper ancestors of an absolute path, nearest first (`/a/b/c`: `/a/b`, `/a`, `/`).
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let cut = rest.rfind('/')?;
        rest = if cut == 0 && rest.len() > 1 {
            "/"
        } else if cut == 0 {
            return None;
        } else {
            &rest[..cut]
        };
        Some(rest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(czxid: i64, mzxid: i64) -> CachedNode {
        CachedNode {
            data: Bytes::new(),
            stat: Stat {
                czxid,
                mzxid,
                ..Stat::default()
            },
        }
    }

    #[test]
    fn ancestors_nearest_first() {
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), ["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/a").collect::<Vec<_>>(), ["/"]);
        assert_eq!(ancestors("/").count(), 0);
    }

    #[test]
    fn a_replaced_parent_takes_its_unchanged_children_with_it() {
        let old = BTreeMap::from([
            ("/r".to_owned(), node(1, 1)),
            ("/r/a".to_owned(), node(2, 2)),
            ("/r/a/x".to_owned(), node(5, 5)),
            ("/r/a-b".to_owned(), node(3, 3)),
        ]);
        let mut new = old.clone();
        new.insert("/r/a".to_owned(), node(4, 4));
        new.insert("/r/a-b".to_owned(), node(3, 6));
        let events = differences(&old, &new);
        let shape: Vec<(&str, &str)> = events
            .iter()
            .map(|e| match e {
                CacheEvent::Created { path, .. } => ("created", path.as_str()),
                CacheEvent::Changed { path, .. } => ("changed", path.as_str()),
                CacheEvent::Deleted { path, .. } => ("deleted", path.as_str()),
                _ => ("other", ""),
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("deleted", "/r/a/x"),
                ("deleted", "/r/a"),
                ("created", "/r/a"),
                ("changed", "/r/a-b"),
                ("created", "/r/a/x"),
            ]
        );
    }
}
