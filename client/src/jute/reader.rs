//! A bounds-checked cursor over received bytes.

use bytes::Bytes;

use super::{Decode, DecodeError, DecodeErrorKind};

/// A cursor over a frame's bytes that checks every read against what is left.
///
/// Reads of buffers hand out [`Bytes`] slices of the underlying frame, so payloads are never
/// copied.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub fn new(buf: &'a Bytes) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The offset of the next read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Decodes a `T`, attributing any error to `T`'s record name.
    ///
    /// # Errors
    /// Whatever `T::decode` reports.
    pub fn read<T: Decode>(&mut self) -> Result<T, DecodeError> {
        T::decode(self).map_err(|e| e.in_record(T::NAME))
    }

    /// Skips a `T` without allocating, attributing any error to `T`'s record name.
    ///
    /// # Errors
    /// Whatever `T::skip` reports.
    pub fn skip<T: Decode>(&mut self) -> Result<(), DecodeError> {
        T::skip(self).map_err(|e| e.in_record(T::NAME))
    }

    /// Succeeds only when every byte has been read.
    ///
    /// # Errors
    /// [`DecodeErrorKind::TrailingBytes`] when bytes are left.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            len => Err(DecodeError::new(DecodeErrorKind::TrailingBytes { len })),
        }
    }

    /// Takes the next `n` bytes as a borrowed slice.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let available = self.remaining();
        if n > available {
            return Err(DecodeError::new(DecodeErrorKind::UnexpectedEnd {
                offset: self.pos,
                needed: n,
                available,
            }));
        }
        let buf: &'a Bytes = self.buf;
        let slice = &buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    /// Takes the next `n` bytes as a zero-copy slice of the frame.
    pub(crate) fn take_bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        let start = self.pos;
        self.take(n)?;
        Ok(self.buf.slice(start..start + n))
    }

    pub(crate) fn read_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// Reads a length or count prefix: `Ok(None)` for -1, an error below -1.
    pub(crate) fn read_len(&mut self) -> Result<Option<(usize, usize)>, DecodeError> {
        let offset = self.pos;
        let len = i32::from_be_bytes(self.read_array()?);
        match usize::try_from(len) {
            Ok(len) => Ok(Some((offset, len))),
            Err(_) if len == -1 => Ok(None),
            Err(_) => Err(DecodeError::new(DecodeErrorKind::BadLength { offset, len })),
        }
    }
}
