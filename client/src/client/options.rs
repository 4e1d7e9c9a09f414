//! Options of create and the ops of a multi.

use std::time::Duration;

use bytes::Bytes;

use crate::proto::{Acl, Acls, CreateMode, Stat};

/// How to create a node: mode, ACL and TTL.
///
/// ```
/// use zkwire::{CreateMode, CreateOptions};
/// let opts = CreateOptions::new(CreateMode::EphemeralSequential);
/// let ttl = CreateOptions::new(CreateMode::PersistentWithTtl)
///     .with_ttl(std::time::Duration::from_secs(60));
/// # let _ = (opts, ttl);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOptions {
    pub(crate) mode: CreateMode,
    pub(crate) acl: Acls,
    pub(crate) ttl: Option<Duration>,
    pub(crate) container_parents: bool,
}

impl CreateOptions {
    /// A node of `mode`, open to everyone (`world:anyone` with every permission).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{CreateMode, CreateOptions};
    ///
    /// let ephemeral = CreateOptions::new(CreateMode::Ephemeral);
    /// client.create("/workers/host-1", b"", &ephemeral).await?;
    /// # Ok(()) }
    /// ```
    pub fn new(mode: CreateMode) -> Self {
        Self {
            mode,
            acl: Acl::open_unsafe().into(),
            ttl: None,
            container_parents: false,
        }
    }

    /// A persistent node: it stays until deleted ([`CreateMode::Persistent`]).
    ///
    /// ```
    /// use zkwire::{CreateMode, CreateOptions};
    /// assert_eq!(CreateOptions::persistent(), CreateOptions::new(CreateMode::Persistent));
    /// ```
    pub fn persistent() -> Self {
        Self::new(CreateMode::Persistent)
    }

    /// An ephemeral node: deleted when its session ends ([`CreateMode::Ephemeral`]).
    ///
    /// ```
    /// use zkwire::{CreateMode, CreateOptions};
    /// assert_eq!(CreateOptions::ephemeral(), CreateOptions::new(CreateMode::Ephemeral));
    /// ```
    pub fn ephemeral() -> Self {
        Self::new(CreateMode::Ephemeral)
    }

    /// A persistent node whose name the server suffixes with a sequence number
    /// ([`CreateMode::PersistentSequential`]).
    ///
    /// ```
    /// use zkwire::{CreateMode, CreateOptions};
    /// let options = CreateOptions::persistent_sequential();
    /// assert_eq!(options, CreateOptions::new(CreateMode::PersistentSequential));
    /// ```
    pub fn persistent_sequential() -> Self {
        Self::new(CreateMode::PersistentSequential)
    }

    /// An ephemeral node whose name the server suffixes with a sequence number
    /// ([`CreateMode::EphemeralSequential`]).
    ///
    /// ```
    /// use zkwire::{CreateMode, CreateOptions};
    /// let options = CreateOptions::ephemeral_sequential();
    /// assert_eq!(options, CreateOptions::new(CreateMode::EphemeralSequential));
    /// ```
    pub fn ephemeral_sequential() -> Self {
        Self::new(CreateMode::EphemeralSequential)
    }

    /// A container: the server deletes it once its last child is gone
    /// ([`CreateMode::Container`]).
    ///
    /// ```
    /// use zkwire::{CreateMode, CreateOptions};
    /// assert_eq!(CreateOptions::container(), CreateOptions::new(CreateMode::Container));
    /// ```
    pub fn container() -> Self {
        Self::new(CreateMode::Container)
    }

    /// A persistent node the server deletes once it has gone `ttl` unchanged and without
    /// children ([`CreateMode::PersistentWithTtl`]; servers with extended types enabled).
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire::{CreateMode, CreateOptions};
    ///
    /// let hour = Duration::from_secs(3600);
    /// let options = CreateOptions::persistent_with_ttl(hour);
    /// assert_eq!(options, CreateOptions::new(CreateMode::PersistentWithTtl).with_ttl(hour));
    /// ```
    pub fn persistent_with_ttl(ttl: Duration) -> Self {
        Self::new(CreateMode::PersistentWithTtl).with_ttl(ttl)
    }

