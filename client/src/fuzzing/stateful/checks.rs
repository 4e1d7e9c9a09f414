//! The session target's checks: what the session writes, the events it emits, and its
//! getters against the harness's own account.

use std::time::Instant;

use bytes::Bytes;

use super::{watcher_index, Model, Status};
use crate::error::Error;
use crate::fuzzing::harness::Peer;
use crate::fuzzing::model::Phase;
use crate::jute::Decode;
use crate::proto::{
    ConnectRequest, EventType, KeeperState, OpCode, RequestHeader, AUTH_XID, NEW_SESSION_PASSWD,
    PING_XID,
};
use crate::session::{Event, Reply, RequestId, Session, SessionState, WatchedEvent, WatcherId};

/// The events one input produced.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub(super) dropped: bool,
    pub(super) answered: Vec<(RequestId, Result<Reply, Error>)>,
}

impl Seen {
    pub(super) fn answer(&self, id: RequestId) -> Option<&Result<Reply, Error>> {
        self.answered.iter().find(|(a, _)| *a == id).map(|(_, r)| r)
    }
}

impl Peer for Model {
    fn begin(&mut self) {
        self.had_connection = self.server.phase != Phase::Idle;
        self.ops.clear();
        self.predicted_drop = false;
        self.seen = Seen::default();
    }

    /// Splits what the session wrote into requests, checking each.
    fn written(&mut self, session: &Session, bytes: Bytes) {
        assert_ne!(
            self.server.phase,
            Phase::Idle,
            "wrote {} bytes with no transport",
            bytes.len()
        );
        for frame in self.server.written(&bytes) {
            if std::mem::take(&mut self.server.expect_connect_request) {
                self.check_connect_request(session, &frame);
            } else {
                let op = self.check_request(&frame);
                self.ops.push(op);
            }
        }
    }

    fn received(&mut self, bytes: &[u8]) {
        self.predicted_drop = self.server.feed(bytes);
    }

    fn event(&mut self, now: Instant, event: Event) {
        match event {
            Event::Reply { id, result } => {
                self.on_reply(now, id, &result);
                self.seen.answered.push((id, result));
            }
            Event::Watch { watcher, event } => self.on_watch(watcher, &event),
            Event::State(state) => self.on_state(state),
            Event::DropConnection(reason) => {
                assert!(
                    self.had_connection,
                    "DropConnection({reason:?}) with no transport"
                );
                assert!(!self.seen.dropped, "a second DropConnection({reason:?})");
                self.seen.dropped = true;
                self.server.end();
            }
        }
    }
}

impl Model {
    fn check_connect_request(&self, session: &Session, frame: &Bytes) {
        let request = match ConnectRequest::decode_exact(frame) {
            Ok(request) => request,
            Err(e) => panic!("the first frame is not a ConnectRequest: {e}"),
        };
        assert_eq!(request.protocol_version, 0);
        // Until a read/write server has accepted the session, every attempt asks for a new one.
        let (id, passwd) = if self.server.seen_rw {
            (session.session_id(), session.session_password().clone())
        } else {
            (0, Bytes::from_static(&NEW_SESSION_PASSWD))
        };
        assert_eq!(request.session_id, id, "ConnectRequest session id");
        assert_eq!(request.passwd, passwd, "ConnectRequest password");
        assert_eq!(
            request.last_zxid_seen,
            session.last_zxid(),
            "ConnectRequest zxid"
        );
        assert_eq!(
            request.read_only, self.config.read_only,
            "ConnectRequest read-only flag"
        );
    }

    fn check_request(&mut self, frame: &Bytes) -> OpCode {
        let header = match RequestHeader::decode_exact(&frame.slice(..frame.len().min(8))) {
            Ok(header) => header,
            Err(e) => panic!("a request frame without a RequestHeader: {e}"),
        };
        let (xid, op) = (header.xid, header.op);
        match xid {
            PING_XID => assert_eq!(op, OpCode::Ping, "xid -2 is for pings only"),
            AUTH_XID => assert_eq!(op, OpCode::Auth, "xid -4 is for auth only"),
            _ => {
                assert!(
                    !matches!(op, OpCode::Ping | OpCode::Auth),
                    "{op:?} sent with xid {xid}"
                );
                let expected = self.server.next_xid.unwrap_or(xid);
                assert!(
                    xid > 0 && xid == expected,
                    "xid {xid} where {expected} was due"
                );
                self.server.next_xid = Some(if xid == i32::MAX { 1 } else { xid + 1 });
            }
        }
        if !matches!(op, OpCode::SetWatches | OpCode::SetWatches2 | OpCode::Auth) {
            let max = self.config.max_request_len;
            assert!(
                frame.len() <= max,
                "a {}-byte {op:?} over the {max}-byte limit",
                frame.len()
            );
        }
        if xid == AUTH_XID {
            self.server.auths += 1;
        } else {
            self.server.pipe.push_back((xid, op));
        }
        op
    }

