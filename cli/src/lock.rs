//! `lock`, `rlock`, `wlock` and `sem`: run a command while holding a lock (or a lease).
//!
//! The command gets `ZKW_FENCING_TOKEN` (the lock node's czxid, strictly increasing across
//! holders) and `ZKW_LOCK_NODE` (the lock node's path) in its environment. When the command
//! exits, the lock is released and zkw exits with the command's code. When the lock is lost
//! while it runs, the command gets SIGTERM, then SIGKILL after `--kill-after`, and zkw exits
//! with [`LOCK_LOST`].

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use zkwire::Client;
use zkwire_recipes::{
    Lease, LockError, LostReason, Mutex, MutexGuard, ReadGuard, RwLock, Semaphore, SemaphoreLimit,
    WriteGuard,
};

use crate::args::{check_path, Parsed};
use crate::child::{exit_code, Running, Stopped};
use crate::connect::Global;
use crate::duration::show_duration;
use crate::fail::{Failure, FAILED, INTERRUPTED, LOCK_LOST, LOCK_TIMEOUT, UNAVAILABLE};
use crate::out;

/// The environment variable carrying the fencing token.
pub(crate) const FENCING_TOKEN_ENV: &str = "ZKW_FENCING_TOKEN";
/// The environment variable carrying the lock node's path.
pub(crate) const LOCK_NODE_ENV: &str = "ZKW_LOCK_NODE";
/// How long zkw tries to delete a lock node after the hold was lost.
const LOST_RELEASE_LIMIT: Duration = Duration::from_secs(2);
/// How long a command has between SIGTERM and SIGKILL by default.
pub(crate) const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);

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
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Self::Mutex => "lock",
            Self::Read => "read lock",
            Self::Write => "write lock",
            Self::Semaphore(_) => "lease",
        }
    }
}

/// The arguments of a lock verb.
#[derive(Debug)]
struct LockArgs {
    path: String,
    timeout: Option<Duration>,
    kill_after: Duration,
    foreground: bool,
    command: Vec<String>,
}

impl LockArgs {
    fn from_parsed(p: &Parsed) -> Result<Self, Failure> {
        let path = p.expect_operands(&["PATH"])?.remove(0);
        check_path(&path, false)?;
        if p.command.is_empty() {
            return Err(Failure::usage("missing command to run (PATH -- CMD ARGS…)"));
        }
        Ok(Self {
            path,
            timeout: p.duration("timeout")?,
            kill_after: p.duration("kill-after")?.unwrap_or(DEFAULT_KILL_AFTER),
            foreground: p.has("foreground"),
            command: p.command.clone(),
        })
    }
}

/// The number of leases `sem` was given.
///
/// # Errors
/// A usage failure when `--leases` is missing or not a positive number.
pub(crate) fn leases(p: &Parsed) -> Result<u32, Failure> {
    match p.number::<u32>("leases")? {
        Some(n) if n > 0 => Ok(n),
        Some(_) => Err(Failure::usage("--leases must be at least 1")),
        None => Err(Failure::usage("sem needs --leases N")),
    }
}

/// Runs the command under the lock; returns the exit code.
pub(crate) async fn run(g: &Global, p: &Parsed, kind: Kind) -> Result<u8, Failure> {
    let args = LockArgs::from_parsed(p)?;
    // From here on, Ctrl-C and SIGTERM are ours to handle: nothing may leave a node behind.
    let mut signals = Signals::new()?;
    let client = g.connect().await?;
    let result = hold_and_run(&client, g, &args, kind, &mut signals).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), client.close()).await;
    result
}

