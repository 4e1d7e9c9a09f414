//! The mutex against a real ZooKeeper: exclusion under stress, try/timeout semantics,
//! cancellation, lost-lock signals, fencing (ZooKeeper side), foreign children and sequence
//! wrap (docs/faults.md #18, #24, #20). Test names cite the scenario numbers of
//! docs/faults.md; each test has its own chroot.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{
    close_all, create_ephemeral, create_persistent, fresh_clients, join_all, joined, proxied,
};
use zkwire::{Client, CreateOptions, Error, Op, OpResult};
use zkwire_recipes::{ForeignChildPolicy, LockError, LockOptions, LostReason, Mutex, MutexGuard};
use zkwire_testing::support::{
    connect_with_timeout, kill_client_session, sorted_children, wait_for_children,
};

const T: Duration = Duration::from_secs(2);

/// Releases `guard`, the last hold of `/l`: no node is left there.
async fn release_last(guard: MutexGuard, client: &Client) {
    guard.release().await.unwrap();
    assert!(sorted_children(client, "/l").await.is_empty());
}

/// docs/faults.md #18: 8 sessions × 2 tasks × 250 cycles = 4,000 lock/unlock cycles, holds of
/// 0–10 ms. Exactly one holder at a time (in-process counter, and non-overlapping monotonic
/// hold intervals); fencing tokens strictly increase from one holder to the next, i.e. grants
/// follow node creation order (FIFO).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m18_mutex_exclusion_stress() {
    const SESSIONS: usize = 8;
    const TASKS: usize = 2;
    const CYCLES: usize = 250;
    let (_, clients) = fresh_clients::<SESSIONS>("recipes_m18", T).await;
    let holders = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let last_token = Arc::new(AtomicI64::new(0));
    let token_regressions = Arc::new(AtomicUsize::new(0));
    let intervals = Arc::new(std::sync::Mutex::new(Vec::with_capacity(
        SESSIONS * TASKS * CYCLES,
    )));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        for t in 0..TASKS {
            let mutex = Mutex::new(client.clone(), "/locks/m18");
            let (holders, violations, last_token, token_regressions, intervals) = (
                holders.clone(),
                violations.clone(),
                last_token.clone(),
                token_regressions.clone(),
                intervals.clone(),
            );
            tasks.push(tokio::spawn(async move {
                for i in 0..CYCLES {
                    let guard = mutex.lock().await.unwrap();
                    let begin = Instant::now();
                    if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    let token = guard.fencing_token();
                    if last_token.swap(token, Ordering::SeqCst) >= token {
                        token_regressions.fetch_add(1, Ordering::SeqCst);
                    }
                    assert!(guard.is_held());
                    // A varied hold of 0–10 ms (pseudo-random, reproducible).
                    let hold = (s * 7919 + t * 104_729 + i * 31) % 11;
                    if hold == 0 {
                        tokio::task::yield_now().await;
                    } else {
                        tokio::time::sleep(Duration::from_millis(hold as u64)).await;
                    }
                    holders.fetch_sub(1, Ordering::SeqCst);
                    let end = Instant::now();
                    intervals.lock().unwrap().push((begin, end));
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    join_all(tasks).await;
    let took = started.elapsed();
    let mut intervals = std::mem::take(&mut *intervals.lock().unwrap());
    intervals.sort();
    let overlaps = intervals.windows(2).filter(|w| w[1].0 < w[0].1).count();
    let cycles = intervals.len();
    println!(
        "m18: {cycles} cycles by {SESSIONS} sessions × {TASKS} tasks in {took:?} ({:.2} ms/cycle); \
         violations = {}, overlapping intervals = {overlaps}, fencing regressions = {}",
        took.as_secs_f64() * 1000.0 / cycles as f64,
        violations.load(Ordering::SeqCst),
        token_regressions.load(Ordering::SeqCst),
    );
    assert_eq!(cycles, SESSIONS * TASKS * CYCLES);
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(overlaps, 0, "overlapping hold intervals");
    assert_eq!(
        token_regressions.load(Ordering::SeqCst),
        0,
        "fencing tokens must strictly increase"
    );
    assert!(
        sorted_children(&clients[0], "/locks/m18").await.is_empty(),
        "no node left"
    );
    close_all(clients).await;
}

/// try_lock: granted when free; `None` (and no node left behind) when held elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_semantics() {
    let (_, [a, b]) = fresh_clients("recipes_try_lock", T).await;
    let (ma, mb) = (Mutex::new(a.clone(), "/l"), Mutex::new(b.clone(), "/l"));
    let held = ma.try_lock().await.unwrap().expect("free: granted");
    assert!(mb.try_lock().await.unwrap().is_none(), "held elsewhere");
    assert_eq!(
        sorted_children(&a, "/l").await.len(),
        1,
        "the miss left no node"
    );
    // Same client, another task: a miss in the local queue (no node created).
    let other = ma.clone();
    let missed = tokio::spawn(async move { other.try_lock().await.unwrap().is_none() });
    assert!(missed.await.unwrap());
    assert_eq!(sorted_children(&a, "/l").await.len(), 1);
    // Inside the holder's scope: reentrant, the same node.
    let nested = held.scope(ma.try_lock()).await.unwrap().expect("reentrant");
    assert_eq!(nested.path(), held.path());
    drop(nested);
    held.release().await.unwrap();
    let again = mb.try_lock().await.unwrap().expect("free again");
    assert_eq!(
        sorted_children(&a, "/l").await,
        vec![again.path().trim_start_matches("/l/").to_owned()]
    );
    drop(again);
    assert!(
        wait_for_children(&a, "/l", 0).await.is_empty(),
        "dropping the guard removed the node"
    );
}

/// lock_timeout with a holder present: one deadline for the whole call, then no node left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeout_gives_up_once_and_leaves_nothing() {
    let (_, [a, b]) = fresh_clients("recipes_lock_timeout", T).await;
    let holder = Mutex::new(a.clone(), "/l").lock().await.unwrap();
    let mb = Mutex::new(b.clone(), "/l");
    let started = Instant::now();
    let r = mb.lock_timeout(Duration::from_millis(400)).await;
    let took = started.elapsed();
    println!("lock_timeout(400 ms) returned after {took:?}");
    assert!(matches!(r, Err(LockError::Timeout)), "{r:?}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(900),
        "{took:?}"
    );
    assert_eq!(
        sorted_children(&a, "/l").await,
        vec![holder.path().trim_start_matches("/l/").to_owned()],
        "no node left"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    while b.stats().watches > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(b.stats().watches, 0, "the predecessor watch is gone");
    // A free lock within the deadline is granted.
    holder.release().await.unwrap();
    let g = mb.lock_timeout(Duration::from_secs(5)).await.unwrap();
    g.release().await.unwrap();
}

/// docs/faults.md #24: dropping a queued acquire removes its node and its watch; the next
/// acquire works; a waiter whose node is deleted externally still acquires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m24_acquire_cancel_and_external_delete() {
    let (_, [a, b, c]) = fresh_clients("recipes_m24", T).await;
    let holder = Mutex::new(a.clone(), "/l").lock().await.unwrap();
    let mb = Mutex::new(b.clone(), "/l");

    // Cancelled by select!, once it waits on its predecessor's watch. (Cancelling while the
    // getData request is in flight leaves zkwire's local watcher registered until the watch
    // fires; that is a client matter, reported separately.)
    let pending = mb.lock();
    tokio::select! {
        r = pending => panic!("granted while held: {r:?}"),
        () = async {
            while sorted_children(&a, "/l").await.len() < 2 || b.stats().watches == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        } => {}
    }
    let left = wait_for_children(&a, "/l", 1).await;
    assert_eq!(
        left.len(),
        1,
        "the cancelled waiter's node is gone: {left:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(1);
    while b.stats().watches > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(b.stats().watches, 0, "its watch is gone");

    // A waiter whose node someone deletes: it notices when its predecessor goes, and
    // queues again with a new node.
    let mc = Mutex::new(c.clone(), "/l");
    let waiter = tokio::spawn(async move { mc.lock().await });
    let victim = loop {
        let kids = sorted_children(&a, "/l").await;
        if kids.len() == 2 {
            break kids
                .into_iter()
                .find(|k| !holder.path().ends_with(k.as_str()))
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    a.delete(&format!("/l/{victim}"), None).await.unwrap();
    holder.release().await.unwrap();
    let g = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("still acquires")
        .unwrap()
        .unwrap();
    assert!(!g.path().ends_with(&victim), "a new node");
    g.release().await.unwrap();
    // The next acquire by the cancelled one works.
    let g = mb.lock_timeout(Duration::from_secs(5)).await.unwrap();
    release_last(g, &a).await;
}

/// lost() fires when the session is really killed; release then reports the loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_on_session_kill() {
    let (_, [a, observer]) = fresh_clients("recipes_lost_kill", T).await;
    let guard = Mutex::new(a.clone(), "/l").lock().await.unwrap();
    let lost = guard.lost();
    let started = Instant::now();
    kill_client_session(&a).await.unwrap();
    let reason = tokio::time::timeout(2 * T, lost)
        .await
        .expect("lost() fires");
    println!(
        "lost after a session kill: {reason} in {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            reason,
            LostReason::NodeDeleted | LostReason::SessionEnded(_) | LostReason::Unacknowledged(_)
        ),
        "{reason:?}"
    );
    assert!(!guard.is_held());
    // A new session can take the lock; the old guard's release reports the loss.
    let g = Mutex::new(observer.clone(), "/l")
        .lock_timeout(2 * T)
        .await
        .unwrap();
    assert!(matches!(guard.release().await, Err(LockError::Lost(_))));
    g.release().await.unwrap();
}

/// lost() fires on external deletion and on a data change of the lock node; the fenced multi
/// fails once the node is gone, atomically.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_on_external_delete_and_change_and_fenced_multi() {
    let (_, [a, admin]) = fresh_clients("recipes_lost_delete", T).await;
    create_persistent(&admin, "/res", b"0").await;
    let mutex = Mutex::new(a.clone(), "/l");

    let guard = mutex.lock().await.unwrap();
    let r = guard
        .multi_fenced(&[Op::set_data("/res", &b"1"[..], None)])
        .await
        .unwrap();
    assert!(matches!(r.as_slice(), [OpResult::SetData { .. }]), "{r:?}");
    // A failing op reports its index within the caller's ops.
    let r = guard
        .multi_fenced(&[
            Op::set_data("/res", &b"x"[..], None),
            Op::delete("/missing", None),
        ])
        .await;
    assert!(
        matches!(
            r,
            Err(LockError::Client(Error::MultiFailed { index: 1, .. }))
        ),
        "{r:?}"
    );
    let lost = guard.lost();
    admin.delete(guard.path(), None).await.unwrap();
    let reason = tokio::time::timeout(T, lost).await.unwrap();
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(!guard.is_held());
    let r = guard
        .multi_fenced(&[Op::set_data("/res", &b"2"[..], None)])
        .await;
    assert_eq!(r, Err(LockError::Lost(LostReason::NodeDeleted)));
    assert_eq!(
        &admin.get_data("/res").await.unwrap().0[..],
        b"1",
        "nothing applied"
    );
    assert_eq!(
        guard.release().await,
        Err(LockError::Lost(LostReason::NodeDeleted))
    );

    // Data change (other than a revocation request): lost, though the node exists.
    let guard = mutex.lock().await.unwrap();
    let lost = guard.lost();
    admin
        .set_data(guard.path(), b"someone else's", None)
        .await
        .unwrap();
    assert_eq!(
        tokio::time::timeout(T, lost).await.unwrap(),
        LostReason::NodeChanged
    );
    // The fence is the node's existence, whatever its version (check with version -1).
    assert!(guard.multi_fenced(&[]).await.unwrap().is_empty());
    assert_eq!(
        guard.release().await,
        Err(LockError::Lost(LostReason::NodeChanged)),
        "released, but reported"
    );
    assert!(sorted_children(&a, "/l").await.is_empty());
}

/// A guard first asked about from a plain thread (outside any tokio runtime) still gets its
/// watchdog once asked inside one: `lost()` waits, then reports the deletion of our node, and
/// `is_held()` turns false. (The watchdog was once made there without its task, for the
/// guard's life: `lost()` resolved `Released` at once and a deleted node went unnoticed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_first_asked_about_outside_a_runtime_still_sees_its_node_go() {
    let (_, [a, admin]) = fresh_clients("recipes_lost_thread", T).await;
    let guard = Mutex::new(a.clone(), "/l").lock().await.unwrap();
    let (guard, early) = std::thread::spawn(move || {
        assert!(guard.is_held(), "held, by the lease");
        let early = guard.lost();
        (guard, early)
    })
    .join()
    .unwrap();
    let lost = guard.lost();
    let early = tokio::spawn(early);
    // Both wait: the node is there and the lease renewed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!early.is_finished(), "lost() resolved with nothing lost");
    assert!(guard.is_held());
    admin.delete(guard.path(), None).await.unwrap();
    let reason = tokio::time::timeout(T, lost)
        .await
        .expect("the deletion seen");
    assert_eq!(reason, LostReason::NodeDeleted);
    let early = tokio::time::timeout(T, early)
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(
        early,
        LostReason::NodeDeleted,
        "the future made outside, too"
    );
    assert!(!guard.is_held());
    assert_eq!(
        guard.release().await,
        Err(LockError::Lost(LostReason::NodeDeleted))
    );
}

/// ZooKeeper's CheckVersionRequest with version -1 matches any version (the fence relies on
/// it), and fails with NoNode on a missing node.
#[tokio::test]
async fn check_minus_one_matches_any_version() {
    let (_, [c]) = fresh_clients("recipes_check_any", T).await;
    c.create("/n", b"", &CreateOptions::persistent())
        .await
        .unwrap();
    for _ in 0..3 {
        c.set_data("/n", b"x", None).await.unwrap();
    }
    assert_eq!(
        c.multi(&[Op::check("/n", None)]).await.unwrap(),
        vec![OpResult::Check]
    );
    let r = c.multi(&[Op::check("/n", Some(0))]).await;
    assert!(
        matches!(r, Err(Error::MultiFailed { index: 0, ref error }) if **error == Error::BadVersion),
        "{r:?}"
    );
    let r = c.multi(&[Op::check("/gone", None)]).await;
    assert!(
        matches!(r, Err(Error::MultiFailed { index: 0, ref error }) if **error == Error::NoNode),
        "{r:?}"
    );
}

/// After a reconnect every request succeeds while the lease may lie in the past: the
/// reconnect's touch counts only once a sync sent two server ticks later is answered
/// (docs/lease.md), and the touches from before the silence may run out first. A lock
/// granted in that window must not come back already lost (nor a latch loop through
/// create, lead, lose): the grant waits for the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_waits_for_the_lease_after_a_reconnect() {
    let (_, proxy, via) = proxied("recipes_grant_vouched").await;
    // The client takes the server's tick for 900 ms: a vouch reaches back P = 1.8 s.
    let client = zkwire_testing::support::builder()
        .with_session_timeout(Duration::from_secs(4))
        .with_server_tick(Duration::from_millis(900))
        .connect(&via)
        .await
        .unwrap();
    let margin = zkwire_recipes::lease_margin(client.session_timeout().unwrap());
    let untrusted = |c: &Client| {
        c.lease_deadline()
            .is_none_or(|deadline| deadline - margin <= Instant::now())
    };
    let mut windows = 0;
    for round in 0..2 {
        // 2.2 s of silence (the read timeout is 2.67 s, the session's 4 s), then a reset:
        // the client reconnects to the same session at once. The touches from before the
        // silence carry the lease to about 1.4 s after the reconnect, the reconnect's own
        // touch from P plus a sync interval after it: a window of up to a second.
        proxy.blackhole_drop(true);
        tokio::time::sleep(Duration::from_millis(2_200)).await;
        proxy.blackhole_drop(false);
        proxy.reset_all();
        let mut tries = 0;
        while let Err(e) = client.exists("/").await {
            tries += 1;
            assert!(tries < 10 && e == Error::ConnectionLoss, "{e:?}");
        }
        let look_until = Instant::now() + Duration::from_millis(2_500);
        while !untrusted(&client) && Instant::now() < look_until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if !untrusted(&client) {
            continue;
        }
        windows += 1;
        let guard = Mutex::new(client.clone(), format!("/l{round}"))
            .lock()
            .await
            .unwrap();
        assert!(
            guard.is_held(),
            "round {round}: granted while the lease lay in the past"
        );
        assert!(guard
            .trusted_until()
            .is_some_and(|until| until > Instant::now()));
        guard.release().await.unwrap();
    }
    println!("{windows} of 2 reconnects left the lease in the past");
    assert!(
        windows >= 1,
        "no reconnect left the lease in the past: the case was not tested"
    );
    client.close().await.unwrap();
}

