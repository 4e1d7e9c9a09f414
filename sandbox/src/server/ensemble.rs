//! [`ZkEnsemble`]: an N-node quorum, with the default layout or one of the caller's
//! ([`ZkEnsemble::start_with_layout`], for relays between the nodes).

use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::files::{tail_of, DIR_COUNTER};
use super::node::{Node, POLL_INTERVAL};
use super::ports::{apply_listen_port, pick_ports};
use super::process::{kill_all, Liveness};
use super::runtime::{resolve_runtime, Runtime};
use super::{
    server_mode, Mode, ServerConfig, ServerError, ENSEMBLE_START_TIMEOUT, ERROR_LOG_LINES,
    PORT_RETRIES,
};
use super::{ENSEMBLE_INIT_LIMIT, ENSEMBLE_SYNC_LIMIT};

/// The main class of an ensemble node.
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// The ports of one ensemble node, as handed to the layout of
/// [`ZkEnsemble::start_with_layout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePorts {
    /// `clientPort`.
    pub client: u16,
    /// The quorum (follower-to-leader) port the node binds.
    pub quorum: u16,
    /// The leader-election port the node binds.
    pub election: u16,
}

/// Makes each node's quorum lines from every node's ports (see
/// [`ZkEnsemble::start_with_layout`]).
pub type EnsembleLayout<'a> = dyn FnMut(&[NodePorts]) -> Result<Vec<String>, ServerError> + 'a;

/// An N-node ZooKeeper quorum (`QuorumPeerMain`) on `127.0.0.1`.
///
/// Nodes are addressed by index `0..node_count()`; node `i` has `myid`
/// `i + 1`. Each node has its own directory, data directory, client port
/// and `server.N=127.0.0.1:<peerPort>:<electionPort>` entry; all ports are
/// distinct. Methods taking a node index panic when it is out of range.
///
/// Dropping it kills every JVM and removes every directory.
#[derive(Debug)]
pub struct ZkEnsemble {
    nodes: Vec<Node>,
    config: ServerConfig,
}

impl ZkEnsemble {
    /// Starts an `n`-node ensemble with [`ServerConfig::default`]; see
    /// [`Self::start_with`].
    ///
    /// # Errors
    ///
    /// As [`Self::start_with`].
    pub fn start(n: usize) -> Result<Self, ServerError> {
        Self::start_with(n, ServerConfig::default())
    }

    /// Starts an `n`-node ensemble (`n >= 1`; 3 is typical) and returns once
    /// every node answers `ruok` and reports `Mode: leader` or
    /// `Mode: follower`, with exactly one leader.
    ///
    /// Nodes are launched concurrently. If a picked port turns out to be
    /// taken, the whole ensemble is retried with fresh ports (up to 3
    /// times).
    ///
    /// # Errors
    ///
    /// As [`ZkServer::start_with`]; the readiness timeout defaults to 30 s.
    /// On error every node has been killed.
    ///
    /// [`ZkServer::start_with`]: super::ZkServer::start_with
    pub fn start_with(n: usize, config: ServerConfig) -> Result<Self, ServerError> {
        Self::start_with_layout(n, config, &mut |ports: &[NodePorts]| {
            let mut lines =
                format!("initLimit={ENSEMBLE_INIT_LIMIT}\nsyncLimit={ENSEMBLE_SYNC_LIMIT}\n");
            for (i, p) in ports.iter().enumerate() {
                lines.push_str(&format!(
                    "server.{}=127.0.0.1:{}:{}\n",
                    i + 1,
                    p.quorum,
                    p.election
                ));
            }
            Ok(vec![lines; ports.len()])
        })
    }

