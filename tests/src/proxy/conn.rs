//! One proxied connection: its two lanes (what waits to be written each way, and when), the
//! faults applied to them frame by frame, and how it ends.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;
use zkwire::proto::{OpCode, ReplyHeader, RequestHeader, PING_XID};

use super::accept::{Birth, End};
use super::framing::{decode_prefix, with_prefix, Framer, Piece};
use super::state::{Faults, Shared};
use super::{Direction, MAX_BUFFERED};
use crate::pump::{Lanes, Queue, TO_CLIENT, TO_SERVER};

/// Bytes waiting to be written to a peer.
#[derive(Debug)]
pub(super) struct Chunk {
    bytes: Bytes,
    release_at: Instant,
    /// Written last: the connection is cut once this chunk is out (a fired trigger).
    last: bool,
}

/// One direction of a connection.
#[derive(Debug)]
pub(super) struct Lane {
    dir: Direction,
    framer: Framer,
    /// Whether the next frame is the handshake frame (no header).
    first: bool,
    queue: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    written: usize,
    /// Bytes in `queue`.
    queued: usize,
    /// The source peer closed (or failed): nothing more will be read.
    eof: bool,
}

impl Lane {
    fn new(dir: Direction) -> Self {
        Self {
            dir,
            framer: Framer::new(),
            first: true,
            queue: VecDeque::new(),
            written: 0,
            queued: 0,
            eof: false,
        }
    }

    fn overflowed(&self) -> bool {
        self.queued > MAX_BUFFERED
    }

    fn push(&mut self, bytes: Bytes, release_at: Instant, last: bool) {
        self.queued += bytes.len();
        self.queue.push_back(Chunk {
            bytes,
            release_at,
            last,
        });
    }

    /// Records `n` bytes written; returns the chunk if it is now fully written.
    fn advance(&mut self, n: usize) -> Option<Chunk> {
        self.written += n;
        let done = self
            .queue
            .front()
            .is_some_and(|c| self.written >= c.bytes.len());
        if !done {
            return None;
        }
        self.written = 0;
        let chunk = self.queue.pop_front()?;
        self.queued -= chunk.bytes.len();
        Some(chunk)
    }

    /// Drops every queued chunk except a partly written front one (dropping that would
    /// break the framing). Returns how many were dropped and whether a `last` one was.
    fn discard(&mut self) -> (usize, bool) {
        let keep = usize::from(self.written > 0);
        let dropped: Vec<Chunk> = self.queue.drain(keep.min(self.queue.len())..).collect();
        self.queued -= dropped.iter().map(|c| c.bytes.len()).sum::<usize>();
        (dropped.len(), dropped.iter().any(|c| c.last))
    }
}

/// A connection's forwarding state; both sockets are borrowed by [`Conn::pump`].
#[derive(Debug)]
pub(super) struct Conn {
    shared: Arc<Shared>,
    birth: Birth,
    lanes: [Lane; 2],
    /// A trigger fired: no more client bytes are read, and the connection ends once the
    /// triggering frame is written.
    doomed: bool,
}

pub(super) const C2S: usize = TO_SERVER;
pub(super) const S2C: usize = TO_CLIENT;

impl Conn {
    pub(super) fn new(shared: Arc<Shared>, birth: Birth) -> Self {
        Self {
            shared,
            birth,
            lanes: [
                Lane::new(Direction::ClientToServer),
                Lane::new(Direction::ServerToClient),
            ],
            doomed: false,
        }
    }

    /// Empties the queues of the directions being dropped; true when that threw away a
    /// trigger's frame, which leaves nothing to wait for before the cut.
    fn discard_dropped(&mut self, faults: &Faults) -> bool {
        let mut lost_last = false;
        for lane in &mut self.lanes {
            if !faults.drops(lane.dir) {
                continue;
            }
            let (n, last) = lane.discard();
            lost_last |= last;
            if n > 0 {
                self.shared.count_dropped(lane.dir, faults, n);
            }
        }
        lost_last
    }

    /// Logs one piece and queues it (due at `read_at` plus its random delay) unless a fault
    /// swallows it.
    fn on_piece(&mut self, dir: Direction, piece: Piece, read_at: Instant, faults: &Faults) {
        let (bytes, last) = match piece {
            Piece::Raw(bytes) => (bytes, false),
            Piece::Frame(payload) => match dir {
                Direction::ClientToServer => match self.on_request(&payload, faults) {
                    Some(last) => (with_prefix(&payload), last),
                    None => return,
                },
                Direction::ServerToClient => {
                    self.on_reply(&payload);
                    (with_prefix(&payload), false)
                }
            },
        };
        if faults.drops(dir) && !last {
            self.shared.count_dropped(dir, faults, 1);
            return;
        }
        // The queue is written strictly in order, so a frame due before the one ahead of it
        // simply waits for it: its effective due time is the later of the two.
        let release_at = read_at + self.shared.jitter(dir, faults);
        self.doomed |= last;
        self.lanes[dir.index()].push(bytes, release_at, last);
    }

