//! The driver runs over any byte stream: here an in-memory duplex pipe to a scripted fake
//! server, with no socket at all.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
// The fake server speaks the protocol through the `unstable` codec and records.
use zkwire::jute::{Decode, Encode, FrameDecoder, Reader};
use zkwire::proto::frames::{frame, notification_frame, reply_frame};
use zkwire::proto::{
    ConnectRequest, ConnectResponse, ErrorCode, EventType, ExistsResponse, GetDataRequest,
    GetDataResponse, KeeperState, OpCode, RequestHeader, Stat, SyncResponse, WatcherEvent,
};
use zkwire::{Client, Connect, HostPort};

/// Hands out the client end of a fresh pipe whose server end is played by `serve`.
#[derive(Clone, Default)]
struct Pipes {
    hosts_dialled: Arc<Mutex<Vec<String>>>,
}

impl Connect for Pipes {
    type Stream = DuplexStream;

    async fn connect(&self, host: &HostPort) -> io::Result<DuplexStream> {
        self.hosts_dialled.lock().unwrap().push(host.to_string());
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(serve(server));
        Ok(client)
    }
}

async fn read_frame(io: &mut DuplexStream, frames: &mut FrameDecoder) -> Option<Bytes> {
    loop {
        if let Some(frame) = frames.next_frame().unwrap() {
            return Some(frame);
        }
        if io.read_buf(frames.buffer_mut()).await.ok()? == 0 {
            return None;
        }
    }
}

/// A fake server: accepts the session at once, answers getData with the path as data and
/// exists with a Stat, and closes on closeSession.
async fn serve(io: DuplexStream) {
    recording_server(io, Duration::ZERO, Seen::default()).await;
}

#[tokio::test]
async fn client_runs_over_an_in_memory_stream() {
    let pipes = Pipes::default();
    let client = Client::builder()
        .connect_with("fake-host:1/app", pipes.clone())
        .await
        .unwrap();
    assert_eq!(client.session_id(), 0x42);
    let (data, _) = client.get_data("/x").await.unwrap();
    assert_eq!(&data[..], b"/app/x", "the chroot is added on the way out");
    client.close().await.unwrap();
    assert_eq!(*pipes.hosts_dialled.lock().unwrap(), ["fake-host:1"]);
}

/// More requests than the driver's command queue holds (1,024), made before the driver runs
/// once: on a current-thread runtime every task sends before the driver takes any, so the
/// later ones find the queue full and wait for room. Each is still answered, with its own
/// reply.
#[tokio::test(flavor = "current_thread")]
async fn requests_beyond_the_command_queue_wait_for_room() {
    const N: usize = 3_000;
    let client = Client::builder()
        .connect_with("fake-host:1", Pipes::default())
        .await
        .unwrap();
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.get_data(&format!("/n{i}")).await })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let (data, _) = task.await.unwrap().unwrap();
        assert_eq!(data, format!("/n{i}").as_bytes());
    }
    client.close().await.unwrap();
}

// ===== driver defects: writes never repeated, dropped requests never written =====

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A pipe's client end that counts the writes that took bytes, and whose flush, when
/// `slow`, pends every other call (as a TLS stream's may, while its records go out), waking
/// itself a moment later.
struct TestStream {
    inner: DuplexStream,
    slow: bool,
    flushes: usize,
    writes: Arc<AtomicUsize>,
}

impl AsyncRead for TestStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TestStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.flushes += 1;
        if self.slow && self.flushes % 2 == 1 {
            let waker = cx.waker().clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                waker.wake();
            });
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Reads the ConnectRequest and, after `delay`, accepts it as session 0x42.
async fn accept_session(io: &mut DuplexStream, frames: &mut FrameDecoder, delay: Duration) {
    let connect = read_frame(io, frames).await.unwrap();
    let request = ConnectRequest::decode_exact(&connect).unwrap();
    tokio::time::sleep(delay).await;
    let response = ConnectResponse {
        protocol_version: 0,
        timeout: request.timeout,
        session_id: 0x42,
        passwd: Bytes::from_static(&[9; 16]),
        read_only: Some(false),
    };
    io.write_all(&frame(|b| response.encode(b))).await.unwrap();
}

