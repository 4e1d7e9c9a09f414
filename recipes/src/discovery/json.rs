//! A [`ServiceInstance`] in Curator's JSON (`JsonInstanceSerializer`, Jackson), both ways.

use std::fmt;

use serde_json::{Map, Value};

use super::instance::{ServiceInstance, ServiceType};
use super::uri::{UriPart, UriSpec};

/// The class Curator (Jackson) names for a JSON object payload read into a `Map`.
const MAP_CLASS: &str = "java.util.LinkedHashMap";
/// The class Curator (Jackson) names for a JSON array payload read into a `List`.
const LIST_CLASS: &str = "java.util.ArrayList";

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

impl ServiceInstance {
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
                .parts()
                .iter()
                .map(|p| serde_json::json!({"value": p.value, "variable": p.variable}))
                .collect();
            serde_json::json!({ "parts": parts })
        });
        json.insert("uriSpec".into(), uri_spec);
        if !self.enabled {
            json.insert("enabled".into(), false.into());
        }
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
        let enabled = match json.get("enabled") {
            None | Some(Value::Null) => true,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| format_error("enabled is not a boolean"))?,
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
            enabled,
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
    Ok(Some(UriSpec::from_parts(parts)))
}
