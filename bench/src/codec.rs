//! `codec`: encode and decode ns per record for the hot records, no server.
//!
//! zkwire: the path the client takes (`encode_frame` with `RequestHeader` + request record
//! into a reused buffer; `ReplyHeader` then `decode_exact` of the reply record, which
//! validates the whole record before building it). Raw: the same bytes written and read
//! field by field with `bytes`' `BufMut`/`Buf`, no validation — the floor. kezhuw's codec
//! is private to its crate, so it has no column here.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use zkwire::jute::{encode_frame, Decode, Encode, Reader};
use zkwire::proto::frames;
use zkwire::proto::{
    Acl, CreateMode, CreateRequest, ErrorCode, EventType, GetChildrenResponse, GetDataRequest,
    GetDataResponse, KeeperState, OpCode, ReplyHeader, RequestHeader, SetDataRequest,
    SetDataResponse, Stat, WatcherEvent, NOTIFICATION_XID,
};

use crate::measure::{Hist, Measured, Window};
use crate::{Results, Who, PAYLOAD};

const PATH: &str = "/zkwire-bench/some/app/config-node";
const LOCK_DIR: &str = "/zkwire-bench/locks/orders";

/// How long each (record, client) is timed.
const BUDGET: Duration = Duration::from_millis(300);

fn stat() -> Stat {
    Stat {
        czxid: 0x1_0000_0042,
        mzxid: 0x1_0000_0f00,
        ctime: 1_700_000_000_000,
        mtime: 1_700_000_100_000,
        version: 17,
        cversion: 3,
        aversion: 0,
        ephemeral_owner: 0,
        data_length: PAYLOAD as i32,
        num_children: 0,
        pzxid: 0x1_0000_0042,
    }
}

/// A reply's payload (its frame without the length prefix): the header, then `body`.
fn reply_frame(body: &impl Encode) -> Bytes {
    frames::reply_frame(7, 0x1_0000_0f00, ErrorCode::Ok, &body.to_bytes()).slice(4..)
}

fn children() -> Vec<String> {
    (0..8)
        .map(|i| {
            format!(
                "_c_4f1b2a9e-55aa-4c1e-9a0b-1c2d3e4f5a6b-lock-{:010}",
                1000 + i
            )
        })
        .collect()
}

/// Times `f` for about [`BUDGET`]; returns the measurement (ops = calls). What `f` returns
/// goes through `black_box`, so that the work producing it is not optimised away.
fn time<T>(mut f: impl FnMut() -> T) -> Measured {
    for _ in 0..1000 {
        black_box(f());
    }
    let window = Window::begin();
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < BUDGET {
        for _ in 0..1000 {
            black_box(f());
        }
        calls += 1000;
    }
    let spent = window.end();
    let mut m = Measured::new(calls, spent, Hist::new());
    m.ops_per_sec = Some(calls as f64 / spent.secs);
    m
}

/// The records timed, built once: requests to encode, reply frames to decode.
struct Records {
    data: Bytes,
    get: GetDataRequest,
    set: SetDataRequest,
    create: CreateRequest,
    get_reply: Bytes,
    set_reply: Bytes,
    children_reply: Bytes,
    event: Bytes,
}

impl Records {
    fn new() -> Self {
        let data = Bytes::from_static(&[b'x'; PAYLOAD]);
        let mut event = BytesMut::new();
        ReplyHeader {
            xid: NOTIFICATION_XID,
            zxid: -1,
            err: ErrorCode::Ok,
        }
        .encode(&mut event);
        WatcherEvent {
            event_type: EventType::NodeDeleted,
            state: KeeperState::SyncConnected,
            path: format!("{LOCK_DIR}/x"),
        }
        .encode(&mut event);
        Self {
            get: GetDataRequest {
                path: PATH.to_owned(),
                watch: false,
            },
            set: SetDataRequest {
                path: PATH.to_owned(),
                data: Some(data.clone()),
                version: -1,
            },
            create: CreateRequest {
                path: format!("{LOCK_DIR}/_c_4f1b2a9e-55aa-4c1e-9a0b-1c2d3e4f5a6b-lock-"),
                data: Some(data.clone()),
                acl: Acl::open_unsafe().into(),
                mode: CreateMode::EphemeralSequential,
            },
            get_reply: reply_frame(&GetDataResponse {
                data: Some(data.clone()),
                stat: stat(),
            }),
            set_reply: reply_frame(&SetDataResponse { stat: stat() }),
            children_reply: reply_frame(&GetChildrenResponse {
                children: children(),
            }),
            event: event.freeze(),
            data,
        }
    }
}

