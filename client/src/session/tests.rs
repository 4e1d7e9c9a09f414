//! Deterministic tests of the session state machine.
//!
//! No sockets, no runtime, no real time: a virtual clock (a fixed `Instant` plus offsets) and a
//! scripted fake server that decodes the frames the session writes and answers with frames
//! built from the protocol records. Each test reads as a transcript of one conversation.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use super::{
    DropReason, Effect, Event, Reply, Request, RequestId, Session, SessionConfig, SessionState,
    WatchKind, WatcherId,
};
use crate::error::{Error, ProtocolError};
use crate::fuzzing::harness::{Driver, Peer};
use crate::jute::{Decode, Encode, FrameDecoder, FrameError, Reader};
use crate::proto::frames::{frame, notification_frame, reply_frame};
use crate::proto::{
    AddWatchMode, AddWatchRequest, AuthPacket, ConnectRequest, ConnectResponse, ErrorCode,
    ErrorResponse, EventType, ExistsRequest, GetChildrenRequest, GetChildrenResponse,
    GetDataRequest, GetDataResponse, KeeperState, OpCode, RemoveWatchesRequest, RequestHeader,
    SetWatches, SetWatches2, Stat, WatcherEvent, WatcherType, AUTH_XID, NOTIFICATION_XID, PING_XID,
};

// ===== fixtures =====

const SID: i64 = 0x0100_0000_0000_0042;
const PASSWD: [u8; 16] = *b"0123456789abcdef";
const ZERO_PASSWD: [u8; 16] = [0; 16];

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn config(timeout: Duration) -> SessionConfig {
    SessionConfig {
        session_timeout: timeout,
        ..SessionConfig::default()
    }
}

/// A ConnectResponse accepting the session with `timeout_ms` (37 bytes: readOnly byte present).
fn welcome(timeout_ms: i32) -> ConnectResponse {
    ConnectResponse {
        protocol_version: 0,
        timeout: timeout_ms,
        session_id: SID,
        passwd: Bytes::from_static(&PASSWD),
        read_only: Some(false),
    }
}

/// What a server sends for an expired or unknown session (docs/protocol.md §2.2).
fn expired_response() -> ConnectResponse {
    ConnectResponse {
        protocol_version: 0,
        timeout: 0,
        session_id: 0,
        passwd: Bytes::from_static(&ZERO_PASSWD),
        read_only: Some(false),
    }
}

// ===== requests =====

fn watch_effect(path: &str, kind: WatchKind, watcher: Option<WatcherId>) -> Effect {
    watcher.map_or(Effect::None, |watcher| Effect::Watch {
        path: path.to_owned(),
        kind,
        watcher,
    })
}

/// A read of `at`, watching it when `watcher` is given: getData, exists or getChildren, whose
/// records share the shape `{ ustring path; boolean watch; }`.
fn read(op: OpCode, at: &str, watcher: Option<WatcherId>) -> Request {
    let (path, watch) = (at.to_owned(), watcher.is_some());
    let (body, kind) = match op {
        OpCode::GetData => (GetDataRequest { path, watch }.to_bytes(), WatchKind::Data),
        OpCode::Exists => (ExistsRequest { path, watch }.to_bytes(), WatchKind::Data),
        _ => (
            GetChildrenRequest { path, watch }.to_bytes(),
            WatchKind::Child,
        ),
    };
    let effect = watch_effect(at, kind, watcher);
    Request {
        effect,
        ..Request::new(op, body)
    }
}

fn get_data(path: &str, watcher: Option<WatcherId>) -> Request {
    read(OpCode::GetData, path, watcher)
}

fn exists(path: &str, watcher: Option<WatcherId>) -> Request {
    read(OpCode::Exists, path, watcher)
}

fn get_children(path: &str, watcher: Option<WatcherId>) -> Request {
    read(OpCode::GetChildren, path, watcher)
}

fn add_watch(path: &str, mode: AddWatchMode, watcher: WatcherId) -> Request {
    let kind = match mode {
        AddWatchMode::PersistentRecursive => WatchKind::PersistentRecursive,
        _ => WatchKind::Persistent,
    };
    let body = AddWatchRequest {
        path: path.to_owned(),
        mode,
    }
    .to_bytes();
    let effect = watch_effect(path, kind, Some(watcher));
    Request {
        effect,
        ..Request::new(OpCode::AddWatch, body)
    }
}

fn auth_packet(credential: &str) -> Bytes {
    let packet = AuthPacket {
        auth_type: 0,
        scheme: "digest".to_owned(),
        auth: Some(Bytes::copy_from_slice(credential.as_bytes())),
    };
    packet.to_bytes()
}

fn auth(credential: &str) -> Request {
    Request::new(OpCode::Auth, auth_packet(credential))
}

fn with_deadline(mut request: Request, deadline: Instant) -> Request {
    request.deadline = Some(deadline);
    request
}

// ===== server frames =====

/// A notification of `event_type` on `path`, as a server sends it.
fn notification(event_type: EventType, path: &str, zxid: i64) -> Bytes {
    let event = WatcherEvent {
        event_type,
        state: KeeperState::SyncConnected,
        path: path.to_owned(),
    };
    notification_frame(zxid, &event)
}

fn data_body(data: &[u8]) -> Bytes {
    GetDataResponse {
        data: Some(Bytes::copy_from_slice(data)),
        stat: Stat::default(),
    }
    .to_bytes()
}

fn ok_reply(zxid: i64, body: &[u8]) -> Result<Reply, Error> {
    Ok(Reply {
        zxid,
        body: Bytes::copy_from_slice(body),
    })
}

/// Splits a request frame into its header and record.
fn split_request(frame: &Bytes) -> (RequestHeader, Bytes) {
    let mut r = Reader::new(frame);
    let header = r.read::<RequestHeader>().expect("a RequestHeader");
    (header, frame.slice(r.position()..))
}

fn headers(frames: &[(RequestHeader, Bytes)]) -> Vec<(i32, OpCode)> {
    frames.iter().map(|(h, _)| (h.xid, h.op)).collect()
}

fn get_data_path(body: &Bytes) -> String {
    GetDataRequest::decode_exact(body)
        .expect("a GetDataRequest")
        .path
}

// ===== event filters =====

fn replies(events: &[Event]) -> Vec<(RequestId, Result<Reply, Error>)> {
    let pick = |e: &Event| match e {
        Event::Reply { id, result } => Some((*id, result.clone())),
        _ => None,
    };
    events.iter().filter_map(pick).collect()
}

fn states(events: &[Event]) -> Vec<SessionState> {
    let pick = |e: &Event| match e {
        Event::State(s) => Some(*s),
        _ => None,
    };
    events.iter().filter_map(pick).collect()
}

fn drops(events: &[Event]) -> Vec<DropReason> {
    let pick = |e: &Event| match e {
        Event::DropConnection(r) => Some(r.clone()),
        _ => None,
    };
    events.iter().filter_map(pick).collect()
}

/// (watcher, event type, keeper state, path) of every watch event.
fn watch_events(events: &[Event]) -> Vec<WatchSeen> {
    let pick = |e: &Event| match e {
        Event::Watch { watcher, event } => {
            Some((*watcher, event.event_type, event.state, event.path.clone()))
        }
        _ => None,
    };
    events.iter().filter_map(pick).collect()
}

type WatchSeen = (WatcherId, EventType, KeeperState, String);

/// A node event as a server notification delivers it.
fn fired(watcher: WatcherId, event_type: EventType, path: &str) -> WatchSeen {
    (
        watcher,
        event_type,
        KeeperState::SyncConnected,
        path.to_owned(),
    )
}

// ===== the harness =====

/// One session, a virtual clock, and the server's end of the (single, current) transport: the
/// shared driver loop (`crate::fuzzing::harness`) with [`Wire`] as its peer.
type Harness = Driver<Wire>;

/// The server's end of the transport, as the tests read it.
struct Wire {
    /// The start of the test.
    base: Instant,
    /// What the session wrote on the current transport, not yet read by the test.
    rx: FrameDecoder,
    /// Events polled from the session, not yet drained by the test.
    events: Vec<Event>,
    /// Bumped whenever the transport goes away (closed by us or dropped by the session).
    generation: u64,
}

impl Wire {
    fn transport_closed(&mut self) {
        self.rx.clear();
        self.generation += 1;
    }
}

impl Peer for Wire {
    fn written(&mut self, _session: &Session, bytes: Bytes) {
        self.rx.push(&bytes);
    }

    fn event(&mut self, _now: Instant, event: Event) {
        if matches!(event, Event::DropConnection(_)) {
            self.transport_closed();
        }
        self.events.push(event);
    }
}

impl Driver<Wire> {
    fn new() -> Self {
        Self::with_config(SessionConfig::default())
    }

    /// A harness with a session: connected, 30 s (as [`connect`](Self::connect) leaves it).
    fn with_session() -> Self {
        Self::with_session_of(SessionConfig::default())
    }

    /// As [`with_session`](Self::with_session), with `config`.
    fn with_session_of(config: SessionConfig) -> Self {
        let mut h = Self::with_config(config);
        h.connect();
        h
    }

    fn with_config(config: SessionConfig) -> Self {
        let base = Instant::now();
        let wire = Wire {
            base,
            rx: FrameDecoder::default(),
            events: Vec::new(),
            generation: 0,
        };
        Self::start(config, base, wire)
    }

    /// The instant `offset` after the start of the test.
    fn at(&self, offset: Duration) -> Instant {
        self.peer.base + offset
    }

    // ----- time -----

    /// Moves the clock forward, firing every timer at the instant `poll_timeout` asks for.
    fn advance(&mut self, d: Duration) {
        self.advance_to(self.now + d);
    }

    /// Moves the clock forward as [`advance`](Self::advance) does, checking that nothing
    /// happens on the way.
    #[track_caller]
    fn advance_quietly(&mut self, d: Duration) {
        self.advance(d);
        assert!(self.drain_events().is_empty());
    }

    /// Moves the clock forward without firing timers: a driver that is late to its timer.
    fn jump(&mut self, d: Duration) {
        self.now += d;
    }

    // ----- transport -----

    /// Opens a transport; returns the ConnectRequest, which must be the 45-byte first frame.
    fn open(&mut self) -> ConnectRequest {
        assert!(
            self.session.wants_connection(),
            "the session does not want a connection"
        );
        self.connected();
        let frame = self
            .peer
            .rx
            .next_frame()
            .expect("valid framing")
            .expect("a ConnectRequest");
        assert_eq!(frame.len(), 45, "ConnectRequest payload length");
        ConnectRequest::decode_exact(&frame).expect("a ConnectRequest")
    }

    fn accept(&mut self, response: &ConnectResponse) {
        self.deliver(&frame(|b| response.encode(b)));
    }

    /// Opens a transport and completes the handshake with a 30 s session.
    fn connect(&mut self) -> ConnectRequest {
        let request = self.open();
        self.accept(&welcome(30_000));
        assert_eq!(self.drain_events(), [Event::State(SessionState::Connected)]);
        request
    }

    /// The transport fails (EOF, reset).
    fn disconnect(&mut self) {
        self.peer.transport_closed();
        self.disconnected();
    }

    /// Forgets what was sent and happened on the current transport, drops it and opens a
    /// new one; the frames written on the new one (its ConnectRequest aside).
    fn reconnect_and_read(&mut self) -> Vec<(RequestHeader, Bytes)> {
        self.drain_events();
        self.sent_frames();
        self.disconnect();
        self.drain_events();
        self.open();
        self.sent_frames()
    }

