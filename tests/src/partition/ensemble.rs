//! [`PartitionedEnsemble`]: the servers behind their relays, the links between them, and
//! the faults switched on those links.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

use super::relay::{Flow, LinkCounts, LinkFault, LinkRelay, BWD, FWD};
use super::wait::View;
use crate::server::{
    four_letter_word, server_mode, Mode, NodePorts, ServerConfig, ServerError, ZkEnsemble,
    ENSEMBLE_INIT_LIMIT, ENSEMBLE_START_TIMEOUT, ENSEMBLE_SYNC_LIMIT,
};

/// Default of `zookeeper.fastleader.maxNotificationInterval` for the servers (milliseconds).
const MAX_NOTIFICATION_INTERVAL_MS: &str = "1000";

/// Which of the two links from one server to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// The quorum (ZAB) link: a follower's connection to the leader's quorum port.
    Quorum,
    /// The leader-election link.
    Election,
}

/// The two relays that carry what server `ends.0` sends to server `ends.1` on its own
/// initiative.
#[derive(Debug)]
pub(super) struct Link {
    /// The servers it links, (from, to).
    pub(super) ends: (usize, usize),
    pub(super) quorum: LinkRelay,
    pub(super) election: LinkRelay,
}

impl Link {
    pub(super) fn relays(&self) -> [&LinkRelay; 2] {
        [&self.quorum, &self.election]
    }

    /// The links between every ordered pair of `n` nodes, their relays listening on `handle`'s
    /// runtime with no upstream yet, each election relay announcing the relay back.
    fn start_all(n: usize, handle: &Handle) -> Result<Vec<Self>, ServerError> {
        // Bind every relay before the servers' ports are picked, so they cannot collide; the
        // upstreams are filled in once the ports are known.
        let unset = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let mut links = Vec::with_capacity(n * (n - 1));
        for from in 0..n {
            for to in (0..n).filter(|&to| to != from) {
                links.push(Self {
                    ends: (from, to),
                    quorum: LinkRelay::start_on(handle, unset).map_err(relay_err)?,
                    election: LinkRelay::start_on(handle, unset).map_err(relay_err)?,
                });
            }
        }
        for link in &links {
            if let Some(back) = links.iter().find(|l| l.ends == (link.ends.1, link.ends.0)) {
                link.election
                    .rewrite_election_address(Some(back.election.addr()));
            }
        }
        Ok(links)
    }
}

/// The error of a relay (or of their runtime) that could not be set up.
fn relay_err(e: io::Error) -> ServerError {
    ServerError::Io {
        context: "setting up the relays between the servers".to_owned(),
        source: e,
    }
}

/// `config` with [`MAX_NOTIFICATION_INTERVAL_MS`] as the servers'
/// `zookeeper.fastleader.maxNotificationInterval`, unless it sets one.
fn with_notification_interval(mut config: ServerConfig) -> ServerConfig {
    if !config
        .jvm_props
        .iter()
        .any(|(k, _)| k == "zookeeper.fastleader.maxNotificationInterval")
    {
        config.jvm_props.insert(
            0,
            (
                "zookeeper.fastleader.maxNotificationInterval".to_owned(),
                MAX_NOTIFICATION_INTERVAL_MS.to_owned(),
            ),
        );
    }
    config
}

/// Each node's quorum lines: node `i` names itself by its real ports (`picked`) and every
/// peer `j` by the relays of the link (i→j).
fn quorum_lines(links: &[Link], picked: &[NodePorts]) -> Vec<String> {
    (0..picked.len())
        .map(|i| {
            let mut lines =
                format!("initLimit={ENSEMBLE_INIT_LIMIT}\nsyncLimit={ENSEMBLE_SYNC_LIMIT}\n");
            for (j, p) in picked.iter().enumerate() {
                let (quorum, election) = match links.iter().find(|l| l.ends == (i, j)) {
                    Some(l) => (l.quorum.addr().port(), l.election.addr().port()),
                    None => (p.quorum, p.election),
                };
                lines.push_str(&format!("server.{}=127.0.0.1:{quorum}:{election}\n", j + 1));
            }
            lines
        })
        .collect()
}

