//! The stateful target: a sans-IO [`Session`] driven by a byte-coded script, with the server's
//! side played by a model that knows only the protocol rules.

mod checks;

use checks::Seen;

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes};

use super::harness::{Driver, HOST};
use super::model::{Phase, Server};
use super::script::{
    config, connect_frame, request, Script, EVENT_TYPES, NOTIFY_PATHS, REPLY_ERRORS, STATES,
};
use crate::error::Error;
use crate::jute::Encode;
use crate::proto::frames::{frame, reply_frame};
use crate::proto::{
    ErrorCode, OpCode, ReplyHeader, AUTH_XID, NOTIFICATION_XID, PING_XID, SET_WATCHES_XID,
};
use crate::session::{Effect, Request, RequestId, SessionConfig, SessionState, WatcherId};

/// The action bytes of a session script: the byte, modulo [`COUNT`], picks what the next step
/// does (the seeds write scripts with these too).
pub(super) mod action {
    pub(in crate::fuzzing) const SUBMIT: u8 = 0;
    pub(in crate::fuzzing) const CONNECT: u8 = 1;
    pub(in crate::fuzzing) const REPLY: u8 = 2;
    pub(in crate::fuzzing) const XID_REPLY: u8 = 3;
    pub(in crate::fuzzing) const NOTIFY: u8 = 4;
    pub(in crate::fuzzing) const RAW: u8 = 5;
    pub(in crate::fuzzing) const ADVANCE: u8 = 6;
    pub(in crate::fuzzing) const DISCONNECT: u8 = 7;
    pub(in crate::fuzzing) const CANCEL: u8 = 8;
    pub(in crate::fuzzing) const CLOSE: u8 = 9;
    pub(in crate::fuzzing) const REMOVE_WATCHER: u8 = 10;
    pub(in crate::fuzzing) const SET_XID: u8 = 11;
    pub(in crate::fuzzing) const REPLY_ALL: u8 = 12;
    /// Runs the clock to the session's next deadline (every byte from 13 up to [`COUNT`]).
    pub(in crate::fuzzing) const TO_DEADLINE: u8 = 13;
    /// How many actions there are.
    pub(in crate::fuzzing) const COUNT: u8 = 14;
}
/// Drives a [`Session`] through a script read from `data`, checking its guarantees.
///
/// Bytes 0 and 1 choose the configuration: session timeout, connect timeout, host count,
/// read-only, a 48-byte request limit, a 64-byte frame limit, a resumed session, a
/// configured credential and renewal after expiry. Then each op is one byte (`op % 14`) and
/// its arguments; missing bytes read as 0:
/// - 0 `kind flags [deadline]`: submit a request (`script::request`: reads, creates, writes,
///   auth, multi, add/remove watches, one over the request limit, an unknown op, then the
///   sample request of every op of the table a user may submit); `flags` picks
///   the path, bit 3 asks for a watch, bit 7 for a deadline `deadline × 10` ms away;
/// - 1: open a transport if the session wants one (else check that doing so is a no-op);
/// - 2 `sel [len body] split`: while awaiting a ConnectResponse, the one `sel` picks
///   (expired, read-only, …); else a reply to the oldest request with the error code `sel`
///   picks; delivered in two reads cut at `split`;
/// - 3 `kind [xid]`: a reply with a chosen xid: the next or previous one, a duplicate of the
///   last reply, `i32::MAX`, 0, -8, -2 or four raw bytes;
/// - 4 `type state path`: a notification (unknown types and states, invalid UTF-8 paths);
/// - 5 `n bytes`: `n & 0x7f` raw server bytes (bit 7: through `recv_buffer`);
/// - 6 `t`: advance the clock by `t & 0x3f` × 1, 16, 256 or 4096 ms;
/// - 7: the transport fails; 8 `i`: cancel a recent request; 9: close;
///   10 `i`: drop a watcher;
/// - 11 `k`: start xids at `i32::MAX - k % 16` (the hook exists under `cfg(fuzzing)` only);
/// - 12: answer everything in flight (the handshake first);
/// - 13: advance the clock to the next deadline.
///
/// After every op the timers are fired as a driver would. At the end the session is closed
/// (answering what is in flight, or failing the transport).
///
/// # Panics
/// When a guarantee of [`Session`] is broken: a request answered twice, after being
/// cancelled, or never; a timeout before the deadline; a deadline passed with no answer; a
/// watch event for a watcher not registered; a state reported after the end; a connection
/// kept or dropped against the protocol rules; requests in flight that differ from what was
/// written; xids that do not count up from 1; a deadline left in the past after
/// `handle_timeout`; anything left over after the session ended.
pub fn session(data: &[u8]) {
    let mut script = Script { data };
    let mut harness = Harness::new(&mut script);
    for _ in 0..MAX_OPS {
        if script.data.is_empty() {
            break;
        }
        harness.step(&mut script);
    }
    harness.finish();
}

