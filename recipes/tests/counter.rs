//! Shared counters against real Curator 5.4.0 on the same nodes: zkwire tasks and a Curator
//! JVM increment one `SharedCount` and one `DistributedAtomicLong` at once, and no update is
//! lost (the final value is the sum of every side's increments); each side reads the other's
//! encoding.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::time::Duration;

use support::{connect, joined, CuratorJvm};
use zkwire::{AddWatchMode, Client, EventType};
use zkwire_recipes::{AtomicCounter, SharedCount};
use zkwire_testing::support::fresh_chroot;

/// Increments per zkwire task and by Curator.
const EACH: usize = 100;
/// zkwire tasks, each with its own session.
const TASKS: usize = 2;

/// Runs Curator's `kind` counter client on `path` for `EACH` increments while `zkwire` runs;
/// returns the last value Curator saw.
async fn with_curator<F: std::future::Future>(cs: &str, kind: &str, path: &str, zkwire: F) -> i64 {
    let each = EACH.to_string();
    let args = [cs, kind, path, each.as_str()];
    let mut jvm = CuratorJvm::start("CuratorCounter.java", "CuratorCounter", &args).await;
    jvm.go();
    zkwire.await;
    i64::try_from(jvm.finish().await).unwrap()
}

/// zkwire's side: [`TASKS`] tasks, each running `task` on a client of its own session;
/// returns what each returned.
async fn zkwire_tasks<T, F, Fut>(cs: &str, task: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Client) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        tasks.push(tokio::spawn(task(connect(cs).await)));
    }
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.unwrap());
    }
    outputs
}

