//! The committed seed corpus (`fuzz/seeds/<target>/<name>`), built from the golden fixtures
//! and the selector tables the targets read, so a seed's selector byte cannot drift from the
//! op or record it names.
//!
//! Codec seeds are golden fixtures (bytes written by ZooKeeper's own serializer) behind the
//! selector of their record or reply op; session seeds are hand-built scripts in the op
//! language documented on [`session`](super::session). `tests/tests/fuzz_corpus.rs` checks the
//! committed files against [`seeds`] and rewrites them with `ZKWIRE_WRITE_SEEDS=1`.

use super::codec::{record_selector, reply_selector, DEFAULT_CAP};
use super::script::{request_kinds, WRITTEN_KINDS};
use super::stateful::action::*;
use crate::proto::*;

/// One seed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// The fuzz target, which is also the directory under `fuzz/seeds/`.
    pub target: &'static str,
    /// The file name.
    pub name: String,
    /// The input.
    pub data: Vec<u8>,
}

/// Every generated seed, from `fixtures` (the text of `tests/golden/fixtures.txt`).
///
/// # Panics
/// When a fixture the seeds are made of is missing or not hex.
pub fn seeds(fixtures: &str) -> Vec<Seed> {
    let fx = parse_fixtures(fixtures);
    let mut out = Vec::new();
    roundtrip_seeds(&fx, &mut out);
    decode_reply_seeds(&fx, &mut out);
    frame_decoder_seeds(&fx, &mut out);
    session_seeds(&mut out);
    out
}

/// Fixture name prefix → the `roundtrip` selector of its record, longest prefixes first where
/// they overlap. Records with no more than a path and an int or two have no seed of their own
/// (the fuzzer reaches them from the others through the selector byte).
const FIXTURE_RECORDS: &[(&str, Selector)] = &[
    ("connect_request", record_selector::<ConnectRequest>),
    ("connect_response", record_selector::<ConnectResponse>),
    ("stat", record_selector::<Stat>),
    ("id", record_selector::<Id>),
    ("acl", record_selector::<Acl>),
    ("create_ttl_request", record_selector::<CreateTtlRequest>),
    ("create_request", record_selector::<CreateRequest>),
    ("create2_response", record_selector::<Create2Response>),
    ("exists_request", record_selector::<ExistsRequest>),
    ("get_data_request", record_selector::<GetDataRequest>),
    ("get_data_response", record_selector::<GetDataResponse>),
    ("set_data_request", record_selector::<SetDataRequest>),
    ("get_acl_response", record_selector::<GetAclResponse>),
    ("set_acl_request", record_selector::<SetAclRequest>),
    (
        "get_children2_response",
        record_selector::<GetChildren2Response>,
    ),
    (
        "get_children_response",
        record_selector::<GetChildrenResponse>,
    ),
    (
        "get_ephemerals_response",
        record_selector::<GetEphemeralsResponse>,
    ),
    ("multi_read_request", record_selector::<MultiRequest>),
    ("multi_request", record_selector::<MultiRequest>),
    ("multi_read_response", record_selector::<MultiResponse>),
    ("multi_response", record_selector::<MultiResponse>),
    ("reconfig_request", record_selector::<ReconfigRequest>),
    ("set_watches2", record_selector::<SetWatches2>),
    ("set_watches", record_selector::<SetWatches>),
    ("auth_packet", record_selector::<AuthPacket>),
    ("who_am_i_response", record_selector::<WhoAmIResponse>),
    ("watcher_event", record_selector::<WatcherEvent>),
];

/// A selector computed from the tables.
type Selector = fn() -> u8;

/// The reply fixtures `decode_reply` starts from, with the op each answers.
const REPLIES: [(&str, OpCode); 8] = [
    ("get_data_response", OpCode::GetData),
    ("get_children2_response", OpCode::GetChildren2),
    ("multi_response", OpCode::Multi),
    ("multi_response_error", OpCode::Multi),
    ("get_acl_response", OpCode::GetAcl),
    ("who_am_i_response", OpCode::WhoAmI),
    ("create2_response", OpCode::Create2),
    ("get_ephemerals_response", OpCode::GetEphemerals),
];

/// The golden fixtures by name, in file order.
type Fixtures<'a> = Vec<(&'a str, Vec<u8>)>;

fn parse_fixtures(text: &str) -> Fixtures<'_> {
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|e| panic!("{s}: {e}")))
            .collect()
    };
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.split_once(' '))
        .map(|(name, bytes)| (name, hex(bytes.trim())))
        .collect()
}

fn fixture<'a>(fx: &'a Fixtures<'_>, name: &str) -> &'a [u8] {
    fx.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| &bytes[..])
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

fn seed(target: &'static str, name: &str, parts: &[&[u8]]) -> Seed {
    Seed {
        target,
        name: name.to_owned(),
        data: parts.concat(),
    }
}

