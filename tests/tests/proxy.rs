//! The fault proxy: its mechanics against scripted upstreams, then the real client through it
//! against a real ZooKeeper server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use zkwire::proto::OpCode;
use zkwire::{AddWatchMode, Client, CreateOptions, Error, EventType, SessionState, StateStream};
use zkwire_testing::proxy::{Direction, FaultProxy, MAX_BUFFERED};
use zkwire_testing::server::{four_letter_word, shared_server};
use zkwire_testing::support::fresh_chroot;

/// Every await that could hang is bounded by this unless it says otherwise.
const STEP: Duration = Duration::from_secs(10);

async fn within<F: Future>(limit: Duration, what: &str, f: F) -> F::Output {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {limit:?}: {what}"))
}

/// Polls `cond` every 10 ms until it holds.
async fn eventually(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    within(limit, what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

// ===== scripted upstream =====

/// What a scripted upstream saw on one connection.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Bytes(Vec<u8>),
    Eof,
}

/// An upstream that writes `greeting` on every new connection, then echoes every byte back
/// and reports what it read.
async fn echo_upstream(greeting: &'static [u8]) -> (SocketAddr, mpsc::UnboundedReceiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(echo(stream, greeting, tx.clone()));
        }
    });
    (addr, rx)
}

async fn echo(mut stream: TcpStream, greeting: &[u8], seen: mpsc::UnboundedSender<Seen>) {
    if stream.write_all(greeting).await.is_err() {
        return;
    }
    let mut buf = vec![0; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = seen.send(Seen::Eof);
                return;
            }
            Ok(n) => {
                let _ = seen.send(Seen::Bytes(buf[..n].to_vec()));
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A frame with a request header `{xid, op}` and `body`.
fn request(xid: i32, op: OpCode, body: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i32(i32::try_from(8 + body.len()).unwrap());
    out.put_i32(xid);
    out.put_i32(op.as_i32());
    out.put_slice(body);
    out.freeze()
}

/// A stand-in for the ConnectRequest: any frame will do for a scripted upstream.
fn handshake() -> Bytes {
    let mut out = BytesMut::new();
    out.put_i32(4);
    out.put_slice(b"helo");
    out.freeze()
}

/// Reads exactly `len` bytes.
async fn read_exact(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    within(STEP, "read", stream.read_exact(&mut buf))
        .await
        .unwrap();
    buf
}

/// Collects what the upstream reads until `want` bytes have arrived.
async fn upstream_bytes(seen: &mut mpsc::UnboundedReceiver<Seen>, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < want {
        match within(STEP, "upstream read", seen.recv()).await.unwrap() {
            Seen::Bytes(b) => got.extend(b),
            Seen::Eof => panic!("upstream saw EOF after {} of {want} bytes", got.len()),
        }
    }
    got
}

/// Nothing arrives on `stream` for `quiet`.
async fn assert_silent(stream: &mut TcpStream, quiet: Duration) {
    let mut byte = [0; 1];
    let read = tokio::time::timeout(quiet, stream.read(&mut byte)).await;
    assert!(read.is_err(), "expected silence, got {read:?}");
}

/// A client connection through a proxy to an echo upstream, handshake done.
async fn echo_pair(proxy: &FaultProxy) -> TcpStream {
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client.write_all(&handshake()).await.unwrap();
    assert_eq!(read_exact(&mut client, 8).await, handshake());
    client
}

/// A proxy in front of an echo upstream, a client connection through it with the handshake
/// done, and what the upstream reads after the handshake.
async fn echo_setup() -> (FaultProxy, TcpStream, mpsc::UnboundedReceiver<Seen>) {
    let (upstream, mut seen) = echo_upstream(b"").await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let client = echo_pair(&proxy).await;
    upstream_bytes(&mut seen, 8).await;
    (proxy, client, seen)
}

/// Writes `frame` on `stream` and asserts that it comes back whole (`what` says why).
async fn echoes(stream: &mut TcpStream, frame: &[u8], what: &str) {
    stream.write_all(frame).await.unwrap();
    assert_eq!(read_exact(stream, frame.len()).await, frame, "{what}");
}

/// Writes `frame` on `from` and asserts that it arrives whole on `to` (`what` says why).
async fn passes(from: &mut TcpStream, frame: &[u8], to: &mut TcpStream, what: &str) {
    from.write_all(frame).await.unwrap();
    assert_eq!(read_exact(to, frame.len()).await, frame, "{what}");
}

#[tokio::test]
async fn blackhole_releases_in_order_and_blackhole_drop_discards() {
    let (proxy, mut client, _seen) = echo_setup().await;

    proxy.blackhole(true);
    let (b, c) = (
        request(2, OpCode::GetData, b"bb"),
        request(3, OpCode::GetData, b"ccc"),
    );
    client.write_all(&b).await.unwrap();
    client.write_all(&c).await.unwrap();
    assert_silent(&mut client, Duration::from_millis(200)).await;
    proxy.blackhole(false);
    let echoed = read_exact(&mut client, b.len() + c.len()).await;
    assert_eq!(echoed, [b, c].concat(), "held frames delivered in order");

    proxy.blackhole_drop(true);
    client
        .write_all(&request(4, OpCode::GetData, b"dropped"))
        .await
        .unwrap();
    assert_silent(&mut client, Duration::from_millis(200)).await;
    proxy.blackhole_drop(false);
    let e = request(5, OpCode::Exists, b"e");
    echoes(&mut client, &e, "the dropped frame never arrives").await;
    assert_eq!(proxy.counts().frames_discarded, 1);
    assert_eq!(proxy.active(), 1);
}

#[tokio::test]
async fn one_way_holds_stall_only_their_direction() {
    let (proxy, mut client, mut seen) = echo_setup().await;

    proxy.hold_server_to_client(true);
    let a = request(1, OpCode::GetData, b"a");
    client.write_all(&a).await.unwrap();
    assert_eq!(
        upstream_bytes(&mut seen, a.len()).await,
        a,
        "client→server still flows"
    );
    assert_silent(&mut client, Duration::from_millis(200)).await;
    proxy.hold_server_to_client(false);
    assert_eq!(read_exact(&mut client, a.len()).await, a);

    proxy.hold_client_to_server(true);
    client.write_all(&a).await.unwrap();
    let held = tokio::time::timeout(Duration::from_millis(200), seen.recv()).await;
    assert!(held.is_err(), "client→server held, got {held:?}");
    proxy.heal();
    assert_eq!(upstream_bytes(&mut seen, a.len()).await, a);
}

#[tokio::test]
async fn delay_applies_to_each_direction() {
    let (proxy, mut client, _seen) = echo_setup().await;
    proxy.delay(Duration::from_millis(150));
    let started = Instant::now();
    let frames: Vec<Bytes> = (1..=3)
        .map(|xid| request(xid, OpCode::Exists, &[b'x'; 10]))
        .collect();
    for f in &frames {
        client.write_all(f).await.unwrap();
    }
    let echoed = read_exact(&mut client, frames.iter().map(Bytes::len).sum()).await;
    let elapsed = started.elapsed();
    assert_eq!(echoed, frames.concat(), "order kept");
    assert!(
        elapsed >= Duration::from_millis(300),
        "two delays expected, took {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_frames_writes_single_bytes() {
    let (proxy, mut client, mut seen) = echo_setup().await;
    proxy.split_frames(true);
    let big = request(1, OpCode::SetData, &[7; 2000]);
    client.write_all(&big).await.unwrap();
    let mut reads = 0;
    let mut got = Vec::new();
    while got.len() < big.len() {
        match within(STEP, "upstream read", seen.recv()).await.unwrap() {
            Seen::Bytes(b) => got.extend(b),
            Seen::Eof => panic!("EOF"),
        }
        reads += 1;
    }
    assert_eq!(got, big);
    assert!(reads > 1, "the frame should arrive in pieces");
    assert_eq!(
        read_exact(&mut client, big.len()).await,
        big,
        "and come back whole"
    );
}

#[tokio::test]
async fn cut_after_request_forwards_the_nth_then_closes() {
    let (proxy, mut client, mut seen) = echo_setup().await;
    proxy.cut_after_request(OpCode::Create2, 2);

    let first = request(1, OpCode::Create2, b"one");
    echoes(&mut client, &first, "the first create passes").await;
    assert_eq!(upstream_bytes(&mut seen, first.len()).await, first);

    // The second create and a request pipelined behind it, in one write.
    let second = request(2, OpCode::Create2, b"two");
    let behind = request(3, OpCode::GetData, b"never");
    client
        .write_all(&[second.clone(), behind].concat())
        .await
        .unwrap();
    assert_eq!(
        upstream_bytes(&mut seen, second.len()).await,
        second,
        "forwarded"
    );
    assert_eq!(
        within(STEP, "upstream EOF", seen.recv()).await,
        Some(Seen::Eof),
        "then closed"
    );
    let mut rest = Vec::new();
    let read = within(STEP, "client EOF", client.read_to_end(&mut rest)).await;
    assert!(
        read.is_err() || rest.is_empty(),
        "no reply may reach the client: {rest:?}"
    );
    assert_eq!(proxy.triggered(), 1);
    assert_eq!(proxy.requests_seen(OpCode::Create2), 2);
    assert_eq!(
        proxy.requests_seen(OpCode::GetData),
        0,
        "the frame behind is never looked at"
    );
}

#[tokio::test]
async fn cut_and_reset_close_current_connections_only() {
    let (upstream, _seen) = echo_upstream(b"").await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let mut fin = echo_pair(&proxy).await;
    proxy.cut_all();
    let mut rest = Vec::new();
    assert_eq!(
        within(STEP, "FIN", fin.read_to_end(&mut rest))
            .await
            .unwrap(),
        0,
        "clean EOF"
    );

    let mut rst = echo_pair(&proxy).await;
    proxy.reset_all();
    let err = within(STEP, "RST", rst.read_to_end(&mut rest))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);

    let mut fresh = echo_pair(&proxy).await;
    let ping = request(-2, OpCode::Ping, b"");
    echoes(&mut fresh, &ping, "new connections still work").await;
    let counts = proxy.counts();
    assert_eq!((counts.cut_connections, counts.reset_connections), (1, 1));
    assert_eq!(proxy.connections(), 3);
    eventually(STEP, "two connections gone", || proxy.active() == 1).await;
}

#[tokio::test]
async fn refuse_set_upstream_and_drop() {
    // Greetings are frames: the proxy forwards whole frames only.
    let (first, _seen_a) = echo_upstream(b"\0\0\0\x01A").await;
    let (second, mut seen_b) = echo_upstream(b"\0\0\0\x01B").await;
    let proxy = FaultProxy::start(first).await.unwrap();

    proxy.refuse(true);
    let mut refused = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut rest = Vec::new();
    let read = within(STEP, "refused", refused.read_to_end(&mut rest)).await;
    assert!(read.is_err() || rest.is_empty());
    assert_eq!((proxy.counts().refused, proxy.connections()), (1, 0));
    proxy.refuse(false);

    let mut on_first = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(read_exact(&mut on_first, 5).await, b"\0\0\0\x01A");
    proxy.set_upstream(second);
    assert_eq!(proxy.upstream(), second);
    let mut on_second = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(read_exact(&mut on_second, 5).await, b"\0\0\0\x01B");

    // Dropping the proxy closes both sides of every connection and the listener.
    let addr = proxy.addr();
    drop(proxy);
    let read = within(STEP, "client EOF on drop", on_second.read_to_end(&mut rest)).await;
    assert!(read.is_err() || rest.is_empty());
    assert_eq!(
        within(STEP, "upstream EOF on drop", seen_b.recv()).await,
        Some(Seen::Eof)
    );
    eventually(STEP, "listener closed", || {
        std::net::TcpStream::connect(addr).is_err()
    })
    .await;
}

#[tokio::test]
async fn held_bytes_over_the_cap_cut_the_connection() {
    let (upstream, _seen) = echo_upstream(b"").await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let client = TcpStream::connect(proxy.addr()).await.unwrap();
    proxy.hold_client_to_server(true);
    // A negative length prefix: the proxy passes the stream through raw.
    let (mut rd, mut wr) = client.into_split();
    let writer = tokio::spawn(async move {
        let chunk = vec![0xff; 1 << 20];
        for _ in 0..(MAX_BUFFERED >> 20) + 8 {
            if wr.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    eventually(Duration::from_secs(20), "overflow cut", || {
        proxy.counts().overflow_cuts == 1
    })
    .await;
    let mut rest = Vec::new();
    let _ = within(STEP, "client closed", rd.read_to_end(&mut rest)).await;
    within(STEP, "writer ends", writer).await.unwrap();
    eventually(STEP, "connection gone", || proxy.active() == 0).await;
}

/// An upstream that hands every connection it accepts to the test, which then plays the
/// server by hand (it can write without having read anything).
async fn socket_upstream() -> (SocketAddr, mpsc::UnboundedReceiver<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            if tx.send(stream).is_err() {
                return;
            }
        }
    });
    (addr, rx)
}

/// A client connection through `proxy` and the upstream's end of it, handshake frames
/// exchanged both ways.
async fn hand_pair(
    proxy: &FaultProxy,
    accepted: &mut mpsc::UnboundedReceiver<TcpStream>,
) -> (TcpStream, TcpStream) {
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut server = within(STEP, "accept", accepted.recv()).await.unwrap();
    client.write_all(&handshake()).await.unwrap();
    assert_eq!(read_exact(&mut server, 8).await, handshake());
    server.write_all(&handshake()).await.unwrap();
    assert_eq!(read_exact(&mut client, 8).await, handshake());
    (client, server)
}

/// A server frame `{xid, zxid, err}` with `body`, e.g. a notification (xid -1).
fn reply(xid: i32, body: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i32(i32::try_from(16 + body.len()).unwrap());
    out.put_i32(xid);
    out.put_i64(7);
    out.put_i32(0);
    out.put_slice(body);
    out.freeze()
}

#[tokio::test]
async fn drop_direction_loses_whole_frames_one_way_only() {
    let (upstream, mut accepted) = socket_upstream().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let (mut client, mut server) = hand_pair(&proxy, &mut accepted).await;

    proxy.drop_client_to_server(true);
    let lost = request(1, OpCode::GetData, b"lost");
    client.write_all(&lost).await.unwrap();
    let note = reply(-1, b"notification");
    passes(&mut server, &note, &mut client, "server→client still flows").await;
    assert_silent(&mut server, Duration::from_millis(200)).await;
    assert_eq!(proxy.counts().client_frames_dropped, 1);
    proxy.drop_client_to_server(false);
    let after = request(2, OpCode::Exists, b"after");
    passes(
        &mut client,
        &after,
        &mut server,
        "the dropped frame never arrives, and the stream is still framed",
    )
    .await;

    // The other way round.
    proxy.drop_direction(Direction::ServerToClient, true);
    server.write_all(&reply(-1, b"lost")).await.unwrap();
    passes(
        &mut client,
        &after,
        &mut server,
        "client→server still flows",
    )
    .await;
    assert_silent(&mut client, Duration::from_millis(200)).await;

    // heal() stops the drop.
    proxy.heal();
    let kept = reply(3, b"kept");
    passes(&mut server, &kept, &mut client, "whole").await;

    // Frames queued (here: delayed) when the drop is switched on are dropped too.
    proxy.delay_direction(
        Direction::ClientToServer,
        Duration::from_millis(300),
        Duration::from_millis(300),
        1,
    );
    client.write_all(&lost).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    proxy.drop_client_to_server(true);
    assert_silent(&mut server, Duration::from_millis(400)).await;
    proxy.heal();
    passes(&mut client, &after, &mut server, "whole").await;

    // A dropped request never fires a trigger: it does not reach the server.
    proxy.cut_after_request(OpCode::GetData, 1);
    proxy.drop_client_to_server(true);
    client.write_all(&lost).await.unwrap();
    eventually(STEP, "dropped", || {
        proxy.counts().client_frames_dropped == 3
    })
    .await;
    assert_eq!(proxy.triggered(), 0);
    proxy.drop_client_to_server(false);
    passes(&mut client, &lost, &mut server, "whole").await;
    eventually(STEP, "trigger fired", || proxy.triggered() == 1).await;

    let counts = proxy.counts();
    assert_eq!(
        (
            counts.client_frames_dropped,
            counts.server_frames_dropped,
            counts.frames_discarded
        ),
        (3, 1, 0)
    );
    // Handshake, lost, after ×3, lost ×3: dropped frames are logged too.
    assert_eq!(proxy.frames_seen(Direction::ClientToServer), 8);
    assert_eq!(proxy.requests_seen(OpCode::GetData), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_direction_draws_delays_in_bounds_and_keeps_order() {
    let (min, max) = (Duration::from_millis(150), Duration::from_millis(400));
    let (proxy, mut client, mut seen) = echo_setup().await;
    proxy.delay_direction(Direction::ServerToClient, min, max, 42);

    // One frame at a time: each round trip is one draw, and only the way back is delayed.
    let mut rtts = Vec::new();
    for xid in 1..=8 {
        let frame = request(xid, OpCode::Exists, b"x");
        let started = Instant::now();
        client.write_all(&frame).await.unwrap();
        assert_eq!(upstream_bytes(&mut seen, frame.len()).await, frame);
        let there = started.elapsed();
        assert!(there < min, "client→server not delayed: {there:?}");
        assert_eq!(read_exact(&mut client, frame.len()).await, frame);
        rtts.push(started.elapsed());
    }
    let (lo, hi) = (rtts.iter().min().unwrap(), rtts.iter().max().unwrap());
    assert!(*lo >= min, "a reply came back early: {rtts:?}");
    assert!(*hi < max + Duration::from_secs(1), "{rtts:?}");
    assert!(
        *hi - *lo >= Duration::from_millis(30),
        "the delays should vary: {rtts:?}"
    );

    // A burst: every frame gets its own draw, yet they come back in order.
    let frames: Vec<Bytes> = (10..30)
        .map(|xid| request(xid, OpCode::GetData, &[b'y'; 5]))
        .collect();
    let started = Instant::now();
    client.write_all(&frames.concat()).await.unwrap();
    let echoed = read_exact(&mut client, frames.iter().map(Bytes::len).sum()).await;
    assert_eq!(echoed, frames.concat(), "order kept");
    assert!(started.elapsed() >= min);
    assert_eq!(upstream_bytes(&mut seen, echoed.len()).await, echoed);

    // Off: replies are prompt again.
    proxy.delay_direction(Direction::ServerToClient, Duration::ZERO, Duration::ZERO, 0);
    let frame = request(40, OpCode::Exists, b"z");
    let started = Instant::now();
    echoes(&mut client, &frame, "whole").await;
    assert!(
        started.elapsed() < min,
        "delay off: {:?}",
        started.elapsed()
    );
    assert_eq!(upstream_bytes(&mut seen, frame.len()).await, frame);

    // Bounds given the wrong way round are swapped; heal() switches it off.
    proxy.delay_direction(
        Direction::ClientToServer,
        Duration::from_millis(300),
        Duration::from_millis(200),
        9,
    );
    let started = Instant::now();
    client.write_all(&frame).await.unwrap();
    assert_eq!(upstream_bytes(&mut seen, frame.len()).await, frame);
    let there = started.elapsed();
    assert!(there >= Duration::from_millis(200), "{there:?}");
    assert_eq!(read_exact(&mut client, frame.len()).await, frame);
    proxy.heal();
    let started = Instant::now();
    echoes(&mut client, &frame, "whole").await;
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "healed: {:?}",
        started.elapsed()
    );
}

// ===== the real client against a real server =====

/// A proxy in front of the shared server, a fresh chroot `/name`, and the proxied connect
/// string for it.
async fn proxied(name: &str) -> (FaultProxy, String, String) {
    let direct = fresh_chroot(name).await;
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let via_proxy = format!("{}/{name}", proxy.connect_string());
    (proxy, via_proxy, direct)
}

async fn connect(connect_string: &str, session_timeout: Duration) -> Client {
    let connecting = zkwire_testing::support::builder()
        .with_session_timeout(session_timeout)
        .connect(connect_string);
    within(STEP, "connect", connecting).await.unwrap()
}

/// A persistent node at `path` with `data`, created through `c`.
async fn create(c: &Client, path: &str, data: &[u8]) {
    let persistent = CreateOptions::persistent();
    within(STEP, "create", c.create(path, data, &persistent))
        .await
        .unwrap();
}

/// Closes each client.
async fn close_all(clients: &[&Client]) {
    for c in clients {
        within(STEP, "close", c.close()).await.unwrap();
    }
}

/// As [`proxied`], with a client through the proxy (4 s session) instead of its connect
/// string.
async fn proxied_client(name: &str) -> (FaultProxy, Client, String) {
    let (proxy, via_proxy, direct) = proxied(name).await;
    (
        proxy,
        connect(&via_proxy, Duration::from_secs(4)).await,
        direct,
    )
}

/// As [`proxied_client`], with an observer connected directly (4 s session too).
async fn proxied_pair(name: &str) -> (FaultProxy, Client, Client) {
    let (proxy, c, direct) = proxied_client(name).await;
    (proxy, c, connect(&direct, Duration::from_secs(4)).await)
}

/// After fresh traffic both ways (so that the client's read timeout and the server's expiry
/// count from then), applies `fault` and waits (up to 6 s) for the client to disconnect;
/// when the fault was applied and when the client disconnected.
async fn disconnect_by(
    c: &Client,
    states: &mut StateStream,
    fault: impl FnOnce(),
) -> (Instant, Instant) {
    within(STEP, "exists", c.exists("/")).await.unwrap();
    let started = Instant::now();
    fault();
    let limit = Duration::from_secs(6);
    (
        started,
        wait_state(states, SessionState::Disconnected, limit).await,
    )
}

/// A client's session and its states from some point on.
struct Watched {
    session: i64,
    states: StateStream,
}

impl Watched {
    fn new(c: &Client) -> Self {
        Self {
            session: c.session_id(),
            states: c.state_stream(),
        }
    }

    /// Waits (up to `limit`) until `c` is connected again, on the same session (`what`).
    async fn reconnected(&mut self, c: &Client, limit: Duration, what: &str) {
        wait_state(&mut self.states, SessionState::Connected, limit).await;
        assert_eq!(c.session_id(), self.session, "{what}");
    }
}

/// Waits for `want` on `states`, skipping other transient states; returns when it came.
async fn wait_state(states: &mut StateStream, want: SessionState, limit: Duration) -> Instant {
    within(limit, &format!("state {want:?}"), async {
        loop {
            let state = states.next().await.expect("driver stopped");
            if state == want {
                return Instant::now();
            }
            assert!(
                !state.is_terminal(),
                "unexpected terminal state {state:?} waiting for {want:?}"
            );
        }
    })
    .await
}

#[tokio::test]
async fn forwards_plain_operations() {
    let (proxy, c, _) = proxied_client("proxy_plain").await;
    create(&c, "/n", b"v1").await;
    within(STEP, "set", c.set_data("/n", b"v2", Some(0)))
        .await
        .unwrap();
    assert_eq!(
        &within(STEP, "get", c.get_data("/n")).await.unwrap().0[..],
        b"v2"
    );
    assert_eq!(
        within(STEP, "children", c.get_children("/")).await.unwrap(),
        ["n"]
    );
    within(STEP, "delete", c.delete("/n", None)).await.unwrap();
    assert_eq!(within(STEP, "exists", c.exists("/n")).await.unwrap(), None);

    assert_eq!((proxy.connections(), proxy.active()), (1, 1));
    assert_eq!(proxy.requests_seen(OpCode::Create2), 1);
    assert_eq!(proxy.requests_seen(OpCode::SetData), 1);
    let frames = proxy.client_frames();
    assert_eq!(
        frames[0],
        (None, 45),
        "a ConnectRequest with the readOnly byte comes first"
    );
    assert!(frames[1..].iter().all(|(h, _)| h.is_some()));
    let replies = proxy.server_frames();
    assert_eq!(replies[0].0, None, "the ConnectResponse comes first");
    assert!(proxy.frames_seen(Direction::ServerToClient) >= 7);
    assert!(proxy.max_frame_len(OpCode::SetData) > 8);
    close_all(&[&c]).await;
    assert_eq!(
        proxy.requests_seen(OpCode::CloseSession),
        1,
        "closeSession went through"
    );
    eventually(STEP, "connection closed", || proxy.active() == 0).await;
}

#[tokio::test]
async fn four_letter_words_pass_through_raw() {
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let addr = proxy.addr();
    let answer = tokio::task::spawn_blocking(move || four_letter_word(addr, "ruok"));
    assert_eq!(within(STEP, "ruok", answer).await.unwrap().unwrap(), "imok");
    assert_eq!(
        proxy.frames_seen(Direction::ClientToServer),
        0,
        "not mistaken for a frame"
    );
}

#[tokio::test]
async fn cut_all_and_reset_all_keep_the_session() {
    let (proxy, c, _) = proxied_client("proxy_cut").await;
    let mut w = Watched::new(&c);
    for reset in [false, true] {
        within(STEP, "exists", c.exists("/")).await.unwrap();
        if reset {
            proxy.reset_all();
        } else {
            proxy.cut_all();
        }
        wait_state(&mut w.states, SessionState::Disconnected, STEP).await;
        wait_state(&mut w.states, SessionState::Connected, STEP).await;
        assert_eq!(
            c.session_id(),
            w.session,
            "same session after reset={reset}"
        );
        within(
            STEP,
            "create",
            c.create(
                &format!("/after_{reset}"),
                b"",
                &CreateOptions::persistent(),
            ),
        )
        .await
        .unwrap();
    }
    let counts = proxy.counts();
    assert_eq!((counts.cut_connections, counts.reset_connections), (1, 1));
    assert_eq!(proxy.connections(), 3);
    close_all(&[&c]).await;
}

#[tokio::test]
async fn reply_lost_after_create_reached_the_server() {
    let (proxy, c, observer) = proxied_pair("proxy_lost_reply").await;
    let mut w = Watched::new(&c);
    proxy.cut_after_request(OpCode::Create2, 2);
    within(
        STEP,
        "first create",
        c.create("/first", b"", &CreateOptions::persistent()),
    )
    .await
    .unwrap();
    let ephemeral = CreateOptions::ephemeral();
    let lost = within(STEP, "second create", c.create("/second", b"", &ephemeral)).await;
    assert_eq!(lost, Err(Error::ConnectionLoss));
    assert_eq!(proxy.triggered(), 1);

    // The request was applied although its reply never came: the node is there, owned by
    // the same (surviving) session.
    let stat = within(STEP, "observer exists", async {
        loop {
            if let Some(stat) = observer.exists("/second").await.unwrap() {
                return stat;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(stat.ephemeral_owner, w.session);
    w.reconnected(&c, STEP, "the same session").await;
    let retry = within(STEP, "blind retry", c.create("/second", b"", &ephemeral)).await;
    assert_eq!(
        retry,
        Err(Error::NodeExists),
        "a blind retry finds its own node"
    );
    close_all(&[&c, &observer]).await;
}

#[tokio::test]
async fn blackhole_past_the_read_timeout_then_release_before_expiry() {
    let (proxy, c, _) = proxied_client("proxy_blackhole").await;
    let mut w = Watched::new(&c);
    // The client's read timeout is 2/3 T, the server's expiry T.
    let (started, lost) = disconnect_by(&c, &mut w.states, || proxy.blackhole(true)).await;
    let silence = lost - started;
    assert!(
        silence >= Duration::from_millis(2000),
        "disconnected after {silence:?}"
    );
    // Released at about 2/3 T + 0.2 s: before the server's expiry at T.
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.blackhole(false);
    w.reconnected(&c, Duration::from_secs(4), "the session survived")
        .await;
    create(&c, "/healed", b"").await;
    close_all(&[&c]).await;
}

/// Keepalives that never reach the server (the lease's syncs, and pings when a session
/// sends them) make the client give up the connection after the read timeout, and resume
/// the session on a new one.
#[tokio::test]
async fn dropped_keepalives_make_the_client_reconnect() {
    let (proxy, c, _) = proxied_client("proxy_pings").await;
    let mut w = Watched::new(&c);
    let (started, lost) = disconnect_by(&c, &mut w.states, || {
        proxy.drop_pings(true);
        proxy.drop_direction(Direction::ClientToServer, true);
    })
    .await;
    let idle = lost - started;
    assert!(
        idle >= Duration::from_millis(2000),
        "read timeout after {idle:?}"
    );
    assert!(proxy.counts().client_frames_dropped >= 1);
    assert!(proxy.requests_seen(OpCode::Sync) >= 1, "the lease's syncs");
    proxy.drop_direction(Direction::ClientToServer, false);
    proxy.drop_pings(false);
    w.reconnected(&c, Duration::from_secs(4), "the same session")
        .await;
    within(STEP, "exists", c.exists("/")).await.unwrap();
    close_all(&[&c]).await;
}

#[tokio::test]
async fn operations_survive_one_byte_writes() {
    let (proxy, cs, _) = proxied("proxy_split").await;
    proxy.split_frames(true);
    let c = connect(&cs, Duration::from_secs(4)).await;
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    create(&c, "/n", &data).await;
    let (got, stat) = within(STEP, "get", c.get_data("/n")).await.unwrap();
    assert_eq!((&got[..], stat.data_length), (&data[..], 3000));
    for i in 0..5 {
        within(
            STEP,
            "create kid",
            c.create(&format!("/n/k{i}"), b"", &CreateOptions::persistent()),
        )
        .await
        .unwrap();
    }
    let mut kids = within(STEP, "children", c.get_children("/n"))
        .await
        .unwrap();
    kids.sort();
    assert_eq!(kids, ["k0", "k1", "k2", "k3", "k4"]);
    close_all(&[&c]).await;
}

#[tokio::test]
async fn delayed_frames_slow_round_trips() {
    let (proxy, c, _) = proxied_client("proxy_delay").await;
    proxy.delay(Duration::from_millis(200));
    let started = Instant::now();
    create(&c, "/n", b"").await;
    let rtt = started.elapsed();
    assert!(rtt >= Duration::from_millis(400), "round trip {rtt:?}");
    proxy.delay(Duration::ZERO);
    let started = Instant::now();
    within(STEP, "exists", c.exists("/n")).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "delay off for new frames"
    );
    close_all(&[&c]).await;
}

#[tokio::test]
async fn held_replies_arrive_after_the_write_was_applied() {
    let (proxy, c, observer) = proxied_pair("proxy_one_way").await;
    create(&c, "/n", b"old").await;
    proxy.hold_server_to_client(true);
    let write = tokio::spawn({
        let c = c.clone();
        async move { c.set_data("/n", b"new", None).await }
    });
    within(STEP, "write applied", async {
        while &observer.get_data("/n").await.unwrap().0[..] != b"new" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(!write.is_finished(), "the reply is held");
    proxy.hold_server_to_client(false);
    let stat = within(STEP, "held reply", write).await.unwrap().unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(c.state(), SessionState::Connected);
    close_all(&[&c, &observer]).await;
}

#[tokio::test]
async fn refused_reconnects_then_recovery() {
    let (proxy, cs, _) = proxied("proxy_refuse").await;
    // A longer session: refused attempts back off by up to 2 s each.
    let c = connect(&cs, Duration::from_secs(8)).await;
    let mut w = Watched::new(&c);
    proxy.refuse(true);
    proxy.cut_all();
    wait_state(&mut w.states, SessionState::Disconnected, STEP).await;
    eventually(Duration::from_secs(4), "a refused attempt", || {
        proxy.counts().refused >= 1
    })
    .await;
    proxy.refuse(false);
    w.reconnected(&c, Duration::from_secs(5), "the same session")
        .await;
    close_all(&[&c]).await;
}

#[tokio::test]
async fn set_watches_after_a_cut_carry_every_watched_path() {
    let name = "proxy_setwatches";
    let (proxy, c, _) = proxied_client(name).await;
    create(&c, "/a", b"").await;
    let (_, _, data_watch) = within(STEP, "data watch", c.get_data_and_watch("/a"))
        .await
        .unwrap();
    let (_, _exist_watch) = within(STEP, "exist watch", c.exists_and_watch("/missing"))
        .await
        .unwrap();
    let (_, _, _child_watch) = within(STEP, "child watch", c.get_children_and_watch("/"))
        .await
        .unwrap();
    let _persistent = within(
        STEP,
        "persistent",
        c.add_watch("/p", AddWatchMode::Persistent),
    )
    .await
    .unwrap();
    assert!(
        proxy.set_watches_path_bytes().is_empty(),
        "none before the cut"
    );

    let mut states = c.state_stream();
    proxy.cut_all();
    wait_state(&mut states, SessionState::Disconnected, STEP).await;
    wait_state(&mut states, SessionState::Connected, STEP).await;
    // A request after the reconnect: SetWatches goes out before it.
    within(STEP, "exists", c.exists("/a")).await.unwrap();

    // Server paths carry the chroot; the chroot's own root is the chroot path.
    let expected: usize = ["/a", "/missing", "", "/p"]
        .iter()
        .map(|p| format!("/{name}{p}").len())
        .sum();
    let recorded = proxy.set_watches_path_bytes();
    assert_eq!(
        recorded.iter().sum::<usize>(),
        expected,
        "per frame: {recorded:?}"
    );
    assert!(recorded.iter().all(|&n| n <= 128 * 1024));
    assert!(
        proxy.requests_seen(OpCode::SetWatches2) >= 1,
        "a persistent watch needs SetWatches2"
    );
    assert_eq!(proxy.counts().undecodable_set_watches, 0);

    // The data watch was re-armed, not lost.
    within(STEP, "set", c.set_data("/a", b"x", None))
        .await
        .unwrap();
    let event = within(STEP, "data watch fires", data_watch).await;
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeDataChanged, "/a")
    );
    close_all(&[&c]).await;
}

#[tokio::test]
async fn in_flight_requests_fail_with_connection_loss_on_a_cut() {
    let (proxy, c, _) = proxied_client("proxy_in_flight").await;
    let mut w = Watched::new(&c);
    create(&c, "/n", b"").await;
    proxy.hold_server_to_client(true);
    let reads: Vec<_> = (0..5)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.get_data("/n").await })
        })
        .collect();
    eventually(STEP, "reads reached the server", || {
        proxy.requests_seen(OpCode::GetData) == 5
    })
    .await;
    proxy.cut_all();
    proxy.heal();
    for read in reads {
        assert_eq!(
            within(STEP, "in-flight read", read).await.unwrap().err(),
            Some(Error::ConnectionLoss)
        );
    }
    w.reconnected(&c, STEP, "the same session").await;
    within(STEP, "read after", c.get_data("/n")).await.unwrap();
    close_all(&[&c]).await;
}

#[tokio::test]
async fn blackhole_beyond_the_session_timeout_expires_the_session() {
    let (proxy, c, _) = proxied_client("proxy_expire").await;
    let mut states = c.state_stream();
    let (started, _) = disconnect_by(&c, &mut states, || proxy.blackhole(true)).await;
    let expired = within(Duration::from_secs(10), "expiry", async {
        loop {
            match states.next().await.expect("driver stopped") {
                SessionState::Expired => return Instant::now(),
                s => assert!(!s.is_connected(), "reconnected through a blackhole: {s:?}"),
            }
        }
    })
    .await;
    let after = expired - started;
    assert!(after >= Duration::from_secs(4), "expired after {after:?}");
    proxy.blackhole(false);
    assert_eq!(
        within(STEP, "after expiry", c.exists("/")).await,
        Err(Error::SessionExpired)
    );
}

#[tokio::test]
async fn many_watches_are_re_registered_in_bounded_batches() {
    let name = "proxy_many_watches";
    let (proxy, cs, direct) = proxied(name).await;
    let c = connect(&cs, Duration::from_secs(4)).await;
    // 2,500 exist watches on missing 100-character names: about 280 KiB of server paths.
    let paths: Vec<String> = (0..2500).map(|i| format!("/{i:0>100}")).collect();
    let mut watchers = tokio::task::JoinSet::new();
    for (i, path) in paths.clone().into_iter().enumerate() {
        let c = c.clone();
        watchers.spawn(async move { (i, c.exists_and_watch(&path).await.unwrap().1) });
    }
    // join_all yields in completion order: put the watchers back in path order.
    let mut watchers = within(STEP, "set watches", watchers.join_all()).await;
    watchers.sort_by_key(|(i, _)| *i);
    let mut watchers: Vec<_> = watchers.into_iter().map(|(_, w)| w).collect();
    let mut states = c.state_stream();
    proxy.cut_all();
    wait_state(&mut states, SessionState::Connected, STEP).await;
    within(STEP, "exists", c.exists("/")).await.unwrap();

    let recorded = proxy.set_watches_path_bytes();
    let expected: usize = paths.iter().map(|p| name.len() + 1 + p.len()).sum();
    assert_eq!(
        recorded.iter().sum::<usize>(),
        expected,
        "per frame: {recorded:?}"
    );
    assert!(recorded.len() >= 3, "split into batches: {recorded:?}");
    let cap = zkwire::session::SET_WATCHES_MAX_PATH_BYTES;
    assert!(
        recorded.iter().all(|&n| n <= cap),
        "a batch over {cap}: {recorded:?}"
    );
    // The watches were re-armed: creating a watched node fires its watch.
    let observer = connect(&direct, Duration::from_secs(4)).await;
    create(&observer, &paths[1234], b"").await;
    let created = within(STEP, "watch fires", watchers.swap_remove(1234)).await;
    assert_eq!(
        (created.event_type, created.path.as_str()),
        (EventType::NodeCreated, paths[1234].as_str())
    );
    for w in watchers {
        let spurious = tokio::time::timeout(Duration::ZERO, w).await;
        assert!(spurious.is_err(), "an unrelated watch fired: {spurious:?}");
    }
    close_all(&[&c, &observer]).await;
}

#[tokio::test]
async fn dropped_requests_go_unanswered_while_notifications_flow() {
    let (proxy, c, observer) = proxied_pair("proxy_drop_requests").await;
    create(&observer, "/n", b"0").await;
    let mut watch = within(
        STEP,
        "add watch",
        c.add_watch("/n", AddWatchMode::Persistent),
    )
    .await
    .unwrap();
    let mut w = Watched::new(&c);
    // Connecting under a chroot checked that it exists: that exists request counts too.
    let exists_before = proxy.requests_seen(OpCode::Exists);

    proxy.drop_client_to_server(true);
    let pending = tokio::spawn({
        let c = c.clone();
        async move { c.exists("/n").await }
    });
    eventually(STEP, "the request dropped", || {
        proxy.counts().client_frames_dropped >= 1
    })
    .await;
    // Another session's writes still reach us as notifications.
    for i in 1..=3 {
        within(
            STEP,
            "observer write",
            observer.set_data("/n", format!("{i}").as_bytes(), None),
        )
        .await
        .unwrap();
        let event = within(STEP, "notification", watch.next()).await.unwrap();
        assert_eq!(
            (event.event_type, event.path.as_str()),
            (EventType::NodeDataChanged, "/n")
        );
    }
    assert!(
        !pending.is_finished(),
        "the request never reached the server"
    );
    assert_eq!(
        proxy.requests_seen(OpCode::Exists),
        exists_before + 1,
        "but it was seen"
    );

    // Only a new connection settles it.
    proxy.heal();
    proxy.cut_all();
    assert_eq!(
        within(STEP, "dropped request", pending).await.unwrap(),
        Err(Error::ConnectionLoss)
    );
    w.reconnected(&c, STEP, "the same session").await;
    assert!(within(STEP, "exists", c.exists("/n"))
        .await
        .unwrap()
        .is_some());
    close_all(&[&c, &observer]).await;
}

#[tokio::test]
async fn delayed_replies_arrive_after_the_write_was_applied() {
    let (proxy, c, observer) = proxied_pair("proxy_delay_replies").await;
    create(&c, "/n", b"old").await;
    let min = Duration::from_millis(700);
    proxy.delay_direction(
        Direction::ServerToClient,
        min,
        Duration::from_millis(900),
        5,
    );
    let started = Instant::now();
    let write = tokio::spawn({
        let c = c.clone();
        async move { c.set_data("/n", b"new", None).await }
    });
    // The request is not delayed: another session sees it applied well before our reply.
    within(STEP, "write applied", async {
        for _ in 0..1000 {
            if &observer.get_data("/n").await.unwrap().0[..] == b"new" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the write was never applied");
    })
    .await;
    assert!(!write.is_finished(), "the reply is delayed");
    let stat = within(STEP, "delayed reply", write).await.unwrap().unwrap();
    let rtt = started.elapsed();
    assert_eq!(stat.version, 1);
    assert!(rtt >= min, "round trip {rtt:?}");
    proxy.delay_direction(Direction::ServerToClient, Duration::ZERO, Duration::ZERO, 0);
    // Replies already delayed (the lease's syncs, docs/lease.md) keep their delay, and a
    // reply behind them waits for them: let them drain first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    within(STEP, "exists", c.exists("/n")).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "delay off for new frames"
    );
    assert_eq!(c.state(), SessionState::Connected);
    close_all(&[&c, &observer]).await;
}
