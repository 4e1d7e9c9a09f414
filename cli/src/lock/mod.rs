//! `lock`, `rlock`, `wlock`, `sem` and `leader`: run a command while holding a lock, a lease
//! or the leadership of an election.
//!
//! The command gets `ZKW_FENCING_TOKEN` (the lock node's czxid, strictly increasing across
//! holders) and `ZKW_LOCK_NODE` (the lock node's path) in its environment. When the command
//! exits, the lock is released and zkw exits with the command's code.
//!
//! The command must be gone before the hold can end. A hold is trusted until the session's
//! lease deadline (the send instant of the newest request the quorum's leader is known to
//! have heard of, plus the session timeout) less a margin: the leader cannot expire the
//! session, and so cannot hand the lock on, before then. So the command gets SIGTERM
//! `--kill-after` before that instant and SIGKILL at it, unless the lease is renewed
//! meanwhile (on a healthy session it lags now + T by at most `zkwire::lease_staleness`,
//! which the `--kill-after` rule leaves room for). When the hold is lost for another reason (node
//! deleted, session ended), the command gets SIGTERM at once and SIGKILL after
//! `--kill-after`, or at the end of the lease if that comes first. Either way zkw exits with
//! [`LOCK_LOST`](crate::fail::LOCK_LOST).
//!
//! The verbs and their arguments are here; acquiring each recipe in `held.rs`; running the
//! command while watching the hold in `supervise.rs`; the `--kill-after` rule in
//! `kill_after.rs`; the signals zkw handles and passes on in `signals.rs`.

mod held;
mod kill_after;
mod signals;
mod supervise;
#[cfg(test)]
mod tests;

use std::time::Duration;

use zkwire::{Client, Error};
use zkwire_recipes::{LockError, Mutex};

#[cfg(test)]
pub(crate) use kill_after::DEFAULT_KILL_AFTER;
pub(crate) use signals::{forward, signal_exit_code, Signals};

use crate::cli::{show as show_duration, HoldArgs, RevokeArgs};
use crate::connect::Global;
use crate::fail::{Failure, FAILED, LOCK_TIMEOUT, UNAVAILABLE};
use crate::interrupt::until_stopped;
use crate::nodes::check_path;
use crate::out;
use supervise::hold_and_run;

/// The environment variable carrying the fencing token.
pub(crate) const FENCING_TOKEN_ENV: &str = "ZKW_FENCING_TOKEN";
/// The environment variable carrying the lock node's path.
pub(crate) const LOCK_NODE_ENV: &str = "ZKW_LOCK_NODE";

/// Which recipe to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `lock`: the mutex.
    Mutex,
    /// `rlock`: the read side of the read/write lock.
    Read,
    /// `wlock`: the write side of the read/write lock.
    Write,
    /// `sem`: one lease of a semaphore with this many leases.
    Semaphore(u32),
    /// `leader`: the leadership of a Curator `LeaderLatch` election.
    Leader,
}

impl Kind {
    /// The zkw verb that takes this lock.
    fn verb(self) -> &'static str {
        match self {
            Self::Mutex => "lock",
            Self::Read => "rlock",
            Self::Write => "wlock",
            Self::Semaphore(_) => "sem",
            Self::Leader => "leader",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Self::Mutex => "lock",
            Self::Read => "read lock",
            Self::Write => "write lock",
            Self::Semaphore(_) => "lease",
            Self::Leader => "leadership",
        }
    }
}

/// The arguments of a lock verb.
#[derive(Debug)]
struct LockArgs {
    path: String,
    timeout: Option<Duration>,
    /// `--kill-after`, if given.
    kill_after: Option<Duration>,
    foreground: bool,
    /// `--revocable`: a revocation request stops the command and releases.
    revocable: bool,
    /// `leader --id`: the participant id (the latch node's data).
    id: String,
    command: Vec<String>,
}

impl LockArgs {
    /// The checked arguments of a lock verb (`id`: `leader --id`).
    fn new(hold: &HoldArgs, revocable: bool, id: Option<&str>) -> Result<Self, Failure> {
        check_path(&hold.path, false)?;
        Ok(Self {
            path: hold.path.clone(),
            timeout: hold.timeout,
            kill_after: hold.kill_after,
            foreground: hold.run.foreground,
            revocable,
            id: id.map_or_else(default_participant_id, str::to_owned),
            command: hold.run.command.clone(),
        })
    }
}