fn roundtrip_seeds(fx: &Fixtures<'_>, out: &mut Vec<Seed>) {
    let mut seen = Vec::new();
    for (name, data) in fx {
        let Some((_, selector)) = FIXTURE_RECORDS.iter().find(|(p, _)| name.starts_with(p)) else {
            continue;
        };
        let selector = selector();
        if !seen.contains(&selector) {
            seen.push(selector);
            out.push(seed("roundtrip", name, &[&[selector], data]));
        }
    }
    let multi = record_selector::<MultiResponse>();
    let error = fixture(fx, "multi_response_error");
    out.push(seed(
        "roundtrip",
        "multi_response_error",
        &[&[multi], error],
    ));
    let children = record_selector::<GetChildrenResponse>();
    let count_max = b"\x7f\xff\xff\xff\x00\x00\x00\x00";
    out.push(seed(
        "roundtrip",
        "vector_count_max",
        &[&[children], count_max],
    ));
}

fn decode_reply_seeds(fx: &Fixtures<'_>, out: &mut Vec<Seed>) {
    let header = |err: i32| reply_header(7, 5, err);
    for (name, op) in REPLIES {
        let selector = reply_selector(Some(op));
        out.push(seed(
            "decode_reply",
            name,
            &[&[selector], &header(0), fixture(fx, name)],
        ));
    }
    let get_data = reply_selector(Some(OpCode::GetData));
    out.push(seed(
        "decode_reply",
        "error_reply",
        &[&[get_data], &header(-101)],
    ));
    let connect = reply_selector(None);
    let notification = connect + 1;
    for (name, selector) in [
        ("connect_response", connect),
        ("connect_response_no_ro", connect),
        ("watcher_event", notification),
        ("watcher_event_unknown", notification),
    ] {
        out.push(seed(
            "decode_reply",
            name,
            &[&[selector], fixture(fx, name)],
        ));
    }
}

fn reply_header(xid: i32, zxid: i64, err: i32) -> Vec<u8> {
    [
        &xid.to_be_bytes()[..],
        &zxid.to_be_bytes(),
        &err.to_be_bytes(),
    ]
    .concat()
}

/// `frame_decoder`: cap selector, chunk-size count, chunk sizes, stream.
fn frame_decoder_seeds(fx: &Fixtures<'_>, out: &mut Vec<Seed>) {
    let frames = [
        "frame_connect",
        "frame_ping",
        "frame_get_data",
        "frame_close_session",
        "frame_auth",
    ];
    let stream = frames.map(|name| fixture(fx, name)).concat();
    for (name, head) in [
        ("frames_whole", &[DEFAULT_CAP, 0][..]),
        ("frames_bytewise", &[DEFAULT_CAP, 1, 1]),
        ("frames_mixed_chunks", &[DEFAULT_CAP, 3, 3, 0x80 | 7, 0x41]),
        ("small_cap", &[2, 1, 2]),
    ] {
        out.push(seed("frame_decoder", name, &[head, &stream]));
    }
    // One byte more than the default cap allows.
    let too_long = u32::try_from(crate::jute::DEFAULT_MAX_FRAME_LEN + 1)
        .unwrap_or(u32::MAX)
        .to_be_bytes();
    for (name, prefix) in [
        ("len_minus_one", &b"\xff\xff\xff\xff"[..]),
        ("len_i32_max", b"\x7f\xff\xff\xff"),
        ("len_http", b"HTTP/1.1 400"),
        ("len_cap_plus_one", &too_long),
    ] {
        let ping = fixture(fx, "frame_ping");
        out.push(seed(
            "frame_decoder",
            name,
            &[&[DEFAULT_CAP, 1, 5], ping, prefix],
        ));
    }
}

// ----- session scripts (the op language of `session`) -----

/// `config(a, b)`: a % 6 = timeout index (3 = 2 s, 4 = 30 s); (a >> 3) % 3 = connect
/// timeout; b % 4 hosts, b & 4 read-only, b & 8 small requests, b & 16 small frames, b & 32
/// resume, b & 64 configured auth.
const CFG_30S: [u8; 2] = [4, 1];
const CFG_2S: [u8; 2] = [3, 1];
/// ConnectResponse: 30 s, read-only byte present; no split.
const WELCOME: [u8; 3] = [REPLY, 3 << 3 | 5, 0];
/// Ok reply to the oldest request, empty body, no split.
const OK: [u8; 4] = [REPLY, 0, 0, 0];

/// Submits a getData (request kind 0) of `/a`; `_B` of `/a/b`; `_WATCH` with a watch;
/// `_DEADLINE` with a deadline 500 ms away.
const GET_DATA: [u8; 3] = [SUBMIT, 0, 1];
const GET_DATA_B: [u8; 3] = [SUBMIT, 0, 2];
const GET_DATA_WATCH: [u8; 3] = [SUBMIT, 0, 1 | 8];
const GET_DATA_DEADLINE: [u8; 4] = [SUBMIT, 0, 1 | 0x80, 50];

