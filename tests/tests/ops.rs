//! Every client operation against a real ZooKeeper server, each test under its own chroot.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use zkwire::{
    Acl, Client, CreateMode, CreateOptions, Error, Id, Op, OpResult, Perms, ReadOp, ReadResult,
    SessionState, Stat, JUTE_MAX_BUFFER,
};
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{assert_known_as, client_in_chroot, create_persistent, fresh_chroot};

/// Creates `path` holding `data` with `options`; the created path and its Stat.
async fn created(c: &Client, path: &str, data: &[u8], options: CreateOptions) -> (String, Stat) {
    c.create(path, data, &options).await.unwrap()
}

#[tokio::test]
async fn create_in_every_mode_returns_path_and_stat() {
    let c = client_in_chroot("ops_create").await;
    let (path, stat) = created(&c, "/p", b"data", CreateOptions::persistent()).await;
    assert_eq!(path, "/p");
    assert_eq!(
        (stat.data_length, stat.ephemeral_owner, stat.version),
        (4, 0, 0)
    );

    let (path, stat) = created(&c, "/e", b"", CreateOptions::ephemeral()).await;
    assert_eq!(path, "/e");
    assert_eq!(stat.ephemeral_owner, c.session_id());

    let (s1, _) = created(&c, "/p/s-", b"", CreateOptions::persistent_sequential()).await;
    let (s2, st2) = created(&c, "/p/s-", b"", CreateOptions::ephemeral_sequential()).await;
    assert_eq!(s1, "/p/s-0000000000");
    assert_eq!(s2, "/p/s-0000000001");
    assert_eq!(st2.ephemeral_owner, c.session_id());

    let (path, stat) = created(&c, "/c", b"", CreateOptions::container()).await;
    assert_eq!(path, "/c");
    // The server maps its container and TTL owner markers back to 0 in client Stats.
    assert_eq!(stat.ephemeral_owner, 0);

    let ttl = CreateOptions::persistent_with_ttl(Duration::from_secs(60));
    let (path, stat) = c.create("/t", b"x", &ttl).await.unwrap();
    assert_eq!((path.as_str(), stat.data_length), ("/t", 1));
    let ttl_seq = CreateOptions::persistent_sequential_with_ttl(Duration::from_secs(60));
    let (path, _) = c.create("/t-", b"x", &ttl_seq).await.unwrap();
    assert!(path.starts_with("/t-00000"), "{path}");

    assert_eq!(
        c.create("/p", b"", &CreateOptions::persistent()).await,
        Err(Error::NodeExists)
    );
    assert_eq!(
        c.create("/no/parent", b"", &CreateOptions::persistent())
            .await,
        Err(Error::NoNode)
    );
    assert_eq!(
        c.create("/e/kid", b"", &CreateOptions::persistent()).await,
        Err(Error::NoChildrenForEphemerals)
    );
    assert!(matches!(
        c.create(
            "/t2",
            b"",
            &CreateOptions::new(CreateMode::PersistentWithTtl)
        )
        .await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.create("bad", b"", &CreateOptions::persistent()).await,
        Err(Error::InvalidPath(_))
    ));
    c.close().await.unwrap();
}

#[tokio::test]
async fn data_exists_delete_with_versions() {
    let c = client_in_chroot("ops_data").await;
    assert_eq!(c.exists("/n").await.unwrap(), None);
    assert_eq!(c.get_data("/n").await, Err(Error::NoNode));
    create_persistent(&c, "/n", b"v0").await;
    let (data, stat) = c.get_data("/n").await.unwrap();
    assert_eq!((&data[..], stat.version), (&b"v0"[..], 0));
    assert_eq!(
        c.set_data("/n", b"v1", Some(5)).await,
        Err(Error::BadVersion)
    );
    let stat = c.set_data("/n", b"v1", Some(0)).await.unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(c.exists("/n").await.unwrap().map(|s| s.version), Some(1));
    let stat = c.set_data("/n", b"", None).await.unwrap();
    assert_eq!(stat.data_length, 0);

    create_persistent(&c, "/n/kid", b"").await;
    assert_eq!(c.delete("/n", None).await, Err(Error::NotEmpty));
    assert_eq!(c.delete("/n/kid", Some(3)).await, Err(Error::BadVersion));
    c.delete("/n/kid", Some(0)).await.unwrap();
    c.delete("/n", None).await.unwrap();
    assert_eq!(c.delete("/n", None).await, Err(Error::NoNode));
    c.close().await.unwrap();
}