/// What a recording fake server saw: the xid and getData path of every request.
type Seen = Arc<Mutex<Vec<(i32, String)>>>;

/// A fake server that waits `handshake_delay` before its ConnectResponse and records every
/// request it reads.
async fn recording_server(mut io: DuplexStream, handshake_delay: Duration, seen: Seen) {
    let mut frames = FrameDecoder::default();
    accept_session(&mut io, &mut frames, handshake_delay).await;
    while let Some(frame) = read_frame(&mut io, &mut frames).await {
        let mut r = Reader::new(&frame);
        let header = r.read::<RequestHeader>().unwrap();
        let path = if header.op == OpCode::GetData {
            GetDataRequest::decode_exact(&frame.slice(8..))
                .unwrap()
                .path
        } else {
            String::new()
        };
        seen.lock().unwrap().push((header.xid, path.clone()));
        let body = match header.op {
            OpCode::GetData => GetDataResponse {
                data: Some(path.into_bytes().into()),
                stat: Stat::default(),
            }
            .to_bytes(),
            // The lease's syncs (docs/lease.md).
            OpCode::Sync => SyncResponse {
                path: "/".to_owned(),
            }
            .to_bytes(),
            // The connect's check that the chroot exists.
            OpCode::Exists => ExistsResponse {
                stat: Stat::default(),
            }
            .to_bytes(),
            _ => Bytes::new(),
        };
        let out = reply_frame(header.xid, 7, ErrorCode::Ok, &body);
        if header.op == OpCode::CloseSession {
            let _ = io.write_all(&out).await;
            return;
        }
        if io.write_all(&out).await.is_err() {
            return;
        }
    }
}

#[derive(Clone)]
struct Recording {
    seen: Seen,
    handshake_delay: Duration,
    slow_flush: bool,
}

impl Recording {
    /// A connector to recording servers, and what they will see.
    fn new(handshake_delay: Duration, slow_flush: bool) -> (Self, Seen) {
        let seen = Seen::default();
        let connector = Self {
            seen: seen.clone(),
            handshake_delay,
            slow_flush,
        };
        (connector, seen)
    }
}

impl Connect for Recording {
    type Stream = TestStream;

    async fn connect(&self, _host: &HostPort) -> io::Result<TestStream> {
        let (client, server) = tokio::io::duplex(1 << 20);
        tokio::spawn(recording_server(
            server,
            self.handshake_delay,
            self.seen.clone(),
        ));
        // An odd start makes every flush but the first pend, when slow flushes are wanted.
        let flushes = if self.slow_flush { 0 } else { 1 };
        Ok(TestStream {
            inner: client,
            slow: true,
            flushes,
            writes: Arc::default(),
        })
    }
}

/// A write that completed while its flush was still pending is never written again, even
/// when another source (here, new requests) is handled by a driver step in between: every
/// request reaches the server once, and every reply matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_flush_never_repeats_a_write() {
    let (connector, seen) = Recording::new(Duration::ZERO, true);
    let client = Client::builder()
        .connect_with("fake:1", connector)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            let path = format!("/n{i}");
            let (data, _) = c.get_data(&path).await.unwrap();
            assert_eq!(&data[..], path.as_bytes());
        }));
        if i % 10 == 0 {
            tokio::task::yield_now().await;
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("every request answered")
            .unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    // getData requests only (the lease's syncs record an empty path).
    let mut xids: Vec<i32> = seen
        .iter()
        .filter(|(x, path)| *x > 0 && !path.is_empty())
        .map(|(x, _)| *x)
        .collect();
    let total = xids.len();
    xids.sort_unstable();
    xids.dedup();
    assert_eq!(xids.len(), total, "a request frame was written twice");
    assert_eq!(total, 200);
    assert_eq!(client.stats().connections, 1, "never reconnected");
}

