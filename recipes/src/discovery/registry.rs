//! [`ServiceDiscovery`]: registering, updating and unregistering instances
//! ([`Registration`]), and the queries that read ZooKeeper each time.

use std::time::Duration;

use zkwire::{path, Client, CreateOptions, Error};

use super::instance::{ServiceInstance, ServiceType};
use crate::error::LockError;
use crate::internals::dir_path;
use crate::persistent::PersistentNode;

/// Service registration and lookup under `base_path`, in the layout of Curator's
/// `ServiceDiscovery`: instance `id` of service `name` is the node `base_path/name/id`
/// holding the instance's [JSON](ServiceInstance) (missing parents created as containers).
///
/// The queries read ZooKeeper each time (Curator's `queryFor*`). Nodes whose data is not an
/// instance are skipped with a warning, where Curator's queries throw: one bad registrant
/// does not hide the others.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
///
/// let discovery = ServiceDiscovery::new(client, "/services");
/// let me = ServiceInstance::builder("api").address("10.0.0.7").port(8080).build();
/// let registration = discovery.register(me).await?;
/// for instance in discovery.query_for_instances("api").await? {
///     println!("{} at {:?}:{:?}", instance.id, instance.address, instance.port);
/// }
/// registration.unregister().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ServiceDiscovery {
    /// The client (read by the [`ServiceCache`](super::ServiceCache) of a service too).
    pub(super) client: Client,
    base: String,
}

impl ServiceDiscovery {
    /// Discovery under `base_path` (Curator's `ServiceDiscoveryBuilder.basePath`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::ServiceDiscovery;
    ///
    /// // The base path Curator processes of the same deployment use.
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// # let _ = discovery;
    /// # Ok(()) }
    /// ```
    pub fn new(client: Client, base_path: impl Into<String>) -> Self {
        Self {
            client,
            base: dir_path(base_path.into()),
        }
    }

    /// The base path.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::ServiceDiscovery;
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// assert_eq!(discovery.base_path(), "/services");
    /// # Ok(()) }
    /// ```
    pub fn base_path(&self) -> &str {
        &self.base
    }

    /// The node of instance `id` of service `name` (for a
    /// [`DynamicSequential`](ServiceType::DynamicSequential) one, the base of its name).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::ServiceDiscovery;
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// assert_eq!(discovery.path_for_instance("api", "api-1"), "/services/api/api-1");
    /// # Ok(()) }
    /// ```
    pub fn path_for_instance(&self, name: &str, id: &str) -> String {
        path::join(&path::join(&self.base, name), id)
    }

    /// Registers `instance` and returns once its node exists.
    ///
    /// [`Dynamic`](ServiceType::Dynamic), [`DynamicSequential`](ServiceType::DynamicSequential)
    /// and [`Static`](ServiceType::Static) instances are kept by a [`PersistentNode`]: created
    /// again after an outside delete, and (ephemeral ones) after a session renewal
    /// ([`zkwire::ClientBuilder::with_session_renewal`]), owned by the new session; deleted
    /// when the [`Registration`] is unregistered or dropped. An ephemeral node of another
    /// session found at the path at first (a previous run's) is replaced, as Curator deletes
    /// and re-creates. A sequential one is protected (`_c_<uuid>-<id><seq>`, not Curator's
    /// `<id><seq>`): readers list and read every child, so they see it alike.
    /// [`Permanent`](ServiceType::Permanent) instances are created (or overwritten) once and
    /// stay until [`unregister`](Registration::unregister)ed.
    ///
    /// # Errors
    /// [`LockError::Client`] with [`Error::InvalidPath`] for a name or id that is not one
    /// path segment ([`path::validate_name`]); the error that stopped the node's task
    /// (the session ended without renewal, an invalid ACL...). Errors that may clear up
    /// (`NoAuth`, a read-only server) are retried meanwhile, so this waits: bound it with
    /// [`tokio::time::timeout`] if need be.
    ///
    /// [`tokio::time::timeout`]: https://docs.rs/tokio/1/tokio/time/fn.timeout.html
    ///
    /// # Cancel safety
    /// Cancel safe for a [`Dynamic`](ServiceType::Dynamic) or [`Static`](ServiceType::Static)
    /// instance: dropped before it returns, the node is deleted in the background. A
    /// [`Permanent`](ServiceType::Permanent) instance's write may have applied once sent,
    /// and is not undone (the node may be an earlier registration it overwrote): delete the
    /// node at [`path_for_instance`](Self::path_for_instance) if it must go.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use std::time::Duration;
    /// use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let me = ServiceInstance::builder("api").address("10.0.0.7").port(8080).build();
    /// let registering = discovery.register(me);
    /// let Ok(registered) = tokio::time::timeout(Duration::from_secs(30), registering).await else {
    ///     eprintln!("not registered within 30 s");
    ///     return Ok(());
    /// };
    /// let registration = registered?;
    /// println!("registered at {:?}", registration.path());
    /// # Ok(()) }
    /// ```
    pub async fn register(&self, instance: ServiceInstance) -> Result<Registration, LockError> {
        path::validate_name(&instance.name).map_err(Error::from)?;
        path::validate_name(&instance.id).map_err(Error::from)?;
        let node_path = self.path_for_instance(&instance.name, &instance.id);
        path::validate_path(&node_path).map_err(Error::from)?;
        if instance.service_type == ServiceType::Permanent {
            self.write_permanent(&node_path, &instance).await?;
            return Ok(Registration {
                client: self.client.clone(),
                path: node_path,
                instance,
                node: None,
            });
        }
        let mode = instance.service_type.create_mode();
        let node = PersistentNode::new(
            self.client.clone(),
            node_path.clone(),
            mode,
            instance.to_json(),
        );
        node.start();
        while !node
            .wait_for_initial_create(Duration::from_secs(60))
            .await?
        {}
        Ok(Registration {
            client: self.client.clone(),
            path: node_path,
            instance,
            node: Some(node),
        })
    }