    /// Bytes from the server, in one read.
    fn deliver(&mut self, bytes: &[u8]) {
        self.input(bytes, false);
    }

    fn reply(&mut self, xid: i32, zxid: i64, err: ErrorCode, body: &[u8]) {
        self.deliver(&reply_frame(xid, zxid, err, body));
    }

    fn notify(&mut self, event_type: EventType, path: &str) {
        self.deliver(&notification(event_type, path, -1));
    }

    // ----- observations -----

    /// The request frames the server received since the last call, on the current transport.
    fn sent_frames(&mut self) -> Vec<(RequestHeader, Bytes)> {
        self.pump();
        let mut frames = Vec::new();
        while let Some(frame) = self.peer.rx.next_frame().expect("valid framing") {
            frames.push(split_request(&frame));
        }
        frames
    }

    fn drain_events(&mut self) -> Vec<Event> {
        self.pump();
        std::mem::take(&mut self.peer.events)
    }

    /// The lease runs until `offset` after the start of the test (`why`, when it fails).
    #[track_caller]
    fn assert_lease(&self, offset: Duration, why: &str) {
        assert_eq!(
            self.session.lease_deadline(),
            Some(self.at(offset)),
            "{why}"
        );
    }

    /// The only event since the last call is the answer `result` to `id`.
    #[track_caller]
    fn assert_answered(&mut self, id: RequestId, result: Result<Reply, Error>) {
        assert_eq!(self.drain_events(), [Event::Reply { id, result }]);
    }
}

/// Answers the requests with xids 1 and 2, `ids`, with NoNode at `zxid`; checks that they get
/// those answers, in order.
#[track_caller]
fn answer_no_node(h: &mut Harness, zxid: i64, ids: [RequestId; 2]) {
    h.reply(1, zxid, ErrorCode::NoNode, &[]);
    h.reply(2, zxid, ErrorCode::NoNode, &[]);
    let expected = ids.map(|id| (id, Err(Error::NoNode)));
    assert_eq!(replies(&h.drain_events()), expected);
}

/// A harness whose session (which may be read-only) a read-only server accepted for 30 s.
fn read_only_accepted() -> Harness {
    let mut h = Harness::with_config(SessionConfig {
        read_only: true,
        ..SessionConfig::default()
    });
    h.open();
    h.accept(&ConnectResponse {
        read_only: Some(true),
        ..welcome(30_000)
    });
    h
}

/// A harness connected with a 30 s session, with `watcher` registered on `path` (data watch,
/// reply zxid `zxid`).
fn connected_with_data_watch(path: &str, watcher: WatcherId, zxid: i64) -> Harness {
    let mut h = Harness::with_session();
    let id = h.submit(get_data(path, Some(watcher)));
    let [(header, _)] = h.sent_frames().try_into().expect("one getData frame");
    h.reply(header.xid, zxid, ErrorCode::Ok, &data_body(b"v"));
    assert_eq!(
        replies(&h.drain_events()),
        [(id, ok_reply(zxid, &data_body(b"v")))]
    );
    assert_eq!(h.session.watch_count(), 1);
    h
}

// ===== 1. handshake =====

/// A new session's first frame is exactly the 49 bytes docs/protocol.md §2.1 shows for 30 s,
/// readOnly false.
#[test]
fn connect_request_bytes_match_the_reference_dump() {
    let mut session = Session::new(SessionConfig::default(), Instant::now());
    session.handle_connected(Instant::now(), "zk1");
    let wire = session.poll_transmit().expect("the ConnectRequest");
    let mut expected = vec![0, 0, 0, 0x2d];
    expected.extend([0; 12]); // protocolVersion, lastZxidSeen
    expected.extend(30_000_i32.to_be_bytes());
    expected.extend([0; 8]); // sessionId
    expected.extend(16_i32.to_be_bytes());
    expected.extend([0; 16]); // passwd
    expected.push(0); // readOnly
    assert_eq!(&wire[..], &expected[..]);
}

/// Handshake: ConnectRequest fields; user requests (before the transport and during the
/// handshake) wait for the 37-byte ConnectResponse; the negotiated values are recorded.
#[test]
fn handshake_holds_user_requests_until_the_connect_response() {
    let mut h = Harness::new();
    let early = h.submit(get_data("/early", None));
    assert!(h.sent_frames().is_empty());

    let request = h.open();
    let expected = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 30_000,
        session_id: 0,
        passwd: Bytes::from_static(&ZERO_PASSWD),
        read_only: false,
    };
    assert_eq!(request, expected);
    let during = h.submit(get_data("/during", None));
    assert!(
        h.sent_frames().is_empty(),
        "user requests must wait for the ConnectResponse"
    );
    assert_eq!(h.session.queued(), 2);
    assert_eq!(h.session.state(), SessionState::Connecting);

    let response = welcome(20_000);
    assert_eq!(response.encoded_len(), 37);
    h.accept(&response);
    assert_eq!(h.drain_events(), [Event::State(SessionState::Connected)]);
    assert_eq!(h.session.session_id(), SID);
    assert_eq!(&h.session.session_password()[..], &PASSWD);
    assert_eq!(h.session.session_timeout(), Some(secs(20)));

    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(1, OpCode::GetData), (2, OpCode::GetData)]);
    assert_eq!(get_data_path(&sent[0].1), "/early");
    assert_eq!(get_data_path(&sent[1].1), "/during");
    answer_no_node(&mut h, 5, [early, during]);
}

/// A session that may be read-only says so in byte 44, and a 36-byte ConnectResponse
/// (no readOnly byte) is accepted as a read/write connection.
#[test]
fn handshake_read_only_flag_and_36_byte_response() {
    let mut h = Harness::with_config(SessionConfig {
        read_only: true,
        ..SessionConfig::default()
    });
    assert!(h.open().read_only);
    let response = ConnectResponse {
        read_only: None,
        ..welcome(10_000)
    };
    assert_eq!(response.encoded_len(), 36);
    h.accept(&response);
    assert_eq!(h.drain_events(), [Event::State(SessionState::Connected)]);
    assert_eq!(h.session.session_timeout(), Some(secs(10)));
    assert_eq!(h.session.session_id(), SID);
}

/// readOnly=1 in the ConnectResponse gives ConnectedReadOnly.
#[test]
fn read_only_server_gives_connected_read_only() {
    let mut h = read_only_accepted();
    assert_eq!(
        h.drain_events(),
        [Event::State(SessionState::ConnectedReadOnly)]
    );
    assert_eq!(h.session.state(), SessionState::ConnectedReadOnly);
}

/// No ConnectResponse within session timeout / host count: the attempt is dropped; the
/// requests queued before and during it are not failed and go out after the next handshake.
#[test]
fn connect_timeout_drops_the_attempt_and_keeps_the_queue() {
    let mut h = Harness::with_config(SessionConfig {
        host_count: 3,
        ..SessionConfig::default()
    });
    let before = h.submit(get_data("/before", None));
    h.open();
    let during = h.submit(get_data("/during", None));
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(10))));
    h.advance_quietly(ms(9_999));
    h.advance(ms(1));
    assert_eq!(
        h.drain_events(),
        [Event::DropConnection(DropReason::ConnectTimeout)]
    );
    assert!(h.session.wants_connection());
    assert_eq!(
        (h.session.state(), h.session.queued()),
        (SessionState::Connecting, 2)
    );

    h.connect();
    assert_eq!(
        headers(&h.sent_frames()),
        [(1, OpCode::GetData), (2, OpCode::GetData)]
    );
    answer_no_node(&mut h, 1, [before, during]);
}

/// With one host an attempt whose ConnectResponse never comes is dropped after half the
/// session timeout, not all of it: a restarted server that took the connection and never
/// answers it (ZooKeeper does so to one it closes while starting up) expires the session T
/// after loading it, so an attempt of T would leave no time for another.
#[test]
fn one_host_connect_timeout_is_half_the_session_timeout() {
    let mut h = Harness::with_session();
    h.disconnect();
    assert_eq!(h.drain_events(), [Event::State(SessionState::Disconnected)]);
    h.open();
    let opened = h.now;
    assert_eq!(h.session.poll_timeout(), Some(opened + secs(15)));
    h.advance_quietly(ms(14_999));
    h.advance(ms(1));
    assert_eq!(
        h.drain_events(),
        [Event::DropConnection(DropReason::ConnectTimeout)]
    );
    assert!(h.session.wants_connection(), "the session is not given up");
    h.open();
    h.accept(&welcome(30_000));
    assert_eq!(h.drain_events(), [Event::State(SessionState::Connected)]);
}

// ===== 2. pipelining and zxids =====

/// Three getData go out in one buffer with xids 1, 2, 3; in-order replies reach the right
/// ids; last_zxid follows normal replies only, not notifications nor pings.
#[test]
fn pipelined_requests_are_matched_in_order() {
    let mut h = Harness::with_session();
    let now = h.now;
    let ids = ["/a", "/b", "/c"].map(|p| h.session.submit(now, get_data(p, None)));
    let wire = h.session.poll_transmit().expect("one buffer");
    assert!(h.session.poll_transmit().is_none());
    let mut decoder = FrameDecoder::default();
    decoder.push(&wire);
    let frames: Vec<_> = std::iter::from_fn(|| decoder.next_frame().unwrap())
        .map(|f| split_request(&f))
        .collect();
    let get = OpCode::GetData;
    assert_eq!(headers(&frames), [(1, get), (2, get), (3, get)]);
    let paths: Vec<_> = frames.iter().map(|(_, body)| get_data_path(body)).collect();
    assert_eq!(paths, ["/a", "/b", "/c"]);

    h.reply(1, 100, ErrorCode::Ok, &data_body(b"a"));
    assert_eq!(h.session.last_zxid(), 100);
    h.deliver(&notification(EventType::NodeDataChanged, "/x", 10_000));
    assert_eq!(
        h.session.last_zxid(),
        100,
        "notifications never move last_zxid"
    );
    h.reply(2, 150, ErrorCode::Ok, &data_body(b"b"));
    h.advance(secs(9)); // a ping goes out behind request 3
    assert_eq!(headers(&h.sent_frames()), [(PING_XID, OpCode::Ping)]);
    h.reply(3, 160, ErrorCode::Ok, &data_body(b"c"));
    h.reply(PING_XID, 99_999, ErrorCode::Ok, &[]);
    assert_eq!(
        h.session.last_zxid(),
        160,
        "ping replies never move last_zxid"
    );

    let expected = vec![
        (ids[0], ok_reply(100, &data_body(b"a"))),
        (ids[1], ok_reply(150, &data_body(b"b"))),
        (ids[2], ok_reply(160, &data_body(b"c"))),
    ];
    let events = h.drain_events();
    assert_eq!(replies(&events), expected);
    assert!(drops(&events).is_empty());
}

// ===== 3. pings =====

/// With 30 s negotiated: no ping before 9 s of send-idleness, one at 9 s (xid -2, op 11, no
/// body), and no second one while it is outstanding; poll_timeout names each instant.
#[test]
fn ping_after_send_idleness_one_at_a_time() {
    let mut h = Harness::with_session();
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(9))));
    h.advance(ms(8_999));
    assert!(h.sent_frames().is_empty());
    h.advance(ms(1));
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(PING_XID, OpCode::Ping)]);
    assert!(sent[0].1.is_empty(), "a ping has no body");

    // Outstanding: the next timer is the read timeout, not another ping at 18 s.
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(20))));
    h.advance(ms(10_999)); // 19.999 s
    h.wake();
    assert!(h.sent_frames().is_empty(), "only one ping at a time");
    h.reply(PING_XID, 7, ErrorCode::Ok, &[]);
    assert!(h.drain_events().is_empty(), "a ping reply is not an event");
    assert_eq!(h.session.in_flight(), 0);
    // The answered ping is overdue again (last send at 9 s): it goes out at once.
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(18))));
    h.advance(Duration::ZERO);
    assert_eq!(headers(&h.sent_frames()), [(PING_XID, OpCode::Ping)]);
}

