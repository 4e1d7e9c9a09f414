//! Interop with the real Apache Curator 5.4.0 (Debian `libcurator-recipes-java`): zkwire and
//! Curator contenders on the same path for the mutex, the read/write lock and the
//! semaphore, checked by a referee.
//!
//! `recipes/interop/CuratorContender.java` is compiled here with `javac` and run as one
//! JVM of N threads, each with its own Curator session. Every holder — Curator thread or
//! zkwire task — reports `ENTER` after its acquire returns and `EXIT` before it releases
//! to a referee run by this test (Curator over TCP on 127.0.0.1, zkwire in process; shared
//! with kazoo.rs in `support/referee.rs`). The referee answers only after recording, so its
//! "inside" interval of a holder lies within the real hold: any overlap it sees is a real
//! exclusion violation. It checks: mutex, at most one inside; read/write lock, at most one
//! writer and no reader with a writer; semaphore, at most the SharedCount limit of leases
//! inside.
//!
//! Missing java, javac or Curator jars fail the tests with what to install
//! (`apt-get install -y libcurator-recipes-java`); they never skip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::referee::{Kind, Referee, Tally};
use support::CuratorJvm;
use support::{close_all, connect, connect_all, hold};
use zkwire::{Client, CreateOptions};
use zkwire_recipes::{LockOptions, Semaphore, SemaphoreLimit};
use zkwire_testing::support::fresh_chroot;

/// The three tests share two cores with the server and a JVM: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const LOCK: &str = "/lock";
/// Each side's share of a recipe's acquisitions.
const PER_SIDE: usize = 600;
const ZKWIRE_TASKS: usize = 4;

/// The Curator JVM of `CuratorContender.java`, started and waiting for GO.
async fn curator(
    cs: &str,
    referee: &Referee,
    recipe: &str,
    (threads, cycles): (usize, usize),
    param: &str,
) -> CuratorJvm {
    let program = ("CuratorContender.java", "CuratorContender");
    CuratorJvm::contenders(
        program,
        cs,
        referee,
        (recipe, LOCK),
        (threads, cycles),
        &[param],
    )
    .await
}

/// Prints and checks a finished run.
fn report(
    name: &str,
    referee: &Referee,
    curator_done: usize,
    zkwire_done: usize,
    took: Duration,
) -> Tally {
    let tally = referee.take();
    let sides = ("interop", "Curator");
    let (curator, zkwire) = tally.check_run(sides, name, curator_done, took);
    assert_eq!(zkwire, zkwire_done);
    assert!(
        curator >= PER_SIDE && zkwire >= PER_SIDE,
        "half Curator, half zkwire"
    );
    tally
}

/// Checks that no node is left under the lock, then closes the clients.
async fn no_node_left(clients: Vec<Client>) {
    assert!(
        clients[0].get_children(LOCK).await.unwrap().is_empty(),
        "no node left"
    );
    close_all(clients).await;
}

/// Mutex: 4 Curator `InterProcessMutex` threads and 4 zkwire tasks, 150 cycles each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_mutex_with_curator() {
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_interop_mutex").await;
    let referee = Arc::new(Referee::start(0));
    let curator = curator(&cs, &referee, "mutex", (4, PER_SIDE / 4), "-").await;
    let clients = connect_all(&cs, ZKWIRE_TASKS).await;
    let options = LockOptions::new();
    let (curator_done, took) = curator
        .race(|| support::mutex_tasks(&clients, LOCK, &options, PER_SIDE / ZKWIRE_TASKS, &referee))
        .await;
    report("mutex", &referee, curator_done, PER_SIDE, took);
    no_node_left(clients).await;
}

