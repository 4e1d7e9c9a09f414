//! The jute binary encoding used by ZooKeeper, written by hand.
//!
//! Jute is ZooKeeper's record serialization: big-endian integers, length-prefixed strings and
//! buffers (`-1` = null), count-prefixed vectors (`-1` = null) and records as their fields
//! concatenated in declaration order, with no tags and no padding. The authoritative layouts are
//! in ZooKeeper's `zookeeper-jute/src/main/resources/zookeeper.jute`; the Java implementation is
//! `BinaryInputArchive`/`BinaryOutputArchive`.
//!
//! Decoding never trusts the wire: every read is bounds-checked against the bytes actually
//! present, no length or count read from the wire is used to preallocate more than the bytes
//! that back it, and every failure is a [`DecodeError`] naming the record being decoded.

mod error;
mod frame;
mod primitives;
mod reader;

pub use error::{DecodeError, DecodeErrorKind};
pub use frame::{encode_frame, FrameDecoder, FrameError, DEFAULT_MAX_FRAME_LEN, JUTE_MAX_BUFFER};
pub use primitives::{decode_lossy_string, skip_lossy_string};
pub(crate) use primitives::decode_names;
pub use reader::Reader;

use bytes::{Bytes, BytesMut};

/// A value that can be written in jute encoding.
pub trait Encode {
    /// Appends the jute encoding of `self` to `buf`.
    ///
    /// Writes exactly [`encoded_len`](Self::encoded_len) bytes. A concrete buffer, not any
    /// `BufMut`: its `extend_from_slice` is inlined, so a 4-byte integer is a store and a
    /// length check rather than a call into `bytes` and then into `memcpy` (two calls per
    /// field, some thirty per lock cycle; BENCHMARKS.md, "Issue 29, seventh pass").
    fn encode(&self, buf: &mut BytesMut);

    /// The number of bytes [`encode`](Self::encode) writes.
    fn encoded_len(&self) -> usize;

    /// Encodes `self` into a fresh buffer of exactly the right size.
    fn to_bytes(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut buf);
        buf.freeze()
    }
}

/// A value that can be read from jute encoding.
pub trait Decode: Sized {
    /// The record name used in error messages: the jute class name, empty for primitives
    /// (whose errors are attributed to the record holding them).
    const NAME: &'static str;

    /// The fewest bytes any encoding of this type takes.
    ///
    /// Vector decoding uses it to reject a count that cannot fit in the bytes left before
    /// allocating anything for it.
    const MIN_LEN: usize;

    /// `Some(n)` when every run of `n` bytes is a valid encoding and no other length is: the
    /// fixed-width integers and records made of them only (such as `Stat`). Lets
    /// [`skip`](Self::skip) step over a whole record at once.
    const FIXED_LEN: Option<usize> = None;

    /// Reads one value from `r`, leaving `r` just past it.
    ///
    /// # Errors
    /// A [`DecodeError`] when the bytes are truncated or malformed; `r` is then left at an
    /// unspecified position.
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// Checks one encoded value and moves `r` past it, allocating nothing.
    ///
    /// Must accept exactly the inputs [`decode`](Self::decode) accepts and report the same
    /// errors. [`decode_exact`](Self::decode_exact) runs it over a whole frame first, so that
    /// malformed input is rejected before any memory is spent on it.
    ///
    /// # Errors
    /// As [`decode`](Self::decode).
    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError>;

    /// Decodes a value that must span all of `bytes`.
    ///
    /// The bytes are validated in full (with [`skip`](Self::skip)) before decoding starts:
    /// a truncated or malformed frame fails without allocating.
    ///
    /// # Errors
    /// As [`decode`](Self::decode), plus [`DecodeErrorKind::TrailingBytes`] when bytes are left
    /// over.
    fn decode_exact(bytes: &Bytes) -> Result<Self, DecodeError> {
        let mut check = Reader::new(bytes);
        check.skip::<Self>()?;
        check.finish().map_err(|e| e.in_record(Self::NAME))?;
        Reader::new(bytes).read::<Self>()
    }
}

