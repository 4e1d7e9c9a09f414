//! The real `zkwire::Client` against a scripted hostile server (docs/faults.md #5 and #6;
//! the rules checked are in docs/protocol.md §1 and §3).
//!
//! Each case starts an [`EvilServer`] that misbehaves on its first connection and serves
//! healthily on later ones, connects a client with a 2 s session, and checks that:
//! - the client never panics: its driver keeps working, so a later request succeeds (or the
//!   session ends with the expected terminal error);
//! - a frame that breaks the protocol drops the connection at once (well within the 1.33 s
//!   read timeout), the request in flight fails with `ConnectionLoss` instead of hanging, and
//!   the client reconnects (the server sees a second connection);
//! - a well-framed, correctly matched reply whose *record* is malformed is a protocol
//!   violation too: the session checks the record while its request is in flight, so the
//!   request fails with `ConnectionLoss` along with the connection;
//! - what the protocol allows (unknown notification types and states, unknown error codes)
//!   is survived on the same connection.
//!
//! The cases run one after another under one runtime, each bounded in time; the test prints
//! a line per case and the number of hostile frames sent. `HOSTILE_CASE=<name>` runs one case.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes};
use zkwire::error::ProtocolError;
use zkwire::jute::{Encode, DEFAULT_MAX_FRAME_LEN, JUTE_MAX_BUFFER};
use zkwire::proto::frames::{frame, reply_frame};
use zkwire::proto::{
    ErrorCode, EventType, GetChildrenResponse, GetDataResponse, KeeperState, MultiResponse,
    MultiResult, ReplyHeader, RequestHeader, Stat, AUTH_XID, NOTIFICATION_XID,
};
use zkwire::{AddWatchMode, Client, ClientBuilder, Error, Op, ReadOp, SessionState, WatchedEvent};
use zkwire_testing::evil::{
    connect_response_frame, healthy_reply, EvilConn, EvilServer, HEALTHY_DATA,
};

const SESSION_TIMEOUT: Duration = Duration::from_secs(2);
/// 2/3 of the session timeout: a drop sooner than this came from the bytes, not the timer.
const READ_TIMEOUT: Duration = Duration::from_millis(1333);
/// The most one case may take.
const CASE_LIMIT: Duration = Duration::from_secs(20);

type CaseFuture = Pin<Box<dyn Future<Output = Result<Outcome, String>> + Send>>;

/// A named case.
type Case = (&'static str, fn() -> CaseFuture);

/// What a case observed, for the report.
#[derive(Debug)]
struct Outcome {
    hostile_frames: u64,
    connections: usize,
}

/// A named case: `case!("name", future)`.
macro_rules! case {
    ($name:literal, $future:expr) => {
        ($name, (|| Box::pin($future)) as fn() -> CaseFuture)
    };
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)*) => {
        if !$cond {
            return Err(format!($($msg)*));
        }
    };
}

