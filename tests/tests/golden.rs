//! Byte-for-byte agreement with ZooKeeper's own serializer.
//!
//! `tests/golden/fixtures.txt` is written by `tests/golden/Golden.java` through the ZooKeeper
//! 3.8.0 jars (CI regenerates it and fails on any difference). Every fixture is built here
//! from the same values with zkwire's codec and must match exactly, and every fixture must
//! decode back to the value.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::collections::BTreeMap;

use bytes::Bytes;
use zkwire::jute::{Decode, DecodeErrorKind, Encode};
use zkwire::proto::frames::{frame, request_frame};
use zkwire::proto::*;

const UPATH: &str = "/zkwire/\u{fc}n\u{ef}c\u{f6}d\u{e9}/\u{8def}\u{5f84}";

/// The fixtures by name, parsed from the committed file.
pub fn fixtures() -> BTreeMap<String, Bytes> {
    let text = include_str!("../golden/fixtures.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').expect("fixture line is `name hex`");
            (name.to_owned(), Bytes::from(unhex(hex)))
        })
        .collect()
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("valid hex"))
        .collect()
}

fn stat() -> Stat {
    Stat {
        czxid: 0x0102_0304_0506_0708,
        mzxid: 2,
        ctime: 1_700_000_000_000,
        mtime: 1_700_000_000_001,
        version: 5,
        cversion: -1,
        aversion: 7,
        ephemeral_owner: 0x0100_0008_26a8_0000,
        data_length: 11,
        num_children: 3,
        pzxid: 9,
    }
}

fn open() -> Vec<Acl> {
    vec![Acl::new(Perms::ALL, Id::new("world", "anyone"))]
}

fn mixed() -> Vec<Acl> {
    vec![
        Acl::new(Perms(31), Id::new("world", "anyone")),
        Acl::new(
            Perms(1),
            Id::new("digest", "user:K4Zb3VwG6pJbQ9sLQnMcXxk0aVE="),
        ),
        Acl::new(Perms(7), Id::new("ip", "127.0.0.1")),
    ]
}