    /// Like [`Self::start_with`], but each node gets its own quorum lines (`initLimit`,
    /// `syncLimit`, `server.N=...`): `layout` is called once per start attempt (again with fresh
    /// ports after a port clash) with every node's ports, and returns one block of `zoo.cfg`
    /// lines per node, in node order. A layout can point the nodes at relays between them
    /// (see zkwire-testing's partitions).
    ///
    /// # Errors
    ///
    /// As [`Self::start_with`], and `layout`'s own errors (also when it returns a number of
    /// blocks other than `n`).
    pub fn start_with_layout(
        n: usize,
        config: ServerConfig,
        layout: &mut EnsembleLayout<'_>,
    ) -> Result<Self, ServerError> {
        if n == 0 {
            return Err(ServerError::io(
                "starting an ensemble",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "an ensemble needs at least one node",
                ),
            ));
        }
        let runtime = resolve_runtime()?;
        let timeout = config.startup_timeout.unwrap_or(ENSEMBLE_START_TIMEOUT);
        let ensemble_id = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let ensemble = Self::prepare(ensemble_id, n, &config, &runtime, layout)?;
            for node in &ensemble.nodes {
                node.spawn("starting")?;
            }
            match ensemble.wait_for_quorum(timeout) {
                Ok(_) => return Ok(ensemble),
                Err(e) => {
                    kill_all(&ensemble.nodes);
                    if attempt < PORT_RETRIES
                        && ensemble.nodes.iter().any(Node::log_mentions_bind_failure)
                    {
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// One start attempt's nodes, prepared but not started: fresh ports, `layout`'s quorum
    /// lines, and each node's directory and files.
    fn prepare(
        ensemble_id: u64,
        n: usize,
        config: &ServerConfig,
        runtime: &Runtime,
        layout: &mut EnsembleLayout<'_>,
    ) -> Result<Self, ServerError> {
        let per_node = if config.tls.is_some() { 4 } else { 3 };
        let mut ports = pick_ports(per_node * n)?;
        apply_listen_port(config, &mut ports, per_node, 3)?;
        let node_ports: Vec<NodePorts> = ports
            .chunks(per_node)
            .map(|p| NodePorts {
                client: p[0],
                quorum: p[1],
                election: p[2],
            })
            .collect();
        let quorum_lines = layout(&node_ports)?;
        if quorum_lines.len() != n {
            return Err(ServerError::io(
                "laying out an ensemble",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} blocks of quorum lines for {n} nodes",
                        quorum_lines.len()
                    ),
                ),
            ));
        }
        let mut nodes = Vec::with_capacity(n);
        for (i, lines) in quorum_lines.iter().enumerate() {
            nodes.push(Node::prepare(
                &format!("ens{ensemble_id}-node{i}"),
                format!("ensemble node {i} (myid {})", i + 1),
                QUORUM_MAIN,
                (
                    ports[per_node * i],
                    (per_node == 4).then(|| ports[per_node * i + 3]),
                ),
                Some(i + 1),
                lines,
                config,
                runtime,
            )?);
        }
        Ok(Self {
            nodes,
            config: config.clone(),
        })
    }

    fn node(&self, i: usize) -> &Node {
        match self.nodes.get(i) {
            Some(node) => node,
            None => panic!(
                "ensemble node index {i} out of range 0..{}",
                self.nodes.len()
            ),
        }
    }