/// On a read-only server the pings keep their pace: an answered ping puts the next one a
/// ping interval after it. (A read-only server's answers do not touch the lease, and they
/// once did not pace the pings either: the first answered ping left the next one due at
/// once, and so on, a ping per round trip for as long as the client stayed read-only.)
#[test]
fn pings_keep_their_pace_on_a_read_only_server() {
    let mut h = read_only_accepted();
    assert_eq!(h.drain_events(), [Event::State(SessionState::ConnectedReadOnly)]);
    h.advance(secs(9));
    assert_eq!(headers(&h.sent_frames()), [(PING_XID, OpCode::Ping)]);
    h.advance(ms(2));
    h.reply(PING_XID, 7, ErrorCode::Ok, &[]);
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(18))));
    h.advance(ms(8_997));
    assert!(h.sent_frames().is_empty(), "a ping before its interval");
    h.advance(ms(1));
    assert_eq!(headers(&h.sent_frames()), [(PING_XID, OpCode::Ping)]);
    assert_eq!(h.session.lease_deadline(), None, "a read-only server gives no lease");
}

/// Any request written postpones the ping to 9 s after it.
#[test]
fn any_request_postpones_the_ping() {
    let mut h = Harness::with_session();
    h.advance(secs(5));
    h.submit(get_data("/a", None));
    assert_eq!(headers(&h.sent_frames()), [(1, OpCode::GetData)]);
    h.reply(1, 1, ErrorCode::Ok, &data_body(b""));
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(14))));
    h.advance(ms(8_999));
    assert!(h.sent_frames().is_empty());
    h.advance(ms(1));
    assert_eq!(headers(&h.sent_frames()), [(PING_XID, OpCode::Ping)]);
}

// ===== 4. read timeout =====

/// Nothing received for 2/3 of the session timeout: the connection drops, each in-flight
/// request fails once with ConnectionLoss, and requests queued meanwhile go out after the
/// next handshake.
#[test]
fn read_timeout_fails_in_flight_once_and_keeps_the_queue() {
    let mut h = Harness::with_session();
    let a = h.submit(get_data("/a", None));
    let b = h.submit(get_data("/b", None));
    assert_eq!(h.sent_frames().len(), 2);
    h.advance(ms(19_999));
    assert_eq!(headers(&h.sent_frames()), [(PING_XID, OpCode::Ping)]);
    assert!(h.drain_events().is_empty());
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(20))));

    h.advance(ms(1));
    let expected = [
        Event::Reply {
            id: a,
            result: Err(Error::ConnectionLoss),
        },
        Event::Reply {
            id: b,
            result: Err(Error::ConnectionLoss),
        },
        Event::DropConnection(DropReason::ReadTimeout),
        Event::State(SessionState::Disconnected),
    ];
    assert_eq!(h.drain_events(), expected);
    assert!(h.session.wants_connection());
    assert_eq!(h.session.in_flight(), 0);

    let c = h.submit(get_data("/c", None));
    assert_eq!(h.session.queued(), 1);
    let request = h.open();
    assert_eq!(
        (request.session_id, &request.passwd[..]),
        (SID, &PASSWD[..])
    );
    assert!(
        h.sent_frames().is_empty(),
        "queued request waits for the ConnectResponse"
    );
    h.accept(&welcome(30_000));
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(3, OpCode::GetData)]);
    assert_eq!(get_data_path(&sent[0].1), "/c");
    h.reply(3, 9, ErrorCode::Ok, &data_body(b"c"));
    let events = h.drain_events();
    assert_eq!(states(&events), [SessionState::Connected]);
    assert_eq!(replies(&events), [(c, ok_reply(9, &data_body(b"c")))]);
}

// ===== 5. xid wrap =====

/// Xids wrap from i32::MAX to 1, never 0 or negative, and replies still match.
#[test]
fn xids_wrap_to_one() {
    let mut h = Harness::with_session();
    h.session.set_next_xid(i32::MAX - 1);
    let ids: Vec<_> = (0..4).map(|_| h.submit(get_data("/w", None))).collect();
    let xids: Vec<i32> = h.sent_frames().iter().map(|(hdr, _)| hdr.xid).collect();
    assert_eq!(xids, [i32::MAX - 1, i32::MAX, 1, 2]);
    for xid in xids {
        h.reply(xid, 1, ErrorCode::Ok, &data_body(b"w"));
    }
    let answered: Vec<_> = replies(&h.drain_events())
        .into_iter()
        .map(|(id, r)| (id, r.is_ok()))
        .collect();
    let expected: Vec<_> = ids.into_iter().map(|id| (id, true)).collect();
    assert_eq!(answered, expected);
}

// ===== 6. xid mismatch =====

/// A reply whose xid is not the oldest in flight drops the connection with a protocol
/// error, and every request in flight fails with ConnectionLoss.
#[test]
fn xid_mismatch_drops_the_connection() {
    let mut h = Harness::with_session();
    let a = h.submit(get_data("/a", None));
    let b = h.submit(get_data("/b", None));
    h.reply(2, 1, ErrorCode::Ok, &data_body(b"b"));
    let events = h.drain_events();
    let mismatch = ProtocolError::XidMismatch {
        expected: Some(1),
        got: 2,
    };
    assert_eq!(drops(&events), [DropReason::Protocol(mismatch)]);
    let lost = [
        (a, Err(Error::ConnectionLoss)),
        (b, Err(Error::ConnectionLoss)),
    ];
    assert_eq!(replies(&events), lost);
    assert_eq!(states(&events), [SessionState::Disconnected]);
    assert!(h.session.wants_connection());
}

/// A reply when nothing is in flight is a mismatch too.
#[test]
fn reply_with_nothing_in_flight_drops_the_connection() {
    let mut h = Harness::with_session();
    h.reply(7, 1, ErrorCode::Ok, &[]);
    let mismatch = ProtocolError::XidMismatch {
        expected: None,
        got: 7,
    };
    assert_eq!(drops(&h.drain_events()), [DropReason::Protocol(mismatch)]);
}

// ===== 7. expired handshake =====

/// A ConnectResponse with timeOut 0 / sessionId 0 ends the session: Expired once, queued
/// requests fail with SessionExpired, watchers get None/Expired and are removed, later
/// submits fail at once, and no reconnect is wanted.
#[test]
fn expired_handshake_ends_the_session() {
    let w = WatcherId(1);
    let mut h = connected_with_data_watch("/w", w, 5);
    h.disconnect();
    assert_eq!(h.drain_events(), [Event::State(SessionState::Disconnected)]);
    let queued = h.submit(get_data("/q", None));
    h.open();
    h.accept(&expired_response());

    let events = h.drain_events();
    assert_eq!(states(&events), [SessionState::Expired]);
    assert_eq!(replies(&events), [(queued, Err(Error::SessionExpired))]);
    let expired_event = (w, EventType::None, KeeperState::Expired, String::new());
    assert_eq!(watch_events(&events), [expired_event]);
    assert_eq!(drops(&events), [DropReason::SessionEnded]);
    assert_eq!(h.session.watch_count(), 0);
    assert!(!h.session.wants_connection());
    assert_eq!(h.session.poll_timeout(), None);

    let late = h.submit(get_data("/late", None));
    h.assert_answered(late, Err(Error::SessionExpired));
    h.advance(secs(3600));
    h.session.handle_disconnected(h.now);
    assert!(h.drain_events().is_empty(), "Expired is reported once");
    assert!(h.sent_frames().is_empty());
}

// ===== 8. local expiry =====

/// Disconnected with nothing received for 4/3 of a 3 s session: Expired via handle_timeout,
/// even across a reconnect attempt that timed out.
#[test]
fn local_expiry_after_four_thirds_of_the_timeout() {
    let mut h = Harness::with_config(config(secs(3)));
    h.open();
    h.accept(&welcome(3_000));
    h.advance(ms(500)); // before the first ping (1 s)
    h.disconnect();
    assert_eq!(
        states(&h.drain_events()),
        [SessionState::Connected, SessionState::Disconnected]
    );
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(4))));
    h.advance(ms(500));
    h.open(); // an attempt that never gets an answer (connect timeout 1.5 s: until 2.5 s)
    h.advance(ms(1_500));
    let events = h.drain_events();
    assert_eq!(drops(&events), [DropReason::ConnectTimeout]);
    assert!(states(&events).is_empty());
    h.open(); // another one, until 4 s
    h.advance(ms(1_499));
    assert!(h.drain_events().is_empty());
    assert_eq!(h.session.state(), SessionState::Disconnected);
    h.advance(ms(1));
    let events = h.drain_events();
    assert_eq!(drops(&events), [DropReason::ConnectTimeout]);
    assert_eq!(states(&events), [SessionState::Expired]);
    assert!(!h.session.wants_connection());
}

// ===== 9. watches =====

/// getData with a watch registers only on OK; NodeDataChanged fires it once (one-shot).
#[test]
fn data_watch_registers_on_ok_only_and_fires_once() {
    let (w1, w2) = (WatcherId(1), WatcherId(2));
    let mut h = Harness::with_session();
    let missing = h.submit(get_data("/n", Some(w1)));
    h.reply(1, 3, ErrorCode::NoNode, &[]);
    assert_eq!(replies(&h.drain_events()), [(missing, Err(Error::NoNode))]);
    assert_eq!(h.session.watch_count(), 0, "no watch on NoNode");

    h.submit(get_data("/d", Some(w2)));
    h.reply(2, 4, ErrorCode::Ok, &data_body(b"v"));
    assert_eq!(h.session.watch_count(), 1);
    h.drain_events();

    h.notify(EventType::NodeCreated, "/n");
    assert!(h.drain_events().is_empty());
    h.notify(EventType::NodeDataChanged, "/d");
    assert_eq!(
        watch_events(&h.drain_events()),
        [fired(w2, EventType::NodeDataChanged, "/d")]
    );
    h.notify(EventType::NodeDataChanged, "/d");
    assert!(h.drain_events().is_empty(), "one-shot watch fired twice");
    assert_eq!(h.session.watch_count(), 0);
}

/// One notification for watchers of three kinds (data, exist, recursive on an ancestor):
/// each gets the event with the node's path, not only the last one.
#[test]
fn every_watcher_of_a_notification_gets_the_path() {
    let ids = [WatcherId(1), WatcherId(2), WatcherId(3)];
    let mut h = Harness::with_session();
    h.submit(get_data("/d", Some(ids[0])));
    h.reply(1, 3, ErrorCode::Ok, &data_body(b"v"));
    h.submit(exists("/d", Some(ids[1])));
    h.reply(2, 3, ErrorCode::Ok, &Stat::default().to_bytes());
    h.submit(add_watch("/", AddWatchMode::PersistentRecursive, ids[2]));
    h.reply(
        3,
        3,
        ErrorCode::Ok,
        &ErrorResponse { err: ErrorCode::Ok }.to_bytes(),
    );
    h.drain_events();
    h.notify(EventType::NodeDataChanged, "/d");
    let expected = ids.map(|w| fired(w, EventType::NodeDataChanged, "/d"));
    assert_eq!(watch_events(&h.drain_events()), expected);
}

