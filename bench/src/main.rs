//! `zkwire-bench`: zkwire side by side with kezhuw's `zookeeper-client` and a raw socket,
//! against one ZooKeeper server, in one run (issue 8).
//!
//! ```text
//! cargo run --release -p zkwire-bench -- [--json] [--server HOST:PORT] [--only W1,W2]
//!     [--clients zkwire,kezhuw,raw] [--depths 1,16,256] [--duration SECS] [--warmup SECS]
//!     [--rounds N] [--sessions N]
//! ```
//!
//! Without `--server` a standalone server is started through `zkwire-testing` (ZooKeeper
//! and a JDK must be installed: `make deps`). Every workload is bounded in time; the
//! clients of one cell run one after another, round after round, so that load from other
//! processes falls on all of them alike. The exclusion check of `lock-contention` makes the
//! run exit non-zero on a violation (exit code 2). With `--json`, stdout holds only the JSON
//! lines (one per workload, client and param) and the tables go to stderr.
//!
//! `zkwire-bench soak [--acquisitions N] [--contenders N] [--nodes 3|5] [--seed N]
//! [--max-minutes M]` is a separate subcommand: contenders on a 3-node (or 5-node) ensemble
//! whose server-to-server links run through relays, each contender through fault proxies of
//! its own, under seeded client-side faults, partitions between the servers and leader
//! kills, with every critical section checked for overlap (see `soak.rs`; exit code 2 on a
//! violation).
#![forbid(unsafe_code)]

mod chart;
mod codec;
mod locks;
mod measure;
mod pipeline;
mod raw;
mod report;
mod runner;
mod sessions;
mod soak;
mod writes;

use std::alloc::System;
use std::fmt;
use std::time::Duration;

use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

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
}

