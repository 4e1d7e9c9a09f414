//! Jute primitives: `int`, `long`, `boolean`, `ustring`, `buffer` and `vector<T>`.
//!
//! | jute type | encoding | null |
//! |---|---|---|
//! | `int` / `long` | 4 / 8 bytes big-endian | – |
//! | `boolean` | 1 byte; 0 is false, anything else true (as Java's `readBoolean`) | – |
//! | `ustring` | `int len` + UTF-8 bytes | `len = -1` |
//! | `buffer` | `int len` + raw bytes | `len = -1` |
//! | `vector<T>` | `int count` + elements back to back | `count = -1` |
//!
//! `String` and `Bytes` fields reject null; `Option<String>` and `Option<Bytes>` fields are the
//! nullable ones. A vector is never nullable here: no reply the server builds carries a null
//! vector, so one is reported as malformed rather than silently read as empty.

use bytes::{Bytes, BytesMut};

use super::{Decode, DecodeError, DecodeErrorKind, Encode, Reader};

/// `int` and `long`: fixed-width big-endian integers.
macro_rules! big_endian {
    ($($t:ty,)*) => {$(
        impl Encode for $t {
            fn encode(&self, buf: &mut BytesMut) {
                buf.extend_from_slice(&self.to_be_bytes());
            }

            fn encoded_len(&self) -> usize {
                std::mem::size_of::<$t>()
            }
        }

        impl Decode for $t {
            const NAME: &'static str = "";
            const MIN_LEN: usize = std::mem::size_of::<$t>();
            const FIXED_LEN: Option<usize> = Some(Self::MIN_LEN);

            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                r.read_array().map(Self::from_be_bytes)
            }

            fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
                r.take(Self::MIN_LEN).map(drop)
            }
        }
    )*};
}

big_endian! {
    i32,
    i64,
}

impl Encode for bool {
    fn encode(&self, buf: &mut BytesMut) {
        buf.extend_from_slice(&[u8::from(*self)]);
    }

    fn encoded_len(&self) -> usize {
        1
    }
}

impl Decode for bool {
    const NAME: &'static str = "";
    const MIN_LEN: usize = 1;
    const FIXED_LEN: Option<usize> = Some(1);

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let [b] = r.read_array()?;
        Ok(b != 0)
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        r.take(1).map(drop)
    }
}

/// Writes a non-null `ustring`.
pub(super) fn encode_str(s: &str, buf: &mut BytesMut) {
    put_len(s.len(), buf);
    buf.extend_from_slice(s.as_bytes());
}

/// The encoded length of a non-null `ustring`.
pub(super) fn str_encoded_len(s: &str) -> usize {
    4 + s.len()
}

impl Encode for String {
    fn encode(&self, buf: &mut BytesMut) {
        encode_str(self, buf);
    }

    fn encoded_len(&self) -> usize {
        str_encoded_len(self)
    }
}

/// `ustring` and `buffer` read as their nullable `Option` form, a null being an error that
/// names the jute type: one rule for every non-null field.
macro_rules! non_null {
    ($($t:ty, $what:literal, $skip:path;)*) => {$(
        impl Decode for $t {
            const NAME: &'static str = "";
            const MIN_LEN: usize = 4;

            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Option::<Self>::decode(r)?.ok_or_else(|| null_error(r, $what))
            }

            fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
                $skip(r)?.ok_or_else(|| null_error(r, $what))
            }
        }
    )*};
}

non_null! {
    String, "string", skip_checked_str;
    Bytes, "buffer", skip_buffer;
}

impl Encode for Option<String> {
    fn encode(&self, buf: &mut BytesMut) {
        match self {
            Some(s) => encode_str(s, buf),
            None => (-1i32).encode(buf),
        }
    }

    fn encoded_len(&self) -> usize {
        self.as_deref().map_or(4, str_encoded_len)
    }
}

impl Decode for Option<String> {
    const NAME: &'static str = "";
    const MIN_LEN: usize = 4;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(checked_str(r)?.map(str::to_owned))
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        skip_checked_str(r).map(drop)
    }
}

