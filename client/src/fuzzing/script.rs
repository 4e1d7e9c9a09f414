//! The session target's script: reading the fuzzer's bytes, and the requests, configurations
//! and server frames they select.

use std::time::Duration;

use bytes::Bytes;

use crate::jute::{Encode, DEFAULT_MAX_FRAME_LEN, JUTE_MAX_BUFFER};
use crate::proto::frames::frame;
use crate::proto::{
    op, sample_request, Acl, AddWatchMode, AddWatchRequest, AuthPacket, CheckVersionRequest,
    ConnectResponse, CreateMode, CreateRequest, DeleteRequest, ErrorCode, EventType, ExistsRequest,
    GetChildren2Request, GetChildrenRequest, GetDataRequest, KeeperState, MultiOp, MultiRequest,
    OpCode, Operation, RemoveWatchesRequest, SetDataRequest, SyncRequest, WatcherType, OPERATIONS,
};
use crate::session::{Effect, Request, SessionConfig, WatchKind};

/// The fuzzer's bytes, read front to back; missing bytes read as 0.
pub(super) struct Script<'a> {
    pub(super) data: &'a [u8],
}

impl<'a> Script<'a> {
    pub(super) fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.data.split_first() else {
            return 0;
        };
        self.data = rest;
        b
    }

    pub(super) fn take(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        taken
    }
}

/// The watch a request registers when it succeeds; the harness names the watcher.
pub(super) struct WatchSpec {
    pub(super) path: String,
    pub(super) kind: WatchKind,
    /// An exists registers an exist watch on NoNode too.
    pub(super) exists: bool,
}

/// The session configuration from the script's first two bytes.
pub(super) fn config(a: u8, b: u8) -> SessionConfig {
    let timeouts = [0, 1, 100, 2_000, 30_000, 600_000];
    SessionConfig {
        session_timeout: Duration::from_millis(timeouts[usize::from(a) % timeouts.len()]),
        connect_timeout: match (a >> 3) % 3 {
            0 => None,
            1 => Some(Duration::ZERO),
            _ => Some(Duration::from_millis(500)),
        },
        host_count: usize::from(b % 4),
        read_only: b & 4 != 0,
        max_request_len: if b & 8 == 0 { JUTE_MAX_BUFFER } else { 48 },
        max_frame_len: if b & 16 == 0 {
            DEFAULT_MAX_FRAME_LEN
        } else {
            64
        },
        resume: (b & 32 != 0).then(|| (SESSION_ID, Bytes::from_static(&PASSWD))),
        auth: if b & 64 == 0 {
            Vec::new()
        } else {
            vec![auth_packet(b"user:secret")]
        },
        // The model does not cover the SASL phase yet; the session tests do.
        sasl: None,
        renew_on_expiry: b & 128 != 0,
        // The lease's syncs are scripted replies like any other (every other config).
        relay_bound: (a & 64 != 0).then(|| Duration::from_millis(400)),
    }
}

/// A ConnectResponse: expired (two ways), read-only, without the read-only byte, for another
/// session id, or plain; with a negotiated timeout from 1 ms to `i32::MAX` ms.
pub(super) fn connect_frame(sel: u8) -> Bytes {
    let timeouts = [1, 100, 2_000, 30_000, i32::MAX];
    let mut response = ConnectResponse {
        protocol_version: 0,
        timeout: timeouts[usize::from(sel >> 3) % timeouts.len()],
        session_id: SESSION_ID,
        passwd: Bytes::from_static(&PASSWD),
        read_only: Some(false),
    };
    match sel % 8 {
        0 => (response.timeout, response.session_id) = (0, 0),
        1 => response.timeout = -1,
        2 => response.read_only = Some(true),
        3 => response.read_only = None,
        4 => response.session_id = SESSION_ID + 1,
        _ => {}
    }
    frame(|b| response.encode(b))
}

