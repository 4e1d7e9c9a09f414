//! `PersistentNode` against a real server: re-created after an outside delete and after a
//! session renewal, data kept across re-creates, one node per protected sequential node,
//! close deletes, a create refused by the parent's ACL, an expired session without
//! renewal, and the rules for a node already at our path (docs/recipes.md §12).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::time::{Duration, Instant};

use support::fresh_clients;
use zkwire::{Acl, Client, CreateMode, CreateOptions, Error, Perms, SessionState};
use zkwire_recipes::{LockError, NodeEvent, NodeEvents, PersistentNode};
use zkwire_testing::support::{
    connect_renewing, connect_with_timeout, fresh_chroot, kill_client_session,
};

const T: Duration = Duration::from_secs(4);
/// The bound of every wait in these tests.
const STEP: Duration = Duration::from_secs(15);

/// The next event that `want` accepts, at most [`STEP`] away; the events skipped on the way
/// are returned with it.
async fn next_matching(
    events: &mut NodeEvents,
    want: impl Fn(&NodeEvent) -> bool,
) -> (NodeEvent, Vec<NodeEvent>) {
    let mut skipped = Vec::new();
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let event = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap_or_else(|_| panic!("no matching event in {STEP:?}; saw {skipped:?}"))
            .expect("the node's events go on");
        if want(&event) {
            return (event, skipped);
        }
        skipped.push(event);
    }
}

