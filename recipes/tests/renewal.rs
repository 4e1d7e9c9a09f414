//! Lock recipes on a client that renews its session after an expiry (a real server, the
//! session killed with `kill_session`): the guard of the old session reports `lost()`, and an
//! acquire in progress starts over and completes on the new session.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::time::Duration;

use zkwire::Client;
use zkwire::SessionState;
use zkwire_recipes::{
    DistributedDoubleBarrier, LockError, LostReason, Mutex, Semaphore, SemaphoreLimit,
};
use zkwire_testing::support::{
    connect_renewing, connect_with_timeout, fresh_chroot, kill_client_session,
};

const T: Duration = Duration::from_secs(4);
const STEP: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewing_client_loses_its_hold_and_acquires_again_on_the_new_session() {
    let cs = fresh_chroot("recipes_renewal").await;
    let renewing = connect_renewing(&cs, T).await;
    let other = connect_with_timeout(&cs, T).await;

    // `renewing` holds /held and waits for /contended, which `other` holds.
    let held = Mutex::new(renewing.clone(), "/held").lock().await.unwrap();
    let blocker = Mutex::new(other.clone(), "/contended")
        .lock()
        .await
        .unwrap();
    let waiting = {
        let mutex = Mutex::new(renewing.clone(), "/contended");
        tokio::spawn(async move { mutex.lock().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "behind the other holder");
    let old = renewing.session_id();

    kill_client_session(&renewing).await.unwrap();
    let reason = tokio::time::timeout(STEP, held.lost())
        .await
        .expect("lost() fired");
    println!("the old hold: {reason}");
    assert!(
        matches!(
            reason,
            LostReason::SessionEnded(SessionState::Expired) | LostReason::NodeDeleted
        ),
        "{reason:?}"
    );

    // The acquire starts over on the new session, still behind `other`, and gets the lock
    // once `other` lets go.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "still behind the other holder");
    blocker.release().await.unwrap();
    let guard = joined(waiting).await.expect("acquired on the new session");
    let new = renewing.session_id();
    assert_ne!(new, old);
    let (_, stat) = renewing.get_data(guard.path()).await.unwrap();
    assert_eq!(
        stat.ephemeral_owner, new,
        "the node belongs to the new session"
    );
    guard.release().await.unwrap();
    drop(held);
    renewing.close().await.unwrap();
    other.close().await.unwrap();
}

/// Kills the client's session and waits until it is connected on a new one.
async fn renew_from_outside(client: &Client) {
    let old = client.session_id();
    kill_client_session(client).await.unwrap();
    tokio::time::timeout(STEP, async {
        while client.session_id() == old
            || client.session_id() == 0
            || client.state() != SessionState::Connected
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("renewed in time");
}

/// The guard of every recipe, never asked about before the renewal, is not held on the new
/// session: its node went with the old one, and the new session's lease is not its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_first_asked_after_a_renewal_is_not_held() {
    use zkwire_recipes::{LeaderLatch, RwLock, Semaphore, SemaphoreLimit};
    let cs = fresh_chroot("recipes_renewal_first_asked").await;
    let c = connect_renewing(&cs, T).await;
    let mutex = Mutex::new(c.clone(), "/m").lock().await.unwrap();
    let write = RwLock::new(c.clone(), "/w").write().await.unwrap();
    let read = RwLock::new(c.clone(), "/r").read().await.unwrap();
    let lease = Semaphore::new(c.clone(), "/s", SemaphoreLimit::Fixed(2))
        .acquire_one()
        .await
        .unwrap();
    let latch = LeaderLatch::new(c.clone(), "/l", "a");
    latch.start();
    let leadership = latch.await_leadership().await.unwrap();
    renew_from_outside(&c).await;
    let expired = LostReason::SessionEnded(SessionState::Expired);
    let answers = [
        ("mutex", mutex.is_held(), mutex.trusted_until().is_some()),
        ("write", write.is_held(), write.trusted_until().is_some()),
        ("read", read.is_held(), read.trusted_until().is_some()),
        (
            "semaphore",
            lease.is_held(),
            lease.trusted_until().is_some(),
        ),
        (
            "leader",
            leadership.is_held(),
            leadership.trusted_until().is_some(),
        ),
    ];
    for (what, held, trusted) in answers {
        assert!(!held, "{what}: held on the new session");
        assert!(!trusted, "{what}: trusted on the new session");
    }
    let now = Duration::from_millis(100);
    for (what, lost) in [
        ("mutex", tokio::time::timeout(now, mutex.lost()).await),
        ("write", tokio::time::timeout(now, write.lost()).await),
        ("read", tokio::time::timeout(now, read.lost()).await),
        ("semaphore", tokio::time::timeout(now, lease.lost()).await),
        ("leader", tokio::time::timeout(now, leadership.lost()).await),
    ] {
        assert_eq!(lost, Ok(expired), "{what}");
    }
    latch.close().await.ok();
    c.close().await.unwrap();
}

/// One local queue per lock, whatever handle or spelling reaches it and across a renewal: 16
/// tasks of one renewing client lock `/a/b` through four handles (the path, `/a/b/`, a
/// chroot handle on `/a`, and the chroot handle with `/b/`) for 20 s while the session is
/// expired from outside once; another session samples the lock directory every 10 ms and
/// never sees two nodes of one session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_queue_per_lock_across_handles_spellings_and_a_renewal() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    const TASKS: usize = 16;
    const RUN: Duration = Duration::from_secs(20);
    let cs = fresh_chroot("recipes_one_queue").await;
    let c = connect_renewing(&cs, T).await;
    let observer = connect_with_timeout(&cs, T).await;
    let under_a = c.chroot("/a").unwrap();
    let handles = [
        Mutex::new(c.clone(), "/a/b"),
        Mutex::new(c.clone(), "/a/b/"),
        Mutex::new(under_a.clone(), "/b"),
        Mutex::new(under_a, "/b/"),
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let (granted, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let mutex = handles[i % handles.len()].clone();
        let (stop, granted, failed) = (stop.clone(), granted.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                match mutex.lock_timeout(STEP).await {
                    Ok(guard) => {
                        granted.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        // A hold lost to the renewal fails its release: that is the point.
                        let _ = guard.release().await;
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    let sampler = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let (mut samples, mut most, mut sessions) = (0usize, 0usize, Vec::new());
        while started.elapsed() < RUN {
            let per_session = nodes_per_session(&observer, "/a/b").await;
            for (&session, &n) in &per_session {
                most = most.max(n);
                if !sessions.contains(&session) {
                    sessions.push(session);
                }
            }
            samples += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        observer.close().await.unwrap();
        (samples, most, sessions)
    });
    tokio::time::sleep(RUN / 3).await;
    let before_renewal = granted.load(Ordering::SeqCst);
    renew_from_outside(&c).await;
    let (samples, most, sessions) = sampler.await.unwrap();
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    let total = granted.load(Ordering::SeqCst);
    println!(
        "{total} grants ({before_renewal} before the renewal), {} failed acquires; {samples} \
         samples, at most {most} node(s) of one session; sessions seen {}",
        failed.load(Ordering::SeqCst),
        sessions.len()
    );
    assert!(samples >= 500, "the sampler ran ({samples} samples)");
    assert!(most <= 1, "two nodes of one session in the lock directory");
    assert!(before_renewal >= 10, "grants before the renewal");
    assert!(total > before_renewal + 10, "grants after the renewal");
    assert_eq!(
        sessions.len(),
        2,
        "both sessions were seen holding or waiting"
    );
    c.close().await.unwrap();
}

/// The number of nodes each session owns in `dir` now (none if it does not exist).
async fn nodes_per_session(observer: &Client, dir: &str) -> std::collections::HashMap<i64, usize> {
    let mut per_session = std::collections::HashMap::new();
    let children = observer.get_children(dir).await.unwrap_or_default();
    for child in children {
        let path = format!("{dir}/{child}");
        if let Ok(Some(stat)) = observer.exists(&path).await {
            *per_session.entry(stat.ephemeral_owner).or_insert(0) += 1;
        }
    }
    per_session
}

/// With the local hand-off on, a hold lost to a renewal is never passed to the next local
/// waiter: it gets a node of its own, owned by the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_handoff_never_passes_a_node_of_an_old_session() {
    use zkwire_recipes::LockOptions;
    let cs = fresh_chroot("recipes_renewal_handoff").await;
    let c = connect_renewing(&cs, T).await;
    let options = LockOptions::default().with_local_handoff(3);
    let mutex = Mutex::with_options(c.clone(), "/h", options);
    let held = mutex.lock().await.unwrap();
    let old_node = held.path().to_owned();
    let waiter = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.lock_timeout(STEP).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    renew_from_outside(&c).await;
    // The hold was lost with its session: release says so and parks nothing.
    assert!(held.release().await.is_err());
    let next = waiter.await.unwrap().unwrap();
    assert_ne!(
        next.path(),
        old_node,
        "the old session's node was handed over"
    );
    let stat = c
        .exists(next.path())
        .await
        .unwrap()
        .expect("the new node exists");
    assert_eq!(
        stat.ephemeral_owner,
        c.session_id(),
        "owned by the new session"
    );
    assert!(next.is_held());
    next.release().await.unwrap();
    c.close().await.unwrap();
}

/// A release whose delete is cut off as the session ends, then retried on the renewed
/// session, reports the hold lost with its session: the node went with it, and someone else
/// may have held the lock in between. (The retried delete's `NoNode` once read as our own
/// first delete having applied: `Ok`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_retried_across_a_renewal_reports_the_expiry() {
    let (_, proxy, via) = support::proxied("recipes_renewal_release").await;
    let c = connect_renewing(&via, T).await;
    let guard = Mutex::new(c.clone(), "/l").lock().await.unwrap();
    let old = c.session_id();
    // The delete goes into a silent connection, and the server ends the session meanwhile.
    proxy.blackhole(true);
    let release = tokio::spawn(async move { guard.release().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    kill_client_session(&c).await.unwrap();
    proxy.blackhole(false);
    let released = joined(release).await;
    let expired = LostReason::SessionEnded(SessionState::Expired);
    assert_eq!(released, Err(LockError::Lost(expired)));
    assert_ne!(c.session_id(), old, "renewed");
    c.close().await.unwrap();
}

/// What `task` returned, within [`STEP`].
async fn joined<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(STEP, task)
        .await
        .expect("bounded")
        .unwrap()
}

/// Waits until `dir` has `n` children, as `client` sees them.
async fn until_children(client: &Client, dir: &str, n: usize) {
    tokio::time::timeout(STEP, async {
        while client.get_children(dir).await.map_or(0, |c| c.len()) != n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{dir} never had {n} children"));
}

/// A semaphore acquire whose session is renewed while it waits for a lease (holding the
/// `locks` mutex) queues for the mutex again: the client that took the mutex meanwhile gets
/// the lease once it is free, and ours comes after. (It once went on without the mutex, and
/// the two waited for ever, each counting the other's lease.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_acquire_starts_over_after_a_renewal() {
    let cs = fresh_chroot("recipes_renewal_semaphore").await;
    let renewing = connect_renewing(&cs, T).await;
    let holder = connect_with_timeout(&cs, T).await;
    let other = connect_with_timeout(&cs, T).await;
    let semaphore =
        |client: &Client| Semaphore::new(client.clone(), "/s", SemaphoreLimit::Fixed(1));
    let held = semaphore(&holder).acquire_one().await.unwrap();
    let ours = {
        let ours = semaphore(&renewing);
        tokio::spawn(async move { ours.acquire_one_timeout(3 * STEP).await })
    };
    until_children(&holder, "/s/leases", 2).await;
    let theirs = {
        let theirs = semaphore(&other);
        tokio::spawn(async move { theirs.acquire_one_timeout(STEP).await })
    };
    until_children(&holder, "/s/locks", 2).await;
    renew_from_outside(&renewing).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    held.release().await.unwrap();
    let theirs = joined(theirs)
        .await
        .expect("the other client's lease, once the holder's went");
    theirs.release().await.unwrap();
    let ours = joined(ours).await.expect("our lease, on the new session");
    let owner = renewing.exists(ours.path()).await.unwrap().unwrap();
    assert_eq!(owner.ephemeral_owner, renewing.session_id());
    ours.release().await.unwrap();
    until_children(&holder, "/s/leases", 0).await;
}

/// A double barrier member whose session is renewed while it waits to enter comes in
/// again, and the barrier fills when the last member arrives. (Its node went with the old
/// session and was not created again: every member waited until its timeout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barrier_member_renewed_while_entering_comes_in_again() {
    let cs = fresh_chroot("recipes_renewal_barrier").await;
    let renewing = connect_renewing(&cs, T).await;
    let other = connect_with_timeout(&cs, T).await;
    let mut first = DistributedDoubleBarrier::new(renewing.clone(), "/b", 2);
    let entering = tokio::spawn(async move {
        let entered = first.enter(3 * STEP).await;
        (first, entered)
    });
    until_children(&other, "/b", 1).await;
    renew_from_outside(&renewing).await;
    let mut second = DistributedDoubleBarrier::new(other.clone(), "/b", 2);
    assert!(
        second.enter(STEP).await.unwrap(),
        "the renewed member counted"
    );
    let (mut first, entered) = joined(entering).await;
    assert!(entered.unwrap());
    let (left_first, left_second) = tokio::join!(first.leave(STEP), second.leave(STEP));
    assert!(left_first.unwrap() && left_second.unwrap());
}
