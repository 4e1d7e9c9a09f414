//! Frames out and the clock: writing queued requests once the connection is open, and what
//! falls due (request deadlines, connect and read timeouts, pings, the lease's `sync`).

use std::time::Instant;


use super::pending::{Pending, PendingAuth, Queued, Target};
use super::{Conn, DropReason, Session, SessionState};
use crate::error::Error;
use crate::jute::{encode_frame, Encode};
use crate::proto::{OpCode, RequestHeader, SyncRequest, AUTH_XID, PING_XID};

impl Session {
    pub(super) fn flush(&mut self, now: Instant) {
        if self.conn != Conn::Open {
            return;
        }
        while let Some(Queued { id, request }) = self.queued.pop_front() {
            // A driver may handle input (e.g. the ConnectResponse) before a timer that is
            // already due: a request whose deadline passed must still never be written.
            if request.deadline.is_some_and(|d| d <= now) {
                self.answer(id, Err(Error::Timeout));
                continue;
            }
            // Meant for a session that another has replaced (docs/renewal.md).
            if request.session.is_some_and(|s| s != self.session_id) {
                self.answer(id, Err(Error::SessionExpired));
                continue;
            }
            if request.op == OpCode::Auth {
                let auth = PendingAuth {
                    id: Some(id),
                    body: request.body,
                    replay: true,
                    sent: now,
                };
                self.send_auth(auth);
                continue;
            }
            let xid = self.xids.next();
            let target = Target::User {
                id,
                effect: request.effect,
                abandoned: false,
            };
            self.send(now, xid, request.op, &request.body, target);
        }
    }

    pub(super) fn write_frame(&mut self, xid: i32, op: OpCode, body: &[u8]) {
        // One reservation per frame (length, header, body), not one per put.
        self.transmit.reserve(12 + body.len());
        encode_frame(&mut self.transmit, |buf| {
            RequestHeader { xid, op }.encode(buf);
            buf.extend_from_slice(body);
        });
    }

    /// Writes a request and puts it in the FIFO of those awaiting a reply, stamped `now`:
    /// every frame whose reply is matched by xid is written here, so none goes out without
    /// its entry. Inlined: a user request's path would otherwise move its target twice.
    #[inline]
    pub(super) fn send(&mut self, now: Instant, xid: i32, op: OpCode, body: &[u8], target: Target) {
        self.write_frame(xid, op, body);
        self.pending.push_back(Pending { xid, op, target, sent: now });
    }

    /// Writes an `auth` packet and puts it in the FIFO of its own: auth replies carry a
    /// fixed xid, may overtake earlier replies, and are matched by order among themselves
    /// (docs/protocol.md §3).
    pub(super) fn send_auth(&mut self, auth: PendingAuth) {
        self.write_frame(AUTH_XID, OpCode::Auth, &auth.body);
        self.pending_auth.push_back(auth);
    }

    /// Fires due timers: request deadlines, connect and read timeouts, pings, expiry.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire_deadlines(now);
        match self.conn {
            Conn::Idle => {
                if self
                    .timers
                    .expiry_at(self.negotiated, self.session_id)
                    .is_some_and(|t| t <= now)
                    && !self.state.is_terminal()
                {
                    self.expire();
                }
            }
            Conn::AwaitingConnectResponse => {
                let deadline = self.timers.connect_deadline(self.connect_timeout());
                if deadline.is_some_and(|d| d <= now) {
                    self.drop_connection(DropReason::ConnectTimeout);
                }
            }
            Conn::Authenticating { .. } => {
                let read_deadline = self
                    .timers
                    .read_deadline(&self.periods, self.oldest_unanswered());
                if read_deadline.is_some_and(|d| d <= now) {
                    self.drop_connection(DropReason::ReadTimeout);
                }
            }
            Conn::Open => self.handle_open_timers(now),
        }
    }

    pub(super) fn handle_open_timers(&mut self, now: Instant) {
        let read_deadline = self
            .timers
            .read_deadline(&self.periods, self.oldest_unanswered());
        if read_deadline.is_some_and(|d| d <= now) {
            self.drop_connection(DropReason::ReadTimeout);
        } else if self.timers.ping_at(&self.periods).is_some_and(|d| d <= now) {
            self.send(now, PING_XID, OpCode::Ping, &[], Target::Ping);
            self.timers.on_ping_sent();
        } else if self.vouch_at().is_some_and(|d| d <= now) {
            self.write_vouch(now);
        }
    }

    /// When our next `sync` is due, on a connection to a read/write server.
    pub(super) fn vouch_at(&self) -> Option<Instant> {
        if self.state != SessionState::Connected {
            return None;
        }
        self.lease.vouch_at(self.periods.vouch)
    }

    /// Sends a `sync` of the root: the leader answers it only while the server we talk to
    /// follows it, which vouches for our earlier requests (docs/lease.md).
    pub(super) fn write_vouch(&mut self, now: Instant) {
        let body = SyncRequest {
            path: "/".to_owned(),
        }
        .to_bytes();
        let xid = self.xids.next();
        self.send(now, xid, OpCode::Sync, &body, Target::Vouch);
        self.lease.on_vouch_sent(now);
    }

    pub(super) fn expire_deadlines(&mut self, now: Instant) {
        while let Some(id) = self.deadlines.pop_due(now) {
            if let Some(at) = self.queued.iter().position(|q| q.id == id) {
                self.queued.remove(at);
            } else {
                // Written: the reply, when it comes, only keeps the FIFO in step.
                let _ = self.pending.iter_mut().any(|p| p.abandon(id))
                    || self.pending_auth.iter_mut().any(|p| p.abandon(id));
            }
            self.answer(id, Err(Error::Timeout));
        }
    }
}