#[test]
fn hostile_server_cases() {
    let cases: Vec<Case> = vec![
        case!("frame length -1", frame_length(-1, None)),
        case!("frame length 0 (no ReplyHeader)", frame_length(0, None)),
        case!("frame length 0x7fffffff", frame_length(i32::MAX, None)),
        case!(
            "frame length over the default cap",
            frame_length(cap_plus_one(), None)
        ),
        case!(
            "frame length 1 MiB+1, cap JUTE_MAX_BUFFER",
            frame_length(0x10_0001, Some(JUTE_MAX_BUFFER))
        ),
        case!(
            "frame length 1 MiB+1 under the default cap, then a stall",
            stalled_big_frame()
        ),
        case!(
            "a reply over the cap to the request it answers",
            oversized_reply()
        ),
        case!("an HTTP response (length 0x48545450)", http_response()),
        case!("a reply truncated at every byte", truncated_everywhere()),
        case!(
            "a reply with the wrong xid",
            wrong_xid(|xid| xid.wrapping_add(1))
        ),
        case!("a reply with an unknown xid", wrong_xid(|_| 0x7ead_beef)),
        case!("a duplicate reply", duplicate_reply()),
        case!("a reply with nothing pending", unsolicited(1)),
        case!("an auth reply with no auth pending", unsolicited(AUTH_XID)),
        case!(
            "a notification with an invalid UTF-8 path",
            bad_utf8_notification()
        ),
        case!(
            "notifications of unknown type and state",
            unknown_notifications()
        ),
        case!(
            "an unknown state on a persistent watch",
            unknown_state_persistent()
        ),
        case!(
            "a negative buffer length in a reply",
            negative_record_length()
        ),
        case!(
            "a vector count of 2^31-1 in a small frame",
            huge_vector_count()
        ),
        case!("an unknown error code", unknown_error_code()),
        case!(
            "multi results of kinds their ops cannot produce",
            mismatched_multi_results()
        ),
        case!("a truncated ConnectResponse", bad_connect_response(true)),
        case!(
            "an undecodable ConnectResponse",
            bad_connect_response(false)
        ),
        case!("ConnectResponse timeout 0 on connect", expired_on_connect()),
        case!(
            "ConnectResponse timeout 0 on reconnect",
            expired_on_reconnect()
        ),
    ];
    let only = std::env::var("HOSTILE_CASE").ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (mut frames, mut failures, mut ran) = (0, Vec::new(), 0);
    let mut max_growth = 0;
    for (name, case) in cases {
        if only.as_deref().is_some_and(|only| !name.contains(only)) {
            continue;
        }
        ran += 1;
        let started = Instant::now();
        let rss_before = rss_kib();
        let result = runtime.block_on(async { tokio::time::timeout(CASE_LIMIT, case()).await });
        let elapsed = started.elapsed();
        let growth = rss_kib().saturating_sub(rss_before);
        max_growth = max_growth.max(growth);
        match result {
            Ok(Ok(outcome)) if growth >= RSS_GROWTH_LIMIT_KIB => {
                println!("FAIL {name}: resident memory grew by {growth} KiB");
                failures.push(format!("{name}: resident memory grew by {growth} KiB"));
                frames += outcome.hostile_frames;
            }
            Ok(Ok(outcome)) => {
                frames += outcome.hostile_frames;
                println!(
                    "ok   {name}: {} hostile frame(s), {} connection(s), {elapsed:.2?}, +{growth} KiB",
                    outcome.hostile_frames, outcome.connections
                );
            }
            Ok(Err(e)) => {
                println!("FAIL {name}: {e}");
                failures.push(format!("{name}: {e}"));
            }
            Err(_) => {
                println!("FAIL {name}: no result within {CASE_LIMIT:?}");
                failures.push(format!("{name}: timed out"));
            }
        }
    }
    println!(
        "hostile-server cases: {ran} run, {} failed; hostile frames sent: {frames}; \
         largest resident-memory growth in one case: {max_growth} KiB",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "hostile-server cases failed:\n{}",
        failures.join("\n")
    );
}

/// The most a case (one client, a few connections) may grow the process's resident memory.
const RSS_GROWTH_LIMIT_KIB: u64 = 2 * 1024;

/// This process's resident set size (Linux `/proc/self/status`), in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

// ===== frame-level violations: drop, ConnectionLoss, reconnect =====

/// A reply frame announcing `len` bytes (plus a few), then silence. A length over the cap
/// fails the request for good (`ReplyTooLarge`: asking again would get the same), any other
/// bad one with `ConnectionLoss`.
async fn frame_length(len: i32, cap: Option<usize>) -> Result<Outcome, String> {
    let hostile = move |_: &RequestHeader| {
        let mut bytes = len.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0; 16]);
        bytes
    };
    let max = cap.unwrap_or(DEFAULT_MAX_FRAME_LEN);
    let expected = match usize::try_from(len) {
        Ok(len) if len > max => Error::ReplyTooLarge { len, max },
        _ => Error::ConnectionLoss,
    };
    let late = "the timer, not the bytes";
    dropped_within(hostile, cap, expected, READ_TIMEOUT, late).await
}

fn cap_plus_one() -> i32 {
    i32::try_from(DEFAULT_MAX_FRAME_LEN + 1).unwrap()
}

