//! A scripted, in-process fake ZooKeeper server for hostile-server tests.
//!
//! [`EvilServer`] listens on `127.0.0.1:0` and runs a script on every accepted connection:
//! an async function of an [`EvilConn`], which reads the client's frames and writes whatever
//! the test wants back, well-formed ([`EvilConn::reply`], [`EvilConn::serve`]) or not
//! ([`EvilConn::send_hostile`], which is counted). Connections are numbered from 0 in accept
//! order, so a script can misbehave on the first connection and serve the client healthily
//! on the next one, which is how a test sees that the client survived and reconnected.
//!
//! Dropping the server aborts the accept loop and every connection task, closing every
//! socket.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use zkwire::jute::{Decode, Encode, FrameDecoder, Reader};
use zkwire::proto::frames::{frame, reply_frame};
use zkwire::proto::{
    sample_reply, ConnectRequest, ConnectResponse, CreateRequest, ErrorCode, OpCode, RequestHeader,
    SyncRequest, AUTH_XID, PING_XID, SAMPLE_DATA,
};

use crate::support::read_frame;

/// The session id an [`EvilServer`] gives a client that asks for a new session.
pub const EVIL_SESSION_ID: i64 = 0x0e71_0000_0000_0001;

/// The session password an [`EvilServer`] hands out.
pub const EVIL_PASSWD: [u8; 16] = *b"evil-password-16";

/// The data a healthy [`EvilConn::serve`] returns for every `getData`.
pub const HEALTHY_DATA: &[u8] = SAMPLE_DATA;

/// A fake ZooKeeper server on loopback that plays a script on each connection.
#[derive(Debug)]
pub struct EvilServer {
    addr: SocketAddr,
    stats: Arc<Stats>,
    task: JoinHandle<()>,
}

/// Counters shared by a server and its connections.
#[derive(Debug, Default)]
struct Stats {
    connections: AtomicUsize,
    hostile_frames: AtomicU64,
}

