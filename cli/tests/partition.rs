//! `zkw lock` under partitions *inside* the ensemble (docs/lease.md, docs/faults.md #28): the
//! holder's command must be gone, its whole process group, before the contender's command
//! starts, even when the server the holder talks to is cut off from the quorum and keeps
//! answering it for a while. The CLI twin of recipes/tests/partition.rs.
//!
//! One 3-node ensemble for the binary, every quorum and election link through a relay
//! (tickTime 200 ms, syncLimit 5: a follower notices a silent leader after 1 s). Each scenario
//! runs 5 seeded trials in a *zone* partition: each `zkw` is given only the server on its side
//! of the cut. A trial:
//!
//! 1. the holder, `zkw --server <victim> --session-timeout 4s lock P --kill-after 1s -- sh …`,
//!    takes the lock; its command records its start and the pids of its group (the shell and
//!    a `sleep 60` child), then waits; *polite* commands die of SIGTERM, *stubborn* ones ignore
//!    it (trials alternate) and have to be killed at the end of the trusted lease;
//! 2. after a seeded pause the fault is switched on;
//! 3. the contender, `zkw --server <quorum side> --session-timeout 4s lock P -- sh …`, starts;
//!    its command records its start (`date +%s%N`);
//! 4. the referee polls the holder's two pids every millisecond and notes the first instant
//!    it saw both gone (a zombie counts as gone), on the same wall clock as `date`.
//!
//! The holder's `zkw` must exit 75 (lock lost), and the contender's command must start
//! strictly after the referee saw the holder's group gone: a conservative check, since the
//! group died at or before that instant.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

mod common;

use std::fmt;
use std::path::Path;
use std::process::Child;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{finish, running, scratch, spawn_lock_script, spawn_zkw, Out, LOCK_LOST, UNAVAILABLE};
use zkwire_testing::partition::{partition_config, HoldScenario as Scenario, PartitionedEnsemble};
use zkwire_testing::rng::SplitMix64;

const NODES: usize = 3;
const TRIALS: u64 = 5;
/// How often the referee looks at the holder's processes.
const POLL: Duration = Duration::from_millis(1);
/// Both sides' session timeout.
const SESSION_TIMEOUT: &str = "4s";
/// The holder's grace between SIGTERM and SIGKILL; fits the 4 s session (1 s + 267 ms ≤ 2 s).
const KILL_AFTER: &str = "1s";
/// How long the holder's command may take to start, and the contender to be granted.
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// How long the holder's `zkw` may run in all (its command sleeps 60 s: it must be stopped).
const HOLDER_LIMIT: Duration = Duration::from_secs(45);
const HEAL_LIMIT: Duration = Duration::from_secs(40);

/// The holder's command: `$0` is the trial's directory, `$1` its mode. It records its start,
/// starts a child in its own process group, publishes both pids and waits. `stubborn` ignores
/// SIGTERM (so does its `sleep`, which inherits the ignored disposition).
const HOLDER: &str = r#"
if [ "$1" = stubborn ]; then trap '' TERM; fi
date +%s%N > "$0/holder-start"
sleep 60 &
echo "$$ $!" > "$0/pids.tmp" && mv "$0/pids.tmp" "$0/pids"
wait
"#;

/// The contender's command: records the instant it starts, and exits.
const CONTENDER: &str = r#"date +%s%N > "$0/contender-start""#;

/// One ensemble for the binary; trials take turns on it.
fn ensemble() -> MutexGuard<'static, PartitionedEnsemble> {
    static ENSEMBLE: OnceLock<Mutex<PartitionedEnsemble>> = OnceLock::new();
    let cell = ENSEMBLE.get_or_init(|| {
        let ensemble = PartitionedEnsemble::start(NODES, partition_config(200))
            .unwrap_or_else(|e| panic!("a partitionable 3-node ensemble: {e}"));
        Mutex::new(ensemble)
    });
    cell.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lifts every fault when a trial ends, whether it passed or not.
struct Healer;

impl Drop for Healer {
    fn drop(&mut self) {
        ensemble().heal();
    }
}

/// How the holder's command takes SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Dies of it.
    Polite,
    /// Ignores it: only SIGKILL, at the end of the trusted lease, stops it.
    Stubborn,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Self::Polite => "polite",
            Self::Stubborn => "stubborn",
        }
    }
}