/// A well-formed reply over the cap, to the request it answers: that request fails for good
/// (`ReplyTooLarge`), the frame is thrown away as it comes, and the connection goes on.
async fn oversized_reply() -> Result<Outcome, String> {
    const CAP: usize = 1024;
    let server = start(|mut conn| async move {
        conn.handshake().await?;
        let (header, _) = conn.next_request().await?;
        let body = GetDataResponse {
            data: Some(Bytes::from(vec![b'x'; 4 * CAP])),
            stat: Stat::default(),
        };
        let reply = reply_frame(header.xid, 1, ErrorCode::Ok, &body.to_bytes());
        conn.send_hostile(&reply).await?;
        conn.serve().await
    })
    .await?;
    let client = connect(&server, Some(CAP)).await?;
    let result = client.get_data("/big").await;
    ensure!(
        matches!(result, Err(Error::ReplyTooLarge { max: CAP, .. })),
        "the oversized reply's request got {result:?}"
    );
    same_connection(&client, &server).await
}

/// Read as a frame, "HTTP" announces 1.2 GB: over the cap, so the request fails for good.
async fn http_response() -> Result<Outcome, String> {
    let hostile =
        |_: &RequestHeader| b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec();
    let expected = Error::ReplyTooLarge {
        len: 0x4854_5450,
        max: DEFAULT_MAX_FRAME_LEN,
    };
    let late = "the timer, not the bytes";
    dropped_within(hostile, None, expected, READ_TIMEOUT, late).await
}

/// The reply's first bytes, then the connection closes (FIN), at every cut point.
async fn truncated_everywhere() -> Result<Outcome, String> {
    let len = healthy_get_data(1).len();
    let server = start(move |mut conn| async move {
        conn.handshake().await?;
        if conn.index() + 1 >= len {
            return conn.serve().await;
        }
        let (header, _) = conn.next_request().await?;
        let cut = conn.index() + 1;
        conn.send_hostile(&healthy_get_data(header.xid)[..cut])
            .await?;
        conn.close().await
    })
    .await?;
    let client = connect(&server, None).await?;
    for cut in 1..len {
        let result = client.get_data("/victim").await;
        ensure!(
            result == Err(Error::ConnectionLoss),
            "cut at {cut}: {result:?}, not ConnectionLoss"
        );
    }
    healthy_after(&client, &server, len).await
}

/// Wrong xids of a reply: the next one, or one never used.
async fn wrong_xid(wrong: fn(i32) -> i32) -> Result<Outcome, String> {
    let hostile = move |header: &RequestHeader| healthy_get_data(wrong(header.xid)).to_vec();
    dropped_fast(hostile, None).await
}

/// The first reply again, while the second request waits for its own.
async fn duplicate_reply() -> Result<Outcome, String> {
    let server = start(|mut conn| async move {
        conn.handshake().await?;
        if conn.index() > 0 {
            return conn.serve().await;
        }
        let (first, _) = conn.next_request().await?;
        let reply = healthy_get_data(first.xid);
        send_plain(&mut conn, &reply).await?;
        let _second = conn.next_request().await?;
        conn.send_hostile(&reply).await?;
        conn.hold().await
    })
    .await?;
    let client = connect(&server, None).await?;
    let first = client.get_data("/first").await;
    ensure!(first.is_ok(), "the first request: {first:?}");
    let started = Instant::now();
    let second = client.get_data("/second").await;
    ensure!(
        second == Err(Error::ConnectionLoss),
        "the second request got {second:?}"
    );
    ensure!(
        started.elapsed() < READ_TIMEOUT,
        "dropped after {:?}",
        started.elapsed()
    );
    healthy_after(&client, &server, 2).await
}

/// A reply (xid 1) or an auth reply (xid -4) right after the handshake, with nothing asked.
async fn unsolicited(xid: i32) -> Result<Outcome, String> {
    let server = start(move |mut conn| async move {
        conn.handshake().await?;
        if conn.index() > 0 {
            return conn.serve().await;
        }
        conn.send_hostile(&reply_frame(xid, 1, ErrorCode::Ok, &[]))
            .await?;
        conn.hold().await
    })
    .await?;
    let client = connect(&server, None).await?;
    ensure!(
        server.wait_for_connections(2, READ_TIMEOUT).await,
        "no reconnect within the read timeout: the reply was not rejected"
    );
    healthy_after(&client, &server, 2).await
}

