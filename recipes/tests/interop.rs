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
use support::{connect, hold};
use zkwire::CreateOptions;
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
    threads: usize,
    cycles: usize,
    param: &str,
) -> CuratorJvm {
    let port = referee.port.to_string();
    let (threads, cycles) = (threads.to_string(), cycles.to_string());
    let args = [cs, &port, recipe, LOCK, &threads, &cycles, param];
    CuratorJvm::start("CuratorContender.java", "CuratorContender", &args).await
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
    let curator: usize = tally.acquisitions[0].iter().sum();
    let zkwire: usize = tally.acquisitions[1].iter().sum();
    println!(
        "interop {name}: {} acquisitions in {took:?} — Curator {curator} {:?}, zkwire {zkwire} {:?} \
         [mutex, read, write, semaphore]; side switches {}; violations {}",
        curator + zkwire,
        tally.acquisitions[0],
        tally.acquisitions[1],
        tally.side_switches,
        tally.violations.len(),
    );
    assert!(
        tally.violations.is_empty(),
        "exclusion violations: {:?}",
        tally.violations
    );
    assert_eq!(
        curator, curator_done,
        "every Curator acquisition reached the referee"
    );
    assert_eq!(zkwire, zkwire_done);
    assert!(
        curator >= PER_SIDE && zkwire >= PER_SIDE,
        "half Curator, half zkwire"
    );
    // The two sides really interleaved, not one after the other.
    assert!(
        tally.side_switches >= 50,
        "only {} hand-overs between the sides",
        tally.side_switches
    );
    tally
}

/// Mutex: 4 Curator `InterProcessMutex` threads and 4 zkwire tasks, 150 cycles each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_mutex_with_curator() {
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_interop_mutex").await;
    let referee = Arc::new(Referee::start(0));
    let mut curator = curator(&cs, &referee, "mutex", 4, PER_SIDE / 4, "-").await;
    let mut clients = Vec::new();
    for _ in 0..ZKWIRE_TASKS {
        clients.push(connect(&cs).await);
    }
    let started = Instant::now();
    curator.go();
    let tasks = support::mutex_tasks(
        &clients,
        LOCK,
        &LockOptions::new(),
        PER_SIDE / ZKWIRE_TASKS,
        &referee,
    );
    for task in tasks {
        task.await.unwrap();
    }
    let curator_done = curator.finish().await;
    report("mutex", &referee, curator_done, PER_SIDE, started.elapsed());
    let observer = &clients[0];
    assert!(
        observer.get_children(LOCK).await.unwrap().is_empty(),
        "no node left"
    );
    for c in clients {
        c.close().await.unwrap();
    }
}

/// Read/write lock: 4 Curator `InterProcessReadWriteLock` threads and 4 zkwire tasks, 150
/// cycles each, 20% writes. No downgrade: Curator 5.4.0 predates CURATOR-621.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_rwlock_with_curator() {
    const WRITE_PERCENT: usize = 20;
    let _serial = SERIAL.lock().await;
    let cs = fresh_chroot("recipes_interop_rw").await;
    let referee = Arc::new(Referee::start(0));
    let mut curator = curator(
        &cs,
        &referee,
        "rw",
        4,
        PER_SIDE / 4,
        &WRITE_PERCENT.to_string(),
    )
    .await;
    let mut clients = Vec::new();
    for _ in 0..ZKWIRE_TASKS {
        clients.push(connect(&cs).await);
    }
    let started = Instant::now();
    curator.go();
    let tasks = support::rw_tasks(
        &clients,
        LOCK,
        &LockOptions::new(),
        PER_SIDE / ZKWIRE_TASKS,
        WRITE_PERCENT,
        &referee,
    );
    for task in tasks {
        task.await.unwrap();
    }
    let curator_done = curator.finish().await;
    let tally = report("rw", &referee, curator_done, PER_SIDE, started.elapsed());
    println!(
        "interop rw: max readers together {}; reads entered next to the other side's readers {}",
        tally.max_readers, tally.shared_reads
    );
    assert!(
        tally.acquisitions[0][2] > 0 && tally.acquisitions[1][2] > 0,
        "both sides wrote"
    );
    assert!(tally.max_readers > 1, "readers shared the lock");
    assert!(
        tally.shared_reads > 0,
        "Curator and zkwire readers held the lock together"
    );
    assert!(
        clients[0].get_children(LOCK).await.unwrap().is_empty(),
        "no node left"
    );
    for c in clients {
        c.close().await.unwrap();
    }
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
    let mut curator = curator(&cs, &referee, "semaphore", 2, PER_SIDE / 2, "/count:2").await;
    let mut clients = Vec::new();
    for _ in 0..ZKWIRE_TASKS {
        clients.push(connect(&cs).await);
    }
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
    for c in clients {
        c.close().await.unwrap();
    }
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
    let mut curator = curator(&cs, &referee, "mutex", 2, CYCLES / 2, "-").await;
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(connect(&cs).await);
    }
    curator.go();
    let tasks = support::mutex_tasks(
        &clients,
        "/elsewhere",
        &LockOptions::new(),
        CYCLES / 2,
        &referee,
    );
    for task in tasks {
        task.await.unwrap();
    }
    curator.finish().await;
    let violations = referee.violations();
    println!("interop control: {violations} violations seen with the zkwire side on another path");
    assert!(violations > 0, "the referee missed a broken exclusion");
    for c in clients {
        c.close().await.unwrap();
    }
}
