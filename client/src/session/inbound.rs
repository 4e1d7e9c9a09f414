//! Frames in: decoding what the server sends, matching replies to requests in flight,
//! applying their effects (watch registrations) and handing out notifications.

use std::time::Instant;

use bytes::Bytes;

use super::pending::{Pending, Target};
use super::{
    reply, Conn, DropReason, Effect, Event, Reply, Session, SessionState, WatchKind, WatchedEvent,
};
use crate::error::{Error, ProtocolError};
use crate::jute::{Decode, FrameError, Reader};
use crate::proto::{
    ConnectResponse, ErrorCode, KeeperState, OpCode, ReplyHeader, WatcherEvent, AUTH_XID,
    NOTIFICATION_XID,
};

/// A reply header's length: xid (4), zxid (8), err (4).
const REPLY_HEADER_LEN: usize = 16;

/// Whether a reply header's bytes name `xid`, without an error.
fn reply_header_names(header: &[u8], xid: i32) -> bool {
    let int = |at: usize| header.get(at..at + 4).and_then(|b| b.try_into().ok());
    int(0).map(i32::from_be_bytes) == Some(xid) && int(12).map(i32::from_be_bytes) == Some(0)
}

/// What becomes of a frame announced over the limit ([`Session::oversized_reply`]).
enum Oversized {
    /// The oldest request's reply: it failed, and the frame is being thrown away.
    Skipped,
    /// Its header has not come yet.
    Unknown,
    /// Not a reply we can place: the connection goes.
    Refused,
}

impl Session {
    /// Bytes received from the transport (the driver reads into the decoder's buffer instead).
    #[cfg(any(test, feature = "unstable"))]
    pub fn handle_input(&mut self, now: Instant, data: &[u8]) {
        self.decoder.push(data);
        self.handle_received(now);
    }

