//! `lock`, `rlock`, `wlock`, `sem` and `leader`: run a command while holding a lock, a lease
//! or the leadership of an election.
//!
//! The command gets `ZKW_FENCING_TOKEN` (the lock node's czxid, strictly increasing across
//! holders) and `ZKW_LOCK_NODE` (the lock node's path) in its environment. When the command
//! exits, the lock is released and zkw exits with the command's code.
//!
//! The command must be gone before the hold can end. A hold is trusted until the session's
//! lease deadline (the send instant of the newest request the server answered, plus the
//! session timeout) less a margin: the server cannot expire the session, and so cannot hand
//! the lock on, before then. So the command gets SIGTERM `--kill-after` before that instant
//! and SIGKILL at it, unless the lease is renewed meanwhile (as it is every third of the
//! session timeout on a healthy session). When the hold is lost for another reason (node
//! deleted, session ended), the command gets SIGTERM at once and SIGKILL after
//! `--kill-after`, or at the end of the lease if that comes first. Either way zkw exits with
//! [`LOCK_LOST`].

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use tokio::signal::unix::{signal, SignalKind};
use zkwire::Client;
use zkwire_recipes::{
    lease_margin, LeaderLatch, Leadership, Lease, LockError, LostReason, Mutex, MutexGuard,
    ReadGuard, RwLock, Semaphore, SemaphoreLimit, WriteGuard,
};

use crate::child::{exit_code, Running, Stopped};
use crate::cli::{show as show_duration, HoldArgs, RevokeArgs};
use crate::connect::Global;
use crate::fail::{Failure, FAILED, INTERRUPTED, LOCK_LOST, LOCK_TIMEOUT, REVOKED, UNAVAILABLE};
use crate::nodes::check_path;
use crate::out;

/// The environment variable carrying the fencing token.
pub(crate) const FENCING_TOKEN_ENV: &str = "ZKW_FENCING_TOKEN";
/// The environment variable carrying the lock node's path.
pub(crate) const LOCK_NODE_ENV: &str = "ZKW_LOCK_NODE";
/// How long zkw tries to delete a lock node after the hold was lost.
const LOST_RELEASE_LIMIT: Duration = Duration::from_secs(2);
/// How long a command has between SIGTERM and SIGKILL by default, when the session timeout
/// leaves room for it (see [`longest_kill_after`]).
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
            foreground: hold.foreground,
            revocable,
            id: id.map_or_else(default_participant_id, str::to_owned),
            command: hold.command.clone(),
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
    let client = g.connect().await?;
    let result = hold_and_run(&client, g, &args, kind, &mut signals).await;
    if g.shared.is_none() {
        let _ = tokio::time::timeout(Duration::from_secs(2), client.close()).await;
    }
    result
}

async fn hold_and_run(
    client: &Client,
    g: &Global,
    args: &LockArgs,
    kind: Kind,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    // Checked against what the server granted, before waiting for the lock.
    let granted = client.session_timeout().unwrap_or(g.session_timeout);
    let kill_after = kill_after_for(args.kill_after, granted, g.session_timeout)?;
    let acquire = acquire(client.clone(), args, kind);
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
    let watch = Watch {
        client,
        kind,
        kill_after,
    };
    supervise(g, args, &watch, held, &mut running, signals).await
}

/// What [`supervise`] needs besides the hold and the command.
struct Watch<'a> {
    client: &'a Client,
    kind: Kind,
    /// `--kill-after`, checked against the session timeout.
    kill_after: Duration,
}

/// Why the command is being stopped.
#[derive(Debug, Clone, Copy)]
enum Why {
    /// The hold was lost.
    Lost(LostReason),
    /// The hold stops being trusted within `--kill-after` and the lease was not renewed: no
    /// request acknowledged for this long (`None`: the session has no lease any more).
    Expiring(Option<Duration>),
    /// `--revocable`, and someone asked for the lock (`zkw revoke`, Curator's `Revoker`).
    Revoked,
}

impl Why {
    fn describe(self, noun: &str) -> String {
        match self {
            Self::Lost(reason) => format!("{noun} lost ({reason})"),
            Self::Expiring(Some(since)) => format!(
                "{noun} about to expire (the leader vouched for none of our requests in the last {} ms)",
                since.as_millis()
            ),
            Self::Expiring(None) => format!("{noun} lost (the session's lease ended)"),
            Self::Revoked => format!("{noun} revoked by request"),
        }
    }