/// The session scripts, each in parts.
#[rustfmt::skip]
const SESSION_SCRIPTS: &[(&str, &[&[u8]])] = &[
    ("handshake_reply_watch_close", &[
        &CFG_30S, &[CONNECT], &WELCOME, &GET_DATA_WATCH, &OK, &[NOTIFY, 2, 0, 1, CLOSE, REPLY_ALL],
    ]),
    ("handshake_expired", &[&CFG_30S, &[SUBMIT, 7, 1, CONNECT, REPLY, 0, 0]]),
    ("xid_mismatch_then_reconnect", &[
        &CFG_30S, &[CONNECT], &WELCOME, &GET_DATA, &GET_DATA_B, &[XID_REPLY, 0, CONNECT], &WELCOME,
        &GET_DATA, &OK,
    ]),
    ("duplicate_and_unknown_xid", &[
        &CFG_30S, &[CONNECT], &WELCOME, &GET_DATA, &OK, &[XID_REPLY, 2, CONNECT], &WELCOME,
        &[XID_REPLY, 3],
    ]),
    ("reply_with_nothing_pending", &[&CFG_30S, &[CONNECT], &WELCOME, &[XID_REPLY, 4]]),
    ("deadlines_and_pings", &[
        &CFG_2S, &[CONNECT], &WELCOME, &GET_DATA_DEADLINE,
        &[ADVANCE, 0x40 | 40, TO_DEADLINE, TO_DEADLINE], &OK, &[ADVANCE, 0x80 | 20, TO_DEADLINE],
    ]),
    ("local_expiry", &[
        &CFG_2S, &[CONNECT], &WELCOME, &GET_DATA, &[DISCONNECT, ADVANCE, 0xc0 | 10],
    ]),
    ("auth_failed", &[&CFG_30S, &[CONNECT], &WELCOME, &[SUBMIT, 11, 0, REPLY, 1 | (9 << 1), 0]]),
    ("configured_auth_replay", &[
        &[4, 1 | 64], &[CONNECT], &WELCOME, &[REPLY_ALL, DISCONNECT, CONNECT], &WELCOME,
        &[REPLY_ALL],
    ]),
    ("watches_restored_after_reconnect", &[
        &CFG_30S, &[CONNECT], &WELCOME, &GET_DATA_WATCH, &OK, &[SUBMIT, 4, 2], &OK,
        &[SUBMIT, 1, 3 | 8, REPLY, 4 << 1, 0, DISCONNECT, CONNECT], &WELCOME,
        &[REPLY_ALL, NOTIFY, 0, 0, 3],
    ]),
    ("persistent_watch_removed", &[
        &CFG_30S, &[CONNECT], &WELCOME, &[SUBMIT, 5, 1], &OK,
        &[NOTIFY, 2, 0, 2, SUBMIT, 6, 1 | (2 << 4)], &OK,
    ]),
    ("xid_rollover", &[
        &CFG_30S, &[SET_XID, 3, CONNECT], &WELCOME, &GET_DATA, &GET_DATA, &GET_DATA, &GET_DATA,
        &GET_DATA, &GET_DATA, &[REPLY_ALL], &GET_DATA, &GET_DATA, &GET_DATA, &GET_DATA,
        &[REPLY_ALL],
    ]),
    ("hostile_raw_lengths", &[
        &CFG_30S, &[CONNECT], &WELCOME, &GET_DATA, &[RAW, 4, 0xff, 0xff, 0xff, 0xff, CONNECT],
        &WELCOME, &GET_DATA, &[RAW, 4], b"HTTP",
    ]),
    ("notification_bad_utf8_unknown_type", &[
        &CFG_30S, &[CONNECT], &WELCOME, &[NOTIFY, 7, 4, 1, NOTIFY, 2, 1, 8],
    ]),
    ("read_only_then_read_write", &[
        &[4, 1 | 4], &[CONNECT, REPLY, 3 << 3 | 2, 0, DISCONNECT, CONNECT], &WELCOME, &GET_DATA,
        &OK,
    ]),
    ("split_reply_and_cancel", &[
        &CFG_30S, &[CONNECT], &WELCOME, &GET_DATA, &GET_DATA_B,
        &[CANCEL, 0, REPLY, 0, 3, 1, 2, 3, 7], &OK, &[REMOVE_WATCHER, 0],
    ]),
    ("small_limits_oversized_request", &[
        &[4, 1 | 8 | 16], &[SUBMIT, 13, 0, CONNECT], &WELCOME, &GET_DATA, &[REPLY, 0, 23],
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22], &[0],
        &GET_DATA, &[RAW, 4, 0, 0, 0, 65],
    ]),
];

fn session_seeds(out: &mut Vec<Seed>) {
    for (name, parts) in SESSION_SCRIPTS {
        out.push(seed("session", name, parts));
    }
    // The sample request of every op of the table a user may submit, each answered.
    let mut ops = Vec::new();
    for kind in WRITTEN_KINDS..request_kinds() {
        let kind = u8::try_from(kind).unwrap_or_else(|_| panic!("request kind {kind} over 255"));
        ops.extend([SUBMIT, kind, 1, REPLY, 0, 0, 0]);
    }
    let parts: [&[u8]; 5] = [&CFG_30S, &[CONNECT], &WELCOME, &ops, &[CLOSE, REPLY_ALL]];
    out.push(seed("session", "table_ops_sample_requests", &parts));
}
