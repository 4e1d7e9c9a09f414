//! Request and reply headers, and the reserved xids.

use super::{ErrorCode, OpCode};
use crate::jute::record;

/// The xid of a watch notification (server to client only).
pub const NOTIFICATION_XID: i32 = -1;
/// The xid of a ping and of its reply. At most one ping can be told apart at a time.
pub const PING_XID: i32 = -2;
/// The xid of an auth packet and of its reply, which the server sends inline and so may
/// overtake replies to earlier requests.
pub const AUTH_XID: i32 = -4;
/// The xid the C client uses for SetWatches; the server echoes whatever it receives.
#[cfg(any(test, feature = "unstable"))]
pub const SET_WATCHES_XID: i32 = -8;

record! {
    /// Precedes every request after the handshake.
    ///
    /// ```text
    /// class RequestHeader { int xid; int type; }
    /// ```
    pub struct RequestHeader as "RequestHeader" {
        /// Matches the reply to the request; user requests use `1..=i32::MAX`.
        pub xid: i32,
        /// The operation.
        pub op: OpCode,
    }
}

record! {
    /// Precedes every frame from the server after the handshake.
    ///
    /// ```text
    /// class ReplyHeader { int xid; long zxid; int err; }
    /// ```
    /// When `err` is not [`ErrorCode::Ok`] no reply record follows.
    pub struct ReplyHeader as "ReplyHeader" {
        /// The request's xid, or a reserved xid (notification, ping, auth).
        pub xid: i32,
        /// The server's last processed zxid (-1 in notifications before 3.9).
        pub zxid: i64,
        /// The outcome.
        pub err: ErrorCode,
    }
}