/// Shuts the relays' runtime down without blocking, last of all (also inside async code).
#[derive(Debug)]
struct RuntimeGuard(Option<Runtime>);

impl Drop for RuntimeGuard {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A real ZooKeeper ensemble whose servers reach each other only through [`LinkRelay`]s (see
/// the [module docs](super)), so that the network between them can be partitioned at runtime.
///
/// Nodes are addressed by index `0..node_count()`; node `i` has `myid` `i + 1`. Methods
/// taking node indexes panic when one is out of range. The waits and four-letter-word probes
/// block the calling thread (from async code, use `spawn_blocking` or `block_in_place`); the
/// relays run on a runtime of their own. Dropping it kills every server and stops every
/// relay.
#[derive(Debug)]
pub struct PartitionedEnsemble {
    // Fields drop in order: servers first, then relays, then their runtime.
    pub(super) ensemble: ZkEnsemble,
    pub(super) links: Vec<Link>,
    pub(super) ports: Vec<NodePorts>,
    sync_limit: u32,
    init_limit: u32,
    _runtime: RuntimeGuard,
}

impl PartitionedEnsemble {
    /// Starts an `n`-node ensemble (`n >= 2`; 3 or 5 are typical) with `config` behind
    /// relays, and returns once the servers themselves say it is whole: one leader, every
    /// other node a follower, and the leader counting `n - 1` synced followers.
    ///
    /// `syncLimit` and `initLimit` default to 10 and 20 ticks; set them with
    /// [`ServerConfig::extra`] (`.extra("syncLimit", "5")`). `tickTime` is
    /// [`ServerConfig::tick_time_ms`] (200 ms by default).
    ///
    /// # Errors
    /// As [`ZkEnsemble::start_with`], and [`ServerError::Startup`] when the ensemble does not
    /// become whole within the startup timeout (default 30 s); [`ServerError::Io`] for
    /// `n < 2` or when the relays cannot be set up.
    pub fn start(n: usize, config: ServerConfig) -> Result<Self, ServerError> {
        if n < 2 {
            return Err(ServerError::Io {
                context: "starting a partitioned ensemble".to_owned(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "it needs at least 2 nodes"),
            });
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("zkwire-partition")
            .enable_all()
            .build()
            .map_err(relay_err)?;
        let runtime = RuntimeGuard(Some(runtime));
        let Some(handle) = runtime.0.as_ref().map(|r| r.handle().clone()) else {
            return Err(relay_err(io::Error::other("no runtime")));
        };

        let config = with_notification_interval(config);
        let sync_limit = limit(&config, "syncLimit").unwrap_or(ENSEMBLE_SYNC_LIMIT);
        let init_limit = limit(&config, "initLimit").unwrap_or(ENSEMBLE_INIT_LIMIT);
        let links = Link::start_all(n, &handle)?;
        let mut ports = Vec::new();
        let ensemble = ZkEnsemble::start_with_layout(n, config.clone(), &mut |picked| {
            let real = |p: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, p));
            for link in &links {
                link.quorum.set_upstream(real(picked[link.ends.1].quorum));
                link.election
                    .set_upstream(real(picked[link.ends.1].election));
            }
            ports = picked.to_vec();
            Ok(quorum_lines(&links, picked))
        })?;
        let this = Self {
            ensemble,
            links,
            ports,
            sync_limit,
            init_limit,
            _runtime: runtime,
        };
        let timeout = config.startup_timeout.unwrap_or(ENSEMBLE_START_TIMEOUT);
        if let Err(e) = this.wait_healed(timeout) {
            let culprit = e.last.leader().unwrap_or(0);
            return Err(ServerError::Startup {
                what: format!("{n}-node partitioned ensemble {}", this.connect_string()),
                reason: e.to_string(),
                log_path: this.ensemble.node_log_path(culprit).to_path_buf(),
                log_tail: this.ensemble.node_log_tail(culprit, 60),
            });
        }
        Ok(this)
    }

    pub(super) fn check_node(&self, i: usize) {
        let n = self.node_count();
        assert!(i < n, "node index {i} out of range 0..{n}");
    }

    fn link(&self, from: usize, to: usize) -> &Link {
        self.check_node(from);
        self.check_node(to);
        match self.links.iter().find(|l| l.ends == (from, to)) {
            Some(link) => link,
            None => panic!("no link from node {from} to node {to}"),
        }
    }

    // ===== the servers =====

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.ensemble.node_count()
    }

