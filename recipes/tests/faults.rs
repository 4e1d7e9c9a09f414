//! Lock recipes under faults: the create reply lost (docs/faults.md #16), the session killed
//! while the create's outcome is unknown (docs/faults.md #17), container parents reaped and
//! recreated.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod support;

use std::time::{Duration, Instant};

use support::proxied;
use zkwire::proto::OpCode;
use zkwire::{Client, CreateOptions, Error};
use zkwire_recipes::{LockError, Mutex, MutexGuard};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::{ServerConfig, ZkServer};
use zkwire_testing::support::{connect_with_timeout, kill_client_session, sorted_children};

const T: Duration = Duration::from_secs(2);

async fn connect(cs: &str) -> Client {
    connect_with_timeout(cs, T).await
}

/// Locks `path` with `a` (within 3 T) while the proxy cuts the connection right after the
/// first `op` request reaches the server: that request's reply is lost.
async fn lock_through_a_cut(proxy: &FaultProxy, a: &Client, path: &str, op: OpCode) -> MutexGuard {
    proxy.cut_after_request(op, 1);
    let guard = tokio::time::timeout(3 * T, Mutex::new(a.clone(), path).lock())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(proxy.triggered(), 1, "the {op:?} reply was lost");
    guard
}

/// Releases `guard`, then closes its client `a`.
async fn release_and_close(guard: MutexGuard, a: &Client) {
    guard.release().await.unwrap();
    a.close().await.unwrap();
}

/// [`proxied`] with the lock's parent `/l` made, an observer on the chroot and the contender
/// `a` through the proxy.
struct Cut {
    cs: String,
    proxy: FaultProxy,
    observer: Client,
    a: Client,
}

impl Cut {
    async fn new(name: &str) -> Self {
        let (cs, proxy, via) = proxied(name).await;
        let observer = connect(&cs).await;
        observer
            .create("/l", b"", &CreateOptions::persistent())
            .await
            .unwrap();
        let a = connect(&via).await;
        Self {
            cs,
            proxy,
            observer,
            a,
        }
    }

    /// Refuses new connections and cuts the connection right after the first lock-node
    /// create reaches the server: the create's outcome stays unknown to `a`.
    fn lose_the_create(&self) {
        self.proxy.refuse(true);
        self.proxy.cut_after_request(OpCode::Create2, 1);
    }

    /// The children of `/l`, sorted.
    async fn kids(&self) -> Vec<String> {
        sorted_children(&self.observer, "/l").await
    }

    /// Lets `a` connect again, then asserts that `/l` has no children within 2 T (`why`
    /// they are gone).
    async fn let_back_until_empty(&self, why: &str) {
        self.proxy.refuse(false);
        let deadline = Instant::now() + 2 * T;
        while !self.kids().await.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(self.kids().await.is_empty(), "{why}");
    }
}

/// docs/faults.md #16: the connection is cut right after the lock node's create reaches the
/// server. The acquire finds its node by guid (after a sync, owner = our session): exactly one
/// node for this contender, the lock works, no orphan at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m16_create_reply_lost_is_recovered_by_guid() {
    let Cut {
        cs,
        proxy,
        observer,
        a,
    } = Cut::new("recipes_m16").await;
    let session = a.session_id();
    let guard = lock_through_a_cut(&proxy, &a, "/l", OpCode::Create2).await;
    assert_eq!(
        proxy.requests_seen(OpCode::Create2),
        1,
        "recovered without a second create"
    );
    assert_eq!(a.session_id(), session, "same session");
    let kids = sorted_children(&observer, "/l").await;
    assert_eq!(
        kids.len(),
        1,
        "exactly one node for this contender: {kids:?}"
    );
    assert!(guard.path().ends_with(&kids[0]));
    assert!(guard.fencing_token() > 0);

    // The lock works: another contender waits, then gets it.
    let b = connect(&cs).await;
    let mb = Mutex::new(b.clone(), "/l");
    assert!(mb.try_lock().await.unwrap().is_none());
    guard.release().await.unwrap();
    mb.lock_timeout(T).await.unwrap().release().await.unwrap();
    assert!(
        sorted_children(&observer, "/l").await.is_empty(),
        "0 orphans"
    );
}

