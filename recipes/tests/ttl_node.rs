//! `PersistentTtlNode` against a real server whose container manager runs every 100 ms (its
//! own server: the shared one keeps ZooKeeper's 60 s default): the container and its `touch`
//! child stay while the node is kept, `close()` deletes both, and once the keeping process
//! is gone (its client closed) the child expires after the TTL and the container goes with
//! it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use zkwire::Client;
use zkwire_recipes::PersistentTtlNode;
use zkwire_testing::server::{ServerConfig, ZkServer};
use zkwire_testing::support::connect_with_timeout;

const T: Duration = Duration::from_secs(4);
const TTL: Duration = Duration::from_secs(1);
/// The bound of every wait.
const STEP: Duration = Duration::from_secs(20);

fn server() -> ZkServer {
    let config = ServerConfig::default().jvm_prop("znode.container.checkIntervalMs", "100");
    ZkServer::start_with(config).unwrap()
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
    let server = tokio::task::block_in_place(server);
    let cs = server.connect_string();
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
