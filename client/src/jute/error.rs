//! Decode errors: what went wrong, where, and in which record.

use std::fmt;

/// A malformed or truncated jute encoding.
///
/// Names the innermost record being decoded when the problem was found and, when that record
/// was nested, the outermost one (e.g. a truncated `Stat` inside a `GetDataResponse`). The
/// message format is for humans and may change; match on [`kind`](Self::kind) instead.
///
/// ```
/// # fn report(error: &zkwire::Error) {
/// use zkwire::error::ProtocolError;
/// use zkwire::Error;
///
/// if let Error::Protocol(ProtocolError::Decode(e)) = error {
///     eprintln!("a server sent a malformed reply: {e}");
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    record: &'static str,
    outer: &'static str,
    kind: DecodeErrorKind,
}

/// The ways a jute encoding can be malformed.
///
/// ```
/// # fn report(error: &zkwire::Error) {
/// use zkwire::error::{DecodeErrorKind, ProtocolError};
/// use zkwire::Error;
///
/// if let Error::Protocol(ProtocolError::Decode(e)) = error {
///     if let DecodeErrorKind::UnexpectedEnd { offset, .. } = e.kind() {
///         eprintln!("a reply was cut short at byte {offset}");
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// A read needed more bytes than are left.
    UnexpectedEnd {
        /// Offset of the read in the decoded bytes.
        offset: usize,
        /// Bytes the read needed.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// A string or buffer length below -1.
    BadLength {
        /// Offset of the length field.
        offset: usize,
        /// The length read.
        len: i32,
    },
    /// A vector count below -1, or one that cannot fit in the bytes left.
    BadCount {
        /// Offset of the count field.
        offset: usize,
        /// The count read.
        count: i32,
        /// Bytes left after the count.
        available: usize,
    },
    /// A null (-1) string, buffer or vector where the record does not allow null.
    UnexpectedNull {
        /// Offset of the length or count field.
        offset: usize,
        /// "string", "buffer" or "vector".
        what: &'static str,
    },
    /// A string that must be UTF-8 (a path, for example) is not.
    BadUtf8 {
        /// Offset of the string's first byte.
        offset: usize,
    },
    /// An enumerated field holds a value this client cannot interpret, and the rest of the
    /// record depends on it (e.g. the op type of a multi result, which selects its body).
    UnknownValue {
        /// What the value is (e.g. "multi op type").
        what: &'static str,
        /// The value read.
        value: i32,
    },
    /// Bytes were left over after a record that must span its whole input.
    TrailingBytes {
        /// How many bytes were left.
        len: usize,
    },
}

impl DecodeError {
    pub(crate) const fn new(kind: DecodeErrorKind) -> Self {
        Self {
            record: "",
            outer: "",
            kind,
        }
    }

    /// Attributes the error to `record` as it propagates out of that record's decoder.
    ///
    /// The first record named is the innermost; later calls only update the outermost.
    pub(crate) fn in_record(mut self, record: &'static str) -> Self {
        // Primitives have no name: the error belongs to the record that holds them.
        if record.is_empty() {
            return self;
        }
        if self.record.is_empty() {
            self.record = record;
        }
        self.outer = record;
        self
    }

    /// The innermost record being decoded when the error was found.
    ///
    /// ```
    /// # fn report(error: &zkwire::Error) {
    /// use zkwire::error::ProtocolError;
    /// use zkwire::Error;
    ///
    /// if let Error::Protocol(ProtocolError::Decode(e)) = error {
    ///     eprintln!("malformed {} in a {} reply", e.record(), e.outer_record());
    /// }
    /// # }
    /// ```
    pub fn record(&self) -> &'static str {
        self.record
    }

    /// The outermost record being decoded (equal to [`record`](Self::record) when not nested).
    ///
    /// ```
    /// # fn report(error: &zkwire::Error) {
    /// use zkwire::error::ProtocolError;
    /// use zkwire::Error;
    ///
    /// if let Error::Protocol(ProtocolError::Decode(e)) = error {
    ///     eprintln!("malformed {} in a {} reply", e.record(), e.outer_record());
    /// }
    /// # }
    /// ```
    pub fn outer_record(&self) -> &'static str {
        self.outer
    }

    /// What went wrong.
    ///
    /// ```
    /// # fn report(error: &zkwire::Error) {
    /// use zkwire::error::{DecodeErrorKind, ProtocolError};
    /// use zkwire::Error;
    ///
    /// if let Error::Protocol(ProtocolError::Decode(e)) = error {
    ///     if let DecodeErrorKind::BadUtf8 { .. } = e.kind() {
    ///         eprintln!("a server sent a path that is not UTF-8");
    ///     }
    /// }
    /// # }
    /// ```
    pub fn kind(&self) -> &DecodeErrorKind {
        &self.kind
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let record = if self.record.is_empty() {
            "value"
        } else {
            self.record
        };
        write!(f, "malformed {record}")?;
        if !self.outer.is_empty() && self.outer != self.record {
            write!(f, " in {}", self.outer)?;
        }
        write!(f, ": {}", self.kind)
    }
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::UnexpectedEnd {
                offset,
                needed,
                available,
            } => write!(
                f,
                "unexpected end of data at offset {offset}: needed {needed} bytes, {available} left"
            ),
            Self::BadLength { offset, len } => write!(f, "invalid length {len} at offset {offset}"),
            Self::BadCount {
                offset,
                count,
                available,
            } => write!(
                f,
                "invalid vector count {count} at offset {offset} ({available} bytes left)"
            ),
            Self::UnexpectedNull { offset, what } => {
                write!(
                    f,
                    "null {what} at offset {offset} where null is not allowed"
                )
            }
            Self::BadUtf8 { offset } => write!(f, "invalid UTF-8 in string at offset {offset}"),
            Self::UnknownValue { what, value } => write!(f, "unknown {what} {value}"),
            Self::TrailingBytes { len } => write!(f, "{len} unexpected trailing bytes"),
        }
    }
}

impl std::error::Error for DecodeError {}