async fn bad_utf8_notification() -> Result<Outcome, String> {
    let hostile = |_: &RequestHeader| notification(3, 3, b"/a\xff\xfe").to_vec();
    dropped_fast(hostile, None).await
}

/// A length prefix under the cap (a legal size) whose payload never comes: only the read
/// timeout can end this, and it must.
async fn stalled_big_frame() -> Result<Outcome, String> {
    let hostile = |_: &RequestHeader| 0x10_0001_i32.to_be_bytes().to_vec();
    dropped_within(
        hostile,
        None,
        Error::ConnectionLoss,
        SESSION_TIMEOUT,
        "only after the session timeout",
    )
    .await
}

// ===== handshake =====

/// A ConnectResponse cut short (then FIN), or one too short to decode (connection kept open).
async fn bad_connect_response(truncated: bool) -> Result<Outcome, String> {
    let server = start(move |mut conn| async move {
        if conn.index() > 0 {
            conn.handshake().await?;
            return conn.serve().await;
        }
        let _ = conn.read_connect_request().await?;
        if truncated {
            conn.send_hostile(&[0, 0, 0, 37, 0, 0, 0, 0, 0, 0]).await?;
            conn.close().await
        } else {
            conn.send_hostile(&[0, 0, 0, 4, 1, 2, 3, 4]).await?;
            conn.hold().await
        }
    })
    .await?;
    let client = connect(&server, None).await?;
    healthy_after(&client, &server, 2).await
}

async fn expired_on_connect() -> Result<Outcome, String> {
    let server = start(|mut conn| async move {
        let _ = conn.read_connect_request().await?;
        conn.send_hostile(&connect_response_frame(0, 0)).await?;
        conn.hold().await
    })
    .await?;
    let result = builder(None).connect(&server.connect_string()).await;
    ensure!(
        matches!(result, Err(Error::SessionExpired)),
        "connect gave {:?}",
        result.map(drop)
    );
    no_more_connections(&server, 1).await
}

/// A healthy session whose connection drops with a request in flight; the server then
/// declares the session expired. The request in flight fails with ConnectionLoss, one queued
/// meanwhile with SessionExpired, and the client stops reconnecting.
async fn expired_on_reconnect() -> Result<Outcome, String> {
    let server = start(|mut conn| async move {
        if conn.index() > 0 {
            let _ = conn.read_connect_request().await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            conn.send_hostile(&connect_response_frame(0, 0)).await?;
            return conn.hold().await;
        }
        conn.handshake().await?;
        let (first, body) = conn.next_request().await?;
        let reply = healthy_reply(first.op, &body);
        conn.reply(first.xid, ErrorCode::Ok, &reply).await?;
        let _second = conn.next_request().await?;
        conn.close().await
    })
    .await?;
    let client = connect(&server, None).await?;
    let mut states = client.state_stream();
    ensure!(
        client.get_data("/first").await.is_ok(),
        "the first request failed"
    );
    let in_flight = client.get_data("/second").await;
    ensure!(
        in_flight == Err(Error::ConnectionLoss),
        "the request in flight got {in_flight:?}"
    );
    let queued = client.get_data("/third").await;
    ensure!(
        queued == Err(Error::SessionExpired),
        "a request queued across the expiry got {queued:?}"
    );
    let mut seen = Vec::new();
    while let Ok(Some(state)) =
        tokio::time::timeout(Duration::from_millis(200), states.next()).await
    {
        seen.push(state);
    }
    ensure!(
        seen.ends_with(&[SessionState::Expired]),
        "states seen: {seen:?}"
    );
    ensure!(
        client.state() == SessionState::Expired,
        "state {:?}",
        client.state()
    );
    let later = client.exists("/later").await;
    ensure!(
        later == Err(Error::SessionExpired),
        "a request after the expiry got {later:?}"
    );
    no_more_connections(&server, 2).await
}