fn b(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn server_passwd() -> Bytes {
    Bytes::from(unhex("cfaa7212b0e5b1a5c5b75b677985663e"))
}

fn connect_response(
    timeout: i32,
    session_id: i64,
    passwd: Bytes,
    ro: Option<bool>,
) -> ConnectResponse {
    ConnectResponse {
        protocol_version: 0,
        timeout,
        session_id,
        passwd,
        read_only: ro,
    }
}

/// Checks one record fixture both ways; returns its name for the coverage count.
struct Checker {
    fixtures: BTreeMap<String, Bytes>,
    checked: Vec<String>,
}

impl Checker {
    fn new() -> Self {
        Self {
            fixtures: fixtures(),
            checked: Vec::new(),
        }
    }

    fn bytes(&mut self, name: &str) -> Bytes {
        self.checked.push(name.to_owned());
        self.fixtures
            .get(name)
            .unwrap_or_else(|| panic!("no fixture {name}"))
            .clone()
    }

    fn record<T: Encode + Decode + PartialEq + std::fmt::Debug>(&mut self, name: &str, value: T) {
        let golden = self.bytes(name);
        let ours = value.to_bytes();
        assert_eq!(
            hex(&ours),
            hex(&golden),
            "encoding of {name} differs from Java's"
        );
        assert_eq!(value.encoded_len(), golden.len(), "encoded_len of {name}");
        let decoded = T::decode_exact(&golden).unwrap_or_else(|e| panic!("decoding {name}: {e}"));
        assert_eq!(decoded, value, "decoding of {name}");
    }

    fn frame(&mut self, name: &str, ours: Bytes) {
        let golden = self.bytes(name);
        assert_eq!(hex(&ours), hex(&golden), "frame {name} differs from Java's");
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The connect request both the record and the whole-frame checks encode.
fn sample_connect() -> ConnectRequest {
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0x1234,
        timeout: 30000,
        session_id: 0,
        passwd: Bytes::from(vec![0; 16]),
        read_only: false,
    }
}

#[test]
fn handshake_and_headers_match_java() {
    let mut c = Checker::new();
    c.record("connect_request", sample_connect());
    c.record(
        "connect_request_reattach_ro",
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0x7fff_ffff_0000_0001,
            timeout: 4000,
            session_id: 0x0100_0008_26a8_0000,
            passwd: Bytes::from((0u8..16).collect::<Vec<_>>()),
            read_only: true,
        },
    );
    let sid = 0x0100_0008_2b73_0000;
    c.record(
        "connect_response",
        connect_response(30000, sid, server_passwd(), Some(false)),
    );
    c.record(
        "connect_response_ro",
        connect_response(30000, sid, server_passwd(), Some(true)),
    );
    c.record(
        "connect_response_no_ro",
        connect_response(30000, sid, server_passwd(), None),
    );
    let expired = connect_response(0, 0, Bytes::from(vec![0; 16]), Some(false));
    assert!(expired.is_expired());
    c.record("connect_response_expired", expired);
    c.record(
        "request_header",
        RequestHeader {
            xid: 5,
            op: OpCode::GetData,
        },
    );
    c.record(
        "request_header_ping",
        RequestHeader {
            xid: PING_XID,
            op: OpCode::Ping,
        },
    );
    c.record(
        "request_header_unknown_op",
        RequestHeader {
            xid: 1,
            op: OpCode::Unknown(999),
        },
    );
    c.record(
        "reply_header",
        ReplyHeader {
            xid: 7,
            zxid: 0x1_0000_0005,
            err: ErrorCode::Ok,
        },
    );
    c.record(
        "reply_header_error",
        ReplyHeader {
            xid: 8,
            zxid: 0x1_0000_0006,
            err: ErrorCode::NoNode,
        },
    );
    c.record(
        "reply_header_notification",
        ReplyHeader {
            xid: NOTIFICATION_XID,
            zxid: -1,
            err: ErrorCode::Ok,
        },
    );
    c.record(
        "reply_header_unknown_err",
        ReplyHeader {
            xid: 1,
            zxid: 2,
            err: ErrorCode::Unknown(-999),
        },
    );
    c.record("stat", stat());
    c.record("id", Id::new("digest", "user:K4Zb3VwG6pJbQ9sLQnMcXxk0aVE="));
    c.record(
        "acl",
        Acl::new(
            Perms::READ | Perms::WRITE | Perms::CREATE,
            Id::new("ip", "127.0.0.1"),
        ),
    );
}

#[test]
fn node_operation_records_match_java() {
    let mut c = Checker::new();
    c.record(
        "create_request",
        CreateRequest {
            path: UPATH.into(),
            data: b("hello"),
            acl: mixed().into(),
            mode: CreateMode::Persistent,
        },
    );
    c.record(
        "create_request_null_data",
        CreateRequest {
            path: "/a".into(),
            data: None,
            acl: open().into(),
            mode: CreateMode::EphemeralSequential,
        },
    );
    c.record(
        "create_request_container",
        CreateRequest {
            path: "/c".into(),
            data: Some(Bytes::new()),
            acl: open().into(),
            mode: CreateMode::Container,
        },
    );
    c.record(
        "create_ttl_request",
        CreateTtlRequest {
            path: "/ttl".into(),
            data: b("t"),
            acl: open().into(),
            mode: CreateMode::PersistentWithTtl,
            ttl: 60000,
        },
    );
    c.record(
        "create_response",
        CreateResponse {
            path: "/a0000000007".into(),
        },
    );
    c.record(
        "create2_response",
        Create2Response {
            path: UPATH.into(),
            stat: stat(),
        },
    );
    c.record(
        "delete_request",
        DeleteRequest {
            path: "/a".into(),
            version: -1,
        },
    );
    c.record(
        "exists_request",
        ExistsRequest {
            path: "/a".into(),
            watch: true,
        },
    );
    c.record("exists_response", ExistsResponse { stat: stat() });
    c.record(
        "get_data_request",
        GetDataRequest {
            path: "/a".into(),
            watch: false,
        },
    );
    c.record(
        "get_data_response",
        GetDataResponse {
            data: Some(Bytes::from_static(&[0, 1, 0xff, 0x80])),
            stat: stat(),
        },
    );
    c.record(
        "get_data_response_null",
        GetDataResponse {
            data: None,
            stat: stat(),
        },
    );
    c.record(
        "set_data_request",
        SetDataRequest {
            path: "/a".into(),
            data: b("v2"),
            version: 5,
        },
    );
    c.record(
        "set_data_request_null",
        SetDataRequest {
            path: "/a".into(),
            data: None,
            version: -1,
        },
    );
    c.record("set_data_response", SetDataResponse { stat: stat() });
    c.record("get_acl_request", GetAclRequest { path: "/a".into() });
    c.record(
        "get_acl_response",
        GetAclResponse {
            acl: mixed(),
            stat: stat(),
        },
    );
    c.record(
        "set_acl_request",
        SetAclRequest {
            path: "/a".into(),
            acl: mixed(),
            version: 3,
        },
    );
    c.record("set_acl_response", SetAclResponse { stat: stat() });
    c.record(
        "get_children_request",
        GetChildrenRequest {
            path: "/".into(),
            watch: true,
        },
    );
    c.record(
        "get_children_response",
        GetChildrenResponse {
            children: strings(&["a", "\u{fc}n\u{ef}", "\u{8def}\u{5f84}-0000000001"]),
        },
    );
    c.record(
        "get_children_response_empty",
        GetChildrenResponse { children: vec![] },
    );
    c.record(
        "get_children2_request",
        GetChildren2Request {
            path: "/a".into(),
            watch: false,
        },
    );
    c.record(
        "get_children2_response",
        GetChildren2Response {
            children: strings(&["x", "y"]),
            stat: stat(),
        },
    );
    c.record(
        "get_all_children_number_request",
        GetAllChildrenNumberRequest { path: "/a".into() },
    );
    c.record(
        "get_all_children_number_response",
        GetAllChildrenNumberResponse { total_number: 42 },
    );
    c.record(
        "get_ephemerals_request",
        GetEphemeralsRequest {
            prefix_path: "/".into(),
        },
    );
    c.record(
        "get_ephemerals_response",
        GetEphemeralsResponse {
            ephemerals: strings(&["/e1", "/e2/\u{fc}n\u{ef}"]),
        },
    );
    c.record("sync_request", SyncRequest { path: "/a".into() });
    c.record("sync_response", SyncResponse { path: "/a".into() });
    c.record(
        "check_version_request",
        CheckVersionRequest {
            path: "/a".into(),
            version: 4,
        },
    );
    c.record(
        "reconfig_request",
        ReconfigRequest {
            joining_servers: Some("server.4=127.0.0.4:2888:3888;2181".into()),
            leaving_servers: None,
            new_members: None,
            cur_config_id: -1,
        },
    );
    c.record(
        "reconfig_request_all",
        ReconfigRequest {
            joining_servers: None,
            leaving_servers: Some("1,2".into()),
            new_members: Some("server.1=127.0.0.1:2888:3888;2181".into()),
            cur_config_id: 0x1_0000_0003,
        },
    );
}

#[test]
fn null_vector_from_java_is_rejected_with_the_record_named() {
    let mut c = Checker::new();
    let bytes = c.bytes("get_children_response_null_vector");
    let err = GetChildrenResponse::decode_exact(&bytes).unwrap_err();
    assert!(matches!(
        err.kind(),
        DecodeErrorKind::UnexpectedNull {
            what: "vector",
            offset: 0
        }
    ));
    assert_eq!(err.record(), "GetChildrenResponse");
    assert!(err.to_string().contains("GetChildrenResponse"), "{err}");
}

#[test]
fn multi_records_match_java() {
    let mut c = Checker::new();
    let ops = vec![
        MultiOp::Check(CheckVersionRequest {
            path: "/a".into(),
            version: 0,
        }),
        MultiOp::Create(CreateRequest {
            path: "/b".into(),
            data: b("d"),
            acl: open().into(),
            mode: CreateMode::Persistent,
        }),
        MultiOp::CreateContainer(CreateRequest {
            path: "/c".into(),
            data: None,
            acl: open().into(),
            mode: CreateMode::Container,
        }),
        MultiOp::CreateTtl(CreateTtlRequest {
            path: "/t".into(),
            data: b("t"),
            acl: open().into(),
            mode: CreateMode::PersistentWithTtl,
            ttl: 1000,
        }),
        MultiOp::SetData(SetDataRequest {
            path: "/a".into(),
            data: b("new"),
            version: -1,
        }),
        MultiOp::Delete(DeleteRequest {
            path: "/b".into(),
            version: 2,
        }),
    ];
    c.record("multi_request", MultiRequest { ops });
    let reads = vec![
        MultiOp::GetChildren(GetChildrenRequest {
            path: "/a".into(),
            watch: false,
        }),
        MultiOp::GetData(GetDataRequest {
            path: "/b".into(),
            watch: false,
        }),
    ];
    c.record("multi_read_request", MultiRequest { ops: reads });
    let results = vec![
        MultiResult::Check,
        MultiResult::Create(CreateResponse { path: "/b".into() }),
        MultiResult::Create2(Create2Response {
            path: "/c".into(),
            stat: stat(),
        }),
        MultiResult::SetData(SetDataResponse { stat: stat() }),
        MultiResult::Delete,
    ];
    c.record("multi_response", MultiResponse { results });
    let errors = vec![
        MultiResult::Error(ErrorCode::Ok),
        MultiResult::Error(ErrorCode::NoNode),
        MultiResult::Error(ErrorCode::RuntimeInconsistency),
    ];
    c.record("multi_response_error", MultiResponse { results: errors });
    let read_results = vec![
        MultiResult::GetData(GetDataResponse {
            data: b("x"),
            stat: stat(),
        }),
        MultiResult::GetChildren(GetChildrenResponse {
            children: strings(&["a", "b"]),
        }),
        MultiResult::Error(ErrorCode::NoNode),
    ];
    c.record(
        "multi_read_response",
        MultiResponse {
            results: read_results,
        },
    );
    c.record("multi_response_empty", MultiResponse::default());
}

#[test]
fn watch_and_auth_records_match_java() {
    let mut c = Checker::new();
    c.record(
        "check_watches_request",
        CheckWatchesRequest {
            path: "/a".into(),
            watcher_type: WatcherType::Data,
        },
    );
    c.record(
        "remove_watches_request",
        RemoveWatchesRequest {
            path: "/a".into(),
            watcher_type: WatcherType::Any,
        },
    );
    c.record(
        "add_watch_request",
        AddWatchRequest {
            path: "/a".into(),
            mode: AddWatchMode::PersistentRecursive,
        },
    );
    c.record("error_response", ErrorResponse { err: ErrorCode::Ok });
    c.record(
        "error_response_nowatcher",
        ErrorResponse {
            err: ErrorCode::NoWatcher,
        },
    );
    c.record(
        "set_watches",
        SetWatches {
            relative_zxid: 5,
            data_watches: strings(&["/a", "/\u{fc}n\u{ef}"]),
            exist_watches: strings(&["/b"]),
            child_watches: vec![],
        },
    );
    c.record(
        "set_watches2",
        SetWatches2 {
            relative_zxid: 5,
            data_watches: strings(&["/a"]),
            exist_watches: vec![],
            child_watches: vec![],
            persistent_watches: vec![],
            persistent_recursive_watches: strings(&["/b"]),
        },
    );
    c.record(
        "auth_packet",
        AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: b("u:p"),
        },
    );
    c.record(
        "auth_packet_null",
        AuthPacket {
            auth_type: 0,
            scheme: "ip".into(),
            auth: None,
        },
    );
    c.record(
        "who_am_i_response",
        WhoAmIResponse {
            client_info: vec![
                ClientInfo {
                    auth_scheme: "ip".into(),
                    user: "127.0.0.1".into(),
                },
                ClientInfo {
                    auth_scheme: "digest".into(),
                    user: "\u{fc}".into(),
                },
            ],
        },
    );
    c.record(
        "watcher_event",
        WatcherEvent {
            event_type: EventType::NodeDataChanged,
            state: KeeperState::SyncConnected,
            path: "/p".into(),
        },
    );
    c.record(
        "watcher_event_unknown",
        WatcherEvent {
            event_type: EventType::Unknown(99),
            state: KeeperState::Unknown(42),
            path: "/\u{fc}n\u{ef}".into(),
        },
    );
}

