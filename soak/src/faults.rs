//! The proxy faults: from one seed, every 50–500 ms a light or heavy fault on the proxies
//! of a contender (heavy ones aimed at a long hold first), or a partition of the servers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{JoinHandle, JoinSet};
use zkwire_testing::proxy::{Direction, FaultProxy};
use zkwire_testing::rng::SplitMix64;

use crate::draw::{of_t, weighted};
use crate::partition::{start_partition, Servers};
use crate::shared::{lock, Shared, Tallied, Window};
use crate::{HEAL_LIMIT, HEAVY_COOL_DOWN, T};

/// Faults injected at most (every 50 ms at the fastest: 4.6 days' worth).
const MAX_FAULTS: usize = 8_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    /// Every connection of the proxy reset (RST both ways).
    Reset,
    /// Both directions held for 0.2–1.5 T, then delivered.
    Blackhole,
    /// Client→server frames dropped for 0.2–1.5 T (replies and notifications still flow).
    DropToServer,
    /// Client→server frames held for 0.2–1.5 T, then delivered.
    HoldToServer,
    /// Every frame delayed by 2–50 ms for 0.3–1.5 s.
    Delay,
    /// Server→client frames delayed by a random 0..(0.05–1.0 T) each for 0.5–1.5 T.
    LagToClient,
}