/// Reads a nullable `ustring` as a borrowed, UTF-8-checked slice.
fn checked_str<'a>(r: &mut Reader<'a>) -> Result<Option<&'a str>, DecodeError> {
    let Some((offset, bytes)) = str_bytes(r)? else {
        return Ok(None);
    };
    std::str::from_utf8(bytes)
        .map(Some)
        .map_err(|_| bad_utf8(offset))
}

/// Steps over a nullable `ustring` as [`checked_str`] reads it (`None`: a null), with the
/// same errors. A reply is checked whole before it is decoded, so every string of it is
/// checked twice: the common case, ASCII, is told apart here by `is_ascii`, half the cost of
/// full UTF-8 validation on a 50-byte name (a lock listing's names; BENCHMARKS.md, "Issue 29,
/// eighth pass").
fn skip_checked_str(r: &mut Reader<'_>) -> Result<Option<()>, DecodeError> {
    let Some((offset, bytes)) = str_bytes(r)? else {
        return Ok(None);
    };
    if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
        Ok(Some(()))
    } else {
        Err(bad_utf8(offset))
    }
}

/// A nullable `ustring`'s bytes, unchecked, and the offset they start at.
fn str_bytes<'a>(r: &mut Reader<'a>) -> Result<Option<(usize, &'a [u8])>, DecodeError> {
    let Some((_, len)) = r.read_len()? else {
        return Ok(None);
    };
    let offset = r.position();
    Ok(Some((offset, r.take(len)?)))
}

fn bad_utf8(offset: usize) -> DecodeError {
    DecodeError::new(DecodeErrorKind::BadUtf8 { offset })
}

/// Reads a non-null `ustring`, replacing invalid UTF-8 with U+FFFD instead of failing.
///
/// For strings the server copies from other clients rather than validates (ACL ids, auth
/// schemes, `whoAmI` users): Java writes non-BMP characters as CESU-8, which is not UTF-8, and
/// such a string must not cost the connection.
///
/// # Errors
/// Truncation, a bad length or a null.
pub fn decode_lossy_string(r: &mut Reader<'_>) -> Result<String, DecodeError> {
    let Some((_, len)) = r.read_len()? else {
        return Err(null_error(r, "string"));
    };
    Ok(String::from_utf8_lossy(r.take(len)?).into_owned())
}

/// Skips what [`decode_lossy_string`] reads, allocating nothing.
///
/// # Errors
/// As [`decode_lossy_string`].
pub fn skip_lossy_string(r: &mut Reader<'_>) -> Result<(), DecodeError> {
    let Some((_, len)) = r.read_len()? else {
        return Err(null_error(r, "string"));
    };
    r.take(len).map(drop)
}

impl Encode for Bytes {
    fn encode(&self, buf: &mut BytesMut) {
        put_len(self.len(), buf);
        buf.extend_from_slice(self);
    }

    fn encoded_len(&self) -> usize {
        4 + self.len()
    }
}

impl Encode for Option<Bytes> {
    fn encode(&self, buf: &mut BytesMut) {
        match self {
            Some(b) => b.encode(buf),
            None => (-1i32).encode(buf),
        }
    }

    fn encoded_len(&self) -> usize {
        self.as_ref().map_or(4, Encode::encoded_len)
    }
}

impl Decode for Option<Bytes> {
    const NAME: &'static str = "";
    const MIN_LEN: usize = 4;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.read_len()? {
            Some((_, len)) => r.take_bytes(len).map(Some),
            None => Ok(None),
        }
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        skip_buffer(r).map(drop)
    }
}

/// Skips a `buffer`; `None` for a null one.
fn skip_buffer(r: &mut Reader<'_>) -> Result<Option<()>, DecodeError> {
    r.read_len()?
        .map(|(_, len)| r.take(len).map(drop))
        .transpose()
}

impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, buf: &mut BytesMut) {
        encode_list(self, buf);
    }

    fn encoded_len(&self) -> usize {
        list_encoded_len(self)
    }
}

/// A jute `vector`: its count, then each item.
fn encode_list<T: Encode>(items: &[T], buf: &mut BytesMut) {
    put_len(items.len(), buf);
    for item in items {
        item.encode(buf);
    }
}