/// A background delete is handed to the connection before the call returns (a request made
/// next sees its effect), and its function gets the path as given and the outcome, once:
/// from the driver for a request sent, at once for one that could not be.
#[tokio::test]
async fn delete_detached_answers_once_in_order() {
    let c = client_in_chroot("ops_delete_detached").await;
    create_persistent(&c, "/a", b"").await;
    create_persistent(&c, "/v", b"").await;
    let (tx, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
    let report = |tx: &tokio::sync::mpsc::UnboundedSender<(String, Result<(), Error>)>| {
        let tx = tx.clone();
        move |path: String, outcome| tx.send((path, outcome)).unwrap()
    };
    c.delete_detached("relative", None, report(&tx));
    let (path, outcome) = outcomes
        .try_recv()
        .expect("answered in the caller, at once");
    assert_eq!(path, "relative");
    assert!(matches!(outcome, Err(Error::InvalidPath(_))), "{outcome:?}");

    c.delete_detached("/a", None, report(&tx));
    assert_eq!(
        c.exists("/a").await.unwrap(),
        None,
        "sent ahead of the exists"
    );
    c.delete_detached(String::from("/missing"), None, report(&tx));
    c.delete_detached("/v", Some(7), report(&tx));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(outcomes.recv().await.unwrap());
    }
    assert_eq!(
        got,
        [
            ("/a".to_owned(), Ok(())),
            ("/missing".to_owned(), Err(Error::NoNode)),
            ("/v".to_owned(), Err(Error::BadVersion)),
        ],
        "in order, chroot-relative paths as given"
    );
    c.close().await.unwrap();
    c.delete_detached("/v", None, report(&tx));
    let (_, outcome) = tokio::time::timeout(Duration::from_secs(5), outcomes.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        outcome.as_ref().is_err_and(Error::is_terminal),
        "{outcome:?}"
    );
    drop(tx);
    assert!(outcomes.recv().await.is_none(), "one answer per request");
}

/// The compact listing holds the names `get_children` returns, in the same order: plain,
/// empty-sounding and non-ASCII names, a few hundred of them.
#[tokio::test]
async fn a_compact_listing_holds_what_get_children_returns() {
    let c = client_in_chroot("ops_compact_children").await;
    create_persistent(&c, "/d", b"").await;
    assert!(c.get_children_compact("/d").await.unwrap().is_empty());
    let mut names: Vec<String> = (0..300)
        .map(|i| format!("n{i}-{}", "x".repeat(i % 40)))
        .collect();
    names.extend(["été".to_owned(), "日本".to_owned(), " ".to_owned()]);
    for name in &names {
        c.create(&format!("/d/{name}"), b"", &CreateOptions::persistent())
            .await
            .unwrap();
    }
    let compact = c.get_children_compact("/d").await.unwrap();
    let plain = c.get_children("/d").await.unwrap();
    assert_eq!(compact.to_vec(), plain);
    let mut sorted: Vec<&str> = compact.iter().collect();
    sorted.sort_unstable();
    let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    assert!(compact.contains("日本") && !compact.contains("n300"));
    assert_eq!(c.get_children_compact("/missing").await, Err(Error::NoNode));
    c.close().await.unwrap();
}

