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

mod config;
mod ensemble;
mod error;
mod files;
mod flw;
mod node;
mod ports;
mod process;
mod runtime;
mod standalone;
mod watchdog;
mod zoo_cfg;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use self::config::{ServerConfig, ServerSasl, ServerTls};
pub use self::ensemble::{EnsembleLayout, NodePorts, ZkEnsemble};
pub use self::error::ServerError;
pub(crate) use self::files::keep_logs;
pub use self::flw::{four_letter_word, server_mode, Mode};
pub use self::runtime::default_classpath;
pub use self::standalone::{shared_server, ZkServer};
pub(crate) use self::watchdog::WATCHDOG;
pub use crate::java::{DEFAULT_JAR_DIR, JAVA_ENV};

/// Environment variable holding a complete classpath that replaces
/// [`default_classpath`].
pub const CLASSPATH_ENV: &str = "ZKWIRE_ZK_CLASSPATH";
/// Environment variable that, when set to `1`, keeps every server's
/// temporary directory (config, data, logs) after the server is gone.
pub const KEEP_LOGS_ENV: &str = "ZKWIRE_KEEP_LOGS";
/// Default readiness timeout of a standalone server.
pub const STANDALONE_START_TIMEOUT: Duration = Duration::from_secs(20);
/// Default readiness timeout of an ensemble (all nodes serving, one leader).
pub const ENSEMBLE_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The `tickTime` of [`ServerConfig::default`]: a client's lease must assume it (zkwire's
/// `ClientBuilder::with_server_tick`), not ZooKeeper's default of 2 s.
pub const DEFAULT_TICK: Duration = Duration::from_millis(DEFAULT_TICK_MS as u64);
/// [`DEFAULT_TICK`] in milliseconds, as `zoo.cfg` has it.
pub const DEFAULT_TICK_MS: u32 = 200;
/// The `initLimit` of an ensemble's servers, in ticks, unless the config sets its own.
pub const ENSEMBLE_INIT_LIMIT: u32 = 20;
/// The `syncLimit` of an ensemble's servers, in ticks, unless the config sets its own.
pub const ENSEMBLE_SYNC_LIMIT: u32 = 10;

/// How many times [`ZkServer::start_with`] / [`ZkEnsemble::start_with`] try
/// again with fresh ports when a port turned out to be taken.
const PORT_RETRIES: usize = 3;
/// Number of log lines included in startup errors.
const ERROR_LOG_LINES: usize = 60;
