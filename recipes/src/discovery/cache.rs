//! [`ServiceCache`]: the instances of one service kept current by a [`TreeCache`].

use zkwire::{path, Error};

use super::instance::ServiceInstance;
use super::registry::ServiceDiscovery;
use crate::cache::{CacheEvents, TreeCache};
use crate::error::LockError;

/// The instances of one service kept current (Curator's `ServiceCache`): a [`TreeCache`]
/// of `base_path/name` one level deep, read into instances on demand.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{ServiceCache, ServiceDiscovery};
///
/// let discovery = ServiceDiscovery::new(client, "/services");
/// let (cache, mut changes) = ServiceCache::start(&discovery, "api").await?;
/// println!("{} instances", cache.instances().len());
/// while changes.next().await.is_some() {
///     println!("now {:?}", cache.instances().iter().map(|i| &i.id).collect::<Vec<_>>());
/// }
/// # Ok(()) }
/// ```
///
/// Dropping it stops the cache.
#[derive(Debug)]
pub struct ServiceCache {
    cache: TreeCache,
    dir: String,
}

impl ServiceCache {
    /// Starts caching service `name` of `discovery`; its first read is done when this
    /// returns. The events say that (and which node) changed; [`instances`](Self::instances)
    /// reads the new set.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a name that is not one path segment
    /// ([`path::validate_name`]); as
    /// [`TreeCacheBuilder::start`](crate::TreeCacheBuilder::start).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ServiceCache, ServiceDiscovery};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let (cache, mut changes) = ServiceCache::start(&discovery, "api").await?;
    /// while let Some(change) = changes.next().await {
    ///     println!("{change:?}: {} instances", cache.instances().len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn start(
        discovery: &ServiceDiscovery,
        name: &str,
    ) -> Result<(Self, CacheEvents), LockError> {
        path::validate_name(name).map_err(Error::from)?;
        let dir = path::join(discovery.base_path(), name);
        let (cache, events) = TreeCache::builder(discovery.client.clone(), dir.clone())
            .with_max_depth(1)
            .start()
            .await?;
        Ok((Self { cache, dir }, events))
    }

    /// The instances as the cache knows them now, in the order of their node names; nodes
    /// that do not hold an instance are left out.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ServiceCache, ServiceDiscovery};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let (cache, _changes) = ServiceCache::start(&discovery, "api").await?;
    /// for instance in cache.instances() {
    ///     println!("{} at {:?}:{:?}", instance.id, instance.address, instance.port);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn instances(&self) -> Vec<ServiceInstance> {
        self.cache
            .snapshot()
            .into_iter()
            .filter(|(node, _)| path::parent(node) == Some(self.dir.as_str()))
            .filter_map(|(_, cached)| ServiceInstance::from_json(&cached.data).ok())
            .collect()
    }
}
