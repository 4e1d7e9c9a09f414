//! Membership and discovery under faults (docs/recipes.md §12–§14): members behind fault
//! proxies, with session renewal on, go through a seeded schedule of connection resets, short
//! blackholes (a reconnect), long blackholes and server-side kills (an expiry, then a renewal)
//! for `ZKWIRE_CHURN_SECS` seconds (60 by default). It checks:
//!
//! - after each renewal, every node of that member (its `PersistentNode`, its service instance,
//!   its group member) exists again, owned by the new session, within T + 1 s;
//! - once the churn stops, a `ServiceCache` that went through faults of its own equals the
//!   server's truth, instance by instance;
//! - after every member closes, no node is left behind: 0 orphans.
//!
//! The seed is printed; `ZKWIRE_SEED` replays a run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zkwire::Client;
use zkwire_recipes::{
    GroupMember, PersistentNode, Registration, ServiceCache, ServiceDiscovery, ServiceInstance,
};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::shared_server;
use zkwire_testing::support::{
    connect_renewing, connect_with_timeout, fresh_chroot, kill_client_session,
};

/// The members' session timeout.
const T: Duration = Duration::from_secs(2);
/// How long a member's nodes may take to come back after its session is renewed.
const BACK_WITHIN: Duration = Duration::from_secs(3); // T + 1 s
/// The bound of every wait for the system to settle.
const SETTLE: Duration = Duration::from_secs(20);
const MEMBERS: usize = 3;

/// One member: its client (behind its own proxy) and the nodes it keeps.
struct Member {
    id: String,
    client: Client,
    proxy: FaultProxy,
    node: PersistentNode,
    registration: Registration,
    group: GroupMember,
}

