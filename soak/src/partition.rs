//! Partitions inside the ensemble, on the servers' quorum and election links: drawn, aimed
//! at the server a long hold talks to, switched on while the ensemble is whole, healed after
//! 0.5–2 T. Partitions and leader kills take turns on [`Servers::turn`].

use std::net::SocketAddr;
use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::task::JoinHandle;
use zkwire_testing::partition::{LinkFault, PartitionedEnsemble, View};
use zkwire_testing::rng::SplitMix64;
use zkwire_testing::server::four_letter_word;

use crate::draw::{of_t, weighted};
use crate::shared::{lock, Shared, Window};
use crate::{HEAL_LIMIT, HEAVY_COOL_DOWN};

/// The ensemble, and the turn that partitions and leader kills take.
pub(crate) struct Servers {
    pub(crate) ensemble: StdMutex<PartitionedEnsemble>,
    /// Held by a partition until it is healed and the ensemble whole again, and by a leader
    /// kill until the node is back and the ensemble whole again: one at a time.
    pub(crate) turn: Arc<AsyncMutex<()>>,
    /// Every node's client address (to ask `cons` without locking the ensemble).
    pub(crate) addrs: Vec<SocketAddr>,
}

impl Servers {
    pub(crate) fn ensemble(&self) -> StdGuard<'_, PartitionedEnsemble> {
        lock(&self.ensemble)
    }
}

/// The node whose `cons` lists `session`, if any (blocking: a few four-letter words).
fn server_of(addrs: &[SocketAddr], session: i64) -> Option<usize> {
    // `cons` prints `...,sid=0x<hex>,lop=...` (Long.toHexString: two's complement, as {:x}).
    let needle = format!("sid=0x{session:x},");
    addrs
        .iter()
        .position(|a| four_letter_word(a, "cons").is_ok_and(|out| out.contains(&needle)))
}

/// A partition between the servers, on their quorum and election links (client ports stay
/// reachable), cutting off a "victim" ([`Cut`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Partition {
    /// Every link of a follower blackholed, both ways.
    FollowerBlackhole,
    /// Every link of a follower reset, and every reconnection reset at once.
    FollowerReset,
    /// Every link of the leader blackholed, both ways.
    LeaderIsolated,
    /// The leader and one follower cut (blackholed) from each other; the others see both.
    Bridge,
    /// What the leader sends to one follower held (blackholed); the other way flows.
    OneWayFromLeader,
    /// 5 nodes: the leader and one follower cut (blackholed) from the other three.
    SplitLeaderMinority,
}

impl Partition {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::FollowerBlackhole => "isolate-follower(blackhole)",
            Self::FollowerReset => "isolate-follower(reset)",
            Self::LeaderIsolated => "isolate-leader(blackhole)",
            Self::Bridge => "bridge",
            Self::OneWayFromLeader => "one-way(leader->follower)",
            Self::SplitLeaderMinority => "split-2|3(leader in minority)",
        }
    }

    /// Every kind, with weights.
    const ALL: [(Self, u64); 6] = [
        (Self::FollowerBlackhole, 2),
        (Self::FollowerReset, 1),
        (Self::LeaderIsolated, 2),
        (Self::Bridge, 2),
        (Self::OneWayFromLeader, 1),
        (Self::SplitLeaderMinority, 2),
    ];

    fn available(self, nodes: usize) -> bool {
        self != Self::SplitLeaderMinority || nodes >= 5
    }

    /// Whether the partition cuts off a server that leads (`true`) or one that follows.
    fn fits(self, leads: bool) -> bool {
        match self {
            Self::LeaderIsolated => leads,
            Self::SplitLeaderMinority => true,
            _ => !leads,
        }
    }

    /// A kind available on `nodes` and accepted by `fits`.
    fn pick(rng: &mut SplitMix64, nodes: usize, fits: impl Fn(Self) -> bool) -> Option<Self> {
        let table: Vec<(Self, u64)> = Self::ALL
            .iter()
            .copied()
            .filter(|&(k, _)| k.available(nodes) && fits(k))
            .collect();
        weighted(rng, &table)
    }
}