/// `HOST-PID`: who leads, for `zkw leader` without `--id` (Curator's participants show it).
fn default_participant_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = match host.trim() {
        "" => "zkw",
        name => name,
    };
    format!("{host}-{}", std::process::id())
}

/// Runs the command under the lock; returns the exit code. `revocable`: `--revocable`;
/// `id`: `leader --id`.
pub(crate) async fn run(
    g: &Global,
    hold: &HoldArgs,
    revocable: bool,
    id: Option<&str>,
    kind: Kind,
) -> Result<u8, Failure> {
    let args = LockArgs::new(hold, revocable, id)?;
    // From here on, Ctrl-C and SIGTERM are ours to handle: nothing may leave a node behind.
    let mut signals = Signals::new()?;
    let connecting = signals.interrupted("connecting");
    let client = until_stopped(g.connect(), connecting).await?;
    let result = hold_and_run(&client, g, &args, kind, &mut signals).await;
    // The lock is released by now: closing the session need not hold zkw's exit up long.
    g.close_within(&client, Duration::from_secs(2)).await;
    result
}

/// `zkw revoke PATH [NODE]`: asks the holder of the mutex at PATH (or the holder of NODE, a
/// child of PATH or a full path, for any lock kind) to release, as Curator's `Revoker` does.
pub(crate) async fn revoke(g: &Global, a: &RevokeArgs) -> Result<(), Failure> {
    let path = a.path.clone();
    check_path(&path, false)?;
    let named = a.node.clone();
    let node = g
        .with_session(|client| async move {
            let node = match named {
                Some(node) if node.starts_with('/') => node,
                Some(child) => zkwire::path::join(&path, &child),
                None => match Mutex::new(client.clone(), path.clone()).holder().await {
                    Ok(Some(holder)) => holder,
                    Ok(None) => return Err(no_holder(&client, &path).await),
                    Err(e) => return Err(Failure::lock(&path, &e)),
                },
            };
            match zkwire_recipes::revoke(&client, &node).await {
                Ok(true) => Ok(node),
                Ok(false) => Err(Failure::new(FAILED, format!("{node}: no such lock node"))),
                Err(e) => Err(Failure::lock(&node, &e)),
            }
        })
        .await?;
    if g.json {
        return out::json(&serde_json::json!({"revoked": node}));
    }
    out::line(&format!("asked the holder of {node} to release"))
}

/// Why `revoke PATH` found no holder: a mistyped PATH must not read as a free lock.
async fn no_holder(client: &Client, path: &str) -> Failure {
    match client.exists(path).await {
        Ok(None) => Failure::zk(path, &Error::NoNode)
            .with_message(format!("{path}: node does not exist (no lock there)")),
        Ok(Some(_)) => Failure::new(FAILED, format!("{path}: no one holds the lock")),
        Err(e) => Failure::zk(path, &e),
    }
}

fn acquire_failure(args: &LockArgs, kind: Kind, error: &LockError) -> Failure {
    match (error, args.timeout) {
        (LockError::Timeout, Some(t)) if t.is_zero() => Failure::new(
            LOCK_TIMEOUT,
            format!(
                "{} on {} not free (--timeout 0 tried once)",
                kind.noun(),
                args.path
            ),
        ),
        (LockError::Timeout, Some(t)) => Failure::new(
            LOCK_TIMEOUT,
            format!(
                "{} on {} not acquired within {}",
                kind.noun(),
                args.path,
                show_duration(t)
            ),
        ),
        // Refused credentials end the session too, but a retry cannot help: as any verb.
        (LockError::Client(Error::AuthFailed | Error::SessionClosedRequireSaslAuth), _) => {
            Failure::lock(&args.path, error)
        }
        (LockError::Client(e), _) if e.is_terminal() => Failure::new(
            UNAVAILABLE,
            format!(
                "{}: the session ended while waiting for the {} ({e})",
                args.path,
                kind.noun()
            ),
        ),
        _ => Failure::lock(&args.path, error),
    }
}
