//! A lock hold under one-way loss, against a real server: the holder's `lost()` must fire
//! before the server can expire its session and grant the lock to a contender, even while
//! watch notifications keep arriving (they reset a read timer without the server having
//! heard from us).
//!
//! Each run has its own chroot and its own [`FaultProxy`]:
//! - the **holder** connects through the proxy (T = 4 s), holds a [`Mutex`] guard and a
//!   persistent watch on `/w`, and drains that watch;
//! - a **writer** session (direct) sets `/w` every 100–200 ms, so notifications flow to the
//!   holder for as long as the server→client direction does;
//! - a **contender** session (direct) waits in `lock()` on the same path.
//!
//! After a seeded pause (so that the fault lands anywhere in the ping cycle) the proxy
//! injects the scenario's fault; `lost_at` (the holder's `lost()` resolves) and `granted_at`
//! (the contender's `lock()` returns) are taken on one clock, tokio's `Instant`, and every
//! run must have `lost_at < granted_at`, and the hold must have been given up before the
//! server ended it (a `NodeDeleted` or `SessionEnded` reason means the holder only learned
//! of the expiry, racing the contender). Each scenario prints its margins
//! (`granted_at − lost_at`) and the [`LostReason`]s seen; run with `--nocapture` to see
//! them. `ZKWIRE_LEASE_SEED=<n>` replays one seed, `ZKWIRE_LEASE_RUNS=<n>` changes the
//! number of runs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::future::Future;
use std::time::Duration;

use support::scenario_tests;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use zkwire::{AddWatchMode, Client, CreateOptions, SessionState};
use zkwire_recipes::{LockError, LostReason, Mutex, MutexGuard};
use zkwire_testing::proxy::{Direction, FaultProxy};
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{connect_with_timeout, fresh_chroot, sorted_children};

/// The holder's requested (and expected negotiated) session timeout.
const T: Duration = Duration::from_secs(4);
/// Seeded runs per scenario (unless `ZKWIRE_LEASE_RUNS` says otherwise).
const RUNS: u64 = 20;
/// Runs of one scenario in flight at once.
const PARALLEL: usize = 4;
/// A whole run, setup to teardown.
const RUN_LIMIT: Duration = Duration::from_secs(30);
/// From the fault to the contender's grant: the server expires the session about T after
/// it last heard from the holder, so 3T is plenty.
const GRANT_LIMIT: Duration = Duration::from_secs(12);
/// How long a `lost()` that has not fired by the grant is still waited for, to report how
/// late it was.
const LATE_WINDOW: Duration = Duration::from_secs(3);
/// Every other await that could hang.
const STEP: Duration = Duration::from_secs(10);
/// The lock directory (in the run's chroot).
const LOCK: &str = "/lock";
/// The node the writer sets and the holder watches.
const WATCHED: &str = "/w";

async fn within<F: Future>(limit: Duration, what: &str, f: F) -> F::Output {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {limit:?}: {what}"))
}

/// The fault a scenario injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Client→server cut while server→client flows: frames dropped (even seeds) or held
    /// (odd seeds).
    CutRequests,
    /// Both directions held, right after the holder received a notification.
    Blackhole,
    /// Server→client delayed by 0.5–1.5 s (seeded) for 1–2 s while the holder keeps
    /// requests in flight, then client→server dropped: replies to requests sent before the
    /// cut arrive after it.
    LateRepliesThenCut,
}

impl Fault {
    fn tag(self) -> &'static str {
        match self {
            Self::CutRequests => "cut",
            Self::Blackhole => "blackhole",
            Self::LateRepliesThenCut => "late_cut",
        }
    }
}

/// One run's holder, contender and writer, all started and waiting.
struct Rig {
    proxy: FaultProxy,
    holder: Client,
    writer: Client,
    contender: Client,
    guard: MutexGuard,
    /// How many notifications the holder has drained so far.
    notified: watch::Receiver<u64>,
    /// When the holder's `lost()` resolved, and why.
    lost: JoinHandle<(Instant, LostReason)>,
    /// When the contender's `lock()` returned, and what.
    granted: JoinHandle<(Instant, Result<MutexGuard, LockError>)>,
    /// The writer and the holder's watch drain (and request worker); dropped, aborted.
    background: JoinSet<()>,
}

async fn connect(cs: &str) -> Client {
    within(STEP, "connect", connect_with_timeout(cs, T)).await
}