    /// The underlying ensemble: logs, directories, process ids, status.
    pub fn ensemble(&self) -> &ZkEnsemble {
        &self.ensemble
    }

    /// `syncLimit` in ticks, as configured.
    pub fn sync_limit(&self) -> u32 {
        self.sync_limit
    }

    /// `initLimit` in ticks, as configured.
    pub fn init_limit(&self) -> u32 {
        self.init_limit
    }

    /// `tickTime`.
    pub fn tick_time(&self) -> Duration {
        Duration::from_millis(u64::from(self.ensemble.config().tick_time_ms))
    }

    /// `syncLimit * tickTime`: how long a silent link to the leader takes to be noticed.
    pub fn sync_timeout(&self) -> Duration {
        self.tick_time() * self.sync_limit
    }

    /// Connect string of every node's client port, in index order.
    pub fn connect_string(&self) -> String {
        self.ensemble.connect_string()
    }

    /// Connect string of node `i`'s client port, `"127.0.0.1:<port>"`.
    pub fn node_connect_string(&self, i: usize) -> String {
        self.ensemble.node_connect_string(i)
    }

    /// Client port of node `i`.
    pub fn node_port(&self, i: usize) -> u16 {
        self.ensemble.node_port(i)
    }

    /// Client address of node `i`.
    pub fn node_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.node_port(i)))
    }

    /// The mode node `i` reports with `srvr`; `None` when not serving or unreachable.
    pub fn mode(&self, i: usize) -> Option<Mode> {
        self.check_node(i);
        server_mode(self.node_addr(i)).ok().flatten()
    }

    /// The leader, when exactly one node reports `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        self.view().leader()
    }

    /// Node `i`'s whole answer to `srvr`.
    ///
    /// # Errors
    /// When it cannot be reached.
    pub fn srvr(&self, i: usize) -> io::Result<String> {
        self.check_node(i);
        four_letter_word(self.node_addr(i), "srvr")
    }

    /// Node `i`'s whole answer to `mntr`.
    ///
    /// # Errors
    /// When it cannot be reached.
    pub fn mntr(&self, i: usize) -> io::Result<String> {
        self.check_node(i);
        four_letter_word(self.node_addr(i), "mntr")
    }

    /// `zk_synced_followers` from node `i`'s `mntr`: the followers it leads that are
    /// connected and synced. `None` unless node `i` is serving as a leader.
    pub fn synced_followers(&self, i: usize) -> Option<usize> {
        let mntr = self.mntr(i).ok()?;
        mntr.lines().find_map(|line| {
            let mut cols = line.split_whitespace();
            (cols.next() == Some("zk_synced_followers"))
                .then(|| cols.next()?.parse().ok())
                .flatten()
        })
    }

    /// Every node's mode, and the synced followers of every node that leads.
    pub fn view(&self) -> View {
        let modes: Vec<Option<Mode>> = (0..self.node_count()).map(|i| self.mode(i)).collect();
        let synced_followers = modes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if *m == Some(Mode::Leader) {
                    self.synced_followers(i)
                } else {
                    None
                }
            })
            .collect();
        View {
            modes,
            synced_followers,
        }
    }

    /// Every node's status, and every relay's faults and counters, for assertion messages.
    pub fn status(&self) -> String {
        let mut out = self.ensemble.status();
        for link in &self.links {
            for (kind, relay) in [("quorum", &link.quorum), ("election", &link.election)] {
                let faults = relay.shared.faults();
                out.push_str(&format!(
                    "\n{kind} {}->{}: faults {:?}/{:?} {:?}",
                    link.ends.0,
                    link.ends.1,
                    faults[FWD],
                    faults[BWD],
                    relay.counts()
                ));
            }
        }
        out
    }

    /// Kills node `i` (`SIGKILL`); its relays stay up.
    ///
    /// # Errors
    /// As [`ZkEnsemble::kill`].
    pub fn kill(&mut self, i: usize) -> Result<(), ServerError> {
        self.ensemble.kill(i)
    }

    /// Kills node `i` if running and starts it again with the same ports and data; returns
    /// once it serves as leader or follower (which needs a quorum reachable through the
    /// current faults).
    ///
    /// # Errors
    /// As [`ZkEnsemble::restart`].
    pub fn restart(&mut self, i: usize) -> Result<(), ServerError> {
        self.ensemble.restart(i)
    }

    // ===== the relays =====

    /// The relay carrying the connections that node `from` opens to node `to` on `kind`.
    pub fn relay(&self, kind: LinkKind, from: usize, to: usize) -> &LinkRelay {
        let link = self.link(from, to);
        match kind {
            LinkKind::Quorum => &link.quorum,
            LinkKind::Election => &link.election,
        }
    }

    /// The counters of [`relay`](Self::relay)`(kind, from, to)`.
    pub fn link_counts(&self, kind: LinkKind, from: usize, to: usize) -> LinkCounts {
        self.relay(kind, from, to).counts()
    }

    /// Sets `fault` on the bytes flowing from node `from` to node `to`, on every link between
    /// them whichever side opened it; bytes from `to` to `from` are not touched (but see
    /// [`LinkFault::Reset`], which ends whole connections).
    pub fn cut_one_way(&self, from: usize, to: usize, fault: LinkFault) {
        for relay in self.link(from, to).relays() {
            relay.set_fault(Flow::Forward, Some(fault));
        }
        for relay in self.link(to, from).relays() {
            relay.set_fault(Flow::Backward, Some(fault));
        }
    }

    /// Sets `fault` on every link between nodes `a` and `b`, both ways.
    pub fn cut(&self, a: usize, b: usize, fault: LinkFault) {
        for relay in self
            .link(a, b)
            .relays()
            .into_iter()
            .chain(self.link(b, a).relays())
        {
            relay.set_both(fault);
        }
    }

    /// Sets `fault` on every link of node `i`, both ways: it can reach nobody and nobody can
    /// reach it (its client port stays reachable).
    pub fn isolate(&self, i: usize, fault: LinkFault) {
        self.check_node(i);
        for j in (0..self.node_count()).filter(|&j| j != i) {
            self.cut(i, j, fault);
        }
    }

    /// Splits the ensemble into `groups`: every link between nodes of different groups gets
    /// `fault`, both ways; nodes listed in no group form one more group together.
    pub fn partition(&self, groups: &[&[usize]], fault: LinkFault) {
        let n = self.node_count();
        let group_of = |i: usize| groups.iter().position(|g| g.contains(&i));
        for g in groups {
            for &i in *g {
                self.check_node(i);
            }
        }
        for a in 0..n {
            for b in (a + 1)..n {
                if group_of(a) != group_of(b) {
                    self.cut(a, b, fault);
                }
            }
        }
    }

    /// Lifts every fault on every link; held bytes are delivered.
    pub fn heal(&self) {
        for link in &self.links {
            for relay in link.relays() {
                relay.heal();
            }
        }
    }
}

/// The value of `key` (`syncLimit`, `initLimit`) among the extra `zoo.cfg` lines; the last
/// one wins, as in ZooKeeper.
fn limit(config: &ServerConfig, key: &str) -> Option<u32> {
    config
        .extra
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
}