// ===== what the protocol allows, or what fails one request only =====

/// Unknown event types and states are logged and ignored (or delivered as they are); the
/// connection stays and a later, well-formed notification still fires the watch.
async fn unknown_notifications() -> Result<Outcome, String> {
    let server = start(|mut conn| async move {
        conn.handshake().await?;
        let (watch, body) = conn.next_request().await?;
        let reply = healthy_reply(watch.op, &body);
        conn.reply(watch.xid, ErrorCode::Ok, &reply).await?;
        let (victim, _) = conn.next_request().await?;
        conn.send_hostile(&notification(99, 3, b"/w")).await?;
        conn.send_hostile(&notification(-7, 42, b"/w")).await?;
        conn.send_hostile(&notification(3, 42, b"/elsewhere"))
            .await?;
        send_plain(&mut conn, &healthy_get_data(victim.xid)).await?;
        let (trigger, body) = conn.next_request().await?;
        send_plain(
            &mut conn,
            &notification(EventType::NodeDataChanged.as_i32(), 3, b"/w"),
        )
        .await?;
        conn.reply(
            trigger.xid,
            ErrorCode::Ok,
            &healthy_reply(trigger.op, &body),
        )
        .await?;
        conn.serve().await
    })
    .await?;
    let client = connect(&server, None).await?;
    let (_, _, watcher) = client
        .get_data_and_watch("/w")
        .await
        .map_err(|e| format!("watch: {e}"))?;
    let victim = client.get_data("/victim").await;
    ensure!(
        victim.is_ok(),
        "the request around the notifications got {victim:?}"
    );
    let trigger = client.exists("/trigger").await;
    ensure!(trigger.is_ok(), "a later request got {trigger:?}");
    let event = tokio::time::timeout(Duration::from_secs(2), watcher)
        .await
        .map_err(|_| "the watch never fired")?;
    data_changed_when_connected(&event)?;
    same_connection(&client, &server).await
}

/// A node event with a state other than SyncConnected (which servers always send) on a
/// persistent watch: ignored, so that it cannot end the watch; the connection stays and the
/// next well-formed event arrives on the same stream.
async fn unknown_state_persistent() -> Result<Outcome, String> {
    let server = start(|mut conn| async move {
        conn.handshake().await?;
        let (add, _) = conn.next_request().await?;
        // The addWatch reply record: ErrorResponse{err = 0}.
        conn.reply(add.xid, ErrorCode::Ok, &[0, 0, 0, 0]).await?;
        conn.send_hostile(&notification(
            EventType::NodeDataChanged.as_i32(),
            42,
            b"/p",
        ))
        .await?;
        send_plain(
            &mut conn,
            &notification(EventType::NodeDataChanged.as_i32(), 3, b"/p"),
        )
        .await?;
        conn.serve().await
    })
    .await?;
    let client = connect(&server, None).await?;
    let mut watch = client
        .add_watch("/p", AddWatchMode::Persistent)
        .await
        .map_err(|e| format!("addWatch: {e}"))?;
    let event = tokio::time::timeout(Duration::from_secs(2), watch.next())
        .await
        .map_err(|_| "no event")?;
    let event = event.ok_or("the persistent watch ended")?;
    data_changed_when_connected(&event)?;
    same_connection(&client, &server).await
}

/// `GetDataResponse.data` with length -2: only -1 (null) is a legal negative length.
async fn negative_record_length() -> Result<Outcome, String> {
    let mut body = (-2_i32).to_be_bytes().to_vec();
    body.extend_from_slice(&Stat::default().to_bytes());
    bad_record(body).await
}

/// A children vector of 2^31-1 names in a 20-byte frame: rejected before any allocation.
async fn huge_vector_count() -> Result<Outcome, String> {
    let mut body = i32::MAX.to_be_bytes().to_vec();
    body.extend_from_slice(&[0, 0, 0, 0]);
    bad_record(body).await
}

