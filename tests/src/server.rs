//! Real Apache ZooKeeper servers for integration tests.
//!
//! This module launches genuine ZooKeeper JVMs — a standalone server
//! ([`ZkServer`], `org.apache.zookeeper.server.ZooKeeperServerMain`) or an
//! N-node quorum ([`ZkEnsemble`], `org.apache.zookeeper.server.quorum.QuorumPeerMain`)
//! — bound to `127.0.0.1` on free ports picked at runtime, each in its own
//! temporary directory that holds `zoo.cfg`, the data directory, the logging
//! configuration and the server's combined stdout/stderr log
//! ([`ZkServer::log_path`]).
//!
//! # Requirements
//!
//! * `java` on `PATH` (or the environment variable `JAVA` naming the binary,
//!   or `$JAVA_HOME/bin/java`);
//! * the ZooKeeper jars: by default the Debian package `zookeeper`
//!   (`/usr/share/java/zookeeper.jar` and friends, see [`default_classpath`]),
//!   or a complete classpath in the environment variable `ZKWIRE_ZK_CLASSPATH`;
//! * `bash`, which runs the watchdog wrapper described below.
//!
//! When something is missing, starting fails with a [`ServerError`] whose
//! message says what to install; [`shared_server`] panics with it. Tests
//! must fail loudly rather than skip.
//!
//! # No leftover processes
//!
//! Every JVM runs under a small `bash` watchdog whose stdin is a pipe held by
//! the test process. The watchdog kills the JVM with `SIGKILL` (and, unless
//! `ZKWIRE_KEEP_LOGS=1`, removes the server's temporary directory) as soon as
//!
//! * the pipe reports end-of-file — the kernel closes it when the test
//!   process exits for any reason, including `std::process::exit`, a panic
//!   that aborts, or `SIGKILL` — or
//! * polling (every 200 ms) finds the test process gone, or
//! * the watchdog itself receives `SIGTERM`, `SIGINT` or `SIGHUP`.
//!
//! This makes it safe to keep servers in `static`s (see [`shared_server`])
//! whose `Drop` never runs. Ordinary `Drop` of a [`ZkServer`] or
//! [`ZkEnsemble`] kills the JVMs synchronously and removes the directories.
//!
//! # Environment variables
//!
//! * `ZKWIRE_ZK_CLASSPATH` — full Java classpath replacing [`default_classpath`].
//! * `JAVA` — java binary (a path, or a name looked up on `PATH`).
//! * `ZKWIRE_KEEP_LOGS=1` — keep the temporary directories (configuration,
//!   data and logs) after the servers are gone.

use std::env;
use std::error::Error;
use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::tls::{ClientAuth, StoreType, TlsMaterial, STORE_PASSWORD};

/// Environment variable holding a complete classpath that replaces
/// [`default_classpath`].
pub const CLASSPATH_ENV: &str = "ZKWIRE_ZK_CLASSPATH";
/// Environment variable naming the java binary (a path or a name on `PATH`).
pub const JAVA_ENV: &str = "JAVA";
/// Environment variable that, when set to `1`, keeps every server's
/// temporary directory (config, data, logs) after the server is gone.
pub const KEEP_LOGS_ENV: &str = "ZKWIRE_KEEP_LOGS";
/// Directory holding the Debian `zookeeper` package's jars.
pub const DEFAULT_JAR_DIR: &str = "/usr/share/java";
/// Default readiness timeout of a standalone server.
pub const STANDALONE_START_TIMEOUT: Duration = Duration::from_secs(20);
/// Default readiness timeout of an ensemble (all nodes serving, one leader).
pub const ENSEMBLE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Installation hint used when the ZooKeeper jars cannot be found.
const ZK_INSTALL_HINT: &str = "ZooKeeper not found: install it with `apt-get install -y zookeeper` (Debian) or set ZKWIRE_ZK_CLASSPATH";
/// Installation hint used when no java binary can be found.
const JAVA_INSTALL_HINT: &str = "java not found: install a Java runtime with `apt-get install -y default-jre-headless` (Debian) or set JAVA to the java binary";
/// Installation hint used when bash (the watchdog) cannot be found.
const BASH_INSTALL_HINT: &str =
    "bash not found: the ZooKeeper watchdog needs bash; install it with `apt-get install -y bash`";

/// Jars (in [`DEFAULT_JAR_DIR`]) without which a ZooKeeper 3.8 server with
/// the default NIO connection factory does not start.
const REQUIRED_JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "metrics-core.jar",
    "snappy-java.jar",
];
/// Jars added when present: the slf4j binding that makes the server log at
/// all, and the dependencies of optional features (Netty connection factory
/// and TLS, oracle quorum).
const OPTIONAL_JARS: &[&str] = &[
    "slf4j-simple.jar",
    "commons-io.jar",
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-common.jar",
    "netty-handler.jar",
    "netty-resolver.jar",
    "netty-transport.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
];

/// JVM flags keeping each server small and quick to start on a small box.
const JVM_FLAGS: &[&str] = &[
    "-Xmx256m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
];

