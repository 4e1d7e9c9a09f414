//! A lock hold under partitions *inside* the ensemble (docs/lease.md, docs/faults.md #28): the
//! holder must hear `lost()` before the quorum's leader can hand its lock to anyone else, even
//! when the server the holder talks to is cut off from the quorum and keeps answering it.
//!
//! One 3-node ensemble for the binary, every quorum and election link through a relay
//! (tickTime 200 ms, syncLimit 5: a follower notices a silent leader after 1 s). Each scenario
//! runs 5 seeded trials twice: in a *zone* partition (each client reaches only the server on
//! its side of the cut) and with the connect string of every server. A trial:
//!
//! 1. the holder, connected to the server the fault will cut off, takes a `Mutex`;
//! 2. after a seeded pause the fault is switched on, and checked from the servers' own view;
//! 3. the contender, connected to the quorum's side, asks for the same lock;
//! 4. the referee records when the holder stopped trusting its hold (`lost()`, or its own
//!    release once its session is seen to have survived) and when the contender was granted.
//!
//! The contender must be granted strictly after the holder stopped trusting the hold.

mod support;

use std::fmt;
use std::sync::{Mutex as StdMutex, MutexGuard as StdMutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use support::scenario_tests;
use tokio::task::block_in_place;
use zkwire::Client;
use zkwire_recipes::{lease_margin, LockError, LostReason, Mutex};
use zkwire_testing::partition::{partition_config, HoldScenario as Scenario, PartitionedEnsemble};
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::four_letter_word;

const NODES: usize = 3;
const HEAL_LIMIT: Duration = Duration::from_secs(60);

/// What a run covers. `make test` runs the defaults; the longer runs of docs/lease.md set
/// `ZKWIRE_PARTITION_TRIALS` (per scenario and reach), `ZKWIRE_PARTITION_TICK_MS` (the
/// ensemble's tickTime, syncLimit staying 5) and `ZKWIRE_PARTITION_SESSION_MS` (T).
struct Params {
    trials: u64,
    tick: Duration,
    session_timeout: Duration,
}

impl Params {
    /// The longest a trial waits for the grant or the loss after the cut: the follower's
    /// notice (5 ticks), an election, T, and slack.
    fn window(&self) -> Duration {
        self.session_timeout + self.tick * 7 + Duration::from_secs(2)
    }
}

fn params() -> &'static Params {
    static PARAMS: OnceLock<Params> = OnceLock::new();
    PARAMS.get_or_init(|| {
        let var = |name: &str, default: u64| {
            std::env::var(name).ok().map_or(default, |v| {
                v.parse().unwrap_or_else(|e| panic!("{name}={v}: {e}"))
            })
        };
        Params {
            trials: var("ZKWIRE_PARTITION_TRIALS", 5),
            tick: Duration::from_millis(var("ZKWIRE_PARTITION_TICK_MS", 200)),
            session_timeout: Duration::from_millis(var("ZKWIRE_PARTITION_SESSION_MS", 4_000)),
        }
    })
}

/// One ensemble for the binary; trials take turns on it.
fn ensemble() -> StdMutexGuard<'static, PartitionedEnsemble> {
    static ENSEMBLE: OnceLock<StdMutex<PartitionedEnsemble>> = OnceLock::new();
    let cell = ENSEMBLE.get_or_init(|| {
        let tick = u32::try_from(params().tick.as_millis()).unwrap_or(u32::MAX);
        let ensemble = PartitionedEnsemble::start(NODES, partition_config(tick))
            .unwrap_or_else(|e| panic!("a partitionable 3-node ensemble: {e}"));
        StdMutex::new(ensemble)
    });
    cell.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which servers each client may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Each client only the server on its side of the cut.
    Zone,
    /// Every server.
    All,
}

/// What one trial saw.
struct Verdict {
    /// When the holder stopped trusting its hold, and why.
    holder_end: Instant,
    reason: LostReason,
    /// When the contender was granted.
    granted: Instant,
    cut: Instant,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "holder ended at +{:?} ({}), contender granted at +{:?}",
            self.holder_end - self.cut,
            self.reason,
            self.granted - self.cut
        )
    }
}

