//! The server workloads, in run order, each round after round over the run's clients, with
//! a progress line per measurement on stderr.

use crate::measure::Measured;
use crate::pipeline::Shape;
use crate::shared_client::SharedClient;
use crate::{locks, pipeline, server, sessions, writes, BenchError, Ctx, Results, Who};

/// Runs every server workload `wanted` says; `Ok(false)` when an exclusion check failed.
pub(crate) async fn run(
    ctx: &Ctx,
    wanted: &dyn Fn(&str) -> bool,
    results: &mut Results,
) -> Result<bool, BenchError> {
    let mut ok = true;
    // A short warm-up of the server's JIT before anything is measured.
    if ctx.warm_server {
        server::warm_server(ctx).await?;
    }
    if wanted("pipeline") {
        pipeline_depths(ctx, results).await?;
    }
    if wanted("write-latency") {
        write_latency(ctx, results).await?;
    }
    if wanted("lock-cycle") {
        lock_cycle(ctx, results).await?;
    }
    if wanted("lock-contention") {
        ok &= lock_contention(ctx, results).await?;
    }
    if wanted("lock-shared-client") {
        ok &= lock_shared_client(ctx, results).await?;
    }
    if wanted("sessions") {
        eprintln!("== sessions");
        for &who in &ctx.measure.clients {
            let m = sessions::run(ctx, who).await?;
            progress(0, who, &m);
            results.add("sessions", who, format!("n={}", ctx.measure.sessions), m);
        }
    }
    Ok(ok)
}

/// `pipeline` at every depth: above K = 1 in both shapes (raw has one shape, measured again
/// beside the other so that each shape's cell has its own raw row to compare with).
async fn pipeline_depths(ctx: &Ctx, results: &mut Results) -> Result<(), BenchError> {
    for &k in &ctx.measure.depths {
        // One request in one task either way: K = 1 has one shape.
        let shapes = if k == 1 {
            &[Shape::Tasks][..]
        } else {
            &ctx.measure.shapes
        };
        for &shape in shapes {
            let param = shape.param(k);
            eprintln!("== pipeline {param}");
            for round in 0..ctx.measure.rounds {
                for &who in &ctx.measure.clients {
                    let m = pipeline::run(ctx, who, k, shape).await?;
                    progress(round, who, &m);
                    results.add("pipeline", who, param.clone(), m);
                }
            }
        }
    }
    Ok(())
}

async fn write_latency(ctx: &Ctx, results: &mut Results) -> Result<(), BenchError> {
    eprintln!("== write-latency");
    for round in 0..ctx.measure.rounds {
        for &who in &ctx.measure.clients {
            let [set, create, delete] = writes::run(ctx, who).await?;
            progress(round, who, &set);
            results.add("write-latency", who, "setData", set);
            results.add("write-latency", who, "create", create);
            results.add("write-latency", who, "delete", delete);
        }
    }
    Ok(())
}

async fn lock_cycle(ctx: &Ctx, results: &mut Results) -> Result<(), BenchError> {
    eprintln!("== lock-cycle");
    for round in 0..ctx.measure.rounds {
        for &who in &ctx.measure.clients {
            for (param, m) in locks::cycle(ctx, who).await? {
                progress(round, who, &m);
                results.add("lock-cycle", who, param, m);
            }
        }
    }
    Ok(())
}

/// `lock-contention`; `Ok(false)` when mutual exclusion was violated.
async fn lock_contention(ctx: &Ctx, results: &mut Results) -> Result<bool, BenchError> {
    let mut ok = true;
    eprintln!("== lock-contention");
    for round in 0..ctx.measure.rounds {
        for &who in &ctx.measure.clients {
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
                locks::CONTENTION_PARAM.to_owned(),
                m,
            );
        }
    }
    Ok(ok)
}

/// `lock-shared-client`; `Ok(false)` when mutual exclusion was violated.
async fn lock_shared_client(ctx: &Ctx, results: &mut Results) -> Result<bool, BenchError> {
    let mut ok = true;
    eprintln!("== lock-shared-client");
    for round in 0..ctx.measure.rounds {
        for how in SharedClient::ALL {
            let who = how.who();
            if !ctx.measure.clients.contains(&who) {
                continue;
            }
            let (m, violations, per_acquisition) =
                crate::shared_client::contention(ctx, how).await?;
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