fn list_encoded_len<T: Encode>(items: &[T]) -> usize {
    4 + items.iter().map(Encode::encoded_len).sum::<usize>()
}

impl<T: Decode> Decode for Vec<T> {
    const NAME: &'static str = "";
    const MIN_LEN: usize = 4;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = read_count::<T>(r)?;
        // The count is bounded by the bytes left (see `read_count`), so this reservation is
        // too. Every element has also been checked before we get here, by `decode_exact` or,
        // for a reply, by the session's reply check (`session::decode_checked`).
        let mut items = Self::with_capacity(n);
        for _ in 0..n {
            items.push(r.read::<T>()?);
        }
        Ok(items)
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        for _ in 0..read_count::<T>(r)? {
            r.skip::<T>()?;
        }
        Ok(())
    }
}

/// A shared list (a create's ACL): the same wire form as [`Vec`].
impl<T: Encode> Encode for std::sync::Arc<[T]> {
    fn encode(&self, buf: &mut BytesMut) {
        encode_list(self, buf);
    }

    fn encoded_len(&self) -> usize {
        list_encoded_len(self)
    }
}

impl<T: Decode> Decode for std::sync::Arc<[T]> {
    const NAME: &'static str = "";
    const MIN_LEN: usize = 4;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Vec::<T>::decode(r).map(Into::into)
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        Vec::<T>::skip(r)
    }
}

/// Reads a `vector<ustring>` (the names of a listing) as one string and the end of each name
/// in it: two allocations, however many names there are, against one a name for a
/// `Vec<String>`, and one UTF-8 check over all of them rather than one a name.
///
/// A name's bytes are valid UTF-8 exactly when the whole is and the name starts and ends on
/// character boundaries, which is checked for each. Any failure is reported as
/// `Vec<String>`'s decode reports it: the bytes are read again by that decode, from where
/// this one started, and its error names the string at fault (a failure is rare: a reply
/// is checked before it is decoded).
///
/// # Errors
/// As `Vec::<String>::decode`.
pub(crate) fn decode_names(r: &mut Reader<'_>) -> Result<(String, Vec<usize>), DecodeError> {
    let start = r.clone();
    read_names(r).ok_or_else(|| {
        let mut again = start;
        match Vec::<String>::decode(&mut again) {
            Err(e) => e,
            // Unreachable: what fails here fails there. Still an error, never a panic.
            Ok(_) => bad_utf8(again.position()),
        }
    })
}

/// [`decode_names`] without its errors: `None` at the first thing wrong.
fn read_names(r: &mut Reader<'_>) -> Option<(String, Vec<usize>)> {
    let n = read_count::<String>(r).ok()?;
    let mut ends = Vec::with_capacity(n);
    // Every name's bytes are among those left, past its 4-byte length: an upper bound from
    // the bytes present, not from the wire's count.
    let mut names = Vec::with_capacity(r.remaining().saturating_sub(4 * n));
    for _ in 0..n {
        let (_, bytes) = str_bytes(r).ok()??;
        names.extend_from_slice(bytes);
        ends.push(names.len());
    }
    let names = String::from_utf8(names).ok()?;
    ends.iter()
        .all(|&end| names.is_char_boundary(end))
        .then_some((names, ends))
}

/// Reads a non-null vector count that can fit in the bytes left.
///
/// Every element takes at least `T::MIN_LEN` bytes, so a count that cannot fit is rejected
/// before anything is allocated for it: the wire count alone never sizes an allocation.
fn read_count<T: Decode>(r: &mut Reader<'_>) -> Result<usize, DecodeError> {
    let offset = r.position();
    let count = i32::decode(r)?;
    let available = r.remaining();
    let bad_count = || {
        DecodeError::new(DecodeErrorKind::BadCount {
            offset,
            count,
            available,
        })
    };
    match usize::try_from(count) {
        Ok(n) if n.saturating_mul(T::MIN_LEN.max(1)) <= available => Ok(n),
        Ok(_) => Err(bad_count()),
        Err(_) if count == -1 => Err(DecodeError::new(DecodeErrorKind::UnexpectedNull {
            offset,
            what: "vector",
        })),
        Err(_) => Err(bad_count()),
    }
}

