//! `zkwire-bench soak`: mutual exclusion of `zkwire_recipes::Mutex` under faults, with the
//! evidence printed.
//!
//! ```text
//! cargo run --release -p zkwire-bench -- soak [--acquisitions N] [--contenders N]
//!     [--nodes 3|5] [--seed N] [--max-minutes M] [--leader-kill-every SECS]
//!     [--long-hold-every N] [--no-faults] [--no-partitions] [--ignore-lost]
//! ```
//!
//! A 3-node (or `--nodes 5`) [`PartitionedEnsemble`] is started through `zkwire-testing`:
//! every quorum and election link between two servers runs through a relay that can cut it
//! (tickTime 200 ms, syncLimit 5, initLimit 10: a follower notices a silent leader after 1 s).
//! Each contender is a `Client` of its own (session timeout [`T`], the harness's 200 ms tick
//! for the lease, docs/lease.md) whose connect string lists one [`FaultProxy`] of its own per
//! ensemble member. Contenders loop: `lock_timeout`, a critical section that writes to a
//! [`FencedStore`] (an in-process resource that refuses a fencing token older than the newest
//! it has accepted and records every section as an interval), `release`.
//!
//! The critical section checks that the hold is trusted (`lost()` not ready, `is_held()`)
//! before entering and after a 0–2 ms hold, and stops at once when `lost()` fires
//! (`select!`), recording the instant as the section's "lost at". One acquisition in
//! `--long-hold-every` (default 2000) holds for 0.5–1.5 T instead, so that faults can catch
//! a holder in its critical section: the next heavy fault is aimed at it.
//!
//! Meanwhile, from one seed, every 50–500 ms a fault hits one proxy of a contender (the one
//! it is connected through) or all of them, or the links between the servers:
//! - light faults: a connection reset (RST both ways), or a delay of 2–50 ms on every frame
//!   for 0.3–1.5 s;
//! - heavy faults, one at a time with a 2–8 s pause after each (a stalled contender stalls
//!   the whole lock queue, so back-to-back heavy faults would leave the lock stalled nearly
//!   all the time), half of them on the proxies: a blackhole (both directions held, then
//!   delivered), a one-way client→server loss (frames dropped) or stall (frames held), each
//!   for 0.2–1.5 T, or a random lag of 0..(0.05–1.0 T) on every server→client frame for
//!   0.5–1.5 T;
//! - and half of them (unless `--no-partitions`) partitions *inside* the ensemble, each for
//!   0.5–2 T, only when the servers report the ensemble whole: a follower isolated (all its
//!   links blackholed; or reset, every reconnection reset at once), the leader isolated
//!   (blackholed), a bridge (the leader cut from one follower only, which the others still
//!   see), a one-way cut (what the leader sends to one follower is held), and on 5 nodes a
//!   2|3 split with the leader in the minority. A partition is aimed at the server the
//!   contender in a long hold talks to (found with the `cons` four-letter word), else at a
//!   random server of the right role. After the heal, the next heavy fault waits until the
//!   servers report the ensemble whole again, then the cool-down.
//!
//! Every ~20 s the ensemble's leader is killed and restarted 2–5 s later. Leader kills and
//! partitions take turns: one never starts while the other is under way (a kill during a
//! partition would leave no quorum on 3 nodes, and a restart needs one).
//!
//! Two critical sections of different contenders overlap when their intervals intersect.
//! An overlap is *excused* when the earlier holder's `lost()` had fired before the later
//! holder entered. Non-excused overlaps, stale writes refused by the store, and lock nodes
//! left behind once every contender has closed its session (listed from a fresh session)
//! must all be zero: otherwise the run exits with code 2.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::task::{JoinHandle, JoinSet};
use zkwire::{Client, SessionState};
use zkwire_recipes::{LockError, LostReason, Mutex, MutexGuard};
use zkwire_testing::partition::{LinkFault, PartitionedEnsemble, View};
use zkwire_testing::proxy::{Direction, FaultProxy};
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::{four_letter_word, ServerConfig};

use crate::BenchError;

/// The session timeout every contender asks for.
const T: Duration = Duration::from_secs(4);
/// Ensemble members by default (`--nodes`).
const NODES: usize = 3;
/// The servers' `tickTime` (the tick `zkwire_testing::support::builder()` tells the lease).
const TICK_MS: u32 = 200;
/// `syncLimit` and `initLimit` of the servers, in ticks.
const SYNC_LIMIT: &str = "5";
const INIT_LIMIT: &str = "10";
/// How long the ensemble may take to be whole again (after a heal, a restart, at the end).
const HEAL_LIMIT: Duration = Duration::from_secs(60);
/// The lock directory (created by the mutex, as containers).
const LOCK_DIR: &str = "/zkwire-soak/lock";
/// One acquire's deadline.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(8);
/// How long a release (or a close) may take before it is left to the background.
const RELEASE_TIMEOUT: Duration = T;
/// Attempts to open one session (each bounded by [`CONNECT_ATTEMPT`]).
const CONNECT_ATTEMPTS: usize = 200;
const CONNECT_ATTEMPT: Duration = Duration::from_secs(8);
/// Iterations of one contender's loop, whatever happens (the stop flag ends it first).
const MAX_ITERATIONS: u64 = 10_000_000;
/// Faults injected at most (every 50 ms at the fastest: 4.6 days' worth).
const MAX_FAULTS: usize = 8_000_000;
/// Leader kills at most.
const MAX_KILLS: usize = 100_000;
/// How long a leader kill waits for its turn (a partition holds it until healed) before
/// the kill is skipped.
const KILL_TURN_WAIT: Duration = Duration::from_secs(120);
/// How long the contenders get to wind down once stopped.
const WIND_DOWN: Duration = Duration::from_secs(90);
/// After a heavy fault ends, no other one starts for this long (drawn in the range): one
/// stalled contender stalls the whole lock queue, so back-to-back heavy faults would leave
/// the lock stalled nearly all the time. Light faults go on meanwhile.
const HEAVY_COOL_DOWN: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(8));
/// Overlaps and refusals described in detail.
const SHOWN: usize = 10;

// ===== settings =====

const USAGE: &str = "usage: zkwire-bench soak [--acquisitions N] [--contenders N] [--nodes 3|5] \
[--seed N] [--max-minutes M] [--leader-kill-every SECS] [--long-hold-every N] [--no-faults] \
[--no-partitions] [--ignore-lost]
  --acquisitions N        stop after N acquisitions in all (default 100000)
  --contenders N          sessions contending for the lock (default 8)
  --nodes N               ensemble members, 3 or 5 (default 3)
  --seed N                the fault schedule's seed (decimal or 0x-hex; default: from the clock)
  --max-minutes M         hard stop of the run (default 30)
  --leader-kill-every S   seconds between leader kills (default 20; 0: never)
  --long-hold-every N     one acquisition in N holds for 0.5-1.5 T, a target for heavy
                          faults (default 2000; 0: every hold lasts 0-2 ms)
  --no-faults             no proxy faults and no partitions (a baseline; combine with
                          --leader-kill-every 0)
  --no-partitions         no partitions between the servers (proxy faults and kills only)
  --ignore-lost           self-test of the checker: sections ignore lost() and is_held(), and
                          long holds last 1.5-3 T, so overlaps must be reported (use with a
                          small --long-hold-every)";

#[derive(Debug, Clone)]
struct Settings {
    acquisitions: u64,
    contenders: usize,
    /// Ensemble members (3 or 5).
    nodes: usize,
    seed: u64,
    max_run: Duration,
    kill_every: Duration,
    /// No proxy faults and no partitions (a baseline).
    no_faults: bool,
    /// No partitions between the servers.
    no_partitions: bool,
    /// One acquisition in this many holds for 0.5–1.5 T instead of 0–2 ms (0: never).
    long_hold_every: u64,
    /// Self-test of the checker: critical sections ignore `lost()` and `is_held()`.
    ignore_lost: bool,
}

