//! The server of a run: the one given with `--server`, or a standalone server (plain, or
//! with TLS for `--tls`) or an ensemble started for the run; the run's nodes created on it
//! and deleted at the end; the JIT warm-up traffic.

use std::time::Duration;

use zkwire_testing::server::{ServerConfig, ZkEnsemble, ZkServer};
use zkwire_testing::tls::TlsMaterial;

use crate::args::{Args, Measure};
use crate::{shared_client, workloads, BenchError, Ctx, Results, Who, PAYLOAD};

/// The servers started for the run (kept alive until dropped), and their TLS material
/// (dropped first, as when these were locals of the run).
#[derive(Default)]
pub(crate) struct Started {
    tls: Option<TlsMaterial>,
    ensemble: Option<ZkEnsemble>,
    server: Option<ZkServer>,
}

/// Runs the server workloads the run wants (`wanted`) on the run's server, started into
/// `started` unless given, then over TLS with `--tls`; `Ok(false)` when a check failed.
pub(crate) fn run(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    wanted: &dyn Fn(&str) -> bool,
    results: &mut Results,
    started: &mut Started,
) -> Result<bool, BenchError> {
    let addr = start(args, started)?;
    let ctx = Ctx {
        addr,
        root: format!("/zkwire-bench-{}", std::process::id()),
        measure: args.measure.clone(),
        warm_server: !args.skip_server_warmup,
        tls_ca: None,
    };
    let tls_ctx = match (&started.tls, &started.server) {
        (Some(material), Some(server)) => Some(Ctx {
            addr: server.secure_connect_string().unwrap_or_default(),
            root: format!("{}-tls", ctx.root),
            tls_ca: Some(std::fs::read_to_string(material.ca_cert())?),
            measure: Measure {
                clients: (ctx.measure.clients.iter().copied())
                    .filter(|w| !matches!(w, Who::Raw | Who::Relay))
                    .collect(),
                ..ctx.measure.clone()
            },
            ..ctx.clone()
        }),
        _ if args.tls => return Err(BenchError::msg("--tls starts its own server: no --server")),
        _ => None,
    };
    eprintln!("server {}, root {}", ctx.addr, ctx.root);
    runtime.block_on(async {
        let admin = zkwire::Client::connect(&ctx.addr).await?;
        setup(&admin, &ctx).await?;
        let outcome = workloads::run(&ctx, wanted, results).await;
        if let Err(e) = teardown(&admin, &ctx.root).await {
            eprintln!("cleanup of {} failed: {e}", ctx.root);
        }
        let _ = admin.close().await;
        let mut ok = outcome?;
        if let Some(tls_ctx) = &tls_ctx {
            ok &= run_over_tls(tls_ctx, wanted, results).await?;
        }
        Ok::<_, BenchError>(ok)
    })
}

/// The workloads again over TLS, their params marked "tls".
async fn run_over_tls(
    tls_ctx: &Ctx,
    wanted: &dyn Fn(&str) -> bool,
    results: &mut Results,
) -> Result<bool, BenchError> {
    eprintln!("== the same over TLS ({})", tls_ctx.addr);
    let admin = tls_ctx.zkwire().await?;
    setup(&admin, tls_ctx).await?;
    let mut over_tls = Results::default();
    let ok = workloads::run(tls_ctx, wanted, &mut over_tls).await?;
    for row in over_tls.rows {
        results.add(row.workload, row.who, format!("{} tls", row.param), row.m);
    }
    let _ = teardown(&admin, &tls_ctx.root).await;
    let _ = admin.close().await;
    Ok(ok)
}

/// The run's server address: `--server`, else an ensemble (`--ensemble`) or a standalone
/// server started now into `started`.
fn start(args: &Args, started: &mut Started) -> Result<String, BenchError> {
    match (&args.server, args.ensemble) {
        (Some(addr), _) => Ok(addr.clone()),
        (None, Some(n)) => {
            eprintln!("starting a {n}-node ZooKeeper ensemble…");
            let ensemble = ZkEnsemble::start_with(n, server_config(args))?;
            ensemble.wait_for_quorum(Duration::from_secs(60))?;
            // Every client talks to node 1 (a follower or the leader, as elected).
            let addr = ensemble.node_connect_string(0);
            eprintln!("ensemble: {}", ensemble.status());
            started.ensemble = Some(ensemble);
            Ok(addr)
        }
        (None, None) => {
            eprintln!("starting a standalone ZooKeeper server…");
            let mut config = server_config(args);
            if args.tls {
                let material = TlsMaterial::generate()?;
                config = config.tls(
                    &material,
                    zkwire_testing::tls::ClientAuth::None,
                    zkwire_testing::tls::StoreType::Pem,
                );
                started.tls = Some(material);
            }
            let server = ZkServer::start_with(config)?;
            let addr = server.connect_string();
            started.server = Some(server);
            Ok(addr)
        }
    }
}

/// The server configuration of the run: the harness's, with `--force-sync` applied.
fn server_config(args: &Args) -> ServerConfig {
    let config = ServerConfig::default();
    if args.force_sync {
        config.jvm_prop("zookeeper.forceSync", "yes")
    } else {
        config
    }
}

/// Creates the run's nodes: the 100-byte data node and one persistent directory per lock.
async fn setup(admin: &zkwire::Client, ctx: &Ctx) -> Result<(), BenchError> {
    use zkwire::CreateOptions;
    let persistent = CreateOptions::persistent();
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
    for how in shared_client::SharedClient::ALL {
        admin
            .create(&ctx.path(&how.dir_name()), b"", &persistent)
            .await?;
    }
    Ok(())
}

/// Deletes the run's subtree (ephemeral leftovers are gone with their sessions).
async fn teardown(admin: &zkwire::Client, root: &str) -> Result<(), BenchError> {
    admin.delete_all(root).await?;
    Ok(())
}

/// Gets the server's JIT going: a few thousand reads and writes from a throwaway session.
pub(crate) async fn warm_server(ctx: &Ctx) -> Result<(), BenchError> {
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