#[tokio::test]
async fn children_counts_ephemerals_and_sync() {
    let c = client_in_chroot("ops_children").await;
    create_persistent(&c, "/d", b"").await;
    for name in ["a", "b", "c"] {
        c.create(&format!("/d/{name}"), b"", &CreateOptions::persistent())
            .await
            .unwrap();
    }
    c.create("/d/a/x", b"", &CreateOptions::ephemeral())
        .await
        .unwrap();
    let mut kids = c.get_children("/d").await.unwrap();
    kids.sort();
    assert_eq!(kids, ["a", "b", "c"]);
    let (kids, stat) = c.get_children_and_stat("/d").await.unwrap();
    assert_eq!((kids.len(), stat.num_children), (3, 3));
    assert_eq!(c.get_all_children_number("/d").await.unwrap(), 4);
    assert_eq!(c.get_children("/missing").await, Err(Error::NoNode));
    // Ephemerals come back chroot-relative, and only those under our chroot.
    assert_eq!(c.get_ephemerals("/").await.unwrap(), ["/d/a/x"]);
    assert_eq!(c.get_ephemerals("/d/a").await.unwrap(), ["/d/a/x"]);
    assert!(c.get_ephemerals("/d/b").await.unwrap().is_empty());
    c.sync("/d").await.unwrap();
    c.close().await.unwrap();
}

#[tokio::test]
async fn acls_and_digest_auth() {
    let cs = fresh_chroot("ops_acl").await;
    let alice = zkwire_testing::support::builder()
        .with_auth("digest", b"alice:secret")
        .connect(&cs)
        .await
        .unwrap();
    assert_known_as(&alice, "digest", "alice").await;

    let creator_only = CreateOptions::persistent().with_acl(Acl::creator_all());
    alice.create("/private", b"s", &creator_only).await.unwrap();
    let (acl, _) = alice.get_acl("/private").await.unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].id.scheme, "digest");
    assert!(acl[0].id.id.starts_with("alice:"));

    let anon = Client::connect(&cs).await.unwrap();
    assert_eq!(anon.get_data("/private").await, Err(Error::NoAuth));
    anon.add_auth("digest", b"alice:secret").await.unwrap();
    assert_eq!(&anon.get_data("/private").await.unwrap().0[..], b"s");

    let anyone = vec![Acl::new(Perms::ALL, Id::anyone())];
    assert_eq!(
        alice.set_acl("/private", &anyone, Some(5)).await,
        Err(Error::BadVersion)
    );
    assert_eq!(
        alice.set_acl("/private", &[], None).await,
        Err(Error::InvalidAcl)
    );
    let stat = alice
        .set_acl("/private", &Acl::read_unsafe(), Some(0))
        .await
        .unwrap();
    assert_eq!(stat.aversion, 1);
    let eve = Client::connect(&cs).await.unwrap();
    assert_eq!(&eve.get_data("/private").await.unwrap().0[..], b"s");
    assert_eq!(
        eve.set_data("/private", b"x", None).await,
        Err(Error::NoAuth)
    );
    // Read-only for everyone now, alice included: no ADMIN left to change it back.
    assert_eq!(
        alice.set_acl("/private", &anyone, None).await,
        Err(Error::NoAuth)
    );
    for c in [alice, anon, eve] {
        c.close().await.unwrap();
    }
}

