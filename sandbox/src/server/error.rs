//! [`ServerError`]: why a server or ensemble could not be started, stopped or restarted, in
//! words a human can act on (what to install, the server's log).

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// Installation hint used when the ZooKeeper jars cannot be found.
const ZK_INSTALL_HINT: &str = "ZooKeeper not found: install it with `apt-get install -y zookeeper` (Debian) or set ZKWIRE_ZK_CLASSPATH";
/// Installation hint used when no java binary can be found.
const JAVA_INSTALL_HINT: &str = "java not found: install a Java runtime with `apt-get install -y default-jre-headless` (Debian) or set JAVA to the java binary";
/// Installation hint used when bash (the watchdog) cannot be found.
const BASH_INSTALL_HINT: &str =
    "bash not found: the ZooKeeper watchdog needs bash; install it with `apt-get install -y bash`";

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
    pub(super) fn io(context: impl Into<String>, source: io::Error) -> Self {
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