/// What became of a submitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Waiting,
    Answered,
    Cancelled,
}

/// A submitted request (index = id - 1).
#[derive(Debug)]
struct Tracked {
    deadline: Option<Instant>,
    /// The watcher its success registers, and whether it is an exists (NoNode registers too).
    watch: Option<(WatcherId, bool)>,
    status: Status,
}

/// A watcher (index = id).
#[derive(Debug)]
struct Watcher {
    persistent: bool,
    /// Registered in the session: its request succeeded and it has not ended.
    armed: bool,
}

/// The session under the shared driver loop, with the model as the server's end.
struct Harness {
    io: Driver<Model>,
    zxid: i64,
    last_reply: Option<Bytes>,
}

/// The harness's own account of the session, checked against each thing it writes and emits
/// (`checks`).
struct Model {
    config: SessionConfig,
    server: Server,
    requests: Vec<Tracked>,
    watchers: Vec<Watcher>,
    /// The last state reported.
    state: SessionState,
    ended: bool,
    closing: bool,
    /// Of the current call into the session: whether a transport was open when it began
    /// (whether a DropConnection is possible).
    had_connection: bool,
    /// Of the current call: the ops of the requests written.
    ops: Vec<OpCode>,
    /// Of the current call: whether the model says the bytes read must end the connection.
    predicted_drop: bool,
    /// Of the current call: what its events said.
    seen: Seen,
}

impl Harness {
    fn new(script: &mut Script<'_>) -> Self {
        let config = config(script.byte(), script.byte());
        let model = Model {
            server: Server::new(config.max_frame_len, config.resume.is_some()),
            config: config.clone(),
            requests: Vec::new(),
            watchers: Vec::new(),
            state: SessionState::Connecting,
            ended: false,
            closing: false,
            had_connection: false,
            ops: Vec::new(),
            predicted_drop: false,
            seen: Seen::default(),
        };
        Self {
            io: Driver::start(config, Instant::now(), model),
            zxid: 0,
            last_reply: None,
        }
    }

    fn step(&mut self, script: &mut Script<'_>) {
        match script.byte() % action::COUNT {
            action::SUBMIT => self.submit(script),
            action::CONNECT => self.connect(),
            action::REPLY => self.reply(script),
            action::XID_REPLY => self.xid_reply(script),
            action::NOTIFY => self.notify(script),
            action::RAW => {
                let n = script.byte();
                let bytes = script.take(usize::from(n & 0x7f));
                self.deliver(bytes, n & 0x80 != 0);
            }
            action::ADVANCE => {
                let t = script.byte();
                let unit = [1, 16, 256, 4096][usize::from(t >> 6)];
                self.io.now += Duration::from_millis(u64::from(t & 0x3f) * unit);
            }
            action::DISCONNECT => self.disconnect(),
            action::CANCEL => self.cancel(script.byte()),
            action::CLOSE => self.close(),
            action::REMOVE_WATCHER => self.remove_watcher(script.byte()),
            action::SET_XID => self.set_next_xid(script.byte()),
            action::REPLY_ALL => self.reply_all(),
            _ => {
                if let Some(t) = self.io.session.poll_timeout() {
                    self.io.now = self.io.now.max(t);
                }
            }
        }
        self.settle();
        self.io.peer.check_consistency(&self.io.session);
    }

