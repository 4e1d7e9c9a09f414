//! The semaphore against a real ZooKeeper: Curator's InterProcessSemaphoreV2 layout, limits
//! fixed or from a SharedCount node (docs/faults.md #22), session loss (docs/faults.md #23),
//! timeouts, cancellation and lost leases. Test names cite the scenario numbers of
//! docs/faults.md; each test has its own chroot.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::chaos::{after_acquire_error, connect_retrying, Rng};
use support::{close_all, fresh_clients, join_all};
use zkwire::{Client, CreateOptions, SessionState};
use zkwire_recipes::{
    ForeignChildPolicy, LockError, LockOptions, LostReason, Semaphore, SemaphoreLimit,
};
use zkwire_testing::server::ZkServer;
use zkwire_testing::support::{
    connect_with_timeout, kill_session, sorted_children, wait_for_children,
};

const T: Duration = Duration::from_secs(2);

async fn connect(cs: &str) -> Client {
    connect_with_timeout(cs, T).await
}

/// Curator's layout: `P/locks/` mutex nodes and `P/leases/_c_<uuid>-lease-<seq>`; at most
/// `max` leases, counting the waiter's own node; the timed-out waiter leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_and_fixed_limit() {
    let (_, [a, b]) = fresh_clients("recipes_sem_layout", T).await;
    let sa = Semaphore::new(a.clone(), "/s", SemaphoreLimit::Fixed(2));
    let sb = Semaphore::new(b.clone(), "/s", SemaphoreLimit::Fixed(2));
    let two = sa.acquire(2).await.unwrap();
    assert_eq!(two.len(), 2);
    for lease in &two {
        let name = lease.path().strip_prefix("/s/leases/").unwrap();
        assert!(
            name.starts_with("_c_") && name.len() == 40 + "lease-".len() + 10,
            "{name}"
        );
        assert!(name[40..].starts_with("lease-"), "{name}");
        assert!(lease.is_held());
        assert!(lease.fencing_token() > 0);
    }
    assert!(two[0].fencing_token() < two[1].fencing_token());
    assert_eq!(sorted_children(&a, "/s").await, ["leases", "locks"]);
    assert!(
        sorted_children(&a, "/s/locks").await.is_empty(),
        "the locks mutex is released after an acquire"
    );

    let started = Instant::now();
    let r = sb.acquire_one_timeout(Duration::from_millis(300)).await;
    let took = started.elapsed();
    assert_eq!(r.err(), Some(LockError::Timeout));
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(900),
        "{took:?}"
    );
    assert_eq!(
        sorted_children(&a, "/s/leases").await.len(),
        2,
        "the waiter's lease node is gone"
    );
    assert!(
        sorted_children(&a, "/s/locks").await.is_empty(),
        "and its locks node"
    );
    assert_eq!(sb.lease_nodes().await.unwrap().len(), 2);

    // A waiter is granted as soon as a lease is returned.
    let waiter = tokio::spawn(async move { sb.acquire_one().await });
    while sorted_children(&a, "/s/leases").await.len() < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut two = two;
    two.pop().unwrap().release().await.unwrap();
    let lease = tokio::time::timeout(T, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(lease.path().starts_with("/s/leases/"));
    assert_eq!(sorted_children(&a, "/s/leases").await.len(), 2);
    lease.release().await.unwrap();
    drop(two);
    assert!(
        wait_for_children(&a, "/s/leases", 0).await.is_empty(),
        "dropped leases are removed"
    );
    assert_eq!(sa.max_leases().await.unwrap(), 2);
    assert!(sa.acquire(0).await.unwrap().is_empty());
}

