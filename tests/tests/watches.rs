//! Every watch kind against a real ZooKeeper server: each event delivered exactly once and
//! ordered with replies.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::Duration;

use zkwire::{
    AddWatchMode, CreateOptions, Error, EventType, KeeperState, OneshotWatcher, PersistentWatcher,
    WatchedEvent, WatcherType,
};
use zkwire_testing::support::{client_in_chroot, create_persistent};

/// The event must already be there: the server sends a notification before the reply that
/// shows the change, and the client delivers both in order.
async fn ready<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::ZERO, f)
        .await
        .expect("event delivered before the reply")
}

/// `watcher` has already fired, with `event_type` on `path`; its event.
async fn fired(watcher: OneshotWatcher, event_type: EventType, path: &str) -> WatchedEvent {
    let event = ready(watcher).await;
    assert_eq!((event.event_type, event.path.as_str()), (event_type, path));
    event
}

/// The next events on `w` are `expected`, in order, and no other comes within 100 ms (`what`
/// says what that means).
async fn expect_events(w: &mut PersistentWatcher, expected: &[(EventType, &str)], what: &str) {
    for &(event_type, path) in expected {
        let e = ready(w.next()).await.unwrap();
        assert_eq!((e.event_type, e.path.as_str()), (event_type, path));
    }
    let extra = tokio::time::timeout(Duration::from_millis(100), w.next()).await;
    assert!(extra.is_err(), "{what}: got an extra {extra:?}");
}