/// A lock asked for before the first handshake: the fit check before the create could not
/// know the session timeout, so the grant checks again and refuses a hold the lease cannot
/// keep (2 s against a lag of 1.8 s + 0.67 s), instead of handing out a guard that a
/// healthy session loses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_asked_for_before_the_handshake_is_checked_at_the_grant() {
    let cs = zkwire_testing::support::fresh_chroot("recipes_fit_at_grant").await;
    let client = zkwire_testing::support::builder()
        .with_session_timeout(Duration::from_secs(2))
        .with_server_tick(Duration::from_millis(900))
        .spawn(&cs, zkwire::TcpConnector)
        .unwrap();
    assert_eq!(client.session_timeout(), None, "not connected yet");
    let result = Mutex::new(client.clone(), "/early").lock().await;
    assert!(
        matches!(result, Err(LockError::LeaseTooShort { .. })),
        "{result:?}"
    );
    let left = client.get_children("/early").await.unwrap_or_default();
    assert!(left.is_empty(), "no contender left: {left:?}");
    client.close().await.unwrap();
}

/// With no server reachable, lost() fires at the lease deadline less the margin: the send
/// instant of the last acknowledged request plus T, less max(T/15, 100 ms); and
/// `trusted_until()` named that instant in advance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_at_the_lease_deadline_less_the_margin() {
    let (_, proxy, via) = proxied("recipes_lost_lease").await;
    let a = connect_with_timeout(&via, T).await;
    let granted = a.session_timeout().unwrap();
    let guard = Mutex::new(a.clone(), "/l").lock().await.unwrap();
    let lost = guard.lost();
    proxy.refuse(true);
    proxy.cut_all();
    // Nothing can be acknowledged from now on: the deadline is fixed.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let trusted_until = guard.trusted_until().expect("still trusted");
    let lease = a.lease_deadline().expect("a lease");
    assert_eq!(lease - trusted_until, zkwire_recipes::lease_margin(granted));
    let renewed = a.lease_renewed_at().expect("renewed");
    assert_eq!(
        lease - renewed,
        granted,
        "one T negotiated: the deadline is renewal + T"
    );
    let reason = tokio::time::timeout(2 * T, lost)
        .await
        .expect("lost() within 2 T");
    let now = Instant::now();
    println!(
        "lost: {reason}, {:?} after trusted_until (T = {granted:?})",
        now.saturating_duration_since(trusted_until)
    );
    assert!(
        matches!(reason, LostReason::Unacknowledged(d) if d + zkwire_recipes::lease_margin(granted) >= granted),
        "{reason:?}"
    );
    assert!(now >= trusted_until, "not before the announced instant");
    assert!(
        now < lease,
        "before the server may expire the session ({:?} early)",
        lease - now
    );
    assert_eq!(guard.trusted_until(), None);
    proxy.refuse(false);
    drop(guard);
    a.close().await.unwrap();
}