/// A partition as switched on: its kind, the servers it cut, and whether it was aimed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cut {
    pub(crate) kind: Partition,
    /// The leader when it was switched on.
    leader: usize,
    /// The follower cut off or away from the leader, or the leader itself for
    /// [`Partition::LeaderIsolated`].
    victim: usize,
    /// Aimed at the server a contender in a long hold talks to.
    pub(crate) aimed: bool,
}

impl Cut {
    fn apply(self, ensemble: &PartitionedEnsemble) {
        let (leader, victim) = (self.leader, self.victim);
        match self.kind {
            Partition::FollowerBlackhole => ensemble.isolate(victim, LinkFault::Blackhole),
            Partition::FollowerReset => ensemble.isolate(victim, LinkFault::Reset),
            Partition::LeaderIsolated => ensemble.isolate(leader, LinkFault::Blackhole),
            Partition::Bridge => ensemble.cut(leader, victim, LinkFault::Blackhole),
            Partition::OneWayFromLeader => {
                ensemble.cut_one_way(leader, victim, LinkFault::Blackhole)
            }
            Partition::SplitLeaderMinority => {
                ensemble.partition(&[&[leader, victim]], LinkFault::Blackhole);
            }
        }
    }

    pub(crate) fn describe(self) -> String {
        let (leader, victim) = (self.leader, self.victim);
        match self.kind {
            Partition::FollowerBlackhole | Partition::FollowerReset => {
                format!("node {victim} (a follower) cut from all; leader {leader}")
            }
            Partition::LeaderIsolated => format!("node {leader} (the leader) cut from all"),
            Partition::Bridge => {
                format!("leader {leader} and follower {victim} cut from each other")
            }
            Partition::OneWayFromLeader => format!("leader {leader} -> follower {victim} held"),
            Partition::SplitLeaderMinority => {
                format!("{{leader {leader}, follower {victim}}} cut from the other nodes")
            }
        }
    }
}

/// A partition as injected, and what came of it.
#[derive(Debug, Clone)]
pub(crate) struct PartitionRecord {
    pub(crate) cut: Cut,
    pub(crate) window: Window,
    /// The servers' view 3/4 of the way through (`None`: not looked at, cut short by the
    /// stop).
    pub(crate) during: Option<View>,
    /// When it was healed, and how long the ensemble then took to be whole again.
    pub(crate) healed_at: Option<Instant>,
    pub(crate) whole_after: Option<Result<Duration, String>>,
}

/// A short account of a wait of the ensemble that timed out.
pub(crate) fn wait_failure(e: &zkwire_testing::partition::WaitError) -> String {
    format!(
        "not {} within {:.1}s (last view {})",
        e.what,
        e.waited.as_secs_f64(),
        e.last
    )
}

/// Waits (at most [`HEAL_LIMIT`]) until the servers report `ensemble` whole: how long that
/// took from now, or why it did not happen in time.
pub(crate) fn wait_whole(ensemble: &PartitionedEnsemble) -> Result<Duration, String> {
    let from = Instant::now();
    ensemble
        .wait_healed(HEAL_LIMIT)
        .map(|_| from.elapsed())
        .map_err(|e| wait_failure(&e))
}

