//! The record of a service instance: [`ServiceInstance`], its builder and its [`ServiceType`]
//! (the instance's JSON is in `json.rs`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use zkwire::CreateMode;

use super::uri::UriSpec;
use crate::guid::Uuid;

/// How an instance is registered, as Curator's `ServiceType`: the node's mode.
///
/// ```
/// use zkwire_recipes::ServiceType;
///
/// assert_eq!(ServiceType::default(), ServiceType::Dynamic);
/// assert_eq!(ServiceType::Static.as_str(), "STATIC");
/// assert_eq!(ServiceType::parse("DYNAMIC_SEQUENTIAL"), Some(ServiceType::DynamicSequential));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ServiceType {
    /// `DYNAMIC`: an EPHEMERAL node, gone with the session (the default).
    #[default]
    Dynamic,
    /// `STATIC`: a PERSISTENT node, deleted when unregistered.
    Static,
    /// `PERMANENT`: a PERSISTENT node that stays until unregistered, even when its
    /// [`Registration`](crate::Registration) is dropped.
    Permanent,
    /// `DYNAMIC_SEQUENTIAL`: an EPHEMERAL_SEQUENTIAL node (`<id><sequence>`, with zkwire's
    /// protected prefix: see
    /// [`ServiceDiscovery::register`](crate::ServiceDiscovery::register)).
    DynamicSequential,
}

impl ServiceType {
    /// Curator's name of the type, as in the JSON.
    ///
    /// ```
    /// use zkwire_recipes::ServiceType;
    ///
    /// assert_eq!(ServiceType::DynamicSequential.as_str(), "DYNAMIC_SEQUENTIAL");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dynamic => "DYNAMIC",
            Self::Static => "STATIC",
            Self::Permanent => "PERMANENT",
            Self::DynamicSequential => "DYNAMIC_SEQUENTIAL",
        }
    }

    /// The type named `name` (Curator's enum constant), if any.
    ///
    /// ```
    /// use zkwire_recipes::ServiceType;
    ///
    /// assert_eq!(ServiceType::parse("PERMANENT"), Some(ServiceType::Permanent));
    /// assert_eq!(ServiceType::parse("permanent"), None, "names are upper case");
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Dynamic,
            Self::Static,
            Self::Permanent,
            Self::DynamicSequential,
        ]
        .into_iter()
        .find(|t| t.as_str() == name)
    }

    /// The node's mode: Curator's choice for the type.
    ///
    /// ```
    /// use zkwire::CreateMode;
    /// use zkwire_recipes::ServiceType;
    ///
    /// assert_eq!(ServiceType::Dynamic.create_mode(), CreateMode::Ephemeral);
    /// assert_eq!(ServiceType::Static.create_mode(), CreateMode::Persistent);
    /// ```
    pub fn create_mode(self) -> CreateMode {
        match self {
            Self::Dynamic => CreateMode::Ephemeral,
            Self::DynamicSequential => CreateMode::EphemeralSequential,
            Self::Static | Self::Permanent => CreateMode::Persistent,
        }
    }
}

