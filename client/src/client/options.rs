//! Options of create and the ops of a multi.

use std::time::Duration;

use bytes::Bytes;

use crate::proto::{Acl, CreateMode, Stat};

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
    pub(crate) acl: Vec<Acl>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) container_parents: bool,
}

impl CreateOptions {
    /// A node of `mode`, open to everyone (`world:anyone` with every permission).
    pub fn new(mode: CreateMode) -> Self {
        Self {
            mode,
            acl: Acl::open_unsafe(),
            ttl: None,
            container_parents: false,
        }
    }

    /// The missing ancestors [`create_all`](crate::Client::create_all) makes are containers
    /// (which the server deletes once their last child is gone), not persistent nodes.
    pub fn with_container_parents(mut self) -> Self {
        self.container_parents = true;
        self
    }

    /// Sets the ACL.
    pub fn with_acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = acl;
        self
    }

    /// Sets the TTL (required for the TTL modes, refused for the others).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// The outcome of one op of a successful [`multi`](crate::Client::multi).
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
