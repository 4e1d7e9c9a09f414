//! Frames in a byte stream: the reassembler each direction's reader feeds, and what the
//! proxy logs from the frames it forwards.

use bytes::{BufMut, Bytes, BytesMut};
use zkwire::jute::{Decode, FrameDecoder, Reader};
use zkwire::proto::{OpCode, ReplyHeader, RequestHeader, SetWatches, SetWatches2};

use super::state::Stats;
use super::{Direction, MAX_LOG, MAX_PARSED_FRAME};

/// What the reader of one direction produced.
#[derive(Debug)]
pub(super) enum Piece {
    /// A whole frame's payload (without its length prefix).
    Frame(Bytes),
    /// Bytes of a stream that is not (or no longer) framed.
    Raw(Bytes),
}

/// Splits one direction's byte stream into frames, falling back to raw pass-through.
#[derive(Debug)]
pub(super) struct Framer {
    decoder: FrameDecoder,
    raw: bool,
}

impl Framer {
    pub(super) fn new() -> Self {
        Self {
            decoder: FrameDecoder::new(MAX_PARSED_FRAME),
            raw: false,
        }
    }

    pub(super) fn push(&mut self, data: &[u8]) -> Vec<Piece> {
        if self.raw {
            return vec![Piece::Raw(Bytes::copy_from_slice(data))];
        }
        self.decoder.push(data);
        let mut pieces = Vec::new();
        loop {
            match self.decoder.next_frame() {
                Ok(Some(payload)) => pieces.push(Piece::Frame(payload)),
                Ok(None) => break,
                Err(_) => {
                    // The decoder keeps the offending prefix buffered: pass it on verbatim.
                    self.raw = true;
                    pieces.push(Piece::Raw(self.decoder.buffer_mut().split().freeze()));
                    break;
                }
            }
        }
        pieces
    }
}

/// The wire bytes of a frame: its length prefix, then its payload.
pub(super) fn with_prefix(payload: &Bytes) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + payload.len());
    // Payloads are at most MAX_PARSED_FRAME, so the length fits.
    out.put_u32(u32::try_from(payload.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(payload);
    out.freeze()
}

pub(super) fn decode_prefix<T: Decode>(payload: &Bytes) -> Option<T> {
    Reader::new(payload).read::<T>().ok()
}

/// The total bytes of the paths in a SetWatches (`op` 101) or SetWatches2 (105) body.
pub(super) fn set_watches_path_bytes(op: OpCode, body: &Bytes) -> Option<usize> {
    let total = |lists: &[&Vec<String>]| lists.iter().flat_map(|l| l.iter()).map(String::len).sum();
    match op {
        OpCode::SetWatches => {
            let w = SetWatches::decode_exact(body).ok()?;
            Some(total(&[
                &w.data_watches,
                &w.exist_watches,
                &w.child_watches,
            ]))
        }
        OpCode::SetWatches2 => {
            let w = SetWatches2::decode_exact(body).ok()?;
            Some(total(&[
                &w.data_watches,
                &w.exist_watches,
                &w.child_watches,
                &w.persistent_watches,
                &w.persistent_recursive_watches,
            ]))
        }
        _ => None,
    }
}

impl Stats {
    pub(super) fn log_client(&mut self, header: Option<&RequestHeader>, payload: &Bytes) {
        self.frames[Direction::ClientToServer.index()] += 1;
        if let Some(h) = header {
            let op = h.op.as_i32();
            *self.requests.entry(op).or_default() += 1;
            let max = self.max_len.entry(op).or_default();
            *max = (*max).max(payload.len());
            if matches!(h.op, OpCode::SetWatches | OpCode::SetWatches2) {
                self.log_set_watches(h.op, payload);
            }
        }
        if self.client_frames.len() < MAX_LOG {
            self.client_frames.push((header.cloned(), payload.len()));
        }
    }

    pub(super) fn log_set_watches(&mut self, op: OpCode, payload: &Bytes) {
        let body = payload.slice(payload.len().min(8)..);
        match set_watches_path_bytes(op, &body) {
            Some(n) if self.set_watches_path_bytes.len() < MAX_LOG => {
                self.set_watches_path_bytes.push(n)
            }
            Some(_) => {}
            None => self.counts.undecodable_set_watches += 1,
        }
    }

    pub(super) fn log_server(&mut self, header: Option<ReplyHeader>, payload: &Bytes) {
        self.frames[Direction::ServerToClient.index()] += 1;
        if self.server_frames.len() < MAX_LOG {
            self.server_frames.push((header, payload.len()));
        }
    }
}
