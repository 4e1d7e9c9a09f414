//! Faults injected by the frame-aware proxy between the client and a real ZooKeeper:
//! keepalive, watch catch-up, watches pending at a cut, 10,000 watches across a restart
//! (docs/faults.md #8, #13, #14, #15) and a recursive watch across repeated cuts. Every test
//! ends with the leak check (docs/faults.md #27).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use zkwire::proto::OpCode;
use zkwire::{
    AddWatchMode, Client, CreateOptions, Error, EventType, Op, SessionState, StateStream,
};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::{shared_server, ZkServer};
use zkwire_testing::support::{
    assert_no_leaks_to, connect_with_timeout, create_persistent, fresh_chroot, next_state,
};

async fn proxy_to(server: &ZkServer) -> FaultProxy {
    FaultProxy::start(server.addr()).await.unwrap()
}

/// A client through `proxy` under the chroot of `direct` (a connect string with a chroot).
async fn through(proxy: &FaultProxy, direct: &str, timeout: Duration) -> Client {
    let chroot = direct.find('/').map_or("", |i| &direct[i..]);
    let cs = format!("{}{chroot}", proxy.connect_string());
    connect_with_timeout(&cs, timeout).await
}

async fn reconnected(states: &mut StateStream, within: Duration) {
    assert_eq!(next_state(states, within).await, SessionState::Disconnected);
    assert_eq!(next_state(states, within).await, SessionState::Connected);
}

/// The client's own sockets: those to its proxy (other tests share the server's port).
fn ports(proxy: &FaultProxy) -> [u16; 1] {
    [proxy.addr().port()]
}

/// Under a fresh chroot `name` of the shared server: a proxy to the server, a client `a`
/// through it (session timeout 6 s) and a client `b` straight to the server.
async fn cut_and_direct(name: &str) -> (FaultProxy, Client, Client) {
    let direct = fresh_chroot(name).await;
    let proxy = proxy_to(shared_server()).await;
    let a = through(&proxy, &direct, Duration::from_secs(6)).await;
    let b = Client::connect(&direct).await.unwrap();
    (proxy, a, b)
}

/// Closes `b`, then checks that `a` leaves nothing behind on its proxy's sockets.
async fn close_both(proxy: &FaultProxy, a: Client, b: Client) {
    b.close().await.unwrap();
    assert_no_leaks_to(a, &ports(proxy)).await;
}

/// docs/faults.md #8: an idle session stays connected for 3·T: keepalives (the lease's
/// syncs, which stand in for pings: docs/lease.md) go out at least every read-timeout/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m08_idle_session_is_kept_alive() {
    let direct = fresh_chroot("m08").await;
    let proxy = proxy_to(shared_server()).await;
    let t = Duration::from_secs(2);
    let c = through(&proxy, &direct, t).await;
    let mut states = c.state_stream();
    let idle = 3 * t;
    let quiet = tokio::time::timeout(idle, states.next()).await;
    assert!(quiet.is_err(), "no state change while idle: {quiet:?}");
    let pings = proxy.requests_seen(OpCode::Ping) + proxy.requests_seen(OpCode::Sync);
    // Read timeout 2/3·T = 1333 ms, so a ping at least every 667 ms of idleness.
    let at_least = (idle.as_millis() / 667) as usize - 1;
    println!("m08: {pings} keepalives in {idle:?} (expected ≥ {at_least})");
    zkwire_testing::support::figure("m08.keepalives", pings);
    assert!(pings >= at_least, "{pings} pings in {idle:?}");
    assert_eq!(proxy.connections(), 1, "never reconnected");
    assert_no_leaks_to(c, &ports(&proxy)).await;
}