/// A grace of zero gives the hold up at the first disconnection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_grace_loses_at_once() {
    let (_, proxy, via) = proxied("recipes_zero_grace").await;
    let a = connect_with_timeout(&via, T).await;
    let options = LockOptions::new().with_disconnect_grace(Duration::ZERO);
    let guard = Mutex::with_options(a.clone(), "/l", options)
        .lock()
        .await
        .unwrap();
    let lost = guard.lost();
    proxy.cut_all();
    let reason = tokio::time::timeout(T, lost).await.unwrap();
    assert!(
        matches!(reason, LostReason::Disconnected(d) if d < Duration::from_millis(100)),
        "{reason:?}"
    );
    // The session survives a short cut: release still deletes the node, and reports the loss.
    assert_eq!(guard.release().await, Err(LockError::Lost(reason)));
    assert!(sorted_children(&a, "/l").await.is_empty());
    a.close().await.unwrap();
}

/// A `lost()` future made outside a tokio runtime (a plain thread), the first question
/// about the hold, still fires: the watchdog that could not start there starts when the
/// future is first polled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_made_outside_a_runtime_still_fires() {
    let (_, [a, admin]) = fresh_clients("recipes_lost_outside", T).await;
    let guard = Mutex::new(a.clone(), "/l").lock().await.unwrap();
    let lost = std::thread::scope(|s| s.spawn(|| guard.lost()).join().unwrap());
    let lost = tokio::spawn(lost);
    tokio::time::sleep(Duration::from_millis(200)).await;
    admin.delete(guard.path(), None).await.unwrap();
    let reason = tokio::time::timeout(T, lost).await.expect("fired").unwrap();
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(!guard.is_held());
    drop(guard);
    close_all([a, admin]).await;
}

