//! [`ServiceDiscovery`]: service registration and lookup in the layout and JSON of
//! Curator's `curator-x-discovery` (`ServiceDiscoveryImpl` with a `JsonInstanceSerializer`),
//! so zkwire and Curator services find each other. See docs/recipes.md §13.
//!
//! An instance is the node `basePath/<name>/<id>` holding the JSON of a [`ServiceInstance`];
//! its [`ServiceType`] gives the node's mode. A registration is kept by a
//! [`PersistentNode`], so it comes back after an outside delete or a session renewal.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex as StdMutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use zkwire::{path, Client, CreateMode, CreateOptions, Error};

use crate::cache::{CacheEvents, TreeCache};
use crate::error::LockError;
use crate::guid::Uuid;
use crate::internals::dir_path;
use crate::persistent::PersistentNode;

/// The class Curator (Jackson) names for a JSON object payload read into a `Map`.
const MAP_CLASS: &str = "java.util.LinkedHashMap";
/// The class Curator (Jackson) names for a JSON array payload read into a `List`.
const LIST_CLASS: &str = "java.util.ArrayList";

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
    /// [`Registration`] is dropped.
    Permanent,
    /// `DYNAMIC_SEQUENTIAL`: an EPHEMERAL_SEQUENTIAL node (`<id><sequence>`, with zkwire's
    /// protected prefix: see [`ServiceDiscovery::register`]).
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

/// One part of a [`UriSpec`]: literal text, or a variable (`{name}`).
///
/// ```
/// use zkwire_recipes::{UriPart, UriSpec};
///
/// let spec = UriSpec::parse("https://{host}/api").unwrap();
/// let host = UriPart { value: "host".into(), variable: true };
/// assert_eq!(spec.parts()[1], host);
/// assert!(!spec.parts()[0].variable, "`https://` is literal");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UriPart {
    /// The text, or the variable's name.
    pub value: String,
    /// Whether this part is a variable.
    pub variable: bool,
}

/// Curator's `UriSpec`: a URI template such as `{scheme}://example.com:{port}/api`, kept as
/// its parts (which is what the JSON holds).
///
/// ```
/// use zkwire_recipes::UriSpec;
///
/// let spec = UriSpec::parse("{scheme}://example.com:{port}").unwrap();
/// assert_eq!(spec.parts().len(), 3);
/// assert!(spec.parts()[0].variable);
/// assert_eq!(spec.to_string(), "{scheme}://example.com:{port}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UriSpec {
    parts: Vec<UriPart>,
}

impl UriSpec {
    /// Parses a template as Curator does: `{` opens a variable (its name trimmed), `}`
    /// closes it; everything else is literal. `None` for a nested `{`, a `}` without its
    /// `{`, or a variable left open.
    ///
    /// ```
    /// use zkwire_recipes::UriSpec;
    ///
    /// let spec = UriSpec::parse("{scheme}://{ address }:{port}/status").unwrap();
    /// let names: Vec<&str> = spec.parts().iter().map(|p| p.value.as_str()).collect();
    /// assert_eq!(names, ["scheme", "://", "address", ":", "port", "/status"]);
    /// assert_eq!(UriSpec::parse("{scheme://host"), None, "a variable left open");
    /// ```
    pub fn parse(spec: &str) -> Option<Self> {
        let mut parts = Vec::new();
        let mut open = false;
        let mut text = String::new();
        for c in spec.chars() {
            match c {
                '{' if open => return None,
                '}' if !open => return None,
                '{' | '}' => {
                    let value = if open { text.trim().to_owned() } else { text };
                    if !value.is_empty() {
                        parts.push(UriPart {
                            value,
                            variable: open,
                        });
                    }
                    text = String::new();
                    open = c == '{';
                }
                c => text.push(c),
            }
        }
        if open {
            return None;
        }
        if !text.is_empty() {
            parts.push(UriPart {
                value: text,
                variable: false,
            });
        }
        Some(Self { parts })
    }

    /// A spec of these parts.
    ///
    /// ```
    /// use zkwire_recipes::{UriPart, UriSpec};
    ///
    /// let spec = UriSpec::from_parts(vec![
    ///     UriPart { value: "http://".into(), variable: false },
    ///     UriPart { value: "address".into(), variable: true },
    /// ]);
    /// assert_eq!(spec.to_string(), "http://{address}");
    /// ```
    pub fn from_parts(parts: Vec<UriPart>) -> Self {
        Self { parts }
    }