/// More leases than the limit can never be granted: refused at once, nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_leases_refused() {
    let (_, [a]) = fresh_clients("recipes_sem_too_many", T).await;
    let s = Semaphore::new(a.clone(), "/s", SemaphoreLimit::Fixed(2));
    let started = Instant::now();
    assert_eq!(
        s.acquire(3).await.err(),
        Some(LockError::TooManyLeases {
            requested: 3,
            max: 2
        })
    );
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(a.exists("/s").await.unwrap(), None, "nothing created");
    let zero = Semaphore::new(a.clone(), "/s", SemaphoreLimit::Fixed(0));
    assert!(matches!(
        zero.acquire_one().await,
        Err(LockError::TooManyLeases {
            requested: 1,
            max: 0
        })
    ));
    // A count as large as the limit allows is not allocated up front (4 billion leases
    // would be hundreds of GB): the acquire takes leases one by one until its timeout, then
    // gives back what it had.
    let huge = Semaphore::new(a.clone(), "/h", SemaphoreLimit::Fixed(u32::MAX));
    let asked = usize::try_from(u32::MAX).unwrap();
    let r = huge
        .acquire_timeout(asked, Duration::from_millis(300))
        .await;
    assert!(matches!(r, Err(LockError::Timeout)), "{r:?}");
    let left = a.get_children("/h/leases").await.unwrap_or_default();
    assert!(left.is_empty(), "leases given back: {left:?}");
}

/// acquire(n) is all or nothing: on timeout the leases already obtained are given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_acquire_times_out_and_gives_back() {
    let (_, [a, b]) = fresh_clients("recipes_sem_partial", T).await;
    let held = Semaphore::new(a.clone(), "/s", SemaphoreLimit::Fixed(3))
        .acquire(2)
        .await
        .unwrap();
    let sb = Semaphore::new(b.clone(), "/s", SemaphoreLimit::Fixed(3));
    let started = Instant::now();
    let r = sb.acquire_timeout(2, Duration::from_millis(400)).await;
    let took = started.elapsed();
    assert_eq!(r.err(), Some(LockError::Timeout));
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1000),
        "{took:?}"
    );
    let left = sorted_children(&a, "/s/leases").await;
    assert_eq!(
        left.len(),
        2,
        "the first lease was given back, the waiting one deleted: {left:?}"
    );
    assert!(held
        .iter()
        .all(|l| left.iter().any(|c| l.path().ends_with(c.as_str()))));
    for lease in held {
        lease.release().await.unwrap();
    }
    let three = sb.acquire_timeout(3, T).await.unwrap();
    assert_eq!(three.len(), 3);
    drop(three);
    assert!(wait_for_children(&a, "/s/leases", 0).await.is_empty());
}