/// A session through `cs`, retried for up to 20 s (30 ticks if longer): right after a cut
/// or a heal the servers may still be electing a leader or syncing, and turn clients away.
async fn client(cs: &str) -> Client {
    let started = Instant::now();
    loop {
        let opening = Client::builder()
            .with_server_tick(params().tick)
            .with_session_timeout(params().session_timeout)
            .connect(cs)
            .await;
        match opening {
            Ok(c) => return c,
            Err(e) if started.elapsed() > Duration::from_secs(20).max(params().tick * 30) => {
                panic!("connect to {cs}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The node whose `cons` lists `session`, if any.
fn server_of(ensemble: &PartitionedEnsemble, session: i64) -> Option<usize> {
    let needle = format!("sid=0x{session:x}");
    (0..NODES).find(|&i| {
        four_letter_word(ensemble.node_addr(i), "cons").is_ok_and(|out| out.contains(&needle))
    })
}

/// A client that talks to `node`: the zone variant reaches only it; the other one is given
/// every server and connects again until its shuffled host list lands there.
async fn client_on(ensemble_cs: (&str, &str), node: usize, reach: Reach) -> Client {
    let (all, only) = ensemble_cs;
    if reach == Reach::Zone {
        return client(only).await;
    }
    for _ in 0..40 {
        let c = client(all).await;
        let session = c.session_id();
        let on = block_in_place(|| server_of(&ensemble(), session));
        if on == Some(node) {
            return c;
        }
        c.close().await.ok();
    }
    panic!("no session landed on node {node} in 40 tries");
}

/// Resolves once the holder's lease rests on a request sent well after `cut`: later than
/// any server cut off could still vouch for (a leader cut off steps down within 6.5 ticks
/// when syncLimit is 5), so the session reached the quorum's side; panics if that takes
/// more than twice [`Params::window`] (a loss or a grant come sooner).
async fn survived(holder: &Client, cut: Instant) {
    let limit = cut + params().window() * 2;
    let beyond = cut + params().tick * 7;
    while Instant::now() < limit {
        let anchored = holder
            .lease_deadline()
            .and_then(|d| d.checked_sub(params().session_timeout));
        if anchored.is_some_and(|sent| sent > beyond) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "neither lost, granted nor vouched for after the cut within {:?}",
        params().window() * 2
    );
}

async fn trial(scenario: Scenario, reach: Reach, seed: u64) -> Verdict {
    let mut rng = SplitMix64(seed);
    let (leader, victim, quorum_side, all) = block_in_place(|| {
        let e = ensemble();
        e.heal();
        let leader = e
            .wait_healed(HEAL_LIMIT)
            .unwrap_or_else(|err| panic!("{err}"));
        let followers: Vec<usize> = (0..NODES).filter(|&i| i != leader).collect();
        let follower = followers[usize::try_from(rng.below(2)).unwrap_or(0)];
        let (victim, quorum_side) = if scenario.holder_on_leader() {
            (leader, follower)
        } else {
            (follower, leader)
        };
        (leader, victim, quorum_side, e.connect_string())
    });
    let (victim_cs, quorum_cs) = block_in_place(|| {
        let e = ensemble();
        (
            e.node_connect_string(victim),
            e.node_connect_string(quorum_side),
        )
    });
    let path = format!("/partition/{scenario:?}-{reach:?}-{seed:x}");
    let holder = client_on((&all, &victim_cs), victim, reach).await;
    let guard = Mutex::new(holder.clone(), path.clone())
        .lock()
        .await
        .unwrap_or_else(|e| panic!("{scenario:?}: the holder's lock: {e}"));
    let lost = guard.lost();
    let watch = tokio::spawn(async move {
        let reason = lost.await;
        (Instant::now(), reason)
    });
    tokio::time::sleep(rng.millis(0, 1500)).await;
    let cut = Instant::now();
    block_in_place(|| {
        let e = ensemble();
        scenario.apply(&e, victim, leader);
    });
    let contender_client = client_on((&all, &quorum_cs), quorum_side, reach).await;
    let contender = Mutex::new(contender_client.clone(), path.clone());
    let grant = tokio::spawn(async move {
        let g = contender.lock().await;
        (Instant::now(), g)
    });
    let mut watch = watch;
    let mut grant = grant;
    let verdict = tokio::select! {
        lost = &mut watch => {
            let (holder_end, reason) = lost.unwrap_or_else(|e| panic!("{e}"));
            // As a user would: a lost hold is let go. If the session lived on (its lease
            // lapsed first, as it should when the server took long to notice), this deletes
            // the node; otherwise the leader's expiry did.
            drop(guard);
            let (granted, g) = tokio::time::timeout(params().window(), &mut grant)
                .await
                .unwrap_or_else(|_| panic!("{scenario:?}/{reach:?}: never granted after the loss"))
                .unwrap_or_else(|e| panic!("{e}"));
            let g = g.unwrap_or_else(|e| panic!("the contender's lock: {e}"));
            g.release().await.ok();
            Verdict { holder_end, reason, granted, cut }
        }
        got = &mut grant => {
            drop(guard);
            let (granted, g) = got.unwrap_or_else(|e| panic!("{e}"));
            g.unwrap_or_else(|e| panic!("the contender's lock: {e}")).release().await.ok();
            // Granted while the holder had not heard lost(): the overlap this test exists
            // to catch. Its lost() (if ever) comes later.
            let (holder_end, reason) = tokio::time::timeout(params().window(), &mut watch)
                .await
                .map_or((Instant::now(), LostReason::Released), |r| {
                    r.unwrap_or_else(|e| panic!("{e}"))
                });
            Verdict { holder_end, reason, granted, cut }
        }
        () = survived(&holder, cut) => {
            // The leader vouched for a request the holder sent after the cut, through a
            // server of the quorum's side: its session lives, the hold is still good, and the
            // contender waits for its release.
            assert!(guard.is_held(), "{scenario:?}/{reach:?}: the session moved, the hold went");
            let holder_end = Instant::now();
            guard.release().await.unwrap_or_else(|e| panic!("release: {e}"));
            let (granted, g) = tokio::time::timeout(params().window(), &mut grant)
                .await
                .unwrap_or_else(|_| panic!("{scenario:?}/{reach:?}: never granted after release"))
                .unwrap_or_else(|e| panic!("{e}"));
            g.unwrap_or_else(|e| panic!("the contender's lock: {e}")).release().await.ok();
            block_in_place(|| ensemble().heal());
            holder.close().await.ok();
            contender_client.close().await.ok();
            return Verdict { holder_end, reason: LostReason::Released, granted, cut };
        }
    };
    block_in_place(|| ensemble().heal());
    holder.close().await.ok();
    contender_client.close().await.ok();
    verdict
}

/// Whether a session timeout too short for the tick is refused before any node is made,
/// with the figures (`LockError::LeaseTooShort`); panics if the refusal and the client's own
/// figures disagree.
async fn refused_at_start(scenario: Scenario) -> bool {
    let all = block_in_place(|| ensemble().connect_string());
    let probe = client(&all).await;
    let t = probe
        .session_timeout()
        .unwrap_or_else(|| panic!("no session timeout"));
    let staleness = probe
        .lease_staleness()
        .unwrap_or_else(|| panic!("no staleness"));
    let fits = staleness + lease_margin(t) < t;
    let tried = Mutex::new(probe.clone(), format!("/partition/probe-{scenario:?}"))
        .try_lock()
        .await;
    probe.close().await.ok();
    match tried {
        Err(e @ LockError::LeaseTooShort { .. }) if !fits => {
            println!("{scenario:?}: T = {t:?} refused at start: {e}");
            true
        }
        Err(e) => panic!("{scenario:?}: the probe's lock: {e}"),
        Ok(_) if !fits => panic!("{scenario:?}: T = {t:?} accepted though it cannot be kept"),
        Ok(_) => false,
    }
}

async fn run(scenario: Scenario) {
    // Scenarios partition the one ensemble: one at a time.
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = TURN.lock().await;
    if refused_at_start(scenario).await {
        return;
    }
    let (mut margins, mut survived) = (Vec::new(), 0);
    for reach in [Reach::Zone, Reach::All] {
        for n in 0..params().trials {
            let seed = 0x5eed_2400 + n;
            let v = trial(scenario, reach, seed).await;
            println!("{scenario:?} {reach:?} seed {seed:#x}: {v}");
            assert!(
                v.granted > v.holder_end,
                "{scenario:?}/{reach:?} seed {seed:#x}: granted while the holder trusted its \
                 hold: {v}"
            );
            if v.reason == LostReason::Released {
                survived += 1;
            } else {
                margins.push(v.granted - v.holder_end);
            }
        }
    }
    margins.sort();
    println!(
        "{scenario:?}: {} trials; {survived} holders kept their session (released, then \
         granted); lost() before the grant: margin min {:?} median {:?} over {}",
        2 * params().trials,
        margins.first(),
        margins.get(margins.len() / 2),
        margins.len()
    );
    assert!(
        !margins.is_empty(),
        "{scenario:?}: the zone partition always costs the hold"
    );
    block_in_place(|| {
        let e = ensemble();
        e.heal();
        e.wait_healed(HEAL_LIMIT)
            .unwrap_or_else(|err| panic!("{err}"));
    });
}

scenario_tests! {
    run;
    m28a_follower_isolated_blackhole => Scenario::FollowerBlackhole;
    m28b_follower_isolated_reset => Scenario::FollowerReset;
    m28c_leader_isolated => Scenario::LeaderIsolated;
    m28d_bridge => Scenario::Bridge;
    m28e_one_way_from_the_leader => Scenario::OneWayFromLeader;
}

/// docs/lease.md's healthy-ensemble control, a command of its own (not in `make test`):
/// three holders, one on each server, each behind a proxy that counts what it sends, hold a
/// lock for `ZKWIRE_CONTROL_MINUTES` (default 30) on the healthy ensemble. No `lost()` may
/// fire. Prints the syncs and pings each sent per renewal period (ping interval) and the
/// least trust left seen (sampled every 100 ms).
///
/// `cargo test --release -p zkwire-recipes --test partition -- --ignored healthy_control
/// --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a 30-minute control run: a command of its own (docs/lease.md)"]
async fn healthy_control() {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = TURN.lock().await;
    let minutes: u64 = std::env::var("ZKWIRE_CONTROL_MINUTES")
        .ok()
        .map_or(30, |v| v.parse().unwrap_or_else(|e| panic!("{v}: {e}")));
    let span = Duration::from_secs(60 * minutes);
    let servers: Vec<_> = block_in_place(|| {
        let e = ensemble();
        e.heal();
        e.wait_healed(HEAL_LIMIT)
            .unwrap_or_else(|err| panic!("{err}"));
        (0..NODES).map(|i| e.node_addr(i)).collect()
    });
    let mut holders = Vec::new();
    for (i, addr) in servers.into_iter().enumerate() {
        let proxy = zkwire_testing::proxy::FaultProxy::start(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let c = client(&proxy.connect_string()).await;
        let guard = Mutex::new(c.clone(), format!("/control/{i}"))
            .lock()
            .await
            .unwrap_or_else(|e| panic!("holder {i}: {e}"));
        let lost = tokio::spawn(guard.lost());
        holders.push((proxy, c, guard, lost));
    }
    let started = Instant::now();
    let mut least = Duration::MAX;
    while started.elapsed() < span {
        tokio::time::sleep(Duration::from_millis(100)).await;
        for (i, (_, _, guard, lost)) in holders.iter().enumerate() {
            assert!(
                !lost.is_finished(),
                "holder {i} heard lost() on a healthy ensemble"
            );
            let left = guard.trusted_until().map_or(Duration::ZERO, |u| {
                u.saturating_duration_since(Instant::now())
            });
            least = least.min(left);
        }
    }
    let t = params().session_timeout;
    let elapsed = started.elapsed();
    for (i, (proxy, c, guard, _)) in holders.into_iter().enumerate() {
        let syncs = proxy.requests_seen(zkwire::proto::OpCode::Sync);
        let pings = proxy.requests_seen(zkwire::proto::OpCode::Ping);
        let interval = (t.as_secs_f64() * 2.0 / 3.0 / 2.0).min(10.0);
        let periods = elapsed.as_secs_f64() / interval;
        println!(
            "holder {i}: {elapsed:?} held; {syncs} syncs and {pings} pings: {:.2} requests per \
             renewal period ({interval:.3} s)",
            (syncs + pings) as f64 / periods
        );
        assert!(guard.is_held(), "holder {i}");
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("holder {i}: {e}"));
        c.close().await.ok();
    }
    println!(
        "0 false lost() in {elapsed:?} (3 holders); least trust left seen: {least:?} of T = {t:?}"
    );
}