impl EvilServer {
    /// Listens on `127.0.0.1:0` and runs `script` on every connection accepted.
    ///
    /// A script's error (typically the client closing the socket) only ends that
    /// connection.
    ///
    /// # Errors
    /// When the listener cannot be bound.
    pub async fn start<S, F>(script: S) -> io::Result<Self>
    where
        S: Fn(EvilConn) -> F + Send + Sync + 'static,
        F: Future<Output = io::Result<()>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(Stats::default());
        let task = tokio::spawn(accept_loop(listener, stats.clone(), script));
        Ok(Self { addr, stats, task })
    }

    /// The connect string for a client: `127.0.0.1:<port>`.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.stats.connections.load(Ordering::SeqCst)
    }

    /// Hostile frames sent so far, over every connection.
    pub fn hostile_frames(&self) -> u64 {
        self.stats.hostile_frames.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` connections have been accepted; false if `within` passes
    /// first.
    pub async fn wait_for_connections(&self, n: usize, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while self.connections() < n {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }
}

impl Drop for EvilServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop<S, F>(listener: TcpListener, stats: Arc<Stats>, script: S)
where
    S: Fn(EvilConn) -> F + Send + Sync + 'static,
    F: Future<Output = io::Result<()>> + Send + 'static,
{
    // Owned here so that aborting this task aborts (and closes) every connection.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let index = stats.connections.fetch_add(1, Ordering::SeqCst);
                let conn = EvilConn::new(stream, index, stats.clone());
                connections.spawn(script(conn));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// The server end of one client connection.
#[derive(Debug)]
pub struct EvilConn {
    stream: TcpStream,
    index: usize,
    stats: Arc<Stats>,
    frames: FrameDecoder,
    zxid: i64,
}

impl EvilConn {
    fn new(stream: TcpStream, index: usize, stats: Arc<Stats>) -> Self {
        Self {
            stream,
            index,
            stats,
            frames: FrameDecoder::new(CLIENT_FRAME_CAP),
            zxid: 0,
        }
    }

    /// This connection's number: 0 for the first one the server accepted.
    pub fn index(&self) -> usize {
        self.index
    }

    // ===== reading =====

    /// The next whole frame from the client (payload only).
    ///
    /// # Errors
    /// `UnexpectedEof` when the client closes the connection; `InvalidData` on a frame
    /// length no client should send.
    pub async fn read_frame(&mut self) -> io::Result<Bytes> {
        read_frame(&mut self.stream, &mut self.frames).await
    }

    /// Reads the client's ConnectRequest.
    ///
    /// # Errors
    /// As [`read_frame`](Self::read_frame), or `InvalidData` if it does not decode.
    pub async fn read_connect_request(&mut self) -> io::Result<ConnectRequest> {
        let frame = self.read_frame().await?;
        ConnectRequest::decode_exact(&frame).map_err(invalid)
    }

    /// Reads the next request frame as it comes, pings included.
    ///
    /// # Errors
    /// As [`read_frame`](Self::read_frame), or `InvalidData` without a `RequestHeader`.
    pub async fn read_request(&mut self) -> io::Result<(RequestHeader, Bytes)> {
        let frame = self.read_frame().await?;
        let mut r = Reader::new(&frame);
        let header = r.read::<RequestHeader>().map_err(invalid)?;
        Ok((header, frame.slice(r.position()..)))
    }

    /// The next request other than a ping, SetWatches, auth or a `sync` of the root,
    /// answering those with success as a healthy server does.
    ///
    /// The client sends a `sync` of `/` every few hundred milliseconds of its own accord (the
    /// lease's vouches, docs/lease.md); a script that waits for the user's next request must
    /// not take one of those for it, or its hostile reply would land on the wrong request.
    ///
    /// # Errors
    /// As [`read_request`](Self::read_request), or a failed write.
    pub async fn next_request(&mut self) -> io::Result<(RequestHeader, Bytes)> {
        loop {
            let (header, body) = self.read_request().await?;
            match header.op {
                OpCode::Ping => self.send_frame(PING_XID, -1, ErrorCode::Ok, &[]).await?,
                OpCode::Auth => self.send_frame(AUTH_XID, -1, ErrorCode::Ok, &[]).await?,
                OpCode::SetWatches | OpCode::SetWatches2 => {
                    self.reply(header.xid, ErrorCode::Ok, &[]).await?
                }
                OpCode::Sync if is_root_sync(&body) => {
                    let reply = healthy_reply(header.op, &body);
                    self.reply(header.xid, ErrorCode::Ok, &reply).await?
                }
                _ => return Ok((header, body)),
            }
        }
    }

    // ===== writing =====

    /// Completes the handshake: reads the ConnectRequest and accepts the session it asks for
    /// (a new one gets [`EVIL_SESSION_ID`]) with the timeout it asks for.
    ///
    /// # Errors
    /// As [`read_connect_request`](Self::read_connect_request), or a failed write.
    pub async fn handshake(&mut self) -> io::Result<ConnectRequest> {
        let request = self.read_connect_request().await?;
        let session_id = if request.session_id == 0 {
            EVIL_SESSION_ID
        } else {
            request.session_id
        };
        self.send_connect_response(request.timeout, session_id)
            .await?;
        Ok(request)
    }

    /// Sends a ConnectResponse (37 bytes, read-only byte false); `timeout <= 0` or a session
    /// id of 0 tells the client its session has expired.
    ///
    /// # Errors
    /// A failed write.
    pub async fn send_connect_response(&mut self, timeout: i32, session_id: i64) -> io::Result<()> {
        self.write(&connect_response_frame(timeout, session_id))
            .await
    }

    /// A well-formed reply: header (with the next zxid) then `body`.
    ///
    /// # Errors
    /// A failed write.
    pub async fn reply(&mut self, xid: i32, err: ErrorCode, body: &[u8]) -> io::Result<()> {
        self.zxid += 1;
        self.send_frame(xid, self.zxid, err, body).await
    }

    /// Sends bytes the client must reject or survive, counting them as one hostile frame.
    ///
    /// # Errors
    /// A failed write.
    pub async fn send_hostile(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stats.hostile_frames.fetch_add(1, Ordering::SeqCst);
        self.write(bytes).await
    }

    /// Sends well-formed bytes, not counted as hostile.
    ///
    /// # Errors
    /// A failed write.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write(bytes).await
    }

    /// Plays a healthy server until the client closes the session or the connection: every
    /// request gets a well-formed success reply ([`healthy_reply`]).
    ///
    /// # Errors
    /// A failed write; the client closing the connection is `Ok`.
    pub async fn serve(mut self) -> io::Result<()> {
        loop {
            let (header, body) = match self.next_request().await {
                Ok(request) => request,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            };
            self.reply(header.xid, ErrorCode::Ok, &healthy_reply(header.op, &body))
                .await?;
            if header.op == OpCode::CloseSession {
                return Ok(());
            }
        }
    }

    /// Keeps the connection open and answers nothing (pings included) until the client
    /// closes it.
    ///
    /// # Errors
    /// A read error other than the client closing the connection.
    pub async fn hold(mut self) -> io::Result<()> {
        let mut sink = [0; 4096];
        loop {
            match self.stream.read(&mut sink).await {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Closes the connection (FIN).
    ///
    /// # Errors
    /// A failed shutdown.
    pub async fn close(mut self) -> io::Result<()> {
        self.stream.shutdown().await
    }

    async fn send_frame(
        &mut self,
        xid: i32,
        zxid: i64,
        err: ErrorCode,
        body: &[u8],
    ) -> io::Result<()> {
        self.write(&reply_frame(xid, zxid, err, body)).await
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }
}

/// A whole ConnectResponse frame (37 bytes of payload, read-only byte false).
pub fn connect_response_frame(timeout: i32, session_id: i64) -> Bytes {
    let response = ConnectResponse {
        protocol_version: 0,
        timeout,
        session_id,
        passwd: Bytes::from_static(&EVIL_PASSWD),
        read_only: Some(false),
    };
    frame(|b| response.encode(b))
}

/// The body of a successful reply to `op`, as a healthy server would send it for the
/// request `body`: the [`Sample`](zkwire::proto::Sample) of the reply record the table of
/// operations gives `op` (data [`HEALTHY_DATA`], Stat [`zkwire::proto::SAMPLE_STAT`]) about
/// the path of a create or sync request (`/` for other requests); empty for an op code not in
/// the table.
pub fn healthy_reply(op: OpCode, body: &Bytes) -> Bytes {
    let path = CreateRequest::decode_exact(body)
        .map(|r| r.path)
        .or_else(|_| SyncRequest::decode_exact(body).map(|r| r.path))
        .unwrap_or_else(|_| "/".to_owned());
    sample_reply(op, &path).unwrap_or_default()
}

/// A `sync` of `/`: what the client's lease sends in the background.
fn is_root_sync(body: &Bytes) -> bool {
    SyncRequest::decode_exact(body).is_ok_and(|r| r.path == "/")
}

fn invalid(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The largest frame the fake server accepts from a client.
const CLIENT_FRAME_CAP: usize = 4 << 20;
