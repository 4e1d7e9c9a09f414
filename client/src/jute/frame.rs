//! Length-prefixed frames: `int32 len | payload[len]`, sans-IO.

use bytes::{Buf, Bytes, BytesMut};

/// ZooKeeper's default `jute.maxbuffer`: the largest request payload a server accepts, and
/// the largest znode payload.
pub const JUTE_MAX_BUFFER: usize = 0xfffff;

/// The default cap on an inbound frame's payload: [`JUTE_MAX_BUFFER`] plus room for the reply
/// header and record fields around it.
pub const DEFAULT_MAX_FRAME_LEN: usize = JUTE_MAX_BUFFER + 1024;

/// Splits a byte stream into frames.
///
/// Bytes may be pushed in any chunking; [`next_frame`](Self::next_frame) hands out each whole
/// payload (without its 4-byte length) as a zero-copy [`Bytes`]. A length that is negative or
/// above the cap is rejected before anything is allocated for it: the caller either skips
/// that frame ([`skip_frame`](Self::skip_frame), when it can tell whose it is) or drops the
/// connection ([`clear`](Self::clear) before reusing the decoder).
///
/// The decoder owns its receive buffer, so a driver can read from its socket straight into
/// [`buffer_mut`](Self::buffer_mut) and reuse the same allocation for the life of the
/// connection; a frame over 64 KiB takes the allocation it was read into with it, so one
/// large reply does not pin its size in the buffer.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame_len: usize,
    /// Bytes of a refused frame still to be thrown away ([`skip_frame`](Self::skip_frame)).
    skipping: usize,
}

/// A frame length that cannot be accepted: the frame is skipped as it comes when it is the
/// reply to the oldest request, which fails with
/// [`Error::ReplyTooLarge`](crate::Error::ReplyTooLarge); otherwise the connection is dropped.
///
/// ```
/// # fn report(error: &zkwire::Error) {
/// use zkwire::Error;
///
/// if let Error::ReplyTooLarge { len, max } = error {
///     eprintln!("a {len}-byte reply exceeds {max}: raise `ClientBuilder::with_max_frame_len`");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix is negative.
    #[error("negative frame length {0}")]
    NegativeLength(i32),
    /// The length prefix exceeds the configured cap.
    #[error("frame length {len} exceeds the maximum of {max} bytes")]
    TooLong {
        /// The length announced.
        len: usize,
        /// The cap in force.
        max: usize,
    },
}

impl FrameDecoder {
    /// A decoder accepting payloads of up to `max_frame_len` bytes.
    pub fn new(max_frame_len: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max_frame_len,
            skipping: 0,
        }
    }

    /// The payload cap in force.
    #[cfg(any(test, feature = "unstable"))]
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Appends received bytes.
    #[cfg(any(test, feature = "unstable"))]
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The receive buffer, for reading from a socket into it directly.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes received but not yet handed out as frames.
    #[cfg(any(test, feature = "unstable"))]
    pub fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    /// Drops any partial frame, as when a connection ends.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.skipping = 0;
    }

    /// The first `n` bytes of the next frame's payload, once they are here: what a refused
    /// frame ([`FrameError::TooLong`]) begins with, to tell whose it is.
    pub fn payload_start(&self, n: usize) -> Option<&[u8]> {
        self.buf.get(4..4 + n)
    }

    /// Throws away the next frame, whose length was refused ([`FrameError::TooLong`]), as
    /// its bytes come, without holding them: the stream stays framed, and
    /// [`next_frame`](Self::next_frame) hands out the frame after it. Nothing without a
    /// length prefix buffered.
    pub fn skip_frame(&mut self) {
        let Some(&[a, b, c, d]) = self.buf.get(..4) else {
            return;
        };
        self.buf.advance(4);
        self.skipping = usize::try_from(u32::from_be_bytes([a, b, c, d])).unwrap_or(usize::MAX);
        self.discard_skipped();
    }

    /// Throws away what is buffered of a frame being skipped; whether any of it is left.
    fn discard_skipped(&mut self) -> bool {
        let n = self.skipping.min(self.buf.len());
        self.buf.advance(n);
        self.skipping -= n;
        self.skipping > 0
    }

    /// The next whole frame's payload, `Ok(None)` if more bytes are needed.
    ///
    /// # Errors
    /// [`FrameError`] when the next length prefix is negative or above the cap. The error
    /// repeats until [`clear`](Self::clear) is called.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.skipping > 0 && self.discard_skipped() {
            return Ok(None);
        }
        let Some(len) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        let len = usize::try_from(len).map_err(|_| FrameError::NegativeLength(len))?;
        if len > self.max_frame_len {
            return Err(FrameError::TooLong {
                len,
                max: self.max_frame_len,
            });
        }
        if self.buf.len() < 4 + len {
            // Make room for the rest of this frame in one step; the cap bounds the reservation.
            self.buf.reserve(4 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        let frame = self.buf.split_to(len).freeze();
        if len > LARGE_FRAME {
            // What follows the frame goes to a buffer of its own, so that the large
            // allocation is freed with the frame rather than reclaimed for every later read:
            // one large reply would otherwise pin up to the frame cap for the connection's
            // life.
            self.buf = BytesMut::from(&self.buf[..]);
        }
        Ok(Some(frame))
    }
}

