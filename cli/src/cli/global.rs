//! The options every command accepts: output, logging, and how to reach and authenticate to
//! ZooKeeper.

use std::time::Duration;

use clap::Args;

use super::durations::duration;
use crate::connect::SERVER_TICK_ENV;

/// The heading of the options that say how to reach and authenticate to ZooKeeper: grouped
/// apart, so that a verb's own options come first in its help.
const CONNECTION: &str = "Connection";

/// Options every command accepts, before or after it (but `-v`, which goes before it: the
/// verbs' own `-v` is `--version`).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct GlobalArgs {
    /// One JSON document per result, for scripts; errors as JSON on stderr
    // After a verb's own options, which are what its help is read for.
    #[arg(long, global = true, display_order = 100)]
    pub(crate) json: bool,
    /// The library's log on stderr: -v info, -vv debug ($RUST_LOG, when set, decides)
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Connect string (default: $ZOOKEEPER, else 127.0.0.1:2181)
    #[arg(long, global = true, value_name = "HOSTS[/CHROOT]", help_heading = CONNECTION)]
    pub(crate) server: Option<String>,
    /// Session timeout, also the limit for connecting [default: 10 ticks, at least 10s]
    #[arg(long, global = true, value_name = "D", value_parser = duration,
          allow_hyphen_values = true, help_heading = CONNECTION)]
    pub(crate) session_timeout: Option<Duration>,
    /// The ensemble's tickTime, which holds' leases wait on [default: 2s] ($ZKW_SERVER_TICK)
    #[arg(
        long,
        global = true,
        value_name = "D",
        value_parser = duration,
        env = SERVER_TICK_ENV,
        hide_env = true,
        help_heading = CONNECTION
    )]
    pub(crate) server_tick: Option<Duration>,
    /// Authenticate, e.g. digest:alice:secret (repeatable)
    #[arg(long, global = true, value_name = "SCHEME:CREDENTIALS", help_heading = CONNECTION)]
    pub(crate) auth: Vec<String>,
    /// Speak TLS, trusting the CA certificates in FILE (PEM; $ZKW_TLS_CA)
    #[arg(long, global = true, value_name = "FILE", help_heading = CONNECTION)]
    pub(crate) tls_ca: Option<String>,
    /// Client certificate (PEM) for mutual TLS ($ZKW_TLS_CERT)
    #[arg(long, global = true, value_name = "FILE", help_heading = CONNECTION)]
    pub(crate) tls_cert: Option<String>,
    /// Client key (PEM) for mutual TLS ($ZKW_TLS_KEY)
    #[arg(long, global = true, value_name = "FILE", help_heading = CONNECTION)]
    pub(crate) tls_key: Option<String>,
    /// SASL: `digest:USER[:PASSWORD]` or `kerberos[:PRINCIPAL]`.
    #[arg(
        long,
        global = true,
        value_name = "MECHANISM",
        help = "SASL digest:USER[:PASSWORD] or kerberos[:PRINCIPAL] ($ZKW_SASL)",
        help_heading = CONNECTION
    )]
    pub(crate) sasl: Option<String>,
}

/// The ids of the global options that say how to connect.
pub(crate) const CONNECTION_ARGS: [&str; 8] = [
    "server",
    "session_timeout",
    "server_tick",
    "auth",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "sasl",
];
