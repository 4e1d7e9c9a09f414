//! The state every task of the run reads and writes: the stop flag, the counters, who holds
//! the lock, the fenced store, and the records of the faults, partitions and kills.

use std::collections::BTreeMap;
use std::ops::Index;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
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

/// The run's counts by name ([`Shared::tally`]), one [`Tally`] per kind of event.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tallied {
    /// `lost()` had fired by the time the section would have started: not entered.
    LostBefore,
    /// `lost()` fired during the section (it stopped at once).
    LostDuring,
    /// `release()` reported that `lost()` had fired after the section (or during it).
    LostAtRelease,
    /// Acquire errors other than timeouts.
    AcquireErrors,
    /// Release errors other than `Lost`.
    ReleaseErrors,
    /// Sessions that ended other than by expiry (closed, auth).
    SessionsEnded,
    /// Partitions drawn but not injected, by why (another kind of heavy fault went instead).
    PartitionsSkipped,
}

/// One [`Tally`] per [`Tallied`] (sized by its last variant), indexed by it.
#[derive(Debug, Default)]
pub(crate) struct Tallies([Tally; Tallied::PartitionsSkipped as usize + 1]);

impl Index<Tallied> for Tallies {
    type Output = Tally;

    fn index(&self, which: Tallied) -> &Tally {
        &self.0[which as usize]
    }
}

/// The run's plain counters ([`Shared::add`], [`Shared::count`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Count {
    /// Locks acquired.
    Acquisitions,
    /// Critical sections entered.
    Entered,
    /// Acquires that timed out.
    Timeouts,
    /// Releases that succeeded.
    Released,
    /// Releases that timed out (left to the background).
    ReleaseTimeouts,
    /// Sessions that expired.
    Expired,
    /// Sessions opened.
    Sessions,
    /// Long holds drawn.
    LongHolds,
}

/// Whether a heavy fault (or a partition) may start: not during a partition, nor during the
/// cool-down after the last heavy fault.
#[derive(Debug)]
pub(crate) struct HeavyGate {
    /// No heavy fault starts before this instant (the cool-down after the last one).
    quiet_until: StdMutex<Instant>,
    /// A partition is on, or healed but the ensemble not yet whole again.
    partition_on: AtomicBool,
}

impl HeavyGate {
    fn new() -> Self {
        Self {
            quiet_until: StdMutex::new(Instant::now()),
            partition_on: AtomicBool::new(false),
        }
    }

    /// Whether a heavy fault may start now.
    pub(crate) fn open(&self) -> bool {
        !self.partition_on.load(Ordering::Acquire) && Instant::now() >= *lock(&self.quiet_until)
    }

    /// No heavy fault starts before `until`.
    pub(crate) fn quiet_until(&self, until: Instant) {
        *lock(&self.quiet_until) = until;
    }

    /// A partition is switched on: closed until [`Self::partition_over`].
    pub(crate) fn partition_on(&self) {
        self.partition_on.store(true, Ordering::Release);
    }

    /// The partition is healed and the ensemble whole again (or given up on): open again
    /// after `cool_down`.
    pub(crate) fn partition_over(&self, cool_down: Duration) {
        self.quiet_until(Instant::now() + cool_down);
        self.partition_on.store(false, Ordering::Release);
    }
}

/// When a fault or a partition was switched on, and how long it was to last.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) at: Instant,
    pub(crate) lasting: Duration,
}

impl Window {
    /// When it was to end.
    pub(crate) fn end(self) -> Instant {
        self.at + self.lasting
    }
}

pub(crate) struct Shared {
    pub(crate) t0: Instant,
    pub(crate) settings: Settings,
    pub(crate) stop: watch::Sender<bool>,
    /// One counter per [`Count`] (sized by its last variant).
    counts: [AtomicU64; Count::LongHolds as usize + 1],
    /// The contender in its critical section, plus one (0: none), to aim faults at.
    pub(crate) holder: AtomicUsize,
    /// The contender in a long hold, plus one (0: none): heavy faults go there first.
    pub(crate) long_holder: AtomicUsize,
    /// The session of the contender in a long hold (valid while `long_holder` is not 0), to
    /// find the server it talks to.
    pub(crate) long_session: AtomicI64,
    pub(crate) heavy: HeavyGate,
    pub(crate) store: StdMutex<FencedStore>,
    tallies: StdMutex<Tallies>,
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
            counts: Default::default(),
            holder: AtomicUsize::new(0),
            long_holder: AtomicUsize::new(0),
            long_session: AtomicI64::new(0),
            heavy: HeavyGate::new(),
            store: StdMutex::new(FencedStore::default()),
            tallies: StdMutex::new(Tallies::default()),
            faults: StdMutex::new(Vec::new()),
            partitions: StdMutex::new(Vec::new()),
            kills: StdMutex::new(Vec::new()),
        }
    }

    /// Adds one to `count`; returns the new value.
    pub(crate) fn add(&self, count: Count) -> u64 {
        self.counts[count as usize].fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The value of `count` now.
    pub(crate) fn count(&self, count: Count) -> u64 {
        self.counts[count as usize].load(Ordering::Relaxed)
    }

    /// Counts one `key` in the tally of `which`.
    pub(crate) fn tally(&self, which: Tallied, key: impl Into<String>) {
        bump(&mut lock(&self.tallies).0[which as usize], key);
    }

    /// The tallies so far, leaving empty ones behind (for the summary).
    pub(crate) fn take_tallies(&self) -> Tallies {
        std::mem::take(&mut *lock(&self.tallies))
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
}

/// `i − t0` in seconds (negative when before).
fn offset(t0: Instant, i: Instant) -> String {
    match i.checked_duration_since(t0) {
        Some(d) => format!("{:.6}s", d.as_secs_f64()),
        None => format!("-{:.6}s", t0.duration_since(i).as_secs_f64()),
    }
}