    /// Number of nodes (running or not).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The configuration every node was started with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Connect string naming every node in index order:
    /// `"127.0.0.1:p0,127.0.0.1:p1,127.0.0.1:p2"`.
    pub fn connect_string(&self) -> String {
        self.nodes
            .iter()
            .map(Node::connect_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Connect string of every node's TLS port, `"localhost:p0,localhost:p1,…"`, with
    /// [`ServerConfig::tls`].
    pub fn secure_connect_string(&self) -> Option<String> {
        let hosts: Option<Vec<String>> =
            self.nodes.iter().map(Node::secure_connect_string).collect();
        hosts.map(|h| h.join(","))
    }

    /// Connect string of node `i` alone, `"127.0.0.1:<port>"`.
    pub fn node_connect_string(&self, i: usize) -> String {
        self.node(i).connect_string()
    }

    /// Client port of node `i` (stable across restarts).
    pub fn node_port(&self, i: usize) -> u16 {
        self.node(i).client_port
    }

    /// Log file of node `i`.
    pub fn node_log_path(&self, i: usize) -> &Path {
        &self.node(i).log_path
    }

    /// The last `lines` lines of node `i`'s log.
    pub fn node_log_tail(&self, i: usize, lines: usize) -> String {
        tail_of(&self.node(i).log_path, lines)
    }

    /// Temporary directory of node `i`.
    pub fn node_dir(&self, i: usize) -> &Path {
        &self.node(i).dir
    }

    /// JVM process id of node `i`, or `None` when it is not running.
    pub fn node_pid(&self, i: usize) -> Option<u32> {
        let node = self.node(i);
        if node.liveness() == Liveness::Running {
            node.java_pid()
        } else {
            None
        }
    }

    /// Whether node `i`'s process is alive (not whether it is serving).
    pub fn is_running(&self, i: usize) -> bool {
        self.node(i).liveness() == Liveness::Running
    }

    /// The mode node `i` reports via `srvr`, or `None` when it cannot be
    /// reached or is not serving (e.g. during leader election).
    pub fn mode(&self, i: usize) -> Option<Mode> {
        let node = self.node(i);
        if node.liveness() == Liveness::Exited {
            return None;
        }
        server_mode(node.addr()).ok().flatten()
    }

    /// The index of the leader: `Some(i)` when exactly one running node
    /// reports `Mode: leader` right now, `None` otherwise (no leader,
    /// election in progress, or a transient double report).
    pub fn leader(&self) -> Option<usize> {
        let leaders: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.mode(i) == Some(Mode::Leader))
            .collect();
        match leaders.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// One-line-per-node status (index, port, running, mode, log path),
    /// for diagnostics in assertion messages.
    pub fn status(&self) -> String {
        (0..self.nodes.len())
            .map(|i| {
                let node = &self.nodes[i];
                let mode = self
                    .mode(i)
                    .map_or_else(|| "-".to_owned(), |m| m.to_string());
                format!(
                    "node {i} (myid {}) {}: running={} mode={mode} log={}",
                    i + 1,
                    node.connect_string(),
                    node.liveness() == Liveness::Running,
                    node.log_path.display()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until the running nodes form a working quorum: at least a
    /// majority of all nodes are running, every running node answers
    /// `ruok` and reports leader or follower, and exactly one of them is
    /// the leader. Returns the leader's index. Polls every 50 ms.
    ///
    /// # Errors
    ///
    /// [`ServerError::Startup`] on timeout, with every node's status and
    /// the tail of the log of a node that is not ready. Nodes are left
    /// running.
    pub fn wait_for_quorum(&self, timeout: Duration) -> Result<usize, ServerError> {
        let deadline = Instant::now() + timeout;
        let majority = self.nodes.len() / 2 + 1;
        loop {
            let mut running = 0;
            let mut leaders = Vec::new();
            let mut not_ready = None;
            for (i, node) in self.nodes.iter().enumerate() {
                if node.liveness() == Liveness::Exited {
                    continue;
                }
                running += 1;
                match node.probe(Mode::is_quorum_member) {
                    Ok(Mode::Leader) => leaders.push(i),
                    Ok(_) => {}
                    Err(why) => {
                        not_ready.get_or_insert((i, why));
                    }
                }
            }
            if running >= majority && not_ready.is_none() && leaders.len() == 1 {
                return Ok(leaders[0]);
            }
            if Instant::now() >= deadline {
                let reason = format!(
                    "no working quorum within {timeout:?}: {running} of {} nodes running (majority {majority}), leaders {leaders:?}, first node not ready: {}\n{}",
                    self.nodes.len(),
                    not_ready.as_ref().map_or_else(|| "none".to_owned(), |(i, why)| format!("node {i}: {why}")),
                    self.status()
                );
                let culprit = &self.nodes[not_ready.map_or(0, |(i, _)| i)];
                return Err(ServerError::Startup {
                    what: format!(
                        "{}-node ensemble {}",
                        self.nodes.len(),
                        self.connect_string()
                    ),
                    reason,
                    log_path: culprit.log_path.clone(),
                    log_tail: tail_of(&culprit.log_path, ERROR_LOG_LINES),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Kills node `i` with `SIGKILL` and returns once its process is gone.
    /// No-op when it is not running.
    ///
    /// # Errors
    ///
    /// As [`ZkServer::kill`](super::ZkServer::kill).
    pub fn kill(&mut self, i: usize) -> Result<(), ServerError> {
        self.node(i).kill()
    }

    /// Stops node `i` gracefully (`SIGTERM`, `SIGKILL` after 5 s) and
    /// returns once its process is gone. No-op when it is not running.
    ///
    /// # Errors
    ///
    /// As [`ZkServer::stop`](super::ZkServer::stop).
    pub fn stop(&mut self, i: usize) -> Result<(), ServerError> {
        self.node(i).stop()
    }

    /// Kills node `i` (if running) and starts it again with the same ports
    /// and data directory; returns once it serves as leader or follower.
    /// This needs a quorum: with a majority of the other nodes down it
    /// times out (start them too, or restart them first).
    ///
    /// # Errors
    ///
    /// [`ServerError::Startup`] when the node does not join within the
    /// startup timeout (default 30 s; the node is then killed),
    /// [`ServerError::Io`] when it cannot be spawned.
    pub fn restart(&mut self, i: usize) -> Result<(), ServerError> {
        let node = self.node(i);
        node.kill()?;
        node.spawn("restarting")?;
        let timeout = self
            .config
            .startup_timeout
            .unwrap_or(ENSEMBLE_START_TIMEOUT);
        match node.wait_ready(Mode::is_quorum_member, Instant::now() + timeout) {
            Ok(_) => Ok(()),
            Err(e) => {
                let _ = node.kill();
                Err(e)
            }
        }
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        // Kill all concurrently; each node's own Drop then removes its dir.
        kill_all(&self.nodes);
    }
}