/// The [`Decode::FIXED_LEN`] of a record whose fields have these: their sum, or `None` if any
/// field has none.
pub(crate) const fn fixed_sum(fields: &[Option<usize>]) -> Option<usize> {
    let mut total = 0;
    let mut i = 0;
    while i < fields.len() {
        match fields[i] {
            Some(len) => total += len,
            None => return None,
        }
        i += 1;
    }
    Some(total)
}

/// Defines a jute record: a struct whose fields are encoded in declaration order.
///
/// Every field type must implement [`Encode`] and [`Decode`]. Field order is wire order, so the
/// macro input doubles as the jute class definition. Three forms:
/// - `pub struct Name as "JuteName" { … }` derives `Debug, Clone, PartialEq, Eq`;
/// - `pub struct Name as "JuteName", derives given { … }` derives nothing but what its own
///   attributes say (for a record whose `Debug` is written by hand, to redact a secret);
/// - `pub struct Name as "JuteName", lenient strings { … }` has `String` fields only and
///   decodes them as [`decode_lossy_string`] does (invalid UTF-8 becomes U+FFFD); it too
///   derives only what its attributes say.
macro_rules! record {
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $jute:literal, derives given {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        $crate::jute::record!(@encode $name { $( $field )* });

        impl $crate::jute::Decode for $name {
            const NAME: &'static str = $jute;
            const MIN_LEN: usize = 0 $( + <$ty as $crate::jute::Decode>::MIN_LEN )*;
            const FIXED_LEN: Option<usize> =
                $crate::jute::fixed_sum(&[$( <$ty as $crate::jute::Decode>::FIXED_LEN ),*]);

            fn decode(
                r: &mut $crate::jute::Reader<'_>,
            ) -> Result<Self, $crate::jute::DecodeError> {
                let _ = &r;
                Ok(Self { $( $field: r.read::<$ty>()?, )* })
            }

            fn skip(r: &mut $crate::jute::Reader<'_>) -> Result<(), $crate::jute::DecodeError> {
                // A fixed-width record that fits cannot fail: one step. One that does not
                // fit is walked field by field, to report the field that runs out.
                if let Some(len) = Self::FIXED_LEN {
                    if r.remaining() >= len {
                        return r.take(len).map(drop);
                    }
                }
                $( r.skip::<$ty>()?; )*
                Ok(())
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $jute:literal, lenient strings {
            $( $(#[$fmeta:meta])* pub $field:ident : String, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$fmeta])* pub $field: String, )*
        }

        $crate::jute::record!(@encode $name { $( $field )* });

        impl $crate::jute::Decode for $name {
            const NAME: &'static str = $jute;
            const MIN_LEN: usize = 0 $( + $crate::jute::record!(@min_len_of_string $field) )*;

            fn decode(
                r: &mut $crate::jute::Reader<'_>,
            ) -> Result<Self, $crate::jute::DecodeError> {
                Ok(Self { $( $field: $crate::jute::decode_lossy_string(r)?, )* })
            }

            fn skip(r: &mut $crate::jute::Reader<'_>) -> Result<(), $crate::jute::DecodeError> {
                $( $crate::jute::record!(@skip_lossy_string r $field); )*
                Ok(())
            }
        }
    };
    (@min_len_of_string $field:ident) => {
        <String as $crate::jute::Decode>::MIN_LEN
    };
    (@skip_lossy_string $r:ident $field:ident) => {
        $crate::jute::skip_lossy_string($r)?
    };
    (@encode $name:ident { $( $field:ident )* }) => {
        impl $crate::jute::Encode for $name {
            fn encode(&self, buf: &mut ::bytes::BytesMut) {
                $( $crate::jute::Encode::encode(&self.$field, buf); )*
                let _ = buf;
            }

            fn encoded_len(&self) -> usize {
                0 $( + $crate::jute::Encode::encoded_len(&self.$field) )*
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $jute:literal { $( $fields:tt )* }
    ) => {
        $crate::jute::record! {
            $(#[$meta])*
            #[derive(Debug, Clone, PartialEq, Eq)]
            pub struct $name as $jute, derives given { $( $fields )* }
        }
    };
}
pub(crate) use record;
