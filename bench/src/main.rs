//! `zkwire-bench`: zkwire side by side with kezhuw's `zookeeper-client` and a raw socket,
//! against one ZooKeeper server, in one run (issue 8).
//!
//! ```text
//! cargo run --release -p zkwire-bench -- [--json] [--server HOST:PORT] [--only W1,W2]
//!     [--clients zkwire,kezhuw,raw] [--depths 1,16,256] [--shapes tasks,one-task]
//!     [--releases await,drop]
//!     [--duration SECS] [--warmup SECS] [--rounds N] [--sessions N]
//! ```
//!
//! `--help` lists every flag (parsed with clap, see `args.rs`); a bad command line exits
//! with code 1.
//!
//! Without `--server` a standalone server is started through `zkwire-testing` (ZooKeeper
//! and a JDK must be installed: `make deps`). Every workload is bounded in time; the
//! clients of one cell run one after another, round after round, so that load from other
//! processes falls on all of them alike. The exclusion check of `lock-contention` makes the
//! run exit non-zero on a violation (exit code 2). With `--json`, stdout holds only the JSON
//! lines (one per workload, client and param) and the tables go to stderr.
//!
//! `zkwire-bench chart FILE.jsonl [DIR]` draws the SVG charts of a `--json` run again. The
//! lock soak (mutual exclusion under faults) is not a benchmark: it is the `zkwire-soak`
//! binary (`soak/`).
#![forbid(unsafe_code)]

mod args;
mod chart;
mod codec;
mod locks;
mod measure;
mod pipeline;
mod raw;
mod relay;
mod relay_lock;
mod report;
mod runner;
mod server;
mod sessions;
mod shared_client;
mod workloads;
mod writes;

use std::alloc::System;
use std::fmt;
use std::process::ExitCode;

use clap::Parser as _;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

use crate::args::{Args, Command};
use crate::measure::Measured;

/// Counts every allocation in the process (both clients, the runtime, the harness).
#[global_allocator]
pub(crate) static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The clients compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Zkwire,
    Kezhuw,
    Raw,
    /// The raw recipes behind a connection task: the floor of a client with a driver task.
    Relay,
}

impl Who {
    pub(crate) const ALL: [Self; 4] = [Self::Zkwire, Self::Kezhuw, Self::Raw, Self::Relay];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Zkwire => "zkwire",
            Self::Kezhuw => "kezhuw",
            Self::Raw => "raw",
            Self::Relay => "relay",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// Any failure: a message.
#[derive(Debug)]
pub(crate) struct BenchError(String);

impl BenchError {
    pub(crate) fn msg(m: impl Into<String>) -> Self {
        Self(m.into())
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

macro_rules! from_error {
    ($($t:ty => $what:literal,)*) => {$(
        impl From<$t> for BenchError {
            fn from(e: $t) -> Self {
                Self(format!(concat!($what, ": {}"), e))
            }
        }
    )*};
}

from_error! {
    std::io::Error => "io",
    zkwire::Error => "zkwire",
    zookeeper_client::Error => "kezhuw",
    zkwire_recipes::LockError => "zkwire lock",
    zkwire_testing::server::ServerError => "server",
    tokio::task::JoinError => "task",
}

/// Settings of one run.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// `host:port` of the server.
    pub(crate) addr: String,
    /// The znode all the run's nodes live under.
    pub(crate) root: String,
    /// What is measured, and for how long (as the command line gave it).
    pub(crate) measure: args::Measure,
    /// Whether to run 2 s of reads and writes before measuring (the server's JIT).
    pub(crate) warm_server: bool,
    /// Clients connect over TLS, trusting this CA (PEM), when set.
    pub(crate) tls_ca: Option<String>,
}

impl Ctx {
    /// A zkwire client of this run (over TLS when the run is).
    pub(crate) async fn zkwire(&self) -> Result<zkwire::Client, BenchError> {
        let builder = zkwire_testing::support::builder();
        let builder = match &self.tls_ca {
            Some(pem) => builder.with_tls(
                zkwire::TlsConfig::new()
                    .with_ca_pem(pem.as_bytes())
                    .map_err(|e| BenchError::msg(e.to_string()))?,
            ),
            None => builder,
        };
        Ok(builder.connect(&self.addr).await?)
    }