/// Polls until `path` exists on `client` with `data`, and returns when; panics after STEP.
async fn wait_for_node(client: &Client, path: &str, data: &[u8]) -> zkwire::Stat {
    let deadline = Instant::now() + STEP;
    loop {
        if let Ok((got, stat)) = client.get_data(path).await {
            if got == data {
                return stat;
            }
        }
        assert!(Instant::now() < deadline, "{path} never held {data:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls until `path` is gone; panics after STEP.
async fn wait_for_absence(client: &Client, path: &str) {
    let deadline = Instant::now() + STEP;
    while client.exists(path).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "{path} still exists");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts `node` and waits (at most [`STEP`]) until it is first created.
async fn start_created(node: &PersistentNode) {
    node.start();
    assert!(node.wait_for_initial_create(STEP).await.unwrap());
}

/// [`start_created`], with the node's events from before it starts.
async fn start_created_watched(node: &PersistentNode) -> NodeEvents {
    let events = node.events();
    start_created(node).await;
    events
}

/// Lets `proxy` take connections again, and waits (at most [`STEP`]) for `close`, a
/// node's `close()` spawned while it refused them, to succeed.
async fn closed_once_reachable(
    proxy: &zkwire_testing::proxy::FaultProxy,
    close: tokio::task::JoinHandle<Result<(), LockError>>,
) {
    proxy.refuse(false);
    let closed = tokio::time::timeout(STEP, close).await.expect("closed");
    closed.unwrap().unwrap();
}

/// Closes the clients in order, each close succeeding.
async fn close_all<const N: usize>(clients: [Client; N]) {
    for client in clients {
        client.close().await.unwrap();
    }
}

async fn children(client: &Client, dir: &str) -> Vec<String> {
    let mut names = client.get_children(dir).await.unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_node_comes_back_within_a_second_after_an_outside_delete() {
    let (_, [c, other]) = fresh_clients("persistent_outside_delete", T).await;
    // Two missing parents: created as containers.
    let node = PersistentNode::ephemeral(c.clone(), "/svc/members/a", "one");
    let mut events = start_created_watched(&node).await;
    assert_eq!(node.actual_path().as_deref(), Some("/svc/members/a"));
    let (svc, _) = other.get_data("/svc").await.unwrap();
    assert!(svc.is_empty());
    let created = next_matching(&mut events, |e| matches!(e, NodeEvent::Created { .. })).await;
    assert_eq!(
        created.0,
        NodeEvent::Created {
            path: "/svc/members/a".into()
        }
    );

    for round in 0..5 {
        other.delete("/svc/members/a", None).await.unwrap();
        let deleted_at = Instant::now();
        let stat = wait_for_node(&other, "/svc/members/a", b"one").await;
        let took = deleted_at.elapsed();
        println!("round {round}: back after {took:?}");
        assert!(took < Duration::from_secs(1), "re-created in {took:?}");
        assert_eq!(stat.ephemeral_owner, c.session_id());
        next_matching(&mut events, |e| matches!(e, NodeEvent::Deleted { .. })).await;
        next_matching(&mut events, |e| matches!(e, NodeEvent::Created { .. })).await;
    }
    node.close().await.unwrap();
    assert!(other.exists("/svc/members/a").await.unwrap().is_none());
    close_all([c, other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_node_comes_back_on_the_new_session_after_a_renewal() {
    let cs = fresh_chroot("persistent_renewal").await;
    let renewing = connect_renewing(&cs, T).await;
    let other = connect_with_timeout(&cs, T).await;
    let node = PersistentNode::ephemeral(renewing.clone(), "/m/a", "data");
    let mut events = start_created_watched(&node).await;
    let old = wait_for_node(&other, "/m/a", b"data").await.ephemeral_owner;
    assert_eq!(old, renewing.session_id());

    let started = Instant::now();
    kill_client_session(&renewing).await.unwrap();
    let deadline = Instant::now() + STEP;
    let stat = loop {
        let stat = wait_for_node(&other, "/m/a", b"data").await;
        if stat.ephemeral_owner != old {
            break stat;
        }
        assert!(Instant::now() < deadline, "still the old session's node");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    println!("back on the new session after {:?}", started.elapsed());
    assert_eq!(stat.ephemeral_owner, renewing.session_id());
    assert_ne!(renewing.session_id(), old);
    let (deleted, _) = next_matching(&mut events, |e| matches!(e, NodeEvent::Deleted { .. })).await;
    assert_eq!(
        deleted,
        NodeEvent::Deleted {
            path: "/m/a".into()
        }
    );
    next_matching(&mut events, |e| matches!(e, NodeEvent::Created { .. })).await;
    node.close().await.unwrap();
    wait_for_absence(&other, "/m/a").await;
    close_all([renewing, other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_set_is_written_and_survives_re_creation() {
    let (_, [c, other]) = fresh_clients("persistent_data", T).await;
    let node = PersistentNode::ephemeral(c.clone(), "/d/a", "v0");
    // Before start: only what the first create writes.
    node.set_data("v1").await.unwrap();
    start_created(&node).await;
    wait_for_node(&other, "/d/a", b"v1").await;

    let mut events = node.events();
    node.set_data("v2").await.unwrap();
    let (data, _) = other.get_data("/d/a").await.unwrap();
    assert_eq!(&data[..], b"v2", "written by the time set_data returns");
    let (set, _) = next_matching(&mut events, |e| matches!(e, NodeEvent::DataSet { .. })).await;
    assert!(
        matches!(set, NodeEvent::DataSet { ref path, .. } if path == "/d/a"),
        "{set:?}"
    );

    // Deleted from outside while new data is set: the re-create writes the last data.
    for round in 0..20u32 {
        let value = format!("v{}", round + 3);
        let (deleted, set) = tokio::join!(other.delete("/d/a", None), node.set_data(value.clone()));
        set.unwrap();
        deleted.unwrap();
        wait_for_node(&other, "/d/a", value.as_bytes()).await;
    }
    assert_eq!(&node.data()[..], b"v22");
    node.close().await.unwrap();
    close_all([c, other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_sequential_node_is_one_node_with_a_new_number_at_each_re_create() {
    let (_, [c, other]) = fresh_clients("persistent_sequential", T).await;
    let node = PersistentNode::new(c.clone(), "/q/item-", CreateMode::EphemeralSequential, "x");
    start_created(&node).await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        let path = node.actual_path().expect("created");
        let name = path.strip_prefix("/q/").unwrap();
        // `_c_` + 36-character uuid + `-`, then the name and ten digits.
        assert!(
            name.starts_with("_c_") && name.len() == 40 + "item-".len() + 10,
            "{name}"
        );
        assert_eq!(&name[40..45], "item-", "{name}");
        assert_eq!(
            children(&other, "/q").await,
            vec![name.to_owned()],
            "exactly one node"
        );
        assert!(
            !seen.contains(&path),
            "a new sequence number each time: {seen:?}"
        );
        seen.push(path.clone());
        other.delete(&path, None).await.unwrap();
        let deadline = Instant::now() + STEP;
        while node.actual_path().is_none_or(|p| p == path) {
            assert!(Instant::now() < deadline, "not re-created");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let prefix = &seen[0].strip_prefix("/q/").unwrap()[..40];
    assert!(
        seen.iter().all(|p| p.contains(prefix)),
        "one guid: {seen:?}"
    );
    assert_eq!(children(&other, "/q").await.len(), 1);
    node.close().await.unwrap();
    assert!(children(&other, "/q").await.is_empty());
    close_all([c, other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_deletes_and_dropping_deletes_in_the_background() {
    let (_, [c, other]) = fresh_clients("persistent_close", T).await;
    for mode in [
        CreateMode::Ephemeral,
        CreateMode::Persistent,
        CreateMode::PersistentSequential,
    ] {
        let node = PersistentNode::new(c.clone(), "/c/n", mode, "");
        let mut events = start_created_watched(&node).await;
        let path = node.actual_path().unwrap();
        node.close().await.unwrap();
        assert!(
            other.exists(&path).await.unwrap().is_none(),
            "{mode:?}: {path} deleted"
        );
        assert_eq!(node.actual_path(), None);
        let (stopped, _) = next_matching(&mut events, |e| matches!(e, NodeEvent::Stopped(_))).await;
        assert_eq!(stopped, NodeEvent::Stopped(None));
        assert!(matches!(
            node.wait_for_initial_create(Duration::from_millis(10))
                .await,
            Err(LockError::Closed)
        ));
    }
    // Started again after a close: a new node.
    let node = PersistentNode::new(c.clone(), "/c/p", CreateMode::Persistent, "again");
    start_created(&node).await;
    node.close().await.unwrap();
    start_created(&node).await;
    wait_for_node(&other, "/c/p", b"again").await;
    drop(node);
    wait_for_absence(&other, "/c/p").await;
    close_all([c, other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_the_parent_acl_refuses_times_out_and_succeeds_once_allowed() {
    let (_, [c, admin]) = fresh_clients("persistent_acl", T).await;
    // Anyone may read it and change its ACL, nobody may create under it.
    let no_create = vec![Acl::new(Perms::READ | Perms::ADMIN, zkwire::Id::anyone())];
    let read_only = CreateOptions::persistent().with_acl(no_create);
    admin.create("/locked", b"", &read_only).await.unwrap();

    let node = PersistentNode::ephemeral(c.clone(), "/locked/a", "x");
    let mut events = node.events();
    node.start();
    let started = Instant::now();
    assert!(!node
        .wait_for_initial_create(Duration::from_secs(1))
        .await
        .unwrap());
    assert!(started.elapsed() >= Duration::from_secs(1));
    let (error, _) = next_matching(&mut events, |e| matches!(e, NodeEvent::Error(_))).await;
    assert_eq!(error, NodeEvent::Error(Error::NoAuth));
    assert_eq!(node.actual_path(), None);

    // The ACL opens: the next try (at most 2 s later) creates the node.
    admin
        .set_acl("/locked", &Acl::open_unsafe(), None)
        .await
        .unwrap();
    assert!(node.wait_for_initial_create(STEP).await.unwrap());
    wait_for_node(&admin, "/locked/a", b"x").await;
    node.close().await.unwrap();
    close_all([c, admin]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_without_renewal_stops_the_node_and_says_why() {
    let (_, [c, other]) = fresh_clients("persistent_expired", T).await;
    let node = PersistentNode::ephemeral(c.clone(), "/e/a", "x");
    let mut events = start_created_watched(&node).await;
    let mut states = c.state_stream();
    kill_client_session(&c).await.unwrap();
    let (stopped, skipped) =
        next_matching(&mut events, |e| matches!(e, NodeEvent::Stopped(_))).await;
    assert_eq!(
        stopped,
        NodeEvent::Stopped(Some(Error::SessionExpired)),
        "{skipped:?}"
    );
    assert_eq!(node.actual_path(), None);
    assert!(other.exists("/e/a").await.unwrap().is_none());
    assert_eq!(
        node.close().await,
        Err(LockError::Client(Error::SessionExpired))
    );
    while let Ok(Some(state)) = tokio::time::timeout(STEP, states.next()).await {
        if state == SessionState::Expired {
            break;
        }
    }
    other.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_node_is_replaced_at_start_and_a_live_twin_is_adopted_without_a_fight() {
    let (_, [previous_run, c, twin]) = fresh_clients("persistent_existing", T).await;
    // What a previous run of this process left, its session not expired yet.
    let ephemeral = CreateOptions::ephemeral().with_container_parents();
    previous_run
        .create_all("/g/a", b"old", &ephemeral)
        .await
        .unwrap();

    let node = PersistentNode::ephemeral(c.clone(), "/g/a", "new");
    let mut events = node.events();
    node.start();
    let (replaced, _) =
        next_matching(&mut events, |e| matches!(e, NodeEvent::Replaced { .. })).await;
    let owner = previous_run.session_id();
    let path = "/g/a".to_owned();
    assert_eq!(replaced, NodeEvent::Replaced { path, owner });
    let stat = wait_for_node(&c, "/g/a", b"new").await;
    assert_eq!(stat.ephemeral_owner, c.session_id());

    // A second node on the same path (a duplicate id): at most one replacement on each
    // side, then one of them adopts the other's node. No fight follows.
    let second = PersistentNode::ephemeral(twin.clone(), "/g/a", "twin");
    let mut second_events = start_created_watched(&second).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = c.exists("/g/a").await.unwrap().expect("one node stays");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let later = c.exists("/g/a").await.unwrap().expect("one node stays");
    assert_eq!(later.czxid, settled.czxid, "no delete since");
    let owners = [c.session_id(), twin.session_id()];
    assert!(owners.contains(&later.ephemeral_owner), "{later:?}");
    let mut replacements = 0;
    for stream in [&mut events, &mut second_events] {
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(10), stream.next()).await
        {
            println!("{event:?}");
            replacements += usize::from(matches!(event, NodeEvent::Replaced { .. }));
        }
    }
    assert_eq!(replacements, 1, "the twin replaced ours once, nothing more");
    // The twin leaves (deleting the node, whoever created it): ours owns it again.
    second.close().await.unwrap();
    let deadline = Instant::now() + STEP;
    while wait_for_node(&twin, "/g/a", b"new").await.ephemeral_owner != c.session_id() {
        assert!(Instant::now() < deadline, "not re-created by ours");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    node.close().await.unwrap();
    close_all([previous_run, c, twin]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_and_ttl_nodes_are_kept_too() {
    let (_, [c, other]) = fresh_clients("persistent_modes", T).await;
    let ttl = PersistentNode::new(c.clone(), "/t/ttl", CreateMode::PersistentWithTtl, "t")
        .with_ttl(Duration::from_secs(60));
    let persistent = PersistentNode::new(c.clone(), "/t/p", CreateMode::Persistent, "p");
    for node in [&ttl, &persistent] {
        start_created(node).await;
        let path = node.actual_path().unwrap();
        let before = wait_for_node(&other, &path, &node.data()).await;
        other.delete(&path, None).await.unwrap();
        let after = wait_for_node(&other, &path, &node.data()).await;
        assert!(after.czxid > before.czxid, "{path} created again");
        assert_eq!(
            after.ephemeral_owner, before.ephemeral_owner,
            "same kind of node"
        );
    }
    // A TTL mode without a TTL is refused before anything is sent: the task stops.
    let bad = PersistentNode::new(c.clone(), "/t/bad", CreateMode::PersistentWithTtl, "");
    bad.start();
    assert!(matches!(
        bad.wait_for_initial_create(STEP).await,
        Err(LockError::Client(Error::InvalidArgument(_)))
    ));
    ttl.close().await.unwrap();
    persistent.close().await.unwrap();
    assert!(children(&other, "/t").await.is_empty());
    close_all([c, other]).await;
}

/// An ephemeral node whose create reply was lost, closed before the node could be created
/// again and adopted, is still deleted: close finds it at its path, owned by our session.
/// (It once stayed for the session's life: a group member or service instance still
/// listed after its owner gave up.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_after_a_lost_create_reply_leaves_no_node() {
    let (cs, proxy, via) = support::proxied("persistent_lost_create").await;
    let observer = connect_with_timeout(&cs, T).await;
    let client = connect_with_timeout(&via, T).await;
    let close = closing_after_a_lost_create(&client, &proxy, &observer).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    closed_once_reachable(&proxy, close).await;
    assert!(observer.exists("/member").await.unwrap().is_none());
    client.close().await.unwrap();
}

/// The same with requests that time out (300 ms) while the server is cut off: the close's
/// look at the path is retried, not given up, and the node goes once the server answers.
/// (The look timed out, nothing was deleted, and close said `Ok`: the node stayed for the
/// session's life.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_whose_look_times_out_still_deletes_the_node() {
    let (cs, proxy, via) = support::proxied("persistent_close_timeout").await;
    let observer = connect_with_timeout(&cs, T).await;
    let client = zkwire_testing::support::builder()
        .with_session_timeout(T)
        .with_request_timeout(Duration::from_millis(300))
        .connect(&via)
        .await
        .unwrap();
    let close = closing_after_a_lost_create(&client, &proxy, &observer).await;
    // Several request timeouts while no connection can be made.
    tokio::time::sleep(Duration::from_secs(1)).await;
    closed_once_reachable(&proxy, close).await;
    wait_for_absence(&observer, "/member").await;
    client.close().await.unwrap();
}

/// Starts an ephemeral node `/member` on `client` whose create reaches the server while its
/// reply does not, with no new connection taken through `proxy`; once `observer` sees the
/// node, its `close()`, spawned.
async fn closing_after_a_lost_create(
    client: &Client,
    proxy: &zkwire_testing::proxy::FaultProxy,
    observer: &Client,
) -> tokio::task::JoinHandle<Result<(), LockError>> {
    proxy.cut_after_request(zkwire::proto::OpCode::Create2, 1);
    proxy.refuse(true);
    let node = PersistentNode::ephemeral(client.clone(), "/member", "x");
    node.start();
    let deadline = Instant::now() + STEP;
    while proxy.triggered() == 0 || observer.exists("/member").await.unwrap().is_none() {
        assert!(Instant::now() < deadline, "the create was not cut");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::spawn(async move { node.close().await })
}

/// A close whose delete waits out an outage during which the session expired, and someone
/// else took the node's path, leaves their node alone: the delete was for the old session's
/// node, which the server removed with it. (It ran on the renewed session and deleted
/// theirs: another process's group membership or service registration gone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_across_a_renewal_leaves_a_node_someone_else_made_at_the_path() {
    let (cs, proxy, via) = support::proxied("persistent_close_renewal").await;
    let client = connect_renewing(&via, T).await;
    let other = connect_with_timeout(&cs, T).await;
    let node = PersistentNode::ephemeral(client.clone(), "/m", "ours");
    start_created(&node).await;
    // Cut off: the close's requests wait for a connection.
    proxy.refuse(true);
    proxy.cut_all();
    let close = tokio::spawn(async move { node.close().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The session ends on the server meanwhile, and the path is taken.
    kill_client_session(&client).await.unwrap();
    wait_for_absence(&other, "/m").await;
    let theirs = CreateOptions::new(CreateMode::Ephemeral);
    other.create("/m", b"theirs", &theirs).await.unwrap();
    closed_once_reachable(&proxy, close).await;
    // The close is over: the renewed session has had its chance to send anything.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (data, stat) = other
        .get_data("/m")
        .await
        .expect("their node is still there");
    assert_eq!(
        (&data[..], stat.ephemeral_owner),
        (&b"theirs"[..], other.session_id())
    );
    close_all([client, other]).await;
}

/// A start while the last run still closes (a `close()` dropped after its first poll, which
/// it promises to survive) waits for that run to end: one run at a time, and the new one
/// keeps the node. The old run's end used to overwrite the new one's status (the wait for
/// the create said `Closed`) and could delete the node the new run had adopted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_while_the_last_run_closes_keeps_the_node() {
    let (_, [c, other]) = fresh_clients("persistent_restart", T).await;
    let node = PersistentNode::ephemeral(c.clone(), "/restart", "x");
    start_created(&node).await;
    // Polled once: the close signal is sent, and the close is dropped.
    let polled_once = tokio::select! {
        biased;
        closed = node.close() => Some(closed),
        () = std::future::ready(()) => None,
    };
    assert!(
        polled_once.is_none(),
        "the close had to wait for the delete: {polled_once:?}"
    );
    node.start();
    assert!(node.wait_for_initial_create(STEP).await.unwrap());
    let stat = wait_for_node(&other, "/restart", b"x").await;
    // Settled: the old run's delete is over, and the node stays.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = wait_for_node(&other, "/restart", b"x").await;
    assert_eq!(
        (later.czxid, later.ephemeral_owner),
        (stat.czxid, c.session_id())
    );
    assert_eq!(node.actual_path().as_deref(), Some("/restart"));
    node.close().await.unwrap();
    wait_for_absence(&other, "/restart").await;
    close_all([c, other]).await;
}

/// A close whose delete the server refuses (a child was created under the node) reports it
/// and leaves the node; nothing deletes it later behind the back of a run started again,
/// which adopts it, once the child is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delete_is_reported_and_never_retried_behind_a_new_run() {
    const KEPT: &str = "/kept";
    let (_, [c, other]) = fresh_clients("persistent_refused", T).await;
    let node = PersistentNode::new(c.clone(), KEPT, CreateMode::Persistent, "x");
    start_created(&node).await;
    let persistent = CreateOptions::persistent();
    other.create("/kept/child", "", &persistent).await.unwrap();
    assert!(
        matches!(node.close().await, Err(LockError::Client(Error::NotEmpty))),
        "the refusal is reported"
    );
    let stat = wait_for_node(&other, KEPT, b"x").await;
    start_created(&node).await;
    other.delete("/kept/child", None).await.unwrap();
    // Long enough for several retries of a delete left to run in the background.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = wait_for_node(&other, KEPT, b"x").await;
    assert_eq!(
        later.czxid, stat.czxid,
        "the node was deleted and made again"
    );
    node.close().await.unwrap();
    wait_for_absence(&other, KEPT).await;
    close_all([c, other]).await;
}