/// A service instance, as Curator's `ServiceInstance`, and its JSON (Curator's
/// `JsonInstanceSerializer`, Jackson).
///
/// The JSON has, in this order: `name`, `id`, `address`, `port`, `sslPort`, `payload`,
/// `registrationTimeUTC` (milliseconds since the epoch), `serviceType`, `uriSpec`
/// (`{"parts":[{"value":..,"variable":..}]}`), absent values as `null`, as Curator 5.4
/// writes it. The payload carries Jackson's class information as Curator writes it: an
/// object gets an `"@class"` member ([`payload_class`](Self::payload_class), by default
/// `java.util.LinkedHashMap`), an array is wrapped as `[class, array]` (by default
/// `java.util.ArrayList`), strings, numbers and booleans go bare. So a Curator reader with
/// payload class `Map` (or `Object`) parses ours, and a class named here must exist on the
/// reader's classpath. Reading strips that information into `payload_class` (`None` when
/// it is the default), so an instance reads back equal; unknown members are ignored.
/// `enabled` (Curator 5) is read, absent meaning true, and written only when false: an
/// enabled instance's JSON is what Curator's default serializer writes.
///
/// ```
/// use serde_json::json;
/// use zkwire_recipes::{ServiceInstance, ServiceType};
///
/// let instance = ServiceInstance::builder("api")
///     .address("10.0.0.7")
///     .port(8080)
///     .payload(json!({"zone": "eu-1"}))
///     .build();
/// assert_eq!(instance.service_type, ServiceType::Dynamic);
/// assert_eq!(instance.id.len(), 36, "a random uuid");
/// let back = ServiceInstance::from_json(&instance.to_json()).unwrap();
/// assert_eq!(back, instance);
/// let json = String::from_utf8(instance.to_json()).unwrap();
/// assert!(json.contains(r#""payload":{"@class":"java.util.LinkedHashMap","zone":"eu-1"}"#));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServiceInstance {
    /// The service's name: the node's parent directory.
    pub name: String,
    /// The instance's id, unique in the service: the node's name.
    pub id: String,
    /// The address (host or IP) the instance serves on.
    pub address: Option<String>,
    /// The plain port.
    pub port: Option<u16>,
    /// The TLS port.
    pub ssl_port: Option<u16>,
    /// The payload, without Jackson's class information.
    pub payload: Option<Value>,
    /// The Java class the payload is written as (an object or array payload only); `None`
    /// writes Curator's default for a `Map` or `List`.
    pub payload_class: Option<String>,
    /// When the instance was registered, in milliseconds since the Unix epoch.
    pub registration_time_utc: i64,
    /// How it is registered.
    pub service_type: ServiceType,
    /// Its URI template.
    pub uri_spec: Option<UriSpec>,
    /// Whether providers hand it out (Curator 5's `enabled`, default true): a disabled
    /// instance stays registered, and [`ServiceProvider`](crate::ServiceProvider)s, zkwire's
    /// and Curator's, leave it out.
    pub enabled: bool,
}

/// Builds a [`ServiceInstance`]: a random (v4 uuid) id, the registration time now, type
/// [`ServiceType::Dynamic`], nothing else, unless set.
///
/// ```
/// use zkwire_recipes::{ServiceInstance, ServiceType, UriSpec};
///
/// let instance = ServiceInstance::builder("db")
///     .id("db-1")
///     .address("db1.internal")
///     .ssl_port(5433)
///     .service_type(ServiceType::Static)
///     .uri_spec(UriSpec::parse("{scheme}://{address}:{ssl-port}").unwrap())
///     .build();
/// assert_eq!(instance.id, "db-1");
/// ```
#[derive(Debug, Clone)]
pub struct ServiceInstanceBuilder {
    instance: ServiceInstance,
}

impl ServiceInstance {
    /// A builder for an instance of service `name`.
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api").address("10.0.0.7").port(8080).build();
    /// assert_eq!(instance.name, "api");
    /// assert_eq!(instance.port, Some(8080));
    /// ```
    pub fn builder(name: impl Into<String>) -> ServiceInstanceBuilder {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        ServiceInstanceBuilder {
            instance: Self {
                name: name.into(),
                id: Uuid::new_v4().to_string(),
                address: None,
                port: None,
                ssl_port: None,
                payload: None,
                payload_class: None,
                registration_time_utc: i64::try_from(now.as_millis()).unwrap_or(i64::MAX),
                service_type: ServiceType::Dynamic,
                uri_spec: None,
                enabled: true,
            },
        }
    }
    /// This instance's URI by its [`uri_spec`](Self::uri_spec), as Curator's
    /// `buildUriSpec()`; `None` without a spec. See [`UriSpec::build`].
    ///
    /// ```
    /// use zkwire_recipes::{ServiceInstance, UriSpec};
    ///
    /// let spec = UriSpec::parse("{scheme}://{address}:{ssl-port}/{name}").unwrap();
    /// let me = ServiceInstance::builder("api")
    ///     .address("10.0.0.7")
    ///     .ssl_port(8443)
    ///     .uri_spec(spec)
    ///     .build();
    /// assert_eq!(me.build_uri().as_deref(), Some("https://10.0.0.7:8443/api"));
    /// ```
    pub fn build_uri(&self) -> Option<String> {
        self.uri_spec.as_ref().map(|spec| spec.build(self))
    }
}