/// A frame above this size is read into an allocation the decoder lets go of with the frame
/// ([`FrameDecoder::next_frame`]); the driver's reads themselves never ask for more room.
const LARGE_FRAME: usize = 64 * 1024;

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_LEN)
    }
}

/// Appends one frame to `out`: a 4-byte length, then whatever `write` puts after it.
///
/// Returns the payload length. The caller checks it against the peer's limit; a payload over
/// `i32::MAX` bytes gets a saturated prefix and must not be sent.
pub fn encode_frame(out: &mut BytesMut, write: impl FnOnce(&mut BytesMut)) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    write(out);
    let len = out.len() - start - 4;
    let prefix = i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes();
    out[start..start + 4].copy_from_slice(&prefix);
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(decoder: &mut FrameDecoder) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(frame) = decoder.next_frame().unwrap() {
            out.push(frame);
        }
        out
    }

    #[test]
    fn read_single_frame_one_byte_at_a_time() {
        let mut d = FrameDecoder::default();
        for b in [0, 0, 0, 3, b'a', b'b'] {
            d.push(&[b]);
            assert_eq!(d.next_frame(), Ok(None));
        }
        d.push(b"c");
        assert_eq!(d.next_frame(), Ok(Some(Bytes::from_static(b"abc"))));
        assert_eq!(d.buffered_len(), 0);
    }

    /// A refused frame is skipped as its bytes come, in any chunking, and the frame after
    /// it comes out whole; nothing of the skipped one is kept.
    #[test]
    fn a_refused_frame_is_skipped_and_the_next_one_read() {
        let mut d = FrameDecoder::new(8);
        let mut wire = 20_i32.to_be_bytes().to_vec();
        wire.extend_from_slice(&[7; 20]);
        wire.extend_from_slice(&[0, 0, 0, 2, b'o', b'k']);
        d.push(&wire[..6]);
        assert_eq!(d.next_frame(), Err(FrameError::TooLong { len: 20, max: 8 }));
        assert_eq!(d.payload_start(2), Some(&[7, 7][..]));
        assert_eq!(d.payload_start(3), None, "two bytes of it are here");
        d.skip_frame();
        assert_eq!(d.buffered_len(), 0);
        for chunk in wire[6..].chunks(5) {
            d.push(chunk);
            if let Some(frame) = d.next_frame().unwrap() {
                assert_eq!(frame, Bytes::from_static(b"ok"));
                assert_eq!(d.buffered_len(), 0);
                return;
            }
            assert!(d.buffered_len() <= 4, "skipped bytes are not kept");
        }
        panic!("the frame after the skipped one never came");
    }

    /// The allocation a large frame was read into goes with the frame: the buffer cannot
    /// take it back once the frame is dropped, while after a small frame it can.
    #[test]
    fn a_large_frame_leaves_no_large_buffer_behind() {
        for (len, kept) in [(100, true), (LARGE_FRAME + 1, false), (JUTE_MAX_BUFFER, false)] {
            let mut d = FrameDecoder::default();
            let wire = i32::try_from(len).unwrap().to_be_bytes();
            d.push(&wire);
            assert_eq!(d.next_frame(), Ok(None));
            d.push(&vec![7; len]);
            d.push(&[0, 0]);
            let frame = d.next_frame().unwrap().unwrap();
            assert_eq!(frame.len(), len);
            drop(frame);
            assert_eq!(d.buffered_len(), 2, "the next frame's start is kept");
            assert_eq!(d.buffer_mut().try_reclaim(len), kept, "{len}");
            assert_eq!(&d.buffer_mut()[..], [0, 0]);
        }
    }

    #[test]
    fn read_many_frames_from_one_chunk() {
        let mut d = FrameDecoder::default();
        d.push(&[0, 0, 0, 1, b'x', 0, 0, 0, 0, 0, 0, 0, 2, b'y', b'z', 0]);
        assert_eq!(frames(&mut d), vec![&b"x"[..], b"", b"yz"]);
        assert_eq!(d.buffered_len(), 1);
    }

    #[test]
    fn negative_length_is_an_error() {
        let mut d = FrameDecoder::default();
        d.push(&[0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(d.next_frame(), Err(FrameError::NegativeLength(-2)));
        assert_eq!(d.next_frame(), Err(FrameError::NegativeLength(-2)));
        d.clear();
        assert_eq!(d.next_frame(), Ok(None));
    }

    #[test]
    fn oversized_length_is_rejected_before_buffering() {
        let mut d = FrameDecoder::new(16);
        d.push(&[0, 0, 0, 17]);
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLong { len: 17, max: 16 })
        );
        let mut d = FrameDecoder::default();
        d.push(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_frame(), Err(FrameError::TooLong { .. })));
        assert!(d.buffer_mut().capacity() < 1024);
    }

    #[test]
    fn encode_frame_writes_the_payload_length() {
        let mut out = BytesMut::new();
        let len = encode_frame(&mut out, |b| {
            b.extend_from_slice(&[0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11])
        });
        assert_eq!(len, 8);
        assert_eq!(&out[..], &[0, 0, 0, 8, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11]);
    }
}
