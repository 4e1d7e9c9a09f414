//! What a proxy's handle, accept loop and connections share: the switchable faults, the
//! one-shot trigger, the jitter and the counters.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use zkwire::proto::{OpCode, ReplyHeader, RequestHeader};

use super::{Direction, ProxyCounts};
use crate::rng::SplitMix64;

/// The switchable faults; a copy is taken at every turn of a connection's loop.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Faults {
    pub(super) blackhole: bool,
    pub(super) blackhole_drop: bool,
    /// One-way holds, indexed by [`Direction::index`].
    pub(super) hold: [bool; 2],
    /// One-way drops, indexed by [`Direction::index`].
    pub(super) drop: [bool; 2],
    pub(super) delay: Duration,
    /// Per-direction random delays, indexed by [`Direction::index`].
    pub(super) jitter: [Option<Jitter>; 2],
    pub(super) drop_pings: bool,
    pub(super) split: bool,
    pub(super) refuse: bool,
    /// Bumped by `cut_all`; connections born under an older value close.
    pub(super) cut_epoch: u64,
    /// Bumped by `reset_all`; connections born under an older value reset.
    pub(super) reset_epoch: u64,
}

impl Faults {
    pub(super) fn held(&self, dir: Direction) -> bool {
        self.blackhole || self.blackhole_drop || self.hold[dir.index()]
    }

    /// Whether frames read in `dir` are thrown away.
    pub(super) fn drops(&self, dir: Direction) -> bool {
        self.blackhole_drop || self.drop[dir.index()]
    }
}

/// The bounds of a [`FaultProxy::delay_direction`] (`min <= max`).
///
/// [`FaultProxy::delay_direction`]: super::FaultProxy::delay_direction
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Jitter {
    pub(super) min: Duration,
    pub(super) max: Duration,
}

/// An armed [`FaultProxy::cut_after_request`](super::FaultProxy::cut_after_request).
#[derive(Debug, Clone, Copy)]
pub(super) struct Trigger {
    pub(super) op: OpCode,
    pub(super) remaining: usize,
}

/// What the proxy has seen.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) connections: usize,
    pub(super) active: usize,
    pub(super) frames: [usize; 2],
    pub(super) requests: HashMap<i32, usize>,
    pub(super) max_len: HashMap<i32, usize>,
    pub(super) client_frames: Vec<(Option<RequestHeader>, usize)>,
    pub(super) server_frames: Vec<(Option<ReplyHeader>, usize)>,
    pub(super) set_watches_path_bytes: Vec<usize>,
    pub(super) counts: ProxyCounts,
}

/// State shared by the handle, the accept loop and every connection.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) upstream: Mutex<SocketAddr>,
    pub(super) faults: Mutex<Faults>,
    pub(super) trigger: Mutex<Option<Trigger>>,
    pub(super) stats: Mutex<Stats>,
    /// The generators of the per-direction delays, indexed by [`Direction::index`]; shared
    /// by every connection, so the n-th frame delayed in a direction since
    /// [`FaultProxy::delay_direction`](super::FaultProxy::delay_direction) gets the n-th draw.
    pub(super) jitter_rng: Mutex<[SplitMix64; 2]>,
    /// Bumped after every change to `faults`, to wake the connections.
    pub(super) control: watch::Sender<u64>,
}

/// Locks a mutex, ignoring poisoning: every update leaves the data consistent, so a panic
/// elsewhere must not take the proxy down with it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(super) fn faults(&self) -> Faults {
        *lock(&self.faults)
    }

    pub(super) fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut lock(&self.faults));
        self.control.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub(super) fn stats(&self) -> MutexGuard<'_, Stats> {
        lock(&self.stats)
    }

    /// Counts one `op` request against the armed trigger; true when it fires.
    pub(super) fn fire_trigger(&self, op: OpCode) -> bool {
        let mut trigger = lock(&self.trigger);
        let Some(t) = trigger.as_mut().filter(|t| t.op == op) else {
            return false;
        };
        t.remaining = t.remaining.saturating_sub(1);
        if t.remaining > 0 {
            return false;
        }
        *trigger = None;
        self.stats().counts.triggered += 1;
        true
    }

    /// The random part of the delay of a frame read in `dir` now.
    pub(super) fn jitter(&self, dir: Direction, faults: &Faults) -> Duration {
        faults.jitter[dir.index()].map_or(Duration::ZERO, |j| {
            lock(&self.jitter_rng)[dir.index()].between(j.min, j.max)
        })
    }

    /// Counts `n` frames thrown away in `dir`, under the fault that threw them away.
    pub(super) fn count_dropped(&self, dir: Direction, faults: &Faults, n: usize) {
        let mut stats = self.stats();
        let counter = match dir {
            _ if !faults.drop[dir.index()] => &mut stats.counts.frames_discarded,
            Direction::ClientToServer => &mut stats.counts.client_frames_dropped,
            Direction::ServerToClient => &mut stats.counts.server_frames_dropped,
        };
        *counter += n;
    }
}