/// A limit kept in a Curator SharedCount node: read on every acquire and while waiting, so
/// an increase wakes a waiter; a decrease never revokes, a request above it fails; a
/// mismatched fixed limit, a malformed or missing node are errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_count_limit() {
    let (_, [a, b, admin]) = fresh_clients("recipes_sem_shared", T).await;
    let count = SemaphoreLimit::SharedCount("/config/max".into());
    let sa = Semaphore::new(a.clone(), "/s", count.clone());
    assert_eq!(
        sa.acquire_one().await.err(),
        Some(LockError::SharedCountMissing {
            path: "/config/max".into()
        })
    );
    admin
        .create("/config", b"", &CreateOptions::persistent())
        .await
        .unwrap();
    admin
        .create(
            "/config/max",
            &1_i32.to_be_bytes(),
            &CreateOptions::persistent(),
        )
        .await
        .unwrap();
    let first = sa.acquire_one().await.unwrap();
    let sb = Semaphore::new(b.clone(), "/s", count.clone());
    let waiter = tokio::spawn({
        let sb = sb.clone();
        async move { sb.acquire_one().await }
    });
    while sorted_children(&a, "/s/leases").await.len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished());
    let raised = Instant::now();
    admin
        .set_data("/config/max", &2_i32.to_be_bytes(), None)
        .await
        .unwrap();
    let second = tokio::time::timeout(T, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    println!("a raised count woke the waiter in {:?}", raised.elapsed());
    assert!(raised.elapsed() < Duration::from_millis(500));

    // Lowering the count revokes nothing; the next acquire waits.
    admin
        .set_data("/config/max", &1_i32.to_be_bytes(), None)
        .await
        .unwrap();
    assert!(first.is_held() && second.is_held());
    assert_eq!(
        sb.acquire_one_timeout(Duration::from_millis(200))
            .await
            .err(),
        Some(LockError::Timeout)
    );
    assert_eq!(
        sb.acquire(2).await.err(),
        Some(LockError::TooManyLeases {
            requested: 2,
            max: 1
        })
    );
    first.release().await.unwrap();
    second.release().await.unwrap();

    // A fixed limit checked against the node.
    let checked = |max| SemaphoreLimit::FixedChecked {
        max,
        shared_count: "/config/max".into(),
    };
    let r = Semaphore::new(a.clone(), "/s", checked(3))
        .acquire_one()
        .await;
    assert_eq!(
        r.err(),
        Some(LockError::LimitMismatch {
            configured: 3,
            shared: 1
        })
    );
    Semaphore::new(a.clone(), "/s", checked(1))
        .acquire_one()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    // Seeded when missing, as Curator's SharedCount does (container parents).
    let seeded = SemaphoreLimit::FixedChecked {
        max: 7,
        shared_count: "/other/config/max".into(),
    };
    assert_eq!(
        Semaphore::new(a.clone(), "/s2", seeded)
            .max_leases()
            .await
            .unwrap(),
        7
    );
    assert_eq!(
        &admin.get_data("/other/config/max").await.unwrap().0[..],
        &[0, 0, 0, 7]
    );

    // Not a SharedCount.
    for bad in [&b"2"[..], &[0, 0, 0, 0, 2][..], &[0x80, 0, 0, 0][..]] {
        admin.set_data("/config/max", bad, None).await.unwrap();
        let r = sb.acquire_one().await;
        assert_eq!(
            r.err(),
            Some(LockError::BadSharedCount {
                path: "/config/max".into(),
                data: bad.to_vec()
            })
        );
    }
    assert!(wait_for_children(&a, "/s/leases", 0).await.is_empty());
    assert!(sorted_children(&a, "/s/locks").await.is_empty());
}

/// Dropping a pending acquire (queued on the mutex, or waiting for capacity) removes every
/// node it created; a lease deleted externally reports lost(); a foreign child is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_lost_and_foreign() {
    let (_, [a, b, c]) = fresh_clients("recipes_sem_cancel", T).await;
    let held = Semaphore::new(a.clone(), "/s", SemaphoreLimit::Fixed(1))
        .acquire_one()
        .await
        .unwrap();
    let sb = Semaphore::new(b.clone(), "/s", SemaphoreLimit::Fixed(1));
    let sc = Semaphore::new(c.clone(), "/s", SemaphoreLimit::Fixed(1));
    // b waits for capacity holding the locks mutex; c queues on the mutex.
    let pending_b = tokio::spawn(async move { sb.acquire_one().await });
    while sorted_children(&a, "/s/leases").await.len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let pending_c = tokio::spawn(async move { sc.acquire_one().await });
    while sorted_children(&a, "/s/locks").await.len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pending_b.abort();
    pending_c.abort();
    assert_eq!(wait_for_children(&a, "/s/leases", 1).await.len(), 1);
    assert!(wait_for_children(&a, "/s/locks", 0).await.is_empty());
    for client in [&b, &c] {
        let deadline = Instant::now() + Duration::from_secs(2);
        while client.stats().watches > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(client.stats().watches, 0, "{:?}", client.stats());
    }

    let lost = held.lost();
    c.delete(held.path(), None).await.unwrap();
    assert_eq!(
        tokio::time::timeout(T, lost).await.unwrap(),
        LostReason::NodeDeleted
    );
    assert_eq!(
        held.release().await,
        Err(LockError::Lost(LostReason::NodeDeleted))
    );

    c.create("/s/leases/config", b"", &CreateOptions::ephemeral())
        .await
        .unwrap();
    let sb = Semaphore::new(b.clone(), "/s", SemaphoreLimit::Fixed(2));
    assert_eq!(
        sb.acquire_one().await.err(),
        Some(LockError::ForeignChild {
            name: "config".into()
        })
    );
    // Counted like Curator: the foreign child takes one of the two places.
    let options = LockOptions::new().with_foreign_children(ForeignChildPolicy::CountLikeCurator);
    let curator_like = Semaphore::with_options(b.clone(), "/s", SemaphoreLimit::Fixed(2), options);
    let one = curator_like.acquire_one().await.unwrap();
    assert_eq!(
        curator_like
            .acquire_one_timeout(Duration::from_millis(200))
            .await
            .err(),
        Some(LockError::Timeout)
    );
    one.release().await.unwrap();
    assert_eq!(sorted_children(&a, "/s/leases").await, ["config"]);
}