async fn unknown_error_code() -> Result<Outcome, String> {
    let server = start(|mut conn| async move {
        conn.handshake().await?;
        let (victim, _) = conn.next_request().await?;
        conn.send_hostile(&reply_frame(victim.xid, 1, ErrorCode::Unknown(-999), &[]))
            .await?;
        conn.serve().await
    })
    .await?;
    let client = connect(&server, None).await?;
    let result = client.get_data("/victim").await;
    ensure!(
        result == Err(Error::Server(-999)),
        "an unknown error code gave {result:?}"
    );
    same_connection(&client, &server).await
}

/// A multi's check answered with a delete's result, and a multiRead's getData with a
/// getChildren's: each call fails with a protocol error (they were passed on as results), and
/// the connection is kept (the replies were framed and matched).
async fn mismatched_multi_results() -> Result<Outcome, String> {
    let server = start(|mut conn| async move {
        conn.handshake().await?;
        let (multi, _) = conn.next_request().await?;
        let delete = MultiResponse {
            results: vec![MultiResult::Delete],
        };
        conn.send_hostile(&reply_frame(
            multi.xid,
            1,
            ErrorCode::Ok,
            &delete.to_bytes(),
        ))
        .await?;
        let (read, _) = conn.next_request().await?;
        let children = MultiResponse {
            results: vec![MultiResult::GetChildren(GetChildrenResponse {
                children: vec!["x".into()],
            })],
        };
        conn.send_hostile(&reply_frame(
            read.xid,
            1,
            ErrorCode::Ok,
            &children.to_bytes(),
        ))
        .await?;
        conn.serve().await
    })
    .await?;
    let client = connect(&server, None).await?;
    let unexpected = Err(Error::Protocol(ProtocolError::UnexpectedMultiResult));
    let multi = client.multi(&[Op::check("/a", None)]).await;
    ensure!(
        multi == unexpected,
        "a check answered as a delete gave {multi:?}"
    );
    // The reply came whole: the server applied the multi, and a retry would apply it again.
    ensure!(
        multi.is_err_and(|e| !e.is_retryable()),
        "an applied multi said retryable"
    );
    let read = client.multi_read(&[ReadOp::GetData("/a".into())]).await;
    ensure!(
        read.as_ref().err() == unexpected.as_ref().err(),
        "a getData answered as a listing gave {read:?}"
    );
    same_connection(&client, &server).await
}

// ===== shared shapes =====

/// `event` is a data change delivered while connected (a forged state must not get through).
fn data_changed_when_connected(event: &WatchedEvent) -> Result<(), String> {
    ensure!(
        event.event_type == EventType::NodeDataChanged,
        "the watch fired with {event:?}"
    );
    ensure!(
        event.state == KeeperState::SyncConnected,
        "the forged state reached the watch: {event:?}"
    );
    Ok(())
}

/// The first connection answers the first request with `hostile` and keeps the socket open;
/// the request must fail with ConnectionLoss before the read timeout could have fired, and
/// the client must reconnect to the (then healthy) server.
async fn dropped_fast<H>(hostile: H, cap: Option<usize>) -> Result<Outcome, String>
where
    H: Fn(&RequestHeader) -> Vec<u8> + Send + Sync + 'static,
{
    let late = "the timer, not the bytes";
    dropped_within(hostile, cap, Error::ConnectionLoss, READ_TIMEOUT, late).await
}

/// As [`dropped_fast`], with the request failing with `expected` within `limit` (`late` says
/// what failing later means).
async fn dropped_within<H>(
    hostile: H,
    cap: Option<usize>,
    expected: Error,
    limit: Duration,
    late: &str,
) -> Result<Outcome, String>
where
    H: Fn(&RequestHeader) -> Vec<u8> + Send + Sync + 'static,
{
    let hostile = Arc::new(hostile);
    let server = start(move |mut conn| {
        let hostile = hostile.clone();
        async move {
            conn.handshake().await?;
            if conn.index() > 0 {
                return conn.serve().await;
            }
            let (header, _) = conn.next_request().await?;
            conn.send_hostile(&hostile(&header)).await?;
            conn.hold().await
        }
    })
    .await?;
    let client = connect(&server, cap).await?;
    let started = Instant::now();
    let result = client.get_data("/victim").await;
    let elapsed = started.elapsed();
    ensure!(
        result.as_ref() == Err(&expected),
        "the request in flight got {result:?}, not {expected:?}"
    );
    ensure!(elapsed < limit, "{expected:?} after {elapsed:?}: {late}");
    healthy_after(&client, &server, 2).await
}

