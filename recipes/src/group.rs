//! [`GroupMember`]: Curator's `GroupMember` layout (`<group>/<id>`, EPHEMERAL, the member's
//! data in it), kept by a [`PersistentNode`] and read through a [`TreeCache`] of the group
//! one level deep. See docs/recipes.md §12.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use zkwire::{path, Client, Error};

use crate::cache::{CacheEvents, TreeCache};
use crate::error::LockError;
use crate::internals::dir_path;
use crate::persistent::PersistentNode;

/// A member of a group in Curator's `GroupMember` layout: zkwire and Curator members of one
/// group see each other.
///
/// [`join`](Self::join) creates `group/id` (EPHEMERAL, not protected, holding the member's
/// data, missing parents as containers) through a [`PersistentNode`], so the membership
/// comes back after an outside delete or a session renewal, and caches the group's children
/// (a [`TreeCache`] one level deep, as Curator's `CuratorCache`).
/// [`current_members`](Self::current_members) reads that cache. Ids must be unique in the
/// group: two live members with one id share one node (docs/recipes.md §12).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::GroupMember;
///
/// let me = GroupMember::join(client, "/workers", "worker-7", "10.0.0.7").await?;
/// for (id, data) in me.current_members() {
///     println!("{id}: {}", String::from_utf8_lossy(&data));
/// }
/// me.set_this_data("10.0.0.8").await?;
/// me.close().await?;
/// # Ok(()) }
/// ```
///
/// Dropping the member leaves the group in the background (the node is deleted) and stops
/// the cache.
#[derive(Debug)]
pub struct GroupMember {
    node: PersistentNode,
    cache: TreeCache,
    group: String,
    id: String,
}

impl GroupMember {
    /// Joins `group` as `id` with `data`: starts the cache of the group (its first read
    /// done when this returns) and the member's node (created in the background: see
    /// [`wait_for_initial_create`](Self::wait_for_initial_create)).
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`] for an id that is not one path
    /// segment ([`path::validate_name`]) or a group path that is not valid; the client's errors
    /// while starting the cache.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::GroupMember;
    ///
    /// // Creates `/workers/worker-7` holding this worker's address.
    /// let me = GroupMember::join(client, "/workers", "worker-7", "10.0.0.7").await?;
    /// println!("{} members", me.current_members().len());
    /// # Ok(()) }
    /// ```
    pub async fn join(
        client: Client,
        group: impl Into<String>,
        id: impl Into<String>,
        data: impl Into<Bytes>,
    ) -> Result<Self, LockError> {
        // Dropping the events lets the cache run without them.
        Ok(Self::join_with_changes(client, group, id, data).await?.0)
    }

    /// As [`join`](Self::join), also returning the group's changes as they happen: a
    /// [`CacheEvent`](crate::CacheEvent) for every member node created, changed (its data) or
    /// deleted, the group node itself included. The stream is bounded: left unread for over
    /// a second while full, the events it misses become one
    /// [`CacheEvent::Lagged`](crate::CacheEvent::Lagged), and the members as
    /// [`current_members`](Self::current_members) lists them stay current.
    ///
    /// # Errors
    /// As [`join`](Self::join).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{CacheEvent, GroupMember};
    ///
    /// let (me, mut changes) =
    ///     GroupMember::join_with_changes(client, "/workers", "worker-7", "10.0.0.7").await?;
    /// while let Some(event) = changes.next().await {
    ///     match event {
    ///         CacheEvent::Created { path, .. } => println!("joined: {path}"),
    ///         CacheEvent::Deleted { path, .. } => println!("left: {path}"),
    ///         _ => {}
    ///     }
    /// }
    /// # drop(me);
    /// # Ok(()) }
    /// ```
    pub async fn join_with_changes(
        client: Client,
        group: impl Into<String>,
        id: impl Into<String>,
        data: impl Into<Bytes>,
    ) -> Result<(Self, CacheEvents), LockError> {
        let group = dir_path(group.into());
        let id = id.into();
        path::validate_name(&id).map_err(Error::from)?;
        let member = path::join(&group, &id);
        path::validate_path(&member).map_err(Error::from)?;
        let (cache, events) = TreeCache::builder(client.clone(), group.clone())
            .with_max_depth(1)
            .start()
            .await?;
        let node = PersistentNode::ephemeral(client, member, data);
        node.start();
        let member = Self {
            node,
            cache,
            group,
            id,
        };
        Ok((member, events))
    }