fn parse(args: &[String]) -> Result<Settings, BenchError> {
    let clock_seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x5eed, |d| d.as_nanos() as u64);
    let mut s = Settings {
        acquisitions: 100_000,
        contenders: 8,
        nodes: NODES,
        seed: SplitMix64(clock_seed).next_u64(),
        max_run: Duration::from_secs(30 * 60),
        kill_every: Duration::from_secs(20),
        no_faults: false,
        no_partitions: false,
        long_hold_every: 2000,
        ignore_lost: false,
    };
    let mut it = args.iter();
    let value = |v: Option<&String>| v.cloned().ok_or_else(|| BenchError::msg(USAGE));
    let number = |v: String| -> Result<f64, BenchError> {
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| BenchError::msg(format!("not a number: {v}\n{USAGE}")))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--acquisitions" => {
                let v = value(it.next())?;
                s.acquisitions = v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| BenchError::msg(format!("not a count: {v}")))?;
            }
            "--contenders" => {
                let v = value(it.next())?;
                s.contenders = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (2..=64).contains(n))
                    .ok_or_else(|| BenchError::msg(format!("contenders must be 2..=64: {v}")))?;
            }
            "--nodes" => {
                let v = value(it.next())?;
                s.nodes = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| [3, 5].contains(n))
                    .ok_or_else(|| BenchError::msg(format!("nodes must be 3 or 5: {v}")))?;
            }
            "--seed" => {
                let v = value(it.next())?;
                let parsed = match v.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16).ok(),
                    None => v.parse::<u64>().ok(),
                };
                s.seed = parsed.ok_or_else(|| BenchError::msg(format!("not a seed: {v}")))?;
            }
            "--max-minutes" => {
                let m = number(value(it.next())?)?.min(24.0 * 60.0);
                s.max_run = Duration::from_secs_f64(m * 60.0);
            }
            "--leader-kill-every" => {
                let secs = number(value(it.next())?)?.min(86_400.0);
                s.kill_every = Duration::from_secs_f64(secs);
            }
            "--no-faults" => s.no_faults = true,
            "--no-partitions" => s.no_partitions = true,
            "--ignore-lost" => s.ignore_lost = true,
            "--long-hold-every" => {
                let v = value(it.next())?;
                s.long_hold_every = v
                    .parse::<u64>()
                    .map_err(|_| BenchError::msg(format!("not a count: {v}")))?;
            }
            "-h" | "--help" => return Err(BenchError::msg(USAGE)),
            other => {
                return Err(BenchError::msg(format!(
                    "unknown argument {other}\n{USAGE}"
                )))
            }
        }
    }
    Ok(s)
}

// ===== a seeded generator =====

/// `T` scaled by a factor uniform in `[lo, hi]` percent.
fn of_t(rng: &mut SplitMix64, lo: u32, hi: u32) -> Duration {
    T * (lo + rng.below(u64::from(hi - lo) + 1) as u32) / 100
}

// ===== the fenced store =====

/// One critical section as the store saw it.
#[derive(Debug, Clone)]
struct Section {
    who: usize,
    session: i64,
    token: i64,
    enter: Instant,
    /// When the section ended: after its last write, or the instant `lost()` fired.
    exit: Instant,
    /// When `lost()` fired during the section, and why.
    lost: Option<(Instant, LostReason)>,
    /// The guard's `trusted_until()` when the section was entered.
    trusted_until: Option<Instant>,
    /// A long hold (0.5–1.5 T) rather than 0–2 ms.
    long: bool,
}

/// A write the store refused: `token` older than `newest`.
#[derive(Debug, Clone)]
struct Refusal {
    who: usize,
    token: i64,
    newest: i64,
    at: Instant,
}

/// The protected resource: it accepts a write only with a token at least as new as the
/// newest it has accepted, and records every critical section.
#[derive(Debug, Default)]
struct FencedStore {
    newest: i64,
    writes: u64,
    sections: Vec<Section>,
    refused: Vec<Refusal>,
}

impl FencedStore {
    /// Writes with `token`; false (and recorded) when the token is stale.
    fn write(&mut self, who: usize, token: i64, at: Instant) -> bool {
        if token < self.newest {
            self.refused.push(Refusal {
                who,
                token,
                newest: self.newest,
                at,
            });
            return false;
        }
        self.newest = token;
        self.writes += 1;
        true
    }
}

// ===== shared state =====

/// Locks a std mutex, ignoring poisoning (every update leaves the data consistent).
fn lock<T>(m: &StdMutex<T>) -> StdGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts by name, in name order.
type Tally = BTreeMap<String, u64>;

fn bump(tally: &mut Tally, key: impl Into<String>) {
    *tally.entry(key.into()).or_default() += 1;
}

