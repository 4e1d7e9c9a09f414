//! The mutex's in-process side against a real ZooKeeper: reentrancy through the guard (no
//! request, one node, deleted after the outermost release; a moved guard takes the hold
//! with it), the local FIFO queue (one node per
//! session at any time, grants in request order), and fairness between sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use support::{close_all, fresh_clients, join_all};
use zkwire::{CreateOptions, Op};
use zkwire_recipes::{LockError, LockOptions, LostReason, Mutex};
use zkwire_testing::support::sorted_children;

const T: Duration = Duration::from_secs(4);

/// Nested `lock()`, `lock_timeout()` and `try_lock()` inside the holder's scope, through
/// any handle of the client on the lock (a clone, a chroot handle, the path with a trailing
/// `/`), and `lock_again()`, return at once, send nothing, and share the node; only the last
/// release deletes it, whatever the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_locks_cost_no_request_and_share_the_node() {
    let (_, [client]) = fresh_clients("reentrant_nested", T).await;
    let mutex = Mutex::new(client.clone(), "/locks/r");
    let outer = mutex.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = client.stats().requests;
    let started = Instant::now();
    let nested = outer
        .scope(async {
            let chrooted = Mutex::new(client.chroot("/locks").unwrap(), "/r");
            vec![
                mutex.lock().await.unwrap(),
                mutex.lock_timeout(Duration::from_secs(1)).await.unwrap(),
                mutex.try_lock().await.unwrap().expect("reentrant try_lock"),
                Mutex::new(client.clone(), "/locks/r").lock().await.unwrap(),
                Mutex::new(client.clone(), "/locks/r/")
                    .lock()
                    .await
                    .unwrap(),
                chrooted.lock().await.unwrap(),
            ]
        })
        .await;
    let again = outer.lock_again().unwrap();
    let took = started.elapsed();
    let sent = client.stats().requests - before;
    println!("7 nested acquisitions: {sent} requests, {took:?}");
    assert_eq!(sent, 0, "a nested acquire sends nothing");
    for guard in nested.iter().chain([&again]) {
        assert_eq!(guard.fencing_token(), outer.fencing_token());
        assert!(guard.is_held());
    }
    assert_eq!(nested[0].path(), outer.path());
    assert_eq!(outer.nesting(), 8);
    // Nested through the chrooted handle, the guard names paths as that handle does.
    let through_chroot = &nested[5];
    let name = outer.path().strip_prefix("/locks/r/").unwrap();
    assert_eq!(through_chroot.path(), format!("/r/{name}"));
    assert_eq!(
        through_chroot.client().server_path("/").unwrap(),
        client.server_path("/locks").unwrap()
    );
    let persistent = CreateOptions::persistent();
    client
        .create("/locks/state", "", &persistent)
        .await
        .unwrap();
    let set = Op::set_data("/state", "fenced", None);
    through_chroot.multi_fenced(&[set]).await.unwrap();
    assert_eq!(client.get_data("/locks/state").await.unwrap().0, "fenced");
    assert_eq!(client.exists("/state").await.unwrap(), None);

    // Released outermost first: the node stays until the last guard goes.
    outer.release().await.unwrap();
    again.release().await.unwrap();
    let mut nested = nested;
    let last = nested.pop().unwrap();
    for guard in nested {
        guard.release().await.unwrap();
    }
    assert_eq!(sorted_children(&client, "/locks/r").await.len(), 1);
    assert!(last.is_held());
    assert_eq!(last.nesting(), 1);
    last.release().await.unwrap();
    assert!(sorted_children(&client, "/locks/r").await.is_empty());

    // Outside a scope another acquire is another contender: in another task it waits
    // (locally, sending nothing) while we hold, and so does a task spawned in the scope.
    let held = mutex.lock().await.unwrap();
    // The hold's watchdog sets its node watch just after the grant: let it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = client.stats().requests;
    let m = mutex.clone();
    let spawned_in_scope = held
        .scope(async move {
            let task = tokio::spawn(async move { m.try_lock().await.map(|g| g.is_some()) });
            task.await.unwrap()
        })
        .await;
    assert_eq!(spawned_in_scope, Ok(false));
    assert_eq!(
        mutex.try_lock().await.map(|g| g.is_some()),
        Ok(false),
        "the holder's own task, outside the scope"
    );
    assert_eq!(
        client.stats().requests - before,
        0,
        "busy locally: no request"
    );
    held.release().await.unwrap();
    client.close().await.unwrap();
}