    /// zkw's exit code when the command was stopped for this.
    fn exit_code(self) -> u8 {
        match self {
            Self::Revoked => REVOKED,
            Self::Lost(_) | Self::Expiring(_) => LOCK_LOST,
        }
    }
}

/// Waits for the command while watching the hold; releases when the command exits.
async fn supervise(
    g: &Global,
    args: &LockArgs,
    watch: &Watch<'_>,
    held: Held,
    running: &mut Running,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let kind = watch.kind;
    let lost = held.lost();
    tokio::pin!(lost);
    let mut revoked = Some(held.revoked());
    let status = loop {
        // SIGTERM is due --kill-after before the hold stops being trusted. Read again at
        // every wake-up: the lease has usually been renewed meanwhile.
        let now = Instant::now();
        let term_at = held
            .trusted_until()
            .and_then(|until| until.checked_sub(watch.kill_after))
            .filter(|&at| at > now);
        let Some(term_at) = term_at else {
            let why = match ready_now(&mut lost).await {
                Some(reason) => Why::Lost(reason),
                None => Why::Expiring(unacknowledged_for(watch.client)),
            };
            return stop_command(g, watch, held, running, why).await;
        };
        tokio::select! {
            biased;
            reason = &mut lost => return stop_command(g, watch, held, running, Why::Lost(reason)).await,
            () = revocation(&mut revoked) => {
                if args.revocable {
                    return stop_command(g, watch, held, running, Why::Revoked).await;
                }
                // Heard once, then ignored: without --revocable the command keeps the lock.
                revoked = None;
                out::note(&format!(
                    "revocation of the {} on {} requested; ignored (zkw {} without --revocable)",
                    kind.noun(),
                    args.path,
                    kind.verb()
                ));
            }
            // The command and whatever it left running in its group: the lock covers all.
            status = running.wait_group() => break status,
            name = signals.any() => forward(running, name, args.foreground),
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(term_at)) => {}
        }
    };
    let code = status
        .map(exit_code)
        .map_err(|e| Failure::new(FAILED, format!("cannot wait for the command: {e}")))?;
    release_after_exit(g, kind, held, code).await
}

