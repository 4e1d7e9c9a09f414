//! What happened to a [`PersistentNode`](super::PersistentNode): [`NodeEvent`]s, and the
//! [`NodeEvents`] stream of them.

use tokio::sync::broadcast;
use zkwire::Error;

/// How many events a [`NodeEvents`] receiver may fall behind before it misses the oldest.
pub(super) const EVENT_CAPACITY: usize = 64;

/// What happened to a [`PersistentNode`](super::PersistentNode), in order, from
/// [`PersistentNode::events`](super::PersistentNode::events).
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
    /// The task stopped: [`close`](super::PersistentNode::close)d or dropped (`None`), or on an
    /// error no retry fixes (`Some`: the session ended without renewal, the client was
    /// closed, an invalid path or mode...). The last event of a run.
    Stopped(Option<Error>),
    /// This receiver fell behind and missed that many events.
    Missed(u64),
}

/// The events of a [`PersistentNode`](super::PersistentNode), from
/// [`PersistentNode::events`](super::PersistentNode::events).
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
    pub(super) rx: broadcast::Receiver<NodeEvent>,
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
