//! One relayed connection: its two lanes (what is queued each way, and when it may be
//! written), the faults applied to them, and how the connection ends.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::election::Rewriter;
use super::relay::{delay, held, resetting, ActiveGuard, Faults, PortGuard, Shared, BWD, FWD};
use super::{lock, MAX_HELD};
use crate::pump::{pump, Lanes, Queue, READ_CHUNK};

/// How long a relay waits for the upstream's TCP handshake.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A peer closed cleanly and what it had sent was delivered: close the other (FIN).
    Closed,
    /// A peer failed (e.g. was reset): reset the other too.
    Failed,
    /// [`LinkFault::Reset`](super::LinkFault::Reset).
    Reset,
    /// A held direction went over [`MAX_HELD`].
    Overflow,
}

/// What became of a connection before its upstream was contacted.
enum Before {
    Connect,
    End(End),
    Abandoned,
}

pub(super) async fn run_connection(mut client: TcpStream, guard: ActiveGuard) {
    let shared = Arc::clone(&guard.0);
    let _ = client.set_nodelay(true);
    let rewrite = *lock(&shared.rewrite);
    let mut conn = Conn::new(Arc::clone(&shared), rewrite);
    let mut control = shared.control.subscribe();
    let end = match conn.before_upstream(&mut client, &mut control).await {
        Before::Abandoned => {
            shared.stats().counts.abandoned += 1;
            return;
        }
        Before::End(end) => end,
        Before::Connect => {
            let upstream = *lock(&shared.upstream);
            let connected =
                tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream)).await;
            let Ok(Ok(mut server)) = connected else {
                shared.stats().counts.upstream_failures += 1;
                let _ = client.set_zero_linger();
                return;
            };
            let _ = server.set_nodelay(true);
            let port = server.local_addr().ok().map(|a| a.port());
            if let Some(port) = port {
                shared.stats().upstream_ports.insert(port);
            }
            let port_guard = PortGuard(Arc::clone(&shared), port);
            let end = pump(&mut conn, &mut client, &mut server, &mut control).await;
            finish(&shared, end, &mut client, Some(&mut server)).await;
            // Forget the port only once the socket is closed, so that a look at the socket
            // tables never finds the connection open but unknown.
            drop(server);
            drop(port_guard);
            return;
        }
    };
    finish(&shared, end, &mut client, None).await;
}

async fn finish(
    shared: &Shared,
    end: End,
    client: &mut TcpStream,
    mut server: Option<&mut TcpStream>,
) {
    match end {
        End::Closed => {
            let _ = client.shutdown().await;
            if let Some(s) = server.as_mut() {
                let _ = s.shutdown().await;
            }
        }
        End::Failed | End::Reset | End::Overflow => {
            let _ = client.set_zero_linger();
            if let Some(s) = server {
                let _ = s.set_zero_linger();
            }
            let mut stats = shared.stats();
            match end {
                End::Reset => stats.counts.resets += 1,
                End::Overflow => stats.counts.overflow_cuts += 1,
                _ => {}
            }
        }
    }
}

/// Bytes waiting to be written to a peer.
#[derive(Debug)]
struct Chunk {
    bytes: Bytes,
    release_at: Instant,
}

/// How a source peer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eof {
    Clean,
    Failed,
}

/// One direction of a connection.
#[derive(Debug)]
struct Lane {
    flow: usize,
    queue: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    written: usize,
    /// Bytes in `queue`.
    queued: usize,
    eof: Option<Eof>,
    /// The election-message rewriter, until the first message has gone through.
    rewriter: Option<Rewriter>,
}

impl Lane {
    fn new(flow: usize, rewriter: Option<Rewriter>) -> Self {
        Self {
            flow,
            queue: VecDeque::new(),
            written: 0,
            queued: 0,
            eof: None,
            rewriter,
        }
    }

    fn push(&mut self, bytes: Bytes, release_at: Instant) {
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len();
        self.queue.push_back(Chunk { bytes, release_at });
    }

    fn advance(&mut self, n: usize) {
        self.written += n;
        let done = self
            .queue
            .front()
            .is_some_and(|c| self.written >= c.bytes.len());
        if done {
            self.written = 0;
            if let Some(chunk) = self.queue.pop_front() {
                self.queued -= chunk.bytes.len();
            }
        }
    }

    /// Queues what was read (through the rewriter while it is active); true when an election
    /// address was rewritten.
    fn on_data(&mut self, data: &[u8], release_at: Instant) -> bool {
        let Some(rewriter) = self.rewriter.as_mut() else {
            self.push(Bytes::copy_from_slice(data), release_at);
            return false;
        };
        match rewriter.feed(data) {
            Some((bytes, rewritten)) => {
                self.rewriter = None;
                self.push(bytes, release_at);
                rewritten
            }
            None => false,
        }
    }