/// Draws a partition, aims it and switches it on when the turn is free and the servers
/// report the ensemble whole; returns the task that heals it after 0.5–2 T, waits until the
/// ensemble is whole again and starts the cool-down. `Err`: why no partition was injected.
pub(crate) async fn start_partition(
    sh: &Arc<Shared>,
    servers: &Arc<Servers>,
    rng: &mut SplitMix64,
    aim: Option<i64>,
) -> Result<JoinHandle<()>, String> {
    let Ok(turn) = Arc::clone(&servers.turn).try_lock_owned() else {
        return Err("leader kill under way".to_owned());
    };
    let nodes = sh.settings.nodes;
    // A few four-letter words on localhost: blocking, but short (2 s at worst per server).
    let started = tokio::task::block_in_place(|| switch_on(servers, nodes, rng, aim));
    let (cut, at) = started?;
    let window = Window {
        at,
        lasting: of_t(rng, 50, 200),
    };
    let cool_down = rng.between(HEAVY_COOL_DOWN.0, HEAVY_COOL_DOWN.1);
    sh.heavy.partition_on();
    let index = {
        let mut records = lock(&sh.partitions);
        records.push(PartitionRecord {
            cut,
            window,
            during: None,
            healed_at: None,
            whole_after: None,
        });
        records.len() - 1
    };
    let heal = heal_later(
        Arc::clone(sh),
        Arc::clone(servers),
        index,
        window,
        cool_down,
    );
    Ok(tokio::spawn(async move {
        let _turn: OwnedMutexGuard<()> = turn;
        heal.await;
    }))
}

/// Draws a kind of partition that fits the server `aim`'s session talks to (if found) and
/// switches it on, if the ensemble is whole: what was cut, and when.
fn switch_on(
    servers: &Servers,
    nodes: usize,
    rng: &mut SplitMix64,
    aim: Option<i64>,
) -> Result<(Cut, Instant), String> {
    let ensemble = servers.ensemble();
    let view = ensemble.view();
    let leader = match view.leader() {
        Some(l) if view.is_whole() => l,
        _ => return Err("ensemble not whole".to_owned()),
    };
    let followers: Vec<usize> = (0..nodes).filter(|&i| i != leader).collect();
    let follower = |rng: &mut SplitMix64| {
        followers
            .get(rng.below(followers.len() as u64) as usize)
            .copied()
            .unwrap_or(leader)
    };
    let target = aim.and_then(|session| server_of(&servers.addrs, session));
    let kind = match target {
        Some(t) => Partition::pick(rng, nodes, |k| k.fits(t == leader)),
        None => Partition::pick(rng, nodes, |_| true),
    }
    .ok_or_else(|| "no partition fits".to_owned())?;
    let victim = match (kind, target) {
        (Partition::LeaderIsolated, _) => leader,
        (_, Some(t)) if t != leader => t,
        _ => follower(rng),
    };
    let cut = Cut {
        kind,
        leader,
        victim,
        aimed: target.is_some(),
    };
    cut.apply(&ensemble);
    Ok((cut, Instant::now()))
}

/// The life of partition `index` (switched on for `window`): a look at the
/// servers' view 3/4 of the way through, the heal when it has lasted (or at the stop), the
/// wait until the ensemble is whole again, then the cool-down.
async fn heal_later(
    sh: Arc<Shared>,
    servers: Arc<Servers>,
    index: usize,
    Window { at, lasting }: Window,
    cool_down: Duration,
) {
    // A look at the servers' own view 3/4 of the way through (a stop cuts it short).
    let look = lasting * 3 / 4;
    if !sh.sleep_or_stop(look).await {
        let srv = Arc::clone(&servers);
        if let Ok(view) = tokio::task::spawn_blocking(move || srv.ensemble().view()).await {
            if let Some(r) = lock(&sh.partitions).get_mut(index) {
                r.during = Some(view);
            }
        }
        let _ = sh.sleep_or_stop(lasting.saturating_sub(at.elapsed())).await;
    }
    let healed = tokio::task::spawn_blocking(move || {
        let ensemble = servers.ensemble();
        ensemble.heal();
        let healed_at = Instant::now();
        (healed_at, wait_whole(&ensemble))
    })
    .await;
    let (healed_at, whole) = match healed {
        Ok((at, whole)) => (Some(at), whole),
        Err(e) => (None, Err(format!("the heal task failed: {e}"))),
    };
    if let Some(r) = lock(&sh.partitions).get_mut(index) {
        r.healed_at = healed_at;
        r.whole_after = Some(whole);
    }
    sh.heavy.partition_over(cool_down);
}