#[tokio::test]
async fn data_watch_fires_once_before_the_write_reply() {
    let c = client_in_chroot("w_data").await;
    create_persistent(&c, "/n", b"").await;
    let (_, _, watcher) = c.get_data_and_watch("/n").await.unwrap();
    c.set_data("/n", b"1", None).await.unwrap();
    let event = fired(watcher, EventType::NodeDataChanged, "/n").await;
    assert_eq!(event.state, KeeperState::SyncConnected);
    // A watch on a missing node is not left by getData.
    assert_eq!(
        c.get_data_and_watch("/missing").await.err(),
        Some(Error::NoNode)
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn exist_watch_on_missing_node_fires_on_create() {
    let c = client_in_chroot("w_exist").await;
    let (stat, watcher) = c.exists_and_watch("/later").await.unwrap();
    assert!(stat.is_none());
    create_persistent(&c, "/later", b"").await;
    fired(watcher, EventType::NodeCreated, "/later").await;
    let (stat, watcher) = c.exists_and_watch("/later").await.unwrap();
    assert!(stat.is_some());
    c.delete("/later", None).await.unwrap();
    assert_eq!(ready(watcher).await.event_type, EventType::NodeDeleted);
    c.close().await.unwrap();
}

#[tokio::test]
async fn child_watch_fires_on_children_change_and_delete() {
    let c = client_in_chroot("w_child").await;
    create_persistent(&c, "/p", b"").await;
    let (_, _, watcher) = c.get_children_and_watch("/p").await.unwrap();
    create_persistent(&c, "/p/k", b"").await;
    fired(watcher, EventType::NodeChildrenChanged, "/p").await;
    c.delete("/p/k", None).await.unwrap();
    let (_, _, watcher) = c.get_children_and_watch("/p").await.unwrap();
    c.delete("/p", None).await.unwrap();
    assert_eq!(ready(watcher).await.event_type, EventType::NodeDeleted);
    c.close().await.unwrap();
}

#[tokio::test]
async fn persistent_watch_keeps_firing_for_its_node_only() {
    let c = client_in_chroot("w_persistent").await;
    let mut w = c.add_watch("/n", AddWatchMode::Persistent).await.unwrap();
    create_persistent(&c, "/n", b"").await;
    c.set_data("/n", b"1", None).await.unwrap();
    create_persistent(&c, "/n/kid", b"").await;
    c.set_data("/n/kid", b"ignored", None).await.unwrap();
    c.set_data("/n", b"2", None).await.unwrap();
    let expected = [
        (EventType::NodeCreated, "/n"),
        (EventType::NodeDataChanged, "/n"),
        (EventType::NodeChildrenChanged, "/n"),
        (EventType::NodeDataChanged, "/n"),
    ];
    expect_events(&mut w, &expected, "exactly once").await;
    c.close().await.unwrap();
    let end = w.next().await.unwrap();
    assert_eq!(
        (end.event_type, end.state),
        (EventType::None, KeeperState::Closed)
    );
    assert_eq!(w.next().await, None);
}

#[tokio::test]
async fn recursive_watch_covers_the_subtree_without_child_events() {
    let c = client_in_chroot("w_recursive").await;
    let mut w = c
        .add_watch("/r", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    create_persistent(&c, "/r", b"").await;
    create_persistent(&c, "/r/a", b"").await;
    create_persistent(&c, "/r/a/b", b"").await;
    c.set_data("/r/a/b", b"x", None).await.unwrap();
    c.delete("/r/a/b", None).await.unwrap();
    create_persistent(&c, "/elsewhere", b"").await;
    let expected = [
        (EventType::NodeCreated, "/r"),
        (EventType::NodeCreated, "/r/a"),
        (EventType::NodeCreated, "/r/a/b"),
        (EventType::NodeDataChanged, "/r/a/b"),
        (EventType::NodeDeleted, "/r/a/b"),
    ];
    expect_events(
        &mut w,
        &expected,
        "no NodeChildrenChanged and nothing outside",
    )
    .await;
    c.close().await.unwrap();
}

#[tokio::test]
async fn one_notification_fans_out_to_every_local_watcher() {
    let c = client_in_chroot("w_fanout").await;
    create_persistent(&c, "/n", b"").await;
    let (_, _, w1) = c.get_data_and_watch("/n").await.unwrap();
    let (_, _, w2) = c.get_data_and_watch("/n").await.unwrap();
    let (_, w3) = c.exists_and_watch("/n").await.unwrap();
    c.set_data("/n", b"1", None).await.unwrap();
    for w in [w1, w2, w3] {
        assert_eq!(ready(w).await.event_type, EventType::NodeDataChanged);
    }
    c.close().await.unwrap();
}

#[tokio::test]
async fn remove_and_check_watches() {
    let c = client_in_chroot("w_remove").await;
    create_persistent(&c, "/n", b"").await;
    let (_, _, watcher) = c.get_data_and_watch("/n").await.unwrap();
    c.check_watches("/n", WatcherType::Data).await.unwrap();
    assert_eq!(
        c.check_watches("/n", WatcherType::Children).await,
        Err(Error::NoWatcher)
    );
    c.remove_watches("/n", WatcherType::Data).await.unwrap();
    fired(watcher, EventType::DataWatchRemoved, "/n").await;
    assert_eq!(
        c.check_watches("/n", WatcherType::Data).await,
        Err(Error::NoWatcher)
    );
    assert_eq!(
        c.remove_watches("/n", WatcherType::Data).await,
        Err(Error::NoWatcher)
    );
    c.close().await.unwrap();
}

/// Removing a persistent watch ends its stream: `PersistentWatchRemoved`, then `None`, and
/// the client counts no watch. (The stream once stayed open after its removal event, pending
/// for ever, and its sink kept the client's task running.)
#[tokio::test]
async fn removing_a_persistent_watch_ends_its_stream() {
    let c = client_in_chroot("w_remove_persistent").await;
    create_persistent(&c, "/n", b"").await;
    let mut w = c.add_watch("/n", AddWatchMode::Persistent).await.unwrap();
    c.remove_watches("/n", WatcherType::Any).await.unwrap();
    let removed = ready(w.next()).await.expect("the removal event");
    assert_eq!(
        (removed.event_type, removed.path.as_str()),
        (EventType::PersistentWatchRemoved, "/n")
    );
    assert!(ready(w.next()).await.is_none(), "the stream ends");
    assert_eq!(c.stats().watches, 0, "{:?}", c.stats());
    c.close().await.unwrap();
}

/// A watcher dropped while the client's command queue is full is still removed, once the
/// queue has room. (The removal was dropped with the full queue; a watcher whose read had
/// failed, which the server never set, then stayed for the client's life.)
#[tokio::test]
async fn a_watcher_dropped_with_the_queue_full_is_still_removed() {
    let c = client_in_chroot("w_drop_full").await;
    create_persistent(&c, "/n", b"").await;
    let (_, _, watcher) = c.get_data_and_watch("/n").await.unwrap();
    assert_eq!(c.stats().watches, 1);
    // Nothing yields in between: the driver cannot take from the queue meanwhile.
    for _ in 0..2_000 {
        c.delete_detached("/missing", None, |_, _| {});
    }
    drop(watcher);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while c.stats().watches > 0 {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", c.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.close().await.unwrap();
}

#[tokio::test]
async fn one_shot_watcher_ends_when_the_session_closes() {
    let c = client_in_chroot("w_close").await;
    let (_, watcher) = c.exists_and_watch("/never").await.unwrap();
    c.close().await.unwrap();
    let event = watcher.await;
    assert_eq!(
        (event.event_type, event.state),
        (EventType::None, KeeperState::Closed)
    );
}

/// Notifications for watches nobody listens to any more (dropped one-shot watchers, a
/// dropped persistent stream, a chroot-less path) are ignored: the connection stays up and
/// later requests are answered on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_nobody_listens_to_are_ignored() {
    let a = client_in_chroot("watches_orphan_notifications").await;
    let b = client_in_chroot("watches_orphan_notifications").await;
    for i in 0..20 {
        let path = format!("/n{i}");
        create_persistent(&b, &path, b"").await;
        let (_, _, data) = a.get_data_and_watch(&path).await.unwrap();
        let (_, _, children) = a.get_children_and_watch(&path).await.unwrap();
        let stream = a
            .add_watch(&path, AddWatchMode::PersistentRecursive)
            .await
            .unwrap();
        drop((data, children, stream));
    }
    for i in 0..20 {
        let path = format!("/n{i}");
        b.create(&format!("{path}/c"), b"", &CreateOptions::persistent())
            .await
            .unwrap();
        b.set_data(&path, b"x", None).await.unwrap();
        b.delete(&format!("{path}/c"), None).await.unwrap();
        b.delete(&path, None).await.unwrap();
    }
    b.sync("/").await.unwrap();
    // Whatever the server still sends for those watches has reached `a` by the time a
    // request sent after b's writes is answered.
    a.sync("/").await.unwrap();
    assert_eq!(a.exists("/n0").await.unwrap(), None);
    assert_eq!(a.stats().connections, 1, "the connection was dropped");
    assert_eq!(a.state(), zkwire::SessionState::Connected);
}