/// A grace is counted from the disconnection even when nobody had asked about the hold
/// before it (the watchdog starts at the first question): the first question after a
/// disconnection longer than the grace already says lost, and by how long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_counts_from_the_disconnection_not_the_first_question() {
    let (_, proxy, via) = proxied("recipes_grace_unwatched").await;
    let a = connect_with_timeout(&via, T).await;
    let options = LockOptions::new().with_disconnect_grace(Duration::from_millis(300));
    let guard = Mutex::with_options(a.clone(), "/l", options)
        .lock()
        .await
        .unwrap();
    proxy.blackhole(true);
    proxy.cut_all();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let since = a.disconnected_since().expect("disconnected");
    assert!(since.elapsed() >= Duration::from_millis(700), "{since:?}");
    assert!(!guard.is_held(), "past the grace, and never asked before");
    let reason = tokio::time::timeout(T, guard.lost()).await.unwrap();
    assert!(
        matches!(reason, LostReason::Disconnected(d) if d >= Duration::from_millis(700)),
        "{reason:?}"
    );
    proxy.blackhole(false);
    assert_eq!(guard.release().await, Err(LockError::Lost(reason)));
    assert!(a.disconnected_since().is_none(), "connected again");
    a.close().await.unwrap();
}

/// A child that is not a lock contender fails the acquire by default (Curator would count
/// it); with CountLikeCurator it is ordered by its whole name, as Curator does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_child_detected() {
    let (_, [a, admin]) = fresh_clients("recipes_foreign", T).await;
    create_persistent(&admin, "/l", b"").await;
    create_ephemeral(&admin, "/l/config").await;
    let r = Mutex::new(a.clone(), "/l").lock_timeout(T).await;
    assert_eq!(
        r.err(),
        Some(LockError::ForeignChild {
            name: "config".into()
        })
    );
    assert_eq!(
        sorted_children(&a, "/l").await,
        vec!["config".to_owned()],
        "our node was removed"
    );

    // Counted like Curator: "config" sorts after "0000000001", so we hold.
    let curator_like =
        LockOptions::new().with_foreign_children(ForeignChildPolicy::CountLikeCurator);
    let g = Mutex::with_options(a.clone(), "/l", curator_like.clone())
        .lock_timeout(T)
        .await
        .unwrap();
    g.release().await.unwrap();
    // ...but "0-foreign" sorts before any sequence: Curator would wedge behind it (CURATOR-43).
    create_ephemeral(&admin, "/l/0-foreign").await;
    let r = Mutex::with_options(a.clone(), "/l", curator_like)
        .try_lock()
        .await
        .unwrap();
    assert!(
        r.is_none(),
        "blocked by a foreign child that sorts first, as in Curator"
    );
    assert_eq!(sorted_children(&a, "/l").await.len(), 2);
}