    /// The parts, in order.
    ///
    /// ```
    /// use zkwire_recipes::UriSpec;
    ///
    /// let spec = UriSpec::parse("{scheme}://example.com").unwrap();
    /// let variables: Vec<&str> = spec
    ///     .parts()
    ///     .iter()
    ///     .filter(|p| p.variable)
    ///     .map(|p| p.value.as_str())
    ///     .collect();
    /// assert_eq!(variables, ["scheme"]);
    /// ```
    pub fn parts(&self) -> &[UriPart] {
        &self.parts
    }
}

impl fmt::Display for UriSpec {
    /// The template again (`{name}` for variables).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            if part.variable {
                write!(f, "{{{}}}", part.value)?;
            } else {
                f.write_str(&part.value)?;
            }
        }
        Ok(())
    }
}

/// Why a node's data is not a [`ServiceInstance`] in Curator's JSON.
///
/// ```
/// use zkwire_recipes::ServiceInstance;
///
/// let error = ServiceInstance::from_json(br#"{"name": "api"}"#).unwrap_err();
/// assert_eq!(error.to_string(), "not a Curator ServiceInstance: no id");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceFormatError(String);

impl fmt::Display for InstanceFormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a Curator ServiceInstance: {}", self.0)
    }
}

impl std::error::Error for InstanceFormatError {}

fn format_error(what: impl Into<String>) -> InstanceFormatError {
    InstanceFormatError(what.into())
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
/// it is the default), so an instance reads back equal; unknown members (Curator 5's
/// `enabled`...) are ignored.
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
            },
        }
    }

    /// The instance as Curator's `JsonInstanceSerializer` writes it (see the type's docs).
    ///
    /// ```
    /// use zkwire_recipes::ServiceInstance;
    ///
    /// let instance = ServiceInstance::builder("api").id("api-1").port(8080).build();
    /// let json = String::from_utf8(instance.to_json()).unwrap();
    /// assert!(json.starts_with(r#"{"name":"api","id":"api-1","address":null,"port":8080,"#));
    /// ```
    pub fn to_json(&self) -> Vec<u8> {
        let mut json = Map::new();
        json.insert("name".into(), self.name.clone().into());
        json.insert("id".into(), self.id.clone().into());
        json.insert("address".into(), self.address.clone().into());
        json.insert("port".into(), self.port.into());
        json.insert("sslPort".into(), self.ssl_port.into());
        json.insert("payload".into(), self.typed_payload());
        json.insert(
            "registrationTimeUTC".into(),
            self.registration_time_utc.into(),
        );
        json.insert("serviceType".into(), self.service_type.as_str().into());
        let uri_spec = self.uri_spec.as_ref().map_or(Value::Null, |spec| {
            let parts: Vec<Value> = spec
                .parts
                .iter()
                .map(|p| serde_json::json!({"value": p.value, "variable": p.variable}))
                .collect();
            serde_json::json!({ "parts": parts })
        });
        json.insert("uriSpec".into(), uri_spec);
        Value::Object(json).to_string().into_bytes()
    }

    /// The payload with Jackson's class information, as `@JsonTypeInfo(use = CLASS)` writes
    /// it.
    fn typed_payload(&self) -> Value {
        let class = |default: &str| self.payload_class.clone().unwrap_or_else(|| default.into());
        match &self.payload {
            None => Value::Null,
            Some(Value::Object(members)) => {
                let mut typed = Map::new();
                typed.insert("@class".into(), class(MAP_CLASS).into());
                for (k, v) in members {
                    if k != "@class" {
                        typed.insert(k.clone(), v.clone());
                    }
                }
                Value::Object(typed)
            }
            Some(array @ Value::Array(_)) => {
                Value::Array(vec![class(LIST_CLASS).into(), array.clone()])
            }
            Some(scalar) => scalar.clone(),
        }
    }

    /// Reads an instance from Curator's JSON (see the type's docs).
    ///
    /// # Errors
    /// [`InstanceFormatError`] when `data` is not JSON, lacks `name` or `id`, or has a
    /// member of the wrong kind (a port outside `0..=65535`, an unknown `serviceType`...).
    ///
    /// ```
    /// use zkwire_recipes::{ServiceInstance, ServiceType};
    ///
    /// // As a Curator process registers it.
    /// let data = br#"{"name":"api","id":"3f1c","address":"10.0.0.9","port":8080,
    ///     "sslPort":null,"payload":null,"registrationTimeUTC":1700000000000,
    ///     "serviceType":"DYNAMIC","uriSpec":null,"enabled":true}"#;
    /// let instance = ServiceInstance::from_json(data).unwrap();
    /// assert_eq!(instance.address.as_deref(), Some("10.0.0.9"));
    /// assert_eq!(instance.service_type, ServiceType::Dynamic);
    /// assert!(ServiceInstance::from_json(b"not json").is_err());
    /// ```
    pub fn from_json(data: &[u8]) -> Result<Self, InstanceFormatError> {
        let value: Value = serde_json::from_slice(data).map_err(|e| format_error(e.to_string()))?;
        let Value::Object(json) = value else {
            return Err(format_error("not a JSON object"));
        };
        let text = |key: &str| match json.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format_error(format!("{key} is not a string"))),
        };
        let port = |key: &str| match json.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .map(Some)
                .ok_or_else(|| format_error(format!("{key} is not a port"))),
        };
        let service_type = match text("serviceType")? {
            None => ServiceType::Dynamic,
            Some(name) => ServiceType::parse(&name)
                .ok_or_else(|| format_error(format!("unknown serviceType {name}")))?,
        };
        let registration_time_utc = match json.get("registrationTimeUTC") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_i64()
                .ok_or_else(|| format_error("registrationTimeUTC is not a long"))?,
        };
        let (payload, payload_class) = untyped_payload(json.get("payload").cloned());
        Ok(Self {
            name: text("name")?.ok_or_else(|| format_error("no name"))?,
            id: text("id")?.ok_or_else(|| format_error("no id"))?,
            address: text("address")?,
            port: port("port")?,
            ssl_port: port("sslPort")?,
            payload,
            payload_class,
            registration_time_utc,
            service_type,
            uri_spec: uri_spec(json.get("uriSpec"))?,
        })
    }
}

