//! [`ZkServer`]: one standalone server, and the process-wide [`shared_server`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use super::files::tail_of;
use super::node::Node;
use super::ports::{apply_listen_port, pick_ports};
use super::process::Liveness;
use super::runtime::resolve_runtime;
use super::{server_mode, Mode, ServerConfig, ServerError, PORT_RETRIES, STANDALONE_START_TIMEOUT};

/// The main class of a standalone server.
pub(super) const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// A standalone ZooKeeper server (`ZooKeeperServerMain`) on `127.0.0.1`.
///
/// Dropping it kills the JVM and removes its directory (see the
/// [module documentation](super) for what happens when `Drop` does not run).
#[derive(Debug)]
pub struct ZkServer {
    node: Node,
    config: ServerConfig,
}

impl ZkServer {
    /// Starts a server with [`ServerConfig::default`]; see [`Self::start_with`].
    ///
    /// # Errors
    ///
    /// As [`Self::start_with`].
    pub fn start() -> Result<Self, ServerError> {
        Self::start_with(ServerConfig::default())
    }

    /// Starts a server with `config` and returns once it answers `ruok`
    /// with `imok` and `srvr` reports `Mode: standalone`.
    ///
    /// The client port is a free loopback port picked at runtime; if the
    /// port turns out to be taken by the time the JVM binds it, the start
    /// is retried with a fresh port (up to 3 times).
    ///
    /// # Errors
    ///
    /// [`ServerError::JavaNotFound`] / [`ServerError::ZooKeeperNotFound`] /
    /// [`ServerError::BashNotFound`] when prerequisites are missing (also
    /// `ZooKeeperNotFound` when the JVM exits unable to load a class, e.g.
    /// with an incomplete `ZKWIRE_ZK_CLASSPATH`),
    /// [`ServerError::Io`] for harness I/O failures, and
    /// [`ServerError::Startup`] (with the log tail) when the server exits or
    /// is not ready within the startup timeout (default 20 s); in that
    /// case the process has been killed.
    pub fn start_with(config: ServerConfig) -> Result<Self, ServerError> {
        let runtime = resolve_runtime()?;
        let timeout = config.startup_timeout.unwrap_or(STANDALONE_START_TIMEOUT);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut ports = pick_ports(if config.tls.is_some() { 2 } else { 1 })?;
            let per_node = ports.len();
            apply_listen_port(&config, &mut ports, per_node, 1)?;
            let node = Node::prepare(
                "standalone",
                "standalone ZooKeeper server".to_owned(),
                STANDALONE_MAIN,
                (ports[0], ports.get(1).copied()),
                None,
                "",
                &config,
                &runtime,
            )?;
            node.spawn("starting")?;
            match node.wait_ready(|m| *m == Mode::Standalone, Instant::now() + timeout) {
                Ok(_) => return Ok(Self { node, config }),
                Err(e) => {
                    let _ = node.kill();
                    if attempt < PORT_RETRIES && node.log_mentions_bind_failure() {
                        continue; // `node` is dropped: directory removed.
                    }
                    return Err(e);
                }
            }
        }
    }

    /// The connect string, `"127.0.0.1:<port>"`.
    pub fn connect_string(&self) -> String {
        self.node.connect_string()
    }

    /// The client port (stable across [`Self::restart`]).
    pub fn port(&self) -> u16 {
        self.node.client_port
    }

    /// The TLS port, with [`ServerConfig::tls`] (stable across [`Self::restart`]).
    pub fn secure_port(&self) -> Option<u16> {
        self.node.secure_port
    }

    /// `"localhost:<TLS port>"` (the name the test certificate carries), with
    /// [`ServerConfig::tls`].
    pub fn secure_connect_string(&self) -> Option<String> {
        self.node.secure_connect_string()
    }

    /// The client address, `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.node.addr()
    }

    /// The server's log file (JVM stdout and stderr, appended across
    /// restarts with a marker line per launch). Print it from failing tests.
    pub fn log_path(&self) -> &Path {
        &self.node.log_path
    }

    /// The last `lines` lines of the server log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail_of(&self.node.log_path, lines)
    }

    /// The server's temporary directory (`zoo.cfg`, `data/`, logs).
    pub fn dir(&self) -> &Path {
        &self.node.dir
    }

    /// The configuration the server was started with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The JVM's process id, or `None` when not running (or not yet known).
    pub fn pid(&self) -> Option<u32> {
        if self.is_running() {
            self.node.java_pid()
        } else {
            None
        }
    }

    /// Whether the server process is alive (not whether it is serving).
    pub fn is_running(&self) -> bool {
        self.node.liveness() == Liveness::Running
    }

    /// The mode reported by `srvr`, or `None` when the server cannot be
    /// reached or is not serving.
    pub fn mode(&self) -> Option<Mode> {
        server_mode(self.node.addr()).ok().flatten()
    }

    /// Gracefully stops the server: `SIGTERM` to the JVM, `SIGKILL` if it
    /// has not exited after 5 s; returns once the process is gone. Data
    /// and directory are kept, so [`Self::restart`] can bring it back.
    /// No-op when not running.
    ///
    /// # Errors
    ///
    /// [`ServerError::Startup`] if the process could only be removed by
    /// the forcible fallback (it is gone either way).
    pub fn stop(&mut self) -> Result<(), ServerError> {
        self.node.stop()
    }

    /// Kills the server with `SIGKILL` (a crash: no shutdown hooks, client
    /// connections see a reset) and returns once the process is gone and
    /// the port refuses connections. Data and directory are kept. No-op
    /// when not running.
    ///
    /// # Errors
    ///
    /// As [`Self::stop`].
    pub fn kill(&mut self) -> Result<(), ServerError> {
        self.node.kill()
    }

    /// Kills the server (`SIGKILL`, if running) and starts it again on the
    /// same port with the same data directory, so persisted data and
    /// unexpired sessions survive. Returns once it serves again
    /// (`Mode: standalone`).
    ///
    /// # Errors
    ///
    /// [`ServerError::Startup`] when it is not serving within the startup
    /// timeout (the process is then killed), [`ServerError::Io`] when it
    /// cannot be spawned.
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.node.kill()?;
        self.node.spawn("restarting")?;
        let timeout = self
            .config
            .startup_timeout
            .unwrap_or(STANDALONE_START_TIMEOUT);
        match self
            .node
            .wait_ready(|m| *m == Mode::Standalone, Instant::now() + timeout)
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let _ = self.node.kill();
                Err(e)
            }
        }
    }
}

/// A process-wide standalone server with default settings, started on
/// first use and shared by every test in the test binary (give each test
/// its own chroot or path prefix).
///
/// It lives in a `static`, so its `Drop` never runs: the watchdog kills
/// the JVM and removes its directory when the test process exits.
///
/// # Panics
///
/// Panics with the [`ServerError`] message (e.g. what to install) when the
/// server cannot be started; a later call tries again.
pub fn shared_server() -> &'static ZkServer {
    static SHARED: OnceLock<ZkServer> = OnceLock::new();
    SHARED.get_or_init(|| match ZkServer::start() {
        Ok(server) => server,
        Err(e) => panic!("zkwire-sandbox: cannot start the shared ZooKeeper server: {e}"),
    })
}