/// A short, duration-free name of a lost reason.
fn reason_name(r: &LostReason) -> String {
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
struct Tallies {
    /// `lost()` had fired by the time the section would have started: not entered.
    lost_before: Tally,
    /// `lost()` fired during the section (it stopped at once).
    lost_during: Tally,
    /// `release()` reported that `lost()` had fired after the section (or during it).
    lost_at_release: Tally,
    /// Acquire errors other than timeouts.
    acquire_errors: Tally,
    /// Release errors other than `Lost`.
    release_errors: Tally,
    /// Sessions that ended other than by expiry (closed, auth).
    sessions_ended: Tally,
    /// Partitions drawn but not injected, by why (another kind of heavy fault went instead).
    partitions_skipped: Tally,
}

struct Shared {
    t0: Instant,
    settings: Settings,
    stop: watch::Sender<bool>,
    acquisitions: AtomicU64,
    entered: AtomicU64,
    timeouts: AtomicU64,
    released: AtomicU64,
    release_timeouts: AtomicU64,
    expired: AtomicU64,
    sessions: AtomicU64,
    /// The contender in its critical section, plus one (0: none), to aim faults at.
    holder: AtomicUsize,
    /// The contender in a long hold, plus one (0: none): heavy faults go there first.
    long_holder: AtomicUsize,
    /// The session of the contender in a long hold (valid while `long_holder` is not 0), to
    /// find the server it talks to.
    long_session: AtomicI64,
    /// No heavy fault starts before this instant (the cool-down after the last one).
    heavy_quiet_until: StdMutex<Instant>,
    /// A partition is on, or healed but the ensemble not yet whole again: no heavy fault
    /// starts.
    partition_on: AtomicBool,
    long_holds: AtomicU64,
    store: StdMutex<FencedStore>,
    tallies: StdMutex<Tallies>,
    faults: StdMutex<Vec<FaultRecord>>,
    partitions: StdMutex<Vec<PartitionRecord>>,
    kills: StdMutex<Vec<KillRecord>>,
}

impl Shared {
    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    fn request_stop(&self) {
        self.stop.send_replace(true);
    }

    /// Sleeps for `d` unless stopped first; true when stopped.
    async fn sleep_or_stop(&self, d: Duration) -> bool {
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
    fn at(&self, i: Instant) -> String {
        offset(self.t0, i)
    }

    fn tallies(&self) -> StdGuard<'_, Tallies> {
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

// ===== contenders =====

/// What a contender left behind.
struct ContenderEnd {
    who: usize,
    session: i64,
    closed: Result<(), String>,
}

/// Opens a session through `cs`, retrying (a proxy may be blackholed, a server down).
async fn connect(sh: &Shared, cs: &str) -> Option<Client> {
    for attempt in 0..CONNECT_ATTEMPTS {
        if attempt > 0 && sh.sleep_or_stop(Duration::from_millis(100)).await {
            return None;
        }
        let opening = zkwire_testing::support::builder()
            .with_session_timeout(T)
            .connect(cs);
        if let Ok(Ok(client)) = tokio::time::timeout(CONNECT_ATTEMPT, opening).await {
            sh.sessions.fetch_add(1, Ordering::Relaxed);
            return Some(client);
        }
    }
    None
}

/// Replaces an ended session: counts how it ended, opens a new one.
async fn renew(sh: &Shared, cs: &str, old: &Client) -> Option<Client> {
    match old.state() {
        SessionState::Expired => {
            sh.expired.fetch_add(1, Ordering::Relaxed);
        }
        s => bump(&mut sh.tallies().sessions_ended, format!("{s:?}")),
    }
    let _ = tokio::time::timeout(RELEASE_TIMEOUT, old.close()).await;
    connect(sh, cs).await
}

async fn contender(who: usize, cs: String, sh: Arc<Shared>) -> ContenderEnd {
    let mut rng =
        SplitMix64(sh.settings.seed ^ (who as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
    let Some(mut client) = connect(&sh, &cs).await else {
        return ContenderEnd {
            who,
            session: 0,
            closed: Err("never connected".to_owned()),
        };
    };
    for _ in 0..MAX_ITERATIONS {
        if sh.stopped() {
            break;
        }
        if client.state().is_terminal() {
            match renew(&sh, &cs, &client).await {
                Some(c) => client = c,
                None => break,
            }
        }
        let mutex = Mutex::new(client.clone(), LOCK_DIR);
        match mutex.lock_timeout(ACQUIRE_TIMEOUT).await {
            Ok(guard) => {
                let n = sh.acquisitions.fetch_add(1, Ordering::Relaxed) + 1;
                if n >= sh.settings.acquisitions {
                    sh.request_stop();
                }
                critical_section(who, &guard, &sh, &mut rng).await;
                release(guard, &sh).await;
            }
            Err(LockError::Timeout) => {
                sh.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if matches!(&e, LockError::Client(c) if c.is_terminal()) => {
                // Renewed at the top of the loop (the state is terminal by now).
                if !client.state().is_terminal() {
                    bump(&mut sh.tallies().acquire_errors, format!("{e}"));
                }
            }
            Err(e) => {
                bump(&mut sh.tallies().acquire_errors, format!("{e}"));
                if sh.sleep_or_stop(Duration::from_millis(50)).await {
                    break;
                }
            }
        }
    }
    let session = client.session_id();
    let closed = match tokio::time::timeout(RELEASE_TIMEOUT, client.close()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if client.state() == SessionState::Expired => Err(format!("expired: {e}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("close timed out".to_owned()),
    };
    ContenderEnd {
        who,
        session,
        closed,
    }
}

/// `lost()`'s outcome if it has already fired, without waiting.
async fn fired<F: std::future::Future<Output = LostReason> + Unpin>(
    lost: &mut F,
) -> Option<LostReason> {
    tokio::select! {
        biased;
        reason = lost => Some(reason),
        () = std::future::ready(()) => None,
    }
}

/// Enters the critical section if the hold is trusted, writes the token, holds 0–2 ms
/// (stopping at once if `lost()` fires), checks again and writes again.
async fn critical_section(who: usize, guard: &MutexGuard, sh: &Shared, rng: &mut SplitMix64) {
    let ignore = sh.settings.ignore_lost;
    // With --ignore-lost, a future that never resolves stands in for lost().
    let real = guard.lost();
    let lost = async move {
        if ignore {
            std::future::pending().await
        } else {
            real.await
        }
    };
    tokio::pin!(lost);
    if let Some(reason) = fired(&mut lost).await {
        bump(&mut sh.tallies().lost_before, reason_name(&reason));
        return;
    }
    if !ignore && !guard.is_held() {
        bump(&mut sh.tallies().lost_before, "is_held() false");
        return;
    }
    let token = guard.fencing_token();
    let session = guard.client().session_id();
    let trusted_until = guard.trusted_until();
    sh.holder.store(who + 1, Ordering::Relaxed);
    let enter = Instant::now();
    lock(&sh.store).write(who, token, enter);
    sh.entered.fetch_add(1, Ordering::Relaxed);

    let every = sh.settings.long_hold_every;
    let long = every > 0 && rng.below(every) == 0;
    let hold = if long {
        sh.long_holds.fetch_add(1, Ordering::Relaxed);
        sh.long_session.store(session, Ordering::Relaxed);
        sh.long_holder.store(who + 1, Ordering::Relaxed);
        // The self-test holds past T, so that a session can expire mid-hold.
        if ignore {
            of_t(rng, 150, 300)
        } else {
            of_t(rng, 50, 150)
        }
    } else {
        Duration::from_micros(rng.below(2001))
    };
    let mut lost_at = tokio::select! {
        biased;
        reason = &mut lost => Some((Instant::now(), reason)),
        () = tokio::time::sleep(hold) => None,
    };
    if lost_at.is_none() {
        lost_at = fired(&mut lost).await.map(|r| (Instant::now(), r));
    }
    if lost_at.is_none() && !ignore && !guard.is_held() {
        // is_held() turned false a hair before lost() resolved: wait for the reason.
        let reason = tokio::time::timeout(Duration::from_millis(100), &mut lost)
            .await
            .unwrap_or(LostReason::Released);
        lost_at = Some((Instant::now(), reason));
    }
    let exit = match lost_at {
        Some((at, reason)) => {
            bump(&mut sh.tallies().lost_during, reason_name(&reason));
            at
        }
        None => {
            let now = Instant::now();
            lock(&sh.store).write(who, token, now);
            now
        }
    };
    let _ = sh
        .holder
        .compare_exchange(who + 1, 0, Ordering::Relaxed, Ordering::Relaxed);
    if long {
        let _ = sh
            .long_holder
            .compare_exchange(who + 1, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
    lock(&sh.store).sections.push(Section {
        who,
        session,
        token,
        enter,
        exit,
        lost: lost_at,
        trusted_until,
        long,
    });
}

async fn release(guard: MutexGuard, sh: &Shared) {
    match tokio::time::timeout(RELEASE_TIMEOUT, guard.release()).await {
        Ok(Ok(())) => {
            sh.released.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Err(LockError::Lost(reason))) => {
            bump(&mut sh.tallies().lost_at_release, reason_name(&reason));
        }
        Ok(Err(e)) => bump(&mut sh.tallies().release_errors, format!("{e}")),
        Err(_) => {
            sh.release_timeouts.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// ===== faults =====

/// One of a weighted table (`None` when every weight is 0).
fn weighted<K: Copy>(rng: &mut SplitMix64, table: &[(K, u64)]) -> Option<K> {
    let total: u64 = table.iter().map(|(_, w)| w).sum();
    if total == 0 {
        return None;
    }
    let mut x = rng.below(total);
    for &(kind, w) in table {
        if x < w {
            return Some(kind);
        }
        x -= w;
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// Every connection of the proxy reset (RST both ways).
    Reset,
    /// Both directions held for 0.2–1.5 T, then delivered.
    Blackhole,
    /// Client→server frames dropped for 0.2–1.5 T (replies and notifications still flow).
    DropToServer,
    /// Client→server frames held for 0.2–1.5 T, then delivered.
    HoldToServer,
    /// Every frame delayed by 2–50 ms for 0.3–1.5 s.
    Delay,
    /// Server→client frames delayed by a random 0..(0.05–1.0 T) each for 0.5–1.5 T.
    LagToClient,
}

impl Fault {
    /// The light kinds (they slow the lock down for a moment at most), with weights.
    const LIGHT: [(Self, u64); 2] = [(Self::Reset, 3), (Self::Delay, 1)];
    /// The heavy kinds (they stall a contender, and with it the lock queue, for up to
    /// 1.5 T, and expire sessions), with weights.
    const HEAVY: [(Self, u64); 4] = [
        (Self::Blackhole, 2),
        (Self::DropToServer, 2),
        (Self::HoldToServer, 1),
        (Self::LagToClient, 2),
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Reset => "reset",
            Self::Blackhole => "blackhole",
            Self::DropToServer => "c2s-drop",
            Self::HoldToServer => "c2s-hold",
            Self::Delay => "delay",
            Self::LagToClient => "s2c-lag",
        }
    }

    fn is_heavy(self) -> bool {
        Self::HEAVY.iter().any(|(k, _)| *k == self)
    }

    fn pick_light(rng: &mut SplitMix64) -> Self {
        weighted(rng, &Self::LIGHT).unwrap_or(Self::Reset)
    }

    fn pick_heavy(rng: &mut SplitMix64) -> Self {
        weighted(rng, &Self::HEAVY).unwrap_or(Self::Blackhole)
    }
}

#[derive(Debug, Clone)]
struct FaultRecord {
    at: Instant,
    kind: Fault,
    /// Proxy indices: contender `p / nodes`, server `p % nodes`.
    proxies: Vec<usize>,
    lasting: Duration,
    detail: String,
    /// Aimed at a contender in a long hold.
    aimed: bool,
}

/// A proxy and whether a timed fault is on it now (one at a time, so that healing one
/// fault never cuts another short).
struct Slot {
    proxy: FaultProxy,
    busy: AtomicBool,
}

/// Whom to hit: the contender in its critical section (a third of the time, if any) or a
/// random one.
fn pick_contender(rng: &mut SplitMix64, sh: &Shared) -> usize {
    let holder = sh.holder.load(Ordering::Relaxed).checked_sub(1);
    match holder {
        Some(h) if rng.below(3) == 0 => h,
        _ => rng.below(sh.settings.contenders as u64) as usize,
    }
}

/// The proxies of contender `who` to hit: all of them (one per node), or the one carrying
/// its connection.
fn proxies_of(
    rng: &mut SplitMix64,
    slots: &[Slot],
    nodes: usize,
    who: usize,
    all: bool,
) -> Vec<usize> {
    let mine = who * nodes..(who + 1) * nodes;
    if all {
        return mine.collect();
    }
    let active: Vec<usize> = mine
        .clone()
        .filter(|&p| slots[p].proxy.active() > 0)
        .collect();
    match active.as_slice() {
        [] => vec![mine.start + rng.below(nodes as u64) as usize],
        a => vec![a[rng.below(a.len() as u64) as usize]],
    }
}

async fn inject(sh: Arc<Shared>, slots: Arc<Vec<Slot>>, servers: Arc<Servers>) {
    if sh.settings.no_faults {
        return;
    }
    let nodes = sh.settings.nodes;
    let partitions = !sh.settings.no_partitions;
    let mut rng = SplitMix64(sh.settings.seed);
    let mut timed = JoinSet::new();
    // The partition under way (one at a time), until healed and the ensemble whole again.
    let mut partition: Option<JoinHandle<()>> = None;
    for _ in 0..MAX_FAULTS {
        let pause = rng.between(Duration::from_millis(50), Duration::from_millis(500));
        if sh.sleep_or_stop(pause).await {
            break;
        }
        while timed.try_join_next().is_some() {}
        if partition.as_ref().is_some_and(JoinHandle::is_finished) {
            partition = None;
        }
        let heavy_allowed = partition.is_none()
            && !sh.partition_on.load(Ordering::Acquire)
            && Instant::now() >= *lock(&sh.heavy_quiet_until);
        // A contender in a long hold gets the next heavy fault: on all of its proxies two
        // times in three (its session expires while it holds if the fault outlasts T), else
        // on the one it is connected through; or a partition of the server it talks to.
        let long = sh
            .long_holder
            .load(Ordering::Relaxed)
            .checked_sub(1)
            .filter(|_| heavy_allowed);
        // Otherwise heavy faults come half the time they are allowed.
        let heavy = heavy_allowed && (long.is_some() || rng.below(2) == 0);
        // Half of the heavy faults are partitions between the servers, when one can start.
        if heavy && partitions && rng.below(2) == 0 {
            let aim = long.map(|_| sh.long_session.load(Ordering::Relaxed));
            match start_partition(&sh, &servers, &mut rng, aim).await {
                Ok(task) => {
                    partition = Some(task);
                    continue;
                }
                Err(why) => bump(&mut sh.tallies().partitions_skipped, why),
            }
        }
        let (mut kind, mut proxies) = if heavy {
            let kind = Fault::pick_heavy(&mut rng);
            match long {
                Some(who) => {
                    let all = rng.below(3) != 0;
                    (kind, proxies_of(&mut rng, &slots, nodes, who, all))
                }
                None => {
                    // Heavy faults hit all the proxies of a contender half the time.
                    let who = pick_contender(&mut rng, &sh);
                    let all = rng.below(2) == 0;
                    (kind, proxies_of(&mut rng, &slots, nodes, who, all))
                }
            }
        } else {
            // Light ones a third of the time.
            let kind = Fault::pick_light(&mut rng);
            let who = pick_contender(&mut rng, &sh);
            let all = rng.below(3) == 0;
            (kind, proxies_of(&mut rng, &slots, nodes, who, all))
        };
        if kind != Fault::Reset {
            proxies.retain(|&p| {
                slots[p]
                    .busy
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            });
            if proxies.is_empty() {
                // Every target is under a timed fault already: reset them instead.
                kind = Fault::Reset;
                let who = pick_contender(&mut rng, &sh);
                proxies = proxies_of(&mut rng, &slots, nodes, who, false);
            }
        }
        let (lasting, detail) = match kind {
            Fault::Reset => {
                proxies.iter().for_each(|&p| slots[p].proxy.reset_all());
                (Duration::ZERO, String::new())
            }
            Fault::Blackhole => {
                proxies.iter().for_each(|&p| slots[p].proxy.blackhole(true));
                (of_t(&mut rng, 20, 150), String::new())
            }
            Fault::DropToServer => {
                proxies.iter().for_each(|&p| {
                    slots[p]
                        .proxy
                        .drop_direction(Direction::ClientToServer, true);
                });
                (of_t(&mut rng, 20, 150), String::new())
            }
            Fault::HoldToServer => {
                proxies
                    .iter()
                    .for_each(|&p| slots[p].proxy.hold_client_to_server(true));
                (of_t(&mut rng, 20, 150), String::new())
            }
            Fault::Delay => {
                let d = rng.between(Duration::from_millis(2), Duration::from_millis(50));
                proxies.iter().for_each(|&p| slots[p].proxy.delay(d));
                (
                    rng.between(Duration::from_millis(300), Duration::from_millis(1500)),
                    format!("{} ms per frame", d.as_millis()),
                )
            }
            Fault::LagToClient => {
                let max = of_t(&mut rng, 5, 100);
                let seed = rng.next_u64();
                proxies.iter().for_each(|&p| {
                    slots[p].proxy.delay_direction(
                        Direction::ServerToClient,
                        Duration::ZERO,
                        max,
                        seed,
                    );
                });
                (
                    of_t(&mut rng, 50, 150),
                    format!("0..{} ms per reply", max.as_millis()),
                )
            }
        };
        if kind.is_heavy() {
            *lock(&sh.heavy_quiet_until) =
                Instant::now() + lasting + rng.between(HEAVY_COOL_DOWN.0, HEAVY_COOL_DOWN.1);
        }
        lock(&sh.faults).push(FaultRecord {
            at: Instant::now(),
            kind,
            proxies: proxies.clone(),
            lasting,
            detail,
            aimed: long.is_some() && kind.is_heavy(),
        });
        if kind != Fault::Reset {
            let slots = Arc::clone(&slots);
            timed.spawn(async move {
                tokio::time::sleep(lasting).await;
                for p in proxies {
                    slots[p].proxy.heal();
                    slots[p].busy.store(false, Ordering::Release);
                }
            });
        }
    }
    // Let the timed faults run out (at most 1.5 T each), and the partition be healed (it is
    // cut short by the stop), then heal everything.
    let _ = tokio::time::timeout(2 * T, async { while timed.join_next().await.is_some() {} }).await;
    timed.abort_all();
    if let Some(task) = partition {
        let abort = task.abort_handle();
        if tokio::time::timeout(HEAL_LIMIT + T, task).await.is_err() {
            abort.abort();
        }
    }
    for slot in slots.iter() {
        slot.proxy.heal();
    }
}

// ===== the servers: partitions and leader kills =====

/// The ensemble, and the turn that partitions and leader kills take.
struct Servers {
    ensemble: StdMutex<PartitionedEnsemble>,
    /// Held by a partition until it is healed and the ensemble whole again, and by a leader
    /// kill until the node is back and the ensemble whole again: one at a time.
    turn: Arc<AsyncMutex<()>>,
    /// Every node's client address (to ask `cons` without locking the ensemble).
    addrs: Vec<SocketAddr>,
}

impl Servers {
    fn ensemble(&self) -> StdGuard<'_, PartitionedEnsemble> {
        lock(&self.ensemble)
    }
}

/// The node whose `cons` lists `session`, if any (blocking: a few four-letter words).
fn server_of(addrs: &[SocketAddr], session: i64) -> Option<usize> {
    // `cons` prints `...,sid=0x<hex>,lop=...` (Long.toHexString: two's complement, as {:x}).
    let needle = format!("sid=0x{session:x},");
    addrs
        .iter()
        .position(|a| four_letter_word(a, "cons").is_ok_and(|out| out.contains(&needle)))
}

/// A partition between the servers, on their quorum and election links (client ports stay
/// reachable). "Victim": the follower it cuts off or away from the leader, or the leader
/// itself for [`Partition::LeaderIsolated`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Partition {
    /// Every link of a follower blackholed, both ways.
    FollowerBlackhole,
    /// Every link of a follower reset, and every reconnection reset at once.
    FollowerReset,
    /// Every link of the leader blackholed, both ways.
    LeaderIsolated,
    /// The leader and one follower cut (blackholed) from each other; the others see both.
    Bridge,
    /// What the leader sends to one follower held (blackholed); the other way flows.
    OneWayFromLeader,
    /// 5 nodes: the leader and one follower cut (blackholed) from the other three.
    SplitLeaderMinority,
}

impl Partition {
    /// Every kind, with weights.
    const ALL: [(Self, u64); 6] = [
        (Self::FollowerBlackhole, 2),
        (Self::FollowerReset, 1),
        (Self::LeaderIsolated, 2),
        (Self::Bridge, 2),
        (Self::OneWayFromLeader, 1),
        (Self::SplitLeaderMinority, 2),
    ];

    fn name(self) -> &'static str {
        match self {
            Self::FollowerBlackhole => "isolate-follower(blackhole)",
            Self::FollowerReset => "isolate-follower(reset)",
            Self::LeaderIsolated => "isolate-leader(blackhole)",
            Self::Bridge => "bridge",
            Self::OneWayFromLeader => "one-way(leader->follower)",
            Self::SplitLeaderMinority => "split-2|3(leader in minority)",
        }
    }

    fn available(self, nodes: usize) -> bool {
        self != Self::SplitLeaderMinority || nodes >= 5
    }

    /// Whether the partition cuts off a server that leads (`true`) or one that follows.
    fn fits(self, leads: bool) -> bool {
        match self {
            Self::LeaderIsolated => leads,
            Self::SplitLeaderMinority => true,
            _ => !leads,
        }
    }

    /// A kind available on `nodes` and accepted by `fits`.
    fn pick(rng: &mut SplitMix64, nodes: usize, fits: impl Fn(Self) -> bool) -> Option<Self> {
        let table: Vec<(Self, u64)> = Self::ALL
            .iter()
            .copied()
            .filter(|&(k, _)| k.available(nodes) && fits(k))
            .collect();
        weighted(rng, &table)
    }

    fn apply(self, ensemble: &PartitionedEnsemble, leader: usize, victim: usize) {
        match self {
            Self::FollowerBlackhole => ensemble.isolate(victim, LinkFault::Blackhole),
            Self::FollowerReset => ensemble.isolate(victim, LinkFault::Reset),
            Self::LeaderIsolated => ensemble.isolate(leader, LinkFault::Blackhole),
            Self::Bridge => ensemble.cut(leader, victim, LinkFault::Blackhole),
            Self::OneWayFromLeader => ensemble.cut_one_way(leader, victim, LinkFault::Blackhole),
            Self::SplitLeaderMinority => {
                ensemble.partition(&[&[leader, victim]], LinkFault::Blackhole);
            }
        }
    }

    fn describe(self, leader: usize, victim: usize) -> String {
        match self {
            Self::FollowerBlackhole | Self::FollowerReset => {
                format!("node {victim} (a follower) cut from all; leader {leader}")
            }
            Self::LeaderIsolated => format!("node {leader} (the leader) cut from all"),
            Self::Bridge => format!("leader {leader} and follower {victim} cut from each other"),
            Self::OneWayFromLeader => format!("leader {leader} -> follower {victim} held"),
            Self::SplitLeaderMinority => {
                format!("{{leader {leader}, follower {victim}}} cut from the other nodes")
            }
        }
    }
}

/// A partition as injected, and what came of it.
#[derive(Debug, Clone)]
struct PartitionRecord {
    kind: Partition,
    at: Instant,
    lasting: Duration,
    leader: usize,
    victim: usize,
    /// Aimed at the server a contender in a long hold talks to.
    aimed: bool,
    /// The servers' view 3/4 of the way through (`None`: not looked at, cut short by the
    /// stop).
    during: Option<View>,
    /// When it was healed, and how long the ensemble then took to be whole again.
    healed_at: Option<Instant>,
    whole_after: Option<Result<Duration, String>>,
}

/// A short account of a wait of the ensemble that timed out.
fn wait_failure(e: &zkwire_testing::partition::WaitError) -> String {
    format!(
        "not {} within {:.1}s (last view {})",
        e.what,
        e.waited.as_secs_f64(),
        e.last
    )
}

/// Draws a partition, aims it and switches it on when the turn is free and the servers
/// report the ensemble whole; returns the task that heals it after 0.5–2 T, waits until the
/// ensemble is whole again and starts the cool-down. `Err`: why no partition was injected.
async fn start_partition(
    sh: &Arc<Shared>,
    servers: &Arc<Servers>,
    rng: &mut SplitMix64,
    aim: Option<i64>,
) -> Result<JoinHandle<()>, String> {
    let Ok(turn) = Arc::clone(&servers.turn).try_lock_owned() else {
        return Err("leader kill under way".to_owned());
    };
    let nodes = sh.settings.nodes;
    // A few four-letter words on localhost: blocking, but short (2 s at worst per server).
    let started = tokio::task::block_in_place(|| {
        let ensemble = servers.ensemble();
        let view = ensemble.view();
        let leader = match view.leader() {
            Some(l) if view.is_whole() => l,
            _ => return Err("ensemble not whole".to_owned()),
        };
        let followers: Vec<usize> = (0..nodes).filter(|&i| i != leader).collect();
        let follower = |rng: &mut SplitMix64| {
            followers
                .get(rng.below(followers.len() as u64) as usize)
                .copied()
                .unwrap_or(leader)
        };
        let target = aim.and_then(|session| server_of(&servers.addrs, session));
        let kind = match target {
            Some(t) => Partition::pick(rng, nodes, |k| k.fits(t == leader)),
            None => Partition::pick(rng, nodes, |_| true),
        }
        .ok_or_else(|| "no partition fits".to_owned())?;
        let victim = match (kind, target) {
            (Partition::LeaderIsolated, _) => leader,
            (_, Some(t)) if t != leader => t,
            _ => follower(rng),
        };
        kind.apply(&ensemble, leader, victim);
        Ok((kind, leader, victim, target.is_some(), Instant::now()))
    });
    let (kind, leader, victim, aimed, at) = started?;
    let lasting = of_t(rng, 50, 200);
    let cool_down = rng.between(HEAVY_COOL_DOWN.0, HEAVY_COOL_DOWN.1);
    sh.partition_on.store(true, Ordering::Release);
    let index = {
        let mut records = lock(&sh.partitions);
        records.push(PartitionRecord {
            kind,
            at,
            lasting,
            leader,
            victim,
            aimed,
            during: None,
            healed_at: None,
            whole_after: None,
        });
        records.len() - 1
    };
    let sh = Arc::clone(sh);
    let servers = Arc::clone(servers);
    Ok(tokio::spawn(async move {
        let _turn: OwnedMutexGuard<()> = turn;
        // A look at the servers' own view 3/4 of the way through (a stop cuts it short).
        let look = lasting * 3 / 4;
        if !sh.sleep_or_stop(look).await {
            let srv = Arc::clone(&servers);
            if let Ok(view) = tokio::task::spawn_blocking(move || srv.ensemble().view()).await {
                if let Some(r) = lock(&sh.partitions).get_mut(index) {
                    r.during = Some(view);
                }
            }
            let _ = sh.sleep_or_stop(lasting.saturating_sub(at.elapsed())).await;
        }
        let srv = Arc::clone(&servers);
        let healed = tokio::task::spawn_blocking(move || {
            let ensemble = srv.ensemble();
            ensemble.heal();
            let healed_at = Instant::now();
            let whole = ensemble
                .wait_healed(HEAL_LIMIT)
                .map(|_| healed_at.elapsed())
                .map_err(|e| wait_failure(&e));
            (healed_at, whole)
        })
        .await;
        let (healed_at, whole) = match healed {
            Ok((at, whole)) => (Some(at), whole),
            Err(e) => (None, Err(format!("the heal task failed: {e}"))),
        };
        if let Some(r) = lock(&sh.partitions).get_mut(index) {
            r.healed_at = healed_at;
            r.whole_after = Some(whole);
        }
        *lock(&sh.heavy_quiet_until) = Instant::now() + cool_down;
        sh.partition_on.store(false, Ordering::Release);
    }))
}

#[derive(Debug, Clone)]
struct KillRecord {
    node: Option<usize>,
    killed_at: Instant,
    restarted_at: Option<Instant>,
    outcome: String,
}

async fn kill_leaders(sh: Arc<Shared>, servers: Arc<Servers>) {
    let every = sh.settings.kill_every;
    if every.is_zero() {
        return;
    }
    let mut rng = SplitMix64(sh.settings.seed ^ 0x6b69_6c6c);
    for _ in 0..MAX_KILLS {
        let wait = rng.between(every * 9 / 10, every * 11 / 10);
        if sh.sleep_or_stop(wait).await {
            break;
        }
        // Partitions and kills take turns (a kill during a partition can leave no quorum).
        let mut stop = sh.stop.subscribe();
        let turn = tokio::select! {
            t = tokio::time::timeout(KILL_TURN_WAIT, Arc::clone(&servers.turn).lock_owned()) => t,
            _ = stop.wait_for(|s| *s) => break,
        };
        let Ok(_turn) = turn else {
            lock(&sh.kills).push(KillRecord {
                node: None,
                killed_at: Instant::now(),
                restarted_at: None,
                outcome: format!("no turn within {KILL_TURN_WAIT:?} (a partition)"),
            });
            continue;
        };
        let srv = Arc::clone(&servers);
        let killed = tokio::task::spawn_blocking(move || {
            let mut e = srv.ensemble();
            let leader = e
                .leader()
                .ok_or("no leader to kill (election under way?)")?;
            e.kill(leader)
                .map(|()| leader)
                .map_err(|_| "could not kill the leader")
        })
        .await
        .unwrap_or(Err("the kill task failed"));
        let killed_at = Instant::now();
        let node = match killed {
            Ok(node) => node,
            Err(why) => {
                lock(&sh.kills).push(KillRecord {
                    node: None,
                    killed_at,
                    restarted_at: None,
                    outcome: why.to_owned(),
                });
                continue;
            }
        };
        // Down for 2–5 s (cut short by a stop: the ensemble must be whole at the end).
        let down = rng.between(Duration::from_secs(2), Duration::from_secs(5));
        let _ = sh.sleep_or_stop(down).await;
        let srv = Arc::clone(&servers);
        let restarted = tokio::task::spawn_blocking(move || {
            let mut e = srv.ensemble();
            e.restart(node).map_err(|e| e.to_string())?;
            let restarted_at = Instant::now();
            let whole = e
                .wait_healed(HEAL_LIMIT)
                .map(|_| restarted_at.elapsed())
                .map_err(|e| wait_failure(&e));
            Ok((restarted_at, whole))
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        lock(&sh.kills).push(KillRecord {
            node: Some(node),
            killed_at,
            restarted_at: restarted.as_ref().ok().map(|(at, _)| *at),
            outcome: match restarted {
                Ok((at, whole)) => format!(
                    "down {:.1}s, rejoined after {:.1}s, {}",
                    down.as_secs_f64(),
                    (at - killed_at).as_secs_f64(),
                    match whole {
                        Ok(d) => format!("whole again {:.1}s later", d.as_secs_f64()),
                        Err(e) => e,
                    }
                ),
                Err(e) => format!("restart failed: {e}"),
            },
        });
    }
}

// ===== progress =====

async fn report_progress(sh: Arc<Shared>) {
    let every = Duration::from_secs(10);
    let max = sh.settings.max_run.as_secs() / every.as_secs() + 10;
    for _ in 0..max {
        if sh.sleep_or_stop(every).await {
            break;
        }
        let elapsed = sh.t0.elapsed().as_secs_f64();
        let n = sh.acquisitions.load(Ordering::Relaxed);
        eprintln!(
            "  {:>6.0}s {n:>8} acquisitions ({:.0}/s), {} long holds, {} faults, {} partitions, \
             {} leader kills, {} sessions expired, {} timeouts",
            elapsed,
            n as f64 / elapsed.max(1e-9),
            sh.long_holds.load(Ordering::Relaxed),
            lock(&sh.faults).len(),
            lock(&sh.partitions).len(),
            lock(&sh.kills).iter().filter(|k| k.node.is_some()).count(),
            sh.expired.load(Ordering::Relaxed),
            sh.timeouts.load(Ordering::Relaxed),
        );
    }
}

// ===== analysis =====

/// Two sections of different contenders that intersect: indices into the sections,
/// earlier-entered first, and whether the earlier one's `lost()` fired before the later
/// one entered.
struct Overlap {
    first: usize,
    second: usize,
    excused: bool,
}

fn overlaps(sections: &[Section]) -> Vec<Overlap> {
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| (sections[i].enter, i));
    let mut open: Vec<usize> = Vec::new();
    let mut found = Vec::new();
    for b in order {
        let sb = &sections[b];
        open.retain(|&a| sections[a].exit > sb.enter);
        for &a in &open {
            let sa = &sections[a];
            if sa.who == sb.who {
                continue;
            }
            let excused = sa.lost.is_some_and(|(at, _)| at <= sb.enter);
            found.push(Overlap {
                first: a,
                second: b,
                excused,
            });
        }
        open.push(b);
    }
    found
}

fn describe_section(sh: &Shared, s: &Section) -> String {
    format!(
        "contender {} session {:#x} token {:#x}{}: [{}, {}] lost {} trusted_until(at enter) {}",
        s.who,
        s.session,
        s.token,
        if s.long { " (long hold)" } else { "" },
        sh.at(s.enter),
        sh.at(s.exit),
        s.lost.map_or_else(
            || "-".to_owned(),
            |(at, r)| format!("at {} ({r})", sh.at(at))
        ),
        s.trusted_until.map_or_else(|| "-".to_owned(), |u| sh.at(u)),
    )
}

/// The faults that touched `whos`, and the partitions and kills of the ensemble, in
/// `[from, to]`.
fn context(sh: &Shared, whos: &[usize], from: Instant, to: Instant) -> String {
    let nodes = sh.settings.nodes;
    let mut out = String::new();
    for f in lock(&sh.faults).iter() {
        let end = f.at + f.lasting;
        if end < from || f.at > to {
            continue;
        }
        if !f.proxies.iter().any(|p| whos.contains(&(p / nodes))) {
            continue;
        }
        let on: Vec<String> = f
            .proxies
            .iter()
            .map(|p| format!("c{}/s{}", p / nodes, p % nodes))
            .collect();
        let _ = writeln!(
            out,
            "      fault {} on {} from {} for {:.3}s {}",
            f.kind.name(),
            on.join(","),
            sh.at(f.at),
            f.lasting.as_secs_f64(),
            f.detail
        );
    }
    for p in lock(&sh.partitions).iter() {
        let end = p.healed_at.unwrap_or(p.at + p.lasting);
        if end < from || p.at > to {
            continue;
        }
        let _ = writeln!(
            out,
            "      partition {}{}: {} from {} to {}; mid-way view {}; {}",
            p.kind.name(),
            if p.aimed { " (aimed)" } else { "" },
            p.kind.describe(p.leader, p.victim),
            sh.at(p.at),
            p.healed_at.map_or_else(|| "-".to_owned(), |h| sh.at(h)),
            p.during
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string),
            match &p.whole_after {
                Some(Ok(d)) => format!("whole {:.1}s after the heal", d.as_secs_f64()),
                Some(Err(e)) => e.clone(),
                None => "not healed".to_owned(),
            }
        );
    }
    for k in lock(&sh.kills).iter() {
        let end = k.restarted_at.unwrap_or(k.killed_at);
        if end < from || k.killed_at > to {
            continue;
        }
        let _ = writeln!(
            out,
            "      leader kill of node {:?} at {}: {}",
            k.node,
            sh.at(k.killed_at),
            k.outcome
        );
    }
    out
}

/// The partitions' lines of the summary: how many of each kind, how many aimed, what the
/// servers saw mid-way, how long the ensemble took to be whole again.
fn print_partitions(partitions: &[PartitionRecord], skipped: &Tally) {
    let mut kinds = Tally::new();
    for p in partitions {
        bump(&mut kinds, p.kind.name());
    }
    print_tally("server partitions", &kinds);
    let aimed: Vec<&PartitionRecord> = partitions.iter().filter(|p| p.aimed).collect();
    let mut aimed_kinds = Tally::new();
    for p in &aimed {
        bump(&mut aimed_kinds, p.kind.name());
    }
    print_tally("  aimed at a long hold's server", &aimed_kinds);
    let looked: Vec<&View> = partitions
        .iter()
        .filter_map(|p| p.during.as_ref())
        .collect();
    println!(
        "  {:<36} {} of {} looked at mid-way (servers' own view: not whole)",
        "  seen by the servers",
        looked.iter().filter(|v| !v.is_whole()).count(),
        looked.len()
    );
    let mut whole: Vec<Duration> = partitions
        .iter()
        .filter_map(|p| p.whole_after.as_ref()?.as_ref().ok().copied())
        .collect();
    whole.sort();
    let failed: Vec<&String> = partitions
        .iter()
        .filter_map(|p| p.whole_after.as_ref()?.as_ref().err())
        .collect();
    println!(
        "  {:<36} median {:.1}s, max {:.1}s ({} not within {:?})",
        "  whole again after the heal",
        whole
            .get(whole.len() / 2)
            .map_or(0.0, Duration::as_secs_f64),
        whole.last().map_or(0.0, Duration::as_secs_f64),
        failed.len(),
        HEAL_LIMIT
    );
    for f in failed.iter().take(SHOWN) {
        println!("    {f}");
    }
    print_tally("  drawn but not injected", skipped);
}

fn print_tally(label: &str, t: &Tally) {
    let total: u64 = t.values().sum();
    let parts: Vec<String> = t.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "  {label:<36} {total}{}",
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    );
}

// ===== the run =====

/// Runs the soak; `Ok(false)` when a safety check failed.
pub(crate) fn main(args: &[String]) -> Result<bool, BenchError> {
    let settings = parse(args)?;
    println!(
        "zkwire soak: seed {:#x} ({}), {} contenders, session timeout {:?}, {}-node ensemble \
         (links through relays; tickTime {TICK_MS} ms, syncLimit {SYNC_LIMIT}, initLimit \
         {INIT_LIMIT}), partitions {}, target {} acquisitions, hard stop {:.1} min",
        settings.seed,
        settings.seed,
        settings.contenders,
        T,
        settings.nodes,
        if settings.no_faults || settings.no_partitions {
            "off"
        } else {
            "on"
        },
        settings.acquisitions,
        settings.max_run.as_secs_f64() / 60.0
    );
    eprintln!(
        "starting a {}-node partitionable ZooKeeper ensemble…",
        settings.nodes
    );
    let config = ServerConfig::default()
        .tick_time_ms(TICK_MS)
        .extra("syncLimit", SYNC_LIMIT)
        .extra("initLimit", INIT_LIMIT);
    let ensemble = PartitionedEnsemble::start(settings.nodes, config)?;
    let addrs: Vec<SocketAddr> = (0..settings.nodes).map(|i| ensemble.node_addr(i)).collect();
    let direct = ensemble.connect_string();
    let servers = Arc::new(Servers {
        ensemble: StdMutex::new(ensemble),
        turn: Arc::new(AsyncMutex::new(())),
        addrs,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ok = runtime.block_on(soak(settings, direct, Arc::clone(&servers)));
    drop(runtime);
    drop(servers);
    ok
}

async fn soak(
    settings: Settings,
    direct: String,
    servers: Arc<Servers>,
) -> Result<bool, BenchError> {
    let nodes = settings.nodes;
    let mut slots = Vec::new();
    for _ in 0..settings.contenders {
        for addr in &servers.addrs {
            slots.push(Slot {
                proxy: FaultProxy::start(*addr).await?,
                busy: AtomicBool::new(false),
            });
        }
    }
    let slots = Arc::new(slots);
    let sh = Arc::new(Shared {
        t0: Instant::now(),
        settings: settings.clone(),
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
    });
    eprintln!("ensemble up at {direct}; {} proxies; running…", slots.len());

    let mut contenders = JoinSet::new();
    for who in 0..settings.contenders {
        let cs = (0..nodes)
            .map(|s| slots[who * nodes + s].proxy.connect_string())
            .collect::<Vec<_>>()
            .join(",");
        contenders.spawn(contender(who, cs, Arc::clone(&sh)));
    }
    let injector = tokio::spawn(inject(
        Arc::clone(&sh),
        Arc::clone(&slots),
        Arc::clone(&servers),
    ));
    let killer = tokio::spawn(kill_leaders(Arc::clone(&sh), Arc::clone(&servers)));
    let progress = tokio::spawn(report_progress(Arc::clone(&sh)));

    let hard_stop = sh.t0 + settings.max_run;
    let timed_out = {
        let stop = sh.stop.subscribe();
        let mut stop = stop;
        tokio::select! {
            _ = stop.wait_for(|s| *s) => false,
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(hard_stop)) => true,
        }
    };
    let stopped_at = Instant::now();
    sh.request_stop();
    let wall = stopped_at - sh.t0;
    eprintln!("stopping: winding down the faults, the leader killer and the contenders…");
    let _ = injector.await;
    let _ = killer.await;
    let _ = progress.await;
    for slot in slots.iter() {
        slot.proxy.heal();
    }
    // Every link healed and the ensemble whole, for the closes and the orphan listing.
    let srv = Arc::clone(&servers);
    let whole_at_end = tokio::task::spawn_blocking(move || {
        let ensemble = srv.ensemble();
        ensemble.heal();
        ensemble
            .wait_healed(HEAL_LIMIT)
            .map(|leader| format!("whole, leader node {leader}"))
            .map_err(|e| wait_failure(&e))
    })
    .await
    .unwrap_or_else(|e| Err(format!("the heal task failed: {e}")));
    let mut ends = Vec::new();
    let _ = tokio::time::timeout(WIND_DOWN, async {
        while let Some(end) = contenders.join_next().await {
            if let Ok(end) = end {
                ends.push(end);
            }
        }
    })
    .await;
    let stuck = contenders.len();
    contenders.abort_all();
    ends.sort_by_key(|e| e.who);

    // Orphans: children of the lock directory, listed from a fresh session straight to the
    // ensemble once every contender has closed its session.
    let orphans = list_orphans(&direct).await;

    // ===== the summary =====
    let store = std::mem::take(&mut *lock(&sh.store));
    let found = overlaps(&store.sections);
    let unexcused: Vec<&Overlap> = found.iter().filter(|o| !o.excused).collect();
    let tallies = std::mem::take(&mut *sh.tallies());
    let faults = lock(&sh.faults).clone();
    let kills = lock(&sh.kills).clone();
    let partitions = lock(&sh.partitions).clone();
    let mut by_kind: BTreeMap<Fault, (u64, u64)> = BTreeMap::new();
    for f in &faults {
        let e = by_kind.entry(f.kind).or_default();
        e.0 += 1;
        e.1 += f.proxies.len() as u64;
    }
    let acquisitions = sh.acquisitions.load(Ordering::Relaxed);
    let mut proxy_totals = zkwire_testing::proxy::ProxyCounts::default();
    for s in slots.iter() {
        let c = s.proxy.counts();
        proxy_totals.reset_connections += c.reset_connections;
        proxy_totals.client_frames_dropped += c.client_frames_dropped;
        proxy_totals.overflow_cuts += c.overflow_cuts;
    }

    println!();
    println!("== zkwire soak summary (seed {:#x})", settings.seed);
    println!("  {:<36} {}", "contenders", settings.contenders);
    println!("  {:<36} {}", "acquisitions", acquisitions);
    println!(
        "  {:<36} {} ({} lost before entering, see below)",
        "critical sections entered",
        sh.entered.load(Ordering::Relaxed),
        tallies.lost_before.values().sum::<u64>()
    );
    let longs: Vec<&Section> = store.sections.iter().filter(|s| s.long).collect();
    println!(
        "  {:<36} {} ({} cut short by lost())",
        "long holds (0.5-1.5 T) entered",
        longs.len(),
        longs.iter().filter(|s| s.lost.is_some()).count()
    );
    println!("  {:<36} {}", "fenced store writes accepted", store.writes);
    println!(
        "  {:<36} {} ok, {} timed out (left to the background)",
        "releases",
        sh.released.load(Ordering::Relaxed),
        sh.release_timeouts.load(Ordering::Relaxed)
    );
    println!(
        "  {:<36} {}",
        "acquire timeouts",
        sh.timeouts.load(Ordering::Relaxed)
    );
    print_tally("acquire errors", &tallies.acquire_errors);
    print_tally("release errors (other than Lost)", &tallies.release_errors);
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(k, (n, p))| format!("{} {n} on {p} proxies", k.name()))
        .collect();
    println!(
        "  {:<36} {} ({})",
        "proxy faults injected",
        faults.len(),
        kinds.join(", ")
    );
    println!(
        "  {:<36} {}",
        "  heavy ones aimed at a long hold",
        faults.iter().filter(|f| f.aimed).count()
    );
    print_partitions(&partitions, &tallies.partitions_skipped);
    println!(
        "  {:<36} {} connections reset, {} client frames dropped, {} overflow cuts",
        "proxy counters",
        proxy_totals.reset_connections,
        proxy_totals.client_frames_dropped,
        proxy_totals.overflow_cuts
    );
    let done_kills = kills.iter().filter(|k| k.node.is_some()).count();
    let restarted = kills.iter().filter(|k| k.restarted_at.is_some()).count();
    println!(
        "  {:<36} {done_kills} ({restarted} restarted, {} attempts without a leader to kill)",
        "leader kills",
        kills.len() - done_kills
    );
    for k in kills.iter().filter(|k| k.restarted_at.is_none()) {
        println!(
            "    {} at {}: {}",
            k.node.map_or("-".to_owned(), |n| format!("node {n}")),
            sh.at(k.killed_at),
            k.outcome
        );
    }
    if let Err(e) = &whole_at_end {
        println!("  {:<36} {e}", "ensemble at the end");
    }
    println!(
        "  {:<36} {} (of {} sessions opened)",
        "sessions expired",
        sh.expired.load(Ordering::Relaxed),
        sh.sessions.load(Ordering::Relaxed)
    );
    print_tally("sessions ended otherwise", &tallies.sessions_ended);
    print_tally("lost() before entering", &tallies.lost_before);
    print_tally("lost() during a section", &tallies.lost_during);
    print_tally("lost() reported by release()", &tallies.lost_at_release);
    println!(
        "  {:<36} {} ({} excused: the earlier holder's lost() fired first)",
        "overlapping critical sections",
        found.len(),
        found.len() - unexcused.len()
    );
    println!(
        "  {:<36} {}   (must be 0)",
        "overlaps NOT preceded by lost()",
        unexcused.len()
    );
    println!(
        "  {:<36} {}   (must be 0)",
        "stale writes refused by the store",
        store.refused.len()
    );
    match &orphans {
        Ok(names) => println!(
            "  {:<36} {}   (must be 0){}",
            "orphan lock nodes at the end",
            names.len(),
            if names.is_empty() {
                String::new()
            } else {
                format!(": {names:?}")
            }
        ),
        Err(e) => println!("  {:<36} unknown: {e}", "orphan lock nodes at the end"),
    }
    let close_failures: Vec<String> = ends
        .iter()
        .filter_map(|e| {
            e.closed
                .as_ref()
                .err()
                .map(|why| format!("contender {} session {:#x}: {why}", e.who, e.session))
        })
        .collect();
    if !close_failures.is_empty() || stuck > 0 {
        println!(
            "  {:<36} {} did not close cleanly {close_failures:?}; {stuck} did not wind down",
            "contenders",
            close_failures.len()
        );
    }
    println!(
        "  {:<36} {:.1} s{}",
        "wall time",
        wall.as_secs_f64(),
        if timed_out {
            " (hard stop: --max-minutes reached)"
        } else {
            ""
        }
    );
    println!(
        "  {:<36} {:.1}",
        "acquisitions/s",
        acquisitions as f64 / wall.as_secs_f64().max(1e-9)
    );

    for o in unexcused.iter().take(SHOWN) {
        let a = &store.sections[o.first];
        let b = &store.sections[o.second];
        println!(
            "!! overlap by {:.3} ms not preceded by lost():",
            (a.exit.min(b.exit) - b.enter).as_secs_f64() * 1e3
        );
        println!("    earlier: {}", describe_section(&sh, a));
        println!("    later:   {}", describe_section(&sh, b));
        print!(
            "{}",
            context(
                &sh,
                &[a.who, b.who],
                a.enter.checked_sub(3 * T).unwrap_or(a.enter),
                b.exit
            )
        );
    }
    for r in store.refused.iter().take(SHOWN) {
        println!(
            "!! stale write refused: contender {} token {:#x} < newest {:#x} at {}",
            r.who,
            r.token,
            r.newest,
            sh.at(r.at)
        );
        print!(
            "{}",
            context(&sh, &[r.who], r.at.checked_sub(3 * T).unwrap_or(r.at), r.at)
        );
    }

    let orphan_count = orphans.as_ref().map_or(1, Vec::len);
    let ok = unexcused.is_empty() && store.refused.is_empty() && orphan_count == 0;
    println!("  {:<36} {}", "result", if ok { "PASS" } else { "FAIL" });
    Ok(ok)
}

/// The children of the lock directory, seen from a fresh session to the ensemble itself.
async fn list_orphans(direct: &str) -> Result<Vec<String>, String> {
    let opening = zkwire_testing::support::builder()
        .with_session_timeout(T)
        .connect(direct);
    let client = match tokio::time::timeout(CONNECT_ATTEMPT * 2, opening).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("could not connect to the ensemble".to_owned()),
    };
    let listed = async {
        // The contenders' closes went through other servers: catch up first.
        match client.sync(LOCK_DIR).await {
            Ok(()) | Err(zkwire::Error::NoNode) => {}
            Err(e) => return Err(e.to_string()),
        }
        match client.get_children(LOCK_DIR).await {
            Ok(children) => Ok(children),
            Err(zkwire::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e.to_string()),
        }
    };
    let result = tokio::time::timeout(2 * T, listed)
        .await
        .unwrap_or_else(|_| Err("listing timed out".to_owned()));
    let _ = tokio::time::timeout(RELEASE_TIMEOUT, client.close()).await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(
        who: usize,
        enter_ms: u64,
        exit_ms: u64,
        lost_ms: Option<u64>,
        t0: Instant,
    ) -> Section {
        let at = |ms| t0 + Duration::from_millis(ms);
        Section {
            who,
            session: 0,
            token: 0,
            enter: at(enter_ms),
            exit: at(exit_ms),
            lost: lost_ms.map(|ms| (at(ms), LostReason::Unacknowledged(Duration::ZERO))),
            trusted_until: None,
            long: false,
        }
    }

    #[test]
    fn overlaps_are_found_and_excused_only_by_an_earlier_lost() {
        let t0 = Instant::now();
        let sections = vec![
            section(0, 0, 10, None, t0),
            section(1, 10, 20, None, t0),     // touches, no overlap
            section(2, 15, 30, Some(18), t0), // overlaps 1, not excused
            section(3, 25, 26, None, t0),     // overlaps 2 after its lost: excused
            section(0, 40, 50, None, t0),
            section(0, 45, 46, None, t0), // same contender: ignored
        ];
        let found = overlaps(&sections);
        let pairs: Vec<(usize, usize, bool)> = found
            .iter()
            .map(|o| (o.first, o.second, o.excused))
            .collect();
        assert_eq!(pairs, vec![(1, 2, false), (2, 3, true)]);
    }

    #[test]
    fn the_store_refuses_older_tokens_only() {
        let mut store = FencedStore::default();
        let now = Instant::now();
        assert!(store.write(0, 5, now));
        assert!(store.write(0, 5, now));
        assert!(store.write(1, 7, now));
        assert!(!store.write(0, 5, now));
        assert_eq!(store.refused.len(), 1);
        assert_eq!(store.writes, 3);
    }
}