/// exists on a missing node leaves an exist watch, which NodeCreated fires.
#[test]
fn exists_on_missing_node_leaves_an_exist_watch() {
    let w = WatcherId(1);
    let mut h = Harness::with_session();
    let id = h.submit(exists("/e", Some(w)));
    h.reply(1, 3, ErrorCode::NoNode, &[]);
    assert_eq!(replies(&h.drain_events()), [(id, Err(Error::NoNode))]);
    assert_eq!(h.session.watch_count(), 1);
    h.notify(EventType::NodeCreated, "/e");
    assert_eq!(
        watch_events(&h.drain_events()),
        [fired(w, EventType::NodeCreated, "/e")]
    );
    assert_eq!(h.session.watch_count(), 0);
}

/// A persistent recursive watch fires for the node and its descendants, again and again,
/// but not for NodeChildrenChanged nor for a sibling sharing the name prefix.
#[test]
fn persistent_recursive_watch_fires_for_descendants_repeatedly() {
    let w = WatcherId(9);
    let mut h = Harness::with_session();
    let id = h.submit(add_watch("/a", AddWatchMode::PersistentRecursive, w));
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(1, OpCode::AddWatch)]);
    h.reply(
        1,
        2,
        ErrorCode::Ok,
        &ErrorResponse { err: ErrorCode::Ok }.to_bytes(),
    );
    assert_eq!(replies(&h.drain_events()), [(id, ok_reply(2, &[0; 4]))]);

    let script = [
        (EventType::NodeCreated, "/a/b", true),
        (EventType::NodeChildrenChanged, "/a", false),
        (EventType::NodeDataChanged, "/a/b/c", true),
        (EventType::NodeDataChanged, "/ab", false),
        (EventType::NodeDataChanged, "/a/b/c", true),
        (EventType::NodeDeleted, "/a", true),
    ];
    for (event_type, path, fires) in script {
        h.notify(event_type, path);
        let expected = if fires {
            vec![fired(w, event_type, path)]
        } else {
            vec![]
        };
        assert_eq!(
            watch_events(&h.drain_events()),
            expected,
            "{event_type:?} {path}"
        );
    }
    assert_eq!(h.session.watch_count(), 1, "persistent watches stay");
}

/// Notifications and replies in one read come out as events in wire order.
#[test]
fn notifications_and_replies_keep_wire_order() {
    let (w1, w2) = (WatcherId(1), WatcherId(2));
    let mut h = Harness::with_session();
    h.submit(get_data("/o", Some(w1)));
    h.submit(get_data("/p", Some(w2)));
    h.reply(1, 1, ErrorCode::Ok, &data_body(b""));
    h.reply(2, 1, ErrorCode::Ok, &data_body(b""));
    h.drain_events();
    let id = h.submit(get_data("/q", None));

    let mut wire = BytesMut::new();
    wire.extend_from_slice(&notification(EventType::NodeDataChanged, "/o", -1));
    wire.extend_from_slice(&reply_frame(3, 2, ErrorCode::Ok, &data_body(b"q")));
    wire.extend_from_slice(&notification(EventType::NodeDeleted, "/p", -1));
    h.deliver(&wire);

    let events = h.drain_events();
    assert!(matches!(&events[0], Event::Watch { watcher, .. } if *watcher == w1));
    assert!(matches!(&events[1], Event::Reply { id: got, .. } if *got == id));
    assert!(matches!(&events[2], Event::Watch { watcher, .. } if *watcher == w2));
    assert_eq!(events.len(), 3);
}

// ===== 10. reconnect =====

/// After a disconnect the new transport carries ConnectRequest (old id, password,
/// lastZxidSeen), then SetWatches (101) relative to the last zxid; user requests queued
/// meanwhile follow the ConnectResponse; restored watches still fire.
#[test]
fn reconnect_reattaches_and_restores_watches() {
    let (wd, we, wc) = (WatcherId(1), WatcherId(2), WatcherId(3));
    let mut h = Harness::with_session();
    h.submit(get_data("/d", Some(wd)));
    h.submit(exists("/e", Some(we)));
    h.submit(get_children("/c", Some(wc)));
    h.reply(1, 0x10, ErrorCode::Ok, &data_body(b""));
    h.reply(2, 0x11, ErrorCode::NoNode, &[]);
    h.reply(
        3,
        0x20,
        ErrorCode::Ok,
        &GetChildrenResponse { children: vec![] }.to_bytes(),
    );
    h.deliver(&notification(
        EventType::NodeChildrenChanged,
        "/other",
        0x99,
    ));
    assert_eq!(h.session.last_zxid(), 0x20);
    h.sent_frames();
    h.advance(secs(1));
    h.disconnect();
    let queued = h.submit(get_data("/q", None));
    h.drain_events();

    let request = h.open();
    let expected = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0x20,
        timeout: 30_000,
        session_id: SID,
        passwd: Bytes::from_static(&PASSWD),
        read_only: false,
    };
    assert_eq!(request, expected);
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(4, OpCode::SetWatches)]);
    let set_watches = SetWatches {
        relative_zxid: 0x20,
        data_watches: vec!["/d".to_owned()],
        exist_watches: vec!["/e".to_owned()],
        child_watches: vec!["/c".to_owned()],
    };
    assert_eq!(SetWatches::decode_exact(&sent[0].1).unwrap(), set_watches);

    h.accept(&welcome(30_000));
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(5, OpCode::GetData)]);
    assert_eq!(get_data_path(&sent[0].1), "/q");
    h.reply(4, 0x20, ErrorCode::Ok, &[]);
    h.reply(5, 0x21, ErrorCode::Ok, &data_body(b"q"));
    h.notify(EventType::NodeDataChanged, "/d");
    let events = h.drain_events();
    assert_eq!(
        replies(&events),
        [(queued, ok_reply(0x21, &data_body(b"q")))]
    );
    assert_eq!(
        watch_events(&events),
        [fired(wd, EventType::NodeDataChanged, "/d")]
    );
    assert!(drops(&events).is_empty());
}

/// With a persistent watch registered, the restore frame is SetWatches2 (105).
#[test]
fn reconnect_with_persistent_watch_uses_set_watches2() {
    let mut h = Harness::with_session();
    h.submit(add_watch(
        "/p",
        AddWatchMode::PersistentRecursive,
        WatcherId(1),
    ));
    h.submit(add_watch("/s", AddWatchMode::Persistent, WatcherId(2)));
    h.submit(get_data("/d", Some(WatcherId(3))));
    h.reply(
        1,
        7,
        ErrorCode::Ok,
        &ErrorResponse { err: ErrorCode::Ok }.to_bytes(),
    );
    h.reply(
        2,
        8,
        ErrorCode::Ok,
        &ErrorResponse { err: ErrorCode::Ok }.to_bytes(),
    );
    h.reply(3, 9, ErrorCode::Ok, &data_body(b""));
    h.disconnect();
    h.sent_frames();

    assert_eq!(h.open().last_zxid_seen, 9);
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(4, OpCode::SetWatches2)]);
    let expected = SetWatches2 {
        relative_zxid: 9,
        data_watches: vec!["/d".to_owned()],
        exist_watches: vec![],
        child_watches: vec![],
        persistent_watches: vec!["/s".to_owned()],
        persistent_recursive_watches: vec!["/p".to_owned()],
    };
    assert_eq!(SetWatches2::decode_exact(&sent[0].1).unwrap(), expected);
}

// ===== 11. auth =====

/// An auth packet goes out with xid -4 outside the pipeline FIFO: its reply may overtake
/// the reply to an earlier getData, and its zxid is not recorded.
#[test]
fn auth_reply_may_overtake_pipeline_replies() {
    let mut h = Harness::with_session();
    let get = h.submit(get_data("/g", None));
    let login = h.submit(auth("u:p"));
    let sent = h.sent_frames();
    assert_eq!(
        headers(&sent),
        [(1, OpCode::GetData), (AUTH_XID, OpCode::Auth)]
    );
    assert_eq!(sent[1].1, auth_packet("u:p"));
    assert_eq!(h.session.in_flight(), 2);

    h.reply(AUTH_XID, 500, ErrorCode::Ok, &[]);
    h.reply(1, 7, ErrorCode::Ok, &data_body(b"g"));
    let events = h.drain_events();
    let expected = [
        (login, ok_reply(500, &[])),
        (get, ok_reply(7, &data_body(b"g"))),
    ];
    assert_eq!(replies(&events), expected);
    assert!(drops(&events).is_empty());
    assert_eq!(h.session.last_zxid(), 7);
}

/// An accepted credential is replayed right after the ConnectRequest of every new
/// transport, before SetWatches; its reply produces no event.
#[test]
fn accepted_auth_is_replayed_after_reconnect() {
    let mut h = connected_with_data_watch("/w", WatcherId(1), 3);
    h.submit(auth("u:p"));
    h.reply(AUTH_XID, 3, ErrorCode::Ok, &[]);
    let sent = h.reconnect_and_read();
    assert_eq!(
        headers(&sent),
        [(AUTH_XID, OpCode::Auth), (2, OpCode::SetWatches)]
    );
    assert_eq!(sent[0].1, auth_packet("u:p"));
    h.accept(&welcome(30_000));
    h.reply(AUTH_XID, 3, ErrorCode::Ok, &[]);
    h.reply(2, 3, ErrorCode::Ok, &[]);
    assert_eq!(h.drain_events(), [Event::State(SessionState::Connected)]);
    assert_eq!(h.session.in_flight(), 0);
}

/// A credential added again and again is replayed once: the replay list does not grow with
/// every `add_auth` (it did, and every reconnect sent each copy before anything else).
#[test]
fn a_credential_added_again_is_replayed_once() {
    let mut h = Harness::with_session();
    for credential in ["u:p", "u:p", "v:q", "u:p"] {
        h.submit(auth(credential));
        h.reply(AUTH_XID, 3, ErrorCode::Ok, &[]);
    }
    let sent = h.reconnect_and_read();
    assert_eq!(headers(&sent), [(AUTH_XID, OpCode::Auth); 2]);
    assert_eq!(sent[0].1, auth_packet("u:p"));
    assert_eq!(sent[1].1, auth_packet("v:q"));
}

/// AuthFailed (-115) on an auth reply is terminal: the auth and everything in flight fail
/// with AuthFailed, watchers get None/AuthFailed, later submits fail at once.
#[test]
fn auth_failed_is_terminal() {
    let w = WatcherId(1);
    let mut h = connected_with_data_watch("/w", w, 3);
    let get = h.submit(get_data("/g", None));
    let login = h.submit(auth("bad"));
    h.reply(AUTH_XID, 0, ErrorCode::AuthFailed, &[]);

    let events = h.drain_events();
    assert_eq!(states(&events), [SessionState::AuthFailed]);
    let mut answered = replies(&events);
    answered.sort_by_key(|(id, _)| *id);
    assert_eq!(
        answered,
        [
            (get, Err(Error::AuthFailed)),
            (login, Err(Error::AuthFailed))
        ]
    );
    let ended = (w, EventType::None, KeeperState::AuthFailed, String::new());
    assert_eq!(watch_events(&events), [ended]);
    assert_eq!(drops(&events), [DropReason::SessionEnded]);
    assert!(!h.session.wants_connection());
    let late = h.submit(get_data("/late", None));
    h.assert_answered(late, Err(Error::AuthFailed));
}