/// Watchdog run by `bash -c`. Arguments: `$1` server directory, `$2` pid
/// file, `$3` pid of the test process (the watchdog's parent), `$4` keep
/// flag (`1` keeps the directory), then the java command line.
///
/// Commands arrive on stdin as lines: `kill` (SIGKILL now) or `term`
/// (SIGTERM, SIGKILL after 5 s); the harness always sends one before
/// closing stdin. End-of-file without a command, a fatal signal, or the
/// watchdog's parent changing (the test process died and the watchdog was
/// re-parented) all mean the test process is going away: SIGKILL the JVM
/// and, once the parent is confirmed gone (waiting up to 2 s), remove the
/// directory unless kept. The script exits only after the JVM has been
/// reaped, with the JVM's exit status.
///
/// `read -t` keeps partial input on timeout, so a command split by the
/// timeout is reassembled in `buf` rather than misread.
pub(crate) const WATCHDOG: &str = r#"
set -u
dir=$1 pidfile=$2 parent=$3 keep=$4
shift 4
"$@" </dev/null &
jpid=$!
printf '%s\n' "$jpid" >"$pidfile"
parent_alive() {
  local line rest f
  if read -r line 2>/dev/null </proc/$$/stat; then
    rest=${line##*) }
    f=($rest)
    [ "${f[1]}" = "$parent" ]
  else
    kill -0 "$parent" 2>/dev/null
  fi
}
finish() {
  trap '' TERM INT HUP
  local reason=$1 i=0 rc
  printf 'zkwire-testing watchdog: stopping JVM %s (reason: %s)\n' "$jpid" "$reason" >&2
  case $reason in
    term)
      kill -TERM "$jpid" 2>/dev/null
      while [ "$i" -lt 100 ] && kill -0 "$jpid" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
      kill -KILL "$jpid" 2>/dev/null ;;
    exited) ;;
    *) kill -KILL "$jpid" 2>/dev/null ;;
  esac
  wait "$jpid"
  rc=$?
  case $reason in
    kill|term|exited) ;;
    *)
      while [ "$i" -lt 40 ] && parent_alive; do sleep 0.05; i=$((i + 1)); done
      if ! parent_alive && [ "$keep" != 1 ]; then rm -rf -- "$dir"; fi ;;
  esac
  exit "$rc"
}
trap 'finish signal' TERM INT HUP
buf=
while :; do
  part=
  read -r -t 0.2 part
  st=$?
  buf=$buf$part
  if [ "$st" -eq 0 ]; then
    case $buf in kill|term) finish "$buf" ;; esac
    buf=
  elif [ "$st" -gt 128 ]; then
    kill -0 "$jpid" 2>/dev/null || finish exited
    parent_alive || finish parent-gone
  else
    case $buf in kill|term) finish "$buf" ;; esac
    finish eof
  fi
done
"#;

/// How long to wait for the watchdog (and so the JVM) to exit after `kill`.
const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long to wait after `term` (the watchdog escalates to SIGKILL at 5 s).
const TERM_WAIT: Duration = Duration::from_secs(15);
/// Interval between readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Connect, read and write timeout of a single four-letter-word exchange.
const FLW_IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest four-letter-word response accepted.
const FLW_MAX_RESPONSE: u64 = 1 << 20;
/// How many times [`ZkServer::start_with`] / [`ZkEnsemble::start_with`] try
/// again with fresh ports when a port turned out to be taken.
const PORT_RETRIES: usize = 3;
/// Number of log lines included in startup errors.
const ERROR_LOG_LINES: usize = 60;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Why a server or ensemble could not be started, stopped or restarted.
///
/// The `Display` text is meant to be shown to a human as-is: for missing
/// prerequisites it names the package to install, for startup failures it
/// includes the server's log path and the tail of its log.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    /// No java binary was found; the payload explains where we looked.
    JavaNotFound(String),
    /// The ZooKeeper jars were not found; the payload lists what is missing.
    ZooKeeperNotFound(String),
    /// `bash` (needed for the watchdog wrapper) was not found.
    BashNotFound(String),
    /// An I/O operation of the harness failed (creating directories,
    /// writing configuration, spawning processes, ...).
    Io {
        /// What the harness was doing.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A server did not become ready (or did not stop) in time, or exited
    /// while starting. The server's process has been killed.
    Startup {
        /// Which server ("standalone server on 127.0.0.1:1234", "node 2 ...").
        what: String,
        /// What went wrong.
        reason: String,
        /// The server's log file (may have been removed already unless
        /// `ZKWIRE_KEEP_LOGS=1`).
        log_path: PathBuf,
        /// The last lines of the log file at the time of the failure.
        log_tail: String,
    },
}

impl ServerError {
    fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::JavaNotFound(detail) => write!(f, "{JAVA_INSTALL_HINT} ({detail})"),
            Self::ZooKeeperNotFound(detail) => write!(f, "{ZK_INSTALL_HINT} ({detail})"),
            Self::BashNotFound(detail) => write!(f, "{BASH_INSTALL_HINT} ({detail})"),
            Self::Io { context, source } => write!(f, "{context}: {source}"),
            Self::Startup {
                what,
                reason,
                log_path,
                log_tail,
            } => {
                let removed = if log_path.exists() {
                    ""
                } else {
                    " (since removed; set ZKWIRE_KEEP_LOGS=1 to keep it)"
                };
                write!(
                    f,
                    "{what}: {reason}\nserver log: {}{removed}\n----- last lines of the server log -----\n{log_tail}\n----- end of server log -----",
                    log_path.display()
                )
            }
        }
    }
}

