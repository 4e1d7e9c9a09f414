//! Leader election against a real server: [`LeaderLatch`] (alone, and with Apache Curator
//! 5.4.0's `LeaderLatch` on one path) and [`LeaderElection`] (with Curator's
//! `LeaderSelector`, and under the one-way fault of the lease tests).
//!
//! The interop runs use the referee of the lock interop tests: every participant reports
//! `ENTER` once it leads and `EXIT` before it lets go (Curator over TCP, zkwire in process),
//! and the referee flags any two leaders inside at once. `recipes/interop/CuratorLeader.java`
//! is compiled here with `javac`; missing Java or Curator fails the tests with what to
//! install.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use support::referee::{Kind, Referee, Tally};
use support::CuratorJvm;
use tokio::task::JoinSet;
use tokio::time::Instant;
use zkwire::{Client, SessionState};
use zkwire_recipes::{LeaderElection, LeaderLatch, LockError, LostReason};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{
    connect_renewing, connect_with_timeout, fresh_chroot, kill_client_session,
};

/// The interop runs share two cores with the server and a JVM: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PATH: &str = "/leader";
const STEP: Duration = Duration::from_secs(20);

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {STEP:?}: {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_in_order_and_the_next_takes_over_on_close() {
    let cs = fresh_chroot("latch_basics").await;
    let mut latches = Vec::new();
    for id in ["a", "b", "c"] {
        let latch = LeaderLatch::new(support::connect(&cs).await, PATH, id);
        latch.start();
        // Joined in this order: wait for each node before the next starts.
        within("joined", async {
            while latch.participants().await.unwrap().len() < latches.len() + 1 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        latches.push(latch);
    }
    let first = within("a leads", latches[0].await_leadership())
        .await
        .unwrap();
    assert!(latches[0].has_leadership());
    assert!(!latches[1].has_leadership() && !latches[2].has_leadership());
    let participants = latches[2].participants().await.unwrap();
    let ids: Vec<_> = participants.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(
        participants.iter().map(|p| p.is_leader).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert_eq!(participants[0].node, first.path());
    assert!(
        first.path().contains("/_c_") && first.path().contains("-latch-"),
        "Curator's layout: {}",
        first.path()
    );
    assert_eq!(latches[1].leader().await.unwrap().unwrap().id, "a");

    let lost = first.lost();
    latches[0].close().await.unwrap();
    assert_eq!(within("lost on close", lost).await, LostReason::Released);
    let second = within("b leads", latches[1].await_leadership())
        .await
        .unwrap();
    assert!(second.fencing_token() > first.fencing_token());
    assert!(!latches[0].has_leadership());
    assert!(matches!(
        latches[0].await_leadership().await,
        Err(LockError::Closed)
    ));
    for latch in &latches[1..] {
        latch.close().await.unwrap();
    }
    let observer = support::connect(&cs).await;
    assert!(observer.get_children(PATH).await.unwrap().is_empty());
}

/// An administrator deletes the leader's node: its leadership is lost, the next participant
/// leads, and the latch queues again by itself with a new node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_ends_the_leadership_and_the_latch_queues_again() {
    let cs = fresh_chroot("latch_deleted").await;
    let a = LeaderLatch::new(support::connect(&cs).await, PATH, "a");
    a.start();
    let leadership = within("a leads", a.await_leadership()).await.unwrap();
    let b = LeaderLatch::new(support::connect(&cs).await, PATH, "b");
    b.start();
    within("b queued", async {
        while b.participants().await.unwrap().len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let admin = support::connect(&cs).await;
    admin.delete(leadership.path(), None).await.unwrap();
    assert_eq!(
        within("lost", leadership.lost()).await,
        LostReason::NodeDeleted
    );
    within("b leads", b.await_leadership()).await.unwrap();
    let ids = within("a queued again", async {
        loop {
            let ids: Vec<_> = b
                .participants()
                .await
                .unwrap()
                .into_iter()
                .map(|p| p.id)
                .collect();
            if ids.len() == 2 {
                return ids;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(ids, ["b", "a"], "a is back, behind b");
    b.close().await.unwrap();
    within("a leads again", a.await_leadership()).await.unwrap();
    a.close().await.unwrap();
}

/// The leader's session is killed on a client that renews sessions: the leadership is lost,
/// and the latch joins again on the new session and leads once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latch_rejoins_on_a_renewed_session() {
    let cs = fresh_chroot("latch_renewal").await;
    let client = connect_renewing(&cs, Duration::from_secs(4)).await;
    let latch = LeaderLatch::new(client.clone(), PATH, "a");
    latch.start();
    let leadership = within("leads", latch.await_leadership()).await.unwrap();
    let old = client.session_id();
    kill_client_session(&client).await.unwrap();
    let reason = within("lost", leadership.lost()).await;
    assert!(
        matches!(
            reason,
            LostReason::SessionEnded(SessionState::Expired) | LostReason::NodeDeleted
        ),
        "{reason:?}"
    );
    let again = within("leads again", latch.await_leadership())
        .await
        .unwrap();
    assert_ne!(client.session_id(), old);
    let (_, stat) = client.get_data(again.path()).await.unwrap();
    assert_eq!(stat.ephemeral_owner, client.session_id());
    latch.close().await.unwrap();
    assert!(client.get_children(PATH).await.unwrap().is_empty());
}

/// The Curator JVM of `CuratorLeader.java`, started and let go.
async fn curator(
    cs: &str,
    referee: &Referee,
    recipe: &str,
    threads: usize,
    cycles: usize,
) -> CuratorJvm {
    let program = ("CuratorLeader.java", "CuratorLeader");
    let mut jvm =
        CuratorJvm::contenders(program, cs, referee, (recipe, PATH), (threads, cycles), &[]).await;
    jvm.go();
    curator_queued(cs).await;
    jvm
}

/// Waits until one of the Curator program's participants has a node in the election's
/// queue, so that zkwire's participants join a queue the two sides share. On a loaded
/// machine the JVM can take seconds after `GO` to load and start its recipe; in that time
/// zkwire's participants could run all their terms alone, and the sides would not
/// interleave (a CI run saw one side switch in 320 terms).
async fn curator_queued(cs: &str) {
    let observer = support::connect(cs).await;
    within("a Curator participant queues", async {
        while observer.get_children(PATH).await.map_or(0, |c| c.len()) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    observer.close().await.unwrap();
}

/// Awaits zkwire's participants (`tasks`) and the Curator program, then prints and checks
/// the referee's tally of the run `name` begun at `started`: no violation, every Curator term
/// seen, [`CYCLES`] terms per zkwire participant. Returns the tally and the terms of Curator
/// and of zkwire.
async fn terms(
    name: &str,
    mut tasks: JoinSet<()>,
    curator: CuratorJvm,
    referee: &Referee,
    started: Instant,
) -> (Tally, usize, usize) {
    while let Some(done) = within("zkwire participants", tasks.join_next()).await {
        done.unwrap();
    }
    let curator_terms = curator.finish().await;
    let tally = referee.take();
    let (peer, ours) = (tally.acquisitions[0][0], tally.acquisitions[1][0]);
    println!(
        "{name} interop: {} terms in {:?} (Curator {peer}, zkwire {ours}), side switches {}, \
         violations {}",
        peer + ours,
        started.elapsed(),
        tally.side_switches,
        tally.violations.len()
    );
    assert!(tally.violations.is_empty(), "{:?}", tally.violations);
    assert_eq!(
        peer, curator_terms,
        "every Curator term reached the referee"
    );
    assert_eq!(ours, THREADS * CYCLES);
    (tally, peer, ours)
}

/// What a zkwire participant of the interop run shares with the killer.
#[derive(Default)]
struct Gate {
    /// The killer is about to kill this participant's session: do not enter.
    paused: bool,
    /// Between ENTER and EXIT.
    inside: bool,
}

const THREADS: usize = 4;
const CYCLES: usize = 40;
const KILLS: usize = 12;

/// zkwire and Curator `LeaderLatch`es on one path: 4 Curator threads and 4 zkwire tasks, 40
/// terms each, every term a new latch (join, lead, close); meanwhile 12 sessions of zkwire
/// participants are killed for real, on clients that renew their sessions. The referee
/// must see at most one leader at every instant, over ≥ 200 leadership changes.
///
/// A session killed by a third party ends its leadership before its holder can know (the
/// server deletes the node at once), so the killer only kills a participant it has paused
/// outside its term, and a participant confirms its node with the server (`exists`, owned
/// by the current session) before entering: a leadership of a killed session is never
/// acted on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_interop_with_curator_under_session_kills() {
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("latch_interop").await;
    let referee = Arc::new(Referee::start(0));
    let curator = curator(&cs, &referee, "latch", THREADS, CYCLES).await;
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    let mut gates = Vec::new();
    let stale = Arc::new(AtomicUsize::new(0));
    for t in 0..THREADS {
        let client = connect_renewing(&cs, Duration::from_secs(10)).await;
        let gate = Arc::new(StdMutex::new(Gate::default()));
        gates.push((client.clone(), Arc::clone(&gate)));
        let (referee, stale) = (Arc::clone(&referee), Arc::clone(&stale));
        tasks.spawn(async move {
            let mut terms = 0;
            while terms < CYCLES {
                let latch = LeaderLatch::new(client.clone(), PATH, format!("Z{t}"));
                latch.start();
                let leadership = latch.await_leadership().await.unwrap();
                let enter = {
                    let mut gate = gate.lock().unwrap();
                    let enter = !gate.paused;
                    gate.inside = enter;
                    enter
                };
                let ours = match client.exists(leadership.path()).await {
                    Ok(Some(stat)) => stat.ephemeral_owner == client.session_id(),
                    _ => false,
                };
                if enter && ours && leadership.is_held() {
                    referee.enter(Kind::Mutex);
                    support::hold(terms + 1).await;
                    referee.exit(Kind::Mutex);
                    terms += 1;
                } else if enter {
                    stale.fetch_add(1, Ordering::Relaxed);
                }
                gate.lock().unwrap().inside = false;
                latch.close().await.unwrap();
                if !enter {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
    }

    // The killer: pause a participant outside its term, kill its session, wait for the
    // renewal, let it go on.
    let mut rng = SplitMix64(0x6b11);
    let mut kills = 0;
    while kills < KILLS && !tasks.is_empty() && started.elapsed() < Duration::from_secs(150) {
        tokio::time::sleep(rng.millis(100, 400)).await;
        let (client, gate) = &gates[rng.below(THREADS as u64) as usize];
        let paused = {
            let mut gate = gate.lock().unwrap();
            gate.paused = !gate.inside;
            gate.paused
        };
        if !paused {
            continue;
        }
        let old = client.session_id();
        kill_client_session(client).await.unwrap();
        within("renewed", async {
            while client.session_id() == old || client.state() != SessionState::Connected {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        gate.lock().unwrap().paused = false;
        kills += 1;
    }
    let stale = stale.load(Ordering::Relaxed);
    println!("latch interop: {kills} sessions killed, {stale} stale leaderships refused");
    let (tally, peer, ours) = terms("latch", tasks, curator, &referee, started).await;
    assert!(peer + ours >= 200, "≥ 200 leadership changes");
    assert!(
        tally.side_switches >= 50,
        "the sides interleaved: {} switches, the last term by {:?}",
        tally.side_switches,
        tally.last_side
    );
    assert_eq!(kills, KILLS, "every planned kill happened");
    let observer = support::connect(&cs).await;
    assert!(observer.get_children(PATH).await.unwrap().is_empty());
}

/// zkwire [`LeaderElection`]s and Curator `LeaderSelector`s (autoRequeue) on one path: 4
/// each, 40 terms each; one leader at a time, by the referee.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_interop_with_curator_leader_selector() {
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("selector_interop").await;
    let referee = Arc::new(Referee::start(0));
    let curator = curator(&cs, &referee, "selector", THREADS, CYCLES).await;
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for t in 0..THREADS {
        let election = LeaderElection::new(support::connect(&cs).await, PATH, format!("Z{t}"));
        let referee = Arc::clone(&referee);
        tasks.spawn(async move {
            for term in 0..CYCLES {
                let referee = Arc::clone(&referee);
                let outcome = election
                    .run_once(|leadership| async move {
                        assert!(leadership.is_held());
                        referee.enter(Kind::Mutex);
                        support::hold(term + 1).await;
                        referee.exit(Kind::Mutex);
                    })
                    .await
                    .unwrap();
                outcome.unwrap();
            }
        });
    }
    let (tally, _, _) = terms("selector", tasks, curator, &referee, started).await;
    assert!(
        tally.side_switches >= 20,
        "the sides interleaved: {} switches, the last term by {:?}",
        tally.side_switches,
        tally.last_side
    );
}

/// One run of the cancellation test: what happened, on one clock.
#[derive(Debug)]
struct Cancelled {
    /// When the faulted leader's closure was dropped.
    dropped: Instant,
    /// When the other participant's closure started.
    started: Instant,
    reason: LostReason,
}

/// Records when a closure's future is dropped.
struct OnDrop(Option<tokio::sync::oneshot::Sender<Instant>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(Instant::now());
        }
    }
}

/// The session timeout of the faulted leader.
const T: Duration = Duration::from_secs(4);

async fn cancellation_run(seed: u64) -> Cancelled {
    let name = format!("election_cut_{seed}");
    let direct = fresh_chroot(&name).await;
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let via = format!("{}/{name}", proxy.connect_string());
    let a = within("connect a", connect_with_timeout(&via, T)).await;
    let b = within("connect b", connect_with_timeout(&direct, T)).await;

    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
    let (leading_tx, leading_rx) = tokio::sync::oneshot::channel();
    let leader = tokio::spawn({
        let election = LeaderElection::new(a.clone(), PATH, "a");
        async move {
            election
                .run_once(|_leadership| async move {
                    let _on_drop = OnDrop(Some(dropped_tx));
                    let _ = leading_tx.send(());
                    std::future::pending::<()>().await;
                })
                .await
        }
    });
    within("a leads", leading_rx).await.unwrap();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let next = tokio::spawn({
        let election = LeaderElection::new(b.clone(), PATH, "b");
        async move {
            election
                .run_once(|_leadership| async move {
                    let _ = started_tx.send(Instant::now());
                })
                .await
        }
    });
    let mut rng = SplitMix64(seed);
    tokio::time::sleep(rng.millis(300, 1800)).await;
    // The one-way fault: requests (pings included) from a are dropped or held, while the
    // server's replies and notifications still reach it.
    if seed % 2 == 0 {
        proxy.drop_client_to_server(true);
    } else {
        proxy.hold_client_to_server(true);
    }
    let started = within("b leads", started_rx).await.unwrap();
    let dropped = within("a's closure dropped", dropped_rx).await.unwrap();
    let outcome = within("a's term over", leader).await.unwrap().unwrap();
    let reason = outcome.expect_err("a's closure never ends by itself");
    within("b's term over", next)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    proxy.heal();
    let _ = tokio::time::timeout(Duration::from_secs(5), a.close()).await;
    let _ = b.close().await;
    Cancelled {
        dropped,
        started,
        reason,
    }
}

/// The leader's requests are cut (dropped or held) while the server's bytes still reach it:
/// in each of 20 runs its closure is cancelled before the next leader's closure starts, and
/// by the lease rule (not by hearing of the expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_closure_is_cancelled_before_the_next_leader_starts_under_a_one_way_cut() {
    const RUNS: u64 = 20;
    const PARALLEL: u64 = 4;
    tokio::task::block_in_place(shared_server);
    let mut margins = Vec::new();
    let mut failures = Vec::new();
    for batch in 0..RUNS / PARALLEL {
        let mut runs = JoinSet::new();
        for i in 0..PARALLEL {
            let seed = batch * PARALLEL + i + 1;
            runs.spawn(async move { (seed, cancellation_run(seed).await) });
        }
        while let Some(run) = runs.join_next().await {
            let (seed, run) = run.unwrap();
            let margin = run.started.saturating_duration_since(run.dropped);
            if run.dropped >= run.started {
                failures.push(format!(
                    "seed {seed}: cancelled after the next leader started"
                ));
            }
            if !matches!(run.reason, LostReason::Unacknowledged(_)) {
                failures.push(format!("seed {seed}: lost by {:?}", run.reason));
            }
            margins.push(margin.as_millis());
        }
    }
    margins.sort_unstable();
    println!(
        "election one-way cut: {RUNS} runs, cancelled before the next leader by \
         min {} ms, median {} ms, max {} ms",
        margins[0],
        margins[margins.len() / 2],
        margins[margins.len() - 1]
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `try_lead` leads at once when no one else participates, and otherwise leaves no node; the
/// latch it started queues again after losing the leadership, as a started one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lead_joins_only_to_lead() {
    let cs = fresh_chroot("latch_try_lead").await;
    let (a, b) = (
        Client::connect(&cs).await.unwrap(),
        Client::connect(&cs).await.unwrap(),
    );
    let first = LeaderLatch::new(a.clone(), PATH, "first");
    let leadership = first.try_lead().await.unwrap().expect("no one else: leads");
    assert!(first.has_leadership());
    let second = LeaderLatch::new(b.clone(), PATH, "second");
    assert!(second.try_lead().await.unwrap().is_none());
    assert_eq!(
        a.get_children(PATH).await.unwrap().len(),
        1,
        "no node of second's"
    );
    assert!(matches!(
        second.await_leadership().await,
        Err(LockError::Closed)
    ));
    // A deleted node: leadership lost, and the latch queues again (and leads again).
    a.delete(leadership.path(), None).await.unwrap();
    within("lost", leadership.lost()).await;
    let again = within("leads again", first.await_leadership())
        .await
        .unwrap();
    assert_ne!(again.path(), leadership.path());
    first.close().await.unwrap();
    assert!(a.get_children(PATH).await.unwrap().is_empty());
}

/// Waits until `path` has no children, as seen by `client`.
async fn until_empty(client: &Client, what: &str) {
    within(what, async {
        while !client.get_children(PATH).await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// A term cancelled (its `run_once` future dropped) while work it spawned keeps a clone of
/// the leadership still ends: that clone's `lost()` resolves and the node goes, so the next
/// participant leads. (The clone once kept the node, and us leader, for the session's life.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_term_ends_though_spawned_work_keeps_the_leadership() {
    let cs = fresh_chroot("election_cancel").await;
    let (a, b) = (support::connect(&cs).await, support::connect(&cs).await);
    let election = LeaderElection::new(a.clone(), PATH, "a");
    let (spawned_tx, spawned_rx) = tokio::sync::oneshot::channel();
    let term = election.run_once(|leadership| async move {
        let watcher = tokio::spawn(async move { leadership.lost().await });
        let _ = spawned_tx.send(watcher);
        std::future::pending::<()>().await;
    });
    // The term is cancelled once its work has started.
    let watcher = {
        tokio::pin!(term);
        tokio::select! {
            _ = &mut term => unreachable!("the term never ends by itself"),
            watcher = spawned_rx => watcher.unwrap(),
        }
    };
    let seen = within("the clone sees the end", watcher).await.unwrap();
    assert_eq!(seen, LostReason::Released);
    let next = LeaderElection::new(b.clone(), PATH, "b");
    let led = within("b leads", next.run_once(|_| async {}))
        .await
        .unwrap();
    assert!(led.is_ok(), "{led:?}");
    until_empty(&a, "nothing left").await;
}

/// Dropping every handle of a started latch closes it: its node goes and the next
/// participant leads. (The task once kept the participant, and its leadership, for the
/// session's life.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_latch_closes_it() {
    let cs = fresh_chroot("latch_drop").await;
    let (a, b) = (support::connect(&cs).await, support::connect(&cs).await);
    let first = LeaderLatch::new(a.clone(), PATH, "first");
    first.start();
    let leadership = within("first leads", first.await_leadership())
        .await
        .unwrap();
    let second = LeaderLatch::new(b.clone(), PATH, "second");
    second.start();
    let clone = first.clone();
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(leadership.is_held(), "a clone keeps the latch");
    drop(clone);
    assert_eq!(
        within("withdrawn", leadership.lost()).await,
        LostReason::Released
    );
    within("second leads", second.await_leadership())
        .await
        .unwrap();
    second.close().await.unwrap();
    until_empty(&a, "nothing left").await;
}

/// A `close` dropped before the participant task has ended still closes the latch:
/// `await_leadership` then says `Closed` (it once waited for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_cancelled_midway_still_ends_the_wait_for_leadership() {
    let cs = fresh_chroot("latch_close_cancel").await;
    let a = support::connect(&cs).await;
    let latch = LeaderLatch::new(a.clone(), PATH, "only");
    latch.start();
    within("leads", latch.await_leadership()).await.unwrap();
    // Polled once: the close is signalled, then the wait for the task is dropped. (A zero
    // timeout is no way to poll once: its timer may fire a tick later, after the close.)
    let polled_once = tokio::select! {
        biased;
        closed = latch.close() => Some(closed),
        () = std::future::ready(()) => None,
    };
    assert!(polled_once.is_none(), "the task needs a round trip to end");
    assert!(matches!(
        within("closed", latch.await_leadership()).await,
        Err(LockError::Closed)
    ));
    until_empty(&a, "nothing left").await;
}