/// A replayed credential refused on reconnect ends the session too, failing the requests
/// that were queued and written after the ConnectResponse with AuthFailed.
#[test]
fn replayed_auth_refused_on_reconnect_is_terminal() {
    let mut h = Harness::with_session();
    h.submit(auth("u:p"));
    h.reply(AUTH_XID, 0, ErrorCode::Ok, &[]);
    h.disconnect();
    h.drain_events();
    let queued = h.submit(get_data("/q", None));
    h.open();
    h.accept(&welcome(30_000));
    assert_eq!(
        headers(&h.sent_frames()),
        [(AUTH_XID, OpCode::Auth), (1, OpCode::GetData)]
    );
    h.reply(AUTH_XID, 0, ErrorCode::AuthFailed, &[]);
    let events = h.drain_events();
    assert_eq!(
        states(&events),
        [SessionState::Connected, SessionState::AuthFailed]
    );
    assert_eq!(replies(&events), [(queued, Err(Error::AuthFailed))]);
}

// ===== 12. deadlines and cancel =====

/// A queued request whose deadline passes fails with Timeout and is never written.
#[test]
fn queued_request_past_its_deadline_is_never_written() {
    let mut h = Harness::new();
    let id = h.submit(with_deadline(get_data("/t", None), h.at(secs(1))));
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(1))));
    h.advance_quietly(ms(999));
    h.advance(ms(1));
    h.assert_answered(id, Err(Error::Timeout));
    assert!(!h.session.cancel(id), "already answered");
    h.connect();
    assert!(h.sent_frames().is_empty());
}

/// A driver late to its timer handles the ConnectResponse after a queued request's
/// deadline: the request still fails with Timeout and is never written.
#[test]
fn late_timer_never_writes_an_expired_request() {
    let mut h = Harness::new();
    let id = h.submit(with_deadline(get_data("/t", None), h.at(secs(1))));
    h.advance(ms(500));
    h.open();
    h.jump(secs(1)); // 1.5 s, the deadline timer has not fired yet
    h.accept(&welcome(30_000));
    assert!(h.sent_frames().is_empty(), "an expired request was written");
    let events = h.drain_events();
    assert_eq!(replies(&events), [(id, Err(Error::Timeout))]);
}

/// A written request that times out gets Timeout; its late reply is swallowed and the
/// FIFO stays in step for the next one.
#[test]
fn written_request_times_out_and_late_reply_is_swallowed() {
    let mut h = Harness::with_session();
    let slow = h.submit(with_deadline(get_data("/slow", None), h.at(secs(2))));
    let next = h.submit(get_data("/next", None));
    assert_eq!(h.sent_frames().len(), 2);
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(2))));
    h.advance(secs(2));
    h.assert_answered(slow, Err(Error::Timeout));
    assert_eq!(
        h.session.poll_timeout(),
        Some(h.at(secs(9))),
        "the deadline is spent"
    );

    h.reply(1, 4, ErrorCode::Ok, &data_body(b"late"));
    assert!(h.drain_events().is_empty(), "late reply must be swallowed");
    h.reply(2, 5, ErrorCode::Ok, &data_body(b"n"));
    assert_eq!(
        replies(&h.drain_events()),
        [(next, ok_reply(5, &data_body(b"n")))]
    );
    assert_eq!(h.session.in_flight(), 0);
}

/// A `removeWatches` that timed out locally but was applied by the server still removes the
/// local watchers: their event fires and the session holds them no more (nor restores them
/// after a reconnect). They once stayed, waiting for a watch the server no longer had.
#[test]
fn a_removal_applied_after_its_timeout_still_removes_the_local_watchers() {
    let w = WatcherId(7);
    let mut h = connected_with_data_watch("/n", w, 3);
    let body = RemoveWatchesRequest {
        path: "/n".to_owned(),
        watcher_type: WatcherType::Data,
    }
    .to_bytes();
    let removal = Request {
        effect: Effect::RemoveWatches {
            path: "/n".to_owned(),
            watcher_type: WatcherType::Data,
        },
        ..Request::new(OpCode::RemoveWatches, body)
    };
    let id = h.submit(with_deadline(removal, h.at(secs(2))));
    let [(header, _)] = h.sent_frames().try_into().expect("one removeWatches");
    h.advance(secs(2));
    h.assert_answered(id, Err(Error::Timeout));
    h.reply(header.xid, 4, ErrorCode::Ok, &[]);
    assert_eq!(
        watch_events(&h.drain_events()),
        [fired(w, EventType::DataWatchRemoved, "/n")]
    );
    assert!(!h.session.is_watching(w));
    assert_eq!(h.session.watch_count(), 0);
}

/// A written auth with a deadline gives up at the deadline like any other request.
#[test]
fn written_auth_respects_its_deadline() {
    let mut h = Harness::with_session();
    let login = h.submit(with_deadline(auth("u:p"), h.at(secs(2))));
    assert_eq!(headers(&h.sent_frames()), [(AUTH_XID, OpCode::Auth)]);
    assert_eq!(h.session.poll_timeout(), Some(h.at(secs(2))));
    h.advance(secs(2));
    h.assert_answered(login, Err(Error::Timeout));
    h.reply(AUTH_XID, 0, ErrorCode::Ok, &[]);
    assert!(
        h.drain_events().is_empty(),
        "late auth reply must be swallowed"
    );
}

/// cancel() of an unwritten request removes it: never written, no reply event. A written
/// one keeps its FIFO slot and its reply is discarded.
#[test]
fn cancel_unwritten_and_written_requests() {
    let mut h = Harness::new();
    let gone = h.submit(get_data("/gone", None));
    let kept = h.submit(get_data("/kept", None));
    assert!(h.session.cancel(gone));
    assert!(!h.session.cancel(gone));
    h.connect();
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(1, OpCode::GetData)]);
    assert_eq!(get_data_path(&sent[0].1), "/kept");

    let left = h.submit(get_data("/left", None));
    assert!(h.session.cancel(left));
    assert!(!h.session.cancel(left));
    h.reply(1, 1, ErrorCode::Ok, &data_body(b"k"));
    h.reply(2, 2, ErrorCode::Ok, &data_body(b"l"));
    let events = h.drain_events();
    assert_eq!(replies(&events), [(kept, ok_reply(1, &data_body(b"k")))]);
    assert!(drops(&events).is_empty());
}

// ===== 13. oversized =====

/// A request over max_request_len fails at once with RequestTooLarge; nothing is written
/// and the session is untouched. One byte less goes out.
#[test]
fn oversized_request_is_refused_locally() {
    let mut h = Harness::with_session_of(SessionConfig {
        max_request_len: 100,
        ..SessionConfig::default()
    });
    let big = h.submit(Request::new(OpCode::SetData, Bytes::from(vec![0; 93])));
    let refusal = Error::RequestTooLarge { len: 101, max: 100 };
    h.assert_answered(big, Err(refusal));
    assert!(h.sent_frames().is_empty());
    assert_eq!(h.session.state(), SessionState::Connected);
    assert_eq!((h.session.in_flight(), h.session.queued()), (0, 0));

    h.submit(Request::new(OpCode::SetData, Bytes::from(vec![0; 92])));
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(1, OpCode::SetData)]);
    assert_eq!(sent[0].1.len(), 92);
}

// ===== 14. close =====

/// close() sends closeSession (-11); its reply ends the session as Closed; submits made
/// while closing and after fail with Closed.
/// A second close, asked for while the first runs (another clone's), returns when the
/// session has ended, not at once: its caller's ephemeral nodes are gone by then too.
#[test]
fn a_second_close_returns_once_the_first_has_ended_the_session() {
    let mut h = Harness::with_session();
    let first = h.close();
    assert_eq!(headers(&h.sent_frames()), [(1, OpCode::CloseSession)]);
    let second = h.close();
    assert!(replies(&h.drain_events()).is_empty(), "answered before the end");
    h.reply(1, 4, ErrorCode::Ok, &[]);
    let events = h.drain_events();
    let mut answered = replies(&events);
    answered.sort_by_key(|(id, _)| *id);
    assert_eq!(answered, [(first, ok_reply(4, &[])), (second, ok_reply(4, &[]))]);
    assert_eq!(states(&events), [SessionState::Closed]);
}

#[test]
fn close_sends_close_session_and_ends_on_its_reply() {
    let mut h = Harness::with_session();
    let get = h.submit(get_data("/g", None));
    let close = h.close();
    let sent = h.sent_frames();
    assert_eq!(
        headers(&sent),
        [(1, OpCode::GetData), (2, OpCode::CloseSession)]
    );
    assert!(sent[1].1.is_empty());
    let during = h.submit(get_data("/during", None));
    h.assert_answered(during, Err(Error::Closed));

    h.reply(1, 3, ErrorCode::Ok, &data_body(b"g"));
    h.reply(2, 4, ErrorCode::Ok, &[]);
    let events = h.drain_events();
    assert_eq!(
        replies(&events),
        [
            (get, ok_reply(3, &data_body(b"g"))),
            (close, ok_reply(4, &[]))
        ]
    );
    assert_eq!(states(&events), [SessionState::Closed]);
    assert_eq!(drops(&events), [DropReason::SessionEnded]);
    assert!(!h.session.wants_connection());
    assert_eq!(h.session.poll_timeout(), None);
    let after = h.submit(get_data("/after", None));
    h.assert_answered(after, Err(Error::Closed));
}

/// close() while disconnected closes at once; queued requests fail with Closed.
#[test]
fn close_while_disconnected_is_immediate() {
    let mut h = Harness::with_session();
    h.disconnect();
    h.drain_events();
    let queued = h.submit(get_data("/q", None));
    let close = h.close();
    let events = h.drain_events();
    assert_eq!(states(&events), [SessionState::Closed]);
    assert_eq!(
        replies(&events),
        [(queued, Err(Error::Closed)), (close, ok_reply(0, &[]))]
    );
    assert!(h.sent_frames().is_empty());
    assert!(!h.session.wants_connection());
}

/// The server closes the socket right after confirming closeSession; a close whose
/// connection drops before the confirmation still ends the session and succeeds.
#[test]
fn close_cut_off_by_the_connection_still_succeeds() {
    let mut h = Harness::with_session();
    h.drain_events();
    let close = h.close();
    assert_eq!(headers(&h.sent_frames()), [(1, OpCode::CloseSession)]);
    h.disconnect();
    let events = h.drain_events();
    assert_eq!(states(&events), [SessionState::Closed]);
    assert_eq!(replies(&events), [(close, ok_reply(0, &[]))]);
}

/// A session made by a read-only server is local to it: reconnects ask for a new session
/// until a read/write server has served us; from then on the session id is kept.
#[test]
fn read_only_session_is_not_carried_to_a_read_write_server() {
    let mut h = read_only_accepted();
    h.disconnect();
    h.drain_events();
    let second = h.open();
    assert_eq!((second.session_id, &second.passwd[..]), (0, &[0u8; 16][..]));
    h.accept(&welcome(30_000));
    assert_eq!(h.session.state(), SessionState::Connected);
    h.disconnect();
    let third = h.open();
    assert_eq!((third.session_id, &third.passwd[..]), (SID, &PASSWD[..]));
}

