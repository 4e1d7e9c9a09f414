//! The run: the ensemble, one fault proxy per (contender, server), the contenders, the
//! fault injector, the leader killer and the progress lines; the stop (the acquisitions'
//! target or the hard stop), the wind-down and the orphan listing.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinSet;
use zkwire_testing::partition::{
    partition_config, PartitionedEnsemble, PARTITION_INIT_LIMIT, PARTITION_SYNC_LIMIT,
};
use zkwire_testing::proxy::{FaultProxy, ProxyCounts};
use zkwire_testing::server::DEFAULT_TICK_MS;

use crate::args::Settings;
use crate::contender::{contender, ContenderEnd};
use crate::faults::{inject, Slot};
use crate::kills::kill_leaders;
use crate::partition::{wait_failure, Servers};
use crate::shared::{lock, Count, Shared};
use crate::summary::Outcome;
use crate::{SoakError, CONNECT_ATTEMPT, HEAL_LIMIT, LOCK_DIR, RELEASE_TIMEOUT, T};

/// How long the contenders get to wind down once stopped.
const WIND_DOWN: Duration = Duration::from_secs(90);

/// Runs the soak; `Ok(false)` when a safety check failed.
pub(crate) fn main(settings: Settings) -> Result<bool, SoakError> {
    println!(
        "zkwire soak: seed {:#x} ({}), {} contenders, session timeout {:?}, {}-node ensemble \
         (links through relays; tickTime {} ms, syncLimit {}, initLimit \
         {}), partitions {}, target {} acquisitions, hard stop {:.1} min",
        settings.seed,
        settings.seed,
        settings.contenders,
        T,
        settings.nodes,
        DEFAULT_TICK_MS,
        PARTITION_SYNC_LIMIT,
        PARTITION_INIT_LIMIT,
        if settings.no_faults || settings.no_partitions {
            "off"
        } else {
            "on"
        },
        settings.acquisitions,
        settings.max_run.as_secs_f64() / 60.0
    );
    eprintln!(
        "starting a {}-node partitionable ZooKeeper ensemble…",
        settings.nodes
    );
    // The default tick: the one `zkwire_testing::support::builder()` tells the contenders'
    // leases.
    let config = partition_config(DEFAULT_TICK_MS);
    let ensemble = PartitionedEnsemble::start(settings.nodes, config)?;
    let addrs: Vec<SocketAddr> = (0..settings.nodes).map(|i| ensemble.node_addr(i)).collect();
    let direct = ensemble.connect_string();
    let servers = Arc::new(Servers {
        ensemble: StdMutex::new(ensemble),
        turn: Arc::new(AsyncMutex::new(())),
        addrs,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ok = runtime.block_on(soak(settings, direct, Arc::clone(&servers)));
    drop(runtime);
    drop(servers);
    ok
}

async fn soak(
    settings: Settings,
    direct: String,
    servers: Arc<Servers>,
) -> Result<bool, SoakError> {
    let nodes = settings.nodes;
    let mut slots = Vec::new();
    for _ in 0..settings.contenders {
        for addr in &servers.addrs {
            slots.push(Slot::new(FaultProxy::start(*addr).await?));
        }
    }
    let slots = Arc::new(slots);
    let sh = Arc::new(Shared::new(settings));
    eprintln!("ensemble up at {direct}; {} proxies; running…", slots.len());

    let mut contenders = JoinSet::new();
    for who in 0..sh.settings.contenders {
        let cs = (0..nodes)
            .map(|s| slots[who * nodes + s].proxy.connect_string())
            .collect::<Vec<_>>()
            .join(",");
        contenders.spawn(contender(who, cs, Arc::clone(&sh)));
    }
    let injector = tokio::spawn(inject(
        Arc::clone(&sh),
        Arc::clone(&slots),
        Arc::clone(&servers),
    ));
    let killer = tokio::spawn(kill_leaders(Arc::clone(&sh), Arc::clone(&servers)));
    let progress = tokio::spawn(report_progress(Arc::clone(&sh)));

    let timed_out = wait_for_stop(&sh).await;
    let stopped_at = Instant::now();
    sh.request_stop();
    let wall = stopped_at - sh.t0;
    eprintln!("stopping: winding down the faults, the leader killer and the contenders…");
    let _ = injector.await;
    let _ = killer.await;
    let _ = progress.await;
    for slot in slots.iter() {
        slot.proxy.heal();
    }
    let whole_at_end = heal_all(&servers).await;
    let (ends, stuck) = wind_down(contenders).await;

    // Orphans: children of the lock directory, listed from a fresh session straight to the
    // ensemble once every contender has closed its session.
    let orphans = list_orphans(&direct).await;

    let outcome = Outcome {
        ends,
        stuck,
        whole_at_end,
        orphans,
        wall,
        timed_out,
        proxy_totals: proxy_totals(&slots),
    };
    Ok(crate::summary::print(&sh, &outcome))
}

/// Waits for the acquisitions' target or the hard stop; true on the hard stop.
async fn wait_for_stop(sh: &Shared) -> bool {
    let hard_stop = sh.t0 + sh.settings.max_run;
    let mut stop = sh.stop.subscribe();
    tokio::select! {
        _ = stop.wait_for(|s| *s) => false,
        () = tokio::time::sleep_until(tokio::time::Instant::from_std(hard_stop)) => true,
    }
}

/// Every link healed and the ensemble whole, for the closes and the orphan listing.
async fn heal_all(servers: &Arc<Servers>) -> Result<String, String> {
    let srv = Arc::clone(servers);
    tokio::task::spawn_blocking(move || {
        let ensemble = srv.ensemble();
        ensemble.heal();
        ensemble
            .wait_healed(HEAL_LIMIT)
            .map(|leader| format!("whole, leader node {leader}"))
            .map_err(|e| wait_failure(&e))
    })
    .await
    .unwrap_or_else(|e| Err(format!("the heal task failed: {e}")))
}

/// Gives the contenders [`WIND_DOWN`] to end; returns their ends, in contender order, and
/// how many did not end in time (aborted).
async fn wind_down(mut contenders: JoinSet<ContenderEnd>) -> (Vec<ContenderEnd>, usize) {
    let mut ends = Vec::new();
    let _ = tokio::time::timeout(WIND_DOWN, async {
        while let Some(end) = contenders.join_next().await {
            if let Ok(end) = end {
                ends.push(end);
            }
        }
    })
    .await;
    let stuck = contenders.len();
    contenders.abort_all();
    ends.sort_by_key(|e| e.who);
    (ends, stuck)
}

/// The counters of every proxy, summed.
fn proxy_totals(slots: &[Slot]) -> ProxyCounts {
    let mut totals = ProxyCounts::default();
    for s in slots {
        let c = s.proxy.counts();
        totals.reset_connections += c.reset_connections;
        totals.client_frames_dropped += c.client_frames_dropped;
        totals.overflow_cuts += c.overflow_cuts;
    }
    totals
}

/// A progress line on standard error every 10 s until the run stops.
async fn report_progress(sh: Arc<Shared>) {
    let every = Duration::from_secs(10);
    let max = sh.settings.max_run.as_secs() / every.as_secs() + 10;
    for _ in 0..max {
        if sh.sleep_or_stop(every).await {
            break;
        }
        let elapsed = sh.t0.elapsed().as_secs_f64();
        let n = sh.count(Count::Acquisitions);
        eprintln!(
            "  {:>6.0}s {n:>8} acquisitions ({:.0}/s), {} long holds, {} faults, {} partitions, \
             {} leader kills, {} sessions expired, {} timeouts",
            elapsed,
            n as f64 / elapsed.max(1e-9),
            sh.count(Count::LongHolds),
            lock(&sh.faults).len(),
            lock(&sh.partitions).len(),
            lock(&sh.kills).iter().filter(|k| k.node.is_some()).count(),
            sh.count(Count::Expired),
            sh.count(Count::Timeouts),
        );
    }
}

/// The children of the lock directory, seen from a fresh session to the ensemble itself.
async fn list_orphans(direct: &str) -> Result<Vec<String>, String> {
    let opening = zkwire_testing::support::builder()
        .with_session_timeout(T)
        .connect(direct);
    let client = match tokio::time::timeout(CONNECT_ATTEMPT * 2, opening).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("could not connect to the ensemble".to_owned()),
    };
    let listed = async {
        // The contenders' closes went through other servers: catch up first.
        match client.sync(LOCK_DIR).await {
            Ok(()) | Err(zkwire::Error::NoNode) => {}
            Err(e) => return Err(e.to_string()),
        }
        match client.get_children(LOCK_DIR).await {
            Ok(children) => Ok(children),
            Err(zkwire::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e.to_string()),
        }
    };
    let result = tokio::time::timeout(2 * T, listed)
        .await
        .unwrap_or_else(|_| Err("listing timed out".to_owned()));
    let _ = tokio::time::timeout(RELEASE_TIMEOUT, client.close()).await;
    result
}
