//! The session's life past its connections: a connection lost or dropped, and the session
//! expired, renewed, or ended for good.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use super::pending::Queued;
use super::{Closing, Conn, DropReason, Event, Reply, Session, SessionState, WatchedEvent};
use crate::error::Error;
use crate::proto::{EventType, KeeperState, OpCode, NEW_SESSION_PASSWD};

impl Session {
    /// The transport closed or failed.
    pub fn handle_disconnected(&mut self, _now: Instant) {
        self.lose_connection();
    }

    /// Why a new request would be refused, if it would.
    pub(super) fn refusal(&self) -> Option<Error> {
        match self.state {
            SessionState::Expired => Some(Error::SessionExpired),
            SessionState::AuthFailed => Some(Error::AuthFailed),
            SessionState::Closed => Some(Error::Closed),
            _ if self.closing.is_some() => Some(Error::Closed),
            _ => None,
        }
    }

    /// Drops the current connection on the session's own initiative.
    pub(super) fn drop_connection(&mut self, reason: DropReason) {
        self.conn_to_idle(Some(reason));
        self.after_connection_lost();
    }

    /// The transport went away under us.
    pub(super) fn lose_connection(&mut self) {
        if self.conn == Conn::Idle {
            return;
        }
        self.conn_to_idle(None);
        self.after_connection_lost();
    }

    pub(super) fn conn_to_idle(&mut self, reason: Option<DropReason>) {
        if self.conn == Conn::Idle {
            return;
        }
        self.conn = Conn::Idle;
        self.sasl = None;
        self.decoder.clear();
        self.transmit.clear();
        self.fail_in_flight(&Error::ConnectionLoss);
        if let Some(reason) = reason {
            self.events.push_back(Event::DropConnection(reason));
        }
    }

    pub(super) fn after_connection_lost(&mut self) {
        if let Some(closing) = self.closing {
            // The server closes the socket right after confirming closeSession; either way
            // the session is over for us.
            self.end(SessionState::Closed, Error::Closed);
            if let Closing::CutOff(id) = closing {
                self.answer(
                    id,
                    Ok(Reply {
                        zxid: self.last_zxid,
                        body: Bytes::new(),
                    }),
                );
            }
            return;
        }
        if self.state.is_connected() {
            self.set_state(SessionState::Disconnected);
        }
        self.timers.on_disconnect();
        self.lease.on_disconnect();
    }

    pub(super) fn fail_in_flight(&mut self, err: &Error) {
        for pending in std::mem::take(&mut self.pending) {
            let Some(id) = pending.waiting_id() else {
                continue;
            };
            if pending.op == OpCode::CloseSession && *err == Error::ConnectionLoss {
                // A close cut off by the connection still ends the session, which is what
                // the caller asked for: it succeeds (answered when the session ends).
                self.closing = Some(Closing::CutOff(id));
                continue;
            }
            self.answer(id, Err(err.clone()));
        }
        for auth in std::mem::take(&mut self.pending_auth) {
            if let Some(id) = auth.id {
                self.answer(id, Err(err.clone()));
            }
        }
    }

    /// The session expired: it ends, or, when configured to renew, a new one begins.
    pub(super) fn expire(&mut self) {
        if self.config.renew_on_expiry && self.closing.is_none() {
            self.renew();
        } else {
            self.end(SessionState::Expired, Error::SessionExpired);
        }
    }

    /// Replaces an expired session with a new one (`docs/renewal.md`): what the old session
    /// sent is answered `SessionExpired`, one-shot watchers end with an `Expired` event,
    /// persistent ones get that event as a marker and stay, to be registered again on the
    /// new session with the credentials; requests not yet sent wait for it, but for those
    /// bound to the old session, answered `SessionExpired` now (no server need be
    /// reachable). The state goes `Expired`, then `Connecting`, then `Connected` with the
    /// new session's id.
    pub(super) fn renew(&mut self) {
        self.fail_in_flight(&Error::SessionExpired);
        self.fail_bound_to(self.session_id);
        let reason = if self.conn == Conn::Idle {
            None
        } else {
            Some(DropReason::SessionEnded)
        };
        self.conn_to_idle(reason);
        let marker = WatchedEvent {
            event_type: EventType::None,
            state: KeeperState::Expired,
            path: String::new(),
            zxid: -1,
        };
        let (ended, kept) = self.watches.drain_one_shot();
        for watcher in ended.into_iter().chain(kept) {
            let event = marker.clone();
            self.events.push_back(Event::Watch { watcher, event });
        }
        self.session_id = 0;
        self.passwd = Bytes::from_static(&NEW_SESSION_PASSWD);
        self.set_negotiated(None);
        self.seen_rw = false;
        self.lease.forget();
        self.set_state(SessionState::Expired);
        self.set_state(SessionState::Connecting);
    }

    /// Answers `SessionExpired` to the queued requests bound to `session`, which is over.
    fn fail_bound_to(&mut self, session: i64) {
        let (bound, rest): (VecDeque<Queued>, _) = std::mem::take(&mut self.queued)
            .into_iter()
            .partition(|q| q.request.session == Some(session));
        self.queued = rest;
        for Queued { id, .. } in bound {
            self.answer(id, Err(Error::SessionExpired));
        }
    }

    /// Ends the session for good: every waiter and watcher is told, once.
    pub(super) fn end(&mut self, state: SessionState, err: Error) {
        if self.state.is_terminal() {
            return;
        }
        // Fail what is in flight with the terminal error *before* dropping the transport,
        // which would answer it with ConnectionLoss: after AuthFailed those requests can
        // never be answered on this session, and callers must not retry them as if the
        // connection had merely dropped (Java's conLossPacket reports AUTHFAILED too).
        self.fail_in_flight(&err);
        for id in std::mem::take(&mut self.closers) {
            let reply = Reply {
                zxid: self.last_zxid,
                body: Bytes::new(),
            };
            self.answer(id, Ok(reply));
        }
        let reason = if self.conn == Conn::Idle {
            None
        } else {
            Some(DropReason::SessionEnded)
        };
        self.conn_to_idle(reason);
        for Queued { id, .. } in std::mem::take(&mut self.queued) {
            self.answer(id, Err(err.clone()));
        }
        let keeper_state = match state {
            SessionState::Expired => KeeperState::Expired,
            SessionState::AuthFailed => KeeperState::AuthFailed,
            _ => KeeperState::Closed,
        };
        for watcher in self.watches.drain() {
            let event = WatchedEvent {
                event_type: EventType::None,
                state: keeper_state,
                path: String::new(),
                zxid: -1,
            };
            self.events.push_back(Event::Watch { watcher, event });
        }
        self.set_state(state);
    }
}