/// docs/faults.md #22: 10 clients × 100 loops, each acquiring a random number of leases (1..=8,
/// one in ten 1..=25) of a limit of 25 kept in a SharedCount node (FixedChecked: the first one
/// seeds it); the number of leases held at once never exceeds the limit and returns to 0; a
/// participant configured with another limit is rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m22_semaphore_limits() {
    const CLIENTS: usize = 10;
    const LOOPS: usize = 100;
    const LIMIT: u32 = 25;
    let (cs, clients) = fresh_clients::<CLIENTS>("recipes_m22", T).await;
    let limit = SemaphoreLimit::FixedChecked {
        max: LIMIT,
        shared_count: "/m22-max".into(),
    };
    let held = Arc::new(AtomicUsize::new(0));
    let max_held = Arc::new(AtomicUsize::new(0));
    let over = Arc::new(AtomicUsize::new(0));
    let leases_granted = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let sem = Semaphore::new(client.clone(), "/sem", limit.clone());
        let (held, max_held, over, leases_granted) = (
            held.clone(),
            max_held.clone(),
            over.clone(),
            leases_granted.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut rng =
                Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
            for _ in 0..LOOPS {
                // Mostly small requests, every tenth up to the whole limit.
                let upto = if rng.below(10) == 0 {
                    u64::from(LIMIT)
                } else {
                    8
                };
                let n = 1 + rng.below(upto) as usize;
                let leases = sem.acquire(n).await.unwrap();
                assert_eq!(leases.len(), n);
                let now = held.fetch_add(n, Ordering::SeqCst) + n;
                max_held.fetch_max(now, Ordering::SeqCst);
                if now > LIMIT as usize {
                    over.fetch_add(1, Ordering::SeqCst);
                }
                leases_granted.fetch_add(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(rng.below(3))).await;
                held.fetch_sub(n, Ordering::SeqCst);
                for lease in leases {
                    lease.release().await.unwrap();
                }
            }
        }));
    }
    // Meanwhile, a participant that disagrees on the limit is rejected.
    let odd = connect(&cs).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = Semaphore::new(
        odd.clone(),
        "/sem",
        SemaphoreLimit::FixedChecked {
            max: LIMIT + 1,
            shared_count: "/m22-max".into(),
        },
    )
    .acquire_one()
    .await;
    assert_eq!(
        r.err(),
        Some(LockError::LimitMismatch {
            configured: LIMIT + 1,
            shared: LIMIT
        })
    );
    join_all(tasks).await;
    let took = started.elapsed();
    let granted = leases_granted.load(Ordering::SeqCst);
    println!(
        "m22: {} acquires ({granted} leases) by {CLIENTS} clients in {took:?}; max held at once = {} (limit {LIMIT}); over the limit: {}",
        CLIENTS * LOOPS,
        max_held.load(Ordering::SeqCst),
        over.load(Ordering::SeqCst)
    );
    assert_eq!(
        over.load(Ordering::SeqCst),
        0,
        "more leases than the limit at once"
    );
    assert!(max_held.load(Ordering::SeqCst) <= LIMIT as usize);
    assert!(max_held.load(Ordering::SeqCst) > 1, "leases were shared");
    assert_eq!(held.load(Ordering::SeqCst), 0);
    assert!(
        sorted_children(&odd, "/sem/leases").await.is_empty(),
        "count back to 0"
    );
    assert!(sorted_children(&odd, "/sem/locks").await.is_empty());
    close_all(clients).await;
    odd.close().await.unwrap();
}