impl ServiceInstanceBuilder {
    /// The instance's id (unique in the service; one path segment).
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api").id("api-eu-1").build();
    /// assert_eq!(instance.id, "api-eu-1");
    /// ```
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.instance.id = id.into();
        self
    }

    /// The address the instance serves on.
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api").address("api1.internal").build();
    /// assert_eq!(instance.address.as_deref(), Some("api1.internal"));
    /// ```
    #[must_use]
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.instance.address = Some(address.into());
        self
    }

    /// The plain port.
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api").port(8080).build();
    /// assert_eq!(instance.port, Some(8080));
    /// ```
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.instance.port = Some(port);
        self
    }

    /// The TLS port.
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api").port(8080).ssl_port(8443).build();
    /// assert_eq!(instance.ssl_port, Some(8443));
    /// ```
    #[must_use]
    pub fn ssl_port(mut self, port: u16) -> Self {
        self.instance.ssl_port = Some(port);
        self
    }

    /// The payload (any JSON).
    ///
    /// ```
    /// use serde_json::json;
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api")
    ///     .payload(json!({"zone": "eu-1", "weight": 10}))
    ///     .build();
    /// assert_eq!(instance.payload.unwrap()["zone"], "eu-1");
    /// ```
    #[must_use]
    pub fn payload(mut self, payload: Value) -> Self {
        self.instance.payload = Some(payload);
        self
    }

    /// The Java class an object or array payload is written as (Jackson's `@class`).
    ///
    /// ```
    /// use serde_json::json;
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// // Read by Curator processes as their own payload class.
    /// let instance = ServiceInstance::builder("api")
    ///     .payload(json!({"zone": "eu-1"}))
    ///     .payload_class("com.example.InstanceDetails")
    ///     .build();
    /// let json = String::from_utf8(instance.to_json()).unwrap();
    /// assert!(json.contains(r#""@class":"com.example.InstanceDetails""#));
    /// ```
    #[must_use]
    pub fn payload_class(mut self, class: impl Into<String>) -> Self {
        self.instance.payload_class = Some(class.into());
        self
    }

    /// The registration time, in milliseconds since the Unix epoch.
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// // 2023-11-14T22:13:20Z, as read back from an earlier registration.
    /// let instance = ServiceInstance::builder("api")
    ///     .registration_time_utc(1_700_000_000_000)
    ///     .build();
    /// assert_eq!(instance.registration_time_utc, 1_700_000_000_000);
    /// ```
    #[must_use]
    pub fn registration_time_utc(mut self, millis: i64) -> Self {
        self.instance.registration_time_utc = millis;
        self
    }

    /// How the instance is registered.
    ///
    /// ```
    /// use zkwire_recipes::{ServiceInstance, ServiceType};
    ///
    /// // Stays registered after this process exits, until unregistered.
    /// let instance = ServiceInstance::builder("db").service_type(ServiceType::Permanent).build();
    /// assert_eq!(instance.service_type, ServiceType::Permanent);
    /// ```
    #[must_use]
    pub fn service_type(mut self, service_type: ServiceType) -> Self {
        self.instance.service_type = service_type;
        self
    }

    /// The URI template.
    ///
    /// ```
    /// use zkwire_recipes::{ServiceInstance, UriSpec};
    ///
    /// let spec = UriSpec::parse("{scheme}://{address}:{port}/v1").unwrap();
    /// let instance = ServiceInstance::builder("api").uri_spec(spec.clone()).build();
    /// assert_eq!(instance.uri_spec, Some(spec));
    /// ```
    #[must_use]
    pub fn uri_spec(mut self, spec: UriSpec) -> Self {
        self.instance.uri_spec = Some(spec);
        self
    }

    /// Whether providers hand the instance out (default true): a disabled one stays
    /// registered, left out by zkwire's and Curator's providers, e.g. while it drains.
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let draining = ServiceInstance::builder("api").enabled(false).build();
    /// let json = String::from_utf8(draining.to_json()).unwrap();
    /// assert!(json.ends_with(r#","enabled":false}"#));
    /// ```
    #[must_use]
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.instance.enabled = enabled;
        self
    }

    /// The instance.
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api").address("10.0.0.7").port(8080).build();
    /// assert_eq!((instance.name.as_str(), instance.port), ("api", Some(8080)));
    /// ```
    pub fn build(self) -> ServiceInstance {
        self.instance
    }
}