/// A guard moved into another task takes the hold with it: the task that took the lock and
/// locks again waits for the moved guard's release, as any other contender does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_guard_keeps_the_lock_from_the_task_that_took_it() {
    const HOLD: Duration = Duration::from_millis(1500);
    let (_, [client]) = fresh_clients("reentrant_moved", T).await;
    for local_queue in [true, false] {
        let options = LockOptions::default().with_local_queue(local_queue);
        let mutex = Mutex::with_options(client.clone(), "/locks/moved", options);
        let guard = mutex.lock().await.unwrap();
        let worker = tokio::spawn(async move {
            tokio::time::sleep(HOLD).await;
            let released = Instant::now();
            guard.release().await.unwrap();
            released
        });
        let started = Instant::now();
        let again = mutex.lock_timeout(Duration::from_secs(10)).await.unwrap();
        let granted = Instant::now();
        let released = worker.await.unwrap();
        println!(
            "local queue {local_queue}: granted {:?} after the lock call, {:?} after the \
             moved guard's release began",
            granted - started,
            granted.saturating_duration_since(released)
        );
        assert!(
            granted >= released,
            "local queue {local_queue}: granted while the moved guard still held"
        );
        assert!(again.is_held());
        again.release().await.unwrap();
    }
    client.close().await.unwrap();
}

/// Re-entering a hold that was lost fails instead of handing out a guard that is not
/// trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentering_a_lost_hold_fails() {
    let (_, [client, admin]) = fresh_clients("reentrant_lost", T).await;
    let mutex = Mutex::new(client.clone(), "/locks/r");
    let guard = mutex.lock().await.unwrap();
    admin.delete(guard.path(), None).await.unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires on delete");
    assert_eq!(reason, LostReason::NodeDeleted);
    let lost = Some(LockError::Lost(LostReason::NodeDeleted));
    assert_eq!(guard.scope(mutex.lock()).await.err(), lost);
    assert_eq!(guard.lock_again().err(), lost);
    // Once the lost hold is let go, the task can take the lock afresh.
    drop(guard);
    let again = mutex.lock_timeout(Duration::from_secs(5)).await.unwrap();
    assert!(again.is_held());
    again.release().await.unwrap();
    client.close().await.unwrap();
    admin.close().await.unwrap();
}

/// 8 tasks sharing one client contend for one lock: at most one node of that client exists
/// at any time (sampled by another session), and grants follow the order of the local
/// queue — round robin, since each task queues again after its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_tasks_of_one_client_queue_locally_fifo() {
    const TASKS: usize = 8;
    const ROUNDS: usize = 12;
    let (_, [client, observer]) = fresh_clients("reentrant_local_queue", T).await;
    let mutex = Mutex::new(client.clone(), "/locks/q");

    // Task 0 holds while the others queue, one after another, in index order.
    let first = mutex.lock().await.unwrap();
    let grants = Arc::new(StdMutex::new(Vec::with_capacity(TASKS * ROUNDS)));
    let queued = Arc::new(AtomicUsize::new(0));
    let before = client.stats().requests;
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (mutex, grants, in_queue) = (mutex.clone(), grants.clone(), queued.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let lock = mutex.lock();
                if round == 0 {
                    in_queue.fetch_add(1, Ordering::SeqCst);
                }
                let guard = lock.await.unwrap();
                grants.lock().unwrap().push(i);
                tokio::task::yield_now().await;
                guard.release().await.unwrap();
            }
        }));
        // Let task i reach the queue before task i + 1 starts.
        while queued.load(Ordering::SeqCst) <= i {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let (mut samples, mut most) = (0usize, 0usize);
            while sampling.load(Ordering::SeqCst) {
                let n = sorted_children(&observer, "/locks/q").await.len();
                most = most.max(n);
                samples += 1;
            }
            observer.close().await.unwrap();
            (samples, most)
        })
    };
    first.release().await.unwrap();
    join_all(tasks).await;
    sampling.store(false, Ordering::SeqCst);
    let (samples, most) = sampler.await.unwrap();
    let sent = client.stats().requests - before;
    let grants = std::mem::take(&mut *grants.lock().unwrap());
    let acquisitions = grants.len();
    println!(
        "{acquisitions} acquisitions by {TASKS} tasks of one client: at most {most} node(s) in \
         {samples} samples, {:.2} requests per acquisition",
        sent as f64 / acquisitions as f64
    );
    assert_eq!(acquisitions, TASKS * ROUNDS);
    assert!(samples > 10, "the sampler ran");
    assert!(most <= 1, "one node per client at a time, saw {most}");
    let expected: Vec<usize> = (0..ROUNDS).flat_map(|_| 0..TASKS).collect();
    assert_eq!(grants, expected, "grants in local FIFO order");
    assert!(sorted_children(&client, "/locks/q").await.is_empty());
    client.close().await.unwrap();
}

