//! `zkwire-soak`: mutual exclusion of `zkwire_recipes::Mutex` under faults, with the
//! evidence printed. A correctness soak, not a benchmark (it used to be `zkwire-bench soak`).
//!
//! ```text
//! cargo run --release -p zkwire-soak -- [--acquisitions N] [--contenders N]
//!     [--nodes 3|5] [--seed N] [--max-minutes M] [--leader-kill-every SECS]
//!     [--long-hold-every N] [--no-faults] [--no-partitions] [--ignore-lost]
//! ```
//!
//! A 3-node (or `--nodes 5`) [`PartitionedEnsemble`][ensemble] is started through
//! `zkwire-testing`: every quorum and election link between two servers runs through a relay
//! that can cut it (tickTime 200 ms, syncLimit 5, initLimit 10: a follower notices a silent
//! leader after 1 s). Each contender is a `Client` of its own (session timeout [`T`], the
//! harness's 200 ms tick for the lease, docs/lease.md) whose connect string lists one
//! [`FaultProxy`][proxy] of its own per ensemble member. Contenders loop: `lock_timeout`, a
//! critical section that writes to a [`FencedStore`][fenced-store] (an in-process resource that
//! refuses a fencing token older than the newest it has accepted and records every section as
//! an interval), `release`.
//!
//! The critical section checks that the hold is trusted (`lost()` not ready, `is_held()`)
//! before entering and after a 0–2 ms hold, and stops at once when `lost()` fires
//! (`select!`), recording the instant as the section's "lost at". One acquisition in
//! `--long-hold-every` (default 2000) holds for 0.5–1.5 T instead, so that faults can catch
//! a holder in its critical section: the next heavy fault is aimed at it.
//!
//! Meanwhile, from one seed, every 50–500 ms a fault hits one proxy of a contender (the one
//! it is connected through) or all of them, or the links between the servers:
//! - light faults: a connection reset (RST both ways), or a delay of 2–50 ms on every frame
//!   for 0.3–1.5 s;
//! - heavy faults, one at a time with a 2–8 s pause after each (a stalled contender stalls
//!   the whole lock queue, so back-to-back heavy faults would leave the lock stalled nearly
//!   all the time), half of them on the proxies: a blackhole (both directions held, then
//!   delivered), a one-way client→server loss (frames dropped) or stall (frames held), each
//!   for 0.2–1.5 T, or a random lag of 0..(0.05–1.0 T) on every server→client frame for
//!   0.5–1.5 T;
//! - and half of them (unless `--no-partitions`) partitions *inside* the ensemble, each for
//!   0.5–2 T, only when the servers report the ensemble whole: a follower isolated (all its
//!   links blackholed; or reset, every reconnection reset at once), the leader isolated
//!   (blackholed), a bridge (the leader cut from one follower only, which the others still
//!   see), a one-way cut (what the leader sends to one follower is held), and on 5 nodes a
//!   2|3 split with the leader in the minority. A partition is aimed at the server the
//!   contender in a long hold talks to (found with the `cons` four-letter word), else at a
//!   random server of the right role. After the heal, the next heavy fault waits until the
//!   servers report the ensemble whole again, then the cool-down.
//!
//! Every ~20 s the ensemble's leader is killed and restarted 2–5 s later. Leader kills and
//! partitions take turns: one never starts while the other is under way (a kill during a
//! partition would leave no quorum on 3 nodes, and a restart needs one).
//!
//! Two critical sections of different contenders overlap when their intervals intersect.
//! An overlap is *excused* when the earlier holder's `lost()` had fired before the later
//! holder entered. Non-excused overlaps, stale writes refused by the store, and lock nodes
//! left behind once every contender has closed its session (listed from a fresh session)
//! must all be zero: otherwise the run exits with code 2.
//! Exit codes: 0 when every check passed, 2 when one failed, 1 when the run could not be
//! made (a bad command line included).
//!
//! The parts: [`args`] (the command line), [`run`] (the ensemble, the proxies and the tasks),
//! [`contender`] (the contenders' loop and critical section), [`store`] (the fenced store
//! and the overlap check), [`faults`] (the proxy faults), [`partition`] and [`kills`] (the
//! servers' faults), [`shared`] (the state every task reads and writes), [`summary`] (the
//! verdicts and the evidence).
//!
//! [ensemble]: zkwire_testing::partition::PartitionedEnsemble
//! [proxy]: zkwire_testing::proxy::FaultProxy
//! [fenced-store]: crate::store::FencedStore
#![forbid(unsafe_code)]

mod args;
mod contender;
mod draw;
mod faults;
mod kills;
mod partition;
mod run;
mod shared;
mod store;
mod summary;

use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;

/// The session timeout every contender asks for.
const T: Duration = Duration::from_secs(4);
/// How long the ensemble may take to be whole again (after a heal, a restart, at the end).
const HEAL_LIMIT: Duration = Duration::from_secs(60);
/// The lock directory (created by the mutex, as containers).
const LOCK_DIR: &str = "/zkwire-soak/lock";
/// How long a release (or a close) may take before it is left to the background.
const RELEASE_TIMEOUT: Duration = T;
/// One attempt to open a session.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(8);
/// After a heavy fault ends, no other one starts for this long (drawn in the range): one
/// stalled contender stalls the whole lock queue, so back-to-back heavy faults would leave
/// the lock stalled nearly all the time. Light faults go on meanwhile.
const HEAVY_COOL_DOWN: (Duration, Duration) = (Duration::from_secs(2), Duration::from_secs(8));
/// Overlaps and refusals described in detail.
const SHOWN: usize = 10;

/// Any failure to make the run: a message.
#[derive(Debug)]
struct SoakError(String);

impl fmt::Display for SoakError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SoakError {}

impl From<std::io::Error> for SoakError {
    fn from(e: std::io::Error) -> Self {
        Self(format!("io: {e}"))
    }
}

impl From<zkwire_testing::server::ServerError> for SoakError {
    fn from(e: zkwire_testing::server::ServerError) -> Self {
        Self(format!("server: {e}"))
    }
}

fn main() -> ExitCode {
    let settings = match args::Settings::try_parse() {
        Ok(settings) => settings,
        Err(e) => {
            // `--help` is not a failure (0); a bad command line is (1, where clap's own exit
            // says 2), but not a failed check (2).
            let _ = e.print();
            return ExitCode::from(u8::from(e.use_stderr()));
        }
    };
    match run::main(settings) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("zkwire-soak: {e}");
            ExitCode::FAILURE
        }
    }
}