impl Error for ServerError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// Settings for a [`ZkServer`] or for every node of a [`ZkEnsemble`].
///
/// Fields are public; the chaining methods are a convenience. The
/// [`Default`] is `tickTime=200`, `minSessionTimeout=400`,
/// `maxSessionTimeout=60000`, no extra `zoo.cfg` lines, and the JVM system
/// properties `zookeeper.extendedTypesEnabled=true` (TTL nodes) and
/// `zookeeper.forceSync=no` (no fsync; data still survives a process kill,
/// which is all the harness simulates).
///
/// Every generated `zoo.cfg` also contains `clientPortAddress=127.0.0.1`,
/// `admin.enableServer=false`, `4lw.commands.whitelist=*` and
/// `maxClientCnxns=0` (no per-IP connection limit); ensembles additionally
/// get `initLimit=20`, `syncLimit=10` and their `server.N` lines. The
/// [`extra`](Self::extra) lines come last and therefore override any of
/// these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// `tickTime` in milliseconds.
    pub tick_time_ms: u32,
    /// `minSessionTimeout` in milliseconds.
    pub min_session_timeout_ms: u32,
    /// `maxSessionTimeout` in milliseconds.
    pub max_session_timeout_ms: u32,
    /// Additional `key=value` lines appended to `zoo.cfg`, in order.
    pub extra: Vec<(String, String)>,
    /// JVM system properties passed as `-Dkey=value`, in order (a later
    /// entry for the same key wins).
    pub jvm_props: Vec<(String, String)>,
    /// Readiness timeout; `None` means [`STANDALONE_START_TIMEOUT`] or
    /// [`ENSEMBLE_START_TIMEOUT`]. Also used by restarts.
    pub startup_timeout: Option<Duration>,
    /// TLS on a `secureClientPort` of each node; see [`Self::tls`].
    pub tls: Option<ServerTls>,
    /// SASL; see [`Self::sasl_digest`].
    pub sasl: Option<ServerSasl>,
    /// The port clients are to use, instead of a free one; see [`Self::listen_port`].
    pub listen_port: Option<u16>,
}

/// A server's TLS settings (see [`ServerConfig::tls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// `ssl.keyStore.location`.
    pub key_store: PathBuf,
    /// `ssl.trustStore.location`.
    pub trust_store: PathBuf,
    /// Both stores' type.
    pub store_type: StoreType,
    /// `ssl.clientAuth`.
    pub client_auth: ClientAuth,
}

/// A server's SASL settings (see [`ServerConfig::sasl_digest`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerSasl {
    /// DIGEST-MD5 with the JAAS `DigestLoginModule`.
    Digest {
        /// (user, password) pairs.
        users: Vec<(String, String)>,
        /// `sessionRequireClientSASLAuth`: requests before SASL end the session.
        require: bool,
    },
    /// Kerberos (GSSAPI) with the JAAS `Krb5LoginModule` and a keytab.
    Kerberos {
        /// The realm's `krb5.conf` (`java.security.krb5.conf`).
        krb5_conf: PathBuf,
        /// The keytab holding `principal`'s keys.
        keytab: PathBuf,
        /// The server's principal, `service/host@REALM`.
        principal: String,
        /// `sessionRequireClientSASLAuth`.
        require: bool,
    },
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            tick_time_ms: 200,
            min_session_timeout_ms: 400,
            max_session_timeout_ms: 60_000,
            extra: Vec::new(),
            jvm_props: vec![
                (
                    "zookeeper.extendedTypesEnabled".to_owned(),
                    "true".to_owned(),
                ),
                ("zookeeper.forceSync".to_owned(), "no".to_owned()),
            ],
            startup_timeout: None,
            tls: None,
            sasl: None,
            listen_port: None,
        }
    }
}

impl ServerConfig {
    /// Sets `tickTime` (milliseconds).
    #[must_use]
    pub fn tick_time_ms(mut self, ms: u32) -> Self {
        self.tick_time_ms = ms;
        self
    }

    /// Sets `minSessionTimeout` (milliseconds).
    #[must_use]
    pub fn min_session_timeout_ms(mut self, ms: u32) -> Self {
        self.min_session_timeout_ms = ms;
        self
    }

    /// Sets `maxSessionTimeout` (milliseconds).
    #[must_use]
    pub fn max_session_timeout_ms(mut self, ms: u32) -> Self {
        self.max_session_timeout_ms = ms;
        self
    }