/// A reply whose record is malformed for its op is a protocol error: the connection is
/// dropped and the request fails with ConnectionLoss, like everything else in flight.
#[test]
fn malformed_reply_record_drops_the_connection() {
    let mut h = Harness::with_session();
    h.drain_events();
    let first = h.submit(get_data("/a", None));
    let second = h.submit(get_data("/b", None));
    h.sent_frames();
    // A GetChildren-style vector count of 2^31-1 where a GetDataResponse belongs.
    h.reply(1, 5, ErrorCode::Ok, &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    let events = drain_dropped_for_decode_error(&mut h);
    assert_eq!(
        replies(&events),
        [
            (first, Err(Error::ConnectionLoss)),
            (second, Err(Error::ConnectionLoss))
        ]
    );
    assert_eq!(
        h.session.last_zxid(),
        0,
        "nothing taken from a rejected reply"
    );
}

// ===== malformed input =====

/// The events since the last call, which must drop the connection for a decode error.
#[track_caller]
fn drain_dropped_for_decode_error(h: &mut Harness) -> Vec<Event> {
    let events = h.drain_events();
    let dropped = matches!(
        drops(&events)[..],
        [DropReason::Protocol(ProtocolError::Decode(_))]
    );
    assert!(dropped, "{events:?}");
    events
}

/// A notification whose WatcherEvent cannot be decoded drops the connection with a
/// protocol error; the request in flight fails with ConnectionLoss.
#[test]
fn undecodable_notification_drops_the_connection() {
    let mut h = Harness::with_session();
    let get = h.submit(get_data("/g", None));
    h.reply(NOTIFICATION_XID, -1, ErrorCode::Ok, &[0, 0, 0]);
    let events = drain_dropped_for_decode_error(&mut h);
    assert_eq!(replies(&events), [(get, Err(Error::ConnectionLoss))]);
    assert_eq!(states(&events), [SessionState::Disconnected]);
}

/// A frame too short for a ReplyHeader, or with a negative length, drops the connection.
#[test]
fn truncated_reply_header_or_bad_length_drops_the_connection() {
    let mut h = Harness::with_session();
    h.deliver(&frame(|b| b.put_slice(&[0; 10])));
    drain_dropped_for_decode_error(&mut h);

    h.connect();
    h.deliver(&[0xff, 0xff, 0xff, 0xf0]);
    let expected = DropReason::Protocol(ProtocolError::Frame(FrameError::NegativeLength(-16)));
    assert_eq!(drops(&h.drain_events()), [expected]);
}

/// A reply over the frame limit fails the request it answers for good (`ReplyTooLarge`:
/// asking again would get the same reply) and is thrown away as it comes: the connection and
/// the other requests in flight go on. One whose header answers no request in order drops
/// the connection, as any stream that is not what it claims (its oldest request is told the
/// reply was too large all the same).
#[test]
fn a_reply_over_the_frame_limit_fails_its_request_for_good_and_nothing_else() {
    let mut h = Harness::with_session_of(SessionConfig {
        max_frame_len: 1_000,
        ..SessionConfig::default()
    });
    let big = h.submit(get_children("/big", None));
    let next = h.submit(get_data("/a", None));
    let [(first, _), (second, _)] = h.sent_frames().try_into().expect("two requests");
    let oversized = |xid: i32| {
        let mut frame = 1_001_i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&xid.to_be_bytes());
        frame.extend_from_slice(&7_i64.to_be_bytes());
        frame.extend_from_slice(&0_i32.to_be_bytes());
        frame.resize(4 + 1_001, b'x');
        frame
    };
    let too_large = Error::ReplyTooLarge {
        len: 1_001,
        max: 1_000,
    };
    assert!(!too_large.is_retryable());
    for chunk in oversized(first.xid).chunks(300) {
        h.deliver(chunk);
    }
    let events = h.drain_events();
    assert_eq!(replies(&events), [(big, Err(too_large.clone()))]);
    assert!(drops(&events).is_empty(), "{events:?}");
    h.reply(second.xid, 8, ErrorCode::Ok, &data_body(b"v"));
    let answered = replies(&h.drain_events());
    assert!(
        matches!(&answered[..], [(id, Ok(_))] if *id == next),
        "{answered:?}"
    );

    let stray = h.submit(get_data("/b", None));
    let [(third, _)] = h.sent_frames().try_into().expect("one request");
    h.deliver(&oversized(third.xid.wrapping_add(1))[..20]);
    let events = h.drain_events();
    assert_eq!(replies(&events), [(stray, Err(too_large))]);
    let frame = FrameError::TooLong {
        len: 1_001,
        max: 1_000,
    };
    assert_eq!(
        drops(&events),
        [DropReason::Protocol(ProtocolError::Frame(frame))]
    );
}

/// A ConnectResponse that cannot be decoded drops the attempt without ending the session.
#[test]
fn undecodable_connect_response_drops_the_attempt() {
    let mut h = Harness::new();
    h.open();
    h.deliver(&frame(|b| b.put_slice(&[0; 10])));
    drain_dropped_for_decode_error(&mut h);
    assert!(h.session.wants_connection());
}

// ===== 15. exactly once =====

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A scripted server that answers whatever the session wrote on the current transport, and
/// a ledger of every request id and the replies it got.
struct Model {
    h: Harness,
    rng: Rng,
    generation: u64,
    /// The server has sent its ConnectResponse on the current transport.
    accepted: bool,
    /// Pipeline xids received and not answered, in order.
    pipeline: VecDeque<i32>,
    /// Auth packets received and not answered.
    auths: usize,
    zxid: i64,
    submitted: Vec<RequestId>,
    cancelled: HashSet<RequestId>,
    answered: HashMap<RequestId, usize>,
    /// How often each outcome was seen, to check the run explored something.
    outcomes: HashMap<&'static str, usize>,
}

impl Model {
    fn new(seed: u64) -> Self {
        Self {
            h: Harness::with_config(config(secs(6))),
            rng: Rng(seed),
            generation: 0,
            accepted: false,
            pipeline: VecDeque::new(),
            auths: 0,
            zxid: 0,
            submitted: Vec::new(),
            cancelled: HashSet::new(),
            answered: HashMap::new(),
            outcomes: HashMap::new(),
        }
    }

    /// Reads what the session wrote; forgets the server side of a transport that went away.
    fn sync(&mut self) {
        if self.generation != self.h.peer.generation {
            self.generation = self.h.peer.generation;
            self.accepted = false;
            self.pipeline.clear();
            self.auths = 0;
        }
        for (header, _) in self.h.sent_frames() {
            if header.xid == AUTH_XID {
                self.auths += 1;
            } else {
                assert!(
                    header.xid > 0 || header.xid == PING_XID,
                    "bad xid {}",
                    header.xid
                );
                self.pipeline.push_back(header.xid);
            }
        }
    }

    fn record_events(&mut self) {
        for event in self.h.drain_events() {
            *self.outcomes.entry(outcome(&event)).or_default() += 1;
            if let Event::Reply { id, .. } = event {
                let count = self.answered.entry(id).or_default();
                *count += 1;
                assert_eq!(*count, 1, "{id:?} answered twice");
                assert!(
                    !self.cancelled.contains(&id),
                    "{id:?} answered after cancel"
                );
            }
        }
    }

    fn step(&mut self) {
        self.sync();
        let serving = self.accepted && self.generation == self.h.peer.generation;
        match self.rng.below(16) {
            0..=2 => self.submit(),
            3 if self.rng.chance(30) => self.submit_auth(),
            4..=6 if serving && !self.pipeline.is_empty() => self.answer(),
            7 if serving && self.auths > 0 => self.answer_auth(),
            8 if serving && self.rng.chance(10) => self.h.reply(1_000_000, 1, ErrorCode::Ok, &[]),
            9 if serving => self.notify(),
            10 => self.h.advance(ms(self.rng.below(5_000))),
            11 if self.rng.chance(40) && !self.h.session.wants_connection() => self.h.disconnect(),
            12 | 13 if self.h.session.wants_connection() => self.reconnect(),
            14 => self.cancel(),
            15 if self.rng.chance(5) => {
                let id = self.h.close();
                self.submitted.push(id);
            }
            _ => {}
        }
        self.record_events();
    }

    fn submit(&mut self) {
        let path = format!("/n{}", self.rng.below(4));
        let watcher = self.rng.chance(50).then(|| WatcherId(self.rng.below(8)));
        let mut request = get_data(&path, watcher);
        if self.rng.chance(30) {
            request.deadline = Some(self.h.now + ms(self.rng.below(15_000)));
        }
        let id = self.h.submit(request);
        self.submitted.push(id);
    }

    fn submit_auth(&mut self) {
        let id = self.h.submit(auth("u:p"));
        self.submitted.push(id);
    }

    fn answer(&mut self) {
        let xid = self.pipeline.pop_front().unwrap_or_default();
        let ping = xid == PING_XID;
        let err = if !ping && self.rng.chance(30) {
            ErrorCode::NoNode
        } else {
            ErrorCode::Ok
        };
        let body = if err == ErrorCode::Ok && !ping {
            data_body(b"x")
        } else {
            Bytes::new()
        };
        self.zxid += 1;
        self.h.reply(xid, self.zxid, err, &body);
    }

    fn answer_auth(&mut self) {
        self.auths -= 1;
        let err = if self.rng.chance(3) {
            ErrorCode::AuthFailed
        } else {
            ErrorCode::Ok
        };
        self.h.reply(AUTH_XID, 0, err, &[]);
    }

    fn notify(&mut self) {
        let types = [
            EventType::NodeCreated,
            EventType::NodeDataChanged,
            EventType::NodeDeleted,
        ];
        let event_type = types[self.rng.below(3) as usize];
        let path = format!("/n{}", self.rng.below(4));
        self.h.notify(event_type, &path);
    }

    fn reconnect(&mut self) {
        self.h.open();
        self.sync();
        if self.rng.chance(20) {
            return; // the server stays silent: the connect timeout will fire
        }
        let response = if self.rng.chance(3) {
            expired_response()
        } else {
            welcome(6_000)
        };
        self.h.accept(&response);
        self.accepted = self.generation == self.h.peer.generation && !response.is_expired();
    }

    fn cancel(&mut self) {
        if self.submitted.is_empty() {
            return;
        }
        let id = self.submitted[self.rng.below(self.submitted.len() as u64) as usize];
        if self.h.session.cancel(id) {
            assert!(
                !self.answered.contains_key(&id),
                "cancel() true for answered {id:?}"
            );
            self.cancelled.insert(id);
            *self.outcomes.entry("cancelled").or_default() += 1;
        }
    }

    /// Ends the session so that everything still pending must be answered, then checks
    /// that every request got exactly one reply unless it was cancelled.
    fn finish(mut self) -> HashMap<&'static str, usize> {
        if !self.h.session.wants_connection() && !self.h.session.state().is_terminal() {
            self.h.disconnect();
        }
        let id = self.h.close();
        self.submitted.push(id);
        self.record_events();
        assert!(self.h.session.state().is_terminal());
        assert_eq!(
            (self.h.session.in_flight(), self.h.session.queued()),
            (0, 0)
        );
        for id in &self.submitted {
            let expected = usize::from(!self.cancelled.contains(id));
            assert_eq!(
                self.answered.get(id).copied().unwrap_or(0),
                expected,
                "{id:?}"
            );
        }
        self.outcomes
    }
}

/// A coarse name for what an event says, for the exploration tally.
fn outcome(event: &Event) -> &'static str {
    match event {
        Event::Reply { result: Ok(_), .. } => "ok",
        Event::Reply {
            result: Err(Error::NoNode),
            ..
        } => "no node",
        Event::Reply {
            result: Err(Error::ConnectionLoss),
            ..
        } => "connection loss",
        Event::Reply {
            result: Err(Error::Timeout),
            ..
        } => "timeout",
        Event::Reply {
            result: Err(Error::SessionExpired),
            ..
        } => "expired",
        Event::Reply {
            result: Err(Error::AuthFailed),
            ..
        } => "auth failed",
        Event::Reply {
            result: Err(Error::Closed),
            ..
        } => "closed",
        Event::Reply { .. } => "other error",
        Event::Watch { .. } => "watch",
        Event::State(_) => "state",
        Event::DropConnection(DropReason::Protocol(_)) => "protocol drop",
        Event::DropConnection(DropReason::ReadTimeout) => "read timeout",
        Event::DropConnection(DropReason::ConnectTimeout) => "connect timeout",
        Event::DropConnection(_) => "session ended",
    }
}