/// A request whose caller gave up while the handshake was under way is never written, as
/// `Client` promises for requests not yet written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_during_the_handshake_is_never_written() {
    let (connector, seen) = Recording::new(Duration::from_millis(300), false);
    let client = Client::builder().spawn("fake:1", connector).unwrap();
    // Give the driver time to connect and send the ConnectRequest.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let gave_up =
        tokio::time::timeout(Duration::from_millis(50), client.get_data("/abandoned")).await;
    assert!(gave_up.is_err(), "no answer before the handshake");
    let (data, _) = tokio::time::timeout(Duration::from_secs(5), client.get_data("/kept"))
        .await
        .expect("answered after the handshake")
        .unwrap();
    assert_eq!(&data[..], b"/kept");
    let paths: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(paths, ["/kept"], "the abandoned request was written");
    client.close().await.unwrap();
}

/// Durations too large for the clock mean "no limit", never a panic in the caller or in the
/// driver task: a session timeout of `Duration::MAX` (the wire carries at most `i32::MAX`
/// ms), a connect timeout and a request timeout of `Duration::MAX`.
#[tokio::test]
async fn huge_durations_never_panic() {
    let (connector, _) = Recording::new(Duration::ZERO, false);
    let client = Client::builder()
        .with_session_timeout(Duration::MAX)
        .with_connect_timeout(Duration::MAX)
        .with_request_timeout(Duration::MAX)
        .connect_with("fake:1", connector)
        .await
        .unwrap();
    assert_eq!(
        client.session_timeout(),
        Some(Duration::from_millis(i32::MAX as u64))
    );
    let (data, _) = client
        .with_timeout(Duration::MAX)
        .get_data("/x")
        .await
        .unwrap();
    assert_eq!(&data[..], b"/x");
    assert!(client.lease_deadline().is_some());
    client.close().await.unwrap();
    assert!(!client.stats().driver_running || client.lease_deadline().is_none());
}

// ===== fairness: a source that is always ready does not starve the others =====

/// How many notifications an [`Endless`] stream makes up at most: the bound of the test.
const ENDLESS_LIMIT: usize = 1_000_000;

/// A stream over the recording server whose reads are never pending: once the server's
/// handshake reply is through, a read with nothing from the server returns a made-up watch
/// notification (for a path nobody watches) instead, until [`ENDLESS_LIMIT`] of them. The
/// server's own frames are passed on whole, between made-up ones.
struct Endless {
    inner: tokio::io::ReadHalf<DuplexStream>,
    /// The server's bytes, cut into frames.
    frames: FrameDecoder,
    /// Bytes due to the reader: whole frames.
    ready: bytes::BytesMut,
    handshake_done: bool,
    made_up: Arc<AtomicUsize>,
}

impl Endless {
    fn notification() -> Bytes {
        let event = WatcherEvent {
            event_type: EventType::NodeDataChanged,
            state: KeeperState::SyncConnected,
            path: "/flood".to_owned(),
        };
        notification_frame(7, &event)
    }

    /// Takes what the server has sent, without waiting; whole frames go to `ready`.
    fn take_from_server(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let mut buf = [0u8; 4096];
        let mut read = ReadBuf::new(&mut buf);
        if let Poll::Ready(result) = Pin::new(&mut self.inner).poll_read(cx, &mut read) {
            result?;
            self.frames.buffer_mut().extend_from_slice(read.filled());
        }
        while let Some(frame) = self.frames.next_frame().unwrap() {
            self.ready
                .extend_from_slice(&(frame.len() as u32).to_be_bytes());
            self.ready.extend_from_slice(&frame);
            self.handshake_done = true;
        }
        Ok(())
    }
}

impl AsyncRead for Endless {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // As a socket's read does: each one spends the task's budget, so a task that reads on
        // and on still yields to the scheduler now and then.
        let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
        if self.ready.is_empty() {
            self.take_from_server(cx)?;
        }
        if self.ready.is_empty() {
            if !self.handshake_done || self.made_up.load(Ordering::Relaxed) >= ENDLESS_LIMIT {
                return Poll::Pending; // the server's read registered the waker
            }
            self.made_up.fetch_add(1, Ordering::Relaxed);
            let made_up = Self::notification();
            self.ready.extend_from_slice(&made_up);
        }
        let n = self.ready.len().min(buf.remaining());
        buf.put_slice(&self.ready.split_to(n));
        coop.made_progress();
        Poll::Ready(Ok(()))
    }
}