    /// The source is done: whatever the rewriter still buffers goes out as it is.
    fn on_eof(&mut self, eof: Eof, release_at: Instant) {
        self.eof = Some(eof);
        if let Some(rewriter) = self.rewriter.take() {
            self.push(rewriter.buf.freeze(), release_at);
        }
    }
}

/// A connection's forwarding state.
#[derive(Debug)]
struct Conn {
    shared: Arc<Shared>,
    lanes: [Lane; 2],
}

impl Conn {
    fn new(shared: Arc<Shared>, rewrite: Option<SocketAddr>) -> Self {
        Self {
            shared,
            lanes: [
                Lane::new(FWD, rewrite.map(Rewriter::new)),
                Lane::new(BWD, None),
            ],
        }
    }

    /// Reads the connector while the forward direction is blackholed, without contacting
    /// the upstream.
    async fn before_upstream(
        &mut self,
        client: &mut TcpStream,
        control: &mut watch::Receiver<u64>,
    ) -> Before {
        let mut buf = vec![0; READ_CHUNK];
        loop {
            control.borrow_and_update();
            let faults = self.shared.faults();
            if resetting(&faults) {
                return Before::End(End::Reset);
            }
            if self.lanes[FWD].eof.is_some() {
                // Closed before it was ever established: nothing reaches the upstream.
                return Before::Abandoned;
            }
            if self.lanes[FWD].queued > MAX_HELD {
                return Before::End(End::Overflow);
            }
            if !held(&faults, FWD) {
                return Before::Connect;
            }
            tokio::select! {
                r = client.read(&mut buf) => self.on_read(FWD, r, &buf),
                changed = control.changed() => {
                    if changed.is_err() {
                        return Before::Abandoned;
                    }
                }
            }
        }
    }
}

impl Lanes for Conn {
    type Faults = Faults;
    type End = End;
    type Queue = Lane;
    const ORPHANED: End = End::Closed;

    /// Applies the faults that end a connection; `Some` ends it.
    fn check(&mut self, faults: &Faults) -> Option<End> {
        if resetting(faults) {
            return Some(End::Reset);
        }
        if self.lanes.iter().any(|l| l.queued > MAX_HELD) {
            return Some(End::Overflow);
        }
        // A peer that stopped ends the connection once what it sent has been delivered.
        self.lanes
            .iter()
            .filter(|l| l.queue.is_empty())
            .find_map(|l| l.eof)
            .map(|eof| match eof {
                Eof::Clean => End::Closed,
                Eof::Failed => End::Failed,
            })
    }

    fn faults(&self) -> Faults {
        self.shared.faults()
    }

    fn lanes(&self) -> &[Lane; 2] {
        &self.lanes
    }

    /// Queues what was read. The faults are read afresh: a switch made just before the peer
    /// wrote must apply to those bytes.
    fn on_read(&mut self, flow: usize, read: io::Result<usize>, buf: &[u8]) {
        let faults = self.shared.faults();
        let release_at = Instant::now() + delay(&faults, flow);
        let lane = &mut self.lanes[flow];
        match read {
            Ok(0) => lane.on_eof(Eof::Clean, release_at),
            Err(_) => lane.on_eof(Eof::Failed, release_at),
            Ok(n) => {
                if lane.on_data(&buf[..n], release_at) {
                    self.shared.stats().counts.rewrites += 1;
                }
            }
        }
    }

    fn on_written(&mut self, flow: usize, written: io::Result<usize>) -> Option<End> {
        match written {
            Ok(0) | Err(_) => Some(End::Failed),
            Ok(n) => {
                self.lanes[flow].advance(n);
                let mut stats = self.shared.stats();
                let counter = if flow == FWD {
                    &mut stats.counts.forward_bytes
                } else {
                    &mut stats.counts.backward_bytes
                };
                *counter += n as u64;
                None
            }
        }
    }
}

impl Queue<Faults> for Lane {
    /// Held directions keep reading (the cap then resets the connection); others stop at
    /// the cap so that a slow reader only slows its writer.
    fn wants_read(&self, faults: &Faults) -> bool {
        self.eof.is_none() && (self.queued < MAX_HELD || held(faults, self.flow))
    }

    fn next_write(&self, now: Instant, faults: &Faults) -> Bytes {
        match self.queue.front() {
            Some(c) if !held(faults, self.flow) && c.release_at <= now => {
                c.bytes.slice(self.written..)
            }
            _ => Bytes::new(),
        }
    }

    fn wake_at(&self, now: Instant, faults: &Faults) -> Option<Instant> {
        let front = self.queue.front()?;
        (!held(faults, self.flow) && front.release_at > now).then_some(front.release_at)
    }
}