/// docs/faults.md #17 in zkwire's model: a client never changes session, so when the session is
/// killed while the create's outcome is unknown, the acquire fails with SessionExpired, the
/// node went with the session, and nobody else is kept out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m17_session_killed_before_the_retry() {
    let cut = Cut::new("recipes_m17").await;
    cut.lose_the_create();
    let pending = tokio::spawn({
        let a = cut.a.clone();
        async move { Mutex::new(a, "/l").lock().await }
    });
    let deadline = Instant::now() + T;
    while cut.proxy.triggered() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(cut.proxy.triggered(), 1);
    assert_eq!(cut.kids().await.len(), 1, "the create applied");
    kill_client_session(&cut.a).await.unwrap();
    cut.proxy.refuse(false);
    let r = tokio::time::timeout(3 * T, pending).await.unwrap().unwrap();
    assert_eq!(r.err(), Some(LockError::Client(Error::SessionExpired)));
    assert!(
        cut.kids().await.is_empty(),
        "the node went with the session"
    );
    Mutex::new(cut.observer.clone(), "/l")
        .lock_timeout(T)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

/// Missing parents are containers: reaped once empty, and recreated by the next acquire.
/// The sequence restarts with the new incarnation while the fencing token (czxid) still
/// grows, which is why the token is the czxid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_are_reaped_and_recreated() {
    let config = ServerConfig::default().jvm_prop("znode.container.checkIntervalMs", "100");
    let server = tokio::task::block_in_place(|| ZkServer::start_with(config)).unwrap();
    let a = connect(&server.connect_string()).await;
    let mutex = Mutex::new(a.clone(), "/app/locks/job");
    let g = mutex.lock().await.unwrap();
    assert!(g.path().ends_with("-lock-0000000000"), "{}", g.path());
    let first_token = g.fencing_token();
    // Bump the counter (a missed try_lock by another session), so that the restart below
    // is visible.
    let b = connect(&server.connect_string()).await;
    let g2 = Mutex::new(b.clone(), "/app/locks/job")
        .try_lock()
        .await
        .unwrap();
    assert!(g2.is_none());
    b.close().await.unwrap();
    g.release().await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(10);
    while a.exists("/app").await.unwrap().is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        a.exists("/app").await.unwrap(),
        None,
        "every container level reaped once empty"
    );

    let g = mutex.lock().await.unwrap();
    assert!(
        g.path().ends_with("-lock-0000000000"),
        "the sequence restarted: {}",
        g.path()
    );
    assert!(g.fencing_token() > first_token, "the token did not");
    release_and_close(g, &a).await;
}

/// A create whose reply is lost, then a deadline that passes while no server can be reached:
/// the acquire fails with Timeout, and once the client is back the background sweep deletes
/// the node it finds by guid (owned by our session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_failure_is_swept_by_guid_in_the_background() {
    let cut = Cut::new("recipes_sweep").await;
    cut.lose_the_create();
    let started = Instant::now();
    let r = Mutex::new(cut.a.clone(), "/l")
        .lock_timeout(Duration::from_millis(300))
        .await;
    let took = started.elapsed();
    assert_eq!(r.err(), Some(LockError::Timeout));
    assert!(
        took < Duration::from_millis(300) + Duration::from_millis(700),
        "deadline + cleanup grace: {took:?}"
    );
    assert_eq!(
        cut.kids().await.len(),
        1,
        "the orphan, until the client is back"
    );
    cut.let_back_until_empty("swept").await;
    assert_eq!(
        cut.a.state(),
        zkwire::SessionState::Connected,
        "same session, still alive"
    );
    cut.a.close().await.unwrap();
}

/// A guard dropped while its delete cannot reach the server: the delete, sent in the
/// background, vanishes and the connection is then cut, so the request fails with
/// ConnectionLoss and was never applied. The client's cleanup worker sends it again once
/// the client is back: same session, no orphan, and the node stays until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guards_delete_lost_with_the_connection_is_sent_again() {
    let cut = Cut::new("recipes_drop_retry").await;
    let session = cut.a.session_id();
    let guard = Mutex::new(cut.a.clone(), "/l").lock().await.unwrap();
    assert_eq!(cut.kids().await.len(), 1);
    let deletes = cut.proxy.requests_seen(OpCode::Delete);
    cut.proxy.drop_client_to_server(true);
    drop(guard);
    let deadline = Instant::now() + T;
    while cut.proxy.requests_seen(OpCode::Delete) == deletes && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        cut.proxy.requests_seen(OpCode::Delete),
        deletes + 1,
        "the delete was sent, and thrown away"
    );
    cut.proxy.refuse(true);
    cut.proxy.cut_all();
    cut.proxy.drop_client_to_server(false);
    tokio::time::sleep(T / 4).await;
    assert_eq!(
        cut.kids().await.len(),
        1,
        "the lost delete was never applied"
    );
    cut.let_back_until_empty("deleted by the worker's retry")
        .await;
    assert!(
        cut.proxy.requests_seen(OpCode::Delete) >= deletes + 2,
        "sent again"
    );
    assert_eq!(cut.a.session_id(), session, "same session");
    cut.a.close().await.unwrap();
}

