//! `zkwire-bench soak`: mutual exclusion of `zkwire_recipes::Mutex` under faults, with the
//! evidence printed.
//!
//! ```text
//! cargo run --release -p zkwire-bench -- soak [--acquisitions N] [--contenders N]
//!     [--seed N] [--max-minutes M] [--leader-kill-every SECS] [--long-hold-every N]
//! ```
//!
//! A 3-node ensemble is started through `zkwire-testing`. Each contender is a `Client` of its
//! own (session timeout [`T`]) whose connect string lists three [`FaultProxy`]s of its own,
//! one per ensemble member. Contenders loop: `lock_timeout`, a critical section that writes
//! to a [`FencedStore`] (an in-process resource that refuses a fencing token older than the
//! newest it has accepted and records every section as an interval), `release`.
//!
//! The critical section checks that the hold is trusted (`lost()` not ready, `is_held()`)
//! before entering and after a 0–2 ms hold, and stops at once when `lost()` fires
//! (`select!`), recording the instant as the section's "lost at". One acquisition in
//! `--long-hold-every` (default 2000) holds for 0.5–1.5 T instead, so that faults can catch
//! a holder in its critical section: the next heavy fault is aimed at it.
//!
//! Meanwhile, from one seed, every 50–500 ms a fault hits one proxy of a contender (the one
//! it is connected through) or all three of them:
//! - light faults: a connection reset (RST both ways), or a delay of 2–50 ms on every frame
//!   for 0.3–1.5 s;
//! - heavy faults, one at a time with a 2–8 s pause after each (a stalled contender stalls
//!   the whole lock queue, so back-to-back heavy faults would leave the lock stalled nearly
//!   all the time): a blackhole (both directions held, then delivered), a one-way
//!   client→server loss (frames dropped) or stall (frames held), each for 0.2–1.5 T, or a
//!   random lag of 0..(0.05–1.0 T) on every server→client frame for 0.5–1.5 T.
//!
//! Every ~20 s the ensemble's leader is killed and restarted 2–5 s later.
//!
//! Two critical sections of different contenders overlap when their intervals intersect.
//! An overlap is *excused* when the earlier holder's `lost()` had fired before the later
//! holder entered. Non-excused overlaps, stale writes refused by the store, and lock nodes
//! left behind once every contender has closed its session (listed from a fresh session)
//! must all be zero: otherwise the run exits with code 2.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use zkwire::{Client, SessionState};
use zkwire_recipes::{LockError, LostReason, Mutex, MutexGuard};
use zkwire_testing::proxy::{Direction, FaultProxy};
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::ZkEnsemble;

use crate::BenchError;

/// The session timeout every contender asks for.
const T: Duration = Duration::from_secs(4);
/// Ensemble members.
const NODES: usize = 3;
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
/// How long the contenders get to wind down once stopped.
const WIND_DOWN: Duration = Duration::from_secs(90);
/// After a heavy fault ends, no other one starts for this long (drawn in the range): one
/// stalled contender stalls the whole lock queue, so back-to-back heavy faults would leave
/// the lock stalled nearly all the time. Light faults go on meanwhile.
const HEAVY_COOL_DOWN: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(8));
/// Overlaps and refusals described in detail.
const SHOWN: usize = 10;

// ===== settings =====

const USAGE: &str = "usage: zkwire-bench soak [--acquisitions N] [--contenders N] [--seed N] \
[--max-minutes M] [--leader-kill-every SECS] [--long-hold-every N] [--no-faults]
  --acquisitions N        stop after N acquisitions in all (default 100000)
  --contenders N          sessions contending for the lock (default 8)
  --seed N                the fault schedule's seed (decimal or 0x-hex; default: from the clock)
  --max-minutes M         hard stop of the run (default 30)
  --leader-kill-every S   seconds between leader kills (default 20; 0: never)
  --long-hold-every N     one acquisition in N holds for 0.5-1.5 T, a target for heavy
                          faults (default 2000; 0: every hold lasts 0-2 ms)
  --no-faults             no proxy faults (a baseline; combine with --leader-kill-every 0)
  --ignore-lost           self-test of the checker: sections ignore lost() and is_held(), and
                          long holds last 1.5-3 T, so overlaps must be reported (use with a
                          small --long-hold-every)";