#[test]
fn whole_frames_match_java() {
    let mut c = Checker::new();
    let connect = sample_connect();
    c.frame("frame_connect", frame(|buf| connect.encode(buf)));
    c.frame("frame_ping", request_frame(PING_XID, OpCode::Ping, &()));
    let get = GetDataRequest {
        path: "/a".into(),
        watch: true,
    };
    c.frame("frame_get_data", request_frame(1, OpCode::GetData, &get));
    c.frame(
        "frame_close_session",
        request_frame(5, OpCode::CloseSession, &()),
    );
    let auth = AuthPacket {
        auth_type: 0,
        scheme: "digest".into(),
        auth: b("u:p"),
    };
    c.frame("frame_auth", request_frame(AUTH_XID, OpCode::Auth, &auth));
}

/// Every fixture Java wrote is checked by one of the tests above.
#[test]
fn every_fixture_is_covered() {
    let all: Vec<String> = fixtures().into_keys().collect();
    let source = include_str!("golden.rs");
    let unchecked: Vec<&String> = all
        .iter()
        .filter(|name| !source.contains(&format!("\"{name}\"")))
        .collect();
    assert!(
        unchecked.is_empty(),
        "fixtures without a check: {unchecked:?}"
    );
    assert!(all.len() >= 70, "only {} fixtures", all.len());
}