/// A wrapped sequence counter (a negative suffix) is refused, never mis-ordered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_wrap_detected() {
    let (_, [a, admin]) = fresh_clients("recipes_wrap", T).await;
    create_persistent(&admin, "/l", b"").await;
    let wrapped = "_c_0b8f1a44-1f4e-4c3a-9d42-5c7e2b0d6a11-lock--2147483648";
    create_ephemeral(
        &admin,
        "/l/_c_6e1c0a2b-7f3d-4e5a-8b9c-0d1e2f3a4b5c-lock-0000000001",
    )
    .await;
    create_ephemeral(&admin, &format!("/l/{wrapped}")).await;
    let r = Mutex::new(a.clone(), "/l").lock_timeout(T).await;
    assert_eq!(
        r.err(),
        Some(LockError::SequenceWrapped {
            name: wrapped.into()
        })
    );
    assert_eq!(
        sorted_children(&a, "/l").await.len(),
        2,
        "our node was removed"
    );
    // Negative suffixes only: still refused (string order reverses their creation order).
    admin
        .delete(
            "/l/_c_6e1c0a2b-7f3d-4e5a-8b9c-0d1e2f3a4b5c-lock-0000000001",
            None,
        )
        .await
        .unwrap();
    let r = Mutex::new(a.clone(), "/l").try_lock().await;
    assert!(matches!(r, Err(LockError::SequenceWrapped { .. })), "{r:?}");
    assert_eq!(sorted_children(&a, "/l").await, vec![wrapped.to_owned()]);
}

