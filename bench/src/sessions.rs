//! `sessions`: N idle sessions of one client, connected one after another — connect latency
//! and resident memory per session.
//!
//! Each client runs in a child process of its own (this binary, `--child-sessions`), so that
//! memory freed by one client cannot be reused by the next and hide its cost. RSS per
//! session is (RSS with N + 1 sessions − RSS with 1 session) / N.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::measure::{self, Hist, Measured, Window};
use crate::raw::RawConn;
use crate::relay::Relay;
use crate::{BenchError, Ctx, Who};

/// Runs the child for `who` and reads its one-line report.
pub(crate) async fn run(ctx: &Ctx, who: Who) -> Result<Measured, BenchError> {
    let exe = std::env::current_exe()?;
    let args = [
        "--child-sessions".to_owned(),
        who.name().to_owned(),
        "--server".to_owned(),
        ctx.addr.clone(),
        "--sessions".to_owned(),
        ctx.measure.sessions.to_string(),
    ];
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(BenchError::msg(format!(
            "sessions child for {} failed: {}",
            who.name(),
            output.status
        )));
    }
    parse_report(&stdout).ok_or_else(|| {
        BenchError::msg(format!(
            "sessions child for {}: bad report {stdout:?}",
            who.name()
        ))
    })
}

/// The child's report: `ops_per_sec p50_us p99_us cpu_us_per_op allocs_per_op rss_kib_per_session`.
fn parse_report(text: &str) -> Option<Measured> {
    let line = text.lines().find_map(|l| l.strip_prefix("SESSIONS "))?;
    let f: Vec<Option<f64>> = line.split_whitespace().map(|v| v.parse().ok()).collect();
    let [ops, p50, p99, cpu, allocs, rss, n] = f.as_slice() else {
        return None;
    };
    let n = (*n)? as u64;
    let spent = measure::Spent {
        secs: ops.map_or(0.0, |ops| n as f64 / ops),
        cpu_ns: cpu.map(|c| (c * 1000.0 * n as f64) as u64),
        allocs: allocs.map_or(0, |a| (a * n as f64) as u64),
        requests: None,
    };
    let mut m = Measured::new(n, spent, Hist::new());
    m.rss_kib = *rss;
    m.quantiles_us = Some((*p50, *p99));
    Some(m)
}

enum Session {
    Zkwire(zkwire::Client),
    Kezhuw(zookeeper_client::Client),
    Raw(RawConn),
    Relay(Relay),
}

async fn open(who: Who, addr: &str) -> Result<Session, BenchError> {
    Ok(match who {
        Who::Zkwire => Session::Zkwire(zkwire::Client::connect(addr).await?),
        Who::Kezhuw => Session::Kezhuw(zookeeper_client::Client::connect(addr).await?),
        Who::Raw => Session::Raw(RawConn::connect(addr).await?),
        Who::Relay => Session::Relay(Relay::connect(addr).await?),
    })
}

async fn close(session: Session) {
    match session {
        Session::Zkwire(c) => {
            let _ = c.close().await;
        }
        Session::Kezhuw(c) => drop(c),
        Session::Raw(c) => c.close().await,
        Session::Relay(c) => c.close().await,
    }
}

/// The child: opens `n` sessions after a first one, prints the report line, closes them all.
pub(crate) async fn child(who: Who, addr: &str, n: usize) -> Result<(), BenchError> {
    let first = open(who, addr).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = measure::rss_kib();
    let heap_before = measure::heap_bytes();
    let mut hist = Hist::new();
    let mut sessions = Vec::with_capacity(n);
    let window = Window::begin();
    for _ in 0..n {
        let start = Instant::now();
        sessions.push(open(who, addr).await?);
        hist.record(start.elapsed());
    }
    let spent = window.end();
    // Idle for a moment: whatever a session allocates lazily after its handshake counts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = measure::rss_kib();
    let heap_per_session = (measure::heap_bytes() - heap_before) as f64 / n as f64 / 1024.0;
    let per_session = match (rss_before, rss_after) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b) as f64 / n as f64),
        _ => None,
    };
    let fmt = |v: Option<f64>| v.map_or("null".to_owned(), |v| format!("{v:.3}"));
    let m = Measured::new(n as u64, spent, hist);
    println!(
        "SESSIONS {} {} {} {} {} {} {n}",
        fmt(m.ops_per_sec()),
        fmt(m.hist.quantile_us(0.5)),
        fmt(m.hist.quantile_us(0.99)),
        fmt(m.cpu_us_per_op()),
        fmt(m.allocs_per_op()),
        fmt(per_session),
    );
    eprintln!(
        "   {}: RSS {} KiB -> {} KiB for {n} more sessions; heap {heap_per_session:.1} KiB per session",
        who.name(),
        rss_before.unwrap_or(0),
        rss_after.unwrap_or(0)
    );
    sessions.push(first);
    let closing: Vec<_> = sessions
        .into_iter()
        .map(|s| tokio::spawn(close(s)))
        .collect();
    for c in closing {
        let _ = c.await;
    }
    // kezhuw's sessions close from their background tasks once dropped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}
