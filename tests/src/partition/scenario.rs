//! What the partition tests share: the servers' configuration and the partitions a lock
//! holder is tested under.

use super::ensemble::PartitionedEnsemble;
use super::relay::LinkFault;
use crate::server::ServerConfig;

/// The `syncLimit` of [`partition_config`], in ticks: a silent link is noticed after it.
pub const PARTITION_SYNC_LIMIT: u32 = 5;
/// The `initLimit` of [`partition_config`], in ticks.
pub const PARTITION_INIT_LIMIT: u32 = 10;

/// The servers' configuration the partition tests share: tickTime `tick_ms`,
/// [`PARTITION_SYNC_LIMIT`] and [`PARTITION_INIT_LIMIT`], session timeouts from 2 ticks to
/// the default configuration's maximum.
pub fn partition_config(tick_ms: u32) -> ServerConfig {
    ServerConfig::default()
        .tick_time_ms(tick_ms)
        .min_session_timeout_ms(tick_ms.saturating_mul(2))
        .extra("syncLimit", PARTITION_SYNC_LIMIT.to_string())
        .extra("initLimit", PARTITION_INIT_LIMIT.to_string())
}

/// The partitions a lock holder is tested under (docs/faults.md #28): which server the
/// holder talks to, and what is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldScenario {
    /// Every link of the holder's follower blackholed, both ways.
    FollowerBlackhole,
    /// Every link of the holder's follower reset, and reset again on every reconnect.
    FollowerReset,
    /// Every link of the leader, which the holder talks to, blackholed.
    LeaderIsolated,
    /// The holder's follower cut from the leader only: the other follower sees both.
    Bridge,
    /// Only what the leader sends to the holder's follower is lost.
    OneWayFromLeader,
}

impl HoldScenario {
    /// Whether the holder talks to the leader (else to a follower).
    pub fn holder_on_leader(self) -> bool {
        self == Self::LeaderIsolated
    }

    /// Cuts `victim` (the holder's server) off as the scenario says; `leader` leads now.
    pub fn apply(self, ensemble: &PartitionedEnsemble, victim: usize, leader: usize) {
        match self {
            Self::FollowerBlackhole | Self::LeaderIsolated => {
                ensemble.isolate(victim, LinkFault::Blackhole);
            }
            Self::FollowerReset => ensemble.isolate(victim, LinkFault::Reset),
            Self::Bridge => ensemble.cut(victim, leader, LinkFault::Blackhole),
            Self::OneWayFromLeader => ensemble.cut_one_way(leader, victim, LinkFault::Blackhole),
        }
    }
}