/// Nothing the recipes leave behind keeps a client alive: after guards are released or
/// dropped, acquires cancelled or timed out, and the last clone dropped, the client's task
/// stops (which closes the session), and no lock node or local watch is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_keeps_the_client_alive() {
    let (_, [a, observer]) = fresh_clients("recipes_no_leaks", T).await;
    let holder = Mutex::new(observer.clone(), "/l").lock().await.unwrap();
    let mutex = Mutex::new(a.clone(), "/l");
    assert!(mutex.try_lock().await.unwrap().is_none());
    assert!(matches!(
        mutex.lock_timeout(Duration::from_millis(100)).await,
        Err(LockError::Timeout)
    ));
    let cancelled = tokio::time::timeout(Duration::from_millis(100), mutex.lock()).await;
    assert!(cancelled.is_err());
    holder.release().await.unwrap();
    let g = mutex.lock().await.unwrap();
    let lost = g.lost();
    drop(g);
    assert_eq!(
        tokio::time::timeout(T, lost).await.unwrap(),
        LostReason::Released
    );
    let g = mutex.lock().await.unwrap();
    g.release().await.unwrap();
    let last = mutex.lock().await.unwrap();
    assert!(wait_for_children(&observer, "/l", 1).await.len() == 1);
    drop(last);
    assert!(
        wait_for_children(&observer, "/l", 0).await.is_empty(),
        "every node removed"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.stats().watches > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(a.stats().watches, 0, "no local watch left: {:?}", a.stats());

    let handle = a.stats_handle();
    drop(mutex);
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    while handle.stats().driver_running && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !handle.stats().driver_running,
        "something still holds the client: {:?}",
        handle.stats()
    );
}