pub(crate) fn run(results: &mut Results, clients: &[Who]) {
    let records = Records::new();
    let mut buf = BytesMut::with_capacity(1024);
    for &who in clients {
        let rows = match who {
            Who::Zkwire => zkwire_rows(&records, &mut buf),
            Who::Raw => raw_rows(&records, &mut buf),
            Who::Kezhuw | Who::Relay => continue,
        };
        for (param, m) in ROWS.into_iter().zip(rows) {
            results.add("codec", who, param, m);
        }
    }
}

/// What the codec rows time, in the order of [`zkwire_rows`] and [`raw_rows`].
const ROWS: [&str; 7] = [
    "encode GetData",
    "encode SetData",
    "encode Create2",
    "decode GetData reply",
    "decode SetData reply",
    "decode GetChildren reply",
    "decode notification",
];

/// zkwire's encoders and decoders, timed record by record ([`ROWS`]).
fn zkwire_rows(r: &Records, buf: &mut BytesMut) -> [Measured; ROWS.len()] {
    [
        time(|| zk_encode(buf, OpCode::GetData, &r.get)),
        time(|| zk_encode(buf, OpCode::SetData, &r.set)),
        time(|| zk_encode(buf, OpCode::Create2, &r.create)),
        time(|| zk_decode::<GetDataResponse>(&r.get_reply)),
        time(|| zk_decode::<SetDataResponse>(&r.set_reply)),
        time(|| zk_decode::<GetChildrenResponse>(&r.children_reply)),
        time(|| zk_decode::<WatcherEvent>(&r.event)),
    ]
}

/// The same bytes written and read field by field, timed record by record ([`ROWS`]).
fn raw_rows(r: &Records, buf: &mut BytesMut) -> [Measured; ROWS.len()] {
    [
        time(|| raw_encode_get(buf, PATH)),
        time(|| raw_encode_set(buf, PATH, &r.data)),
        time(|| raw_encode_create(buf, &r.create.path, &r.data)),
        time(|| raw_decode_get(&r.get_reply)),
        time(|| raw_decode_set(&r.set_reply)),
        time(|| raw_decode_children(&r.children_reply)),
        time(|| raw_decode_event(&r.event)),
    ]
}

fn zk_encode(buf: &mut BytesMut, op: OpCode, body: &impl Encode) {
    buf.clear();
    encode_frame(buf, |b| {
        RequestHeader { xid: 7, op }.encode(b);
        body.encode(b);
    });
    black_box(&buf[..]);
}

fn zk_decode<T: Decode>(frame: &Bytes) {
    let frame = black_box(frame);
    let mut r = Reader::new(frame);
    let header = r.read::<ReplyHeader>();
    let body = frame.slice(r.position()..);
    let record = T::decode_exact(&body);
    black_box((header.is_ok(), record.is_ok()));
}

fn put_str(b: &mut BytesMut, s: &[u8]) {
    b.put_i32(s.len() as i32);
    b.put_slice(s);
}

fn raw_encode_get(buf: &mut BytesMut, path: &str) {
    buf.clear();
    buf.put_i32((8 + 4 + path.len() + 1) as i32);
    buf.put_i32(7);
    buf.put_i32(4);
    put_str(buf, path.as_bytes());
    buf.put_u8(0);
    black_box(&buf[..]);
}

fn raw_encode_set(buf: &mut BytesMut, path: &str, data: &[u8]) {
    buf.clear();
    buf.put_i32((8 + 4 + path.len() + 4 + data.len() + 4) as i32);
    buf.put_i32(7);
    buf.put_i32(5);
    put_str(buf, path.as_bytes());
    put_str(buf, data);
    buf.put_i32(-1);
    black_box(&buf[..]);
}