#[derive(Clone, Default)]
struct EndlessConnector {
    made_up: Arc<AtomicUsize>,
    seen: Seen,
}

impl Connect for EndlessConnector {
    /// Reads through [`Endless`], writes straight to the server.
    type Stream = tokio::io::Join<Endless, tokio::io::WriteHalf<DuplexStream>>;

    async fn connect(&self, _host: &HostPort) -> io::Result<Self::Stream> {
        let (client, server) = tokio::io::duplex(1 << 20);
        tokio::spawn(recording_server(server, Duration::ZERO, self.seen.clone()));
        let (read, write) = tokio::io::split(client);
        let endless = Endless {
            inner: read,
            frames: FrameDecoder::default(),
            ready: bytes::BytesMut::new(),
            handshake_done: false,
            made_up: self.made_up.clone(),
        };
        Ok(tokio::io::join(endless, write))
    }
}

/// While the connection always has bytes to read, the driver still takes the caller's
/// requests and writes them: each poll of a step starts one source further on, so the
/// socket cannot starve the commands. A driver that always polled the socket first would
/// take a command only when a read found nothing, which this stream never allows before its
/// bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_is_always_readable_does_not_starve_requests() {
    let connector = EndlessConnector::default();
    let made_up = connector.made_up.clone();
    let client = Client::builder()
        .connect_with("fake:1", connector)
        .await
        .unwrap();
    for i in 0..10 {
        let path = format!("/r{i}");
        let (data, _) = tokio::time::timeout(Duration::from_secs(60), client.get_data(&path))
            .await
            .expect("answered within the stream's bound")
            .unwrap();
        assert_eq!(&data[..], path.as_bytes());
    }
    // A few dozen per request here; more while a loaded machine delays the server's answer
    // (the driver reads on meanwhile). Starved, the first request waits for all of them.
    let made_up = made_up.load(Ordering::Relaxed);
    assert!(
        made_up < ENDLESS_LIMIT / 2,
        "ten requests took {made_up} made-up notifications to get through"
    );
}

// ===== the driver's timer =====

/// A server that accepts the session and then reads requests without ever answering one.
async fn silent_server(mut io: DuplexStream) {
    let mut frames = FrameDecoder::default();
    accept_session(&mut io, &mut frames, Duration::ZERO).await;
    while read_frame(&mut io, &mut frames).await.is_some() {}
}

#[derive(Clone)]
struct Silent;

impl Connect for Silent {
    type Stream = DuplexStream;

    async fn connect(&self, _host: &HostPort) -> io::Result<DuplexStream> {
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(silent_server(server));
        Ok(client)
    }
}

/// The driver's timer fires: a request nobody answers ends with `Timeout` at its deadline,
/// again and again (each deadline sets the timer anew), while the connection stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_requests_time_out_through_the_driver_timer() {
    let client = Client::builder()
        .with_session_timeout(Duration::from_secs(30))
        .spawn("fake:1", Silent)
        .unwrap();
    for i in 0..3 {
        let started = std::time::Instant::now();
        let result = tokio::time::timeout(
            Duration::from_secs(10),
            client
                .with_timeout(Duration::from_millis(100 * (i + 1)))
                .get_data("/never"),
        )
        .await
        .expect("the request's own deadline ended it");
        assert!(matches!(result, Err(zkwire::Error::Timeout)), "{result:?}");
        assert!(started.elapsed() >= Duration::from_millis(100 * (i + 1)));
    }
}

/// Hands out a pipe whose server accepts the session and hangs up at `hang_up`; every later
/// connect waits for `gate` before it succeeds.
#[derive(Clone, Default)]
struct GatedAfterFirst {
    dialled: Arc<AtomicUsize>,
    hang_up: Arc<tokio::sync::Notify>,
    gate: Arc<tokio::sync::Notify>,
}