impl Member {
    /// The server paths of the member's nodes, in the chroot.
    fn paths(&self) -> Vec<String> {
        vec![
            format!("/nodes/{}", self.id),
            format!("/services/api/{}", self.id),
            format!("/group/{}", self.id),
        ]
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// A chroot'ed connect string through a new proxy in front of the shared server.
async fn proxied(cs: &str) -> (FaultProxy, String) {
    let proxy = FaultProxy::start(shared_server().addr()).await.unwrap();
    let chroot = cs.rsplit_once('/').map(|(_, c)| c.to_owned()).unwrap();
    let via = format!("{}/{chroot}", proxy.connect_string());
    (proxy, via)
}

async fn join(cs: &str, i: usize) -> Member {
    let id = format!("m{i}");
    let (proxy, via) = proxied(cs).await;
    let client = connect_renewing(&via, T).await;
    let node = PersistentNode::ephemeral(client.clone(), format!("/nodes/{id}"), id.clone());
    node.start();
    assert!(node.wait_for_initial_create(SETTLE).await.unwrap());
    let instance = ServiceInstance::builder("api")
        .id(id.clone())
        .address(format!("10.0.0.{i}"))
        .port(8000 + i as u16)
        .build();
    let registration = ServiceDiscovery::new(client.clone(), "/services")
        .register(instance)
        .await
        .unwrap();
    let group = GroupMember::join(client.clone(), "/group", id.clone(), id.clone())
        .await
        .unwrap();
    assert!(group.wait_for_initial_create(SETTLE).await.unwrap());
    Member {
        id,
        client,
        proxy,
        node,
        registration,
        group,
    }
}

/// Whether every path exists, owned by `session`.
async fn all_owned_by(observer: &Client, paths: &[String], session: i64) -> bool {
    for path in paths {
        match observer.exists(path).await {
            Ok(Some(stat)) if stat.ephemeral_owner == session => {}
            _ => return false,
        }
    }
    true
}

/// Follows one member's session: at each renewal, times how long its nodes take to exist
/// again on the new session, and records it in `took`. Stops when `stop` is set.
async fn follow_renewals(
    member: (Client, Vec<String>),
    observer: Client,
    took: Arc<Mutex<Vec<Duration>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let (client, paths) = member;
    let mut session = client.session_id();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = client.session_id();
        if now == session || now == 0 {
            continue;
        }
        session = now;
        let renewed = Instant::now();
        while !all_owned_by(&observer, &paths, session).await {
            if client.session_id() != session || renewed.elapsed() > SETTLE {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if client.session_id() == session {
            took.lock().unwrap().push(renewed.elapsed());
        }
    }
}

/// One fault on `proxy` (or on `client`'s session), chosen by `rng`; returns its name.
async fn inject(rng: &mut SplitMix64, proxy: &FaultProxy, client: &Client) -> &'static str {
    match rng.below(4) {
        0 => {
            proxy.reset_all();
            "reset"
        }
        1 => {
            // Shorter than the read timeout's worth of silence: at most a reconnect.
            proxy.blackhole(true);
            tokio::time::sleep(rng.millis(200, 1_200)).await;
            proxy.blackhole(false);
            "short blackhole"
        }
        2 => {
            // Longer than the session timeout: the server expires the session.
            proxy.blackhole(true);
            tokio::time::sleep(T + rng.millis(800, 1_800)).await;
            proxy.blackhole(false);
            "long blackhole"
        }
        _ => {
            if kill_client_session(client).await.is_ok() {
                "kill"
            } else {
                "kill (not connected)"
            }
        }
    }
}

/// The server's truth: the instances under `/services/api`, by id.
async fn server_instances(observer: &Client) -> BTreeMap<String, ServiceInstance> {
    let mut truth = BTreeMap::new();
    for name in observer.get_children("/services/api").await.unwrap() {
        if let Ok((data, _)) = observer.get_data(&format!("/services/api/{name}")).await {
            let instance = ServiceInstance::from_json(&data).unwrap();
            truth.insert(instance.id.clone(), instance);
        }
    }
    truth
}

fn cached(cache: &ServiceCache) -> BTreeMap<String, ServiceInstance> {
    cache
        .instances()
        .into_iter()
        .map(|i| (i.id.clone(), i))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_come_back_caches_converge_and_nothing_is_orphaned_under_churn() {
    let seed = env_u64("ZKWIRE_SEED").unwrap_or(0x27_d15c);
    let churn = Duration::from_secs(env_u64("ZKWIRE_CHURN_SECS").unwrap_or(60));
    println!("seed {seed:#x}, churn {churn:?}");
    let mut rng = SplitMix64(seed);
    let cs = fresh_chroot("discovery_faults").await;
    let observer = connect_with_timeout(&cs, Duration::from_secs(10)).await;
    let mut members = Vec::new();
    for i in 0..MEMBERS {
        members.push(join(&cs, i).await);
    }
    // The cache's own client goes through faults too (resets and blackholes, no renewal).
    let (cache_proxy, cache_via) = proxied(&cs).await;
    let cache_client = connect_renewing(&cache_via, T).await;
    let discovery = ServiceDiscovery::new(cache_client.clone(), "/services");
    let (cache, _changes) = ServiceCache::start(&discovery, "api").await.unwrap();

    let took = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let followers: Vec<_> = members
        .iter()
        .map(|m| {
            tokio::spawn(follow_renewals(
                (m.client.clone(), m.paths()),
                observer.clone(),
                took.clone(),
                stop.clone(),
            ))
        })
        .collect();

    // The churn: one fault at a time, on a member that has been quiet for T + 1 s since its
    // last fault ended (so each renewal is timed without a new fault in its way), or on the
    // cache's client.
    let started = Instant::now();
    let mut quiet_from = [Instant::now(); MEMBERS];
    let mut faults = BTreeMap::<&str, usize>::new();
    while started.elapsed() < churn {
        let target = rng.below(MEMBERS as u64 + 1) as usize;
        let kind = if target == MEMBERS {
            match rng.below(2) {
                0 => {
                    cache_proxy.reset_all();
                    "cache reset"
                }
                _ => {
                    cache_proxy.blackhole(true);
                    tokio::time::sleep(rng.millis(200, 1_200)).await;
                    cache_proxy.blackhole(false);
                    "cache blackhole"
                }
            }
        } else if Instant::now() >= quiet_from[target] {
            let m = &members[target];
            let kind = inject(&mut rng, &m.proxy, &m.client).await;
            quiet_from[target] = Instant::now() + BACK_WITHIN + Duration::from_millis(500);
            kind
        } else {
            "none (member recovering)"
        };
        *faults.entry(kind).or_default() += 1;
        tokio::time::sleep(rng.millis(100, 600)).await;
    }
    for m in &members {
        m.proxy.heal();
    }
    cache_proxy.heal();
    println!("faults: {faults:?}");

    // Every member's nodes exist on its current session.
    for m in &members {
        let deadline = Instant::now() + SETTLE;
        while !all_owned_by(&observer, &m.paths(), m.client.session_id()).await {
            assert!(
                Instant::now() < deadline,
                "{}'s nodes did not come back",
                m.id
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for f in followers {
        f.await.unwrap();
    }
    let took = took.lock().unwrap().clone();
    let slowest = took.iter().max().copied().unwrap_or_default();
    println!(
        "{} renewals, nodes back within {slowest:?} at the slowest",
        took.len()
    );
    assert!(took.len() >= 3, "the churn renewed sessions: {took:?}");
    assert!(
        slowest <= BACK_WITHIN,
        "renewals and recovery times: {took:?}"
    );

    // The cache equals the server's truth, instance by instance.
    let deadline = Instant::now() + SETTLE;
    loop {
        let truth = server_instances(&observer).await;
        let seen = cached(&cache);
        if truth == seen && truth.len() == MEMBERS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cache {seen:#?} != server {truth:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Closed members leave nothing behind.
    for m in members {
        m.node.close().await.unwrap();
        m.registration.unregister().await.unwrap();
        m.group.close().await.unwrap();
        m.client.close().await.unwrap();
    }
    for dir in ["/nodes", "/services/api", "/group"] {
        let left = observer.get_children(dir).await.unwrap();
        assert!(left.is_empty(), "orphans under {dir}: {left:?}");
    }
    cache_client.close().await.unwrap();
    observer.close().await.unwrap();
}