/// docs/faults.md #13: changes made while the client is cut off are caught up by SetWatches on
/// reconnect: exactly one event per affected watch; a node created and deleted during the gap
/// fires nothing on an exists watch (the documented gap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m13_watch_catch_up_after_a_partition() {
    let (proxy, a, b) = cut_and_direct("m13").await;
    for p in ["/d", "/c", "/gone"] {
        create_persistent(&b, p, b"").await;
    }
    let (_, _, data) = a.get_data_and_watch("/d").await.unwrap();
    let (_, _, child) = a.get_children_and_watch("/c").await.unwrap();
    let (_, _, gone) = a.get_data_and_watch("/gone").await.unwrap();
    let (_, created) = a.exists_and_watch("/e1").await.unwrap();
    let (_, mut gap) = a.exists_and_watch("/e2").await.unwrap();
    let (_, _, mut untouched) = a.get_data_and_watch("/c").await.unwrap();
    let session = a.session_id();
    let mut states = a.state_stream();

    proxy.blackhole_drop(true);
    b.set_data("/d", b"1", None).await.unwrap();
    create_persistent(&b, "/c/k", b"").await;
    b.delete("/gone", None).await.unwrap();
    create_persistent(&b, "/e1", b"").await;
    create_persistent(&b, "/e2", b"").await;
    b.delete("/e2", None).await.unwrap();
    proxy.cut_all();
    proxy.blackhole_drop(false);
    reconnected(&mut states, Duration::from_secs(6)).await;
    assert_eq!(a.session_id(), session);

    let within = Duration::from_secs(3);
    let event = |w: zkwire::OneshotWatcher| async move {
        tokio::time::timeout(within, w)
            .await
            .expect("caught up")
            .event_type
    };
    assert_eq!(event(data).await, EventType::NodeDataChanged);
    assert_eq!(event(child).await, EventType::NodeChildrenChanged);
    assert_eq!(event(gone).await, EventType::NodeDeleted);
    assert_eq!(event(created).await, EventType::NodeCreated);
    let nothing = tokio::time::timeout(Duration::from_millis(300), &mut gap).await;
    assert!(
        nothing.is_err(),
        "create+delete in the gap fires nothing: {nothing:?}"
    );
    let nothing = tokio::time::timeout(Duration::from_millis(100), &mut untouched).await;
    assert!(
        nothing.is_err(),
        "an unchanged node fires nothing: {nothing:?}"
    );
    // The watches that did not fire are armed again: they fire once on the next change.
    create_persistent(&b, "/e2", b"").await;
    assert_eq!(event(gap).await, EventType::NodeCreated);
    b.set_data("/c", b"x", None).await.unwrap();
    assert_eq!(event(untouched).await, EventType::NodeDataChanged);
    close_both(&proxy, a, b).await;
}

/// docs/faults.md #14: exists-watch requests cut off before their replies fail with
/// ConnectionLoss and leave no watch; the one that returned OK fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m14_watches_pending_at_a_cut_are_not_registered() {
    let (proxy, a, b) = cut_and_direct("m14").await;
    let (_, ok) = a.exists_and_watch("/ok").await.unwrap();
    let mut states = a.state_stream();

    proxy.hold_server_to_client(true);
    let mut pending = JoinSet::new();
    for i in 0..10 {
        let a = a.clone();
        pending.spawn(async move { a.exists_and_watch(&format!("/p{i}")).await.map(drop) });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.cut_all();
    proxy.hold_server_to_client(false);
    while let Some(result) = pending.join_next().await {
        assert_eq!(result.unwrap(), Err(Error::ConnectionLoss));
    }
    reconnected(&mut states, Duration::from_secs(6)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        a.stats().watches,
        1,
        "only the acknowledged watch is registered"
    );

    for i in 0..10 {
        b.create(&format!("/p{i}"), b"", &CreateOptions::persistent())
            .await
            .unwrap();
    }
    create_persistent(&b, "/ok", b"").await;
    let fired = tokio::time::timeout(Duration::from_secs(3), ok)
        .await
        .expect("fires");
    assert_eq!(fired.event_type, EventType::NodeCreated);
    assert_eq!(a.stats().watches, 0);
    close_both(&proxy, a, b).await;
}

/// A persistent recursive watch keeps delivering across 3 consecutive connection cuts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_watch_survives_three_cuts() {
    let (proxy, a, b) = cut_and_direct("recursive_cuts").await;
    create_persistent(&b, "/r", b"").await;
    let mut w = a
        .add_watch("/r", AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let mut states = a.state_stream();
    for cut in 0..3 {
        proxy.cut_all();
        reconnected(&mut states, Duration::from_secs(6)).await;
        let path = format!("/r/after-cut-{cut}");
        create_persistent(&b, &path, b"").await;
        let e = tokio::time::timeout(Duration::from_secs(3), w.next())
            .await
            .expect("delivered")
            .unwrap();
        assert_eq!(
            (e.event_type, e.path.as_str()),
            (EventType::NodeCreated, path.as_str())
        );
    }
    let extra = tokio::time::timeout(Duration::from_millis(200), w.next()).await;
    assert!(extra.is_err(), "exactly once: {extra:?}");
    assert!(
        proxy.requests_seen(OpCode::SetWatches2) >= 3,
        "re-registered with SetWatches2"
    );
    b.close().await.unwrap();
    drop(w);
    assert_no_leaks_to(a, &ports(&proxy)).await;
}