/// A request of kind `byte % (15 + n)` on a path chosen by `flags` (bit 3: with a watch), and
/// the watch it registers on success: kinds 0 to 14 are written below (watches, effects, auth,
/// an oversized and an unknown request), kind `15 + i` is the sample request
/// ([`Sample`](crate::proto::Sample)) of the `i`th of the `n` ops of the table of operations a
/// user may submit (every op but the session's own, [`SESSION_OPS`]). The watcher id in a
/// returned `Effect::Watch` is a placeholder for the harness to replace.
pub(super) fn request(byte: u8, flags: u8, max_request_len: usize) -> (Request, Option<WatchSpec>) {
    let path = SUBMIT_PATHS[usize::from(flags & 7) % SUBMIT_PATHS.len()].to_owned();
    let kind = usize::from(byte) % request_kinds();
    if let Some(&op) = kind
        .checked_sub(WRITTEN_KINDS)
        .and_then(|i| user_ops().nth(i))
    {
        let body = sample_request(op, &path).unwrap_or_default();
        return (Request::new(op, body), None);
    }
    let watch = flags & 8 != 0;
    let p = path.clone();
    let (op, body) = match kind {
        0 => typed::<op::GetData>(&GetDataRequest { path: p, watch }),
        1 => typed::<op::Exists>(&ExistsRequest { path: p, watch }),
        2 => typed::<op::GetChildren>(&GetChildrenRequest { path: p, watch }),
        3 => typed::<op::GetChildren2>(&GetChildren2Request { path: p, watch }),
        4 | 5 => return add_watch(kind == 5, path),
        6 => return remove_watches(flags, path),
        7 => typed::<op::SetData>(&SetDataRequest {
            path: p,
            data: None,
            version: -1,
        }),
        8 => typed::<op::Create2>(&create(p)),
        9 => typed::<op::Delete>(&DeleteRequest {
            path: p,
            version: -1,
        }),
        10 => typed::<op::Sync>(&SyncRequest { path: p }),
        11 => (OpCode::Auth, auth_packet(&[flags])),
        12 => {
            let check = MultiOp::Check(CheckVersionRequest {
                path: p.clone(),
                version: 0,
            });
            let ops = vec![check, MultiOp::Create(create(p))];
            typed::<op::Multi>(&MultiRequest { ops })
        }
        // One byte over a small request limit (a 4 KiB request under the default one).
        13 => (
            OpCode::SetData,
            Bytes::from(vec![0; max_request_len.min(4096) - 7]),
        ),
        _ => (
            OpCode::Unknown(i32::from(flags) + 200),
            Bytes::copy_from_slice(&[byte, flags]),
        ),
    };
    let kind = match op {
        OpCode::GetData | OpCode::Exists => WatchKind::Data,
        OpCode::GetChildren | OpCode::GetChildren2 => WatchKind::Child,
        _ => return (Request::new(op, body), None),
    };
    let spec = watch.then(|| WatchSpec {
        path,
        kind,
        exists: op == OpCode::Exists,
    });
    (Request::new(op, body), spec)
}

/// How many request kinds there are: [`request`] reads its kind byte modulo this.
pub(super) fn request_kinds() -> usize {
    WRITTEN_KINDS + user_ops().count()
}

/// The ops of the table of operations a user may submit, in table order.
fn user_ops() -> impl Iterator<Item = &'static OpCode> {
    OPERATIONS.iter().filter(|op| !SESSION_OPS.contains(op))
}

/// An addWatch of `path`, persistent or persistent recursive, and the watch it registers.
fn add_watch(recursive: bool, path: String) -> (Request, Option<WatchSpec>) {
    let (mode, kind) = if recursive {
        (
            AddWatchMode::PersistentRecursive,
            WatchKind::PersistentRecursive,
        )
    } else {
        (AddWatchMode::Persistent, WatchKind::Persistent)
    };
    let request = AddWatchRequest {
        path: path.clone(),
        mode,
    };
    let (op, body) = typed::<op::AddWatch>(&request);
    let spec = WatchSpec {
        path,
        kind,
        exists: false,
    };
    (Request::new(op, body), Some(spec))
}