async fn hold_and_run(
    client: &Client,
    g: &Global,
    args: &LockArgs,
    kind: Kind,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let acquire = acquire(client.clone(), args.path.clone(), kind, args.timeout);
    let held = tokio::select! {
        held = acquire => held.map_err(|e| acquire_failure(args, kind, &e))?,
        name = signals.any() => {
            return Err(Failure::new(signal_exit_code(name), format!("interrupted by SIG{name} while waiting for the {} on {}", kind.noun(), args.path)));
        }
    };
    let env = [
        (FENCING_TOKEN_ENV, held.fencing_token().to_string()),
        (LOCK_NODE_ENV, held.path().to_owned()),
    ];
    let mut running = match Running::spawn(&args.command, &env, args.foreground) {
        Ok(running) => running,
        Err(failure) => {
            let _ = tokio::time::timeout(g.session_timeout, held.release()).await;
            return Err(failure);
        }
    };
    supervise(g, args, kind, held, &mut running, signals).await
}

/// Waits for the command while watching the hold; releases when the command exits.
async fn supervise(
    g: &Global,
    args: &LockArgs,
    kind: Kind,
    held: Held,
    running: &mut Running,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let lost = held.lost();
    tokio::pin!(lost);
    let status = loop {
        tokio::select! {
            biased;
            reason = &mut lost => return lost_while_running(g, args, kind, held, running, reason).await,
            status = running.wait() => break status,
            name = signals.any() => forward(running, name, args.foreground),
        }
    };
    let code = status
        .map(exit_code)
        .map_err(|e| Failure::new(FAILED, format!("cannot wait for the command: {e}")))?;
    // The verdict is about the command's run: was the hold intact when it exited?
    let intact = held.is_held();
    let released = tokio::time::timeout(g.session_timeout, held.release()).await;
    match (intact, released) {
        (true, Ok(Ok(()))) => Ok(code),
        (true, Ok(Err(e))) => {
            // E.g. our own delete applied just before a connection loss, then retried.
            out::note(&format!("releasing the {}: {}", kind.noun(), lost_text(&e)));
            Ok(code)
        }
        (true, Err(_)) => {
            out::note(&format!(
                "could not release the {} in time; it is freed when the session ends",
                kind.noun()
            ));
            Ok(code)
        }
        (false, released) => Err(Failure::new(
            LOCK_LOST,
            format!(
                "{} lost as the command exited ({}); it had exited with code {code}",
                kind.noun(),
                released
                    .ok()
                    .and_then(Result::err)
                    .map_or_else(|| "hold no longer trusted".to_owned(), |e| lost_text(&e))
            ),
        )),
    }
}

/// The hold is gone while the command runs: stop the command, report, exit [`LOCK_LOST`].
async fn lost_while_running(
    g: &Global,
    args: &LockArgs,
    kind: Kind,
    held: Held,
    running: &mut Running,
    reason: LostReason,
) -> Result<u8, Failure> {
    let how = match running.terminate(args.kill_after).await {
        Stopped::Terminated(_) => "terminated the command",
        Stopped::Killed => "killed the command (it outlived SIGTERM)",
    };
    // Best effort, briefly: the node may still exist (after a disconnection, say); if it
    // cannot be deleted now, it goes when the session expires.
    let _ = tokio::time::timeout(g.session_timeout.min(LOST_RELEASE_LIMIT), held.release()).await;
    Err(Failure::new(
        LOCK_LOST,
        format!("{} lost ({reason}); {how}", kind.noun()),
    ))
}

fn lost_text(e: &LockError) -> String {
    match e {
        LockError::Lost(reason) => reason.to_string(),
        other => other.to_string(),
    }
}

/// Passes a signal zkw received on to the command. In the foreground the terminal already
/// sent Ctrl-C to the command too, so SIGINT is not passed twice.
fn forward(running: &Running, name: &str, foreground: bool) {
    if !(foreground && name == "INT") {
        running.signal(name);
    }
}

