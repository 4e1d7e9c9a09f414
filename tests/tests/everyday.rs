//! The everyday calls against a real server: `create_all` and `delete_all` (alone and with two
//! clients racing on one tree), the digest ACL helper accepted by the server, and the
//! ensemble's configuration read and changed with `get_config` / `reconfig`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use zkwire::{Acl, Client, CreateOptions, Error, Id, Perms, Reconfig};
use zkwire_testing::server::{ServerConfig, ZkEnsemble};
use zkwire_testing::support::{assert_known_as, client_in_chroot, create_persistent, fresh_chroot};

#[tokio::test]
async fn create_all_makes_the_ancestors_and_delete_all_the_subtree() {
    let c = client_in_chroot("everyday_tree").await;
    let (path, stat) = c
        .create_all("/a/b/c", b"leaf", &CreateOptions::persistent())
        .await
        .unwrap();
    assert_eq!((path.as_str(), stat.data_length), ("/a/b/c", 4));
    assert_eq!(
        c.get_data("/a/b").await.unwrap().0.len(),
        0,
        "ancestors are empty"
    );
    // Existing ancestors are kept; a sequential node gets its ancestors too.
    c.set_data("/a", b"kept", None).await.unwrap();
    let opts = CreateOptions::persistent_sequential().with_container_parents();
    let (seq, _) = c.create_all("/a/x/y/job-", b"", &opts).await.unwrap();
    assert!(seq.starts_with("/a/x/y/job-"), "{seq}");
    assert_eq!(c.get_data("/a").await.unwrap().0, b"kept".as_slice());
    assert_eq!(
        c.create_all("/a/b/c", b"", &CreateOptions::persistent())
            .await
            .err(),
        Some(Error::NodeExists)
    );

    assert_eq!(c.delete_all("/a").await.unwrap(), 6, "a, b, c, x, y, job");
    assert_eq!(c.exists("/a").await.unwrap(), None);
    assert_eq!(c.delete_all("/a").await.unwrap(), 0, "missing is fine");
    assert!(matches!(
        c.delete_all("/").await,
        Err(Error::InvalidPath(_))
    ));
    assert!(c.exists("/").await.unwrap().is_some());
    c.close().await.unwrap();
}

