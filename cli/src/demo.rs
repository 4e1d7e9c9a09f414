//! `zkw demo`: contending `zkw lock` processes on a local 3-node ensemble whose leader is
//! killed mid-run, then a summary of what the critical sections recorded.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::process::Command;
use zkwire_sandbox::server::{ZkEnsemble, DEFAULT_TICK};

use crate::cli::show as show_duration;
use crate::cli::{DemoArgs, DEMO_WORKER};
use crate::demo_worker::{analyse, parse_counter, parse_log, quantile, Analysis};
use crate::fail::{Failure, FAILED, UNAVAILABLE};
use crate::out;

/// The lock every worker contends for.
const LOCK_PATH: &str = "/zkw-demo/lock";
/// The session timeout of the workers' `zkw lock`: a leader election (a second or two) is
/// a small part of it, so a worker's hold survives the ensemble electing a new leader.
const WORKER_SESSION_TIMEOUT: &str = "20s";
/// How many times a worker retries a round whose `zkw lock` failed.
const RETRIES: usize = 3;
/// Ensemble size.
const NODES: usize = 3;

/// The demo's settings.
#[derive(Debug, Clone, Copy)]
struct Settings {
    workers: usize,
    rounds: usize,
}

impl Settings {
    fn total(self) -> usize {
        self.workers * self.rounds
    }
}

/// Shared progress of the run.
#[derive(Debug, Default)]
struct Progress {
    done: AtomicUsize,
    retries: AtomicUsize,
    failed: AtomicUsize,
    first_error: StdMutex<Option<String>>,
    failover: StdMutex<Option<String>>,
}

impl Progress {
    fn note_error(&self, error: String) {
        let mut first = self
            .first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert(error);
    }