    fn on_reply(&mut self, now: Instant, id: RequestId, result: &Result<Reply, Error>) {
        let index = usize::try_from(id.0).unwrap_or(usize::MAX).wrapping_sub(1);
        let Some(t) = self.requests.get_mut(index) else {
            panic!("a reply to unknown {id:?}")
        };
        assert_eq!(
            t.status,
            Status::Waiting,
            "{id:?} answered again: {result:?}"
        );
        t.status = Status::Answered;
        if *result == Err(Error::Timeout) {
            assert!(
                t.deadline.is_some_and(|d| d <= now),
                "{id:?} timed out early"
            );
        }
        if let Some((watcher, exists)) = t.watch {
            if result.is_ok() || (exists && *result == Err(Error::NoNode)) {
                self.watchers[watcher_index(watcher)].armed = true;
            }
        }
    }

    fn on_watch(&mut self, id: WatcherId, event: &WatchedEvent) {
        let Some(watcher) = self.watchers.get_mut(watcher_index(id)) else {
            panic!("an event for unknown {id:?}")
        };
        assert!(watcher.armed, "an event for unregistered {id:?}: {event:?}");
        // Session-local events end the watcher: the end of the session (type None, with a
        // terminal state) and removeWatches (the *WatchRemoved types).
        let local = matches!(
            event.event_type,
            EventType::None
                | EventType::DataWatchRemoved
                | EventType::ChildWatchRemoved
                | EventType::PersistentWatchRemoved
        );
        if event.event_type == EventType::None {
            let terminal = [
                KeeperState::Expired,
                KeeperState::AuthFailed,
                KeeperState::Closed,
            ];
            assert!(
                terminal.contains(&event.state),
                "a session event with state {:?}",
                event.state
            );
        }
        if !local {
            // Node events come from server notifications, which only ever carry SyncConnected.
            let state = event.state;
            assert_eq!(
                state,
                KeeperState::SyncConnected,
                "a node event with state {state:?}"
            );
        }
        // A renewal's marker (None/Expired while the session goes on) keeps persistent
        // watchers; every other session-local event ends the watcher.
        let marker = event.event_type == EventType::None
            && event.state == KeeperState::Expired
            && self.config.renew_on_expiry;
        if !watcher.persistent || (local && !marker) {
            watcher.armed = false;
        }
    }

    fn on_state(&mut self, state: SessionState) {
        assert!(
            !self.ended,
            "{state:?} reported after the session ended in {:?}",
            self.state
        );
        assert_ne!(state, self.state, "{state:?} reported twice in a row");
        let renewed = self.state == SessionState::Expired && self.config.renew_on_expiry;
        assert!(
            !renewed || state == SessionState::Connecting,
            "{state:?} right after a renewing session's Expired"
        );
        self.state = state;
        if state == SessionState::Expired && self.config.renew_on_expiry && !self.closing {
            // A new session begins: the next ConnectRequest asks for one.
            self.server.end();
            self.server.seen_rw = false;
        } else if state.is_terminal() {
            self.ended = true;
            self.server.end();
        }
    }

    pub(super) fn check_consistency(&self, s: &Session) {
        assert_eq!(
            s.state(),
            self.state,
            "state() differs from the last State event"
        );
        let open = self.server.phase == Phase::Open;
        assert_eq!(
            s.state().is_connected(),
            open,
            "connected in {:?}",
            self.server.phase
        );
        let idle = self.server.phase == Phase::Idle && !self.ended;
        assert_eq!(
            s.wants_connection(),
            idle,
            "wants_connection in {:?}",
            self.server.phase
        );
        let written = self.server.pipe.len() + self.server.auths;
        assert_eq!(
            s.in_flight(),
            written,
            "requests in flight differ from those written"
        );
        let armed = self.watchers.iter().filter(|w| w.armed).count();
        assert_eq!(s.watch_count(), armed, "registered watchers");
        if self.ended {
            assert_eq!(
                (s.in_flight(), s.queued(), s.poll_timeout()),
                (0, 0, None),
                "after the end"
            );
        }
    }
}
