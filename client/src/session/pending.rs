//! Requests in the session's hands: queued (not written) and in flight (written, FIFO).

use std::time::Instant;

use bytes::Bytes;

use super::types::{Effect, Request, RequestId};
use crate::proto::OpCode;

/// A submitted request not yet written.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) id: RequestId,
    pub(crate) request: Request,
}

/// A written request awaiting its reply. Replies come back in write order, so these form a
/// FIFO checked against each reply's xid.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) xid: i32,
    pub(crate) op: OpCode,
    pub(crate) target: Target,
    /// When it was written: its reply proves the server heard us no sooner than this.
    pub(crate) sent: Instant,
}

/// Who is waiting for a reply.
#[derive(Debug)]
pub(crate) enum Target {
    /// A ping (xid -2): keeps the session alive.
    Ping,
    /// A `sync` of our own, for the lease (docs/lease.md).
    Vouch,
    /// A SetWatches batch restoring watches after a reconnect.
    SetWatches,
    /// A step of the SASL exchange.
    Sasl,
    /// A caller.
    User {
        id: RequestId,
        effect: Effect,
        /// The caller got its answer already (timeout) or left (cancel); the reply, when it
        /// comes, only keeps the FIFO in step.
        abandoned: bool,
    },
}

impl Pending {
    /// The caller still waiting, if any.
    pub(crate) fn waiting_id(&self) -> Option<RequestId> {
        match self.target {
            Target::User {
                id,
                abandoned: false,
                ..
            } => Some(id),
            _ => None,
        }
    }

    /// Stops waiting for `id`; returns whether this entry was it.
    pub(crate) fn abandon(&mut self, id: RequestId) -> bool {
        match &mut self.target {
            Target::User {
                id: mine,
                abandoned,
                ..
            } if *mine == id && !*abandoned => {
                *abandoned = true;
                true
            }
            _ => false,
        }
    }
}

/// An auth packet in flight. Its reply is sent inline by the server and may overtake
/// pipeline replies, so auth packets are matched in their own FIFO.
#[derive(Debug)]
pub(crate) struct PendingAuth {
    /// The caller waiting, `None` for a replay or a caller who left (a request's deadline
    /// holds for auth like for any other request).
    pub(crate) id: Option<RequestId>,
    /// The encoded AuthPacket, kept to replay on every reconnect once accepted.
    pub(crate) body: Bytes,
    /// Whether to remember the credential for replay when the server accepts it.
    pub(crate) replay: bool,
    /// When it was written (for the read timeout; an auth reply never renews the lease).
    pub(crate) sent: Instant,
}

impl PendingAuth {
    /// Stops waiting for `id`; returns whether this entry was it.
    pub(crate) fn abandon(&mut self, id: RequestId) -> bool {
        if self.id == Some(id) {
            self.id = None;
            return true;
        }
        false
    }
}

/// Xids for pipeline requests: `1..=i32::MAX`, wrapping to 1, never 0 or a reserved
/// negative value.
#[derive(Debug)]
pub(crate) struct Xids {
    next: i32,
}

impl Default for Xids {
    fn default() -> Self {
        Self { next: 1 }
    }
}

impl Xids {
    #[cfg(any(test, fuzzing, feature = "fuzzing"))]
    pub(crate) fn starting_at(next: i32) -> Self {
        Self { next: next.max(1) }
    }

    pub(crate) fn next(&mut self) -> i32 {
        let xid = self.next;
        self.next = if xid == i32::MAX { 1 } else { xid + 1 };
        xid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xids_wrap_to_one() {
        let mut x = Xids::starting_at(i32::MAX - 1);
        assert_eq!([x.next(), x.next(), x.next()], [i32::MAX - 1, i32::MAX, 1]);
    }
}
