//! Finding what launches a server: `bash` (the watchdog), `java` and the ZooKeeper classpath.

use std::env;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use super::{ServerError, CLASSPATH_ENV};
use crate::java::{find_on_path, jar_classpath, java_binary};

/// Jars (in [`DEFAULT_JAR_DIR`](super::DEFAULT_JAR_DIR)) without which a ZooKeeper 3.8 server with
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

/// The programs and classpath used to launch servers.
#[derive(Debug, Clone)]
pub(super) struct Runtime {
    pub(super) bash: PathBuf,
    pub(super) java: PathBuf,
    pub(super) classpath: OsString,
}

fn resolve_java() -> Result<PathBuf, ServerError> {
    java_binary().map_err(|e| ServerError::JavaNotFound(e.to_string()))
}

/// The classpath used when `ZKWIRE_ZK_CLASSPATH` is not set: the jars of
/// the Debian `zookeeper` package in [`DEFAULT_JAR_DIR`](super::DEFAULT_JAR_DIR).
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
    jar_classpath(REQUIRED_JARS, OPTIONAL_JARS)
        .map_err(|missing| ServerError::ZooKeeperNotFound(format!("missing {missing}")))
}

fn resolve_classpath() -> Result<OsString, ServerError> {
    match env::var_os(CLASSPATH_ENV).filter(|v| !v.is_empty()) {
        Some(cp) => Ok(cp),
        None => default_classpath(),
    }
}

pub(super) fn resolve_runtime() -> Result<Runtime, ServerError> {
    let bash = find_on_path(OsStr::new("bash"))
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