/// A timeout too large for the clock waits without a deadline instead of panicking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_lock_timeout_means_no_deadline() {
    let (_, [a]) = fresh_clients("recipes_huge_timeout", T).await;
    let mutex = Mutex::new(a.clone(), "/l");
    let guard = mutex.lock_timeout(Duration::MAX).await.unwrap();
    assert!(guard.is_held());
    guard.release().await.unwrap();
    a.close().await.unwrap();
}

/// Waits until `client` has sent nothing for 100 ms; its request count then.
async fn quiet_requests(client: &Client) -> u64 {
    let mut last = client.stats().requests;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = client.stats().requests;
        if now == last {
            return now;
        }
        last = now;
    }
}

/// An uncontended cycle is create + getChildren + delete and nothing else, whether the guard
/// is released or dropped, as long as no one asks the guard about the hold; asking starts the
/// node watch (one getData).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_cycle_is_three_requests() {
    const CYCLES: u64 = 20;
    let (_, [client]) = fresh_clients("recipes_three_requests", T).await;
    let mutex = Mutex::new(client.clone(), "/l");
    // The first acquire also creates the container directory.
    mutex.lock().await.unwrap().release().await.unwrap();
    let before = quiet_requests(&client).await;
    for i in 0..CYCLES {
        let guard = mutex.lock().await.unwrap();
        if i % 2 == 0 {
            guard.release().await.unwrap();
        } else {
            drop(guard);
        }
    }
    let sent = quiet_requests(&client).await - before;
    println!("{CYCLES} uncontended cycles: {sent} requests");
    assert_eq!(sent, 3 * CYCLES);

    let guard = mutex.lock().await.unwrap();
    let before = quiet_requests(&client).await;
    assert!(guard.is_held());
    assert_eq!(
        quiet_requests(&client).await - before,
        1,
        "the node watch, once asked"
    );
    assert!(guard.is_held());
    release_last(guard, &client).await;
}

