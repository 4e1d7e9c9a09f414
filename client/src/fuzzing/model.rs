//! The server's side of the session target: what the session wrote, and what it must do with
//! what it reads.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::jute::{Decode, FrameDecoder, FrameError, Reader};
use crate::proto::{
    visit_reply, ConnectResponse, ErrorCode, OpCode, ReplyHeader, ReplyRecord, ReplyVisitor,
    WatcherEvent, AUTH_XID, NOTIFICATION_XID,
};

/// The connection phase, as the session's own (private) one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// No transport.
    Idle,
    /// ConnectRequest written, ConnectResponse not read yet.
    Awaiting,
    /// Handshake done.
    Open,
}

/// A model of the server end of the current transport.
///
/// It splits what the session writes into requests (the pipeline FIFO and the auth count),
/// and predicts from the protocol rules alone whether bytes delivered to the session keep the
/// connection or end it: a frame length over the cap (unless its header answers the head of
/// the FIFO: that frame is skipped), an undecodable ConnectResponse or reply
/// header or notification, a reply whose xid is not the head of the FIFO, a successful reply
/// whose record is malformed for its op, an auth reply with
/// no auth in flight, an expired ConnectResponse, an AuthFailed auth reply and the reply to
/// closeSession all end it.
#[derive(Debug)]
pub(super) struct Server {
    pub(super) phase: Phase,
    /// Mirrors the session's receive buffer.
    inbound: FrameDecoder,
    /// Splits the session's writes.
    outbound: FrameDecoder,
    /// The next frame written is the ConnectRequest.
    pub(super) expect_connect_request: bool,
    /// Pipeline requests written and not answered: (xid, op).
    pub(super) pipe: VecDeque<(i32, OpCode)>,
    /// Auth packets written and not answered.
    pub(super) auths: usize,
    /// The xid the next pipeline request must carry; `None` after requests the model could not
    /// see (written and discarded within one input that ended the connection).
    pub(super) next_xid: Option<i32>,
    /// The highest zxid of a matched, non-ping reply.
    pub(super) last_zxid: i64,
    /// Whether a read/write server has accepted the session (or it was resumed): only then
    /// does a ConnectRequest carry the session id, as the Java client's `seenRwServerBefore`.
    pub(super) seen_rw: bool,
}

impl Server {
    pub(super) fn new(max_frame_len: usize, resumed: bool) -> Self {
        Self {
            phase: Phase::Idle,
            inbound: FrameDecoder::new(max_frame_len),
            outbound: FrameDecoder::new(OUTBOUND_CAP),
            expect_connect_request: false,
            pipe: VecDeque::new(),
            auths: 0,
            next_xid: Some(1),
            last_zxid: 0,
            seen_rw: resumed,
        }
    }

    /// A new transport.
    pub(super) fn connect(&mut self) {
        self.end();
        self.phase = Phase::Awaiting;
        self.outbound.clear();
        self.expect_connect_request = true;
    }

    /// The transport is gone.
    pub(super) fn end(&mut self) {
        self.phase = Phase::Idle;
        self.inbound.clear();
        self.pipe.clear();
        self.auths = 0;
    }

    /// Splits bytes the session wrote into frames.
    ///
    /// # Panics
    /// On a frame length the session should never write, or a partial frame.
    pub(super) fn written(&mut self, bytes: &[u8]) -> Vec<Bytes> {
        self.outbound.push(bytes);
        let mut frames = Vec::new();
        loop {
            match self.outbound.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(e) => panic!("the session wrote a bad frame length: {e}"),
            }
        }
        assert_eq!(
            self.outbound.buffered_len(),
            0,
            "the session wrote a partial frame"
        );
        frames
    }

    /// Bytes reach the session; returns whether the session must end the connection.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> bool {
        if self.phase == Phase::Idle {
            self.inbound.clear();
            return false;
        }
        self.inbound.push(bytes);
        loop {
            match self.inbound.next_frame() {
                Ok(Some(frame)) if self.keeps_connection(&frame) => {}
                Ok(None) => return false,
                Err(FrameError::TooLong { .. }) => match self.oversized() {
                    Some(true) => {}
                    // Its header has not come yet.
                    None => return false,
                    Some(false) => break,
                },
                Ok(Some(_)) | Err(_) => break,
            }
        }
        self.end();
        true
    }

    /// A frame over the cap: skipped (`Some(true)`) when its header answers the head of the
    /// FIFO, a request other than a ping or closeSession, without an error; the connection
    /// ends otherwise (`Some(false)`); `None` until the header is there.
    fn oversized(&mut self) -> Option<bool> {
        let head = self.pipe.front().copied();
        let Some((xid, op)) = head.filter(|_| self.phase == Phase::Open) else {
            return Some(false);
        };
        if matches!(op, OpCode::Ping | OpCode::CloseSession) {
            return Some(false);
        }
        let start = Bytes::copy_from_slice(self.inbound.payload_start(16)?);
        let header = Reader::new(&start).read::<ReplyHeader>();
        let answers = header.is_ok_and(|h| h.xid == xid && h.err == ErrorCode::Ok);
        if answers {
            self.inbound.skip_frame();
            self.pipe.pop_front();
        }
        Some(answers)
    }

    fn keeps_connection(&mut self, frame: &Bytes) -> bool {
        if self.phase == Phase::Awaiting {
            let Ok(response) = ConnectResponse::decode_exact(frame) else {
                return false;
            };
            if response.is_expired() {
                return false;
            }
            self.phase = Phase::Open;
            self.seen_rw |= response.read_only != Some(true);
            return true;
        }
        let mut r = Reader::new(frame);
        let Ok(header) = r.read::<ReplyHeader>() else {
            return false;
        };
        match header.xid {
            NOTIFICATION_XID => WatcherEvent::decode_exact(&frame.slice(r.position()..)).is_ok(),
            AUTH_XID if self.auths == 0 => false,
            AUTH_XID => {
                self.auths -= 1;
                header.err != ErrorCode::AuthFailed
            }
            xid => match self.pipe.front() {
                Some(&(head, op)) if head == xid => {
                    let body = frame.slice(r.position()..);
                    if header.err == ErrorCode::Ok && !reply_record_is_valid(op, &body) {
                        return false;
                    }
                    self.pipe.pop_front();
                    if header.zxid > 0 && op != OpCode::Ping {
                        self.last_zxid = self.last_zxid.max(header.zxid);
                    }
                    op != OpCode::CloseSession
                }
                _ => false,
            },
        }
    }
}

/// Whether `body` is one whole, well-formed reply record for `op` (an empty body for ops
/// whose reply has none): a successful reply breaking this rule ends the connection. Checked
/// with a full decode of the record the table of operations names, independently of the
/// session's allocation-free check.
fn reply_record_is_valid(op: OpCode, body: &Bytes) -> bool {
    visit_reply(op, Decodes(body))
}

/// Whether the body decodes as exactly one record of the visited type.
struct Decodes<'a>(&'a Bytes);

impl ReplyVisitor for Decodes<'_> {
    type Output = bool;

    fn record<T: ReplyRecord>(self) -> bool {
        T::decode_exact(self.0).is_ok()
    }

    fn unknown(self) -> bool {
        true
    }
}

/// The most a session writes in one frame (SetWatches batches can exceed `jute.maxbuffer`
/// with one long path): far above anything this target builds.
const OUTBOUND_CAP: usize = 16 << 20;