    fn failover(&self) -> Option<String> {
        self.failover
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Runs the demo; returns the exit code (0 when every invariant held).
pub(crate) async fn demo(a: &DemoArgs) -> Result<u8, Failure> {
    let settings = Settings {
        workers: a.workers,
        rounds: a.rounds,
    };
    if !(1..=32).contains(&settings.workers) || !(1..=1000).contains(&settings.rounds) {
        return Err(Failure::usage(
            "--workers takes 1 to 32, --rounds 1 to 1000",
        ));
    }
    let dir = scratch_dir()?;
    let ctrl_c = crate::interrupt::ctrl_c()?;
    tokio::pin!(ctrl_c);
    let result = tokio::select! {
        result = run(settings, &dir) => result,
        _ = &mut ctrl_c => Err(Failure::new(crate::fail::INTERRUPTED, "demo interrupted")),
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run(settings: Settings, dir: &Path) -> Result<u8, Failure> {
    let started = Instant::now();
    out::note(&format!(
        "starting a local {NODES}-node ZooKeeper ensemble…"
    ));
    let ensemble = tokio::task::spawn_blocking(|| ZkEnsemble::start(NODES))
        .await
        .map_err(|e| Failure::new(FAILED, format!("cannot start ZooKeeper: {e}")))?
        .map_err(|e| Failure::new(UNAVAILABLE, format!("cannot start ZooKeeper: {e}")))?;
    let connect = ensemble.connect_string();
    out::note(&format!(
        "ensemble up in {} at {connect}; {} workers × {} acquisitions of {LOCK_PATH}, each through `zkw lock`",
        show_duration(started.elapsed()),
        settings.workers,
        settings.rounds
    ));
    let ensemble = Arc::new(StdMutex::new(ensemble));
    let progress = Arc::new(Progress::default());
    let run_started = Instant::now();
    let workers = spawn_workers(settings, &connect, dir, &progress)?;
    let killer = tokio::spawn(kill_leader_midway(
        ensemble.clone(),
        progress.clone(),
        settings.total(),
    ));
    let ticker = tokio::spawn(show_progress(
        progress.clone(),
        settings.total(),
        run_started,
    ));
    for worker in workers {
        let _ = worker.await;
    }
    ticker.abort();
    let _ = ticker.await;
    let _ = killer.await;
    let elapsed = run_started.elapsed();
    finish_progress_line();
    let analysis = analyse(parse_log(&read(dir, "log")));
    let report = Report::gather(settings, dir, &progress, analysis, elapsed);
    tokio::task::spawn_blocking(move || drop(ensemble))
        .await
        .map_err(|e| Failure::new(FAILED, e.to_string()))?;
    out::lines(&report.lines())?;
    Ok(if report.passed() { 0 } else { FAILED })
}

/// A fresh directory for the shared files.
fn scratch_dir() -> Result<PathBuf, Failure> {
    let dir = std::env::temp_dir().join(format!(
        "zkw-demo-{}-{}",
        std::process::id(),
        crate::demo_worker::now_us()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::new(FAILED, format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

/// Starts the worker tasks: each runs `zkw lock … -- zkw __demo-worker DIR` `rounds` times.
fn spawn_workers(
    settings: Settings,
    connect: &str,
    dir: &Path,
    progress: &Arc<Progress>,
) -> Result<Vec<tokio::task::JoinHandle<()>>, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::new(FAILED, format!("cannot find my own executable: {e}")))?;
    Ok((0..settings.workers)
        .map(|_| {
            let (exe, connect, dir, progress) = (
                exe.clone(),
                connect.to_owned(),
                dir.to_owned(),
                progress.clone(),
            );
            tokio::spawn(async move {
                for _ in 0..settings.rounds {
                    one_round(&exe, &connect, &dir, &progress).await;
                }
            })
        })
        .collect())
}

/// One acquisition, retried a few times if `zkw lock` fails.
async fn one_round(exe: &Path, connect: &str, dir: &Path, progress: &Progress) {
    for attempt in 0..=RETRIES {
        match lock_once(exe, connect, dir).await {
            Ok(()) => {
                progress.done.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(error) => {
                progress.note_error(error);
                if attempt == RETRIES {
                    progress.failed.fetch_add(1, Ordering::Relaxed);
                } else {
                    progress.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

/// Runs one `zkw lock`; the first line of its stderr on failure.
async fn lock_once(exe: &Path, connect: &str, dir: &Path) -> Result<(), String> {
    let output = Command::new(exe)
        .args([
            "--server",
            connect,
            "--session-timeout",
            WORKER_SESSION_TIMEOUT,
            // The demo's servers tick faster than ZooKeeper's default 2 s.
            "--server-tick",
            &show_duration(DEFAULT_TICK),
            "lock",
            LOCK_PATH,
            "--",
        ])
        .arg(exe)
        .arg(DEMO_WORKER)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run zkw lock: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first = stderr.lines().next().unwrap_or("").trim().to_owned();
    Err(format!(
        "zkw lock exited with {}: {first}",
        output
            .status
            .code()
            .map_or("a signal".to_owned(), |c| c.to_string())
    ))
}

/// Kills the leader once half the acquisitions are done, then times the election.
async fn kill_leader_midway(
    ensemble: Arc<StdMutex<ZkEnsemble>>,
    progress: Arc<Progress>,
    total: usize,
) {
    while progress.done.load(Ordering::Relaxed) + progress.failed.load(Ordering::Relaxed)
        < total / 2
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at = progress.done.load(Ordering::Relaxed);
    let report = tokio::task::spawn_blocking(move || {
        let mut ensemble = ensemble.lock().unwrap_or_else(PoisonError::into_inner);
        kill_leader(&mut ensemble, at)
    })
    .await
    .unwrap_or_else(|e| format!("could not kill the leader: {e}"));
    *progress
        .failover
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(report);
}

/// Kills the current leader and waits (up to 20 s) for another one; describes what happened.
fn kill_leader(ensemble: &mut ZkEnsemble, at: usize) -> String {
    let Some(leader) = ensemble.leader() else {
        return "no leader found to kill".to_owned();
    };
    if let Err(e) = ensemble.kill(leader) {
        return format!("could not kill node {leader}: {e}");
    }
    let killed = Instant::now();
    while killed.elapsed() < Duration::from_secs(20) {
        if let Some(new) = ensemble.leader().filter(|&n| n != leader) {
            return format!(
                "leader node {leader} killed after {at} acquisitions; node {new} elected in {}",
                show_duration(killed.elapsed())
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    format!("leader node {leader} killed after {at} acquisitions; no new leader within 20s")
}

/// Redraws a progress line on stderr every 100 ms (a line per 25 % when it is not a terminal).
async fn show_progress(progress: Arc<Progress>, total: usize, started: Instant) {
    let terminal = std::io::stderr().is_terminal();
    let mut last_quarter = 0;
    loop {
        let done = progress.done.load(Ordering::Relaxed);
        let failover = progress
            .failover()
            .unwrap_or_else(|| "leader still up".to_owned());
        let line = format!(
            "{done}/{total} acquisitions · {} · {failover}",
            show_duration(started.elapsed())
        );
        let quarter = done * 4 / total.max(1);
        if terminal {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K  {line}");
            let _ = stderr.flush();
        } else if quarter > last_quarter {
            last_quarter = quarter;
            out::note(&line);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn finish_progress_line() {
    if std::io::stderr().is_terminal() {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr);
    }
}

/// The summary and the verdict.
#[derive(Debug)]
struct Report {
    settings: Settings,
    analysis: Analysis,
    counter: u64,
    violations: Vec<String>,
    retries: usize,
    failed: usize,
    first_error: Option<String>,
    failover: String,
    elapsed: Duration,
}

impl Report {
    fn gather(
        settings: Settings,
        dir: &Path,
        progress: &Progress,
        analysis: Analysis,
        elapsed: Duration,
    ) -> Self {
        Self {
            settings,
            analysis,
            counter: parse_counter(&read(dir, "counter")).0,
            violations: read(dir, "violations").lines().map(str::to_owned).collect(),
            retries: progress.retries.load(Ordering::Relaxed),
            failed: progress.failed.load(Ordering::Relaxed),
            first_error: progress
                .first_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            failover: progress
                .failover()
                .unwrap_or_else(|| "the leader was not killed".to_owned()),
            elapsed,
        }
    }

    /// Every round ended with a successful `zkw lock` (a retried round may have run its
    /// critical section twice, which is not a violation).
    fn all_acquired(&self) -> bool {
        self.failed == 0 && self.analysis.acquisitions >= self.settings.total()
    }

    fn exclusive(&self) -> bool {
        self.analysis.max_concurrent <= 1 && self.violations.is_empty()
    }

    fn counter_matches(&self) -> bool {
        usize::try_from(self.counter).is_ok_and(|c| c == self.analysis.acquisitions)
            && self.analysis.counts_sequential
    }

    fn passed(&self) -> bool {
        self.all_acquired()
            && self.exclusive()
            && self.analysis.tokens_increasing
            && self.counter_matches()
    }

    fn lines(&self) -> Vec<String> {
        let a = &self.analysis;
        let p = |q| quantile(&a.handoffs, q).map_or_else(|| "-".to_owned(), show_duration);
        let max = a
            .handoffs
            .iter()
            .max()
            .map_or_else(|| "-".to_owned(), |d| show_duration(*d));
        let mut lines = vec![
            format!(
                "zkw demo: {} worker processes × {} rounds on a {NODES}-node ensemble, every hold through `zkw lock`",
                self.settings.workers, self.settings.rounds
            ),
            format!("  failover                {}", self.failover),
            format!("  acquisitions            {} for {} rounds  {}", a.acquisitions, self.settings.total(), verdict(self.all_acquired())),
            format!("  hand-off latency        p50 {}  p99 {}  max {}  (exit of one holder's command → start of the next's)", p(0.5), p(0.99), max),
            format!("  max concurrent holders  {}  {}", a.max_concurrent.max(usize::from(!self.violations.is_empty()) * 2), verdict(self.exclusive())),
            format!("  fencing tokens          {}  {}", if a.tokens_increasing { "strictly increasing" } else { "NOT increasing" }, verdict(a.tokens_increasing)),
            format!("  counter                 {} (acquisitions {})  {}", self.counter, a.acquisitions, verdict(self.counter_matches())),
            format!("  elapsed                 {} of contention", show_duration(self.elapsed)),
        ];
        if self.retries > 0 || self.failed > 0 {
            lines.push(format!(
                "  zkw lock failures       {} retried, {} given up; first: {}",
                self.retries,
                self.failed,
                self.first_error.as_deref().unwrap_or("-")
            ));
        }
        lines.extend(
            self.violations
                .iter()
                .take(5)
                .map(|v| format!("  violation               {v}")),
        );
        lines.push(if self.passed() {
            "PASS: every invariant held".to_owned()
        } else {
            "FAIL: see the lines marked FAIL".to_owned()
        });
        lines
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "FAIL"
    }
}