impl Who {
    pub(crate) const ALL: [Self; 3] = [Self::Zkwire, Self::Kezhuw, Self::Raw];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Zkwire => "zkwire",
            Self::Kezhuw => "kezhuw",
            Self::Raw => "raw",
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
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    pub(crate) rounds: usize,
    pub(crate) sessions: usize,
    pub(crate) clients: Vec<Who>,
    /// Requests in flight in `pipeline`.
    pub(crate) depths: Vec<usize>,
    /// Whether to run 2 s of reads and writes before measuring (the server's JIT).
    pub(crate) warm_server: bool,
    /// Raw contenders skip waiting for the lock (to show that the exclusion check fires).
    pub(crate) break_exclusion: bool,
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

struct Args {
    json: bool,
    server: Option<String>,
    only: Vec<String>,
    warmup: Duration,
    duration: Duration,
    rounds: usize,
    sessions: usize,
    clients: Vec<Who>,
    depths: Vec<usize>,
    skip_server_warmup: bool,
    break_exclusion: bool,
    child_sessions: Option<Who>,
    tls: bool,
    /// Writes one SVG chart per workload here at the end.
    svg: Option<std::path::PathBuf>,
    /// The server fsyncs its transaction log (`zookeeper.forceSync=yes`).
    force_sync: bool,
    /// Runs against node 1 of an ensemble of this many servers started for the run.
    ensemble: Option<usize>,
}

const USAGE: &str = "usage: zkwire-bench [--json] [--server HOST:PORT] [--only W1,W2,...] \
[--clients zkwire,kezhuw,raw] [--depths 1,16,256] [--duration SECS] [--warmup SECS] [--rounds N] [--sessions N]
[--skip-server-warmup] [--break-exclusion] [--tls] [--svg DIR] [--force-sync] [--ensemble N]
workloads: codec, pipeline, write-latency, lock-cycle, lock-contention, lock-shared-client,
           sessions
       zkwire-bench soak --help   (mutual exclusion under faults)
       zkwire-bench chart FILE.jsonl [DIR]   (the SVG charts of a --json run)";

fn parse_args() -> Result<Args, BenchError> {
    let mut args = Args {
        json: false,
        server: None,
        only: Vec::new(),
        warmup: Duration::from_millis(300),
        duration: Duration::from_millis(1500),
        rounds: 2,
        sessions: 1000,
        clients: Who::ALL.to_vec(),
        depths: vec![1, 16, 256],
        skip_server_warmup: false,
        break_exclusion: false,
        child_sessions: None,
        tls: false,
        svg: None,
        force_sync: false,
        ensemble: None,
    };
    let mut it = std::env::args().skip(1);
    let secs = |v: Option<String>| -> Result<Duration, BenchError> {
        let v = v.ok_or_else(|| BenchError::msg(USAGE))?;
        v.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| BenchError::msg(format!("not a number of seconds: {v}")))
    };
    let count = |v: Option<String>| -> Result<usize, BenchError> {
        let v = v.ok_or_else(|| BenchError::msg(USAGE))?;
        v.parse()
            .map_err(|_| BenchError::msg(format!("not a count: {v}")))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--json" => args.json = true,
            "--server" => args.server = Some(it.next().ok_or_else(|| BenchError::msg(USAGE))?),
            "--only" => {
                let list = it.next().ok_or_else(|| BenchError::msg(USAGE))?;
                for w in list.split(',') {
                    if !WORKLOADS.contains(&w) {
                        return Err(BenchError::msg(format!("unknown workload {w}\n{USAGE}")));
                    }
                    args.only.push(w.to_owned());
                }
            }
            "--clients" => {
                let list = it.next().ok_or_else(|| BenchError::msg(USAGE))?;
                args.clients = list
                    .split(',')
                    .map(|c| {
                        Who::parse(c).ok_or_else(|| BenchError::msg(format!("unknown client {c}")))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--depths" => {
                let list = it.next().ok_or_else(|| BenchError::msg(USAGE))?;
                args.depths = list
                    .split(',')
                    .map(|d| {
                        d.parse::<usize>()
                            .ok()
                            .filter(|d| *d > 0)
                            .ok_or_else(|| BenchError::msg(format!("bad depth {d}")))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--warmup" => args.warmup = secs(it.next())?,
            // For profiling runs: no 2 s of server warm-up traffic in the profile.
            "--skip-server-warmup" => args.skip_server_warmup = true,
            // Self-test of the exclusion check: raw contenders take the lock without waiting,
            // so lock-contention must report violations and the run must exit non-zero.
            "--break-exclusion" => args.break_exclusion = true,
            // Runs the server workloads twice, plain then over TLS (params marked "tls"):
            // zkwire and kezhuw only (the raw client has no TLS).
            "--tls" => args.tls = true,
            "--svg" => {
                args.svg = Some(it.next().ok_or_else(|| BenchError::msg(USAGE))?.into());
            }
            "--force-sync" => args.force_sync = true,
            "--ensemble" => args.ensemble = Some(count(it.next())?.max(1)),
            "--duration" => args.duration = secs(it.next())?,
            "--rounds" => args.rounds = count(it.next())?.max(1),
            "--sessions" => args.sessions = count(it.next())?.max(1),
            // Internal: one client's idle sessions, in a process of their own.
            "--child-sessions" => {
                let who = it.next().ok_or_else(|| BenchError::msg(USAGE))?;
                args.child_sessions = Some(
                    Who::parse(&who)
                        .ok_or_else(|| BenchError::msg(format!("unknown client {who}")))?,
                );
            }
            "-h" | "--help" => return Err(BenchError::msg(USAGE)),
            other => {
                return Err(BenchError::msg(format!(
                    "unknown argument {other}\n{USAGE}"
                )))
            }
        }
    }
    Ok(args)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(2),
        Err(e) => {
            eprintln!("zkwire-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs everything; `Ok(false)` when a check failed (mutual exclusion).
fn run() -> Result<bool, BenchError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("soak") => return soak::main(&argv[1..]),
        Some("chart") => return chart::main(&argv[1..]),
        _ => {}
    }
    let args = parse_args()?;
    #[cfg(feature = "kezhuw-tls")]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(who) = args.child_sessions {
        let addr = args
            .server
            .clone()
            .ok_or_else(|| BenchError::msg("--child-sessions needs --server"))?;
        return runtime
            .block_on(sessions::child(who, &addr, args.sessions))
            .map(|()| true);
    }
    let wanted = |w: &str| args.only.is_empty() || args.only.iter().any(|o| o == w);
    let mut results = Results::default();
    let mut ok = true;

    if wanted("codec") {
        eprintln!("== codec");
        codec::run(&mut results, &args.clients);
    }

    let needs_server = WORKLOADS.iter().any(|w| *w != "codec" && wanted(w));
    // Keeps a server (or an ensemble) we started alive for the whole run.
    let mut _server = None;
    let mut _ensemble = None;
    let mut tls = None;
    if needs_server {
        let addr = match (&args.server, args.ensemble) {
            (Some(addr), _) => addr.clone(),
            (None, Some(n)) => {
                eprintln!("starting a {n}-node ZooKeeper ensemble…");
                let ensemble =
                    zkwire_testing::server::ZkEnsemble::start_with(n, server_config(&args))?;
                ensemble.wait_for_quorum(Duration::from_secs(60))?;
                // Every client talks to node 1 (a follower or the leader, as elected).
                let addr = ensemble.node_connect_string(0);
                eprintln!("ensemble: {}", ensemble.status());
                _ensemble = Some(ensemble);
                addr
            }
            (None, None) => {
                eprintln!("starting a standalone ZooKeeper server…");
                let mut config = server_config(&args);
                if args.tls {
                    let material = zkwire_testing::tls::TlsMaterial::generate()?;
                    config = config.tls(
                        &material,
                        zkwire_testing::tls::ClientAuth::None,
                        zkwire_testing::tls::StoreType::Pem,
                    );
                    tls = Some(material);
                }
                let server = zkwire_testing::server::ZkServer::start_with(config)?;
                let addr = server.connect_string();
                _server = Some(server);
                addr
            }
        };
        let ctx = Ctx {
            addr,
            root: format!("/zkwire-bench-{}", std::process::id()),
            warmup: args.warmup,
            duration: args.duration,
            rounds: args.rounds,
            sessions: args.sessions,
            clients: args.clients.clone(),
            depths: args.depths.clone(),
            warm_server: !args.skip_server_warmup,
            break_exclusion: args.break_exclusion,
            tls_ca: None,
        };
        let tls_ctx = match (&tls, &_server) {
            (Some(material), Some(server)) => Some(Ctx {
                addr: server.secure_connect_string().unwrap_or_default(),
                root: format!("{}-tls", ctx.root),
                tls_ca: Some(std::fs::read_to_string(material.ca_cert())?),
                clients: ctx
                    .clients
                    .iter()
                    .copied()
                    .filter(|w| *w != Who::Raw)
                    .collect(),
                ..ctx.clone()
            }),
            _ if args.tls => {
                return Err(BenchError::msg("--tls starts its own server: no --server"))
            }
            _ => None,
        };
        eprintln!("server {}, root {}", ctx.addr, ctx.root);
        ok = runtime.block_on(async {
            let admin = zkwire::Client::connect(&ctx.addr).await?;
            setup(&admin, &ctx).await?;
            let outcome = run_server_workloads(&ctx, &wanted, &mut results).await;
            if let Err(e) = teardown(&admin, &ctx.root).await {
                eprintln!("cleanup of {} failed: {e}", ctx.root);
            }
            let _ = admin.close().await;
            let mut ok = outcome?;
            if let Some(tls_ctx) = &tls_ctx {
                eprintln!("== the same over TLS ({})", tls_ctx.addr);
                let admin = tls_ctx.zkwire().await?;
                setup(&admin, tls_ctx).await?;
                let mut over_tls = Results::default();
                ok &= run_server_workloads(tls_ctx, &wanted, &mut over_tls).await?;
                for row in over_tls.rows {
                    results.add(row.workload, row.who, format!("{} tls", row.param), row.m);
                }
                let _ = teardown(&admin, &tls_ctx.root).await;
                let _ = admin.close().await;
            }
            Ok::<_, BenchError>(ok)
        })?;
    }

    if let Some(dir) = &args.svg {
        // Drawn from the JSON lines themselves, as `zkwire-bench chart` draws them.
        let points = chart::parse_lines(&report::json_lines(&results))?;
        for written in chart::write_all(&points, dir)? {
            eprintln!("wrote {}", written.display());
        }
    }
    // With --json, stdout is the JSON lines only and the tables go to stderr.
    if args.json {
        report::print_json(&results);
        let mut err = std::io::stderr().lock();
        report::print_table(&mut err, &results)?;
        report::print_targets(&mut err, &results)?;
    } else {
        let mut out = std::io::stdout().lock();
        report::print_table(&mut out, &results)?;
        report::print_targets(&mut out, &results)?;
    }
    if !ok {
        eprintln!("zkwire-bench: MUTUAL EXCLUSION VIOLATED in lock-contention (see above)");
    }
    Ok(ok)
}

/// The server configuration of the run: the harness's, with `--force-sync` applied.
fn server_config(args: &Args) -> zkwire_testing::server::ServerConfig {
    let config = zkwire_testing::server::ServerConfig::default();
    if args.force_sync {
        config.jvm_prop("zookeeper.forceSync", "yes")
    } else {
        config
    }
}

async fn run_server_workloads(
    ctx: &Ctx,
    wanted: &dyn Fn(&str) -> bool,
    results: &mut Results,
) -> Result<bool, BenchError> {
    let mut ok = true;
    // A short warm-up of the server's JIT before anything is measured.
    if ctx.warm_server {
        warm_server(ctx).await?;
    }
    if wanted("pipeline") {
        for &k in &ctx.depths {
            eprintln!("== pipeline K={k}");
            for round in 0..ctx.rounds {
                for &who in &ctx.clients {
                    let m = pipeline::run(ctx, who, k).await?;
                    progress(round, who, &m);
                    results.add("pipeline", who, format!("K={k}"), m);
                }
            }
        }
    }
    if wanted("write-latency") {
        eprintln!("== write-latency");
        for round in 0..ctx.rounds {
            for &who in &ctx.clients {
                let [set, create, delete] = writes::run(ctx, who).await?;
                progress(round, who, &set);
                results.add("write-latency", who, "setData", set);
                results.add("write-latency", who, "create", create);
                results.add("write-latency", who, "delete", delete);
            }
        }
    }
    if wanted("lock-cycle") {
        eprintln!("== lock-cycle");
        for round in 0..ctx.rounds {
            for &who in &ctx.clients {
                for (param, m) in locks::cycle(ctx, who).await? {
                    progress(round, who, &m);
                    results.add("lock-cycle", who, param, m);
                }
            }
        }
    }
    if wanted("lock-contention") {
        eprintln!("== lock-contention");
        for round in 0..ctx.rounds {
            for &who in &ctx.clients {
                let (m, violations) = locks::contention(ctx, who, locks::CONTENDERS).await?;
                progress(round, who, &m);
                if violations > 0 {
                    eprintln!(
                        "!! {}: {violations} mutual exclusion violations",
                        who.name()
                    );
                    ok = false;
                }
                results.add(
                    "lock-contention",
                    who,
                    format!("sessions={}", locks::CONTENDERS),
                    m,
                );
            }
        }
    }
    if wanted("lock-shared-client") {
        eprintln!("== lock-shared-client");
        for round in 0..ctx.rounds {
            for how in locks::SharedClient::ALL {
                let who = how.who();
                if !ctx.clients.contains(&who) {
                    continue;
                }
                let (m, violations, per_acquisition) =
                    locks::shared_client_contention(ctx, how).await?;
                progress(round, who, &m);
                eprintln!(
                    "   {}: {per_acquisition:.2} requests received by the server per acquisition",
                    how.param()
                );
                if violations > 0 {
                    eprintln!("!! {how:?}: {violations} mutual exclusion violations");
                    ok = false;
                }
                results.add("lock-shared-client", who, how.param(), m);
            }
        }
    }
    if wanted("sessions") {
        eprintln!("== sessions");
        for &who in &ctx.clients {
            let m = sessions::run(ctx, who).await?;
            progress(0, who, &m);
            results.add("sessions", who, format!("n={}", ctx.sessions), m);
        }
    }
    Ok(ok)
}

fn progress(round: usize, who: Who, m: &Measured) {
    eprintln!(
        "   round {round} {:7} {:>10.0} ops/s  p50 {:>8.1} µs  p99 {:>8.1} µs",
        who.name(),
        m.ops_per_sec().unwrap_or(f64::NAN),
        m.p50_us().unwrap_or(f64::NAN),
        m.p99_us().unwrap_or(f64::NAN),
    );
}

/// Creates the run's nodes: the 100-byte data node and one persistent directory per lock.
async fn setup(admin: &zkwire::Client, ctx: &Ctx) -> Result<(), BenchError> {
    use zkwire::{CreateMode, CreateOptions};
    let persistent = CreateOptions::new(CreateMode::Persistent);
    admin.create(&ctx.root, b"", &persistent).await?;
    admin
        .create(&ctx.path("data"), &[b'x'; PAYLOAD], &persistent)
        .await?;
    for who in Who::ALL {
        for dir in ["cycle", "contend"] {
            admin
                .create(
                    &ctx.path(&format!("{dir}-{}", who.name())),
                    b"",
                    &persistent,
                )
                .await?;
        }
    }
    for how in locks::SharedClient::ALL {
        admin
            .create(&ctx.path(&how.dir_name()), b"", &persistent)
            .await?;
    }
    Ok(())
}

/// Deletes the run's subtree (ephemeral leftovers are gone with their sessions).
async fn teardown(admin: &zkwire::Client, root: &str) -> Result<(), BenchError> {
    let mut stack = vec![(root.to_owned(), false)];
    while let Some((path, expanded)) = stack.pop() {
        if expanded {
            match admin.delete(&path, None).await {
                Ok(()) | Err(zkwire::Error::NoNode) => {}
                Err(e) => return Err(e.into()),
            }
            continue;
        }
        let children = match admin.get_children(&path).await {
            Ok(c) => c,
            Err(zkwire::Error::NoNode) => continue,
            Err(e) => return Err(e.into()),
        };
        stack.push((path.clone(), true));
        for child in children {
            stack.push((format!("{path}/{child}"), false));
        }
    }
    Ok(())
}

/// Gets the server's JIT going: a few thousand reads and writes from a throwaway session.
async fn warm_server(ctx: &Ctx) -> Result<(), BenchError> {
    let client = ctx.zkwire().await?;
    let data = ctx.path("data");
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < until {
        for _ in 0..32 {
            client.get_data(&data).await?;
        }
        client.set_data(&data, &[b'x'; PAYLOAD], None).await?;
    }
    client.close().await?;
    Ok(())
}
