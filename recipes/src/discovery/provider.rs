//! [`ServiceProvider`]: one instance of a service at a time, picked by a
//! [`ProviderStrategy`] from a [`ServiceCache`].

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex as StdMutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::cache::ServiceCache;
use super::down::{DownInstancePolicy, DownInstances};
use super::instance::ServiceInstance;
use super::registry::ServiceDiscovery;
use crate::error::LockError;

/// How a [`ServiceProvider`] picks an instance (Curator's `ProviderStrategy`s).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{ProviderStrategy, ServiceDiscovery, ServiceProvider};
///
/// let discovery = ServiceDiscovery::new(client, "/services");
/// assert_eq!(ProviderStrategy::default(), ProviderStrategy::RoundRobin);
/// // Keep talking to the same instance while it is registered.
/// let provider = ServiceProvider::start(&discovery, "sessions", ProviderStrategy::Sticky).await?;
/// # let _ = provider;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProviderStrategy {
    /// In turn (Curator's `RoundRobinStrategy`, its default).
    #[default]
    RoundRobin,
    /// At random (`RandomStrategy`).
    Random,
    /// The same instance as last time while it is registered, else the next in turn
    /// (`StickyStrategy` over `RoundRobinStrategy`).
    Sticky,
}

/// Picks instances of one service from a [`ServiceCache`] (Curator's `ServiceProvider`).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{ProviderStrategy, ServiceDiscovery, ServiceProvider};
///
/// let discovery = ServiceDiscovery::new(client, "/services");
/// let provider = ServiceProvider::start(&discovery, "api", ProviderStrategy::RoundRobin).await?;
/// if let Some(instance) = provider.instance() {
///     println!("calling {:?}:{:?}", instance.address, instance.port);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ServiceProvider {
    cache: ServiceCache,
    strategy: ProviderStrategy,
    turn: AtomicUsize,
    sticky: StdMutex<Option<String>>,
    down: DownInstances,
}

impl ServiceProvider {
    /// Starts a provider of service `name`, with its own [`ServiceCache`].
    ///
    /// # Errors
    /// As [`ServiceCache::start`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ProviderStrategy, ServiceDiscovery, ServiceProvider};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let provider = ServiceProvider::start(&discovery, "api", ProviderStrategy::Random).await?;
    /// # let _ = provider;
    /// # Ok(()) }
    /// ```
    pub async fn start(
        discovery: &ServiceDiscovery,
        name: &str,
        strategy: ProviderStrategy,
    ) -> Result<Self, LockError> {
        let (cache, _events) = ServiceCache::start(discovery, name).await?;
        Ok(Self {
            cache,
            strategy,
            turn: AtomicUsize::new(0),
            sticky: StdMutex::new(None),
            down: DownInstances::new(DownInstancePolicy::default()),
        })
    }

    /// The same provider with `policy` deciding when an instance reported with
    /// [`note_error`](Self::note_error) is left out (the default: Curator's, 30 s and 2
    /// errors). Errors noted before are forgotten.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::{DownInstancePolicy, ProviderStrategy};
    /// use zkwire_recipes::{ServiceDiscovery, ServiceProvider};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let provider = ServiceProvider::start(&discovery, "api", ProviderStrategy::RoundRobin)
    ///     .await?
    ///     .with_down_instance_policy(DownInstancePolicy::new(Duration::from_secs(10), 1));
    /// # let _ = provider;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_down_instance_policy(mut self, policy: DownInstancePolicy) -> Self {
        self.down = DownInstances::new(policy);
        self
    }

    /// Reports that a call to `instance` failed (Curator's `noteError`): once the policy's
    /// number of errors is reached, [`instance`](Self::instance) leaves it out until the
    /// policy's timeout after the first (see [`DownInstancePolicy`]).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// # async fn call(_: &zkwire_recipes::ServiceInstance) -> Result<(), ()> { Ok(()) }
    /// use zkwire_recipes::{ProviderStrategy, ServiceDiscovery, ServiceProvider};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let strategy = ProviderStrategy::default();
    /// let provider = ServiceProvider::start(&discovery, "api", strategy).await?;
    /// if let Some(instance) = provider.instance() {
    ///     if call(&instance).await.is_err() {
    ///         provider.note_error(&instance);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn note_error(&self, instance: &ServiceInstance) {
        self.down.note(&instance.id, Instant::now());
    }

    /// Every enabled instance known now (Curator's provider leaves disabled ones out too).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ProviderStrategy, ServiceDiscovery, ServiceProvider};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let strategy = ProviderStrategy::default();
    /// let provider = ServiceProvider::start(&discovery, "api", strategy).await?;
    /// println!("{} api instances", provider.all_instances().len());
    /// # Ok(()) }
    /// ```
    pub fn all_instances(&self) -> Vec<ServiceInstance> {
        let mut instances = self.cache.instances();
        instances.retain(|instance| instance.enabled);
        instances
    }

    /// One instance by the strategy, among the enabled ones not left out by the
    /// down-instance policy; `None` when there is none.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ProviderStrategy, ServiceDiscovery, ServiceProvider};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let strategy = ProviderStrategy::RoundRobin;
    /// let provider = ServiceProvider::start(&discovery, "api", strategy).await?;
    /// match provider.instance() {
    ///     Some(instance) => println!("next call to {:?}:{:?}", instance.address, instance.port),
    ///     None => eprintln!("no api instance registered"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn instance(&self) -> Option<ServiceInstance> {
        let mut instances = self.all_instances();
        let now = Instant::now();
        self.down.retain_up(&mut instances, now);
        if instances.is_empty() {
            return None;
        }
        let index = match self.strategy {
            ProviderStrategy::RoundRobin => self.next_turn(instances.len()),
            ProviderStrategy::Random => random_index(instances.len()),
            ProviderStrategy::Sticky => {
                let mut sticky = self.sticky.lock().unwrap_or_else(PoisonError::into_inner);
                let kept = sticky
                    .as_ref()
                    .and_then(|id| instances.iter().position(|i| &i.id == id));
                let index = kept.unwrap_or_else(|| self.next_turn(instances.len()));
                *sticky = Some(instances[index].id.clone());
                index
            }
        };
        Some(instances.swap_remove(index))
    }

    fn next_turn(&self, len: usize) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed) % len
    }
}

/// A random index below `len` (> 0), from the standard library's randomly keyed hasher.
fn random_index(len: usize) -> usize {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(nanos);
    usize::try_from(hasher.finish() % len as u64).unwrap_or(0)
}
