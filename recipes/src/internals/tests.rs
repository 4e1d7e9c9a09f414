//! Guid protection against a real server: adoption only of our own session's node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use zkwire::CreateOptions;
use zkwire_testing::support::fresh_chroot;

use super::*;
use crate::sequence::MUTEX_MARKERS;

fn mutex_contest() -> Contest {
    Contest::exclusive("lock-", MUTEX_MARKERS)
}

/// The directory `/lock` of a session, created (its containers), and another session.
async fn setup(name: &str) -> (Dir, Client) {
    let cs = fresh_chroot(name).await;
    let a = Client::connect(&cs).await.unwrap();
    let b = Client::connect(&cs).await.unwrap();
    let dir = Dir::new(a, "/lock".into(), LockOptions::default());
    create_containers(&dir.client, "/lock", &dir.options)
        .await
        .unwrap();
    (dir, b)
}

async fn plant(client: &Client, prefix: &str) -> String {
    let opts = CreateOptions::ephemeral_sequential();
    client
        .create(&format!("/lock/{prefix}lock-"), b"", &opts)
        .await
        .unwrap()
        .0
}

async fn children(client: &Client) -> Vec<String> {
    let mut c = client.get_children("/lock").await.unwrap();
    c.sort();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_our_session_with_our_guid_is_adopted() {
    let (dir, _b) = setup("guid_adopt").await;
    let mut attempt = Attempt::new(&dir);
    // As if an earlier create had applied but its reply was lost.
    let planted = plant(&dir.client, &attempt.prefix).await;
    attempt.unsure = true;
    attempt.create(&mutex_contest()).await.unwrap();
    let node = attempt.node.clone().unwrap();
    assert_eq!(node.path, planted, "adopted, not created again");
    assert_eq!(node.stat.ephemeral_owner, dir.client.session_id());
    assert!(
        node.stat.czxid > 0,
        "the Stat comes from exists: {:?}",
        node.stat
    );
    assert_eq!(children(&dir.client).await.len(), 1);
    attempt.abandon().await;
    assert!(children(&dir.client).await.is_empty(), "abandon removed it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_another_session_with_our_guid_is_not_adopted() {
    let (dir, b) = setup("guid_foreign_session").await;
    let mut attempt = Attempt::new(&dir);
    // Same guid, another session (an old session of ours, CURATOR-498, or an impostor).
    let theirs = plant(&b, &attempt.prefix).await;
    attempt.unsure = true;
    attempt.create(&mutex_contest()).await.unwrap();
    let ours = attempt.node.clone().unwrap();
    assert_ne!(ours.path, theirs);
    assert_eq!(ours.stat.ephemeral_owner, dir.client.session_id());
    assert_eq!(
        children(&dir.client).await.len(),
        2,
        "theirs untouched, ours created"
    );
    // Abandoning sweeps by guid but only our session's nodes.
    attempt.abandon().await;
    assert_eq!(
        children(&dir.client).await,
        vec![theirs.trim_start_matches("/lock/").to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_of_our_session_are_deleted() {
    let (dir, b) = setup("guid_duplicates").await;
    let mut attempt = Attempt::new(&dir);
    let first = plant(&dir.client, &attempt.prefix).await;
    let _second = plant(&dir.client, &attempt.prefix).await;
    let theirs = plant(&b, &attempt.prefix).await;
    attempt.unsure = true;
    attempt.create(&mutex_contest()).await.unwrap();
    assert_eq!(
        attempt.node.as_ref().unwrap().path,
        first,
        "the earliest one is kept"
    );
    let left = children(&dir.client).await;
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter()
            .all(|c| first.ends_with(c.as_str()) || theirs.ends_with(c.as_str())),
        "{left:?}"
    );

    // The wait loop's scan also deletes a late duplicate.
    let late = plant(&dir.client, &attempt.prefix).await;
    let listed = dir.client.get_children_compact("/lock").await.unwrap();
    let ours = attempt.node.clone().unwrap();
    attempt.delete_duplicates(&listed, ours.name()).await;
    assert_eq!(dir.client.exists(&late).await.unwrap(), None);
    attempt.disarm();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_unsure_attempt_sweeps_its_guid_in_the_background() {
    let (dir, b) = setup("guid_sweep").await;
    let mut attempt = Attempt::new(&dir);
    let ours = plant(&dir.client, &attempt.prefix).await;
    let theirs = plant(&b, &attempt.prefix).await;
    attempt.unsure = true;
    drop(attempt);
    let deadline = Instant::now() + Duration::from_secs(5);
    while (pending_or_present(&dir.client, &ours).await) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(dir.client.exists(&ours).await.unwrap(), None, "swept");
    assert!(
        dir.client.exists(&theirs).await.unwrap().is_some(),
        "another session's node is kept"
    );
    assert_eq!(cleanup::pending(&dir.client), 0);
}

async fn pending_or_present(client: &Client, path: &str) -> bool {
    cleanup::pending(client) > 0 || client.exists(path).await.unwrap().is_some()
}

/// The listing sent in the create's write always shows our node, while another session
/// adds and removes contenders in the same directory all along (the ordering argument of
/// `create_listing`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_sent_with_the_create_always_shows_our_node() {
    const ACQUIRES: usize = 200;
    let (dir, b) = setup("pipelined_listing").await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = tokio::spawn({
        let stop = Arc::clone(&stop);
        async move {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && rounds < 100_000 {
                let planted = plant(&b, "_c_churn-").await;
                b.delete(&planted, None).await.unwrap();
                rounds += 1;
            }
            rounds
        }
    });
    for _ in 0..ACQUIRES {
        let mut attempt = Attempt::new(&dir);
        let listing = attempt
            .create_listing(&mutex_contest(), true)
            .await
            .unwrap();
        let ours = attempt.node().unwrap().name().to_owned();
        let listing = listing.expect("the listing came back with our node in it");
        assert!(listing.contains(&ours));
        attempt.abandon().await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(
        churn.await.unwrap() > 0,
        "the other session was busy meanwhile"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_parents_are_created() {
    let cs = fresh_chroot("guid_parents").await;
    let a = Client::connect(&cs).await.unwrap();
    let dir = Dir::new(a.clone(), "/x/y/z".into(), LockOptions::default());
    let mut attempt = Attempt::new(&dir);
    attempt.create(&mutex_contest()).await.unwrap();
    let node = attempt.node.clone().unwrap();
    assert!(
        node.path.starts_with("/x/y/z/_c_") && node.path.ends_with("-lock-0000000000"),
        "{}",
        node.path
    );
    assert_eq!(node.path.len(), "/x/y/z/".len() + 40 + "lock-".len() + 10);
    attempt.abandon().await;
    // Containers: empty data, open ACL, and (below) reaped once empty on a server that
    // checks often (tests/containers.rs).
    let (data, _) = a.get_data("/x/y/z").await.unwrap();
    assert!(data.is_empty());
}

/// A node of another session (as one of a session the client has since renewed, which the
/// server has not expired yet) is never granted to us, though it sorts first: the wait
/// deletes it and starts over with a node of our own session. (It was granted by its name
/// alone, and the acquire returned a guard that was lost from the start.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_another_session_is_never_granted() {
    let (dir, b) = setup("old_session_node").await;
    let mut attempt = Attempt::new(&dir);
    let planted = plant(&b, &attempt.prefix).await;
    let stat = b.exists(&planted).await.unwrap().unwrap();
    let name = planted.rsplit('/').next().unwrap();
    attempt.node = Some(Node::new("/lock", name, stat));
    let contest = mutex_contest();
    let waited = tokio::time::timeout(Duration::from_secs(10), attempt.wait(&contest, true, None));
    assert!(waited.await.expect("bounded").unwrap(), "granted");
    let node = attempt.node.clone().unwrap();
    assert_ne!(node.path, planted);
    assert_eq!(node.stat.ephemeral_owner, dir.client.session_id());
    attempt.abandon().await;
}
