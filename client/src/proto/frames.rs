//! Whole frames, built the way a client or a server would put them on the wire.
//!
//! The session writes its own frames straight into its transmit buffer; these builders are
//! for the code that plays the other side or replays traffic — the session's unit tests, the
//! fuzz oracles, the hostile server and fault proxy in `zkwire-testing`, and the benchmarks —
//! so that each of them builds a frame the same way.

use bytes::{BufMut, Bytes, BytesMut};

use super::{ErrorCode, OpCode, ReplyHeader, RequestHeader, WatcherEvent, NOTIFICATION_XID};
use crate::jute::{encode_frame, Encode};

/// A length-prefixed frame whose payload `write` appends.
pub fn frame(write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::new();
    encode_frame(&mut out, write);
    out.freeze()
}

/// A request frame: `len | RequestHeader | body`. Pass `&()` for ops with no record.
pub fn request_frame(xid: i32, op: OpCode, body: &impl Encode) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + 8 + body.encoded_len());
    encode_frame(&mut out, |b| {
        RequestHeader { xid, op }.encode(b);
        body.encode(b);
    });
    out.freeze()
}

/// A reply frame: `len | ReplyHeader | body`, with `body` as given — encoded records, or
/// any bytes a hostile server wants to send.
pub fn reply_frame(xid: i32, zxid: i64, err: ErrorCode, body: &[u8]) -> Bytes {
    frame(|b| {
        ReplyHeader { xid, zxid, err }.encode(b);
        b.put_slice(body);
    })
}

/// A watch notification frame: a reply header with the notification xid, then `event`.
pub fn notification_frame(zxid: i64, event: &WatcherEvent) -> Bytes {
    frame(|b| {
        ReplyHeader {
            xid: NOTIFICATION_XID,
            zxid,
            err: ErrorCode::Ok,
        }
        .encode(b);
        event.encode(b);
    })
}