/// A well-framed, correctly matched reply whose record is malformed: a protocol error, as in
/// the Java client. The connection is dropped, the request fails with ConnectionLoss, and the
/// client reconnects.
async fn bad_record(body: Vec<u8>) -> Result<Outcome, String> {
    dropped_fast(
        move |h| reply_frame(h.xid, 1, ErrorCode::Ok, &body).to_vec(),
        None,
    )
    .await
}

/// After the damage: a request succeeds on a healthy connection, and there were at least
/// `connections` of them.
async fn healthy_after(
    client: &Client,
    server: &EvilServer,
    connections: usize,
) -> Result<Outcome, String> {
    let result = client.get_data("/after").await;
    ensure!(
        matches!(&result, Ok((data, _)) if data[..] == *HEALTHY_DATA),
        "a request after the damage got {result:?}"
    );
    ensure!(
        server.connections() >= connections,
        "{} connection(s), expected {connections}",
        server.connections()
    );
    Ok(Outcome {
        hostile_frames: server.hostile_frames(),
        connections: server.connections(),
    })
}

/// A later request succeeds on the very same connection.
async fn same_connection(client: &Client, server: &EvilServer) -> Result<Outcome, String> {
    let outcome = healthy_after(client, server, 1).await?;
    ensure!(
        outcome.connections == 1,
        "the client reconnected ({} connections)",
        outcome.connections
    );
    Ok(outcome)
}

/// The session is over: the client must not come back.
async fn no_more_connections(server: &EvilServer, expected: usize) -> Result<Outcome, String> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    ensure!(
        server.connections() == expected,
        "{} connections after the expiry",
        server.connections()
    );
    Ok(Outcome {
        hostile_frames: server.hostile_frames(),
        connections: server.connections(),
    })
}

async fn start<S, F>(script: S) -> Result<EvilServer, String>
where
    S: Fn(EvilConn) -> F + Send + Sync + 'static,
    F: Future<Output = io::Result<()>> + Send + 'static,
{
    EvilServer::start(script)
        .await
        .map_err(|e| format!("start the fake server: {e}"))
}

fn builder(cap: Option<usize>) -> ClientBuilder {
    let builder = zkwire_testing::support::builder().with_session_timeout(SESSION_TIMEOUT);
    match cap {
        Some(cap) => builder.with_max_frame_len(cap),
        None => builder,
    }
}

async fn connect(server: &EvilServer, cap: Option<usize>) -> Result<Client, String> {
    builder(cap)
        .connect(&server.connect_string())
        .await
        .map_err(|e| format!("connect: {e}"))
}

/// A well-formed getData reply carrying [`HEALTHY_DATA`].
fn healthy_get_data(xid: i32) -> Bytes {
    let body = GetDataResponse {
        data: Some(Bytes::from_static(HEALTHY_DATA)),
        stat: Stat::default(),
    };
    reply_frame(xid, 1, ErrorCode::Ok, &body.to_bytes())
}

/// A notification frame with raw type, state and path bytes.
fn notification(event_type: i32, state: i32, path: &[u8]) -> Bytes {
    frame(|b| {
        ReplyHeader {
            xid: NOTIFICATION_XID,
            zxid: -1,
            err: ErrorCode::Ok,
        }
        .encode(b);
        b.put_i32(event_type);
        b.put_i32(state);
        b.put_i32(i32::try_from(path.len()).unwrap());
        b.put_slice(path);
    })
}

/// Well-formed bytes, not counted as hostile.
async fn send_plain(conn: &mut EvilConn, bytes: &[u8]) -> io::Result<()> {
    conn.send_raw(bytes).await
}
