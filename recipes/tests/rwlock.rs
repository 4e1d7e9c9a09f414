//! The read/write lock against a real ZooKeeper (docs/faults.md #21): writers alone, readers
//! together, upgrade refused, downgrade allowed (Curator ≥ 5.5 tie layout), ties from peers
//! tolerated.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{close_all, fresh_clients};
use zkwire::CreateOptions;
use zkwire_recipes::{LockError, RwLock};
use zkwire_testing::support::sorted_children;

const T: Duration = Duration::from_secs(2);

/// Whether `fut` is still pending after `within`.
async fn still_pending<F: std::future::Future>(fut: F, within: Duration) -> bool {
    tokio::time::timeout(within, fut).await.is_err()
}

#[derive(Default)]
struct Tally {
    readers: AtomicUsize,
    writers: AtomicUsize,
    max_readers: AtomicUsize,
    violations: AtomicUsize,
    reads: AtomicUsize,
    writes: AtomicUsize,
    last_write_token: AtomicI64,
    token_regressions: AtomicUsize,
}

/// docs/faults.md #21: 8 sessions × 100 iterations, 10% writers. A writer is always alone;
/// several readers hold at once; write fencing tokens strictly increase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m21_rwlock_readers_share_writers_exclude() {
    const CLIENTS: usize = 8;
    const ITERATIONS: usize = 100;
    let (_, clients) = fresh_clients::<CLIENTS>("recipes_m21", T).await;
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let rw = RwLock::new(client.clone(), "/rw");
        let tally = tally.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..ITERATIONS {
                if (i + c) % 10 == 0 {
                    let guard = rw.write().await.unwrap();
                    let (w, r) = (
                        tally.writers.fetch_add(1, Ordering::SeqCst),
                        tally.readers.load(Ordering::SeqCst),
                    );
                    if w != 0 || r != 0 {
                        tally.violations.fetch_add(1, Ordering::SeqCst);
                    }
                    let token = guard.fencing_token();
                    if tally.last_write_token.swap(token, Ordering::SeqCst) >= token {
                        tally.token_regressions.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    tally.writers.fetch_sub(1, Ordering::SeqCst);
                    tally.writes.fetch_add(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                } else {
                    let guard = rw.read().await.unwrap();
                    let r = tally.readers.fetch_add(1, Ordering::SeqCst) + 1;
                    tally.max_readers.fetch_max(r, Ordering::SeqCst);
                    if tally.writers.load(Ordering::SeqCst) != 0 {
                        tally.violations.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    tally.readers.fetch_sub(1, Ordering::SeqCst);
                    tally.reads.fetch_add(1, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (reads, writes) = (
        tally.reads.load(Ordering::SeqCst),
        tally.writes.load(Ordering::SeqCst),
    );
    let max_readers = tally.max_readers.load(Ordering::SeqCst);
    println!(
        "m21: {reads} reads + {writes} writes by {CLIENTS} sessions in {:?}; max concurrent readers = {max_readers}; \
         violations = {}, write token regressions = {}",
        started.elapsed(),
        tally.violations.load(Ordering::SeqCst),
        tally.token_regressions.load(Ordering::SeqCst)
    );
    assert_eq!((reads, writes), (720, 80));
    assert_eq!(tally.violations.load(Ordering::SeqCst), 0);
    assert_eq!(tally.token_regressions.load(Ordering::SeqCst), 0);
    assert!(max_readers > 1, "readers never shared the lock");
    assert!(sorted_children(&clients[0], "/rw").await.is_empty());
    close_all(clients).await;
}

/// docs/faults.md #21: a read→write upgrade is refused (instead of the self-deadlock Curator
/// documents); a second write inside the write guard's scope is reentrant; outside a scope,
/// and in another task, an acquire is a new contender.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m21_upgrade_refused() {
    let (_, [a]) = fresh_clients("recipes_upgrade", T).await;
    let rw = RwLock::new(a.clone(), "/rw");
    let read = rw.read().await.unwrap();
    assert_eq!(read.upgrade().err(), Some(LockError::UpgradeRefused));
    let in_scope = read.scope(async { rw.write().await.err() }).await;
    assert_eq!(in_scope, Some(LockError::UpgradeRefused));
    let other_handle = read
        .scope(async { rw.clone().try_write().await.err() })
        .await;
    assert_eq!(
        other_handle,
        Some(LockError::UpgradeRefused),
        "another handle in the scope: the same participant"
    );
    // A read inside the read scope is the same hold.
    let nested_read = read.scope(rw.read()).await.unwrap();
    assert_eq!(nested_read.path(), read.path());
    drop(nested_read);
    assert_eq!(
        sorted_children(&a, "/rw").await.len(),
        1,
        "no writer node was created"
    );
    // Outside the scope a writer is a new contender: it queues behind our reader.
    assert!(rw.try_write().await.unwrap().is_none());
    read.release().await.unwrap();

    // Write while writing is reentrant: a nested guard on the same node, no new node.
    let write = rw.write().await.unwrap();
    let nested = write.scope(rw.write_timeout(T)).await.unwrap();
    let again = write.lock_again().unwrap();
    assert_eq!(nested.path(), write.path());
    assert_eq!(again.path(), write.path());
    assert_eq!(sorted_children(&a, "/rw").await.len(), 1);
    write.release().await.unwrap();
    again.release().await.unwrap();
    assert_eq!(
        sorted_children(&a, "/rw").await.len(),
        1,
        "the nested guard holds on"
    );
    nested.release().await.unwrap();
    // Another task is another participant: it simply contends.
    let other = RwLock::new(a.clone(), "/rw");
    let r = rw.read().await.unwrap();
    let other_write = tokio::spawn(async move { other.try_write().await.unwrap().is_none() });
    assert!(other_write.await.unwrap(), "a reader holds");
    r.release().await.unwrap();
    assert!(sorted_children(&a, "/rw").await.is_empty());
}

/// docs/faults.md #21: downgrade. The read node ties with the writer's suffix, is granted at
/// once, and keeps a queued writer out after the write lock is released, while other readers
/// get in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m21_downgrade_allowed() {
    let (_, [a, b, c]) = fresh_clients("recipes_downgrade", T).await;
    let rw = RwLock::new(a.clone(), "/rw");
    let write = rw.write().await.unwrap();
    let writer_seq = write.path().rsplit("__WRIT__").next().unwrap().to_owned();

    // A writer queues behind us.
    let queued = RwLock::new(b.clone(), "/rw");
    let mut queued_write = Box::pin(queued.write());
    assert!(still_pending(&mut queued_write, Duration::from_millis(200)).await);

    let writer_token = write.fencing_token();
    let read = write.downgrade().await.unwrap();
    assert!(
        read.path().ends_with(&format!("__READ__{writer_seq}")),
        "tie layout: {}",
        read.path()
    );
    assert!(read.is_held());
    let stat = a.exists(read.path()).await.unwrap().unwrap();
    assert_eq!(stat.ephemeral_owner, a.session_id());
    // The tie node reports its writer's token, not its own later czxid: the writer queued
    // between them (czxid in between) must get a larger token than every hold before it.
    assert!(stat.czxid > writer_token);
    assert_eq!(read.fencing_token(), writer_token);
    // The queued writer stays out; a new reader queues behind that writer (FIFO), so only
    // one that came before the writer... none did: it waits too.
    assert!(
        still_pending(&mut queued_write, Duration::from_millis(300)).await,
        "a writer got in during the downgrade"
    );
    let third = RwLock::new(c.clone(), "/rw");
    assert!(
        third.try_read().await.unwrap().is_none(),
        "a reader after a queued writer waits"
    );
    read.release().await.unwrap();
    let w = tokio::time::timeout(T, queued_write)
        .await
        .expect("the writer gets in")
        .unwrap();
    assert!(
        w.fencing_token() > writer_token,
        "tokens never go backwards across the downgrade: {} after {writer_token}",
        w.fencing_token()
    );
    w.release().await.unwrap();

    // read() inside the write guard's scope is the same downgrade step.
    let write = rw.write().await.unwrap();
    let read = write.scope(rw.read()).await.unwrap();
    let other_reader = third.try_read().await.unwrap();
    assert!(other_reader.is_none(), "the write lock is still held");
    write.release().await.unwrap();
    let other_reader = third
        .try_read()
        .await
        .unwrap()
        .expect("readers share with the downgraded reader");
    other_reader.release().await.unwrap();
    read.release().await.unwrap();
    assert!(sorted_children(&a, "/rw").await.is_empty());
}

/// A downgrade node made by a peer (Curator ≥ 5.5: EPHEMERAL `_c_<uuid>-__READ__<writerSeq>`)
/// is tolerated: it blocks later writers, not readers. A tie read is refused if our write
/// node is gone (the create is a multi checked against it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ties_from_peers_and_lost_writer() {
    let (_, [a, peer]) = fresh_clients("recipes_ties", T).await;
    let peer_rw = RwLock::new(peer.clone(), "/rw");
    let w = peer_rw.write().await.unwrap();
    let seq = w.path().rsplit("__WRIT__").next().unwrap().to_owned();
    let tie = format!("/rw/_c_a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d-__READ__{seq}");
    peer.create(&tie, b"", &CreateOptions::ephemeral())
        .await
        .unwrap();
    w.release().await.unwrap();

    let rw = RwLock::new(a.clone(), "/rw");
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "the peer's tie read blocks writers"
    );
    let r = rw.try_read().await.unwrap().expect("but not readers");
    r.release().await.unwrap();
    peer.delete(&tie, None).await.unwrap();

    let w = rw.write().await.unwrap();
    peer.delete(w.path(), None).await.unwrap();
    let r = w.downgrade_read().await;
    assert!(matches!(r, Err(LockError::Lost(_))), "{r:?}");
    assert!(
        sorted_children(&a, "/rw").await.is_empty(),
        "nothing left: {:?}",
        sorted_children(&a, "/rw").await
    );
}

/// Inside a write scope, a read taken through another handle of the client (another chroot)
/// ties with the writer's node as that handle names it, and so does a downgrade of a write
/// guard nested through it: neither takes the healthy write lock for lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_tied_through_another_chroot_finds_the_writer() {
    let (_, [client]) = fresh_clients("rw_chroot_tie", T).await;
    let write = RwLock::new(client.clone(), "/app/locks/rw")
        .write()
        .await
        .unwrap();
    let chrooted = RwLock::new(client.chroot("/app").unwrap(), "/locks/rw");
    let read = write.scope(chrooted.read()).await.unwrap();
    assert!(read.is_held());
    assert!(read.path().starts_with("/locks/rw/"), "{}", read.path());
    let nested_write = write.scope(chrooted.write()).await.unwrap();
    let downgraded = nested_write.downgrade_read().await.unwrap();
    assert_eq!(downgraded.fencing_token(), write.fencing_token());
    for guard in [read, downgraded] {
        guard.release().await.unwrap();
    }
    nested_write.release().await.unwrap();
    write.release().await.unwrap();
    assert!(sorted_children(&client, "/app/locks/rw").await.is_empty());
    close_all([client]).await;
}