#[derive(Debug, Clone)]
struct Settings {
    acquisitions: u64,
    contenders: usize,
    seed: u64,
    max_run: Duration,
    kill_every: Duration,
    /// No proxy faults (a baseline).
    no_faults: bool,
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
        seed: SplitMix64(clock_seed).next_u64(),
        max_run: Duration::from_secs(30 * 60),
        kill_every: Duration::from_secs(20),
        no_faults: false,
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
    long_holds: AtomicU64,
    store: StdMutex<FencedStore>,
    tallies: StdMutex<Tallies>,
    faults: StdMutex<Vec<FaultRecord>>,
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
        let opening = Client::builder().with_session_timeout(T).connect(cs);
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

    /// A kind: heavy half the time when `heavy_allowed`, light otherwise.
    fn pick(rng: &mut SplitMix64, heavy_allowed: bool) -> Self {
        if heavy_allowed && rng.below(2) == 0 {
            Self::from(rng, &Self::HEAVY)
        } else {
            Self::from(rng, &Self::LIGHT)
        }
    }

    fn pick_heavy(rng: &mut SplitMix64) -> Self {
        Self::from(rng, &Self::HEAVY)
    }

    fn from(rng: &mut SplitMix64, table: &[(Self, u64)]) -> Self {
        let total: u64 = table.iter().map(|(_, w)| w).sum();
        let mut x = rng.below(total);
        for &(kind, w) in table {
            if x < w {
                return kind;
            }
            x -= w;
        }
        Self::Reset
    }
}