#[tokio::test]
async fn multi_success_failure_and_multi_read() {
    let c = client_in_chroot("ops_multi").await;
    create_persistent(&c, "/m", b"0").await;
    let results = c
        .multi(&[
            Op::check("/m", Some(0)),
            Op::create("/m/a", &b"a"[..], &CreateOptions::persistent()),
            Op::create("/m/s-", &b""[..], &CreateOptions::persistent_sequential()),
            Op::set_data("/m", &b"1"[..], Some(0)),
            Op::delete("/m/a", None),
        ])
        .await
        .unwrap();
    assert_eq!(results[0], OpResult::Check);
    assert!(matches!(&results[1], OpResult::Create { path, .. } if path == "/m/a"));
    assert!(matches!(&results[2], OpResult::Create { path, .. } if path == "/m/s-0000000001"));
    assert!(matches!(&results[3], OpResult::SetData { stat } if stat.version == 1));
    assert_eq!(results[4], OpResult::Delete);

    // A failing op rolls everything back and says which op failed.
    let failed = c
        .multi(&[
            Op::create("/m/b", &b""[..], &CreateOptions::persistent()),
            Op::check("/m", Some(99)),
        ])
        .await;
    assert_eq!(
        failed,
        Err(Error::MultiFailed {
            index: 1,
            error: Box::new(Error::BadVersion)
        })
    );
    assert_eq!(c.exists("/m/b").await.unwrap(), None, "rolled back");
    assert_eq!(c.multi(&[]).await.unwrap(), []);

    let reads = c
        .multi_read(&[
            ReadOp::GetData("/m".into()),
            ReadOp::GetChildren("/m".into()),
            ReadOp::GetData("/none".into()),
        ])
        .await
        .unwrap();
    assert!(matches!(&reads[0], Ok(ReadResult::Data { data, .. }) if &data[..] == b"1"));
    assert!(matches!(&reads[1], Ok(ReadResult::Children { children }) if children.len() == 1));
    assert_eq!(reads[2], Err(Error::NoNode));
    c.close().await.unwrap();
}

#[tokio::test]
async fn chroot_is_added_and_stripped() {
    let cs = fresh_chroot("ops_chroot").await;
    let c = Client::connect(&cs).await.unwrap();
    let (path, _) = c
        .create("/x", b"", &CreateOptions::persistent())
        .await
        .unwrap();
    assert_eq!(path, "/x");
    let root = Client::connect(&shared_server().connect_string())
        .await
        .unwrap();
    assert!(root.exists("/ops_chroot/x").await.unwrap().is_some());
    // The chroot root itself is "/" for the chrooted client.
    assert_eq!(c.get_children("/").await.unwrap(), ["x"]);
    c.close().await.unwrap();
    root.close().await.unwrap();
}

#[tokio::test]
async fn close_removes_ephemerals_and_fails_later_requests() {
    let cs = fresh_chroot("ops_close").await;
    let c = Client::connect(&cs).await.unwrap();
    let observer = Client::connect(&cs).await.unwrap();
    c.create("/eph", b"", &CreateOptions::ephemeral())
        .await
        .unwrap();
    let mut states = c.state_stream();
    c.close().await.unwrap();
    assert_eq!(states.next().await, Some(SessionState::Closed));
    assert_eq!(c.state(), SessionState::Closed);
    assert_eq!(c.get_data("/eph").await, Err(Error::Closed));
    c.close().await.unwrap();
    assert_eq!(
        observer.exists("/eph").await.unwrap(),
        None,
        "ephemeral deleted at close"
    );
    observer.close().await.unwrap();
}

#[tokio::test]
async fn oversized_request_fails_locally_without_reconnecting() {
    let c = client_in_chroot("ops_oversized").await;
    create_persistent(&c, "/big", b"").await;
    let session = c.session_id();
    let mut states = c.state_stream();
    let big = vec![7u8; 2 << 20];
    let err = c.set_data("/big", &big, None).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::RequestTooLarge {
                max: JUTE_MAX_BUFFER,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    // The connection was never touched: same session, no state change, next request fine.
    assert_eq!(c.exists("/big").await.unwrap().map(|s| s.version), Some(0));
    assert_eq!(c.session_id(), session);
    assert_eq!(c.state(), SessionState::Connected);
    let no_change = tokio::time::timeout(Duration::from_millis(200), states.next()).await;
    assert!(
        no_change.is_err(),
        "no state change expected, got {no_change:?}"
    );
    // Just under the limit goes through.
    let fits = vec![7u8; JUTE_MAX_BUFFER - 200];
    c.set_data("/big", &fits, None).await.unwrap();
    assert_eq!(c.get_data("/big").await.unwrap().0.len(), fits.len());
    c.close().await.unwrap();
}