fn raw_encode_create(buf: &mut BytesMut, path: &str, data: &[u8]) {
    buf.clear();
    let acl_len = 4 + 4 + 4 + 5 + 4 + 6;
    buf.put_i32((8 + 4 + path.len() + 4 + data.len() + acl_len + 4) as i32);
    buf.put_i32(7);
    buf.put_i32(15);
    put_str(buf, path.as_bytes());
    put_str(buf, data);
    buf.put_i32(1);
    buf.put_i32(31);
    put_str(buf, b"world");
    put_str(buf, b"anyone");
    buf.put_i32(3);
    black_box(&buf[..]);
}

fn raw_stat(b: &mut &[u8]) -> Stat {
    Stat {
        czxid: b.get_i64(),
        mzxid: b.get_i64(),
        ctime: b.get_i64(),
        mtime: b.get_i64(),
        version: b.get_i32(),
        cversion: b.get_i32(),
        aversion: b.get_i32(),
        ephemeral_owner: b.get_i64(),
        data_length: b.get_i32(),
        num_children: b.get_i32(),
        pzxid: b.get_i64(),
    }
}

fn raw_header(b: &mut &[u8]) -> (i32, i64, i32) {
    (b.get_i32(), b.get_i64(), b.get_i32())
}

fn raw_decode_get(frame: &Bytes) -> (Bytes, Stat) {
    let mut b = &frame[..];
    black_box(raw_header(&mut b));
    let len = b.get_i32() as usize;
    let data = frame.slice(20..20 + len);
    b.advance(len);
    (data, raw_stat(&mut b))
}

fn raw_decode_set(frame: &Bytes) -> Stat {
    let mut b = &frame[..];
    black_box(raw_header(&mut b));
    raw_stat(&mut b)
}

fn raw_string(b: &mut &[u8]) -> String {
    let len = b.get_i32() as usize;
    let s = String::from_utf8_lossy(&b[..len]).into_owned();
    b.advance(len);
    s
}

fn raw_decode_children(frame: &Bytes) -> Vec<String> {
    let mut b = &frame[..];
    black_box(raw_header(&mut b));
    let n = b.get_i32() as usize;
    (0..n).map(|_| raw_string(&mut b)).collect()
}

fn raw_decode_event(frame: &Bytes) -> (i32, i32, String) {
    let mut b = &frame[..];
    black_box(raw_header(&mut b));
    (b.get_i32(), b.get_i32(), raw_string(&mut b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_encoders_write_the_same_bytes_as_zkwire() {
        let data = Bytes::from_static(&[b'x'; PAYLOAD]);
        let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
        zk_encode(
            &mut a,
            OpCode::GetData,
            &GetDataRequest {
                path: PATH.to_owned(),
                watch: false,
            },
        );
        raw_encode_get(&mut b, PATH);
        assert_eq!(a, b);
        zk_encode(
            &mut a,
            OpCode::SetData,
            &SetDataRequest {
                path: PATH.to_owned(),
                data: Some(data.clone()),
                version: -1,
            },
        );
        raw_encode_set(&mut b, PATH, &data);
        assert_eq!(a, b);
        let create = CreateRequest {
            path: PATH.to_owned(),
            data: Some(data.clone()),
            acl: Acl::open_unsafe().into(),
            mode: CreateMode::EphemeralSequential,
        };
        zk_encode(&mut a, OpCode::Create2, &create);
        raw_encode_create(&mut b, PATH, &data);
        assert_eq!(a, b);
    }

    #[test]
    fn raw_decoders_read_what_zkwire_reads() {
        let data = Bytes::from_static(&[b'x'; PAYLOAD]);
        let frame = reply_frame(&GetDataResponse {
            data: Some(data.clone()),
            stat: stat(),
        });
        assert_eq!(raw_decode_get(&frame), (data, stat()));
        assert_eq!(
            raw_decode_set(&reply_frame(&SetDataResponse { stat: stat() })),
            stat()
        );
        assert_eq!(
            raw_decode_children(&reply_frame(&GetChildrenResponse {
                children: children()
            })),
            children()
        );
    }
}