/// The command exited with `code` while we held the lock: release it, and say whether the
/// hold was intact through the command's run (the verdict `zkw` exits with).
async fn release_after_exit(g: &Global, kind: Kind, held: Held, code: u8) -> Result<u8, Failure> {
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

/// The hold is gone, or about to be: stop the command (SIGTERM now, SIGKILL after
/// `--kill-after` or at the end of the lease, whichever comes first), report, exit
/// [`LOCK_LOST`].
async fn stop_command(
    g: &Global,
    watch: &Watch<'_>,
    held: Held,
    running: &mut Running,
    why: Why,
) -> Result<u8, Failure> {
    let now = Instant::now();
    // Without a lease (the session ended) the lock may be someone else's already.
    let lease_end = held
        .trusted_until()
        .or_else(|| lease_end(watch.client))
        .unwrap_or(now);
    let kill_at = now
        .checked_add(watch.kill_after)
        .map_or(lease_end, |at| at.min(lease_end));
    let how = match running.stop(tokio::time::Instant::from_std(kill_at)).await {
        Stopped::Terminated(_) => "terminated the command",
        Stopped::Killed => "killed the command (it outlived SIGTERM)",
    };
    // Best effort, briefly: the node may still exist (after a disconnection, say); if it
    // cannot be deleted now, it goes when the session expires.
    let _ = tokio::time::timeout(g.session_timeout.min(LOST_RELEASE_LIMIT), held.release()).await;
    Err(Failure::new(
        why.exit_code(),
        format!("{}; {how}", why.describe(watch.kind.noun())),
    ))
}

/// Resolves when a revocation is requested; never once it has been heard (`None`).
async fn revocation(revoked: &mut Option<Pin<Box<dyn Future<Output = ()> + Send>>>) {
    match revoked {
        Some(requested) => requested.await,
        None => std::future::pending().await,
    }
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
                None => Mutex::new(client.clone(), path.clone())
                    .holder()
                    .await
                    .map_err(|e| Failure::lock(&path, &e))?
                    .ok_or_else(|| {
                        Failure::new(FAILED, format!("{path}: no one holds the lock"))
                    })?,
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

/// `lost` if it has resolved already, without waiting.
async fn ready_now<F: Future<Output = LostReason> + Unpin>(lost: &mut F) -> Option<LostReason> {
    tokio::select! {
        biased;
        reason = lost => Some(reason),
        () = std::future::ready(()) => None,
    }
}

/// Until when the session's lease may be trusted, whatever the hold: the lease deadline less
/// the same margin as the holds'; `None` once the session has no lease.
fn lease_end(client: &Client) -> Option<Instant> {
    let margin = lease_margin(client.session_timeout()?);
    client.lease_deadline()?.checked_sub(margin)
}

/// How long ago the newest request the server answered was sent.
fn unacknowledged_for(client: &Client) -> Option<Duration> {
    let acknowledged = client
        .lease_deadline()?
        .checked_sub(client.session_timeout()?)?;
    Some(acknowledged.elapsed())
}

/// The longest `--kill-after` that fits the negotiated session timeout `t`:
/// `t / 2 − lease_margin(t)`; `None` when not even zero fits.
///
/// This is the one place the rule lives. The command gets SIGTERM `--kill-after` before the
/// hold stops being trusted, i.e. `t − margin − kill_after` after the newest acknowledged
/// request. That must never happen on a healthy session, which renews its lease at least
/// every `t / 3` plus a round trip. With `kill_after + margin ≤ t / 2`, SIGTERM is due no
/// sooner than `t / 2` after a renewal: a sixth of `t` to spare for the round trip and for
/// late timers.
fn longest_kill_after(t: Duration) -> Option<Duration> {
    (t / 2).checked_sub(lease_margin(t))
}

/// The `--kill-after` to use: the one given if it fits the negotiated session timeout
/// `granted` ([`longest_kill_after`]), else a usage failure naming both and the fix; without
/// one, [`DEFAULT_KILL_AFTER`] or the longest that fits if shorter. `asked` is the session
/// timeout zkw asked for.
fn kill_after_for(
    given: Option<Duration>,
    granted: Duration,
    asked: Duration,
) -> Result<Duration, Failure> {
    let longest = longest_kill_after(granted);
    match (given, longest) {
        (None, Some(longest)) => return Ok(DEFAULT_KILL_AFTER.min(longest)),
        (Some(k), Some(longest)) if k <= longest => return Ok(k),
        _ => {}
    }
    let timeout = if granted == asked {
        format!("the session timeout {}", show_duration(granted))
    } else {
        format!(
            "the session timeout {} (the server's limits; {} was asked)",
            show_duration(granted),
            show_duration(asked)
        )
    };
    let need = shortest_session_timeout(given.unwrap_or_default());
    let message = match (given, longest) {
        (Some(k), Some(longest)) => format!(
            "--kill-after {} does not fit {timeout}: --kill-after plus a margin of {} must not exceed half the session timeout; use --session-timeout {} or more, or --kill-after {} or less",
            show_duration(k),
            show_duration(lease_margin(granted)),
            show_duration(need),
            show_duration(round_down(longest)),
        ),
        _ => format!(
            "{timeout} is too short to run a command under a lock; use --session-timeout {} or more",
            show_duration(need)
        ),
    };
    Err(Failure::usage(message))
}

/// The shortest session timeout, in whole tenths of a second, that `kill_after` fits.
fn shortest_session_timeout(kill_after: Duration) -> Duration {
    let fits = |ms: u64| {
        longest_kill_after(Duration::from_millis(ms)).is_some_and(|longest| longest >= kill_after)
    };
    // The longest kill-after only grows with the session timeout: bisect.
    let (mut low, mut high) = (0_u64, u64::from(u32::MAX));
    if !fits(high) {
        return Duration::from_millis(high);
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Duration::from_millis(high.div_ceil(100) * 100)
}

/// `d` rounded down to a tenth of a second (kept when shorter than that).
fn round_down(d: Duration) -> Duration {
    let tenths = d.as_millis() / 100;
    if tenths == 0 {
        d
    } else {
        Duration::from_millis(u64::try_from(tenths * 100).unwrap_or(u64::MAX))
    }
}

fn lost_text(e: &LockError) -> String {
    match e {
        LockError::Lost(reason) => reason.to_string(),
        other => other.to_string(),
    }
}

/// Passes a signal zkw received on to the command. In the foreground the terminal already
/// sent Ctrl-C to the command too, so SIGINT is not passed twice.
pub(crate) fn forward(running: &Running, name: &str, foreground: bool) {
    let signal = match name {
        "INT" if foreground => return,
        "INT" => Signal::INT,
        "HUP" => Signal::HUP,
        _ => Signal::TERM,
    };
    running.signal(signal);
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
pub(crate) fn signal_exit_code(name: &str) -> u8 {
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
    /// The latch is kept to leave the election on release.
    Leader(LeaderLatch, Leadership),
}

impl Held {
    fn is_held(&self) -> bool {
        match self {
            Self::Mutex(g) => g.is_held(),
            Self::Read(g) => g.is_held(),
            Self::Write(g) => g.is_held(),
            Self::Lease(g) => g.is_held(),
            Self::Leader(_, l) => l.is_held(),
        }
    }

    fn fencing_token(&self) -> i64 {
        match self {
            Self::Mutex(g) => g.fencing_token(),
            Self::Read(g) => g.fencing_token(),
            Self::Write(g) => g.fencing_token(),
            Self::Lease(g) => g.fencing_token(),
            Self::Leader(_, l) => l.fencing_token(),
        }
    }

    fn path(&self) -> &str {
        match self {
            Self::Mutex(g) => g.path(),
            Self::Read(g) => g.path(),
            Self::Write(g) => g.path(),
            Self::Lease(g) => g.path(),
            Self::Leader(_, l) => l.path(),
        }
    }

    /// Until when the hold may be trusted; moves forward as the lease is renewed.
    fn trusted_until(&self) -> Option<Instant> {
        match self {
            Self::Mutex(g) => g.trusted_until(),
            Self::Read(g) => g.trusted_until(),
            Self::Write(g) => g.trusted_until(),
            Self::Lease(g) => g.trusted_until(),
            Self::Leader(_, l) => l.trusted_until(),
        }
    }

    fn revoked(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        match self {
            Self::Mutex(g) => Box::pin(g.revoked()),
            Self::Read(g) => Box::pin(g.revoked()),
            Self::Write(g) => Box::pin(g.revoked()),
            Self::Lease(g) => Box::pin(g.revoked()),
            // Curator's latch has no revocation: leadership ends by leaving.
            Self::Leader(..) => Box::pin(std::future::pending()),
        }
    }

    fn lost(&self) -> Pin<Box<dyn Future<Output = LostReason> + Send>> {
        match self {
            Self::Mutex(g) => Box::pin(g.lost()),
            Self::Read(g) => Box::pin(g.lost()),
            Self::Write(g) => Box::pin(g.lost()),
            Self::Lease(g) => Box::pin(g.lost()),
            Self::Leader(_, l) => Box::pin(l.lost()),
        }
    }

    async fn release(self) -> Result<(), LockError> {
        match self {
            Self::Mutex(g) => g.release().await,
            Self::Read(g) => g.release().await,
            Self::Write(g) => g.release().await,
            Self::Lease(g) => g.release().await,
            Self::Leader(latch, _) => latch.close().await,
        }
    }
}

/// Acquires the recipe `kind` on the path, within the timeout if given.
async fn acquire(client: Client, args: &LockArgs, kind: Kind) -> Result<Held, LockError> {
    let (path, timeout) = (args.path.clone(), args.timeout);
    let once = timeout.is_some_and(|t| t.is_zero());
    match (kind, timeout) {
        (Kind::Mutex, _) if once => tried(Mutex::new(client, path).try_lock().await, Held::Mutex),
        (Kind::Read, _) if once => tried(RwLock::new(client, path).try_read().await, Held::Read),
        (Kind::Write, _) if once => tried(RwLock::new(client, path).try_write().await, Held::Write),
        (Kind::Semaphore(n), _) if once => tried(
            Semaphore::new(client, path, SemaphoreLimit::Fixed(n))
                .try_acquire_one()
                .await,
            Held::Lease,
        ),
        (Kind::Leader, _) if once => {
            let latch = LeaderLatch::new(client, path, args.id.clone());
            let leadership = latch.try_lead().await?;
            leadership
                .map(|l| Held::Leader(latch, l))
                .ok_or(LockError::Timeout)
        }
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
        (Kind::Leader, t) => lead(LeaderLatch::new(client, path, args.id.clone()), t).await,
    }
}

/// A `try_*` result: held, or [`LockError::Timeout`] when someone else holds or waits.
fn tried<G>(result: Result<Option<G>, LockError>, held: fn(G) -> Held) -> Result<Held, LockError> {
    result?.map(held).ok_or(LockError::Timeout)
}

/// Joins the election and waits for leadership (until `timeout`); leaves it on failure, so
/// that no node stays behind.
async fn lead(latch: LeaderLatch, timeout: Option<Duration>) -> Result<Held, LockError> {
    latch.start();
    let waited = match timeout {
        None => latch.await_leadership().await,
        Some(t) => tokio::time::timeout(t, latch.await_leadership())
            .await
            .unwrap_or(Err(LockError::Timeout)),
    };
    match waited {
        Ok(leadership) => Ok(Held::Leader(latch, leadership)),
        Err(e) => {
            let _ = latch.close().await;
            Err(e)
        }
    }
}

/// The signals zkw handles while it waits for a lock or a command: SIGINT, SIGTERM, SIGHUP.
pub(crate) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn new() -> Result<Self, Failure> {
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
    pub(crate) async fn any(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "INT",
            _ = self.term.recv() => "TERM",
            _ = self.hup.recv() => "HUP",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn kill_after_must_fit_half_the_session_timeout_less_the_margin() {
        // 10s: a margin of 666ms, so at most 4.33s; the default shrinks to fit.
        let longest = longest_kill_after(ms(10_000)).unwrap();
        assert_eq!(longest.as_millis(), 4333);
        assert_eq!(kill_after_for(None, ms(10_000), ms(10_000)), Ok(longest));
        assert_eq!(
            kill_after_for(None, ms(60_000), ms(60_000)),
            Ok(DEFAULT_KILL_AFTER)
        );
        assert_eq!(
            kill_after_for(Some(ms(1000)), ms(4000), ms(4000)),
            Ok(ms(1000))
        );
        // 4s: a margin of 267ms; 1.73s fits, 1.8s does not.
        assert!(kill_after_for(Some(ms(1733)), ms(4000), ms(4000)).is_ok());
        let refused = kill_after_for(Some(ms(1800)), ms(4000), ms(4000)).unwrap_err();
        assert_eq!(refused.code, crate::fail::USAGE);
        assert_eq!(
            refused.message,
            "--kill-after 1s 800ms does not fit the session timeout 4s: --kill-after plus a \
             margin of 267ms must not exceed half the session timeout; use --session-timeout \
             4s 200ms or more, or --kill-after 1s 700ms or less"
        );
        let granted_less = kill_after_for(Some(ms(5000)), ms(4000), ms(10_000)).unwrap_err();
        assert!(
            granted_less
                .message
                .contains("the session timeout 4s (the server's limits; 10s was asked)"),
            "{granted_less:?}"
        );
        // Under 200ms not even a zero grace fits.
        assert_eq!(
            kill_after_for(None, ms(150), ms(150)).unwrap_err().message,
            "the session timeout 150ms is too short to run a command under a lock; use \
             --session-timeout 200ms or more"
        );
        assert_eq!(
            kill_after_for(Some(Duration::ZERO), ms(200), ms(200)),
            Ok(Duration::ZERO)
        );
    }

    #[test]
    fn suggested_session_timeouts_fit() {
        for k in [0, 1, 99, 100, 650, 660, 700, 1000, 5000, 3_600_000] {
            let t = shortest_session_timeout(ms(k));
            assert!(
                longest_kill_after(t).is_some_and(|l| l >= ms(k)),
                "{k}ms: {t:?}"
            );
            assert!(
                t < ms(200) || longest_kill_after(t - ms(100)).is_none_or(|l| l < ms(k)),
                "{k}ms: {t:?} is not the shortest"
            );
        }
        assert_eq!(shortest_session_timeout(ms(1000)), ms(2400));
    }
}
