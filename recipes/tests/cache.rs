//! [`TreeCache`] against a real server: the initial tree, events with old and new data, the
//! depth limit and the filter, a single-node cache; and a churn run (≥ 10,000 writes from
//! another session while the cache's connection is cut and its session killed) after which
//! the cache equals the server's tree and the replayed events equal the cache.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use zkwire::{Acl, Client, CreateOptions, Error, Perms};
use zkwire_recipes::{CacheEvent, CacheEvents, CachedNode, TreeCache};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{
    connect_renewing, connect_with_timeout, fresh_chroot, kill_client_session,
};

const STEP: Duration = Duration::from_secs(20);

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {STEP:?}: {what}"))
}

async fn next(events: &mut CacheEvents) -> CacheEvent {
    within("cache event", events.next())
        .await
        .expect("an event")
}

/// Applies one event to a replayed copy.
fn replay(copy: &mut BTreeMap<String, CachedNode>, event: CacheEvent) {
    match event {
        CacheEvent::Created { path, node } => {
            assert!(
                copy.insert(path.clone(), node).is_none(),
                "created twice: {path}"
            );
        }
        CacheEvent::Changed { path, old, new } => {
            let held = copy.insert(path.clone(), new);
            assert_eq!(held.as_ref(), Some(&old), "old value of {path}");
        }
        CacheEvent::Deleted { path, old } => {
            assert_eq!(copy.remove(&path).as_ref(), Some(&old), "deleted {path}");
            let prefix = format!("{path}/");
            assert!(
                !copy.keys().any(|p| p.starts_with(&prefix)),
                "{path} deleted before its descendants"
            );
        }
        CacheEvent::Initialized | CacheEvent::Unreadable { .. } => {}
        CacheEvent::Stopped(e) => panic!("the cache stopped: {e}"),
        other => panic!("unexpected {other:?}"),
    }
}

/// A writer session on `cs`, which has created `nodes` (persistent, in order); and `cs`.
async fn writer_of(cs: &str, nodes: &[(&str, &[u8])]) -> (String, Client) {
    let writer = Client::connect(cs).await.unwrap();
    for (path, data) in nodes {
        let persistent = CreateOptions::persistent();
        writer.create(path, data, &persistent).await.unwrap();
    }
    (cs.to_owned(), writer)
}