/// The payload and its Jackson class, from the payload as written.
fn untyped_payload(payload: Option<Value>) -> (Option<Value>, Option<String>) {
    match payload {
        None | Some(Value::Null) => (None, None),
        Some(Value::Object(mut members)) => {
            let class = match members.shift_remove("@class") {
                Some(Value::String(class)) if class != MAP_CLASS => Some(class),
                _ => None,
            };
            (Some(Value::Object(members)), class)
        }
        Some(Value::Array(mut wrapped))
            if wrapped.len() == 2 && wrapped[0].is_string() && wrapped[1].is_array() =>
        {
            let array = wrapped.pop();
            let class = wrapped
                .pop()
                .and_then(|c| c.as_str().map(str::to_owned))
                .filter(|c| c != LIST_CLASS);
            (array, class)
        }
        Some(other) => (Some(other), None),
    }
}

/// A `uriSpec` member: `null` or `{"parts": [{"value": .., "variable": ..}]}`.
fn uri_spec(value: Option<&Value>) -> Result<Option<UriSpec>, InstanceFormatError> {
    let Some(spec) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let bad = || format_error("uriSpec is not a list of parts");
    let parts = spec
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(bad)?;
    let parts = parts
        .iter()
        .map(|part| {
            let value = part.get("value").and_then(Value::as_str).ok_or_else(bad)?;
            let variable = part
                .get("variable")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Ok(UriPart {
                value: value.to_owned(),
                variable,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(UriSpec { parts }))
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
    client: Client,
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
    /// [`LockError::Client`] with [`Error::InvalidArgument`] for a name or id with a `/`,
    /// with [`Error::InvalidPath`] for an empty one; the error that stopped the node's task
    /// (the session ended without renewal, an invalid ACL...). Errors that may clear up
    /// (`NoAuth`, a read-only server) are retried meanwhile, so this waits: bound it with
    /// [`tokio::time::timeout`] if need be.
    ///
    /// [`tokio::time::timeout`]: https://docs.rs/tokio/1/tokio/time/fn.timeout.html
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it returns, the node is deleted in the background.
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
        if instance.name.contains('/') || instance.id.contains('/') {
            return Err(
                Error::InvalidArgument("a service name or id must be one path segment").into(),
            );
        }
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
        let options = CreateOptions::new(CreateMode::Persistent).with_container_parents();
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
    /// The client's errors.
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
    /// The client's errors.
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
    /// [`Error::InvalidArgument`] for a name with a `/`; as
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
        if name.contains('/') {
            return Err(Error::InvalidArgument("a service name must be one path segment").into());
        }
        let dir = path::join(&discovery.base, name);
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
        })
    }

    /// Every instance known now.
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
        self.cache.instances()
    }

    /// One instance by the strategy; `None` when there is none.
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
        let mut instances = self.cache.instances();
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