impl Connect for GatedAfterFirst {
    type Stream = DuplexStream;

    async fn connect(&self, _host: &HostPort) -> io::Result<DuplexStream> {
        if self.dialled.fetch_add(1, Ordering::SeqCst) > 0 {
            self.gate.notified().await;
        }
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let hang_up = Arc::clone(&self.hang_up);
        tokio::spawn(async move {
            let mut frames = FrameDecoder::default();
            accept_session(&mut server, &mut frames, Duration::ZERO).await;
            hang_up.notified().await;
        });
        Ok(client)
    }
}

/// A connect attempt that completes after `close()` is dropped, not taken up: the closed
/// client opens no connection. (It was counted and kept, an idle socket after close.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_that_completes_after_close_is_dropped() {
    let connector = GatedAfterFirst::default();
    let client = Client::builder()
        .connect_with("fake-host:1", connector.clone())
        .await
        .unwrap();
    // The server hangs up: the client dials again, and is held at the gate.
    connector.hang_up.notify_one();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while connector.dialled.load(Ordering::SeqCst) < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no second connect");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    client.close().await.unwrap();
    connector.gate.notify_one();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(client.stats().connections, 1, "{:?}", client.stats());
}

// ===== batching: callers answered together send their next requests in one write =====

/// A fake server that holds getData replies until `batch` of them are due, then sends them
/// in one write; it answers anything else at once.
async fn batching_server(mut io: DuplexStream, batch: usize) {
    let mut frames = FrameDecoder::default();
    accept_session(&mut io, &mut frames, Duration::ZERO).await;
    let mut held = Vec::new();
    let mut count = 0;
    while let Some(frame) = read_frame(&mut io, &mut frames).await {
        let header = Reader::new(&frame).read::<RequestHeader>().unwrap();
        let body = match header.op {
            OpCode::GetData => GetDataResponse {
                data: None,
                stat: Stat::default(),
            }
            .to_bytes(),
            OpCode::Sync => SyncResponse {
                path: "/".to_owned(),
            }
            .to_bytes(),
            _ => Bytes::new(),
        };
        held.extend_from_slice(&reply_frame(header.xid, 7, ErrorCode::Ok, &body));
        count += usize::from(header.op == OpCode::GetData);
        if count == batch || header.op != OpCode::GetData {
            if io.write_all(&held).await.is_err() {
                return;
            }
            held.clear();
            count = 0;
        }
    }
}

/// Connects to a [`batching_server`] through a [`TestStream`] whose flushes never pend.
#[derive(Clone)]
struct Batching {
    batch: usize,
    writes: Arc<AtomicUsize>,
}

impl Connect for Batching {
    type Stream = TestStream;

    async fn connect(&self, _host: &HostPort) -> io::Result<TestStream> {
        let (client, server) = tokio::io::duplex(1 << 20);
        tokio::spawn(batching_server(server, self.batch));
        Ok(TestStream {
            inner: client,
            slow: false,
            flushes: 0,
            writes: self.writes.clone(),
        })
    }
}

/// Callers whose answers came in one read send their next requests in one write, or close
/// to it. On one worker thread the first of them to run would otherwise wake the driver
/// ahead of the others (a task woken by the running one runs next), and each request would
/// go out alone: a write per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn callers_answered_together_share_their_next_write() {
    const CALLERS: usize = 8;
    const ROUNDS: usize = 25;
    let connector = Batching {
        batch: CALLERS,
        writes: Arc::default(),
    };
    let client = Client::builder()
        .connect_with("fake:1", connector.clone())
        .await
        .unwrap();
    let before = connector.writes.load(Ordering::Relaxed);
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    client.get_data("/n").await.unwrap();
                }
            })
        })
        .collect();
    for caller in callers {
        tokio::time::timeout(Duration::from_secs(10), caller)
            .await
            .expect("every request answered")
            .unwrap();
    }
    let writes = connector.writes.load(Ordering::Relaxed) - before;
    assert!(
        writes <= 3 * ROUNDS,
        "{writes} writes for {ROUNDS} rounds of {CALLERS} callers answered together"
    );
}
