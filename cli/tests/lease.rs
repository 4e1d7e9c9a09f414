//! `zkw lock` through a one-way partition: the holder's requests stop reaching the server (its
//! session then expires and the lock passes on) while nothing stops bytes coming back. In
//! every run, the holder's command must be gone before the next holder's command starts.
//!
//! Half the runs drop the holder's requests, half hold them back; half the holders' commands
//! exit on SIGTERM, half ignore it and have to be killed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use common::{chroot, finish, scratch, spawn_lock_script, spawn_zkw, zkw};
use zkwire_testing::proxy::FaultProxy;
use zkwire_testing::server::shared_server;

/// Runs in all.
const RUNS: usize = 20;
/// Runs at a time.
const PARALLEL: usize = 4;
/// The holder's session timeout.
const SESSION_TIMEOUT: &str = "4s";
/// The holder's grace between SIGTERM and SIGKILL; fits the 4 s session (1 s + 266 ms ≤ 2 s).
const KILL_AFTER: &str = "1s";
/// How long any one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(30);

/// The holder's command: `$0` is its directory, `$1` its mode. It appends a timestamp to
/// `holder` every 20 ms (the last line is when it was last alive) and runs about a minute.
/// `polite` records one more line on SIGTERM and exits; `stubborn` ignores SIGTERM (so do its
/// `sleep` and `date`, which inherit the ignored disposition) and has to be killed.
const HOLDER: &str = r#"
if [ "$1" = stubborn ]; then trap '' TERM; else trap 'date +%s.%N >> "$0/holder"; exit 0' TERM; fi
date +%s.%N >> "$0/holder"
touch "$0/running"
i=0
while [ $i -lt 3000 ]; do date +%s.%N >> "$0/holder"; sleep 0.02; i=$((i + 1)); done
"#;

/// What one run measured.
#[derive(Debug)]
struct Run {
    mode: &'static str,
    cut: &'static str,
    /// Contender's start − holder's last sign of life (negative: they overlapped).
    gap_ms: f64,
    /// Holder's last sign of life − the cut.
    cut_to_end_ms: f64,
    holder_error: String,
}

#[test]
fn holder_command_ends_before_the_next_holder_starts() {
    let direct = chroot("cli-lease");
    let runtime = common::runtime();
    let server = shared_server().addr();
    let started = Instant::now();
    let mut runs = Vec::new();
    for batch in 0..RUNS.div_ceil(PARALLEL) {
        let workers: Vec<_> = (0..PARALLEL)
            .map(|k| batch * PARALLEL + k)
            .filter(|&n| n < RUNS)
            .map(|n| {
                let proxy = runtime.block_on(FaultProxy::start(server)).unwrap();
                let direct = direct.clone();
                thread::spawn(move || one_run(n, &proxy, &direct))
            })
            .collect();
        runs.extend(workers.into_iter().map(|w| w.join().unwrap()));
    }
    let mut gaps: Vec<f64> = runs.iter().map(|r| r.gap_ms).collect();
    gaps.sort_by(f64::total_cmp);
    let mut ends: Vec<f64> = runs.iter().map(|r| r.cut_to_end_ms).collect();
    ends.sort_by(f64::total_cmp);
    println!(
        "{RUNS} runs in {:?}: contender start − holder end: min {:.0} ms, median {:.0} ms, max {:.0} ms; \
         cut → holder end: min {:.0} ms, median {:.0} ms, max {:.0} ms",
        started.elapsed(),
        gaps[0],
        gaps[gaps.len() / 2],
        gaps[gaps.len() - 1],
        ends[0],
        ends[ends.len() / 2],
        ends[ends.len() - 1],
    );
    for run in &runs {
        println!(
            "  {:8} {:4} gap {:6.0} ms, cut → end {:5.0} ms: {}",
            run.mode, run.cut, run.gap_ms, run.cut_to_end_ms, run.holder_error
        );
    }
    let overlaps: Vec<&Run> = runs.iter().filter(|r| r.gap_ms <= 0.0).collect();
    assert!(
        overlaps.is_empty(),
        "{} of {RUNS} runs had both commands running at once: {overlaps:?}",
        overlaps.len()
    );
}

fn one_run(n: usize, proxy: &FaultProxy, direct: &str) -> Run {
    let mode = if n % 2 == 0 { "polite" } else { "stubborn" };
    let cut_kind = if n % 4 < 2 { "drop" } else { "hold" };
    let dir = scratch(&format!("lease-{n}"));
    let dir_arg = dir.to_str().unwrap();
    let path = format!("/run-{n}");
    let via_proxy = format!(
        "{}/{}",
        proxy.connect_string(),
        direct.split_once('/').unwrap().1
    );
    let mut holder = spawn_lock_script(
        &via_proxy,
        [SESSION_TIMEOUT, &path, KILL_AFTER],
        HOLDER,
        &[dir_arg, mode],
    );
    let deadline = Instant::now() + STEP_LIMIT;
    while !dir.join("running").exists() {
        if holder.try_wait().unwrap().is_some() {
            let out = finish(holder, STEP_LIMIT);
            panic!("run {n}: the holder's zkw exited before its command ran: {out:?}");
        }
        assert!(
            Instant::now() < deadline,
            "run {n}: the holder's command never ran"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let contender = spawn_zkw(
        direct,
        &[
            "lock",
            &path,
            "--",
            "sh",
            "-c",
            "date +%s.%N > \"$0/contender\"",
            dir_arg,
        ],
    );
    // Cut only once the contender queues behind the holder.
    let deadline = Instant::now() + STEP_LIMIT;
    while zkw(direct, &["ls", &path]).ok().lines().count() < 2 {
        assert!(
            Instant::now() < deadline,
            "run {n}: the contender never queued"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let cut = now_secs();
    if cut_kind == "drop" {
        proxy.drop_client_to_server(true);
    } else {
        proxy.hold_client_to_server(true);
    }
    let holder = finish(holder, STEP_LIMIT);
    let contender = finish(contender, STEP_LIMIT);
    assert_eq!(holder.code, Some(75), "run {n}: holder {holder:?}");
    assert_eq!(contender.code, Some(0), "run {n}: contender {contender:?}");
    // zkw's own line comes last (`sh` may report its killed `sleep` before it).
    let holder_error = holder.stderr.lines().last().unwrap_or_default().to_owned();
    let how = if mode == "polite" {
        "; terminated the command"
    } else {
        "; killed the command (it outlived SIGTERM)"
    };
    assert!(
        holder_error.starts_with(
            "zkw: lock about to expire: the quorum's leader has not confirmed this session for"
        ) && holder_error.ends_with(how),
        "run {n}: {holder:?}"
    );
    let holder_end = last_stamp(&dir.join("holder"));
    let contender_start = last_stamp(&dir.join("contender"));
    Run {
        mode,
        cut: cut_kind,
        gap_ms: (contender_start - holder_end) * 1000.0,
        cut_to_end_ms: (holder_end - cut) * 1000.0,
        holder_error,
    }
}

/// The latest `date +%s.%N` stamp in `file` (a line cut short by SIGKILL is skipped).
fn last_stamp(file: &Path) -> f64 {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .fold(f64::NEG_INFINITY, f64::max)
}

/// The wall clock in seconds, as `date +%s.%N` prints it.
fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}