/// A reader session on `cs` and a cache of `root` on it, once loaded: every event of the
/// initial load, up to `Initialized`, goes to `initial`. The reader is returned so that it
/// outlives the cache as long as the test wants.
async fn loaded_cache(
    cs: &str,
    root: &str,
    mut initial: impl FnMut(CacheEvent),
) -> (Client, TreeCache, CacheEvents) {
    let reader = Client::connect(cs).await.unwrap();
    let (cache, mut events) = TreeCache::builder(reader.clone(), root)
        .start()
        .await
        .unwrap();
    loop {
        match next(&mut events).await {
            CacheEvent::Initialized => break,
            event => initial(event),
        }
    }
    (reader, cache, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_tree_then_events_with_old_and_new_data() {
    let cs = fresh_chroot("cache_basics").await;
    let writer = Client::connect(&cs).await.unwrap();
    for (path, data) in [
        ("/t", "root"),
        ("/t/a", "1"),
        ("/t/a/x", "2"),
        ("/t/b", "3"),
    ] {
        writer
            .create(path, data, &CreateOptions::persistent())
            .await
            .unwrap();
    }
    let mut initial = BTreeMap::new();
    let (_reader, cache, mut events) =
        loaded_cache(&cs, "/t", |event| replay(&mut initial, event)).await;
    assert_eq!(
        initial.keys().collect::<Vec<_>>(),
        ["/t", "/t/a", "/t/a/x", "/t/b"]
    );
    assert_eq!(initial, cache.snapshot());
    assert_eq!(cache.get("/t/a/x").unwrap().data, "2");
    assert_eq!(cache.children("/t"), ["a", "b"]);

    writer.set_data("/t/a", "1b", None).await.unwrap();
    match next(&mut events).await {
        CacheEvent::Changed { path, old, new } => {
            assert_eq!(path, "/t/a");
            assert_eq!((old.data, new.data), ("1".into(), "1b".into()));
            assert_eq!(new.stat.version, old.stat.version + 1);
        }
        other => panic!("{other:?}"),
    }
    writer
        .create("/t/b/y", "4", &CreateOptions::persistent())
        .await
        .unwrap();
    assert!(
        matches!(next(&mut events).await, CacheEvent::Created { path, .. } if path == "/t/b/y")
    );
    writer.delete("/t/b/y", None).await.unwrap();
    match next(&mut events).await {
        CacheEvent::Deleted { path, old } => {
            assert_eq!(path, "/t/b/y");
            assert_eq!(old.data, "4");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(cache.get("/t/b/y"), None);
    assert_eq!(cache.len(), 4);

    // The root itself goes and comes back.
    writer.delete_all("/t").await.unwrap();
    let mut gone = Vec::new();
    while gone.len() < 4 {
        match next(&mut events).await {
            CacheEvent::Deleted { path, .. } => gone.push(path),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(gone.last().unwrap(), "/t", "the root last: {gone:?}");
    assert!(cache.is_empty());
    writer
        .create("/t", "again", &CreateOptions::persistent())
        .await
        .unwrap();
    assert!(matches!(next(&mut events).await, CacheEvent::Created { path, .. } if path == "/t"));
    drop(cache);
    assert_eq!(within("stream ends", events.next()).await, None);
}

/// A node the cache's session may not read is announced as `Unreadable` in the initial load
/// (not silently left out); nothing below it is held, even a readable child that changes;
/// once an event finds the node readable, it and its subtree are cached (parents first).
/// A `start` dropped before the cache is ready stops its worker: nothing keeps the client
/// running once the caller's handles are gone. (The worker once ran on, with its watch and a
/// client clone, for the process's life.)
/// A change whose read failed with the connection up (here the cache's request timeout,
/// the proxy holding every frame back a second) is read again by itself. It was dropped:
/// the cache kept the old data, and said nothing, until the node changed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_read_timed_out_is_read_again() {
    let (cs, writer) = writer_of(
        &fresh_chroot("cache_read_timeout").await,
        &[("/r", b""), ("/r/a", b"v1")],
    )
    .await;
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let (_, root) = cs.split_once('/').unwrap();
    let via = format!("{}/{root}", proxy.connect_string());
    let reader = connect_with_timeout(&via, Duration::from_secs(10)).await;
    let impatient = reader.with_timeout(Duration::from_millis(300));
    let (cache, mut events) = TreeCache::builder(impatient, "/r").start().await.unwrap();
    while !matches!(next(&mut events).await, CacheEvent::Initialized) {}
    // Two seconds a round trip: the event comes, its read times out; pings keep the
    // connection (a read timeout of 2/3 of 10 s).
    proxy.delay(Duration::from_secs(1));
    writer.set_data("/r/a", "v2", None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    proxy.delay(Duration::ZERO);
    loop {
        match next(&mut events).await {
            CacheEvent::Changed { path, new, .. } if path == "/r/a" => {
                assert_eq!(new.data, "v2");
                break;
            }
            CacheEvent::Stopped(e) => panic!("the cache stopped: {e}"),
            _ => {}
        }
    }
    assert_eq!(cache.get("/r/a").unwrap().data, "v2");
    let stats = reader.stats();
    assert_eq!(
        (stats.connections, stats.sessions),
        (1, 1),
        "no reconnect covered it"
    );
    drop(cache);
    reader.close().await.unwrap();
    writer.close().await.unwrap();
}

/// A node whose data is over the reader's frame limit is reported unreadable, and the cache
/// goes on with the rest, on the same connection; once the data fits, it is cached. (The
/// cache stopped for good at the first such reply.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_over_the_frame_limit_is_unreadable_and_the_rest_is_cached() {
    let big = vec![b'x'; 16 * 1024];
    let (cs, writer) = writer_of(
        &fresh_chroot("cache_too_large").await,
        &[("/r", b""), ("/r/small", b"a"), ("/r/big", &big)],
    )
    .await;
    let reader = Client::builder()
        .with_max_frame_len(8 * 1024)
        .connect(&cs)
        .await
        .unwrap();
    let (cache, mut events) = TreeCache::builder(reader.clone(), "/r")
        .start()
        .await
        .unwrap();
    let mut initial = Vec::new();
    loop {
        match next(&mut events).await {
            CacheEvent::Initialized => break,
            CacheEvent::Created { path, .. } | CacheEvent::Unreadable { path } => {
                initial.push(path);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(initial, ["/r", "/r/small", "/r/big"]);
    assert!(cache.get("/r/big").is_none());
    writer.set_data("/r/small", "b", None).await.unwrap();
    writer.set_data("/r/big", "fits", None).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match next(&mut events).await {
            CacheEvent::Changed { path, new, .. } | CacheEvent::Created { path, node: new } => {
                seen.push((path, new.data));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("/r/small".into(), "b".into()),
            ("/r/big".into(), "fits".into())
        ]
    );
    assert_eq!(reader.stats().connections, 1, "the connection went on");
    drop(cache);
    reader.close().await.unwrap();
    writer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_dropped_midway_leaves_nothing_running() {
    let cs = fresh_chroot("cache_start_dropped").await;
    let client = Client::connect(&cs).await.unwrap();
    let builder = TreeCache::builder(client.clone(), "/c");
    // Polled once: the worker starts, then the wait for its first read is dropped. (A zero
    // timeout is no way to poll once: its timer may fire a tick later, after the read.)
    let polled_once = tokio::select! {
        biased;
        started = builder.start() => Some(started),
        () = std::future::ready(()) => None,
    };
    assert!(polled_once.is_none(), "the first read needs a round trip");
    let handle = client.stats_handle();
    drop(client);
    within("the driver stops", async {
        while handle.stats().driver_running {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_node_is_reported_then_cached_once_readable() {
    let cs = fresh_chroot("cache_noauth").await;
    let writer = Client::connect(&cs).await.unwrap();
    writer.add_auth("digest", "alice:secret").await.unwrap();
    writer
        .create("/u", "root", &CreateOptions::persistent())
        .await
        .unwrap();
    writer
        .create("/u/open", "1", &CreateOptions::persistent())
        .await
        .unwrap();
    let alice_only = vec![Acl::digest(Perms::ALL, "alice", "secret")];
    let secret = CreateOptions::persistent().with_acl(alice_only);
    writer.create("/u/secret", "2", &secret).await.unwrap();
    writer
        .create("/u/secret/inner", "i", &CreateOptions::persistent())
        .await
        .unwrap();
    let mut seen = Vec::new();
    let (_reader, cache, mut events) = loaded_cache(&cs, "/u", |event| match event {
        CacheEvent::Created { path, .. } => seen.push(format!("created {path}")),
        CacheEvent::Unreadable { path } => seen.push(format!("unreadable {path}")),
        other => panic!("{other:?}"),
    })
    .await;
    assert_eq!(
        seen,
        ["created /u", "created /u/open", "unreadable /u/secret"]
    );
    assert_eq!(cache.get("/u/secret"), None);

    // A readable child of an unreadable node changes: still not held (a resync could not
    // list it). On ZooKeeper 3.8.0 its event reaches the cache; the events below show it
    // changed nothing.
    writer
        .set_data("/u/secret/inner", "i2", None)
        .await
        .unwrap();
    writer
        .set_acl("/u/secret", &Acl::open_unsafe(), None)
        .await
        .unwrap();
    writer.set_data("/u/secret", "3", None).await.unwrap();
    for (want_path, want_data) in [("/u/secret", "3"), ("/u/secret/inner", "i2")] {
        match next(&mut events).await {
            CacheEvent::Created { path, node } => {
                assert_eq!((path.as_str(), node.data), (want_path, want_data.into()));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(cache.get("/u/secret").unwrap().data, "3");
    assert_eq!(cache.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_limit_filter_and_single_node() {
    let cs = fresh_chroot("cache_selection").await;
    let writer = Client::connect(&cs).await.unwrap();
    for path in ["/t", "/t/keep", "/t/keep/deep", "/t/skip", "/t/keep2"] {
        writer
            .create(path, b"", &CreateOptions::persistent())
            .await
            .unwrap();
    }
    let reader = Client::connect(&cs).await.unwrap();
    let (shallow, _) = TreeCache::builder(reader.clone(), "/t")
        .with_max_depth(1)
        .with_filter(|p| !p.ends_with("skip"))
        .start()
        .await
        .unwrap();
    assert_eq!(
        shallow.snapshot().into_keys().collect::<Vec<_>>(),
        ["/t", "/t/keep", "/t/keep2"]
    );
    let (single, mut single_events) = TreeCache::node(reader.clone(), "/t/keep").await.unwrap();
    assert!(matches!(
        next(&mut single_events).await,
        CacheEvent::Created { .. }
    ));
    assert_eq!(next(&mut single_events).await, CacheEvent::Initialized);
    assert_eq!(single.len(), 1);

    writer
        .create("/t/keep/deep/er", b"", &CreateOptions::persistent())
        .await
        .unwrap();
    writer.set_data("/t/skip", b"x", None).await.unwrap();
    writer.set_data("/t/keep", b"changed", None).await.unwrap();
    // The single-node cache sees only its node's change.
    match next(&mut single_events).await {
        CacheEvent::Changed { path, new, .. } => {
            assert_eq!(path, "/t/keep");
            assert_eq!(new.data, "changed");
        }
        other => panic!("{other:?}"),
    }
    within("shallow cache follows", async {
        while shallow.get("/t/keep").unwrap().data != "changed" {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(shallow.len(), 3, "{:?}", shallow.snapshot().keys());
}

/// The server's tree under `root`: path to (data, version, czxid, mzxid).
async fn server_tree(client: &Client, root: &str) -> BTreeMap<String, (Vec<u8>, i32, i64, i64)> {
    let mut tree = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(path) = pending.pop() {
        let Ok((data, stat)) = client.get_data(&path).await else {
            continue;
        };
        tree.insert(
            path.clone(),
            (data.to_vec(), stat.version, stat.czxid, stat.mzxid),
        );
        if let Ok(children) = client.get_children(&path).await {
            pending.extend(children.iter().map(|c| zkwire::path::join(&path, c)));
        }
    }
    tree
}

fn summary(nodes: &BTreeMap<String, CachedNode>) -> BTreeMap<String, (Vec<u8>, i32, i64, i64)> {
    nodes
        .iter()
        .map(|(p, n)| {
            let s = n.stat;
            (p.clone(), (n.data.to_vec(), s.version, s.czxid, s.mzxid))
        })
        .collect()
}

/// A random path of the churn: `/churn/<a..f>[/<0..4>[/<x|y>]]`.
fn churn_path(rng: &mut SplitMix64) -> String {
    let mut path = format!("/churn/{}", (b'a' + rng.below(6) as u8) as char);
    if rng.below(4) > 0 {
        path.push_str(&format!("/{}", rng.below(5)));
        if rng.below(3) > 0 {
            path.push_str(if rng.below(2) == 0 { "/x" } else { "/y" });
        }
    }
    path
}

const CHURN_OPS: usize = 10_000;
const WRITERS: u64 = 4;
const CUTS: usize = 6;

/// ≥ 10,000 successful creates, sets and deletes from another session, spread over a tree
/// of up to 186 nodes, while the cache's connection (through a fault proxy) is cut 6 times
/// and its session is killed once (the client renews it), then a last burst while its
/// reconnections are refused. After quiescence the cache equals
/// the server's tree node by node (data, version, czxid, mzxid), and the events replayed from
/// the start equal the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_converges_under_churn_cuts_and_a_session_kill() {
    let direct = fresh_chroot("cache_churn").await;
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let via = format!("{}/cache_churn", proxy.connect_string());
    let writer = Client::connect(&direct).await.unwrap();
    writer
        .create("/churn", b"", &CreateOptions::persistent())
        .await
        .unwrap();
    let reader = connect_renewing(&via, Duration::from_secs(4)).await;
    let (cache, mut events) = TreeCache::builder(reader.clone(), "/churn")
        .start()
        .await
        .unwrap();
    let replayed = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    // Replays every event onto its own copy; a replay that breaks an invariant panics the
    // task, which the convergence loop below reports.
    let mut consumer = tokio::spawn({
        let replayed = Arc::clone(&replayed);
        async move {
            let mut count = 0usize;
            while let Some(event) = events.next().await {
                count += 1;
                replay(&mut replayed.lock().unwrap(), event);
            }
            count
        }
    });

    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut writers = JoinSet::new();
    for w in 0..WRITERS {
        let (writer, done) = (writer.clone(), Arc::clone(&done));
        writers.spawn(async move {
            let mut rng = SplitMix64(0xc4c4e + w);
            let mut attempts = 0usize;
            while done.load(Ordering::Relaxed) < CHURN_OPS && attempts < 20 * CHURN_OPS {
                attempts += 1;
                let path = churn_path(&mut rng);
                let value = rng.next_u64().to_string();
                let ok = match rng.below(10) {
                    0..=3 => writer
                        .create(&path, &value, &CreateOptions::persistent())
                        .await
                        .is_ok(),
                    4..=7 => writer.set_data(&path, &value, None).await.is_ok(),
                    _ => writer.delete(&path, None).await.is_ok(),
                };
                if ok {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    // The faults, spread over the churn.
    let mut rng = SplitMix64(0xfa17);
    for cut in 0..=CUTS {
        tokio::time::sleep(rng.millis(40, 100)).await;
        assert!(
            done.load(Ordering::Relaxed) < CHURN_OPS,
            "fault {cut} would land after the churn"
        );
        if cut == CUTS / 2 {
            let old = reader.session_id();
            kill_client_session(&reader).await.unwrap();
            within("renewed", async {
                while reader.session_id() == old {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await;
        } else {
            proxy.cut_all();
        }
    }
    while let Some(w) = tokio::time::timeout(Duration::from_secs(120), writers.join_next())
        .await
        .expect("writers finish")
    {
        w.unwrap();
    }
    let mut ops = done.load(Ordering::Relaxed);
    let churned = started.elapsed();
    assert!(ops >= CHURN_OPS, "only {ops} writes succeeded");

    // The last writes land while the cache is cut off (its reconnections refused), and
    // nothing touches those nodes afterwards: only a resync can bring them in.
    proxy.refuse(true);
    proxy.cut_all();
    let mut rng = SplitMix64(0x1a57);
    let mut blind = 0;
    for _ in 0..400 {
        let path = churn_path(&mut rng);
        let value = format!("blind {}", rng.next_u64());
        let ok = match rng.below(3) {
            0 => writer
                .create(&path, &value, &CreateOptions::persistent())
                .await
                .is_ok(),
            1 => writer.set_data(&path, &value, None).await.is_ok(),
            _ => writer.delete(&path, None).await.is_ok(),
        };
        blind += usize::from(ok);
    }
    assert!(blind >= 100, "{blind} writes while cut off");
    ops += blind;
    proxy.refuse(false);

    // Quiescence: the cache reaches the server's tree, and the replay reaches the cache.
    let truth = server_tree(&writer, "/churn").await;
    let converged = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if consumer.is_finished() {
                (&mut consumer).await.expect("the replay of the events");
                panic!("the event stream ended early");
            }
            let snapshot = cache.snapshot();
            if summary(&snapshot) == truth && *replayed.lock().unwrap() == snapshot {
                return snapshot;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let snapshot = converged.unwrap_or_else(|_| {
        let ours = summary(&cache.snapshot());
        let wrong: Vec<_> = truth
            .iter()
            .filter(|(p, v)| ours.get(*p) != Some(v))
            .map(|(p, _)| p)
            .chain(ours.keys().filter(|p| !truth.contains_key(*p)))
            .collect();
        panic!("the cache never matched the server; differing paths: {wrong:?}")
    });
    assert_eq!(summary(&snapshot), truth);
    assert!(!cache.is_stopped());
    drop(cache);
    let events = within("consumer", consumer).await.unwrap();
    println!(
        "tree cache churn: {ops} writes in {churned:?}, {CUTS} cuts and 1 session kill; \
         {} nodes at the end, {events} events, {} sessions",
        truth.len(),
        reader.stats().sessions,
    );
    assert!(reader.stats().sessions >= 2, "the session was renewed");
    let _ = reader.close().await;
    let _ = writer.close().await;
    drop(proxy);
}

/// Without session renewal, an expired session stops the cache with `Stopped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_stops_the_cache() {
    let cs = fresh_chroot("cache_expiry").await;
    let reader = connect_with_timeout(&cs, Duration::from_secs(4)).await;
    let (cache, mut events) = TreeCache::builder(reader.clone(), "/t")
        .start()
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, CacheEvent::Initialized);
    kill_client_session(&reader).await.unwrap();
    match next(&mut events).await {
        CacheEvent::Stopped(e) => assert!(e.is_terminal(), "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        reader.get_data("/t").await,
        Err(Error::SessionExpired)
    ));
    within("stopped", async {
        while !cache.is_stopped() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// Waits until the cache holds `data` at `path`.
async fn until_cached(cache: &TreeCache, path: &str, data: &str) {
    within(&format!("{path} cached as {data:?}"), async {
        while cache.get(path).is_none_or(|n| n.data != data.as_bytes()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// A writer that made `root` (empty) and `children` nodes `root/c0`… holding `v1`, and a
/// reader's cache of `root` whose event stream holds 4 events.
async fn four_slot_cache(
    name: &str,
    root: &str,
    children: usize,
) -> (Client, Client, TreeCache, CacheEvents) {
    let paths: Vec<String> = (0..children).map(|i| format!("{root}/c{i}")).collect();
    let mut tree: Vec<(&str, &[u8])> = vec![(root, b"")];
    tree.extend(paths.iter().map(|p| (p.as_str(), &b"v1"[..])));
    let (cs, writer) = writer_of(&fresh_chroot(name).await, &tree).await;
    let reader = Client::connect(&cs).await.unwrap();
    let builder = TreeCache::builder(reader.clone(), root).with_event_capacity(4);
    let (cache, events) = builder.start().await.unwrap();
    (writer, reader, cache, events)
}

/// A consumer that reads gets every event, however much larger than the stream's capacity
/// the tree is: the initial load waits for it (no `Lagged`), and `Initialized` comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_reads_gets_a_tree_larger_than_the_capacity_whole() {
    let (writer, reader, cache, mut events) = four_slot_cache("cache_prompt", "/big", 40).await;
    let mut copy = BTreeMap::new();
    loop {
        match next(&mut events).await {
            CacheEvent::Initialized => break,
            event => replay(&mut copy, event),
        }
    }
    assert_eq!(copy.len(), 41);
    assert_eq!(copy, cache.snapshot());
    drop(cache);
    reader.close().await.unwrap();
    writer.close().await.unwrap();
}

/// A consumer that holds the event stream and does not read it never freezes the copy for
/// longer than the cache's patience (a second): the events that find the stream full are
/// replaced by one `Lagged` with their count, which comes as soon as there is room, ahead of
/// later events; `Stopped` still comes last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_nobody_reads_never_freezes_the_cache() {
    let (writer, reader, cache, mut events) = four_slot_cache("cache_unread", "/t", 10).await;
    // 12 events of the initial load (11 nodes, Initialized) and 3 changes, none read.
    writer.set_data("/t/c0", "v2", None).await.unwrap();
    writer
        .create("/t/new", "n", &CreateOptions::persistent())
        .await
        .unwrap();
    writer.delete("/t/c1", None).await.unwrap();
    until_cached(&cache, "/t/c0", "v2").await;
    until_cached(&cache, "/t/new", "n").await;
    within("/t/c1 gone", async {
        while cache.get("/t/c1").is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    // The four that fit, then, once there is room, the count of the others.
    for expected in ["/t", "/t/c0", "/t/c1", "/t/c2"] {
        match next(&mut events).await {
            CacheEvent::Created { path, .. } => assert_eq!(path, expected),
            other => panic!("{other:?}"),
        }
    }
    match next(&mut events).await {
        CacheEvent::Lagged { missed } => assert!(missed >= 11, "missed {missed}"),
        other => panic!("{other:?}"),
    }
    writer.set_data("/t/c2", "v3", None).await.unwrap();
    match next(&mut events).await {
        CacheEvent::Changed { path, old, new } => {
            assert_eq!(
                (path.as_str(), &old.data[..], &new.data[..]),
                ("/t/c2", &b"v1"[..], &b"v3"[..])
            );
        }
        other => panic!("{other:?}"),
    }

    // Full again, then the end: Lagged and Stopped still come, in that order.
    for i in 3..9 {
        writer
            .set_data(&format!("/t/c{i}"), "v4", None)
            .await
            .unwrap();
    }
    until_cached(&cache, "/t/c8", "v4").await;
    reader.close().await.unwrap();
    for i in 3..7 {
        match next(&mut events).await {
            CacheEvent::Changed { path, .. } => assert_eq!(path, format!("/t/c{i}")),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(next(&mut events).await, CacheEvent::Lagged { missed: 2 });
    assert!(matches!(next(&mut events).await, CacheEvent::Stopped(_)));
    assert_eq!(within("the end", events.next()).await, None);
    writer.close().await.unwrap();
}
