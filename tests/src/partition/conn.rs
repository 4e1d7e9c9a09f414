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

/// How long a relay waits for the upstream's TCP handshake.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Bytes read from a socket in one call.
const READ_CHUNK: usize = 64 * 1024;

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
            let end = conn.pump(&mut client, &mut server, &mut control).await;
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

    /// Held directions keep reading (the cap then resets the connection); others stop at
    /// the cap so that a slow reader only slows its writer.
    fn wants_read(&self, faults: &Faults) -> bool {
        self.eof.is_none() && (self.queued < MAX_HELD || held(faults, self.flow))
    }

    fn push(&mut self, bytes: Bytes, release_at: Instant) {
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len();
        self.queue.push_back(Chunk { bytes, release_at });
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

    /// Applies the faults that end a connection; `Some` ends it.
    fn check(&self, faults: &Faults) -> Option<End> {
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

    /// Forwards between the two sockets until a peer stops or a fault ends the connection.
    async fn pump(
        &mut self,
        client: &mut TcpStream,
        server: &mut TcpStream,
        control: &mut watch::Receiver<u64>,
    ) -> End {
        let (mut client_rd, mut client_wr) = client.split();
        let (mut server_rd, mut server_wr) = server.split();
        let mut client_buf = vec![0; READ_CHUNK];
        let mut server_buf = vec![0; READ_CHUNK];
        loop {
            // Mark the control version seen before reading the faults, so that a change made
            // after this point wakes the select below.
            control.borrow_and_update();
            let faults = self.shared.faults();
            if let Some(end) = self.check(&faults) {
                return end;
            }
            let now = Instant::now();
            let to_server = self.lanes[FWD].next_write(now, &faults);
            let to_client = self.lanes[BWD].next_write(now, &faults);
            let wake = self
                .lanes
                .iter()
                .filter_map(|l| l.wake_at(now, &faults))
                .min();
            let read_client = self.lanes[FWD].wants_read(&faults);
            let read_server = self.lanes[BWD].wants_read(&faults);
            tokio::select! {
                r = client_rd.read(&mut client_buf), if read_client => {
                    self.on_read(FWD, r, &client_buf);
                }
                r = server_rd.read(&mut server_buf), if read_server => {
                    self.on_read(BWD, r, &server_buf);
                }
                r = server_wr.write(&to_server), if !to_server.is_empty() => {
                    if let Some(end) = self.on_written(FWD, r) {
                        return end;
                    }
                }
                r = client_wr.write(&to_client), if !to_client.is_empty() => {
                    if let Some(end) = self.on_written(BWD, r) {
                        return end;
                    }
                }
                () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
                changed = control.changed() => {
                    // The relay handle is gone; its Drop is aborting us anyway.
                    if changed.is_err() {
                        return End::Closed;
                    }
                }
            }
        }
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