/// A waiter queued right behind the holder is granted on the holder's deletion alone: create,
/// getChildren, the watches on the holder's node and on its own (one write), and no second
/// listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_from_the_first_node_is_one_notification() {
    let (cs, [a, b]) = fresh_clients("recipes_one_notification", T).await;
    let held = Mutex::new(a.clone(), "/l").lock().await.unwrap();
    let before = quiet_requests(&b).await;
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { Mutex::new(b, "/l").lock().await }
    });
    wait_for_children(&a, "/l", 2).await;
    let queued = quiet_requests(&b).await - before;
    assert_eq!(
        queued, 4,
        "create, getChildren, getData watches on the holder and ours"
    );
    let token = held.fencing_token();
    held.release().await.unwrap();
    let guard = joined(waiter, Duration::from_secs(10)).await.unwrap();
    assert_eq!(
        quiet_requests(&b).await - before,
        4,
        "granted without listing again"
    );
    assert!(guard.fencing_token() > token);
    assert_eq!(sorted_children(&a, "/l").await.len(), 1);

    // Behind a predecessor that is not first, a deletion means listing again: the first
    // holder stays, the middle waiter gives up, and the last one waits on.
    let c = connect_with_timeout(&cs, T).await;
    let middle = tokio::spawn({
        let c = c.clone();
        async move {
            Mutex::new(c, "/l")
                .lock_timeout(Duration::from_millis(300))
                .await
        }
    });
    wait_for_children(&a, "/l", 2).await;
    let last = tokio::spawn({
        let a = a.clone();
        async move { Mutex::new(a, "/l").lock().await }
    });
    wait_for_children(&a, "/l", 3).await;
    assert!(matches!(middle.await.unwrap(), Err(LockError::Timeout)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!last.is_finished(), "the first holder still holds");
    assert!(guard.is_held());
    guard.release().await.unwrap();
    let last = joined(last, Duration::from_secs(10)).await.unwrap();
    last.release().await.unwrap();
}