/// Random interleavings of submit, in-order and wrong-xid replies, auth, notifications,
/// time, disconnects, reconnects (some expired or silent), cancel and close: every request
/// gets exactly one reply unless cancelled, and nothing panics.
#[test]
fn every_request_is_answered_exactly_once() {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for seed in 0..300 {
        let mut model = Model::new(seed);
        model.reconnect();
        for _ in 0..60 {
            model.step();
        }
        for (name, n) in model.finish() {
            *seen.entry(name).or_default() += n;
        }
    }
    let all = [
        "ok",
        "no node",
        "connection loss",
        "timeout",
        "expired",
        "auth failed",
        "closed",
        "watch",
        "protocol drop",
        "read timeout",
        "connect timeout",
        "cancelled",
    ];
    for name in all {
        assert!(
            seen.get(name).copied().unwrap_or(0) > 0,
            "never saw {name}: {seen:?}"
        );
    }
    assert!(!seen.contains_key("other error"), "{seen:?}");
}

// ===== lease: trust measured from what the server acknowledged =====

/// The handshake acknowledges the ConnectRequest: the lease runs T from when it was sent.
#[test]
fn the_handshake_starts_the_lease_at_the_connect_request() {
    let mut h = Harness::new();
    assert_eq!(
        h.session.lease_deadline(),
        None,
        "no lease before a handshake"
    );
    h.advance(secs(1));
    h.open();
    h.advance(ms(300));
    h.accept(&welcome(30_000));
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(31))));
}

/// Notifications arrive without the server hearing from us: any number of them, for as long
/// as they flow, never move the lease.
#[test]
fn notifications_never_extend_the_lease() {
    let mut h = Harness::with_session();
    let id = h.submit(add_watch("/n", AddWatchMode::Persistent, WatcherId(1)));
    let [(header, _)] = h.sent_frames().try_into().expect("one addWatch");
    h.advance(secs(1));
    h.reply(header.xid, 5, ErrorCode::Ok, &[0; 4]);
    assert_eq!(replies(&h.drain_events()), [(id, ok_reply(5, &[0; 4]))]);
    // Answered at 1 s, but sent at 0 s: the lease runs from the send.
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
    for _ in 0..50 {
        h.jump(ms(100));
        h.notify(EventType::NodeDataChanged, "/n");
    }
    assert_eq!(watch_events(&h.drain_events()).len(), 50);
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
}

/// A late reply extends the lease only to its own request's send instant, not to when it
/// arrived; replies to older requests never move it backwards.
#[test]
fn a_reply_extends_the_lease_to_its_own_send_instant() {
    let mut h = Harness::with_session();
    h.advance(secs(2));
    h.submit(get_data("/a", None));
    h.advance(secs(3));
    h.submit(get_data("/b", None));
    let sent = h.sent_frames();
    assert_eq!(headers(&sent), [(1, OpCode::GetData), (2, OpCode::GetData)]);
    h.advance(secs(2)); // 7 s
    h.reply(1, 1, ErrorCode::Ok, &data_body(b""));
    h.assert_lease(secs(32), "sent at 2 s, answered at 7 s");
    h.reply(2, 2, ErrorCode::NoNode, &[]);
    h.assert_lease(secs(35), "an error reply is an answer too");
}

/// Auth replies are sent inline, outside the session tracker's request path: they never
/// renew the lease.
#[test]
fn auth_replies_do_not_extend_the_lease() {
    let mut h = Harness::with_session();
    h.advance(secs(5));
    h.submit(auth("alice:pw"));
    let [(header, _)] = h.sent_frames().try_into().expect("one auth frame");
    assert_eq!(header.xid, AUTH_XID);
    h.reply(AUTH_XID, 0, ErrorCode::Ok, &[]);
    assert_eq!(replies(&h.drain_events()).len(), 1);
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
}

/// With only notifications flowing (nothing else sent), pings still go out every ping
/// interval (9 s ≤ T/3 for T = 30 s) after the last acknowledgement, and each answered
/// ping renews the lease to its send instant.
#[test]
fn pings_renew_the_lease_every_interval_while_notifications_flow() {
    let mut h = Harness::with_session();
    let mut pings = Vec::new();
    for step in 1..=600u32 {
        // A notification every 100 ms, for 60 s.
        h.advance(ms(100));
        h.notify(EventType::NodeDataChanged, "/nobody-watches");
        for (header, _) in h.sent_frames() {
            assert_eq!(header.xid, PING_XID, "only pings are sent");
            pings.push(h.now);
            // Answered 50 ms later (the next step's notifications are still in flight).
            h.jump(ms(50));
            h.reply(PING_XID, 0, ErrorCode::Ok, &[]);
            h.jump(ms(0));
        }
        let lease = h.session.lease_deadline().expect("a lease");
        let age = secs(30).saturating_sub(lease.saturating_duration_since(h.now));
        assert!(
            age <= secs(10) + ms(200),
            "lease renewed at least every T/3 (step {step}, age {age:?})"
        );
    }
    assert!(drops(&h.drain_events()).is_empty(), "never disconnected");
    assert!(pings.len() >= 6, "{} pings in 60 s", pings.len());
    for pair in pings.windows(2) {
        assert!(pair[1] - pair[0] <= secs(10), "{:?}", pair[1] - pair[0]);
    }
}

/// A ping left unanswered for the read timeout drops the connection even though
/// notifications keep arriving (one-way loss: the server no longer hears us, but its
/// notifications still reach us).
#[test]
fn an_unanswered_ping_drops_the_connection_while_notifications_flow() {
    let mut h = Harness::with_session();
    let mut dropped_at = None;
    for _ in 0..400 {
        h.advance(ms(100));
        if h.session.wants_connection() {
            dropped_at = Some(h.now);
            break;
        }
        h.notify(EventType::NodeDataChanged, "/n");
    }
    // The ping went out at 9 s; unanswered at 9 s + 20 s.
    assert_eq!(dropped_at, Some(h.at(secs(29))));
    let events = h.drain_events();
    assert_eq!(drops(&events), [DropReason::ReadTimeout]);
    assert_eq!(states(&events), [SessionState::Disconnected]);
    // Dropped before the lease ran out (30 s): the next server can still save the session.
    assert!(h.session.lease_deadline() > Some(h.now));
}

/// The same for a request: unanswered for the read timeout drops the connection, however
/// recently the last byte arrived.
#[test]
fn an_unanswered_request_drops_the_connection_while_notifications_flow() {
    let mut h = Harness::with_session();
    h.advance(secs(1));
    let get = h.submit(get_data("/slow", None));
    assert_eq!(h.sent_frames().len(), 1);
    for _ in 0..19 {
        h.advance(secs(1));
        h.notify(EventType::NodeDataChanged, "/n");
    }
    h.advance(ms(999)); // 20.999 s: 19.999 s after the request was sent
    assert!(drops(&h.drain_events()).is_empty());
    h.advance(ms(1));
    let events = h.drain_events();
    assert_eq!(drops(&events), [DropReason::ReadTimeout]);
    assert_eq!(replies(&events), [(get, Err(Error::ConnectionLoss))]);
}

/// The lease is kept across a disconnection (the server's clock runs on), renewed by the
/// next handshake, and gone once the session has ended.
#[test]
fn the_lease_survives_a_reconnect_and_ends_with_the_session() {
    let mut h = Harness::with_session();
    h.advance(secs(3));
    h.disconnect();
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
    h.advance(secs(2));
    h.open();
    h.accept(&welcome(30_000));
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(35))));
    h.disconnect();
    h.open();
    h.accept(&expired_response());
    assert_eq!(h.session.state(), SessionState::Expired);
    assert_eq!(h.session.lease_deadline(), None);
}

/// A read-only server's answers are not the quorum's: they never renew the lease.
#[test]
fn a_read_only_server_never_renews_the_lease() {
    let mut h = Harness::with_session_of(SessionConfig {
        read_only: true,
        ..config(secs(30))
    });
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
    h.advance(secs(1));
    h.disconnect();
    h.advance(secs(1));
    h.open();
    let mut read_only = welcome(30_000);
    read_only.read_only = Some(true);
    h.accept(&read_only);
    assert_eq!(h.session.state(), SessionState::ConnectedReadOnly);
    h.submit(get_data("/r", None));
    let [(header, _)] = h.sent_frames().try_into().expect("one getData");
    h.reply(header.xid, 3, ErrorCode::Ok, &data_body(b""));
    assert_eq!(h.session.lease_deadline(), Some(h.at(secs(30))));
}

/// A notification for a path no local watcher knows (a watch we removed locally, or a
/// server's spurious event) is ignored: the connection stays up.
#[test]
fn a_notification_nobody_watches_is_ignored() {
    let mut h = Harness::with_session();
    for event_type in [
        EventType::NodeCreated,
        EventType::NodeDeleted,
        EventType::NodeDataChanged,
        EventType::NodeChildrenChanged,
        EventType::None,
    ] {
        h.notify(event_type, "/nobody/watches/this");
    }
    h.deliver(&notification(EventType::NodeDeleted, "", 7));
    h.deliver(&notification(EventType::NodeDeleted, "no-slash", 7));
    let events = h.drain_events();
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(h.session.state(), SessionState::Connected);
}

// ===== SASL =====

/// A mechanism scripted as: empty initial token, `challenge` answered with `response`, then
/// `proof` completes the exchange; anything else is refused.
#[derive(Debug)]
struct ScriptedSasl;

struct ScriptedExchange;

impl super::SaslMechanism for ScriptedSasl {
    fn name(&self) -> &'static str {
        "SCRIPTED"
    }

    fn start(&self, _server_host: &str) -> Box<dyn super::SaslExchange> {
        Box::new(ScriptedExchange)
    }
}

