//! A small JSON writer for `--json` output (one document per line).

use std::fmt::{self, Write};

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Self>),
    /// An object, keys in insertion order.
    Obj(Vec<(&'static str, Self)>),
}

impl Json {
    /// An object from key/value pairs.
    pub(crate) fn obj<const N: usize>(pairs: [(&'static str, Self); N]) -> Self {
        Self::Obj(pairs.into())
    }

    /// A string value.
    pub(crate) fn str(s: impl Into<String>) -> Self {
        Self::Str(s.into())
    }

    /// An array of strings.
    pub(crate) fn strs<S: AsRef<str>>(items: &[S]) -> Self {
        Self::Arr(items.iter().map(|s| Self::str(s.as_ref())).collect())
    }
}

impl From<i64> for Json {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<i32> for Json {
    fn from(n: i32) -> Self {
        Self::Int(n.into())
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bool(b) => write!(f, "{b}"),
            Self::Int(n) => write!(f, "{n}"),
            Self::Str(s) => write_string(f, s),
            Self::Arr(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Self::Obj(pairs) => {
                f.write_char('{')?;
                for (i, (key, value)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_char(',')?;
                    }
                    write_string(f, key)?;
                    write!(f, ":{value}")?;
                }
                f.write_char('}')
            }
        }
    }
}

/// Writes `s` as a JSON string: quotes, backslashes and control characters escaped.
fn write_string(f: &mut impl Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            '\u{8}' => f.write_str("\\b")?,
            '\u{c}' => f.write_str("\\f")?,
            // The other C0 controls, DEL, and the line separators JavaScript chokes on.
            c if u32::from(c) < 0x20 || c == '\u{7f}' || c == '\u{2028}' || c == '\u{2029}' => {
                write!(f, "\\u{:04x}", u32::from(c))?;
            }
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings() {
        let s = Json::str("a\"b\\c\nd\te\u{1}f\u{7f}é\u{2028}");
        assert_eq!(s.to_string(), r#""a\"b\\c\nd\te\u0001f\u007fé\u2028""#);
    }

    #[test]
    fn writes_documents() {
        let doc = Json::obj([
            ("path", Json::str("/a")),
            ("n", 3i64.into()),
            ("ok", true.into()),
            ("list", Json::strs(&["x", "y"])),
        ]);
        assert_eq!(
            doc.to_string(),
            r#"{"path":"/a","n":3,"ok":true,"list":["x","y"]}"#
        );
        assert_eq!(Json::Arr(vec![]).to_string(), "[]");
        assert_eq!(Json::Obj(vec![]).to_string(), "{}");
    }
}