/// Prints the `total` of the counter `what` after a run (`more` said after it) and checks
/// that no update was lost: every zkwire and Curator increment counted.
fn no_lost_update(what: &str, total: i64, curator_last: i64, more: &str) {
    println!(
        "{what}: {total} after {TASKS}×{EACH} zkwire + {EACH} Curator increments (Curator last \
         saw {curator_last}){more}"
    );
    assert_eq!(
        total,
        i64::try_from((TASKS + 1) * EACH).unwrap(),
        "no lost update"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_count_with_curator_loses_no_update() {
    let cs = fresh_chroot("counter_shared").await;
    let path = "/shared";
    let seed = connect(&cs).await;
    SharedCount::new(seed.clone(), path)
        .ensure(0)
        .await
        .unwrap();
    let zkwire = zkwire_tasks(&cs, |client| async move {
        let count = SharedCount::new(client, path);
        for _ in 0..EACH {
            loop {
                let seen = count.get().await.unwrap();
                if count.try_set(seen.value + 1, seen.version).await.unwrap() {
                    break;
                }
            }
        }
    });
    let curator_last = with_curator(&cs, "shared", path, zkwire).await;
    let total = SharedCount::new(seed, path).get().await.unwrap().value;
    no_lost_update("SharedCount", total.into(), curator_last, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_counter_with_curator_loses_no_update() {
    let cs = fresh_chroot("counter_atomic").await;
    let path = "/atomic";
    let zkwire = zkwire_tasks(&cs, |client| async move {
        let counter = AtomicCounter::new(client, path).with_attempts(1_000);
        for _ in 0..EACH {
            counter
                .increment()
                .await
                .unwrap()
                .expect("won within 1,000 attempts");
        }
    });
    let curator_last = with_curator(&cs, "atomic", path, zkwire).await;
    let total = AtomicCounter::new(connect(&cs).await, path)
        .get()
        .await
        .unwrap();
    no_lost_update("DistributedAtomicLong", total, curator_last, "");
}

/// Both sides in promoted mode on one lock (`<path>-lock`): one optimistic try, then the
/// mutex. Writers that lost their try queue on it, zkwire's and Curator's alike, and still
/// no update is lost. The lock nodes created under the lock path are counted from a
/// persistent recursive watch, to show the promotion was taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promoted_counter_with_curator_loses_no_update() {
    let cs = fresh_chroot("counter_promoted").await;
    let path = "/promoted";
    let lock_path = "/promoted-lock";
    let observer = connect(&cs).await;
    let mut watch = observer
        .add_watch(lock_path, AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let lock_nodes = tokio::spawn(async move {
        let mut created = 0usize;
        while let Some(event) = watch.next().await {
            if event.event_type == EventType::NodeCreated && event.path.contains("-lock-") {
                created += 1;
            }
        }
        created
    });
    let zkwire = async {
        let gave_up: usize = zkwire_tasks(&cs, |client| async move {
            let counter = AtomicCounter::new(client, path)
                .with_attempts(1)
                .with_promotion(lock_path, Duration::from_secs(30));
            let mut gave_up = 0usize;
            for _ in 0..EACH {
                // Under the mutex one try can still lose to a writer that has not taken it
                // yet: call again, as a caller would.
                while counter.increment().await.unwrap().is_none() {
                    gave_up += 1;
                }
            }
            gave_up
        })
        .await
        .into_iter()
        .sum();
        println!("promoted: zkwire calls that changed nothing: {gave_up}");
    };
    let curator_last = with_curator(&cs, "promoted", path, zkwire).await;
    let total = AtomicCounter::new(observer.clone(), path)
        .get()
        .await
        .unwrap();
    observer.close().await.unwrap();
    let lock_nodes = lock_nodes.await.unwrap();
    let more = format!("; {lock_nodes} lock nodes created");
    no_lost_update("promoted DistributedAtomicLong", total, curator_last, &more);
    assert!(lock_nodes > 0, "no writer was promoted to the lock");
}

/// `SharedCount::changes` yields the current value, then a value Curator's `setCount` wrote
/// (written here the same way: an unconditional 4-byte write), then the deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_count_changes_follow_the_node() {
    let cs = fresh_chroot("counter_changes").await;
    let client = connect(&cs).await;
    let count = SharedCount::new(client.clone(), "/limit");
    count.ensure(5).await.unwrap();
    let mut changes = count.changes();
    assert_eq!(changes.next().await.unwrap().value, 5);
    let writer = SharedCount::new(connect(&cs).await, "/limit");
    let next = tokio::spawn(async move { changes.next().await.map(|v| (v.value, changes)) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!next.is_finished(), "no change yet");
    writer.set(7).await.unwrap();
    let (value, mut changes) = joined(next, Duration::from_secs(10)).await.unwrap();
    assert_eq!(value, 7);
    client.delete("/limit", None).await.unwrap();
    assert_eq!(changes.next().await.err(), Some(zkwire::Error::NoNode));
}

/// Nodes of other sizes read as Curator reads them: a `DistributedAtomicLong` node that is
/// empty (made by another tool) is 0 and can be added to, and only the first 8 bytes of a
/// longer one count; a `SharedCount` node's first 4 bytes; fewer bytes than that are an
/// error. (Anything but exactly 8 or 4 bytes was refused, where Curator read and wrote on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_nodes_of_other_sizes_read_as_curator_reads_them() {
    let cs = fresh_chroot("counter_sizes").await;
    let client = connect(&cs).await;
    let persistent = zkwire::CreateOptions::persistent();
    client.create("/empty", b"", &persistent).await.unwrap();
    let empty = AtomicCounter::new(client.clone(), "/empty");
    assert_eq!(empty.get().await.unwrap(), 0);
    assert_eq!(empty.add(5).await.unwrap(), Some(5));
    let (data, _) = client.get_data("/empty").await.unwrap();
    assert_eq!(&data[..], &5_i64.to_be_bytes());

    let mut long = 42_i64.to_be_bytes().to_vec();
    long.extend_from_slice(b"tail");
    client.create("/long", &long, &persistent).await.unwrap();
    assert_eq!(
        AtomicCounter::new(client.clone(), "/long")
            .get()
            .await
            .unwrap(),
        42
    );
    let mut count = 7_i32.to_be_bytes().to_vec();
    count.extend_from_slice(b"xy");
    client.create("/count", &count, &persistent).await.unwrap();
    let shared = SharedCount::new(client.clone(), "/count");
    assert_eq!(shared.get().await.unwrap().value, 7);

    client.create("/short", b"abc", &persistent).await.unwrap();
    let short = AtomicCounter::new(client.clone(), "/short").get().await;
    assert_eq!(short, Err(zkwire::Error::BadArguments));
    let short = SharedCount::new(client.clone(), "/short").get().await;
    assert_eq!(short.map(|v| v.value), Err(zkwire::Error::BadArguments));
    client.close().await.unwrap();
}