    /// Processes bytes placed in [`recv_buffer`](Self::recv_buffer).
    pub fn handle_received(&mut self, now: Instant) {
        if self.conn == Conn::Idle {
            self.decoder.clear();
            return;
        }
        self.timers.on_receive(now);
        loop {
            let frame = match self.decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => return,
                Err(FrameError::TooLong { len, max }) => match self.oversized_reply(len, max) {
                    Oversized::Skipped => continue,
                    Oversized::Unknown => return,
                    Oversized::Refused => {
                        let e = FrameError::TooLong { len, max };
                        return self.drop_connection(DropReason::Protocol(e.into()));
                    }
                },
                Err(e) => return self.drop_connection(DropReason::Protocol(e.into())),
            };
            if let Err(e) = self.handle_frame(now, frame) {
                return self.drop_connection(DropReason::Protocol(e));
            }
            if self.conn == Conn::Idle {
                return;
            }
        }
    }

    /// A frame announced over the limit, while open, is the reply to the oldest request:
    /// replies come in order, and nothing else a server sends comes near the limit. That
    /// request would get the same reply again, so it is told so (`ReplyTooLarge`, not a
    /// `ConnectionLoss`, which a caller would retry for ever). When the frame's header names
    /// that request (and no error), the frame is thrown away as it comes and the connection
    /// goes on: the other requests in flight lose nothing. Otherwise the stream is not what
    /// it claims, and the connection is dropped. The rule reads only the protocol (the
    /// stateful fuzz target's model applies it on its own).
    fn oversized_reply(&mut self, len: usize, max: usize) -> Oversized {
        let head = self.pending.front().filter(|p| {
            self.conn == Conn::Open && !matches!(p.op, OpCode::CloseSession | OpCode::Ping)
        });
        let Some(head_xid) = head.map(|p| p.xid) else {
            return Oversized::Refused;
        };
        let Some(start) = self.decoder.payload_start(REPLY_HEADER_LEN) else {
            return Oversized::Unknown;
        };
        let answers_head = reply_header_names(start, head_xid);
        if answers_head {
            self.decoder.skip_frame();
        }
        if let Some(id) = self.pending.pop_front().and_then(|p| p.waiting_id()) {
            self.answer(id, Err(Error::ReplyTooLarge { len, max }));
        }
        if answers_head {
            Oversized::Skipped
        } else {
            Oversized::Refused
        }
    }

    pub(super) fn handle_frame(&mut self, now: Instant, frame: Bytes) -> Result<(), ProtocolError> {
        if self.conn == Conn::AwaitingConnectResponse {
            let response = ConnectResponse::decode_exact(&frame)?;
            self.handle_connect_response(now, response);
            return Ok(());
        }
        let mut r = Reader::new(&frame);
        let header = r.read::<ReplyHeader>()?;
        let body = frame.slice(r.position()..);
        match header.xid {
            NOTIFICATION_XID => self.handle_notification(header, &body),
            AUTH_XID => self.handle_auth_reply(header),
            _ => self.handle_pipeline_reply(now, header, body),
        }
    }

    pub(super) fn handle_notification(
        &mut self,
        header: ReplyHeader,
        body: &Bytes,
    ) -> Result<(), ProtocolError> {
        let mut event = WatcherEvent::decode_exact(body)?;
        // Servers only ever send SyncConnected here; the other states are client-local. Any
        // other state comes from a broken or hostile server: ignore the notification, as one
        // of an unknown type, rather than hand watchers a state that ends them (a persistent
        // watch's stream ends on a non-SyncConnected event).
        if event.state != KeeperState::SyncConnected {
            return Ok(());
        }
        let mut fired = self.watches.fire(event.event_type, &event.path).into_iter();
        while let Some(watcher) = fired.next() {
            // The last watcher takes the path: one watcher, the common case, copies nothing.
            let path = if fired.len() == 0 {
                std::mem::take(&mut event.path)
            } else {
                event.path.clone()
            };
            let event = WatchedEvent {
                event_type: event.event_type,
                state: event.state,
                path,
                zxid: header.zxid,
            };
            self.events.push_back(Event::Watch { watcher, event });
        }
        Ok(())
    }

    pub(super) fn handle_auth_reply(&mut self, header: ReplyHeader) -> Result<(), ProtocolError> {
        let auth = self
            .pending_auth
            .pop_front()
            .ok_or(ProtocolError::UnexpectedAuthReply)?;
        if header.err == ErrorCode::AuthFailed {
            if let Some(id) = auth.id {
                self.answer(id, Err(Error::AuthFailed));
            }
            self.end(SessionState::AuthFailed, Error::AuthFailed);
            return Ok(());
        }
        let result = reply_result(header, Bytes::new());
        if result.is_ok() && auth.replay && !self.auths.contains(&auth.body) {
            // Replayed on every reconnect, before anything else; once each, however often
            // the same credential was added. Copied: the encoded body is a slice of a
            // larger buffer, which it would otherwise keep for the session's life.
            self.auths.push(Bytes::copy_from_slice(&auth.body));
        }
        if let Some(id) = auth.id {
            self.answer(id, result);
        }
        Ok(())
    }

    pub(super) fn handle_pipeline_reply(
        &mut self,
        now: Instant,
        header: ReplyHeader,
        body: Bytes,
    ) -> Result<(), ProtocolError> {
        let expected = self.pending.front().map(|p| (p.xid, p.op));
        let op = match expected {
            Some((xid, op)) if xid == header.xid => op,
            _ => {
                return Err(ProtocolError::XidMismatch {
                    expected: expected.map(|e| e.0),
                    got: header.xid,
                })
            }
        };
        // Checked while the request is still in flight, so that a malformed reply fails it
        // with ConnectionLoss along with everything else when the connection drops.
        if header.err == ErrorCode::Ok {
            reply::check_reply_body(op, &body)?;
        }
        let Some(pending) = self.pending.pop_front() else {
            return Err(ProtocolError::XidMismatch {
                expected: None,
                got: header.xid,
            });
        };
        if header.zxid > 0 && pending.op != OpCode::Ping {
            self.last_zxid = self.last_zxid.max(header.zxid);
        }
        self.note_answer(now, &pending, header.err);
        if header.err == ErrorCode::SessionClosedRequireSaslAuth
            && !matches!(pending.target, Target::Sasl)
        {
            // The server requires SASL and closes the connection: no request of this session
            // can succeed without it, on any connection.
            tracing::warn!("the server requires SASL authentication");
            if let Some(id) = pending.waiting_id() {
                self.answer(id, Err(Error::SessionClosedRequireSaslAuth));
            }
            self.end(
                SessionState::AuthFailed,
                Error::SessionClosedRequireSaslAuth,
            );
            return Ok(());
        }
        match pending.target {
            Target::Ping => self.timers.on_ping_reply(),
            Target::Vouch => self.lease.on_vouch_done(),
            Target::SetWatches => {}
            Target::Sasl => self.handle_sasl_reply(now, header, &body),
            Target::User {
                id,
                effect,
                abandoned,
                ..
            } => {
                let result = reply_result(header, body);
                // A removal the server applied stands, whoever still waits for its answer:
                // the local watchers must go with the server's watches. A read's watch is
                // registered only for a caller still there to take it.
                let removal = matches!(effect, Effect::RemoveWatches { .. });
                if !abandoned || removal {
                    self.apply_effect(pending.op, &effect, &result);
                }
                if !abandoned {
                    self.answer(id, result);
                }
                if pending.op == OpCode::CloseSession {
                    self.end(SessionState::Closed, Error::Closed);
                }
            }
        }
        Ok(())
    }

    pub(super) fn apply_effect(
        &mut self,
        op: OpCode,
        effect: &Effect,
        result: &Result<Reply, Error>,
    ) {
        match (effect, result) {
            (
                Effect::Watch {
                    path,
                    kind,
                    watcher,
                },
                Ok(_),
            ) => self.watches.add(path, *kind, *watcher),
            // exists on a missing node leaves an exist watch (DataTree.statNode).
            (Effect::Watch { path, watcher, .. }, Err(Error::NoNode)) if op == OpCode::Exists => {
                self.watches.add(path, WatchKind::Exist, *watcher);
            }
            (Effect::RemoveWatches { path, watcher_type }, Ok(_)) => {
                for (watcher, event_type) in self.watches.remove_matching(path, *watcher_type) {
                    let event = WatchedEvent {
                        event_type,
                        state: KeeperState::SyncConnected,
                        path: path.clone(),
                        zxid: -1,
                    };
                    self.events.push_back(Event::Watch { watcher, event });
                }
            }
            _ => {}
        }
    }

    /// What an answer tells about the session's pings and lease. Answers come in order, so
    /// the server read this request, and recorded the session as alive, no sooner than we
    /// sent it; SASL steps (like auth packets) are handled outside that path. The pings are
    /// paced from any server's answers (a read-only one too, or the first answered ping would
    /// leave the next one due at once, and every later one); the lease only from a read/write
    /// server's, as a read-only server's record is not the quorum's.
    pub(super) fn note_answer(&mut self, now: Instant, pending: &Pending, err: ErrorCode) {
        if matches!(pending.target, Target::Sasl) {
            return;
        }
        self.timers.acknowledge(pending.sent);
        if self.state == SessionState::ConnectedReadOnly {
            return;
        }
        self.lease.touched(pending.sent, now, self.periods.timeout);
        if err == ErrorCode::Ok && vouches(pending.op) {
            self.lease.vouched_by(pending.sent);
        }
    }
}

pub(super) fn reply_result(header: ReplyHeader, body: Bytes) -> Result<Reply, Error> {
    match header.err {
        ErrorCode::Ok => Ok(Reply {
            zxid: header.zxid,
            body,
        }),
        code => Err(Error::from_code(code)),
    }
}

/// Whether a successful answer to `op` shows that the quorum's leader handled the request
/// after we sent it: a `sync` is answered only once the leader has, and a write only once a
/// quorum has committed what the leader made of it (docs/lease.md).
pub(super) fn vouches(op: OpCode) -> bool {
    matches!(
        op,
        OpCode::Sync
            | OpCode::Create
            | OpCode::Create2
            | OpCode::CreateContainer
            | OpCode::CreateTtl
            | OpCode::Delete
            | OpCode::SetData
            | OpCode::SetAcl
            | OpCode::Multi
    )
}