/// Wall-clock nanoseconds since the epoch, as `date +%s%N` prints them.
fn now_ns() -> i128 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i128::try_from(since.as_nanos()).unwrap()
}

fn ms(ns: i128) -> f64 {
    // Trial spans are seconds: far inside f64's exact range.
    ns as f64 / 1e6
}

/// The `date +%s%N` stamp in `file`.
fn stamp(file: &Path) -> i128 {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", file.display()))
}

/// When the referee saw the holder's processes last alive and first all gone.
#[derive(Debug, Clone, Copy)]
struct Death {
    last_alive: i128,
    first_gone: i128,
}

/// Polls `pids` every [`POLL`] until none runs; `None` if one still runs after `limit`.
fn watch_death(pids: Vec<u32>, limit: Duration) -> thread::JoinHandle<Option<Death>> {
    thread::spawn(move || {
        let deadline = Instant::now() + limit;
        let mut last_alive = now_ns();
        loop {
            let before = now_ns();
            if !pids.iter().any(|&pid| running(pid)) {
                return Some(Death {
                    last_alive,
                    first_gone: now_ns(),
                });
            }
            last_alive = before;
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(POLL);
        }
    })
}

/// What one trial saw; instants in ns on the wall clock.
struct Verdict {
    mode: Mode,
    cut: i128,
    holder_start: i128,
    death: Death,
    contender_start: i128,
    /// Contender runs refused a session before one was granted the lock.
    retries: u32,
    holder: Out,
}

impl Verdict {
    /// Contender's command start − the referee's first sight of the holder's group gone.
    fn margin_ms(&self) -> f64 {
        ms(self.contender_start - self.death.first_gone)
    }

    fn holder_line(&self) -> &str {
        self.holder.stderr.lines().last().unwrap_or_default()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}: held {:.0} ms before the cut; holder last alive +{:.1} ms, gone +{:.1} ms; \
             contender started +{:.1} ms ({} retries): margin {:.1} ms; holder zkw {:?}: {}",
            self.mode,
            ms(self.cut - self.holder_start),
            ms(self.death.last_alive - self.cut),
            ms(self.death.first_gone - self.cut),
            ms(self.contender_start - self.cut),
            self.retries,
            self.margin_ms(),
            self.holder.code,
            self.holder_line(),
        )
    }
}

/// Starts the holder and returns once its command runs: its `zkw` and the command's pids.
fn start_holder(server: &str, path: &str, dir: &Path, mode: Mode) -> (Child, Vec<u32>) {
    let dir_arg = dir.to_str().unwrap();
    let mut holder = spawn_lock_script(
        server,
        [SESSION_TIMEOUT, path, KILL_AFTER],
        HOLDER,
        &[dir_arg, mode.arg()],
    );
    let pids = dir.join("pids");
    let deadline = Instant::now() + STEP_LIMIT;
    while !pids.exists() {
        if holder.try_wait().unwrap().is_some() {
            let out = finish(holder, STEP_LIMIT);
            panic!("the holder's zkw exited before its command ran: {out:?}");
        }
        assert!(Instant::now() < deadline, "the holder's command never ran");
        thread::sleep(Duration::from_millis(10));
    }
    let text = std::fs::read_to_string(&pids).unwrap();
    let pids: Vec<u32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{text:?}");
    (holder, pids)
}

/// Runs the contender until its command has run; the runs refused a session before that (a
/// server on the quorum's side may be in leader election when it starts).
fn run_contender(server: &str, path: &str, dir: &Path) -> (Out, u32) {
    let dir_arg = dir.to_str().unwrap();
    let deadline = Instant::now() + STEP_LIMIT;
    let mut retries = 0;
    loop {
        let contender = spawn_zkw(
            server,
            &[
                "--session-timeout",
                SESSION_TIMEOUT,
                "lock",
                path,
                "--",
                "sh",
                "-c",
                CONTENDER,
                dir_arg,
            ],
        );
        let out = finish(contender, STEP_LIMIT);
        let ran = dir.join("contender-start").exists();
        if out.code == Some(UNAVAILABLE) && !ran && Instant::now() < deadline {
            retries += 1;
            thread::sleep(Duration::from_millis(100));
            continue;
        }
        assert_eq!(out.code, Some(0), "the contender: {out:?}");
        assert!(ran, "the contender's command never ran: {out:?}");
        return (out, retries);
    }
}