    /// The group's path.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::GroupMember;
    ///
    /// let me = GroupMember::join(client, "/workers/", "worker-7", "10.0.0.7").await?;
    /// assert_eq!(me.group(), "/workers"); // without the trailing `/`
    /// # Ok(()) }
    /// ```
    pub fn group(&self) -> &str {
        &self.group
    }

    /// This member's id.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::GroupMember;
    ///
    /// let me = GroupMember::join(client, "/workers", "worker-7", "10.0.0.7").await?;
    /// assert_eq!(me.id(), "worker-7");
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The member's node, for its path, its events and its state.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{GroupMember, NodeEvent};
    ///
    /// let me = GroupMember::join(client, "/workers", "worker-7", "10.0.0.7").await?;
    /// let mut events = me.node().events();
    /// if let Some(NodeEvent::Deleted { path }) = events.next().await {
    ///     eprintln!("{path} was deleted; joining again");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn node(&self) -> &PersistentNode {
        &self.node
    }

    /// Waits until this member's node has been created, at most `timeout` (as
    /// [`PersistentNode::wait_for_initial_create`]).
    ///
    /// # Errors
    /// As [`PersistentNode::wait_for_initial_create`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::GroupMember;
    ///
    /// let me = GroupMember::join(client, "/workers", "worker-7", "10.0.0.7").await?;
    /// if me.wait_for_initial_create(Duration::from_secs(5)).await? {
    ///     println!("visible to the group at {:?}", me.node().actual_path());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<bool, LockError> {
        self.node.wait_for_initial_create(timeout).await
    }

    /// The members as the cache knows them now, id to data; this member is always in it,
    /// with its own data if the cache has not seen its node yet (as Curator's
    /// `getCurrentMembers`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::GroupMember;
    ///
    /// let me = GroupMember::join(client, "/workers", "worker-7", "10.0.0.7").await?;
    /// let members = me.current_members();
    /// assert!(members.contains_key("worker-7")); // always there
    /// for (id, data) in &members {
    ///     println!("{id} at {}", String::from_utf8_lossy(data));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn current_members(&self) -> BTreeMap<String, Bytes> {
        let mut members: BTreeMap<String, Bytes> = self
            .cache
            .snapshot()
            .into_iter()
            .filter(|(node, _)| path::parent(node) == Some(self.group.as_str()))
            .filter_map(|(node, cached)| {
                let id = node.rsplit('/').next()?.to_owned();
                Some((id, cached.data))
            })
            .collect();
        members
            .entry(self.id.clone())
            .or_insert_with(|| self.node.data());
        members
    }

    /// Changes this member's data (Curator's `setThisData`), as
    /// [`PersistentNode::set_data`].
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::GroupMember;
    ///
    /// let me = GroupMember::join(client, "/workers", "worker-7", "idle").await?;
    /// me.set_this_data("busy").await?; // the other members see it through their caches
    /// # Ok(()) }
    /// ```
    pub async fn set_this_data(&self, data: impl Into<Bytes>) -> Result<(), LockError> {
        self.node.set_data(data).await
    }

    /// Leaves the group: the node is deleted and the cache stopped.
    ///
    /// # Errors
    /// As [`PersistentNode::close`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::GroupMember;
    ///
    /// let me = GroupMember::join(client, "/workers", "worker-7", "10.0.0.7").await?;
    /// // ... work ...
    /// me.close().await?; // `/workers/worker-7` is deleted
    /// # Ok(()) }
    /// ```
    pub async fn close(self) -> Result<(), LockError> {
        self.node.close().await
    }
}