/// Starts a run in a fresh chroot `/name`: the writer, the holder (through a new proxy, lock
/// granted, watch drained) and the contender (queued behind the holder).
async fn rig(name: &str, seed: u64) -> Rig {
    let direct = fresh_chroot(name).await;
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let via = format!("{}/{name}", proxy.connect_string());
    let mut background = JoinSet::new();

    let writer = connect(&direct).await;
    within(
        STEP,
        "create /w",
        writer.create(WATCHED, b"0", &CreateOptions::persistent()),
    )
    .await
    .unwrap();

    let holder = connect(&via).await;
    assert_eq!(
        holder.session_timeout(),
        Some(T),
        "negotiated session timeout"
    );
    let guard = within(STEP, "holder lock", Mutex::new(holder.clone(), LOCK).lock())
        .await
        .unwrap();
    let mut watcher = within(
        STEP,
        "add watch",
        holder.add_watch(WATCHED, AddWatchMode::Persistent),
    )
    .await
    .unwrap();
    let (tx, notified) = watch::channel(0);
    background.spawn(async move {
        for n in 1..=1_000_000 {
            if watcher.next().await.is_none() {
                return;
            }
            tx.send_replace(n);
        }
    });
    background.spawn({
        let writer = writer.clone();
        let mut rng = SplitMix64(seed ^ 0x5772_6974_6572);
        async move {
            // At least 100 ms apart: bounded well past RUN_LIMIT, and aborted at teardown.
            for i in 0..400u32 {
                tokio::time::sleep(rng.millis(100, 200)).await;
                let _ = writer
                    .set_data(WATCHED, i.to_string().as_bytes(), None)
                    .await;
            }
        }
    });

    let contender = connect(&direct).await;
    let granted = tokio::spawn({
        let mutex = Mutex::new(contender.clone(), LOCK);
        async move {
            let guard = mutex.lock().await;
            (Instant::now(), guard)
        }
    });
    within(STEP, "contender queued", async {
        for _ in 0..1000 {
            if sorted_children(&writer, LOCK).await.len() >= 2 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the contender never queued");
    })
    .await;
    let lost = tokio::spawn({
        let lost = guard.lost();
        async move {
            let reason = lost.await;
            (Instant::now(), reason)
        }
    });
    // Notifications flow before anything else happens.
    let mut first = notified.clone();
    within(STEP, "first notification", first.wait_for(|n| *n > 0))
        .await
        .unwrap();
    Rig {
        proxy,
        holder,
        writer,
        contender,
        guard,
        notified,
        lost,
        granted,
        background,
    }
}

/// Closes everything a run opened; nothing here may hang.
async fn teardown(rig: Rig, contender_guard: Option<MutexGuard>) {
    let Rig {
        proxy,
        holder,
        writer,
        contender,
        guard,
        lost,
        granted,
        background,
        ..
    } = rig;
    drop(background);
    lost.abort();
    granted.abort();
    drop(guard);
    proxy.heal();
    let quick = Duration::from_secs(5);
    let _ = tokio::time::timeout(quick, holder.close()).await;
    if let Some(g) = contender_guard {
        let _ = tokio::time::timeout(quick, g.release()).await;
    }
    let _ = tokio::time::timeout(quick, contender.close()).await;
    let _ = tokio::time::timeout(quick, writer.close()).await;
    drop(proxy);
}

/// What one run measured, relative to the fault.
#[derive(Debug)]
struct Sample {
    seed: u64,
    /// The grant, after the fault.
    granted: Duration,
    /// `lost()`, after the fault (negative: before it), and its reason; `None` when it had
    /// not fired [`LATE_WINDOW`] after the grant.
    lost: Option<(i64, LostReason)>,
}

impl Sample {
    /// `granted_at − lost_at` in milliseconds, if `lost()` fired.
    fn margin_ms(&self) -> Option<i64> {
        self.lost.map(|(lost, _)| ms(self.granted) - lost)
    }

    /// Why this run breaks the lease, if it does.
    fn violation(&self) -> Option<String> {
        match self.lost {
            None => Some(format!(
                "lost() had not fired {LATE_WINDOW:?} after the grant"
            )),
            Some((_, LostReason::Released)) => Some("lost() reported Released".to_owned()),
            // Nobody deletes the node but the server, when it expires the session: hearing
            // of that is hearing that the lock may already be someone else's, however close
            // the race with the contender's grant.
            Some((_, reason @ (LostReason::NodeDeleted | LostReason::SessionEnded(_)))) => Some(
                format!("lost() fired only once the server had ended the hold ({reason:?})"),
            ),
            Some((at, _)) if at <= 0 => Some(format!("lost() fired {}ms before the fault", -at)),
            Some(_) if self.margin_ms() <= Some(0) => Some(format!(
                "lost() fired {}ms after the grant",
                -self.margin_ms().unwrap_or(0)
            )),
            Some(_) => None,
        }
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `to − from` in signed milliseconds.
fn signed_ms(from: Instant, to: Instant) -> i64 {
    if to >= from {
        ms(to - from)
    } else {
        -ms(from - to)
    }
}

/// One seeded run of `fault`.
async fn run(fault: Fault, seed: u64) -> Sample {
    let name = format!("lease_{}_{seed}", fault.tag());
    let mut rng = SplitMix64(seed);
    let mut rig = rig(&name, seed).await;
    tokio::time::sleep(rng.millis(300, 1800)).await;
    assert!(
        !rig.lost.is_finished(),
        "seed {seed}: lost() fired before any fault"
    );

    let fault_at = match fault {
        Fault::CutRequests => {
            if seed % 2 == 0 {
                rig.proxy.drop_client_to_server(true);
            } else {
                rig.proxy.hold_client_to_server(true);
            }
            Instant::now()
        }
        Fault::Blackhole => {
            rig.notified.borrow_and_update();
            within(STEP, "a notification", rig.notified.changed())
                .await
                .unwrap();
            rig.proxy.blackhole(true);
            Instant::now()
        }
        Fault::LateRepliesThenCut => {
            rig.proxy.delay_direction(
                Direction::ServerToClient,
                Duration::from_millis(500),
                Duration::from_millis(1500),
                seed,
            );
            // Requests in flight at the cut: their replies arrive after it.
            rig.background.spawn({
                let holder = rig.holder.clone();
                let mut rng = SplitMix64(seed ^ 0x776f_726b);
                async move {
                    let mut requests = JoinSet::new();
                    for _ in 0..100 {
                        let holder = holder.clone();
                        requests.spawn(async move {
                            let _ = holder.exists(WATCHED).await;
                        });
                        tokio::time::sleep(rng.millis(200, 300)).await;
                    }
                    // Keep the requests (and their tasks) until aborted at teardown.
                    std::future::pending::<()>().await;
                }
            });
            tokio::time::sleep(rng.millis(1000, 2000)).await;
            assert!(
                !rig.lost.is_finished(),
                "seed {seed}: lost() fired while replies were only late"
            );
            rig.proxy.drop_client_to_server(true);
            Instant::now()
        }
    };

    let granted = tokio::time::timeout(GRANT_LIMIT, &mut rig.granted).await;
    let Ok(Ok((granted_at, contender_guard))) = granted else {
        panic!("seed {seed}: the contender was not granted within {GRANT_LIMIT:?} of the fault");
    };
    let contender_guard = contender_guard
        .unwrap_or_else(|e| panic!("seed {seed}: the contender's lock() failed: {e}"));
    let lost = if rig.lost.is_finished() {
        (&mut rig.lost).await.ok()
    } else {
        tokio::time::timeout(LATE_WINDOW, &mut rig.lost)
            .await
            .ok()
            .and_then(Result::ok)
    };
    let sample = Sample {
        seed,
        granted: granted_at - fault_at,
        lost: lost.map(|(at, reason)| (signed_ms(fault_at, at), reason)),
    };
    println!(
        "lease {} seed={seed}: granted +{}ms, lost {}, margin {}",
        fault.tag(),
        ms(sample.granted),
        sample
            .lost
            .map_or("never".to_owned(), |(at, r)| format!("{at:+}ms ({r:?})")),
        sample
            .margin_ms()
            .map_or("-".to_owned(), |m| format!("{m}ms")),
    );
    teardown(rig, Some(contender_guard)).await;
    sample
}

/// The seeds to run: `ZKWIRE_LEASE_SEED` alone, or `1..=ZKWIRE_LEASE_RUNS` (default
/// [`RUNS`]).
fn seeds() -> Vec<u64> {
    let env = |key| std::env::var(key).ok().and_then(|v| v.parse::<u64>().ok());
    match env("ZKWIRE_LEASE_SEED") {
        Some(seed) => vec![seed],
        None => (1..=env("ZKWIRE_LEASE_RUNS").unwrap_or(RUNS)).collect(),
    }
}

/// Runs every seed of `fault`, [`PARALLEL`] at a time, each bounded by [`RUN_LIMIT`]; prints
/// the margins and the reasons, then fails if any run broke the lease.
async fn scenario(fault: Fault) {
    tokio::task::block_in_place(shared_server);
    let seeds = seeds();
    let mut pending = seeds.iter().copied();
    let mut running = JoinSet::new();
    let mut seed_of = HashMap::new();
    let mut samples = Vec::new();
    let mut errors = Vec::new();
    // Each turn starts what fits and collects one run: at most one turn per seed, plus the
    // last (empty) one.
    for _ in 0..=seeds.len() {
        while running.len() < PARALLEL {
            let Some(seed) = pending.next() else { break };
            let handle = running.spawn(async move {
                tokio::time::timeout(RUN_LIMIT, run(fault, seed))
                    .await
                    .unwrap_or_else(|_| panic!("seed {seed}: the run took over {RUN_LIMIT:?}"))
            });
            seed_of.insert(handle.id(), seed);
        }
        match running.join_next().await {
            None => break,
            Some(Ok(sample)) => samples.push(sample),
            Some(Err(e)) => {
                let seed = seed_of.get(&e.id()).copied().unwrap_or_default();
                let why = e
                    .try_into_panic()
                    .ok()
                    .and_then(|p| {
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    })
                    .unwrap_or_else(|| "cancelled".to_owned());
                errors.push(format!("seed {seed}: {why}"));
            }
        }
    }
    samples.sort_by_key(|s| s.seed);
    report(fault, &samples, &errors);
}

fn report(fault: Fault, samples: &[Sample], errors: &[String]) {
    let mut margins: Vec<i64> = samples.iter().filter_map(Sample::margin_ms).collect();
    margins.sort_unstable();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for s in samples {
        let name = s.lost.map_or("never".to_owned(), |(_, r)| {
            let debug = format!("{r:?}");
            debug.split('(').next().unwrap_or_default().to_owned()
        });
        *reasons.entry(name).or_default() += 1;
    }
    let violations: Vec<String> = samples
        .iter()
        .filter_map(|s| s.violation().map(|v| format!("seed {}: {v}", s.seed)))
        .chain(errors.iter().cloned())
        .collect();
    let mut summary = format!(
        "lease {}: {} runs, {} broke the lease",
        fault.tag(),
        samples.len() + errors.len(),
        violations.len()
    );
    if let (Some(min), Some(max)) = (margins.first(), margins.last()) {
        let median = margins[margins.len() / 2];
        let _ = write!(
            summary,
            "; margin (granted_at − lost_at) min {min}ms / median {median}ms / max {max}ms"
        );
    }
    let _ = write!(summary, "; reasons {reasons:?}");
    println!("{summary}");
    assert!(
        violations.is_empty(),
        "{summary}\n{}",
        violations.join("\n")
    );
}

scenario_tests! {
    scenario;
    /// Client→server cut, server→client flowing (notifications every 100–200 ms).
    lost_fires_before_the_grant_when_requests_are_cut => Fault::CutRequests;
    /// Both directions held, right after a notification reached the holder.
    lost_fires_before_the_grant_after_a_blackhole => Fault::Blackhole;
    /// Late replies (0.5–1.5 s) to requests sent before a client→server cut arrive after it.
    lost_fires_before_the_grant_when_late_replies_follow_the_cut => Fault::LateRepliesThenCut;
}

/// Watches `rig` for `span`: the holder must not be reported lost and the contender must not
/// be granted; the session stays connected.
async fn assert_held_for(rig: &mut Rig, span: Duration, what: &str) {
    let lost = tokio::time::timeout(span, &mut rig.lost).await;
    if let Ok(lost) = lost {
        panic!("{what}: lost() fired: {lost:?}");
    }
    assert!(!rig.granted.is_finished(), "{what}: the contender got in");
    assert!(rig.guard.is_held(), "{what}");
    assert_eq!(rig.holder.state(), SessionState::Connected, "{what}");
}

/// No false positive: for 3T, with only notifications and pings flowing, the hold is
/// trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_holder_is_not_reported_lost() {
    tokio::task::block_in_place(shared_server);
    let mut rig = rig("lease_control_healthy", 1).await;
    assert_held_for(&mut rig, 3 * T, "healthy").await;
    assert!(
        *rig.notified.borrow() >= 30,
        "notifications kept flowing: {}",
        *rig.notified.borrow()
    );
    teardown(rig, None).await;
}

/// No false positive either when every reply and notification is 0.2–0.8 s late (for 3T):
/// the server hears from the holder all along, and the replies keep coming. A vouch reaches
/// back the relay bound plus two answer delays (docs/lease.md, "Timers"), so with T = 4 s
/// and ticks of 200 ms replies up to about 1.2 s late keep the hold; slower ones honestly
/// let the lease run out, since nothing then shows that the leader heard from us in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_replies_alone_are_not_a_loss() {
    tokio::task::block_in_place(shared_server);
    let mut rig = rig("lease_control_late", 2).await;
    rig.proxy.delay_direction(
        Direction::ServerToClient,
        Duration::from_millis(200),
        Duration::from_millis(800),
        2,
    );
    assert_held_for(&mut rig, 3 * T, "late replies").await;
    teardown(rig, None).await;
}
