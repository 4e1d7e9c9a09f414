//! Recipes that rely on the server's container manager, against real servers whose manager
//! runs every 100 ms (their own: the shared one keeps ZooKeeper's 60 s default).
//!
//! `PersistentTtlNode`: the container and its `touch` child stay while the node is kept,
//! `close()` deletes both, and once the keeping process is gone (its client closed) the child
//! expires after the TTL and the container goes with it; on a server without TTL nodes the
//! touching stops at the first refusal. `AtomicCounter`: its parents are containers, as
//! Curator's are, so the server removes them once the counter is deleted.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use zkwire::proto::OpCode;
use zkwire::Client;
use zkwire_recipes::{AtomicCounter, PersistentTtlNode};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::{ServerConfig, ZkServer};
use zkwire_testing::support::connect_with_timeout;

const T: Duration = Duration::from_secs(4);
const TTL: Duration = Duration::from_secs(1);
/// The bound of every wait.
const STEP: Duration = Duration::from_secs(20);

/// A server reaping empty containers every 100 ms, shared by the tests of this binary (each
/// under its own path); `ttl` says whether it allows TTL nodes.
fn config(ttl: bool) -> ServerConfig {
    ServerConfig::default()
        .jvm_prop("znode.container.checkIntervalMs", "100")
        .jvm_prop("zookeeper.extendedTypesEnabled", ttl.to_string())
}

/// The shared server of [`config`]`(true)`, started on first use.
fn server() -> &'static ZkServer {
    static SHARED: OnceLock<ZkServer> = OnceLock::new();
    SHARED.get_or_init(|| ZkServer::start_with(config(true)).unwrap())
}

async fn exists(client: &Client, path: &str) -> bool {
    client.exists(path).await.unwrap().is_some()
}

/// Polls until neither `path` nor its child `touch` exists; how long that took.
async fn wait_until_gone(client: &Client, path: &str) -> Duration {
    let started = Instant::now();
    while exists(client, path).await {
        assert!(started.elapsed() < STEP, "{path} still exists");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// Starts a TTL node at `path` held by `keeper`, waits for its initial create, and polls until
/// `observer` sees its touch child.
async fn start_touched(
    keeper: &Client,
    path: &str,
    data: &'static str,
    observer: &Client,
) -> PersistentTtlNode {
    let node = PersistentTtlNode::new(keeper.clone(), path, TTL, data);
    node.start();
    assert!(node.wait_for_initial_create(STEP).await.unwrap());
    let deadline = Instant::now() + STEP;
    while !exists(observer, node.touch_path()).await {
        assert!(Instant::now() < deadline, "never touched");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_container_lives_while_touched_and_goes_a_ttl_after_its_keeper() {
    let cs = tokio::task::block_in_place(server).connect_string();
    let observer = connect_with_timeout(&cs, T).await;

    // Kept: the container and its child outlive several TTLs.
    let keeper = connect_with_timeout(&cs, T).await;
    let node = start_touched(&keeper, "/jobs/a", "running", &observer).await;
    tokio::time::sleep(3 * TTL).await;
    let (data, stat) = observer.get_data("/jobs/a").await.unwrap();
    assert_eq!(&data[..], b"running");
    assert_eq!(stat.num_children, 1, "the touch child");
    assert!(
        exists(&observer, "/jobs/a/touch").await,
        "touched, so not expired"
    );

    // Closed: both go at once.
    node.close().await.unwrap();
    assert!(!exists(&observer, "/jobs/a").await, "deleted by close");

    // The keeper's process gone (its client closed): the child expires after the TTL, then
    // the server reaps the empty container.
    let node = start_touched(&keeper, "/jobs/b", "", &observer).await;
    keeper.close().await.unwrap();
    let took = wait_until_gone(&observer, "/jobs/b").await;
    println!("the container went {took:?} after its keeper");
    assert!(took >= TTL / 2, "gone only once the TTL ran out: {took:?}");
    drop(node);
    observer.close().await.unwrap();
}

/// On a server without TTL nodes the first touch is refused (`Unimplemented`) and touching
/// stops: no second `createTTL` is sent. The container, which never had a child, is not
/// reaped; `close()` deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ttl_nodes_touching_stops_at_the_first_refusal() {
    let server = tokio::task::block_in_place(|| ZkServer::start_with(config(false))).unwrap();
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    // A second createTTL would be cut at once, and counted.
    proxy.cut_after_request(OpCode::CreateTtl, 2);
    let keeper = connect_with_timeout(&proxy.connect_string(), T).await;
    let node = PersistentTtlNode::new(keeper.clone(), "/no-ttl", TTL, "kept");
    node.start();
    assert!(node.wait_for_initial_create(STEP).await.unwrap());
    // The touch comes every half TTL: six times its period.
    tokio::time::sleep(3 * TTL).await;
    assert_eq!(proxy.triggered(), 0, "a createTTL was sent again");
    let (data, stat) = keeper.get_data("/no-ttl").await.unwrap();
    assert_eq!((&data[..], stat.num_children), (&b"kept"[..], 0));
    node.close().await.unwrap();
    assert!(!exists(&keeper, "/no-ttl").await, "deleted by close");
    keeper.close().await.unwrap();
    // Stopped by its drop, which waits for the process.
    tokio::task::block_in_place(move || drop(server));
}

/// An `AtomicCounter`'s parents are containers: once the counter node is deleted, the server
/// removes the parents it made (a persistent parent would stay for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counters_parents_go_once_the_counter_is_deleted() {
    let cs = tokio::task::block_in_place(server).connect_string();
    let client = connect_with_timeout(&cs, T).await;
    let counter = AtomicCounter::new(client.clone(), "/counters/jobs/done");
    assert_eq!(counter.increment().await.unwrap(), Some(1));
    client.delete("/counters/jobs/done", None).await.unwrap();
    let took = wait_until_gone(&client, "/counters").await;
    println!("the counter's parents went {took:?} after it");
    client.close().await.unwrap();
}