fn trial(scenario: Scenario, n: u64, seed: u64) -> Verdict {
    let mut rng = SplitMix64(seed);
    let mode = if n % 2 == 0 {
        Mode::Polite
    } else {
        Mode::Stubborn
    };
    let (leader, victim, victim_cs, quorum_cs) = {
        let e = ensemble();
        let leader = heal(&e);
        let followers: Vec<usize> = (0..NODES).filter(|&i| i != leader).collect();
        let follower = followers[usize::try_from(rng.below(2)).unwrap()];
        let (victim, quorum_side) = if scenario.holder_on_leader() {
            (leader, follower)
        } else {
            (follower, leader)
        };
        (
            leader,
            victim,
            e.node_connect_string(victim),
            e.node_connect_string(quorum_side),
        )
    };
    let dir = scratch(&format!("partition-{scenario:?}-{seed:x}"));
    let path = format!("/partition/{scenario:?}-{seed:x}");
    let (holder, pids) = start_holder(&victim_cs, &path, &dir, mode);
    let holder = thread::spawn(move || finish(holder, HOLDER_LIMIT));
    let death = watch_death(pids, HOLDER_LIMIT);
    thread::sleep(rng.millis(0, 1500));
    let _healer = Healer;
    let cut = now_ns();
    scenario.apply(&ensemble(), victim, leader);
    let (_contender, retries) = run_contender(&quorum_cs, &path, &dir);
    let holder = holder.join().unwrap();
    let death = death
        .join()
        .unwrap()
        .unwrap_or_else(|| panic!("the holder's command outlived {HOLDER_LIMIT:?}"));
    Verdict {
        mode,
        cut,
        holder_start: stamp(&dir.join("holder-start")),
        death,
        contender_start: stamp(&dir.join("contender-start")),
        retries,
        holder,
    }
}

fn run(scenario: Scenario) {
    // Scenarios partition the one ensemble: one at a time.
    static TURN: Mutex<()> = Mutex::new(());
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let started = Instant::now();
    let mut margins = Vec::new();
    for n in 0..TRIALS {
        let seed = 0x5eed_2400 + n;
        let v = trial(scenario, n, seed);
        println!("{scenario:?} seed {seed:#x}: {v}");
        assert!(
            v.contender_start > v.death.first_gone,
            "{scenario:?} seed {seed:#x}: the contender's command started before the holder's \
             was seen gone: {v}"
        );
        assert_eq!(
            v.holder.code,
            Some(LOCK_LOST),
            "{scenario:?} seed {seed:#x}: the holder's zkw: {:?}",
            v.holder
        );
        assert!(
            v.holder_line().starts_with("zkw: lock ") && !v.holder.stderr.contains("panicked"),
            "{scenario:?} seed {seed:#x}: the holder's zkw: {:?}",
            v.holder
        );
        margins.push((v.mode, v.margin_ms()));
    }
    let mut all: Vec<f64> = margins.iter().map(|&(_, m)| m).collect();
    all.sort_by(f64::total_cmp);
    let least = |mode| {
        margins
            .iter()
            .filter(|&&(m, _)| m == mode)
            .map(|&(_, x)| x)
            .fold(f64::INFINITY, f64::min)
    };
    println!(
        "{scenario:?}: {TRIALS} trials in {:?}; contender start − holder gone: min {:.1} ms, \
         median {:.1} ms (polite min {:.1} ms, stubborn min {:.1} ms)",
        started.elapsed(),
        all[0],
        all[all.len() / 2],
        least(Mode::Polite),
        least(Mode::Stubborn),
    );
    heal(&ensemble());
}

/// Heals every link of `e` and waits for a quorum again; its leader.
fn heal(e: &PartitionedEnsemble) -> usize {
    e.heal();
    e.wait_healed(HEAL_LIMIT)
        .unwrap_or_else(|err| panic!("{err}"))
}

/// One test per scenario.
macro_rules! scenario_tests {
    ($($test:ident: $scenario:ident),* $(,)?) => {$(
        #[test]
        fn $test() {
            run(Scenario::$scenario);
        }
    )*};
}

scenario_tests! {
    m28a_follower_isolated_blackhole: FollowerBlackhole,
    m28b_follower_isolated_reset: FollowerReset,
    m28c_leader_isolated: LeaderIsolated,
    m28d_bridge: Bridge,
    m28e_one_way_from_the_leader: OneWayFromLeader,
}