    // ===== ops =====

    fn submit(&mut self, script: &mut Script<'_>) {
        let (kind, flags) = (script.byte(), script.byte());
        let now = self.io.now;
        let deadline =
            (flags & 0x80 != 0).then(|| now + Duration::from_millis(u64::from(script.byte()) * 10));
        let m = &mut self.io.peer;
        let (mut request, spec) = request(kind, flags, m.config.max_request_len);
        request.deadline = deadline;
        let watch = spec.map(|spec| {
            let watcher = m.new_watcher(spec.kind.is_persistent());
            request.effect = Effect::Watch {
                path: spec.path,
                kind: spec.kind,
                watcher,
            };
            (watcher, spec.exists)
        });
        let refused = m.ended || m.closing;
        let too_large = 8 + request.body.len() > m.config.max_request_len;
        let late = deadline.is_some_and(|d| d <= now);
        let expected = m.track(deadline, watch);
        let id = self.io.submit(request);
        assert_eq!(id, expected, "request ids must count up from 1");
        let answer = self.io.peer.seen.answer(id);
        if refused {
            assert!(
                matches!(answer, Some(Err(e)) if e.is_terminal()),
                "refused with {answer:?}"
            );
        } else if too_large {
            assert!(
                matches!(answer, Some(Err(Error::RequestTooLarge { .. }))),
                "{answer:?}"
            );
        } else if late {
            assert_eq!(answer, Some(&Err(Error::Timeout)), "a request already late");
        } else {
            assert!(
                answer.is_none(),
                "{id:?} answered at submission: {answer:?}"
            );
        }
    }

    fn connect(&mut self) {
        let session = &mut self.io.session;
        if !session.wants_connection() {
            session.handle_connected(self.io.now, HOST);
            assert!(
                session.poll_transmit().is_none(),
                "handle_connected wrote unasked"
            );
            assert!(
                session.poll_event().is_none(),
                "handle_connected acted unasked"
            );
            return;
        }
        self.io.peer.server.connect();
        self.io.connected();
        let m = &mut self.io.peer;
        assert!(
            !m.server.expect_connect_request,
            "a connection without a ConnectRequest"
        );
        for &op in &m.ops {
            // docs/protocol.md §2.3: nothing else before the ConnectResponse, so that an expired
            // reply is never lost behind user requests.
            let allowed = matches!(op, OpCode::Auth | OpCode::SetWatches | OpCode::SetWatches2);
            assert!(allowed, "{op:?} written before the handshake completed");
        }
    }

    fn reply(&mut self, script: &mut Script<'_>) {
        let sel = script.byte();
        let server = &self.io.peer.server;
        let frame = match server.phase {
            Phase::Idle => return,
            Phase::Awaiting => connect_frame(sel),
            Phase::Open => {
                let auth_first = sel & 1 == 1 && server.auths > 0;
                let head = server.pipe.front().map(|&(xid, _)| xid);
                let auth = (server.auths > 0).then_some(AUTH_XID);
                let Some(xid) = (if auth_first { auth } else { head.or(auth) }) else {
                    return;
                };
                let err = REPLY_ERRORS[usize::from(sel >> 1) % REPLY_ERRORS.len()];
                let len = if err == ErrorCode::Ok {
                    usize::from(script.byte() % 24)
                } else {
                    0
                };
                let body = script.take(len);
                self.zxid += 1;
                reply_frame(xid, self.zxid, err, body)
            }
        };
        let split = usize::from(script.byte()) % frame.len();
        if split == 0 {
            self.deliver(&frame, false);
        } else {
            self.deliver(&frame[..split], false);
            self.deliver(&frame[split..], true);
        }
        self.last_reply = Some(frame);
    }