impl Fault {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Reset => "reset",
            Self::Blackhole => "blackhole",
            Self::DropToServer => "c2s-drop",
            Self::HoldToServer => "c2s-hold",
            Self::Delay => "delay",
            Self::LagToClient => "s2c-lag",
        }
    }

    /// The light kinds (they slow the lock down for a moment at most), with weights.
    const LIGHT: [(Self, u64); 2] = [(Self::Reset, 3), (Self::Delay, 1)];
    /// The heavy kinds (they stall a contender, and with it the lock queue, for up to
    /// 1.5 T, and expire sessions), with weights.
    const HEAVY: [(Self, u64); 4] = [
        (Self::Blackhole, 2),
        (Self::DropToServer, 2),
        (Self::HoldToServer, 1),
        (Self::LagToClient, 2),
    ];

    fn is_heavy(self) -> bool {
        Self::HEAVY.iter().any(|(k, _)| *k == self)
    }

    fn pick_light(rng: &mut SplitMix64) -> Self {
        weighted(rng, &Self::LIGHT).unwrap_or(Self::Reset)
    }

    fn pick_heavy(rng: &mut SplitMix64) -> Self {
        weighted(rng, &Self::HEAVY).unwrap_or(Self::Blackhole)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct FaultRecord {
    pub(crate) window: Window,
    pub(crate) kind: Fault,
    /// Proxy indices: contender `p / nodes`, server `p % nodes`.
    pub(crate) proxies: Vec<usize>,
    pub(crate) detail: String,
    /// Aimed at a contender in a long hold.
    pub(crate) aimed: bool,
}

/// A proxy and whether a timed fault is on it now (one at a time, so that healing one
/// fault never cuts another short).
pub(crate) struct Slot {
    pub(crate) proxy: FaultProxy,
    busy: AtomicBool,
}

impl Slot {
    /// `proxy`, free of faults.
    pub(crate) fn new(proxy: FaultProxy) -> Self {
        Self {
            proxy,
            busy: AtomicBool::new(false),
        }
    }

    /// Takes the proxy for a timed fault; false when one is on it already.
    fn claim(&self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Heals the proxy and frees it for the next timed fault.
    fn heal(&self) {
        self.proxy.heal();
        self.busy.store(false, Ordering::Release);
    }
}

/// Whom to hit: the contender in its critical section (a third of the time, if any) or a
/// random one.
fn pick_contender(rng: &mut SplitMix64, sh: &Shared) -> usize {
    let holder = sh.holder.load(Ordering::Relaxed).checked_sub(1);
    match holder {
        Some(h) if rng.below(3) == 0 => h,
        _ => rng.below(sh.settings.contenders as u64) as usize,
    }
}

/// The proxies of contender `who` to hit: all of them (one per node), or the one carrying
/// its connection.
fn proxies_of(
    rng: &mut SplitMix64,
    slots: &[Slot],
    nodes: usize,
    who: usize,
    all: bool,
) -> Vec<usize> {
    let mine = who * nodes..(who + 1) * nodes;
    if all {
        return mine.collect();
    }
    let active: Vec<usize> = mine
        .clone()
        .filter(|&p| slots[p].proxy.active() > 0)
        .collect();
    match active.as_slice() {
        [] => vec![mine.start + rng.below(nodes as u64) as usize],
        a => vec![a[rng.below(a.len() as u64) as usize]],
    }
}

/// Injects faults until the run stops, then lets them run out and heals every proxy.
pub(crate) async fn inject(sh: Arc<Shared>, slots: Arc<Vec<Slot>>, servers: Arc<Servers>) {
    if sh.settings.no_faults {
        return;
    }
    let partitions = !sh.settings.no_partitions;
    let mut rng = SplitMix64(sh.settings.seed);
    let mut timed = JoinSet::new();
    // The partition under way (one at a time), until healed and the ensemble whole again.
    let mut partition: Option<JoinHandle<()>> = None;
    for _ in 0..MAX_FAULTS {
        let pause = rng.between(Duration::from_millis(50), Duration::from_millis(500));
        if sh.sleep_or_stop(pause).await {
            break;
        }
        while timed.try_join_next().is_some() {}
        if partition.as_ref().is_some_and(JoinHandle::is_finished) {
            partition = None;
        }
        let heavy_allowed = partition.is_none() && sh.heavy.open();
        // A contender in a long hold gets the next heavy fault: on all of its proxies two
        // times in three (its session expires while it holds if the fault outlasts T), else
        // on the one it is connected through; or a partition of the server it talks to.
        let long = sh
            .long_holder
            .load(Ordering::Relaxed)
            .checked_sub(1)
            .filter(|_| heavy_allowed);
        // Otherwise heavy faults come half the time they are allowed.
        let heavy = heavy_allowed && (long.is_some() || rng.below(2) == 0);
        // Half of the heavy faults are partitions between the servers, when one can start.
        if heavy && partitions && rng.below(2) == 0 {
            let aim = long.map(|_| sh.long_session.load(Ordering::Relaxed));
            match start_partition(&sh, &servers, &mut rng, aim).await {
                Ok(task) => {
                    partition = Some(task);
                    continue;
                }
                Err(why) => sh.tally(Tallied::PartitionsSkipped, why),
            }
        }
        let (kind, proxies) = choose(&mut rng, &sh, &slots, heavy, long);
        let (lasting, detail) = switch_on(kind, &proxies, &slots, &mut rng);
        if kind.is_heavy() {
            let cool_down = rng.between(HEAVY_COOL_DOWN.0, HEAVY_COOL_DOWN.1);
            sh.heavy.quiet_until(Instant::now() + lasting + cool_down);
        }
        lock(&sh.faults).push(FaultRecord {
            window: Window {
                at: Instant::now(),
                lasting,
            },
            kind,
            proxies: proxies.clone(),
            detail,
            aimed: long.is_some() && kind.is_heavy(),
        });
        if kind != Fault::Reset {
            timed.spawn(heal_after(lasting, proxies, Arc::clone(&slots)));
        }
    }
    wind_down(timed, partition, &slots).await;
}

/// The next fault's kind and proxies: heavy (on the long hold `long` if any) or light; a
/// timed fault only on proxies free of one (else a reset).
fn choose(
    rng: &mut SplitMix64,
    sh: &Shared,
    slots: &[Slot],
    heavy: bool,
    long: Option<usize>,
) -> (Fault, Vec<usize>) {
    let nodes = sh.settings.nodes;
    let (mut kind, mut proxies) = if heavy {
        let kind = Fault::pick_heavy(rng);
        match long {
            Some(who) => {
                let all = rng.below(3) != 0;
                (kind, proxies_of(rng, slots, nodes, who, all))
            }
            None => {
                // Heavy faults hit all the proxies of a contender half the time.
                let who = pick_contender(rng, sh);
                let all = rng.below(2) == 0;
                (kind, proxies_of(rng, slots, nodes, who, all))
            }
        }
    } else {
        // Light ones a third of the time.
        let kind = Fault::pick_light(rng);
        let who = pick_contender(rng, sh);
        let all = rng.below(3) == 0;
        (kind, proxies_of(rng, slots, nodes, who, all))
    };
    if kind != Fault::Reset {
        proxies.retain(|&p| slots[p].claim());
        if proxies.is_empty() {
            // Every target is under a timed fault already: reset them instead.
            kind = Fault::Reset;
            let who = pick_contender(rng, sh);
            proxies = proxies_of(rng, slots, nodes, who, false);
        }
    }
    (kind, proxies)
}

/// Switches `kind` on at `proxies`; returns how long it lasts and what it does, in words.
fn switch_on(
    kind: Fault,
    proxies: &[usize],
    slots: &[Slot],
    rng: &mut SplitMix64,
) -> (Duration, String) {
    let each = |f: &dyn Fn(&FaultProxy)| proxies.iter().for_each(|&p| f(&slots[p].proxy));
    match kind {
        Fault::Reset => {
            each(&|p| p.reset_all());
            (Duration::ZERO, String::new())
        }
        Fault::Blackhole => {
            each(&|p| p.blackhole(true));
            (of_t(rng, 20, 150), String::new())
        }
        Fault::DropToServer => {
            each(&|p| p.drop_direction(Direction::ClientToServer, true));
            (of_t(rng, 20, 150), String::new())
        }
        Fault::HoldToServer => {
            each(&|p| p.hold_client_to_server(true));
            (of_t(rng, 20, 150), String::new())
        }
        Fault::Delay => {
            let d = rng.between(Duration::from_millis(2), Duration::from_millis(50));
            each(&|p| p.delay(d));
            (
                rng.between(Duration::from_millis(300), Duration::from_millis(1500)),
                format!("{} ms per frame", d.as_millis()),
            )
        }
        Fault::LagToClient => {
            let max = of_t(rng, 5, 100);
            let seed = rng.next_u64();
            each(&|p| p.delay_direction(Direction::ServerToClient, Duration::ZERO, max, seed));
            (
                of_t(rng, 50, 150),
                format!("0..{} ms per reply", max.as_millis()),
            )
        }
    }
}

/// Heals `proxies` after `lasting` and frees them for the next timed fault.
async fn heal_after(lasting: Duration, proxies: Vec<usize>, slots: Arc<Vec<Slot>>) {
    tokio::time::sleep(lasting).await;
    for p in proxies {
        slots[p].heal();
    }
}

/// Lets the timed faults run out (at most 1.5 T each), and the partition be healed (it is
/// cut short by the stop), then heals everything.
async fn wind_down(mut timed: JoinSet<()>, partition: Option<JoinHandle<()>>, slots: &[Slot]) {
    let _ = tokio::time::timeout(2 * T, async { while timed.join_next().await.is_some() {} }).await;
    timed.abort_all();
    if let Some(task) = partition {
        let abort = task.abort_handle();
        if tokio::time::timeout(HEAL_LIMIT + T, task).await.is_err() {
            abort.abort();
        }
    }
    for slot in slots {
        slot.proxy.heal();
    }
}