    /// A persistent sequential node with a TTL, as
    /// [`persistent_with_ttl`](Self::persistent_with_ttl)
    /// ([`CreateMode::PersistentSequentialWithTtl`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire::{CreateMode, CreateOptions};
    ///
    /// let minute = Duration::from_secs(60);
    /// let options = CreateOptions::persistent_sequential_with_ttl(minute);
    /// let mode = CreateMode::PersistentSequentialWithTtl;
    /// assert_eq!(options, CreateOptions::new(mode).with_ttl(minute));
    /// ```
    pub fn persistent_sequential_with_ttl(ttl: Duration) -> Self {
        Self::new(CreateMode::PersistentSequentialWithTtl).with_ttl(ttl)
    }

    /// The missing ancestors [`create_all`](crate::Client::create_all) makes are containers
    /// (which the server deletes once their last child is gone), not persistent nodes.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{CreateMode, CreateOptions};
    ///
    /// // /queues/orders goes away by itself once its last item is gone.
    /// let item = CreateOptions::new(CreateMode::PersistentSequential).with_container_parents();
    /// client.create_all("/queues/orders/item-", b"payload", &item).await?;
    /// # Ok(()) }
    /// ```
    pub fn with_container_parents(mut self) -> Self {
        self.container_parents = true;
        self
    }

    /// Sets the ACL: a `Vec<Acl>`, or an ACL already shared (an `Arc<[Acl]>`, which every
    /// create with these options then shares instead of copying).
    ///
    /// ```
    /// use zkwire::{Acl, CreateMode, CreateOptions};
    /// let readable = CreateOptions::new(CreateMode::Persistent).with_acl(Acl::read_unsafe());
    /// # let _ = readable;
    /// ```
    pub fn with_acl(mut self, acl: impl Into<Acls>) -> Self {
        self.acl = acl.into();
        self
    }

    /// Sets the TTL (required for the TTL modes, refused for the others).
    ///
    /// ```
    /// use std::time::Duration;
    /// use zkwire::{CreateMode, CreateOptions};
    ///
    /// // The server deletes the node once it has gone an hour unchanged and without children
    /// // (servers with extended types enabled).
    /// let hour = Duration::from_secs(3600);
    /// let options = CreateOptions::new(CreateMode::PersistentWithTtl).with_ttl(hour);
    /// # let _ = options;
    /// ```
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// The outcome of one op of a successful [`multi`](crate::Client::multi).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::{CreateMode, CreateOptions, Op, OpResult};
///
/// let sequential = CreateOptions::new(CreateMode::PersistentSequential);
/// let results = client.multi(&[Op::create("/jobs/job-", b"", &sequential)]).await?;
/// if let OpResult::Create { path, .. } = &results[0] {
///     println!("created {path}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// The node was created at this path (chroot stripped) with this Stat.
    Create {
        /// Path of the node.
        path: String,
        /// Its Stat.
        stat: Option<Stat>,
    },
    /// The node was deleted.
    Delete,
    /// The data was set.
    SetData {
        /// The node's new Stat.
        stat: Stat,
    },
    /// The version check passed.
    Check,
}

/// The outcome of one op of a [`multi_read`](crate::Client::multi_read).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::{ReadOp, ReadResult};
///
/// for result in client.multi_read(&[ReadOp::GetChildren("/workers".into())]).await? {
///     if let Ok(ReadResult::Children { children }) = result {
///         println!("{} workers", children.len());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadResult {
    /// A node's data and Stat.
    Data {
        /// The data (empty for a node with null data).
        data: Bytes,
        /// Its Stat.
        stat: Stat,
    },
    /// A node's children.
    Children {
        /// Child names.
        children: Vec<String>,
    },
}