/// Read/write lock: 4 Curator `InterProcessReadWriteLock` threads and 4 zkwire tasks, 150
/// cycles each, 20% writes. No downgrade: Curator 5.4.0 predates CURATOR-621.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_rwlock_with_curator() {
    const WRITE_PERCENT: usize = 20;
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_interop_rw").await;
    let referee = Arc::new(Referee::start(0));
    let write_percent = WRITE_PERCENT.to_string();
    let curator = curator(&cs, &referee, "rw", (4, PER_SIDE / 4), &write_percent).await;
    let clients = connect_all(&cs, ZKWIRE_TASKS).await;
    let options = LockOptions::new();
    let (curator_done, took) = curator
        .race(|| {
            let cycles = PER_SIDE / ZKWIRE_TASKS;
            support::rw_tasks(&clients, LOCK, &options, cycles, WRITE_PERCENT, &referee)
        })
        .await;
    let tally = report("rw", &referee, curator_done, PER_SIDE, took);
    println!(
        "interop rw: max readers together {}; reads entered next to the other side's readers {}",
        tally.max_readers, tally.shared_reads
    );
    tally.check_rw("Curator");
    no_node_left(clients).await;
}

/// Semaphore: Curator `InterProcessSemaphoreV2` with a `SharedCount` limit of 4 (2 threads ×
/// 300 cycles) and zkwire's `Semaphore` reading the same node (4 tasks × 150 cycles); each
/// acquire takes 1 or 2 leases. (With at most 2 Curator threads taking at most 2 leases,
/// Curator's per-lease locking cannot deadlock under a limit of 4.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_semaphore_with_curator() {
    const MAX: u32 = 4;
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_interop_sem").await;
    let admin = connect(&cs).await;
    // A Curator SharedCount node: 4 bytes, big-endian.
    admin
        .create("/count", &MAX.to_be_bytes(), &CreateOptions::persistent())
        .await
        .unwrap();
    let referee = Arc::new(Referee::start(MAX));
    let mut curator = curator(&cs, &referee, "semaphore", (2, PER_SIDE / 2), "/count:2").await;
    let clients = connect_all(&cs, ZKWIRE_TASKS).await;
    let started = Instant::now();
    curator.go();
    assert_eq!(
        curator.next_line(Duration::from_secs(30)).await,
        format!("COUNT {MAX}"),
        "Curator reads our count"
    );
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(t, client)| {
            let limit = SemaphoreLimit::SharedCount("/count".into());
            let (sem, referee) = (Semaphore::new(client.clone(), LOCK, limit), referee.clone());
            tokio::spawn(async move {
                for step in 0..PER_SIDE / ZKWIRE_TASKS {
                    let n = 1 + (step + t) % 2;
                    let leases = sem.acquire(n).await.unwrap();
                    let kind = Kind::Leases(u32::try_from(n).unwrap());
                    referee.enter(kind);
                    hold(step).await;
                    referee.exit(kind);
                    for lease in leases {
                        lease.release().await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let curator_done = curator.finish().await;
    let tally = report(
        "semaphore",
        &referee,
        curator_done,
        PER_SIDE,
        started.elapsed(),
    );
    println!(
        "interop semaphore: leases granted Curator {} zkwire {}; max leases inside {} (limit {MAX}); \
         acquires entered next to the other side's leases {}",
        tally.leases_granted[0], tally.leases_granted[1], tally.max_leases_inside, tally.shared_leases
    );
    assert_eq!(tally.max_leases_inside, MAX, "the limit was reached");
    assert!(
        tally.shared_leases > 0,
        "Curator and zkwire held leases together"
    );
    assert!(
        admin.get_children("/lock/leases").await.unwrap().is_empty(),
        "no lease left"
    );
    assert!(admin.get_children("/lock/locks").await.unwrap().is_empty());
    close_all(clients).await;
    admin.close().await.unwrap();
}

/// The control: zkwire contenders on another path than Curator's do not exclude them, and
/// the referee must see it. Shows that the checks above can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_referee_catches_a_broken_exclusion() {
    const CYCLES: usize = 100;
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_interop_control").await;
    let referee = Arc::new(Referee::start(0));
    let curator = curator(&cs, &referee, "mutex", (2, CYCLES / 2), "-").await;
    let clients = connect_all(&cs, 2).await;
    let options = LockOptions::new();
    curator
        .race(|| support::mutex_tasks(&clients, "/elsewhere", &options, CYCLES / 2, &referee))
        .await;
    let violations = referee.violations();
    println!("interop control: {violations} violations seen with the zkwire side on another path");
    assert!(violations > 0, "the referee missed a broken exclusion");
    close_all(clients).await;
}