/// docs/faults.md #15: 10,000 watches on 110-character paths survive a server restart: the
/// client is back within 1 s of the server, re-registers them in SetWatches frames of at most
/// 128 KiB of paths, and every watch fires exactly once on the next change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m15_ten_thousand_watches_survive_a_restart() {
    const N: usize = 10_000;
    let mut server = ZkServer::start().unwrap();
    let proxy = proxy_to(&server).await;
    let b = Client::connect(&server.connect_string()).await.unwrap();
    create_persistent(&b, "/w", b"").await;
    let paths: Vec<String> = (0..N)
        .map(|i| format!("/w/{i:05}-{}", "x".repeat(101)))
        .collect();
    assert_eq!(paths[0].len(), 110);
    for chunk in paths.chunks(500) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|p| Op::create(p.as_str(), &b""[..], &CreateOptions::persistent()))
            .collect();
        b.multi(&ops).await.unwrap();
    }
    let a = through(&proxy, &server.connect_string(), Duration::from_secs(10)).await;
    let mut watchers = Vec::with_capacity(N);
    for chunk in paths.chunks(1000) {
        let mut set = JoinSet::new();
        for (i, p) in chunk.iter().enumerate() {
            let (a, p) = (a.clone(), p.clone());
            set.spawn(async move { (i, a.get_data_and_watch(&p).await.unwrap().2) });
        }
        let mut got: Vec<_> = set.join_all().await;
        got.sort_by_key(|(i, _)| *i);
        watchers.extend(got.into_iter().map(|(_, w)| w));
    }
    assert_eq!(a.stats().watches, N);
    let mut states = a.state_stream();

    // The proxy turns connections away until the restarted server is ready: a server still
    // loading its database accepts a connection and may abandon it unanswered (upstream
    // ZOOKEEPER-5051), which would cost the client a connect timeout, not what this test
    // measures.
    proxy.refuse(true);
    tokio::task::block_in_place(|| server.restart()).unwrap();
    let back = Instant::now();
    proxy.refuse(false);
    assert_eq!(
        next_state(&mut states, Duration::from_secs(10)).await,
        SessionState::Disconnected
    );
    assert_eq!(
        next_state(&mut states, Duration::from_secs(10)).await,
        SessionState::Connected
    );
    let reconnect = back.elapsed();
    // SetWatches is pipelined behind the ConnectRequest: wait until its replies are in.
    a.sync("/").await.unwrap();
    let batches = proxy.set_watches_path_bytes();
    println!("m15: reconnected {reconnect:?} after the server was back; SetWatches batches (path bytes): {batches:?}");
    zkwire_testing::support::figure("m15.reconnect_ms", reconnect.as_millis());
    let largest = batches.iter().max().copied().unwrap_or(0);
    zkwire_testing::support::figure("m15.setwatches_max_path_bytes", largest);
    assert!(
        reconnect < Duration::from_secs(1),
        "reconnect took {reconnect:?}"
    );
    // At least one full re-registration (an attempt cut short may have sent some too).
    assert!(
        batches.iter().sum::<usize>() >= N * 110,
        "every watch re-registered"
    );
    assert!(
        batches.iter().all(|&bytes| bytes <= 128 * 1024),
        "{batches:?}"
    );
    assert!(batches.len() >= 9);

    let b = Client::connect(&server.connect_string()).await.unwrap();
    for chunk in paths.chunks(500) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|p| Op::set_data(p.as_str(), &b"1"[..], None))
            .collect();
        b.multi(&ops).await.unwrap();
    }
    let all = async {
        for w in watchers {
            assert_eq!(w.await.event_type, EventType::NodeDataChanged);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), all)
        .await
        .expect("every watch fires");
    assert_eq!(a.stats().watches, 0, "each fired exactly once and is gone");
    b.close().await.unwrap();
    assert_no_leaks_to(a, &ports(&proxy)).await;
}

/// A watch-setting call dropped after its request was sent leaves no watcher behind when
/// the reply arrives later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watch_call_registers_nothing() {
    let direct = fresh_chroot("dropped_watch").await;
    let proxy = proxy_to(shared_server()).await;
    let a = through(&proxy, &direct, Duration::from_secs(6)).await;
    create_persistent(&a, "/n", b"").await;
    proxy.hold_server_to_client(true);
    let before = proxy.requests_seen(OpCode::GetData);
    let call = {
        let a = a.clone();
        tokio::spawn(async move { a.get_data_and_watch("/n").await.map(drop) })
    };
    let sent = tokio::time::timeout(Duration::from_secs(3), async {
        while proxy.requests_seen(OpCode::GetData) == before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    sent.await.expect("the request reached the server");
    call.abort();
    let _ = call.await;
    proxy.hold_server_to_client(false);
    a.sync("/").await.unwrap();
    assert_eq!(a.stats().watches, 0, "no watcher left: {:?}", a.stats());
    assert_no_leaks_to(a, &ports(&proxy)).await;
}