/// What the workers of docs/faults.md #23 share with the test.
struct Board {
    referee: std::sync::Mutex<Referee>,
    /// 0: normal; 1: after the server stop; 2: after the session kills; 3: stop.
    phase: AtomicUsize,
    /// Grants per phase and worker.
    grants: [[AtomicUsize; M23_WORKERS]; 3],
    /// Each worker's current client (replaced after an expiry).
    clients: [std::sync::Mutex<Option<Client>>; M23_WORKERS],
    new_sessions: AtomicUsize,
    /// Acquire errors other than a timeout or the end of the session.
    unexpected: std::sync::Mutex<Vec<String>>,
}

/// Who believes they hold a lease, counted against the limit at every grant.
///
/// A kill closes the holder's connection and deletes its lease node, without waiting for the
/// holder: another worker can be granted the lease before the killed holder has handled its
/// closed connection (docs/faults.md #23). So a grant is checked against the holders whose
/// session was not killed, and every holder whose session was killed must be told (`lost()`)
/// within the session timeout of the kill.
#[derive(Default)]
struct Referee {
    /// Per worker: the session of the lease it believes it holds.
    holding: [Option<i64>; M23_WORKERS],
    /// Sessions the test killed (marked just before the kill), with when.
    killed: std::collections::HashMap<i64, Instant>,
    max_believed: usize,
    /// The same with the killed holders counted (may exceed the limit in the kill's window).
    max_with_killed: usize,
    over: usize,
    /// Killed holders, and the longest a killed holder took to see `lost()`.
    killed_holders: usize,
    max_kill_lag: Duration,
}

impl Referee {
    fn grant(&mut self, worker: usize, session: i64) {
        self.holding[worker] = Some(session);
        let believed = self
            .holding
            .iter()
            .flatten()
            .filter(|s| !self.killed.contains_key(s))
            .count();
        self.max_believed = self.max_believed.max(believed);
        self.max_with_killed = self.max_with_killed.max(self.believed());
        if believed > M23_LIMIT as usize {
            self.over += 1;
        }
    }

    /// When `worker`'s session was killed under its hold, if it was.
    fn killed_at(&self, worker: usize) -> Option<Instant> {
        self.holding[worker].and_then(|s| self.killed.get(&s).copied())
    }

    fn end(&mut self, worker: usize, killed_lag: Option<Duration>) {
        self.holding[worker] = None;
        if let Some(lag) = killed_lag {
            self.killed_holders += 1;
            self.max_kill_lag = self.max_kill_lag.max(lag);
        }
    }

    fn believed(&self) -> usize {
        self.holding.iter().flatten().count()
    }
}

const M23_WORKERS: usize = 6;
const M23_LIMIT: u32 = 2;