/// Two clients build one tree at once, then one builds while the other tears it down: no call
/// fails, no acknowledged node is missing from the built tree, and the final teardown leaves
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_all_and_delete_all_race_on_one_tree() {
    const EACH: usize = 40;
    let cs = fresh_chroot("everyday_race").await;
    let (a, b) = (
        Client::connect(&cs).await.unwrap(),
        Client::connect(&cs).await.unwrap(),
    );
    let build = |c: Client, who: &'static str| async move {
        for i in 0..EACH {
            let path = format!("/t/{}/{}/{who}-{i}", i % 3, i % 5);
            c.create_all(&path, b"", &CreateOptions::persistent())
                .await
                .unwrap();
        }
    };
    tokio::join!(build(a.clone(), "a"), build(b.clone(), "b"));
    let mut leaves = 0;
    for i in 0..3 {
        for j in 0..5 {
            match a.get_children(&format!("/t/{i}/{j}")).await {
                Ok(children) => leaves += children.len(),
                Err(Error::NoNode) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert_eq!(leaves, 2 * EACH, "every acknowledged create is there");

    let teardown = {
        let b = b.clone();
        tokio::spawn(async move {
            let mut deleted = 0;
            for _ in 0..EACH {
                deleted += b.delete_all("/t").await.unwrap();
            }
            deleted
        })
    };
    for i in 0..EACH {
        let path = format!("/t/{}/again-{i}", i % 4);
        // A racing delete may remove an ancestor between the creates; create_all recreates it.
        match a.create_all(&path, b"", &CreateOptions::persistent()).await {
            Ok(_) => {}
            Err(e) => panic!("create_all under a racing delete_all: {e}"),
        }
    }
    let deleted = teardown.await.unwrap();
    println!("teardown deleted {deleted} nodes while {EACH} were being created");
    assert!(deleted >= 2 * EACH, "the built tree went: {deleted}");
    b.delete_all("/t").await.unwrap();
    assert_eq!(a.exists("/t").await.unwrap(), None);
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// An ACL made with `Acl::digest` admits the session that added the matching credentials,
/// and no one else.
#[tokio::test]
async fn the_digest_helper_matches_the_servers_digest() {
    let cs = fresh_chroot("everyday_digest").await;
    let alice = Client::connect(&cs).await.unwrap();
    alice.add_auth("digest", b"alice:secret").await.unwrap();
    let acl = vec![Acl::digest(Perms::ALL, "alice", "secret")];
    alice
        .create(
            "/private",
            b"hers",
            &CreateOptions::persistent().with_acl(acl.clone()),
        )
        .await
        .unwrap();
    assert_eq!(alice.get_acl("/private").await.unwrap().0, acl);
    assert_eq!(
        alice.get_data("/private").await.unwrap().0,
        b"hers".as_slice()
    );
    assert_known_as(&alice, "digest", "alice").await;

    let mallory = Client::connect(&cs).await.unwrap();
    assert_eq!(
        mallory.get_data("/private").await.err(),
        Some(Error::NoAuth)
    );
    mallory.add_auth("digest", b"alice:guess").await.unwrap();
    assert_eq!(
        mallory.get_data("/private").await.err(),
        Some(Error::NoAuth)
    );
    // The mistake the helper prevents: the plain password as the id admits nobody.
    let plain = Id::new("digest", "alice:secret");
    assert_ne!(plain, Id::digest("alice", "secret"));
    alice.delete("/private", None).await.unwrap();
    alice.close().await.unwrap();
    mallory.close().await.unwrap();
}

/// `get_config` reads the ensemble's membership, `reconfig` changes it (3 servers, then 2:
/// a follower leaves),
/// and a stale expected version is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_config_and_reconfig_on_an_ensemble() {
    let config = ServerConfig::default()
        .extra("reconfigEnabled", "true")
        .jvm_prop("zookeeper.skipACL", "yes");
    let ensemble = tokio::task::block_in_place(|| ZkEnsemble::start_with(3, config)).unwrap();
    // A follower leaves (a leader leaving would start an election, and the reply could be
    // lost with the connection); the client talks to the two that stay.
    let leader = ensemble.leader().expect("a leader");
    let leaving = (0..3).find(|&i| i != leader).unwrap();
    let staying: Vec<String> = (0..3)
        .filter(|&i| i != leaving)
        .map(|i| format!("127.0.0.1:{}", ensemble.node_port(i)))
        .collect();
    let staying = staying.join(",");
    let leaving = u64::try_from(leaving + 1).unwrap(); // myid
    let client = Client::connect(&staying).await.unwrap();
    let servers = |config: &[u8]| {
        String::from_utf8_lossy(config)
            .lines()
            .filter(|l| l.starts_with("server."))
            .count()
    };
    let (before, stat) = client.get_config().await.unwrap();
    println!("{}", String::from_utf8_lossy(&before));
    assert_eq!(servers(&before), 3);

    let stale = client
        .reconfig(
            &Reconfig::Incremental {
                joining: vec![],
                leaving: vec![leaving],
            },
            Some(stat.mzxid - 1),
        )
        .await;
    assert_eq!(stale.err(), Some(Error::BadVersion));
    let (after, _) = client
        .reconfig(
            &Reconfig::Incremental {
                joining: vec![],
                leaving: vec![leaving],
            },
            Some(stat.mzxid),
        )
        .await
        .unwrap();
    assert_eq!(servers(&after), 2, "{}", String::from_utf8_lossy(&after));
    client.sync("/").await.unwrap();
    assert_eq!(servers(&client.get_config().await.unwrap().0), 2);
    client.close().await.unwrap();
}

/// The persistent watcher and the state stream are `futures_core::Stream`s of the same items
/// their `next()` gives.
#[tokio::test]
async fn event_streams_are_streams() {
    use std::pin::Pin;
    use zkwire::{AddWatchMode, EventType, SessionState};

    async fn poll_next<S: futures_core::Stream + Unpin>(s: &mut S) -> Option<S::Item> {
        std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
    }
    let c = client_in_chroot("everyday_streams").await;
    let mut states = c.state_stream();
    let mut events = c
        .add_watch("/", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    create_persistent(&c, "/s", b"").await;
    let event = poll_next(&mut events).await.unwrap();
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeCreated, "/s")
    );
    c.close().await.unwrap();
    assert_eq!(poll_next(&mut states).await, Some(SessionState::Closed));
}

/// `Client::chroot` gives a handle rooted deeper on the same session: paths in, paths out and
/// watch events are relative to it.
#[tokio::test]
async fn a_handle_rooted_at_a_sub_path_shares_the_session() {
    use zkwire::{AddWatchMode, EventType};
    let c = client_in_chroot("everyday_sub").await;
    c.create_all("/tenants/a", b"", &CreateOptions::persistent())
        .await
        .unwrap();
    let tenant = c.chroot("/tenants/a").unwrap();
    assert_eq!(tenant.session_id(), c.session_id());
    let mut events = tenant
        .add_watch("/", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let (path, _) = tenant
        .create("/config", b"x", &CreateOptions::persistent())
        .await
        .unwrap();
    assert_eq!(path, "/config");
    assert_eq!(
        c.get_data("/tenants/a/config").await.unwrap().0,
        b"x".as_slice()
    );
    let event = events.next().await.unwrap();
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (EventType::NodeCreated, "/config")
    );
    let deeper = tenant.chroot("/config").unwrap();
    assert_eq!(deeper.get_data("/").await.unwrap().0, b"x".as_slice());
    assert!(matches!(c.chroot("no-slash"), Err(Error::InvalidPath(_))));
    drop(events);
    c.close().await.unwrap();
    assert_eq!(tenant.exists("/").await, Err(Error::Closed));
}