    fn xid_reply(&mut self, script: &mut Script<'_>) {
        let server = &self.io.peer.server;
        if server.phase == Phase::Idle {
            return;
        }
        let head = server.pipe.front().map_or(1, |&(xid, _)| xid);
        let kind = script.byte();
        let xid = match kind % 8 {
            0 => head.wrapping_add(1),
            1 => head.wrapping_sub(1),
            2 => match self.last_reply.clone() {
                Some(duplicate) => return self.deliver(&duplicate, false),
                None => head,
            },
            3 => i32::MAX,
            4 => 0,
            5 => SET_WATCHES_XID,
            6 => PING_XID,
            _ => {
                let raw = script.take(4);
                i32::from_be_bytes([0, 1, 2, 3].map(|i| raw.get(i).copied().unwrap_or(0)))
            }
        };
        self.zxid += 1;
        let frame = reply_frame(xid, self.zxid, ErrorCode::Ok, &[]);
        self.deliver(&frame, kind & 0x80 != 0);
    }

    fn notify(&mut self, script: &mut Script<'_>) {
        if self.io.peer.server.phase == Phase::Idle {
            return;
        }
        let (t, s, p) = (script.byte(), script.byte(), script.byte());
        let event_type = EVENT_TYPES[usize::from(t) % EVENT_TYPES.len()];
        let state = STATES[usize::from(s) % STATES.len()];
        let path = NOTIFY_PATHS[usize::from(p) % NOTIFY_PATHS.len()];
        let zxid = if p & 0x80 == 0 { -1 } else { self.zxid };
        let frame = frame(|b| {
            ReplyHeader {
                xid: NOTIFICATION_XID,
                zxid,
                err: ErrorCode::Ok,
            }
            .encode(b);
            event_type.encode(b);
            state.encode(b);
            b.put_i32(i32::try_from(path.len()).unwrap_or(i32::MAX));
            b.put_slice(path);
        });
        self.deliver(&frame, t & 0x80 != 0);
    }

    fn disconnect(&mut self) {
        self.io.disconnected();
        let m = &mut self.io.peer;
        assert!(
            !m.seen.dropped,
            "DropConnection for a transport already reported closed"
        );
        m.server.end();
    }

    fn cancel(&mut self, back: u8) {
        let requests = &mut self.io.peer.requests;
        let Some(last) = requests.len().checked_sub(1) else {
            return;
        };
        let index = last - usize::from(back) % requests.len();
        let id = RequestId(index as u64 + 1);
        let cancelled = self.io.session.cancel(id);
        let status = requests[index].status;
        assert_eq!(
            cancelled,
            status == Status::Waiting,
            "cancel({id:?}) of a {status:?} request"
        );
        if cancelled {
            requests[index].status = Status::Cancelled;
        }
    }

    fn close(&mut self) {
        let m = &mut self.io.peer;
        let open = m.server.phase == Phase::Open;
        // A close asked for while another runs is answered when the session ends (the
        // final check sees that it is, once).
        let under_way = m.closing && !m.ended;
        let refused = m.ended;
        let expected = m.track(None, None);
        m.closing |= open && !refused;
        let id = self.io.close();
        assert_eq!(id, expected, "request ids must count up from 1");
        let m = &self.io.peer;
        if under_way {
            return;
        }
        if refused || !open {
            assert!(
                m.seen.answer(id).is_some(),
                "a refused close, or one without a connection, must be answered at once"
            );
        }
        if !open {
            assert!(
                m.ended,
                "close without a connection must end the session at once"
            );
        }
    }

    fn remove_watcher(&mut self, pick: u8) {
        let watchers = &mut self.io.peer.watchers;
        if watchers.is_empty() {
            return;
        }
        let index = usize::from(pick) % watchers.len();
        let removed = self.io.session.remove_watcher(WatcherId(index as u64));
        let watcher = &mut watchers[index];
        assert_eq!(
            removed, watcher.armed,
            "remove_watcher disagrees on registration"
        );
        watcher.armed = false;
    }

    fn set_next_xid(&mut self, back: u8) {
        let xid = i32::MAX - i32::from(back % 16);
        self.io.session.set_next_xid(xid);
        self.io.peer.server.next_xid = Some(xid);
    }