    /// Appends the line `key=value` to `zoo.cfg` (after all generated lines).
    #[must_use]
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra.push((key.into(), value.into()));
        self
    }

    /// Adds the JVM system property `-Dkey=value` (after the existing ones,
    /// so it overrides an earlier entry for the same key).
    #[must_use]
    pub fn jvm_prop(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.jvm_props.push((key.into(), value.into()));
        self
    }

    /// Enables or disables read-only mode (`-Dreadonlymode.enabled`): a
    /// partitioned ensemble node then keeps serving reads and reports
    /// [`Mode::ReadOnly`]. Off by default.
    ///
    /// Enabling it also enables local sessions (`localSessionsEnabled`, upgradable): a
    /// read-only server answers a request for a brand-new global session with NOTREADONLY,
    /// since creating one is a write; it can only hand out sessions local to itself.
    #[must_use]
    pub fn read_only_mode(self, enabled: bool) -> Self {
        let flag = if enabled { "true" } else { "false" };
        self.jvm_prop("readonlymode.enabled", flag)
            .extra("localSessionsEnabled", flag)
            .extra("localSessionsUpgradingEnabled", flag)
    }

    /// Clients connect on `port` (node `i` of an ensemble on `port + i`): the TLS port when
    /// TLS is on, the plaintext port otherwise; the servers' other ports stay free ones.
    /// For a sandbox that must be found where users look (`zkw sandbox --port`). A port in
    /// use fails the start (no retry on other ports, as with picked ones).
    #[must_use]
    pub fn listen_port(mut self, port: u16) -> Self {
        self.listen_port = Some(port);
        self
    }

    /// Serves TLS too: each node gets a `secureClientPort` (on `127.0.0.1`, see
    /// [`ZkServer::secure_connect_string`]) on the Netty connection factory, with the server
    /// certificate and CA of `material` in stores of `store_type`, `ssl.clientAuth` set from
    /// `client_auth`, and the x509 authentication provider (client certificates become
    /// `x509:<subject>` identities). The plaintext client port stays open. `material` must
    /// outlive the servers.
    #[must_use]
    pub fn tls(
        mut self,
        material: &TlsMaterial,
        client_auth: ClientAuth,
        store_type: StoreType,
    ) -> Self {
        self.tls = Some(ServerTls {
            key_store: material.server_key_store(store_type),
            trust_store: material.server_trust_store(store_type),
            store_type,
            client_auth,
        });
        self
    }

    /// Enables SASL DIGEST-MD5 for `users` (a JAAS file with `DigestLoginModule` in each
    /// node's directory); with `require`, `sessionRequireClientSASLAuth=true`, so that a
    /// request of a session that has not authenticated ends it.
    #[must_use]
    pub fn sasl_digest(mut self, users: &[(&str, &str)], require: bool) -> Self {
        self.sasl = Some(ServerSasl::Digest {
            users: users
                .iter()
                .map(|(u, p)| ((*u).to_owned(), (*p).to_owned()))
                .collect(),
            require,
        });
        self
    }

    /// Enables SASL with Kerberos in `kdc`'s realm: the server authenticates as
    /// [`SERVER_PRINCIPAL`](crate::kerberos::SERVER_PRINCIPAL) from the realm's server keytab
    /// (JAAS `Krb5LoginModule`, acceptor only: the server never asks the KDC for anything).
    /// `require` as for [`Self::sasl_digest`]. `kdc` must outlive the servers.
    #[must_use]
    pub fn sasl_kerberos(mut self, kdc: &crate::kerberos::Kdc, require: bool) -> Self {
        self.sasl = Some(ServerSasl::Kerberos {
            krb5_conf: kdc.krb5_conf(),
            keytab: kdc.server_keytab(),
            principal: crate::kerberos::SERVER_PRINCIPAL.to_owned(),
            require,
        });
        self
    }

    /// Sets the readiness timeout used by start and restart.
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = Some(timeout);
        self
    }
}

// ---------------------------------------------------------------------------
// Four-letter words and modes
// ---------------------------------------------------------------------------

/// The role a server reports in the `Mode:` line of `srvr`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// `Mode: standalone`.
    Standalone,
    /// `Mode: leader`.
    Leader,
    /// `Mode: follower`.
    Follower,
    /// `Mode: observer`.
    Observer,
    /// `Mode: read-only` (partitioned node with read-only mode enabled).
    ReadOnly,
    /// Any other value, verbatim.
    Other(String),
}

impl Mode {
    fn parse(value: &str) -> Self {
        match value.trim() {
            "standalone" => Self::Standalone,
            "leader" => Self::Leader,
            "follower" => Self::Follower,
            "observer" => Self::Observer,
            "read-only" => Self::ReadOnly,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Whether this is a quorum member in a working quorum (leader or follower).
    pub fn is_quorum_member(&self) -> bool {
        matches!(self, Self::Leader | Self::Follower)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Standalone => "standalone",
            Self::Leader => "leader",
            Self::Follower => "follower",
            Self::Observer => "observer",
            Self::ReadOnly => "read-only",
            Self::Other(s) => s,
        })
    }
}

/// Sends the four-letter word `cmd` (e.g. `"ruok"`, `"srvr"`, `"mntr"`) to
/// the ZooKeeper server at `addr` and returns its whole response.
///
/// Each address `addr` resolves to is tried in turn with a 2 s connect
/// timeout; reads and writes time out after 2 s, and the response is read
/// until the server closes the connection (at most 1 MiB). The command
/// must be enabled by the server's `4lw.commands.whitelist` (the harness
/// enables all). `cmd` must be exactly four ASCII letters, otherwise
/// `InvalidInput` is returned. A non-UTF-8 response is decoded lossily.
pub fn four_letter_word<A: ToSocketAddrs>(addr: A, cmd: &str) -> io::Result<String> {
    if cmd.len() != 4 || !cmd.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a four-letter word: {cmd:?}"),
        ));
    }
    let mut last_err = None;
    for sa in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&sa, FLW_IO_TIMEOUT) {
            Ok(stream) => return exchange_flw(stream, cmd),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing")
    }))
}