fn acquire_failure(args: &LockArgs, kind: Kind, error: &LockError) -> Failure {
    match (error, args.timeout) {
        (LockError::Timeout, Some(t)) => Failure::new(
            LOCK_TIMEOUT,
            format!(
                "{} on {} not acquired within {}",
                kind.noun(),
                args.path,
                show_duration(t)
            ),
        ),
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

/// zkw's exit code when a signal stops it: 128 + the signal's number.
fn signal_exit_code(name: &str) -> u8 {
    match name {
        "HUP" => 129,
        "TERM" => 143,
        _ => INTERRUPTED,
    }
}

/// A granted lock or lease.
#[derive(Debug)]
enum Held {
    Mutex(MutexGuard),
    Read(ReadGuard),
    Write(WriteGuard),
    Lease(Lease),
}

impl Held {
    fn is_held(&self) -> bool {
        match self {
            Self::Mutex(g) => g.is_held(),
            Self::Read(g) => g.is_held(),
            Self::Write(g) => g.is_held(),
            Self::Lease(g) => g.is_held(),
        }
    }

    fn fencing_token(&self) -> i64 {
        match self {
            Self::Mutex(g) => g.fencing_token(),
            Self::Read(g) => g.fencing_token(),
            Self::Write(g) => g.fencing_token(),
            Self::Lease(g) => g.fencing_token(),
        }
    }

    fn path(&self) -> &str {
        match self {
            Self::Mutex(g) => g.path(),
            Self::Read(g) => g.path(),
            Self::Write(g) => g.path(),
            Self::Lease(g) => g.path(),
        }
    }

    fn lost(&self) -> Pin<Box<dyn Future<Output = LostReason> + Send>> {
        match self {
            Self::Mutex(g) => Box::pin(g.lost()),
            Self::Read(g) => Box::pin(g.lost()),
            Self::Write(g) => Box::pin(g.lost()),
            Self::Lease(g) => Box::pin(g.lost()),
        }
    }

    async fn release(self) -> Result<(), LockError> {
        match self {
            Self::Mutex(g) => g.release().await,
            Self::Read(g) => g.release().await,
            Self::Write(g) => g.release().await,
            Self::Lease(g) => g.release().await,
        }
    }
}

/// Acquires the recipe `kind` on `path`, within `timeout` if given.
async fn acquire(
    client: Client,
    path: String,
    kind: Kind,
    timeout: Option<Duration>,
) -> Result<Held, LockError> {
    match (kind, timeout) {
        (Kind::Mutex, None) => Mutex::new(client, path).lock().await.map(Held::Mutex),
        (Kind::Mutex, Some(t)) => Mutex::new(client, path)
            .lock_timeout(t)
            .await
            .map(Held::Mutex),
        (Kind::Read, None) => RwLock::new(client, path).read().await.map(Held::Read),
        (Kind::Read, Some(t)) => RwLock::new(client, path)
            .read_timeout(t)
            .await
            .map(Held::Read),
        (Kind::Write, None) => RwLock::new(client, path).write().await.map(Held::Write),
        (Kind::Write, Some(t)) => RwLock::new(client, path)
            .write_timeout(t)
            .await
            .map(Held::Write),
        (Kind::Semaphore(n), t) => {
            let semaphore = Semaphore::new(client, path, SemaphoreLimit::Fixed(n));
            let lease = match t {
                None => semaphore.acquire_one().await,
                Some(t) => semaphore.acquire_one_timeout(t).await,
            };
            lease.map(Held::Lease)
        }
    }
}

/// The signals zkw handles while it waits for a lock or a command: SIGINT, SIGTERM, SIGHUP.
struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Signals {
    fn new() -> Result<Self, Failure> {
        let listen = |kind| {
            signal(kind).map_err(|e| Failure::new(FAILED, format!("cannot handle signals: {e}")))
        };
        Ok(Self {
            int: listen(SignalKind::interrupt())?,
            term: listen(SignalKind::terminate())?,
            hup: listen(SignalKind::hangup())?,
        })
    }

    /// The name of the next signal received (`INT`, `TERM` or `HUP`).
    async fn any(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "INT",
            _ = self.term.recv() => "TERM",
            _ = self.hup.recv() => "HUP",
        }
    }
}