    /// Creates a permanent instance's node, or writes the instance into the one there.
    async fn write_permanent(
        &self,
        node: &str,
        instance: &ServiceInstance,
    ) -> Result<(), LockError> {
        let data = instance.to_json();
        let options = CreateOptions::persistent().with_container_parents();
        loop {
            match self.client.create_all(node, &data, &options).await {
                Ok(_) => return Ok(()),
                Err(Error::NodeExists) => {}
                Err(e) => return Err(e.into()),
            }
            match self.client.set_data(node, &data, None).await {
                Ok(_) => return Ok(()),
                Err(Error::NoNode) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The names of the services (the children of the base path; none when it does not
    /// exist), sorted.
    ///
    /// # Errors
    /// The client's errors.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::ServiceDiscovery;
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// for name in discovery.query_for_names().await? {
    ///     println!("service {name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn query_for_names(&self) -> Result<Vec<String>, LockError> {
        let mut names = children(&self.client, &self.base).await?;
        names.sort();
        Ok(names)
    }

    /// The instances of service `name`, in the order of their node names; nodes that do not
    /// hold an instance are skipped (with a warning).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a name that is not one path segment; the client's
    /// errors.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::ServiceDiscovery;
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let ports: Vec<u16> = discovery
    ///     .query_for_instances("api")
    ///     .await?
    ///     .into_iter()
    ///     .filter_map(|instance| instance.port)
    ///     .collect();
    /// println!("api listens on {ports:?}");
    /// # Ok(()) }
    /// ```
    pub async fn query_for_instances(&self, name: &str) -> Result<Vec<ServiceInstance>, LockError> {
        path::validate_name(name).map_err(Error::from)?;
        let dir = path::join(&self.base, name);
        let mut ids = children(&self.client, &dir).await?;
        ids.sort();
        let mut instances = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(instance) = self.read(&path::join(&dir, &id)).await? {
                instances.push(instance);
            }
        }
        Ok(instances)
    }

    /// Instance `id` of service `name` (the node's name: for a sequential instance, its
    /// full name), `None` when there is none or its node does not hold an instance.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a name or id that is not one path segment; the
    /// client's errors.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::ServiceDiscovery;
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// match discovery.query_for_instance("api", "api-1").await? {
    ///     Some(instance) => println!("api-1 is at {:?}", instance.address),
    ///     None => println!("api-1 is not registered"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn query_for_instance(
        &self,
        name: &str,
        id: &str,
    ) -> Result<Option<ServiceInstance>, LockError> {
        path::validate_name(name).map_err(Error::from)?;
        path::validate_name(id).map_err(Error::from)?;
        self.read(&self.path_for_instance(name, id)).await
    }

    async fn read(&self, node: &str) -> Result<Option<ServiceInstance>, LockError> {
        let data = match self.client.get_data(node).await {
            Ok((data, _)) => data,
            Err(Error::NoNode) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match ServiceInstance::from_json(&data) {
            Ok(instance) => Ok(Some(instance)),
            Err(e) => {
                tracing::warn!(path = node, error = %e, "skipping a node that is not a service instance");
                Ok(None)
            }
        }
    }
}

/// The children of `dir`, none when it does not exist.
async fn children(client: &Client, dir: &str) -> Result<Vec<String>, LockError> {
    match client.get_children(dir).await {
        Ok(children) => Ok(children),
        Err(Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// A registered instance, from [`ServiceDiscovery::register`].
///
/// Dropped, it unregisters in the background (a [`Permanent`](ServiceType::Permanent)
/// instance stays).
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
/// use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
///
/// let discovery = ServiceDiscovery::new(client, "/services");
/// let instance = ServiceInstance::builder("api").port(8080).build();
/// let mut registration = discovery.register(instance).await?;
/// let mut moved = registration.instance().clone();
/// moved.port = Some(8081);
/// registration.update(moved).await?;
/// println!("registered at {:?}", registration.path());
/// registration.unregister().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Registration {
    client: Client,
    path: String,
    instance: ServiceInstance,
    /// The keeper of a non-permanent instance.
    node: Option<PersistentNode>,
}

impl Registration {
    /// The instance as last registered or updated.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let registration = discovery.register(ServiceInstance::builder("api").build()).await?;
    /// println!("registered as {}", registration.instance().id);
    /// # Ok(()) }
    /// ```
    pub fn instance(&self) -> &ServiceInstance {
        &self.instance
    }

    /// The instance's node now: `None` while a kept node is being created again.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ServiceDiscovery, ServiceInstance, ServiceType};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let instance = ServiceInstance::builder("jobs")
    ///     .service_type(ServiceType::DynamicSequential)
    ///     .build();
    /// let registration = discovery.register(instance).await?;
    /// // A sequential node's name is known once created.
    /// if let Some(path) = registration.path() {
    ///     println!("registered at {path}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> Option<String> {
        match &self.node {
            Some(node) => node.actual_path(),
            None => Some(self.path.clone()),
        }
    }

    /// The keeper of the instance's node, for its events; `None` for a permanent instance.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let registration = discovery.register(ServiceInstance::builder("api").build()).await?;
    /// if let Some(node) = registration.node() {
    ///     let mut events = node.events();
    ///     while let Some(event) = events.next().await {
    ///         println!("registration node: {event:?}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn node(&self) -> Option<&PersistentNode> {
        self.node.as_ref()
    }

    /// Replaces the registered instance (Curator's `updateService`): its node gets the new
    /// JSON, and so does every re-create.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `instance` has another name, id or type; otherwise
    /// as [`PersistentNode::set_data`] (a permanent instance: the client's errors).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let instance = ServiceInstance::builder("api").port(8080).build();
    /// let mut registration = discovery.register(instance).await?;
    /// // Moved to another port: readers see the new one.
    /// let mut moved = registration.instance().clone();
    /// moved.port = Some(8081);
    /// registration.update(moved).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update(&mut self, instance: ServiceInstance) -> Result<(), LockError> {
        let same = instance.name == self.instance.name
            && instance.id == self.instance.id
            && instance.service_type == self.instance.service_type;
        if !same {
            return Err(Error::InvalidArgument("an update must keep the name, id and type").into());
        }
        let data = instance.to_json();
        match &self.node {
            Some(node) => node.set_data(data).await?,
            None => {
                self.client.set_data(&self.path, &data, None).await?;
            }
        }
        self.instance = instance;
        Ok(())
    }

    /// Unregisters: the node is deleted (Curator's `unregisterService`).
    ///
    /// # Errors
    /// As [`PersistentNode::close`]; a permanent instance: the client's errors (none when
    /// the node is already gone).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire_recipes::LockError> {
    /// use zkwire_recipes::{ServiceDiscovery, ServiceInstance};
    ///
    /// let discovery = ServiceDiscovery::new(client, "/services");
    /// let registration = discovery.register(ServiceInstance::builder("api").build()).await?;
    /// // ...serve until shutdown, then leave at once rather than in the background:
    /// registration.unregister().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unregister(self) -> Result<(), LockError> {
        match &self.node {
            Some(node) => node.close().await,
            None => match self.client.delete(&self.path, None).await {
                Ok(()) | Err(Error::NoNode) => Ok(()),
                Err(e) => Err(e.into()),
            },
        }
    }
}