/// A waiter rides through a connection loss: its watch is restored and it acquires when the
/// holder releases. A holder rides through a blip shorter than the grace (T/4): no lost
/// signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_survives_a_connection_cut() {
    let (cs, proxy, via) = proxied("recipes_waiter_cut").await;
    let holder_client = connect(&cs).await;
    let holder = Mutex::new(holder_client.clone(), "/l")
        .lock()
        .await
        .unwrap();
    let a = connect(&via).await;
    let waiter = tokio::spawn({
        let a = a.clone();
        async move { Mutex::new(a, "/l").lock().await }
    });
    while sorted_children(&holder_client, "/l").await.len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.cut_all();
    tokio::time::sleep(Duration::from_millis(100)).await;
    holder.release().await.unwrap();
    let g = tokio::time::timeout(2 * T, waiter)
        .await
        .expect("acquires after the cut")
        .unwrap()
        .unwrap();
    assert!(g.is_held());
    assert_eq!(sorted_children(&holder_client, "/l").await.len(), 1);
    let mut states = a.state_stream();
    proxy.cut_all();
    let mut seen = Vec::new();
    while seen.last() != Some(&zkwire::SessionState::Connected) {
        seen.push(
            tokio::time::timeout(T, states.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(
        seen,
        [
            zkwire::SessionState::Disconnected,
            zkwire::SessionState::Connected
        ]
    );
    assert!(g.is_held(), "a blip shorter than the grace is not a loss");
    release_and_close(g, &a).await;
}

/// After a reconnect the server answers restored watches with the events of what changed
/// meanwhile in the order of the paths listed, not of the changes, and the client may handle
/// them apart: our own node's deletion can come after the predecessor's. The one-notification
/// hand-off must then list again instead of granting a node that is gone: every grant is of
/// a node that exists. Ten trials, each with its own spread of delays on the server's frames
/// (so that the two events arrive apart) and its own order of the restored watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoff_after_a_reconnect_never_grants_a_deleted_node() {
    let (cs, proxy, via) = proxied("recipes_handoff_reconnect").await;
    let observer = connect(&cs).await;
    for trial in 0..10u64 {
        let dir = format!("/l{trial}");
        observer
            .create(&dir, b"", &CreateOptions::persistent())
            .await
            .unwrap();
        // The predecessor sorts first by name as well as by sequence.
        let (first, _) = observer
            .create(
                &format!("{dir}/_c_00000000-0000-0000-0000-000000000000-lock-"),
                b"",
                &CreateOptions::ephemeral_sequential(),
            )
            .await
            .unwrap();
        let a = connect(&via).await;
        let mutex = Mutex::new(a.clone(), dir.clone());
        let waiting = tokio::spawn(async move { mutex.lock().await });
        let ours = loop {
            let kids = sorted_children(&observer, &dir).await;
            if let Some(ours) = kids.iter().find(|k| !first.ends_with(k.as_str())) {
                break format!("{dir}/{ours}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        // Let the waiter set its two watches, then cut it off.
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.refuse(true);
        proxy.reset_all();
        observer.delete(&ours, None).await.unwrap();
        observer.delete(&first, None).await.unwrap();
        proxy.delay_direction(
            zkwire_testing::proxy::Direction::ServerToClient,
            Duration::ZERO,
            Duration::from_millis(300),
            trial,
        );
        proxy.refuse(false);
        let guard = tokio::time::timeout(5 * T, waiting)
            .await
            .expect("granted in time")
            .unwrap()
            .unwrap();
        let held = observer.exists(guard.path()).await.unwrap();
        assert!(
            held.is_some(),
            "trial {trial}: granted {} although it was deleted",
            guard.path()
        );
        assert_ne!(
            guard.path(),
            ours,
            "trial {trial}: the deleted node was granted"
        );
        proxy.delay_direction(
            zkwire_testing::proxy::Direction::ServerToClient,
            Duration::ZERO,
            Duration::ZERO,
            0,
        );
        release_and_close(guard, &a).await;
    }
    observer.close().await.unwrap();
}

/// A connection loss while the missing parents are being created (the container create's
/// reply is lost) does not fail the acquire: it rides through, as every other step does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_loss_while_creating_parents() {
    let (cs, proxy, via) = proxied("recipes_parents_cut").await;
    let a = connect(&via).await;
    let guard = lock_through_a_cut(&proxy, &a, "/deep/er/l", OpCode::CreateContainer).await;
    let observer = connect(&cs).await;
    assert_eq!(sorted_children(&observer, "/deep/er/l").await.len(), 1);
    release_and_close(guard, &a).await;
}