#[derive(Debug, Clone)]
struct FaultRecord {
    at: Instant,
    kind: Fault,
    /// Proxy indices: contender `p / NODES`, server `p % NODES`.
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

/// The proxies of contender `who` to hit: all three, or the one carrying its connection.
fn proxies_of(rng: &mut SplitMix64, slots: &[Slot], who: usize, all: bool) -> Vec<usize> {
    let mine = who * NODES..(who + 1) * NODES;
    if all {
        return mine.collect();
    }
    let active: Vec<usize> = mine
        .clone()
        .filter(|&p| slots[p].proxy.active() > 0)
        .collect();
    match active.as_slice() {
        [] => vec![mine.start + rng.below(NODES as u64) as usize],
        a => vec![a[rng.below(a.len() as u64) as usize]],
    }
}

async fn inject(sh: Arc<Shared>, slots: Arc<Vec<Slot>>) {
    if sh.settings.no_faults {
        return;
    }
    let mut rng = SplitMix64(sh.settings.seed);
    let mut timed = JoinSet::new();
    let mut heavy_quiet_until = Instant::now();
    for _ in 0..MAX_FAULTS {
        let pause = rng.between(Duration::from_millis(50), Duration::from_millis(500));
        if sh.sleep_or_stop(pause).await {
            break;
        }
        while timed.try_join_next().is_some() {}
        let heavy_allowed = Instant::now() >= heavy_quiet_until;
        // A contender in a long hold gets the next heavy fault: on all three of its proxies
        // two times in three (its session expires while it holds if the fault outlasts
        // T), else on the one it is connected through.
        let long = sh
            .long_holder
            .load(Ordering::Relaxed)
            .checked_sub(1)
            .filter(|_| heavy_allowed);
        let (mut kind, mut proxies) = match long {
            Some(who) => {
                let kind = Fault::pick_heavy(&mut rng);
                let all = rng.below(3) != 0;
                (kind, proxies_of(&mut rng, &slots, who, all))
            }
            None => {
                // Otherwise heavy faults hit all three proxies of a contender half the
                // time, light ones a third of the time.
                let kind = Fault::pick(&mut rng, heavy_allowed);
                let who = pick_contender(&mut rng, &sh);
                let all = rng.below(if kind.is_heavy() { 2 } else { 3 }) == 0;
                (kind, proxies_of(&mut rng, &slots, who, all))
            }
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
                proxies = proxies_of(&mut rng, &slots, who, false);
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
            heavy_quiet_until =
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
    // Let the timed faults run out (at most 1.5 T each), then heal everything.
    let _ = tokio::time::timeout(2 * T, async { while timed.join_next().await.is_some() {} }).await;
    timed.abort_all();
    for slot in slots.iter() {
        slot.proxy.heal();
    }
}

// ===== leader kills =====

#[derive(Debug, Clone)]
struct KillRecord {
    node: Option<usize>,
    killed_at: Instant,
    restarted_at: Option<Instant>,
    outcome: String,
}

async fn kill_leaders(sh: Arc<Shared>, ensemble: Arc<StdMutex<ZkEnsemble>>) {
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
        let ens = Arc::clone(&ensemble);
        let killed = tokio::task::spawn_blocking(move || {
            let mut e = lock(&ens);
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
        let ens = Arc::clone(&ensemble);
        let restarted = tokio::task::spawn_blocking(move || lock(&ens).restart(node))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        let restarted_at = Instant::now();
        lock(&sh.kills).push(KillRecord {
            node: Some(node),
            killed_at,
            restarted_at: restarted.is_ok().then_some(restarted_at),
            outcome: match restarted {
                Ok(()) => format!(
                    "down {:.1}s, rejoined after {:.1}s",
                    down.as_secs_f64(),
                    (restarted_at - killed_at).as_secs_f64()
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
            "  {:>6.0}s {n:>8} acquisitions ({:.0}/s), {} long holds, {} faults, {} leader kills, {} sessions expired, {} timeouts",
            elapsed,
            n as f64 / elapsed.max(1e-9),
            sh.long_holds.load(Ordering::Relaxed),
            lock(&sh.faults).len(),
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

/// The faults and kills that touched `who` (or the ensemble) in `[from, to]`.
fn context(sh: &Shared, whos: &[usize], from: Instant, to: Instant) -> String {
    let mut out = String::new();
    for f in lock(&sh.faults).iter() {
        let end = f.at + f.lasting;
        if end < from || f.at > to {
            continue;
        }
        if !f.proxies.iter().any(|p| whos.contains(&(p / NODES))) {
            continue;
        }
        let on: Vec<String> = f
            .proxies
            .iter()
            .map(|p| format!("c{}/s{}", p / NODES, p % NODES))
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
        "zkwire soak: seed {:#x} ({}), {} contenders, session timeout {:?}, {}-node ensemble, \
         target {} acquisitions, hard stop {:.1} min",
        settings.seed,
        settings.seed,
        settings.contenders,
        T,
        NODES,
        settings.acquisitions,
        settings.max_run.as_secs_f64() / 60.0
    );
    eprintln!("starting a {NODES}-node ZooKeeper ensemble…");
    let ensemble = ZkEnsemble::start(NODES)?;
    let addrs: Vec<SocketAddr> = (0..NODES)
        .map(|i| SocketAddr::from((Ipv4Addr::LOCALHOST, ensemble.node_port(i))))
        .collect();
    let direct = ensemble.connect_string();
    let ensemble = Arc::new(StdMutex::new(ensemble));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ok = runtime.block_on(soak(settings, addrs, direct, Arc::clone(&ensemble)));
    drop(runtime);
    drop(ensemble);
    ok
}

async fn soak(
    settings: Settings,
    addrs: Vec<SocketAddr>,
    direct: String,
    ensemble: Arc<StdMutex<ZkEnsemble>>,
) -> Result<bool, BenchError> {
    let mut slots = Vec::new();
    for _ in 0..settings.contenders {
        for addr in &addrs {
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
        long_holds: AtomicU64::new(0),
        store: StdMutex::new(FencedStore::default()),
        tallies: StdMutex::new(Tallies::default()),
        faults: StdMutex::new(Vec::new()),
        kills: StdMutex::new(Vec::new()),
    });
    eprintln!("ensemble up at {direct}; {} proxies; running…", slots.len());

    let mut contenders = JoinSet::new();
    for who in 0..settings.contenders {
        let cs = (0..NODES)
            .map(|s| slots[who * NODES + s].proxy.connect_string())
            .collect::<Vec<_>>()
            .join(",");
        contenders.spawn(contender(who, cs, Arc::clone(&sh)));
    }
    let injector = tokio::spawn(inject(Arc::clone(&sh), Arc::clone(&slots)));
    let killer = tokio::spawn(kill_leaders(Arc::clone(&sh), Arc::clone(&ensemble)));
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
        "faults injected",
        faults.len(),
        kinds.join(", ")
    );
    println!(
        "  {:<36} {}",
        "heavy faults aimed at a long hold",
        faults.iter().filter(|f| f.aimed).count()
    );
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
    let opening = Client::builder().with_session_timeout(T).connect(direct);
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
