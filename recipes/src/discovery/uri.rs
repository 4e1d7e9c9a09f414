//! Curator's `UriSpec`: a URI template kept as its parts.

use std::fmt;

use super::instance::ServiceInstance;

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

    /// The URI this template gives for `instance`, as Curator's `UriSpec.build(instance)`:
    /// see [`build_with`](Self::build_with).
    ///
    /// ```
    /// use zkwire_recipes::{ServiceInstance, UriSpec};
    ///
    /// let spec = UriSpec::parse("{scheme}://{address}:{port}/status").unwrap();
    /// let plain = ServiceInstance::builder("api").address("10.0.0.7").port(8080).build();
    /// assert_eq!(spec.build(&plain), "http://10.0.0.7:8080/status");
    /// let tls = ServiceInstance::builder("api").address("10.0.0.7").ssl_port(8443).build();
    /// assert_eq!(spec.build(&tls), "https://10.0.0.7:/status", "no plain port: empty");
    /// ```
    pub fn build(&self, instance: &ServiceInstance) -> String {
        self.build_with(Some(instance), &[])
    }

    /// The URI this template gives, with Curator's rules (`UriSpec.build`): `{scheme}` is
    /// `https` when the instance has an SSL port and `http` otherwise; `{name}`, `{id}`,
    /// `{address}`, `{port}`, `{ssl-port}`, `{registration-time-utc}` and `{service-type}`
    /// (lower case) are the instance's fields, empty when it has none; `{[}` and `{]}` are a
    /// literal `{` and `}`. `variables` add names and take precedence over those; a variable
    /// with no value at all is left out.
    ///
    /// ```
    /// use zkwire_recipes::{ServiceInstance, UriSpec};
    ///
    /// let spec = UriSpec::parse("{scheme}://{address}:{port}/{version}{[}x{]}").unwrap();
    /// let me = ServiceInstance::builder("api").address("db-1").port(5432).build();
    /// let uri = spec.build_with(Some(&me), &[("version", "v2"), ("scheme", "pg")]);
    /// assert_eq!(uri, "pg://db-1:5432/v2{x}");
    /// assert_eq!(spec.build_with(None, &[]), "http://:/{x}", "no instance: only the scheme");
    /// ```
    pub fn build_with(
        &self,
        instance: Option<&ServiceInstance>,
        variables: &[(&str, &str)],
    ) -> String {
        let mut uri = String::new();
        for part in &self.parts {
            if !part.variable {
                uri.push_str(&part.value);
                continue;
            }
            let name = part.value.as_str();
            match variables.iter().find(|(n, _)| *n == name) {
                Some((_, value)) => uri.push_str(value),
                None => push_field(&mut uri, name, instance),
            }
        }
        uri
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

/// Appends the value of the predefined variable `name` for `instance` (nothing for a name
/// that is not one).
fn push_field(uri: &mut String, name: &str, instance: Option<&ServiceInstance>) {
    use std::fmt::Write as _;
    let port = |p: Option<u16>| p.map(|p| p.to_string()).unwrap_or_default();
    match (name, instance) {
        ("[", _) => uri.push('{'),
        ("]", _) => uri.push('}'),
        ("scheme", Some(i)) if i.ssl_port.is_some() => uri.push_str("https"),
        ("scheme", _) => uri.push_str("http"),
        ("name", Some(i)) => uri.push_str(&i.name),
        ("id", Some(i)) => uri.push_str(&i.id),
        ("address", Some(i)) => uri.push_str(i.address.as_deref().unwrap_or("")),
        ("port", Some(i)) => uri.push_str(&port(i.port)),
        ("ssl-port", Some(i)) => uri.push_str(&port(i.ssl_port)),
        ("registration-time-utc", Some(i)) => {
            let _ = write!(uri, "{}", i.registration_time_utc);
        }
        ("service-type", Some(i)) => uri.push_str(&i.service_type.as_str().to_ascii_lowercase()),
        _ => {}
    }
}