    /// A kezhuw client of this run (over TLS when the run is, with feature `kezhuw-tls`).
    pub(crate) async fn kezhuw(&self) -> Result<zookeeper_client::Client, BenchError> {
        match &self.tls_ca {
            None => Ok(zookeeper_client::Client::connect(&self.addr).await?),
            #[cfg(feature = "kezhuw-tls")]
            Some(pem) => {
                let options = zookeeper_client::TlsOptions::new().with_pem_ca(pem)?;
                let connector = zookeeper_client::Client::connector().with_tls(options);
                Ok(connector.secure_connect(&self.addr).await?)
            }
            #[cfg(not(feature = "kezhuw-tls"))]
            Some(_) => Err(BenchError::msg(
                "kezhuw over TLS needs `--features kezhuw-tls`",
            )),
        }
    }

    pub(crate) fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.root)
    }

    /// `lock-cycle`'s release styles, as whether each drops its guard.
    pub(crate) fn drop_releases(&self) -> impl Iterator<Item = bool> + '_ {
        self.measure
            .releases
            .iter()
            .map(|&r| r == locks::Release::Drop)
    }
}

/// The size of the znode read by `pipeline` and written by `write-latency`.
pub(crate) const PAYLOAD: usize = 100;

/// The workloads, in run order (sessions last: its 1,000 sessions per client stress the
/// server the most).
const WORKLOADS: [&str; 7] = [
    "codec",
    "pipeline",
    "write-latency",
    "lock-cycle",
    "lock-contention",
    "lock-shared-client",
    "sessions",
];

/// One result row: (workload, client, param) and what was measured.
pub(crate) struct Row {
    pub(crate) workload: &'static str,
    pub(crate) who: Who,
    pub(crate) param: String,
    pub(crate) m: Measured,
}

/// Rows in first-seen order, merged across rounds.
#[derive(Default)]
pub(crate) struct Results {
    pub(crate) rows: Vec<Row>,
}

impl Results {
    pub(crate) fn add(
        &mut self,
        workload: &'static str,
        who: Who,
        param: impl Into<String>,
        m: Measured,
    ) {
        let param = param.into();
        match self
            .rows
            .iter_mut()
            .find(|r| r.workload == workload && r.who == who && r.param == param)
        {
            Some(row) => row.m.merge(&m),
            None => self.rows.push(Row {
                workload,
                who,
                param,
                m,
            }),
        }
    }

    pub(crate) fn get(&self, workload: &str, who: Who, param: &str) -> Option<&Measured> {
        self.rows
            .iter()
            .find(|r| r.workload == workload && r.who == who && r.param == param)
            .map(|r| &r.m)
    }
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // `--help` is not a failure (0); a bad command line is (1, where clap's own exit
            // says 2), but not a failed check (2).
            let _ = e.print();
            return ExitCode::from(u8::from(e.use_stderr()));
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("zkwire-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs everything; `Ok(false)` when a check failed (mutual exclusion).
fn run(args: &Args) -> Result<bool, BenchError> {
    match &args.command {
        Some(Command::Chart { file, dir }) => return chart::main(file, dir),
        Some(Command::Soak { .. }) => {
            return Err(BenchError::msg(
                "the soak is a binary of its own now: cargo run --release -p zkwire-soak -- \
                 [--acquisitions N] ... (see --help)",
            ))
        }
        None => {}
    }
    #[cfg(feature = "kezhuw-tls")]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.worker_threads {
        builder.worker_threads(threads);
    }
    let runtime = builder.enable_all().build()?;
    if let Some(who) = args.child_sessions {
        let addr = args
            .server
            .clone()
            .ok_or_else(|| BenchError::msg("--child-sessions needs --server"))?;
        return runtime
            .block_on(sessions::child(who, &addr, args.measure.sessions))
            .map(|()| true);
    }
    let wanted = |w: &str| args.only.is_empty() || args.only.iter().any(|o| o == w);
    let mut results = Results::default();

    if wanted("codec") {
        eprintln!("== codec");
        codec::run(&mut results, &args.measure.clients);
    }

    let needs_server = WORKLOADS.iter().any(|w| *w != "codec" && wanted(w));
    // Keeps a server (or an ensemble) we started alive for the whole run.
    let mut started = server::Started::default();
    let ok = if needs_server {
        server::run(&runtime, args, &wanted, &mut results, &mut started)?
    } else {
        true
    };

    if let Some(dir) = &args.svg {
        // Drawn from the JSON lines themselves, as `zkwire-bench chart` draws them.
        let points = chart::parse_lines(&report::json_lines(&results))?;
        for written in chart::write_all(&points, dir)? {
            eprintln!("wrote {}", written.display());
        }
    }
    report::print(&results, args.json)?;
    if !ok {
        eprintln!("zkwire-bench: MUTUAL EXCLUSION VIOLATED in lock-contention (see above)");
    }
    Ok(ok)
}
