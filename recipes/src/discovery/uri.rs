//! Curator's `UriSpec`: a URI template kept as its parts.

use std::fmt;

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