/// A removeWatches of `path`, of the watcher type `flags >> 4` picks, with its effect.
fn remove_watches(flags: u8, path: String) -> (Request, Option<WatchSpec>) {
    let watcher_type = WATCHER_TYPES[usize::from(flags >> 4) % WATCHER_TYPES.len()];
    let (op, body) = typed::<op::RemoveWatches>(&RemoveWatchesRequest {
        path: path.clone(),
        watcher_type,
    });
    let effect = Effect::RemoveWatches { path, watcher_type };
    let request = Request {
        effect,
        ..Request::new(op, body)
    };
    (request, None)
}

/// The op code and encoded request record of an operation.
fn typed<O: Operation>(record: &O::Request) -> (OpCode, Bytes) {
    (O::OP, record.to_bytes())
}

/// An encoded digest `AuthPacket`.
pub(super) fn auth_packet(credential: &[u8]) -> Bytes {
    AuthPacket::new("digest", Bytes::copy_from_slice(credential)).to_bytes()
}

fn create(path: String) -> CreateRequest {
    let data = Some(Bytes::from_static(b"x"));
    CreateRequest {
        path,
        data,
        acl: Acl::open_unsafe().into(),
        mode: CreateMode::Persistent,
    }
}

/// How many request kinds [`request`] writes out before those of the table of operations.
pub(super) const WRITTEN_KINDS: usize = 15;

/// The ops of the table only the session itself sends (auth has a written kind of its own).
const SESSION_OPS: [OpCode; 6] = [
    OpCode::Auth,
    OpCode::SetWatches,
    OpCode::SetWatches2,
    OpCode::Ping,
    OpCode::CloseSession,
    OpCode::Sasl,
];

const SESSION_ID: i64 = 0x0100_0000_0000_0042;
const PASSWD: [u8; 16] = *b"0123456789abcdef";

const SUBMIT_PATHS: [&str; 5] = ["/", "/a", "/a/b", "/a/b/c", "/b"];

/// Notification paths: those requests use, and some no valid request has.
pub(super) const NOTIFY_PATHS: [&[u8]; 9] = [
    b"/",
    b"/a",
    b"/a/b",
    b"/a/b/c",
    b"/b",
    b"",
    b"a/b",
    b"/a/",
    b"\xff\xfe",
];

pub(super) const REPLY_ERRORS: [ErrorCode; 12] = [
    ErrorCode::Ok,
    ErrorCode::Ok,
    ErrorCode::Ok,
    ErrorCode::Ok,
    ErrorCode::NoNode,
    ErrorCode::NodeExists,
    ErrorCode::BadVersion,
    ErrorCode::SessionExpired,
    ErrorCode::ConnectionLoss,
    ErrorCode::AuthFailed,
    ErrorCode::Unknown(-999),
    ErrorCode::Unknown(5),
];

pub(super) const EVENT_TYPES: [EventType; 9] = [
    EventType::NodeCreated,
    EventType::NodeDeleted,
    EventType::NodeDataChanged,
    EventType::NodeChildrenChanged,
    EventType::None,
    EventType::DataWatchRemoved,
    EventType::PersistentWatchRemoved,
    EventType::Unknown(99),
    EventType::Unknown(-7),
];

pub(super) const STATES: [KeeperState; 5] = [
    KeeperState::SyncConnected,
    KeeperState::SyncConnected,
    KeeperState::Expired,
    KeeperState::Disconnected,
    KeeperState::Unknown(42),
];

const WATCHER_TYPES: [WatcherType; 5] = [
    WatcherType::Children,
    WatcherType::Data,
    WatcherType::Any,
    WatcherType::Persistent,
    WatcherType::PersistentRecursive,
];