/// Fairness between processes is unchanged: 8 sessions × 2 tasks contend for a fixed time;
/// every released grant goes back to the end of ZooKeeper's queue, so each session gets
/// its turn in sequence order and the per-session grant counts stay within ±10 % of the
/// mean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_share_the_lock_fairly() {
    const SESSIONS: usize = 8;
    const TASKS: usize = 2;
    const RUN: Duration = Duration::from_secs(4);
    let (_, clients) = fresh_clients::<SESSIONS>("reentrant_fairness", T).await;
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(StdMutex::new(HashMap::new()));
    let mut tasks = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        for _ in 0..TASKS {
            let mutex = Mutex::new(client.clone(), "/locks/fair");
            let (stop, counts) = (stop.clone(), counts.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let guard = mutex.lock().await.unwrap();
                    *counts.lock().unwrap().entry(s).or_insert(0usize) += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::SeqCst);
    join_all(tasks).await;
    let counts = std::mem::take(&mut *counts.lock().unwrap());
    let per_session: Vec<usize> = (0..SESSIONS).map(|s| counts[&s]).collect();
    let total: usize = per_session.iter().sum();
    let mean = total as f64 / SESSIONS as f64;
    let worst = per_session
        .iter()
        .map(|&c| (c as f64 - mean).abs() / mean)
        .fold(0.0, f64::max);
    println!(
        "{total} grants in {RUN:?}; per session {per_session:?}; worst deviation {:.1} %",
        worst * 100.0
    );
    assert!(total >= SESSIONS * 10, "enough grants to judge");
    assert!(worst <= 0.10, "per-session grants within ±10 % of the mean");
    close_all(clients).await;
}

/// The opt-in local hand-off: a released node passes straight to the next local waiter, at
/// most `max` times in a row, after which it goes back to ZooKeeper and a contender of
/// another session gets its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_handoff_passes_the_node_at_most_max_times() {
    const MAX: u32 = 3;
    const LOCAL_TASKS: usize = 4;
    const GRANTS: usize = 120;
    let (_, [a, b]) = fresh_clients("reentrant_handoff", T).await;
    let options = LockOptions::new().with_local_handoff(MAX);
    let grants = Arc::new(StdMutex::new(Vec::with_capacity(GRANTS + 8)));
    let before = a.stats().requests;
    let mut tasks = Vec::new();
    for (client, tasks_of_client, side) in [(&a, LOCAL_TASKS, 'a'), (&b, 1, 'b')] {
        for _ in 0..tasks_of_client {
            let mutex = Mutex::with_options(client.clone(), "/locks/h", options.clone());
            let grants = grants.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let guard = mutex.lock().await.unwrap();
                    let done = {
                        let mut grants = grants.lock().unwrap();
                        grants.push((side, guard.path().to_owned(), guard.fencing_token()));
                        grants.len() >= GRANTS
                    };
                    tokio::task::yield_now().await;
                    guard.release().await.unwrap();
                    if done {
                        return;
                    }
                }
            }));
        }
    }
    // The first task to see GRANTS stops; the others stop at their next grant.
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("bounded")
            .unwrap();
    }
    let grants = std::mem::take(&mut *grants.lock().unwrap());
    let a_grants = grants.iter().filter(|g| g.0 == 'a').count();
    let a_nodes: std::collections::HashSet<&str> = grants
        .iter()
        .filter(|g| g.0 == 'a')
        .map(|g| g.1.as_str())
        .collect();
    let longest_same_node = grants
        .chunk_by(|x, y| x.1 == y.1)
        .map(<[_]>::len)
        .max()
        .unwrap_or(0);
    let longest_a_run = grants
        .chunk_by(|x, y| x.0 == y.0)
        .filter(|run| run[0].0 == 'a')
        .map(<[_]>::len)
        .max()
        .unwrap_or(0);
    let b_grants = grants.len() - a_grants;
    let a_requests = a.stats().requests - before;
    println!(
        "{} grants: session a {a_grants} on {} nodes ({:.2} requests per grant), session b \
         {b_grants}; longest run on one node {longest_same_node}, longest run of a {longest_a_run}",
        grants.len(),
        a_nodes.len(),
        a_requests as f64 / a_grants as f64,
    );
    assert!(
        longest_same_node as u32 <= MAX + 1,
        "at most MAX hand-offs in a row"
    );
    assert!(
        longest_same_node > 1,
        "the node was handed over at least once"
    );
    // The other session gets its turn once a's node goes back to ZooKeeper, provided its
    // own node is already queued then; b's single task re-queues right after each grant,
    // so a's runs may span two nodes when b is slow, never more than that for long: b gets
    // a fair share overall (it holds one contender in five).
    assert!(
        b_grants >= grants.len() / (2 * (MAX as usize + 1)),
        "the other session gets its turn: {b_grants} of {} grants",
        grants.len()
    );
    // Tasks that share a node share its token; tokens never go backwards.
    assert!(
        grants.windows(2).all(|w| w[0].2 <= w[1].2),
        "tokens never decrease"
    );
    assert!(sorted_children(&a, "/locks/h").await.is_empty());
    a.close().await.unwrap();
    b.close().await.unwrap();
}