    /// Answers everything in flight, as a healthy server would.
    fn reply_all(&mut self) {
        for _ in 0..64 {
            let server = &self.io.peer.server;
            let xid = match server.phase {
                Phase::Idle => return,
                Phase::Awaiting => {
                    self.deliver(&connect_frame(7), false);
                    continue;
                }
                Phase::Open if server.auths > 0 => AUTH_XID,
                Phase::Open => match server.pipe.front() {
                    Some(&(xid, _)) => xid,
                    None => return,
                },
            };
            self.zxid += 1;
            self.deliver(&reply_frame(xid, self.zxid, ErrorCode::Ok, &[]), false);
        }
    }

    fn finish(&mut self) {
        if !self.io.peer.ended {
            self.close();
            self.settle();
            self.reply_all();
            self.settle();
            if !self.io.peer.ended {
                self.disconnect();
            }
            self.settle();
        }
        let m = &mut self.io.peer;
        assert!(m.ended, "close did not end the session");
        for (index, t) in m.requests.iter().enumerate() {
            assert_ne!(
                t.status,
                Status::Waiting,
                "request {} was never answered",
                index + 1
            );
        }
        assert!(
            m.watchers.iter().all(|w| !w.armed),
            "a watcher was not told of the end"
        );
        let s = &mut self.io.session;
        assert_eq!(
            (s.in_flight(), s.queued(), s.watch_count()),
            (0, 0, 0),
            "left over at the end"
        );
        assert_eq!(s.poll_timeout(), None, "a timer after the end");
        assert!(!s.wants_connection(), "wants a connection after the end");
        assert!(s.poll_transmit().is_none(), "bytes to write after the end");
        // A request after the end is answered at once.
        let expected = m.track(None, None);
        let id = self.io.submit(Request::new(OpCode::Sync, Bytes::new()));
        assert_eq!(id, expected, "request ids must count up from 1");
        assert!(
            matches!(self.io.peer.seen.answer(id), Some(Err(e)) if e.is_terminal()),
            "not refused after the end"
        );
    }

    // ===== plumbing =====

    /// Bytes from the server, in one read.
    fn deliver(&mut self, bytes: &[u8], through_buffer: bool) {
        self.io.input(bytes, through_buffer);
        let m = &mut self.io.peer;
        assert_eq!(
            m.seen.dropped, m.predicted_drop,
            "connection kept or dropped against the rules"
        );
        if m.seen.dropped {
            // Requests written and discarded within this input never reached the model.
            m.server.last_zxid = self.io.session.last_zxid();
            m.server.next_xid = None;
        } else {
            assert_eq!(self.io.session.last_zxid(), m.server.last_zxid, "last zxid");
        }
    }

    /// Fires due timers as a driver would, then checks that no request is past its deadline.
    fn settle(&mut self) {
        self.io.advance_to(self.io.now);
        let now = self.io.now;
        for (index, t) in self.io.peer.requests.iter().enumerate() {
            let overdue = t.status == Status::Waiting && t.deadline.is_some_and(|d| d <= now);
            assert!(
                !overdue,
                "request {} is past its deadline and unanswered",
                index + 1
            );
        }
    }
}

impl Model {
    /// Tracks the request the next call submits; returns the id it must get (ids count up from
    /// 1).
    fn track(&mut self, deadline: Option<Instant>, watch: Option<(WatcherId, bool)>) -> RequestId {
        self.requests.push(Tracked {
            deadline,
            watch,
            status: Status::Waiting,
        });
        RequestId(self.requests.len() as u64)
    }

    fn new_watcher(&mut self, persistent: bool) -> WatcherId {
        self.watchers.push(Watcher {
            persistent,
            armed: false,
        });
        WatcherId(self.watchers.len() as u64 - 1)
    }
}

fn watcher_index(id: WatcherId) -> usize {
    usize::try_from(id.0).unwrap_or(usize::MAX)
}

/// Ops per run, whatever the input length.
const MAX_OPS: usize = 4096;
