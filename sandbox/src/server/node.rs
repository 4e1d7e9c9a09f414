//! One server process, standalone server or ensemble node: its directory, ports and
//! readiness.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use super::files::{keep_logs, tail_of, unique_dir};
use super::process::{Liveness, Proc};
use super::runtime::Runtime;
use super::ERROR_LOG_LINES;
use super::{four_letter_word, server_mode, Mode, ServerConfig, ServerError, ServerSasl};

/// Interval between readiness probes.
pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A server process (standalone server or ensemble node) and its directory; killed, and
/// the directory removed, on drop.
#[derive(Debug)]
pub(super) struct Node {
    /// Human-readable name used in errors.
    pub(super) label: String,
    /// Where its files are: [`cfg_path`](Self::cfg_path), [`pid_path`](Self::pid_path),
    /// the data and the log.
    pub(super) dir: PathBuf,
    pub(super) log_path: PathBuf,
    pub(super) client_port: u16,
    pub(super) secure_port: Option<u16>,
    pub(super) main_class: &'static str,
    pub(super) jvm_props: Vec<(String, String)>,
    pub(super) runtime: Runtime,
    pub(super) keep: bool,
    pub(super) proc: Mutex<Option<Proc>>,
}

impl Node {
    /// The server's configuration file.
    pub(super) fn cfg_path(&self) -> PathBuf {
        self.dir.join("zoo.cfg")
    }

    /// Where the JVM's launcher writes the server's process id.
    pub(super) fn pid_path(&self) -> PathBuf {
        self.dir.join("java.pid")
    }

    /// Creates the directory and writes `zoo.cfg`, logging config and
    /// (for ensemble nodes) `myid`. Does not start anything.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prepare(
        tag: &str,
        label: String,
        main_class: &'static str,
        (client_port, secure_port): (u16, Option<u16>),
        myid: Option<usize>,
        quorum_lines: &str,
        config: &ServerConfig,
        runtime: &Runtime,
    ) -> Result<Self, ServerError> {
        let dir = unique_dir(tag)?;
        let mut jvm_props = config.jvm_props.clone();
        if config.sasl.is_some() {
            let jaas = dir.join("jaas.conf");
            jvm_props.push((
                "java.security.auth.login.config".to_owned(),
                jaas.display().to_string(),
            ));
        }
        if let Some(ServerSasl::Kerberos { krb5_conf, .. }) = &config.sasl {
            jvm_props.push((
                "java.security.krb5.conf".to_owned(),
                krb5_conf.display().to_string(),
            ));
        }
        let node = Self {
            label,
            log_path: dir.join("server.log"),
            client_port,
            secure_port,
            main_class,
            jvm_props,
            runtime: runtime.clone(),
            keep: keep_logs(),
            proc: Mutex::new(None),
            dir,
        };
        // From here on `node`'s Drop cleans the directory on error.
        node.write_files(myid, quorum_lines, config)?;
        Ok(node)
    }

    pub(super) fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// `localhost:<secure port>`: the name the test server certificate carries.
    pub(super) fn secure_connect_string(&self) -> Option<String> {
        self.secure_port.map(|p| format!("localhost:{p}"))
    }

    pub(super) fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn startup_error(&self, reason: String) -> ServerError {
        ServerError::Startup {
            what: format!("{} on {}", self.label, self.connect_string()),
            reason,
            log_path: self.log_path.clone(),
            log_tail: tail_of(&self.log_path, ERROR_LOG_LINES),
        }
    }

    /// One readiness probe: `ruok` must answer `imok`, then `srvr` must
    /// report a mode accepted by `accept`.
    pub(super) fn probe(&self, accept: fn(&Mode) -> bool) -> Result<Mode, String> {
        let addr = self.addr();
        match four_letter_word(addr, "ruok") {
            Ok(r) if r.trim() == "imok" => {}
            Ok(r) => return Err(format!("`ruok` answered {:?}", r.trim())),
            Err(e) => return Err(format!("`ruok` failed: {e}")),
        }
        match server_mode(addr) {
            Ok(Some(mode)) if accept(&mode) => Ok(mode),
            Ok(Some(mode)) => Err(format!("`srvr` reports Mode: {mode}")),
            Ok(None) => Err("`srvr`: not serving requests yet".to_owned()),
            Err(e) => Err(format!("`srvr` failed: {e}")),
        }
    }

    /// Polls until [`Self::probe`] succeeds. Fails early when the process
    /// exits; on timeout leaves the process running (callers kill it).
    pub(super) fn wait_ready(
        &self,
        accept: fn(&Mode) -> bool,
        deadline: Instant,
    ) -> Result<Mode, ServerError> {
        loop {
            let last = match self.probe(accept) {
                Ok(mode) => return Ok(mode),
                Err(why) => why,
            };
            if self.liveness() == Liveness::Exited {
                if let Some(line) = self.classpath_problem() {
                    return Err(ServerError::ZooKeeperNotFound(format!(
                        "{} could not load its classes: `{line}`; classpath {:?}",
                        self.label, self.runtime.classpath
                    )));
                }
                return Err(self.startup_error(format!(
                    "the server process exited while starting (last probe: {last})"
                )));
            }
            if Instant::now() >= deadline {
                return Err(self.startup_error(format!("not ready in time (last probe: {last})")));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// The first log line showing that the JVM could not load a class
    /// (wrong or incomplete classpath), if any.
    fn classpath_problem(&self) -> Option<String> {
        let log = fs::read_to_string(&self.log_path).ok()?;
        log.lines()
            .find(|l| {
                l.contains("Could not find or load main class")
                    || l.contains("ClassNotFoundException")
                    || l.contains("NoClassDefFoundError")
            })
            .map(|l| l.trim().to_owned())
    }

    pub(super) fn log_mentions_bind_failure(&self) -> bool {
        fs::read_to_string(&self.log_path)
            .map(|s| s.contains("Address already in use"))
            .unwrap_or(false)
    }

    fn remove_dir(&self) {
        if self.keep {
            eprintln!(
                "zkwire-sandbox: kept {} in {}",
                self.label,
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.kill();
        self.remove_dir();
    }
}
