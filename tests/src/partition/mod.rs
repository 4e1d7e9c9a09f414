//! Network partitions *inside* a real ZooKeeper ensemble, between the servers themselves.
//!
//! [`PartitionedEnsemble`] starts an N-node ZooKeeper quorum in which no server ever talks to
//! another directly: for every ordered pair of nodes (i, j) there is a quorum relay and an
//! election relay, each a [`LinkRelay`] that forwards to j's real quorum or election port, and
//! server i's `zoo.cfg` names each peer j by the ports of the relays (i→j) (itself by its real
//! ports). Faults are then switched on the relays at runtime — per link and per direction —
//! to cut, one-way cut, isolate, partition or heal nodes, and the effect is observed from the
//! servers' own point of view (`srvr`, `mntr`). Client ports are direct: a test that wants
//! client-side faults puts its own proxy in front of them.
//!
//! # Leader election and the dial-back
//!
//! Leader election connections (ZooKeeper's `QuorumCnxManager`) have a twist. Between any two
//! servers only the connection initiated by the server with the *higher* id is kept: a server
//! that accepts a connection from a lower id closes it and dials the lower server back, at
//! the election address the lower server announced in the connection's first message, not at
//! the address in its own configuration. Left alone, that dial-back would go straight to the
//! real port and bypass the relays. So the election relay (i→j) parses the first message on
//! its forward direction and replaces the announced address with the address of the election
//! relay (j→i) (see [`LinkRelay::rewrite_election_address`]); everything after that message
//! passes through untouched.
//!
//! The first message, as written by `startConnection` and read by `InitialMessage.parse` in
//! `zookeeper-server/src/main/java/org/apache/zookeeper/server/quorum/QuorumCnxManager.java`
//! (3.8), is, big-endian:
//!
//! ```text
//! int64  protocol version   -65536 (V1: one address) or -65535 (V2: several, '|'-separated)
//! int64  sender's server id
//! int32  length of the address string, 1..=2048
//! bytes  the address string, "host:port" (V2: "host1:port1|host2:port2|...")
//! ```
//!
//! A non-negative first long is the pre-3.5 format (the server id alone, no address); such a
//! connection, or one whose message does not parse, is passed through unchanged.
//!
//! # Timing
//!
//! A follower whose link to the leader goes silent notices after `syncLimit * tickTime` (its
//! reads time out, and so do the leader's reads from it); a leader that stops hearing from a
//! quorum steps down after the same time. [`PartitionedEnsemble::sync_timeout`] returns that
//! product. The servers get the JVM property `zookeeper.fastleader.maxNotificationInterval`
//! (default 1000 ms here, 60 s in ZooKeeper) so that a node left alone in leader election
//! retries its peers often enough to rejoin within a second or two of a heal; set it in
//! [`ServerConfig::jvm_props`](crate::server::ServerConfig::jvm_props) to override.

mod conn;
mod election;
mod ensemble;
mod relay;
mod scenario;
mod sockets;
mod wait;

use std::sync::{Mutex, MutexGuard, PoisonError};

pub use self::ensemble::{LinkKind, PartitionedEnsemble};
pub use self::relay::{Flow, LinkCounts, LinkFault, LinkRelay};
pub use self::scenario::{
    partition_config, HoldScenario, PARTITION_INIT_LIMIT, PARTITION_SYNC_LIMIT,
};
pub use self::sockets::PeerSockets;
pub use self::wait::{View, WaitError};

/// The most bytes a [`LinkRelay`] holds for one direction of one connection. A blackholed
/// direction that goes over it gets its connection reset ([`LinkCounts::overflow_cuts`]), as
/// TCP eventually gives up on a peer that never acknowledges; a direction that is merely
/// delayed or slow stops being read instead (back-pressure).
pub const MAX_HELD: usize = 64 << 20;

/// Locks a mutex, ignoring poisoning: every update leaves the data consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
