//! Names and owners here; guid recovery against a real server (the rest is in
//! `recipes/tests/persistent.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use zkwire_testing::support::fresh_chroot;

use super::worker::session_owned;
use super::*;

/// A worker for `node`, as `start` makes it, without running it.
fn worker(node: &PersistentNode, close: &watch::Sender<bool>) -> Worker {
    Worker {
        run: 0,
        published: None,
        client: node.client.clone(),
        spec: node.spec.clone(),
        shared: Arc::clone(&node.shared),
        closed: close.subscribe(),
        unsure: false,
        unsure_at_path: false,
        claim: true,
        sessions: Vec::new(),
        held: Held::default(),
    }
}

/// Creates `n` nodes named with `node`'s guid under `/q`, as creates applied unseen.
async fn plant(client: &Client, node: &PersistentNode, mode: CreateMode, n: usize) -> Vec<String> {
    let options = CreateOptions::new(mode).with_container_parents();
    let mut planted = Vec::new();
    for _ in 0..n {
        let (path, _) = client
            .create_all(&node.spec.target(), b"", &options)
            .await
            .unwrap();
        planted.push(path);
    }
    planted
}

/// On a fresh chroot `name`: its connect string, a client, a node `/q/item-` of `mode` on
/// that client with data `data`, the sender that would close it (to keep) and its worker.
async fn setup(
    name: &str,
    mode: CreateMode,
) -> (String, Client, PersistentNode, watch::Sender<bool>, Worker) {
    let cs = fresh_chroot(name).await;
    let c = Client::connect(&cs).await.unwrap();
    let node = PersistentNode::new(c.clone(), "/q/item-", mode, "data");
    let (close, _) = watch::channel(false);
    let worker = worker(&node, &close);
    (cs, c, node, close, worker)
}

/// Plants `n` nodes with `node`'s guid through `by`, then makes one attempt of `worker` as
/// after a create whose outcome it did not see; the planted paths and the attempt's node.
async fn plant_then_retry(
    worker: &mut Worker,
    by: &Client,
    node: &PersistentNode,
    mode: CreateMode,
    n: usize,
) -> (Vec<String>, Option<String>) {
    let planted = plant(by, node, mode, n).await;
    worker.unsure = true;
    (planted, worker.attempt().await.unwrap())
}

async fn children(client: &Client) -> Vec<String> {
    let mut names = client.get_children("/q").await.unwrap();
    names.sort();
    names.into_iter().map(|n| path::join("/q", &n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsure_create_adopts_our_sessions_node_and_deletes_its_duplicates() {
    let mode = CreateMode::EphemeralSequential;
    let (_cs, c, node, _close, mut worker) = setup("persistent_guid_ours", mode).await;
    let (planted, adopted) = plant_then_retry(&mut worker, &c, &node, mode, 2).await;
    assert_eq!(
        adopted.as_ref(),
        Some(&planted[0]),
        "the first one, not a new one"
    );
    assert_eq!(children(&c).await, planted[..1], "the duplicate is gone");
    assert!(!worker.unsure);
    let (data, _) = c.get_data(&planted[0]).await.unwrap();
    assert_eq!(&data[..], b"data", "our data written into it");
    assert_eq!(node.actual_path(), Some(planted[0].clone()));
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsure_create_ignores_another_sessions_ephemeral_node_with_our_guid() {
    let mode = CreateMode::EphemeralSequential;
    let (cs, c, node, _close, mut worker) = setup("persistent_guid_theirs", mode).await;
    let other = Client::connect(&cs).await.unwrap();
    // An old session of ours: its node goes with it.
    let (theirs, ours) = plant_then_retry(&mut worker, &other, &node, mode, 1).await;
    let ours = ours.unwrap();
    assert_ne!(ours, theirs[0]);
    assert_eq!(children(&c).await.len(), 2, "theirs untouched");
    let (_, stat) = c.get_data(&ours).await.unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id());
    c.close().await.unwrap();
    other.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsure_persistent_create_adopts_the_first_node_with_our_guid() {
    let mode = CreateMode::PersistentSequential;
    let (_cs, c, node, _close, mut worker) = setup("persistent_guid_persistent", mode).await;
    // Persistent nodes have no owner: the guid alone says they are ours.
    let (planted, adopted) = plant_then_retry(&mut worker, &c, &node, mode, 3).await;
    assert_eq!(adopted.as_ref(), Some(&planted[0]));
    assert_eq!(children(&c).await, planted[..1]);
    c.close().await.unwrap();
}

#[test]
fn split_and_protected_target() {
    assert_eq!(split("/a/b-"), ("/a", "b-"));
    assert_eq!(split("/a/"), ("/a", ""));
    assert_eq!(split("/b"), ("/", "b"));
    let spec = Spec {
        path: "/svc/node-".into(),
        mode: CreateMode::EphemeralSequential,
        ttl: None,
        acl: Acl::open_unsafe(),
        protected: true,
        parents: true,
        prefix: "_c_00000000-0000-4000-8000-000000000000-".into(),
    };
    assert_eq!(
        spec.target(),
        "/svc/_c_00000000-0000-4000-8000-000000000000-node-"
    );
    assert_eq!(spec.parent(), "/svc");
    let plain = Spec {
        protected: false,
        ..spec
    };
    assert_eq!(plain.target(), "/svc/node-");
}

#[test]
fn owners_that_are_sessions() {
    assert!(session_owned(0x0100_0000_0000_0001));
    assert!(!session_owned(0), "persistent");
    assert!(!session_owned(i64::MIN), "container");
    let ttl = i64::from_be_bytes([0xff, 0, 0, 0, 0, 0, 0xea, 0x60]);
    assert!(!session_owned(ttl), "TTL");
}