async fn m23_worker(i: usize, cs: String, board: Arc<Board>) -> Client {
    // The hold ends at the first disconnection (Curator's SUSPENDED rule), so that what the
    // workers believe they hold can be counted against the limit.
    let options = LockOptions::new().with_disconnect_grace(Duration::ZERO);
    let mut client = connect_retrying(&cs, T).await;
    *board.clients[i].lock().unwrap() = Some(client.clone());
    let mut rng = Rng(0x51ed_270b_a3c4_4d11 ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9));
    while board.phase.load(Ordering::SeqCst) < 3 {
        let sem = Semaphore::with_options(
            client.clone(),
            "/sem",
            SemaphoreLimit::Fixed(M23_LIMIT),
            options.clone(),
        );
        match sem.acquire_one_timeout(Duration::from_secs(1)).await {
            Ok(lease) => {
                let mut lost = std::pin::pin!(lease.lost());
                if lease.is_held() {
                    board.referee.lock().unwrap().grant(i, client.session_id());
                    let phase = board.phase.load(Ordering::SeqCst).min(2);
                    board.grants[phase][i].fetch_add(1, Ordering::SeqCst);
                    let mut told = tokio::select! {
                        _ = &mut lost => Some(Instant::now()),
                        () = tokio::time::sleep(Duration::from_millis(5 + rng.below(25))) => None,
                    };
                    let killed_at = board.referee.lock().unwrap().killed_at(i);
                    if let (Some(at), None) = (killed_at, told) {
                        // Killed under the hold: the holder must be told within the timeout
                        // of the kill.
                        let by = tokio::time::Instant::from_std(at + T);
                        if tokio::time::timeout_at(by, &mut lost).await.is_ok() {
                            told = Some(Instant::now());
                        } else {
                            let what = format!("worker {i}: killed, lost() silent {T:?} on");
                            board.unexpected.lock().unwrap().push(what);
                        }
                    }
                    let lag = killed_at
                        .zip(told)
                        .map(|(at, told)| told.saturating_duration_since(at));
                    board.referee.lock().unwrap().end(i, lag);
                }
                // Err(Lost) after a loss; the node is gone either way.
                let _ = lease.release().await;
            }
            Err(LockError::Timeout) => {}
            Err(e) => {
                let who = format!("worker {i}");
                let tallies = (&board.new_sessions, &board.unexpected);
                let over = (cs.as_str(), T);
                if after_acquire_error(("m23", &who), e, &mut client, over, tallies).await {
                    *board.clients[i].lock().unwrap() = Some(client.clone());
                }
            }
        }
    }
    client
}