    /// Logs a client frame and applies the request faults: `None` swallows it, `Some(true)`
    /// forwards it as the connection's last frame (a fired trigger).
    fn on_request(&mut self, payload: &Bytes, faults: &Faults) -> Option<bool> {
        let lane = &mut self.lanes[C2S];
        let header = if std::mem::take(&mut lane.first) {
            None
        } else {
            decode_prefix::<RequestHeader>(payload)
        };
        self.shared.stats().log_client(header.as_ref(), payload);
        if faults.drop[C2S] {
            // Dropped here, before the trigger can count it: it never reaches the server.
            self.shared
                .count_dropped(Direction::ClientToServer, faults, 1);
            return None;
        }
        let Some(header) = header else {
            return Some(false);
        };
        if faults.drop_pings && header.xid == PING_XID && header.op == OpCode::Ping {
            self.shared.stats().counts.pings_dropped += 1;
            return None;
        }
        Some(self.shared.fire_trigger(header.op))
    }

    fn on_reply(&mut self, payload: &Bytes) {
        let lane = &mut self.lanes[S2C];
        let header = if std::mem::take(&mut lane.first) {
            None
        } else {
            decode_prefix::<ReplyHeader>(payload)
        };
        self.shared.stats().log_server(header, payload);
    }
}

impl Lanes for Conn {
    type Faults = Faults;
    type End = End;
    type Queue = Lane;
    const ORPHANED: End = End::Cut;

    fn faults(&self) -> Faults {
        self.shared.faults()
    }

    fn lanes(&self) -> &[Lane; 2] {
        &self.lanes
    }

    /// Applies the faults that end or empty the connection; `Some` ends it.
    fn check(&mut self, faults: &Faults) -> Option<End> {
        if faults.reset_epoch > self.birth.reset {
            self.shared.stats().counts.reset_connections += 1;
            return Some(End::Reset);
        }
        if faults.cut_epoch > self.birth.cut {
            self.shared.stats().counts.cut_connections += 1;
            return Some(End::Cut);
        }
        if self.discard_dropped(faults) {
            return Some(End::Cut);
        }
        if self.lanes.iter().any(Lane::overflowed) {
            self.shared.stats().counts.overflow_cuts += 1;
            return Some(End::Cut);
        }
        // A peer that closed ends the connection once what it sent has been forwarded (a
        // closeSession, or an "expired" ConnectResponse, must get through).
        self.lanes
            .iter()
            .any(|l| l.eof && l.queue.is_empty())
            .then_some(End::Closed)
    }

    fn wants_read(&self, lane: usize, faults: &Faults) -> bool {
        // After a trigger fired nothing more is read from the client.
        !(self.doomed && lane == C2S) && self.lanes[lane].wants_read(faults)
    }

    fn on_written(&mut self, lane: usize, written: io::Result<usize>) -> Option<End> {
        match written {
            Ok(0) | Err(_) => Some(End::Closed),
            Ok(n) => match self.lanes[lane].advance(n) {
                Some(chunk) if chunk.last => Some(End::Cut),
                _ => None,
            },
        }
    }

    /// Frames what was read and queues it. The faults are read afresh rather than taken from
    /// the loop's snapshot: a switch made just before the peer wrote (both ready when the
    /// loop wakes) must apply to those bytes.
    fn on_read(&mut self, lane: usize, read: io::Result<usize>, buf: &[u8]) {
        let dir = if lane == C2S {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        };
        let faults = &self.shared.faults();
        let lane = &mut self.lanes[dir.index()];
        let n = match read {
            Ok(0) | Err(_) => {
                lane.eof = true;
                return;
            }
            Ok(n) => n,
        };
        let read_at = Instant::now() + faults.delay;
        for piece in lane.framer.push(&buf[..n]) {
            // After a trigger fired nothing more from the client may reach the server.
            if self.doomed && dir == Direction::ClientToServer {
                break;
            }
            self.on_piece(dir, piece, read_at, faults);
        }
    }
}

impl Queue<Faults> for Lane {
    /// Held directions keep reading (the test asked for the bytes to be held, and the cap
    /// then cuts); others stop at the cap so that a slow reader only slows its writer.
    fn wants_read(&self, faults: &Faults) -> bool {
        !self.eof && (self.queued < MAX_BUFFERED || faults.held(self.dir))
    }

    /// What to write next (empty for nothing): the rest of the front chunk, or one byte of
    /// it in split mode.
    fn next_write(&self, now: Instant, faults: &Faults) -> Bytes {
        match self.queue.front() {
            Some(c) if !faults.held(self.dir) && c.release_at <= now => {
                let rest = c.bytes.slice(self.written..);
                if faults.split {
                    rest.slice(..rest.len().min(1))
                } else {
                    rest
                }
            }
            _ => Bytes::new(),
        }
    }

    /// When the front chunk becomes writable, if it is waiting on its delay only.
    fn wake_at(&self, now: Instant, faults: &Faults) -> Option<Instant> {
        let front = self.queue.front()?;
        (!faults.held(self.dir) && front.release_at > now).then_some(front.release_at)
    }
}