fn exchange_flw(mut stream: TcpStream, cmd: &str) -> io::Result<String> {
    stream.set_read_timeout(Some(FLW_IO_TIMEOUT))?;
    stream.set_write_timeout(Some(FLW_IO_TIMEOUT))?;
    stream.write_all(cmd.as_bytes())?;
    let mut buf = Vec::new();
    stream.take(FLW_MAX_RESPONSE).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Asks the server at `addr` for its role with `srvr`.
///
/// Returns `Ok(None)` when the server answers but is not serving requests
/// (e.g. a quorum node during leader election), `Ok(Some(mode))` when it
/// reports a `Mode:` line, and the I/O error when it cannot be reached.
pub fn server_mode<A: ToSocketAddrs>(addr: A) -> io::Result<Option<Mode>> {
    let response = four_letter_word(addr, "srvr")?;
    Ok(response
        .lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(Mode::parse))
}

// ---------------------------------------------------------------------------
// Runtime discovery
// ---------------------------------------------------------------------------

/// The programs and classpath used to launch servers.
#[derive(Debug, Clone)]
struct Runtime {
    bash: PathBuf,
    java: PathBuf,
    classpath: OsString,
}

fn resolve_java() -> Result<PathBuf, ServerError> {
    crate::java::java_binary().map_err(|e| ServerError::JavaNotFound(e.to_string()))
}

/// The classpath used when `ZKWIRE_ZK_CLASSPATH` is not set: the jars of
/// the Debian `zookeeper` package in [`DEFAULT_JAR_DIR`].
///
/// Required (an error naming the missing files otherwise): `zookeeper.jar`,
/// `zookeeper-jute.jar`, `slf4j-api.jar`, `metrics-core.jar`,
/// `snappy-java.jar`. Added when present: `slf4j-simple.jar` (without it
/// the server logs nothing), `commons-io.jar` and the Netty jars (only
/// needed for the Netty connection factory / TLS).
///
/// # Errors
///
/// [`ServerError::ZooKeeperNotFound`] when a required jar is missing.
pub fn default_classpath() -> Result<OsString, ServerError> {
    crate::java::jar_classpath(REQUIRED_JARS, OPTIONAL_JARS)
        .map_err(|missing| ServerError::ZooKeeperNotFound(format!("missing {missing}")))
}

fn resolve_classpath() -> Result<OsString, ServerError> {
    match env::var_os(CLASSPATH_ENV).filter(|v| !v.is_empty()) {
        Some(cp) => Ok(cp),
        None => default_classpath(),
    }
}

fn resolve_runtime() -> Result<Runtime, ServerError> {
    let bash = crate::java::find_on_path(std::ffi::OsStr::new("bash"))
        .or_else(|| Some(PathBuf::from("/bin/bash")).filter(|p| p.is_file()))
        .ok_or_else(|| ServerError::BashNotFound("no `bash` on PATH or at /bin/bash".to_owned()))?;
    let java = resolve_java()?;
    let classpath = resolve_classpath()?;
    Ok(Runtime {
        bash,
        java,
        classpath,
    })
}

// ---------------------------------------------------------------------------
// Ports and directories
// ---------------------------------------------------------------------------

/// Ports already handed out by this process; never handed out twice.
static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Picks `n` distinct free loopback ports (bind `127.0.0.1:0`, read the
/// port, release), none of which this process handed out before.
fn pick_ports(n: usize) -> Result<Vec<u16>, ServerError> {
    let mut handed_out = lock(&HANDED_OUT);
    let mut listeners = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    let mut attempts = 0;
    while ports.len() < n {
        attempts += 1;
        if attempts > n * 20 + 100 {
            return Err(ServerError::io(
                "picking free loopback ports",
                io::Error::new(io::ErrorKind::AddrInUse, "no fresh port found"),
            ));
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| ServerError::io("binding 127.0.0.1:0 to pick a port", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| ServerError::io("reading a picked port", e))?
            .port();
        // Keep the listener open while picking so the kernel cannot hand
        // the same port out twice within this batch.
        if !handed_out.contains(&port) {
            ports.push(port);
            handed_out.push(port);
        }
        listeners.push(listener);
    }
    drop(listeners);
    Ok(ports)
}

/// Puts [`ServerConfig::listen_port`] (plus the node's index) in the client-facing slot of
/// each node's ports: `ports` holds `per_node` ports per node, the plaintext client port
/// first and the TLS port at `tls_slot` (when TLS is on).
fn apply_listen_port(
    config: &ServerConfig,
    ports: &mut [u16],
    per_node: usize,
    tls_slot: usize,
) -> Result<(), ServerError> {
    let Some(base) = config.listen_port else {
        return Ok(());
    };
    // Standalone: [client, secure]; ensemble: [client, quorum, election, secure].
    let slot = if config.tls.is_some() { tls_slot } else { 0 };
    for (i, node_ports) in ports.chunks_mut(per_node).enumerate() {
        let port = u16::try_from(i)
            .ok()
            .and_then(|i| base.checked_add(i))
            .ok_or_else(|| {
                ServerError::io(
                    "choosing the listen ports",
                    io::Error::new(io::ErrorKind::InvalidInput, "ports run past 65535"),
                )
            })?;
        node_ports[slot] = port;
    }
    Ok(())
}

static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_dir(tag: &str) -> Result<PathBuf, ServerError> {
    let base = env::temp_dir();
    let mut last = None;
    for _ in 0..16 {
        let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = base.join(format!("zkwire-{tag}-{}-{n}-{nanos}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(ServerError::io(format!("creating {}", dir.display()), e));
            }
        }
    }
    Err(ServerError::io(
        format!("creating a unique directory in {}", base.display()),
        last.unwrap_or_else(|| io::Error::other("no attempt made")),
    ))
}

fn keep_logs() -> bool {
    env::var_os(KEEP_LOGS_ENV).is_some_and(|v| v == "1")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Returns the last `lines` lines (at most 16 KiB) of the file at `path`,
/// or a note saying why it could not be read.
fn tail_of(path: &Path, lines: usize) -> String {
    const MAX: u64 = 16 * 1024;
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return format!("<cannot open {}: {e}>", path.display()),
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = Vec::new();
    let skip = len.saturating_sub(MAX);
    if skip > 0 {
        let mut sink = Vec::new();
        if let Err(e) = (&mut file).take(skip).read_to_end(&mut sink) {
            return format!("<cannot read {}: {e}>", path.display());
        }
    }
    if let Err(e) = file.take(MAX).read_to_end(&mut buf) {
        return format!("<cannot read {}: {e}>", path.display());
    }
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------
// One server process (standalone server or ensemble node)
// ---------------------------------------------------------------------------

/// A running watchdog + JVM pair.
#[derive(Debug)]
struct Proc {
    watchdog: Child,
    stdin: Option<ChildStdin>,
    java_pid: Option<u32>,
}

/// Where a node's process stands after a status check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    Running,
    Exited,
}

#[derive(Debug)]
struct Node {
    /// Human-readable name used in errors.
    label: String,
    dir: PathBuf,
    cfg_path: PathBuf,
    log_path: PathBuf,
    pid_path: PathBuf,
    client_port: u16,
    secure_port: Option<u16>,
    main_class: &'static str,
    jvm_props: Vec<(String, String)>,
    runtime: Runtime,
    keep: bool,
    proc: Mutex<Option<Proc>>,
}

impl Node {
    /// Creates the directory and writes `zoo.cfg`, logging config and
    /// (for ensemble nodes) `myid`. Does not start anything.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
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
            cfg_path: dir.join("zoo.cfg"),
            log_path: dir.join("server.log"),
            pid_path: dir.join("java.pid"),
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

    fn write_files(
        &self,
        myid: Option<usize>,
        quorum_lines: &str,
        config: &ServerConfig,
    ) -> Result<(), ServerError> {
        let data = self.dir.join("data");
        fs::create_dir(&data)
            .map_err(|e| ServerError::io(format!("creating {}", data.display()), e))?;
        if let Some(id) = myid {
            write_file(&data.join("myid"), &format!("{id}\n"))?;
        }
        let mut cfg = format!(
            "# generated by zkwire-testing\n\
             tickTime={}\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress=127.0.0.1\n\
             minSessionTimeout={}\n\
             maxSessionTimeout={}\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=*\n\
             maxClientCnxns=0\n",
            config.tick_time_ms,
            data.display(),
            self.client_port,
            config.min_session_timeout_ms,
            config.max_session_timeout_ms,
        );
        cfg.push_str(quorum_lines);
        self.write_security(&mut cfg, config)?;
        for (k, v) in &config.extra {
            cfg.push_str(&format!("{k}={v}\n"));
        }
        write_file(&self.cfg_path, &cfg)?;
        // slf4j-simple (the default binding) reads this from the classpath;
        // the server directory is first on the classpath.
        write_file(
            &self.dir.join("simplelogger.properties"),
            "org.slf4j.simpleLogger.logFile=System.err\n\
             org.slf4j.simpleLogger.defaultLogLevel=info\n\
             org.slf4j.simpleLogger.showDateTime=true\n\
             org.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS\n\
             org.slf4j.simpleLogger.showThreadName=true\n\
             org.slf4j.simpleLogger.showShortLogName=true\n",
        )?;
        // For a custom classpath using log4j 1.x.
        write_file(
            &self.dir.join("log4j.properties"),
            "log4j.rootLogger=INFO, CONSOLE\n\
             log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n\
             log4j.appender.CONSOLE.Target=System.err\n\
             log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n\
             log4j.appender.CONSOLE.layout.ConversionPattern=%d{HH:mm:ss,SSS} [%t] %-5p %c{1} - %m%n\n",
        )?;
        // For a custom classpath using logback (upstream ZooKeeper tarballs).
        write_file(
            &self.dir.join("logback.xml"),
            "<configuration>\n\
             \x20 <appender name=\"CONSOLE\" class=\"ch.qos.logback.core.ConsoleAppender\">\n\
             \x20   <target>System.err</target>\n\
             \x20   <encoder><pattern>%d{HH:mm:ss.SSS} [%thread] %-5level %logger{0} - %msg%n</pattern></encoder>\n\
             \x20 </appender>\n\
             \x20 <root level=\"INFO\"><appender-ref ref=\"CONSOLE\"/></root>\n\
             </configuration>\n",
        )?;
        Ok(())
    }

    /// The TLS and SASL lines of `zoo.cfg` (ZooKeeper turns them into `zookeeper.*` system
    /// properties), and the JAAS file.
    fn write_security(&self, cfg: &mut String, config: &ServerConfig) -> Result<(), ServerError> {
        if let (Some(tls), Some(port)) = (&config.tls, self.secure_port) {
            let kind = match tls.store_type {
                StoreType::Pem => "PEM",
                StoreType::Pkcs12 => "PKCS12",
            };
            cfg.push_str(&format!(
                "secureClientPort={port}\n\
                 secureClientPortAddress=127.0.0.1\n\
                 serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                 ssl.keyStore.location={}\n\
                 ssl.keyStore.type={kind}\n\
                 ssl.trustStore.location={}\n\
                 ssl.trustStore.type={kind}\n\
                 ssl.clientAuth={}\n\
                 authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n",
                tls.key_store.display(),
                tls.trust_store.display(),
                tls.client_auth.as_config(),
            ));
            if tls.store_type == StoreType::Pkcs12 {
                cfg.push_str(&format!(
                    "ssl.keyStore.password={STORE_PASSWORD}\nssl.trustStore.password={STORE_PASSWORD}\n"
                ));
            }
        }
        let (login_module, require) = match &config.sasl {
            None => return Ok(()),
            Some(ServerSasl::Digest { users, require }) => {
                let entries: String = users
                    .iter()
                    .map(|(u, p)| format!("\n    user_{u}=\"{p}\""))
                    .collect();
                let module =
                    format!("org.apache.zookeeper.server.auth.DigestLoginModule required{entries}");
                (module, *require)
            }
            Some(ServerSasl::Kerberos {
                keytab,
                principal,
                require,
                ..
            }) => {
                let module = format!(
                    "com.sun.security.auth.module.Krb5LoginModule required\n    useKeyTab=true\n    \
                     keyTab=\"{}\"\n    storeKey=true\n    useTicketCache=false\n    \
                     isInitiator=false\n    principal=\"{principal}\"",
                    keytab.display()
                );
                (module, *require)
            }
        };
        write_file(
            &self.dir.join("jaas.conf"),
            &format!("Server {{\n  {login_module};\n}};\n"),
        )?;
        cfg.push_str(
            "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n",
        );
        if require {
            cfg.push_str("sessionRequireClientSASLAuth=true\n");
        }
        Ok(())
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// `localhost:<secure port>`: the name the test server certificate carries.
    fn secure_connect_string(&self) -> Option<String> {
        self.secure_port.map(|p| format!("localhost:{p}"))
    }

    fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn proc(&self) -> MutexGuard<'_, Option<Proc>> {
        lock(&self.proc)
    }

    /// Launches the watchdog + JVM. The caller must have made sure no
    /// previous process is running.
    fn spawn(&self, event: &str) -> Result<(), ServerError> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| ServerError::io(format!("opening {}", self.log_path.display()), e))?;
        // Marker line; failure to write it is harmless.
        let _ = writeln!(
            log,
            "===== zkwire-testing: {event} {} at unix time {} =====",
            self.label,
            unix_now()
        );
        let log_err = log
            .try_clone()
            .map_err(|e| ServerError::io("duplicating the log file handle", e))?;
        match fs::remove_file(&self.pid_path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ServerError::io(
                    format!("removing {}", self.pid_path.display()),
                    e,
                ));
            }
        }

        let mut classpath = OsString::from(self.dir.as_os_str());
        classpath.push(":");
        classpath.push(&self.runtime.classpath);

        let mut cmd = Command::new(&self.runtime.bash);
        cmd.arg("-c")
            .arg(WATCHDOG)
            .arg("zkwire-zk-watchdog")
            .arg(&self.dir)
            .arg(&self.pid_path)
            .arg(std::process::id().to_string())
            .arg(if self.keep { "1" } else { "0" })
            .arg(&self.runtime.java)
            .args(JVM_FLAGS)
            .arg(format!("-Dzookeeper.log.dir={}", self.dir.display()))
            .args(self.jvm_props.iter().map(|(k, v)| format!("-D{k}={v}")))
            .arg("-cp")
            .arg(classpath)
            .arg(self.main_class)
            .arg(&self.cfg_path)
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let mut watchdog = cmd.spawn().map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                ServerError::BashNotFound(format!("{}: {e}", self.runtime.bash.display()))
            } else {
                ServerError::io(format!("spawning {}", self.label), e)
            }
        })?;
        let stdin = watchdog.stdin.take();
        *self.proc() = Some(Proc {
            watchdog,
            stdin,
            java_pid: None,
        });
        Ok(())
    }

    /// Whether the watchdog (and so the JVM) is still running. Reaps it if not.
    fn liveness(&self) -> Liveness {
        let mut guard = self.proc();
        match guard.as_mut() {
            None => Liveness::Exited,
            Some(p) => match p.watchdog.try_wait() {
                Ok(None) => Liveness::Running,
                Ok(Some(_)) | Err(_) => Liveness::Exited,
            },
        }
    }

    fn java_pid(&self) -> Option<u32> {
        let mut guard = self.proc();
        let p = guard.as_mut()?;
        if p.java_pid.is_none() {
            // The watchdog writes the file with one `printf`; only trust a
            // complete line.
            if let Ok(text) = fs::read_to_string(&self.pid_path) {
                if let Some(line) = text.strip_suffix('\n') {
                    p.java_pid = line.trim().parse().ok();
                }
            }
        }
        p.java_pid
    }

    /// Sends `kill` or `term` to the watchdog and closes its stdin. Does
    /// not wait. Returns the process (if any) for [`Self::reap`].
    fn signal(&self, command: &str) -> Option<Proc> {
        // Cache the java pid for the fallback path before it is needed.
        let _ = self.java_pid();
        let mut p = self.proc().take()?;
        if let Some(mut stdin) = p.stdin.take() {
            // The watchdog may already be gone (EPIPE); that is fine.
            let _ = stdin.write_all(format!("{command}\n").as_bytes());
            let _ = stdin.flush();
        }
        Some(p)
    }

    /// Waits for the watchdog to exit (it exits only after reaping the
    /// JVM). After `timeout`, kills JVM and watchdog with SIGKILL directly.
    fn reap(&self, mut p: Proc, timeout: Duration) -> Result<(), ServerError> {
        let deadline = Instant::now() + timeout;
        loop {
            match p.watchdog.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                Ok(None) | Err(_) => break,
            }
        }
        // Fallback: the watchdog is stuck. Kill the JVM ourselves, then it.
        if let Some(pid) = p.java_pid {
            let _ = Command::new(&self.runtime.bash)
                .arg("-c")
                .arg("kill -KILL \"$1\" 2>/dev/null")
                .arg("zkwire-kill")
                .arg(pid.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = p.watchdog.kill();
        let _ = p.watchdog.wait();
        Err(ServerError::Startup {
            what: self.label.clone(),
            reason: format!(
                "did not exit within {timeout:?}; killed watchdog and JVM (pid {:?}) forcibly",
                p.java_pid
            ),
            log_path: self.log_path.clone(),
            log_tail: tail_of(&self.log_path, ERROR_LOG_LINES),
        })
    }

    /// SIGKILL the JVM and wait until it is gone. No-op when not running.
    fn kill(&self) -> Result<(), ServerError> {
        match self.signal("kill") {
            Some(p) => self.reap(p, KILL_WAIT),
            None => Ok(()),
        }
    }

    /// SIGTERM the JVM (SIGKILL after 5 s) and wait until it is gone.
    fn stop(&self) -> Result<(), ServerError> {
        match self.signal("term") {
            Some(p) => self.reap(p, TERM_WAIT),
            None => Ok(()),
        }
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
    fn probe(&self, accept: fn(&Mode) -> bool) -> Result<Mode, String> {
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
    fn wait_ready(
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

    fn log_mentions_bind_failure(&self) -> bool {
        fs::read_to_string(&self.log_path)
            .map(|s| s.contains("Address already in use"))
            .unwrap_or(false)
    }

    fn remove_dir(&self) {
        if self.keep {
            eprintln!(
                "zkwire-testing: kept {} in {}",
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

fn write_file(path: &Path, contents: &str) -> Result<(), ServerError> {
    fs::write(path, contents).map_err(|e| ServerError::io(format!("writing {}", path.display()), e))
}

/// Kills all `nodes` concurrently (one command each, then wait for all).
fn kill_all(nodes: &[Node]) {
    let procs: Vec<_> = nodes.iter().map(|n| n.signal("kill")).collect();
    for (node, p) in nodes.iter().zip(procs) {
        if let Some(p) = p {
            let _ = node.reap(p, KILL_WAIT);
        }
    }
}

// ---------------------------------------------------------------------------
// Standalone server
// ---------------------------------------------------------------------------

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// A standalone ZooKeeper server (`ZooKeeperServerMain`) on `127.0.0.1`.
///
/// Dropping it kills the JVM and removes its directory (see the
/// [module documentation](self) for what happens when `Drop` does not run).
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
        Err(e) => panic!("zkwire-testing: cannot start the shared ZooKeeper server: {e}"),
    })
}

// ---------------------------------------------------------------------------
// Ensemble
// ---------------------------------------------------------------------------

/// The ports of one ensemble node, as handed to the layout of
/// [`ZkEnsemble::start_with_layout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodePorts {
    /// `clientPort`.
    pub(crate) client: u16,
    /// The quorum (follower-to-leader) port the node binds.
    pub(crate) quorum: u16,
    /// The leader-election port the node binds.
    pub(crate) election: u16,
}

/// Makes each node's quorum lines from every node's ports (see
/// [`ZkEnsemble::start_with_layout`]).
pub(crate) type EnsembleLayout<'a> =
    dyn FnMut(&[NodePorts]) -> Result<Vec<String>, ServerError> + 'a;

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
    pub fn start_with(n: usize, config: ServerConfig) -> Result<Self, ServerError> {
        Self::start_with_layout(n, config, &mut |ports: &[NodePorts]| {
            let mut lines = String::from("initLimit=20\nsyncLimit=10\n");
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
    /// lines per node, in node order.
    pub(crate) fn start_with_layout(
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
            let per_node = if config.tls.is_some() { 4 } else { 3 };
            let mut ports = pick_ports(per_node * n)?;
            apply_listen_port(&config, &mut ports, per_node, 3)?;
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
                    &config,
                    &runtime,
                )?);
            }
            let ensemble = Self {
                nodes,
                config: config.clone(),
            };
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
    /// As [`ZkServer::kill`].
    pub fn kill(&mut self, i: usize) -> Result<(), ServerError> {
        self.node(i).kill()
    }

    /// Stops node `i` gracefully (`SIGTERM`, `SIGKILL` after 5 s) and
    /// returns once its process is gone. No-op when it is not running.
    ///
    /// # Errors
    ///
    /// As [`ZkServer::stop`].
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn mode_parsing() {
        assert_eq!(Mode::parse(" leader"), Mode::Leader);
        assert_eq!(Mode::parse("follower\r"), Mode::Follower);
        assert_eq!(Mode::parse("read-only"), Mode::ReadOnly);
        assert_eq!(Mode::parse("weird"), Mode::Other("weird".to_owned()));
        assert!(Mode::Leader.is_quorum_member() && !Mode::Standalone.is_quorum_member());
    }

    #[test]
    fn picked_ports_are_distinct_and_never_reused() {
        let a = pick_ports(30).unwrap();
        let b = pick_ports(30).unwrap();
        let mut all: Vec<u16> = a.iter().chain(&b).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 60);
    }

    #[test]
    fn tail_of_returns_last_lines() {
        let dir = unique_dir("unit").unwrap();
        let file = dir.join("log");
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        fs::write(&file, text).unwrap();
        assert_eq!(tail_of(&file, 2), "line 98\nline 99");
        assert!(tail_of(&dir.join("missing"), 2).starts_with("<cannot open"));
        fs::remove_dir_all(dir).unwrap();
    }

    /// A node whose client port is taken exits promptly, and the log shows
    /// the bind failure the start retry looks for.
    #[test]
    fn occupied_port_is_detected() {
        let runtime = resolve_runtime().unwrap_or_else(|e| panic!("{e}"));
        let blocker = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = blocker.local_addr().unwrap().port();
        let node = Node::prepare(
            "unit",
            "unit-test server".to_owned(),
            STANDALONE_MAIN,
            (port, None),
            None,
            "",
            &ServerConfig::default(),
            &runtime,
        )
        .unwrap();
        node.spawn("starting").unwrap();
        let err = node
            .wait_ready(
                |m| *m == Mode::Standalone,
                Instant::now() + Duration::from_secs(20),
            )
            .unwrap_err();
        assert!(err.to_string().contains("exited while starting"), "{err}");
        assert!(node.log_mentions_bind_failure(), "{err}");
        let dir = node.dir.clone();
        drop(node);
        assert!(keep_logs() || !dir.exists());
    }
}