/// Polls until every worker has been granted a lease in `phase`.
async fn all_granted(board: &Board, phase: usize, within: Duration) -> Duration {
    let started = Instant::now();
    while board.grants[phase]
        .iter()
        .any(|g| g.load(Ordering::SeqCst) == 0)
    {
        assert!(
            started.elapsed() < within,
            "phase {phase}: not every worker re-acquired: {:?}",
            board.grants[phase]
                .iter()
                .map(|g| g.load(Ordering::SeqCst))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// docs/faults.md #23: 6 workers cycle on a semaphore of 2 leases. (1) The server is stopped
/// until every client has given its session up (local expiry, 4/3 T), then restarted: the
/// workers start new sessions and all re-acquire once the server has expired the old ones. (2)
/// Every session is then killed for real: again all re-acquire. Holds end at the first
/// disconnection; what the workers believe they hold never exceeds the limit (a holder whose
/// session the test killed aside: see [`Referee`]), a killed holder is told within the session
/// timeout, and no lease node is left at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m23_semaphore_session_loss() {
    let mut server = tokio::task::block_in_place(ZkServer::start).unwrap();
    let cs = server.connect_string();
    let board = Arc::new(Board {
        referee: std::sync::Mutex::default(),
        phase: AtomicUsize::new(0),
        grants: Default::default(),
        clients: Default::default(),
        new_sessions: AtomicUsize::new(0),
        unexpected: std::sync::Mutex::default(),
    });
    let started = Instant::now();
    let workers: Vec<_> = (0..M23_WORKERS)
        .map(|i| tokio::spawn(m23_worker(i, cs.clone(), board.clone())))
        .collect();
    all_granted(&board, 0, 10 * T).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // (1) Server down past every client's local expiry, then back. Grants count for a phase
    // from its fault on: only new sessions can be granted then.
    tokio::task::block_in_place(|| server.stop()).unwrap();
    let down = Instant::now();
    loop {
        let states: Vec<SessionState> = board
            .clients
            .iter()
            .map(|c| c.lock().unwrap().as_ref().unwrap().state())
            .collect();
        if states.iter().all(|s| s.is_terminal()) {
            break;
        }
        assert!(
            down.elapsed() < 5 * T,
            "clients did not give up their sessions: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "m23: every session given up {:?} after the stop",
        down.elapsed()
    );
    board.phase.store(1, Ordering::SeqCst);
    tokio::task::block_in_place(|| server.restart()).unwrap();
    let took = all_granted(&board, 1, 10 * T).await;
    println!("m23: all {M23_WORKERS} workers re-acquired {took:?} after the restart");

    // (2) Every session killed for real.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for slot in &board.clients {
        let client = slot.lock().unwrap().clone().unwrap();
        // Marked first: the server deletes the session's nodes as soon as it is killed.
        let session = client.session_id();
        board
            .referee
            .lock()
            .unwrap()
            .killed
            .insert(session, Instant::now());
        kill_session(&cs, session, client.session_password())
            .await
            .unwrap();
    }
    board.phase.store(2, Ordering::SeqCst);
    let took = all_granted(&board, 2, 10 * T).await;
    println!("m23: all {M23_WORKERS} workers re-acquired {took:?} after the session kills");

    board.phase.store(3, Ordering::SeqCst);
    let mut clients = Vec::new();
    for w in workers {
        clients.push(w.await.unwrap());
    }
    let observer = connect(&cs).await;
    let leases = wait_for_children(&observer, "/sem/leases", 0).await;
    let locks = wait_for_children(&observer, "/sem/locks", 0).await;
    let grants: Vec<Vec<usize>> = board
        .grants
        .iter()
        .map(|p| p.iter().map(|g| g.load(Ordering::SeqCst)).collect())
        .collect();
    let referee = std::mem::take(&mut *board.referee.lock().unwrap());
    println!(
        "m23: grants per phase and worker {grants:?}; new sessions {}; max believed held {} \
         (limit {M23_LIMIT}, holders whose session was killed aside; {} with them); over the limit {}; \
         {} holders killed, told within {:?}; total {:?}",
        board.new_sessions.load(Ordering::SeqCst),
        referee.max_believed,
        referee.max_with_killed,
        referee.over,
        referee.killed_holders,
        referee.max_kill_lag,
        started.elapsed()
    );
    let unexpected = board.unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "acquires failed: {unexpected:?}");
    assert!(leases.is_empty(), "orphan lease nodes: {leases:?}");
    assert!(locks.is_empty(), "orphan locks nodes: {locks:?}");
    assert_eq!(referee.over, 0, "more holders than the limit");
    assert_eq!(referee.believed(), 0);
    assert!(
        board.new_sessions.load(Ordering::SeqCst) >= 2 * M23_WORKERS,
        "every worker got new sessions twice"
    );
    close_all(clients).await;
    observer.close().await.unwrap();
}

/// `try_acquire_one` takes a free lease at once and, with every lease taken (or the `locks`
/// mutex busy), returns `None` leaving no node of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_acquire_one_never_waits() {
    let (_, [a, b]) = fresh_clients("recipes_sem_try", T).await;
    let sa = Semaphore::new(a.clone(), "/s", SemaphoreLimit::Fixed(1));
    let sb = Semaphore::new(b.clone(), "/s", SemaphoreLimit::Fixed(1));
    let lease = sa.try_acquire_one().await.unwrap().expect("a free lease");
    let started = Instant::now();
    assert!(sb.try_acquire_one().await.unwrap().is_none());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        sorted_children(&a, "/s/leases").await.len(),
        1,
        "only the holder's"
    );
    assert!(sorted_children(&a, "/s/locks").await.is_empty());
    // The locks mutex held by someone else: busy too.
    let locks = zkwire_recipes::Mutex::new(a.clone(), "/s/locks");
    lease.release().await.unwrap();
    let guard = locks.lock().await.unwrap();
    assert!(sb.try_acquire_one().await.unwrap().is_none());
    guard.release().await.unwrap();
    let lease = sb.try_acquire_one().await.unwrap().expect("free again");
    lease.release().await.unwrap();
    assert!(sorted_children(&a, "/s/leases").await.is_empty());
}
