//! The state every task of the run reads and writes: the stop flag, the counters, who holds
//! the lock, the fenced store, and the records of the faults, partitions and kills.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
use std::sync::{Mutex as StdMutex, MutexGuard as StdGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use zkwire_recipes::LostReason;

use crate::args::Settings;
use crate::faults::FaultRecord;
use crate::kills::KillRecord;
use crate::partition::PartitionRecord;
use crate::store::FencedStore;

/// Locks a std mutex, ignoring poisoning (every update leaves the data consistent).
pub(crate) fn lock<T>(m: &StdMutex<T>) -> StdGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts by name, in name order.
pub(crate) type Tally = BTreeMap<String, u64>;

pub(crate) fn bump(tally: &mut Tally, key: impl Into<String>) {
    *tally.entry(key.into()).or_default() += 1;
}

/// A short, duration-free name of a lost reason.
pub(crate) fn reason_name(r: &LostReason) -> String {
    match r {
        LostReason::Unacknowledged(_) => "unacknowledged".to_owned(),
        LostReason::Disconnected(_) => "disconnected".to_owned(),
        LostReason::SessionEnded(s) => format!("session-ended({s:?})"),
        LostReason::NodeDeleted => "node-deleted".to_owned(),
        LostReason::NodeChanged => "node-changed".to_owned(),
        LostReason::Released => "released".to_owned(),
        other => format!("{other:?}"),
    }
}

#[derive(Debug, Default)]
pub(crate) struct Tallies {
    /// `lost()` had fired by the time the section would have started: not entered.
    pub(crate) lost_before: Tally,
    /// `lost()` fired during the section (it stopped at once).
    pub(crate) lost_during: Tally,
    /// `release()` reported that `lost()` had fired after the section (or during it).
    pub(crate) lost_at_release: Tally,
    /// Acquire errors other than timeouts.
    pub(crate) acquire_errors: Tally,
    /// Release errors other than `Lost`.
    pub(crate) release_errors: Tally,
    /// Sessions that ended other than by expiry (closed, auth).
    pub(crate) sessions_ended: Tally,
    /// Partitions drawn but not injected, by why (another kind of heavy fault went instead).
    pub(crate) partitions_skipped: Tally,
}

pub(crate) struct Shared {
    pub(crate) t0: Instant,
    pub(crate) settings: Settings,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) acquisitions: AtomicU64,
    pub(crate) entered: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) released: AtomicU64,
    pub(crate) release_timeouts: AtomicU64,
    pub(crate) expired: AtomicU64,
    pub(crate) sessions: AtomicU64,
    /// The contender in its critical section, plus one (0: none), to aim faults at.
    pub(crate) holder: AtomicUsize,
    /// The contender in a long hold, plus one (0: none): heavy faults go there first.
    pub(crate) long_holder: AtomicUsize,
    /// The session of the contender in a long hold (valid while `long_holder` is not 0), to
    /// find the server it talks to.
    pub(crate) long_session: AtomicI64,
    /// No heavy fault starts before this instant (the cool-down after the last one).
    pub(crate) heavy_quiet_until: StdMutex<Instant>,
    /// A partition is on, or healed but the ensemble not yet whole again: no heavy fault
    /// starts.
    pub(crate) partition_on: AtomicBool,
    pub(crate) long_holds: AtomicU64,
    pub(crate) store: StdMutex<FencedStore>,
    pub(crate) tallies: StdMutex<Tallies>,
    pub(crate) faults: StdMutex<Vec<FaultRecord>>,
    pub(crate) partitions: StdMutex<Vec<PartitionRecord>>,
    pub(crate) kills: StdMutex<Vec<KillRecord>>,
}

impl Shared {
    /// The state at the start of a run with `settings` (the clock starts now).
    pub(crate) fn new(settings: Settings) -> Self {
        Self {
            t0: Instant::now(),
            settings,
            stop: watch::Sender::new(false),
            acquisitions: AtomicU64::new(0),
            entered: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            released: AtomicU64::new(0),
            release_timeouts: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            sessions: AtomicU64::new(0),
            holder: AtomicUsize::new(0),
            long_holder: AtomicUsize::new(0),
            long_session: AtomicI64::new(0),
            heavy_quiet_until: StdMutex::new(Instant::now()),
            partition_on: AtomicBool::new(false),
            long_holds: AtomicU64::new(0),
            store: StdMutex::new(FencedStore::default()),
            tallies: StdMutex::new(Tallies::default()),
            faults: StdMutex::new(Vec::new()),
            partitions: StdMutex::new(Vec::new()),
            kills: StdMutex::new(Vec::new()),
        }
    }

    pub(crate) fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    pub(crate) fn request_stop(&self) {
        self.stop.send_replace(true);
    }

    /// Sleeps for `d` unless stopped first; true when stopped.
    pub(crate) async fn sleep_or_stop(&self, d: Duration) -> bool {
        let mut rx = self.stop.subscribe();
        if *rx.borrow_and_update() {
            return true;
        }
        tokio::select! {
            () = tokio::time::sleep(d) => self.stopped(),
            _ = rx.wait_for(|s| *s) => true,
        }
    }

    /// Seconds since the start, for printing.
    pub(crate) fn at(&self, i: Instant) -> String {
        offset(self.t0, i)
    }

    pub(crate) fn tallies(&self) -> StdGuard<'_, Tallies> {
        lock(&self.tallies)
    }
}

/// `i − t0` in seconds (negative when before).
fn offset(t0: Instant, i: Instant) -> String {
    match i.checked_duration_since(t0) {
        Some(d) => format!("{:.6}s", d.as_secs_f64()),
        None => format!("-{:.6}s", t0.duration_since(i).as_secs_f64()),
    }
}