/// Writes a length or count prefix.
///
/// Lengths are bounded by the frame cap long before `i32::MAX`; one that is not would be
/// rejected by the outbound size check, so saturating here never puts a wrong length on the
/// wire.
fn put_len(len: usize, buf: &mut BytesMut) {
    i32::try_from(len).unwrap_or(i32::MAX).encode(buf);
}

fn null_error(r: &Reader<'_>, what: &'static str) -> DecodeError {
    DecodeError::new(DecodeErrorKind::UnexpectedNull {
        offset: r.position() - 4,
        what,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode<T: Decode>(bytes: &[u8]) -> Result<T, DecodeError> {
        T::decode_exact(&Bytes::copy_from_slice(bytes))
    }

    #[test]
    fn ints_are_big_endian() {
        assert_eq!(decode::<i32>(&[0, 0, 0x75, 0x30]), Ok(30000));
        assert_eq!(decode::<i64>(&[0xff; 8]), Ok(-1));
        assert_eq!(0x0102_0304_i32.to_bytes().as_ref(), &[1, 2, 3, 4]);
    }

    #[test]
    fn booleans_accept_any_nonzero_byte() {
        assert_eq!(decode::<bool>(&[0]), Ok(false));
        assert_eq!(decode::<bool>(&[1]), Ok(true));
        assert_eq!(decode::<bool>(&[0x7f]), Ok(true));
    }

    #[test]
    fn null_string_and_buffer() {
        assert_eq!(decode::<Option<String>>(&[0xff; 4]), Ok(None));
        assert_eq!(decode::<Option<Bytes>>(&[0xff; 4]), Ok(None));
        let err = decode::<String>(&[0xff; 4]).unwrap_err();
        assert!(matches!(
            err.kind(),
            DecodeErrorKind::UnexpectedNull {
                offset: 0,
                what: "string"
            }
        ));
        assert_eq!(None::<String>.to_bytes().as_ref(), &[0xff; 4]);
    }

    #[test]
    fn lengths_below_minus_one_are_rejected() {
        let err = decode::<Option<Bytes>>(&[0xff, 0xff, 0xff, 0xfe]).unwrap_err();
        assert_eq!(
            err.kind(),
            &DecodeErrorKind::BadLength { offset: 0, len: -2 }
        );
    }

    #[test]
    fn huge_length_is_truncation_not_allocation() {
        let err = decode::<String>(&[0x7f, 0xff, 0xff, 0xff, b'a']).unwrap_err();
        assert!(matches!(
            err.kind(),
            DecodeErrorKind::UnexpectedEnd {
                needed: 0x7fff_ffff,
                ..
            }
        ));
    }

    #[test]
    fn vector_count_that_cannot_fit_is_rejected() {
        let err = decode::<Vec<String>>(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]).unwrap_err();
        assert!(matches!(
            err.kind(),
            DecodeErrorKind::BadCount {
                count: i32::MAX,
                ..
            }
        ));
        let err = decode::<Vec<i32>>(&[0xff; 4]).unwrap_err();
        assert!(matches!(
            err.kind(),
            DecodeErrorKind::UnexpectedNull { what: "vector", .. }
        ));
    }

    #[test]
    fn invalid_utf8_is_an_error_or_lossy() {
        let bytes = [0, 0, 0, 2, 0xc3, 0x28];
        let err = decode::<String>(&bytes).unwrap_err();
        assert_eq!(err.kind(), &DecodeErrorKind::BadUtf8 { offset: 4 });
        let b = Bytes::copy_from_slice(&bytes);
        let lossy = decode_lossy_string(&mut Reader::new(&b)).unwrap();
        assert_eq!(lossy, "\u{fffd}(");
    }

    #[test]
    fn trailing_bytes_are_reported() {
        let err = decode::<i32>(&[0, 0, 0, 1, 9]).unwrap_err();
        assert_eq!(err.kind(), &DecodeErrorKind::TrailingBytes { len: 1 });
    }
}