impl super::SaslExchange for ScriptedExchange {
    fn initial_response(&mut self) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }

    fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match server_token {
            b"challenge" => Ok(Some(b"response".to_vec())),
            b"proof" => Ok(None),
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

fn sasl_config() -> SessionConfig {
    SessionConfig {
        sasl: Some(std::sync::Arc::new(ScriptedSasl)),
        auth: vec![auth_packet("bob:pw")],
        ..config(secs(30))
    }
}

fn sasl_body(token: &[u8]) -> Bytes {
    crate::proto::SaslToken {
        token: Some(Bytes::copy_from_slice(token)),
    }
    .to_bytes()
}

/// Runs the scripted exchange on a fresh transport; returns the frames written once it
/// completed.
fn authenticate(h: &mut Harness) -> Vec<(RequestHeader, Bytes)> {
    h.open();
    h.accept(&welcome(30_000));
    let [(first, token)] = h
        .sent_frames()
        .try_into()
        .expect("only the first SASL step");
    assert_eq!(first.op, OpCode::Sasl);
    assert_eq!(token, sasl_body(b""));
    assert!(
        states(&h.drain_events()).is_empty(),
        "not connected before SASL completes"
    );
    h.reply(first.xid, 1, ErrorCode::Ok, &sasl_body(b"challenge"));
    let [(second, token)] = h
        .sent_frames()
        .try_into()
        .expect("only the second SASL step");
    assert_eq!((second.op, token), (OpCode::Sasl, sasl_body(b"response")));
    h.reply(second.xid, 1, ErrorCode::Ok, &sasl_body(b"proof"));
    h.sent_frames()
}

/// SASL runs first on every connection: auth replays, SetWatches and requests queued
/// meanwhile are written only once the exchange completes.
#[test]
fn sasl_runs_before_anything_else_on_every_connection() {
    let mut h = Harness::with_config(sasl_config());
    let early = h.submit(get_data("/early", None));
    let after = authenticate(&mut h);
    assert_eq!(
        after.iter().map(|(h, _)| h.op).collect::<Vec<_>>(),
        [OpCode::Auth, OpCode::GetData],
        "auth replay, then the queued request"
    );
    assert_eq!(states(&h.drain_events()), [SessionState::Connected]);
    let xid = after[1].0.xid;
    h.reply(AUTH_XID, 1, ErrorCode::Ok, &[]);
    h.reply(xid, 2, ErrorCode::Ok, &data_body(b"v"));
    assert_eq!(
        replies(&h.drain_events()),
        [(early, ok_reply(2, &data_body(b"v")))]
    );

    // A watch to restore, a request queued while disconnected: both wait for SASL again.
    let watched = h.submit(get_data("/w", Some(WatcherId(1))));
    let [(header, _)] = h.sent_frames().try_into().expect("one getData");
    h.reply(header.xid, 3, ErrorCode::Ok, &data_body(b"w"));
    assert_eq!(replies(&h.drain_events()).len(), 1, "{watched:?} answered");
    h.disconnect();
    assert_eq!(states(&h.drain_events()), [SessionState::Disconnected]);
    h.submit(get_data("/queued", None));
    let after = authenticate(&mut h);
    assert_eq!(
        after.iter().map(|(h, _)| h.op).collect::<Vec<_>>(),
        [OpCode::Auth, OpCode::SetWatches, OpCode::GetData],
    );
}

/// A SASL step the server refuses ends the session: retrying the same credentials cannot
/// succeed.
#[test]
fn sasl_refused_by_the_server_is_terminal() {
    let mut h = Harness::with_config(sasl_config());
    let queued = h.submit(get_data("/x", None));
    h.open();
    h.accept(&welcome(30_000));
    let [(first, _)] = h.sent_frames().try_into().expect("the first SASL step");
    h.reply(first.xid, 0, ErrorCode::SessionClosedRequireSaslAuth, &[]);
    let events = h.drain_events();
    assert_eq!(states(&events), [SessionState::AuthFailed]);
    assert_eq!(replies(&events), [(queued, Err(Error::AuthFailed))]);
    assert!(!h.session.wants_connection());
    assert_eq!(
        h.session.sasl_failure(),
        None,
        "the server's refusal has no reason"
    );
}

/// A server token the mechanism rejects (a failed server proof) ends the session too.
#[test]
fn sasl_refused_by_the_client_is_terminal() {
    let mut h = Harness::with_config(sasl_config());
    h.open();
    h.accept(&welcome(30_000));
    let [(first, _)] = h.sent_frames().try_into().expect("the first SASL step");
    h.reply(first.xid, 0, ErrorCode::Ok, &sasl_body(b"forged"));
    assert_eq!(states(&h.drain_events()), [SessionState::AuthFailed]);
    assert!(h.sent_frames().is_empty());
    assert_eq!(
        h.session.sasl_failure(),
        Some(r#"unexpected [102, 111, 114, 103, 101, 100]"#)
    );
}

/// Without SASL configured, a server that requires it answers the first request with -124
/// and closes: the session ends rather than reconnect into the same refusal forever.
#[test]
fn a_server_requiring_sasl_ends_a_session_without_it() {
    let mut h = Harness::with_session();
    let id = h.submit(get_data("/x", None));
    let [(header, _)] = h.sent_frames().try_into().expect("one getData");
    h.reply(header.xid, 0, ErrorCode::SessionClosedRequireSaslAuth, &[]);
    let events = h.drain_events();
    assert_eq!(
        replies(&events),
        [(id, Err(Error::SessionClosedRequireSaslAuth))]
    );
    assert_eq!(states(&events), [SessionState::AuthFailed]);
}

// ===== session renewal =====

/// With `renew_on_expiry`, an expired handshake starts a new session: requests not yet sent
/// wait for the new session, one-shot watchers end
/// with an Expired event, persistent ones get it as a marker and are registered again, and
/// the new handshake asks for a new session (id 0, zero password).
#[test]
fn renewal_replaces_an_expired_session() {
    let (one_shot, persistent) = (WatcherId(1), WatcherId(2));
    let mut h = Harness::with_session_of(SessionConfig {
        renew_on_expiry: true,
        ..config(secs(30))
    });
    h.submit(get_data("/w", Some(one_shot)));
    h.submit(add_watch(
        "/p",
        AddWatchMode::PersistentRecursive,
        persistent,
    ));
    let [(a, _), (b, _)] = h.sent_frames().try_into().expect("two requests");
    h.reply(a.xid, 5, ErrorCode::Ok, &data_body(b"v"));
    h.reply(b.xid, 6, ErrorCode::Ok, &[0; 4]);
    let in_flight = h.submit(get_data("/in-flight", None));
    assert_eq!(h.sent_frames().len(), 1);
    h.drain_events();
    h.disconnect();
    // What was in flight is lost with the connection, before anyone knows of the expiry.
    assert_eq!(
        replies(&h.drain_events()),
        [(in_flight, Err(Error::ConnectionLoss))]
    );
    let queued = h.submit(get_data("/queued", None));
    let request = h.open();
    assert_eq!(
        request.session_id, SID,
        "the old session is asked for first"
    );
    h.accept(&expired_response());

    let events = h.drain_events();
    assert_eq!(
        states(&events),
        [SessionState::Expired, SessionState::Connecting]
    );
    assert!(
        replies(&events).is_empty(),
        "{queued:?} waits for the new session"
    );
    let marker = |w| (w, EventType::None, KeeperState::Expired, String::new());
    assert_eq!(
        watch_events(&events),
        [marker(one_shot), marker(persistent)]
    );
    assert!(h.session.is_watching(persistent) && !h.session.is_watching(one_shot));
    assert_eq!(
        h.session.lease_deadline(),
        None,
        "nothing of the new session is known"
    );

    let request = h.open();
    assert_eq!(
        (request.session_id, &request.passwd[..]),
        (0, &ZERO_PASSWD[..])
    );
    let renewed = ConnectResponse {
        session_id: SID + 1,
        ..welcome(30_000)
    };
    h.accept(&renewed);
    assert_eq!(states(&h.drain_events()), [SessionState::Connected]);
    assert_eq!(h.session.session_id(), SID + 1);
    let after: Vec<OpCode> = h.sent_frames().iter().map(|(h, _)| h.op).collect();
    assert_eq!(
        after,
        [OpCode::SetWatches2, OpCode::GetData],
        "watch, then {queued:?}"
    );
}

/// A request bound to a session runs on it, even across a reconnect; one still unwritten
/// when a renewal replaced its session fails with `SessionExpired` and is never written,
/// while an unbound one waits for the new session and runs there.
#[test]
fn a_request_bound_to_a_session_never_runs_on_its_successor() {
    let mut h = Harness::with_session_of(SessionConfig {
        renew_on_expiry: true,
        ..config(secs(30))
    });
    let bound = |path: &str, session| Request {
        session: Some(session),
        ..get_data(path, None)
    };
    // Its own session: written, through a reconnect of that session too.
    h.submit(bound("/now", SID));
    assert_eq!(h.sent_frames().len(), 1);
    h.disconnect();
    h.drain_events();
    let across_reconnect = h.submit(bound("/across", SID));
    h.open();
    h.accept(&welcome(30_000));
    let written: Vec<String> = h.sent_frames().iter().map(|(_, b)| get_data_path(b)).collect();
    assert_eq!(written, ["/across"], "{across_reconnect:?}");
    h.drain_events();

    h.disconnect();
    h.drain_events();
    let stale = h.submit(bound("/stale", SID));
    let unbound = h.submit(get_data("/unbound", None));
    h.open();
    h.accept(&expired_response());
    h.open();
    h.accept(&ConnectResponse {
        session_id: SID + 1,
        ..welcome(30_000)
    });
    let events = h.drain_events();
    assert_eq!(replies(&events), [(stale, Err(Error::SessionExpired))]);
    let written: Vec<String> = h.sent_frames().iter().map(|(_, b)| get_data_path(b)).collect();
    assert_eq!(written, ["/unbound"], "{unbound:?} runs on the new session");
    // Bound to the new session, it runs; to the old one, it fails at once.
    h.submit(bound("/renewed", SID + 1));
    let old = h.submit(bound("/old", SID));
    assert_eq!(
        replies(&h.drain_events()),
        [(old, Err(Error::SessionExpired))]
    );
    let written: Vec<String> = h.sent_frames().iter().map(|(_, b)| get_data_path(b)).collect();
    assert_eq!(written, ["/renewed"]);
}

/// Moves `h`, disconnected with a 30 s session, past 4/3 of the timeout: the session expires
/// locally and a renewal begins. The events on the way.
#[track_caller]
fn expired_locally_and_renewing(h: &mut Harness) -> Vec<Event> {
    h.advance(secs(41));
    let events = h.drain_events();
    assert_eq!(
        states(&events),
        [
            SessionState::Disconnected,
            SessionState::Expired,
            SessionState::Connecting
        ]
    );
    events
}

/// A request bound to a session that a renewal has replaced is answered at once, whether
/// it was queued before the renewal or submitted while the new session is still being made:
/// with no server reachable it would otherwise wait for the next handshake, for ever.
#[test]
fn a_request_bound_to_an_expired_session_is_answered_without_a_server() {
    let mut h = Harness::with_session_of(SessionConfig {
        renew_on_expiry: true,
        ..config(secs(30))
    });
    let bound = |path: &str| Request {
        session: Some(SID),
        ..get_data(path, None)
    };
    h.disconnect();
    let queued = h.submit(bound("/queued"));
    let unbound = h.submit(get_data("/unbound", None));
    let events = expired_locally_and_renewing(&mut h);
    assert_eq!(replies(&events), [(queued, Err(Error::SessionExpired))]);
    let late = h.submit(bound("/late"));
    assert_eq!(
        replies(&h.drain_events()),
        [(late, Err(Error::SessionExpired))]
    );
    // The unbound one waits for the new session.
    h.open();
    h.accept(&ConnectResponse {
        session_id: SID + 1,
        ..welcome(30_000)
    });
    let written: Vec<String> = h.sent_frames().iter().map(|(_, b)| get_data_path(b)).collect();
    assert_eq!(written, ["/unbound"], "{unbound:?}");
}

/// Without renewal an expiry still ends the session (the default).
#[test]
fn without_renewal_expiry_is_terminal() {
    let mut h = Harness::with_session();
    h.disconnect();
    h.open();
    h.accept(&expired_response());
    assert_eq!(
        states(&h.drain_events()),
        [SessionState::Disconnected, SessionState::Expired]
    );
    assert!(!h.session.wants_connection());
}

/// A local expiry (no server reachable for 4/3 of the timeout) renews the same way.
#[test]
fn local_expiry_renews_too() {
    let mut h = Harness::with_session_of(SessionConfig {
        renew_on_expiry: true,
        ..config(secs(30))
    });
    h.disconnect();
    expired_locally_and_renewing(&mut h);
    assert!(h.session.wants_connection());
    assert_eq!(h.open().session_id, 0);
}

mod lease;
