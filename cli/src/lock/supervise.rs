//! Running the command under the hold: spawned once the hold is granted, watched until it
//! exits, stopped when the hold is lost, about to expire or revoked; the lock released after.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use zkwire::Client;
use zkwire_recipes::{lease_margin, LockError, LostReason};

use super::held::{acquire, Held};
use super::kill_after::kill_after_for;
use super::signals::{forward, signal_exit_code, Signals};
use super::{acquire_failure, Kind, LockArgs, FENCING_TOKEN_ENV, LOCK_NODE_ENV};
use crate::child::{exit_code, Running, Stopped};
use crate::connect::Global;
use crate::fail::{Failure, FAILED, LOCK_LOST, REVOKED};
use crate::out;

/// How long zkw tries to delete a lock node after the hold was lost.
const LOST_RELEASE_LIMIT: Duration = Duration::from_secs(2);

/// Acquires the lock, runs the command under it and supervises it; returns the exit code.
pub(super) async fn hold_and_run(
    client: &Client,
    g: &Global,
    args: &LockArgs,
    kind: Kind,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    // Checked against what the server granted (the lease's timeout: the smallest granted in
    // the session), before waiting for the lock.
    let granted = client.lease_timeout().unwrap_or(g.session_timeout);
    let kill_after = kill_after_for(args.kill_after, granted, g.session_timeout, g.server_tick())?;
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
    let mut running = match Running::spawn(&args.command, &env, args.foreground, g.json) {
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
                "{noun} about to expire: the quorum's leader has not confirmed this session for {} ms (ZooKeeper unreachable, or our server cut off from the quorum)",
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

/// How long ago the newest request the leader vouched for was sent.
fn unacknowledged_for(client: &Client) -> Option<Duration> {
    Some(client.lease_renewed_at()?.elapsed())
}

fn lost_text(e: &LockError) -> String {
    match e {
        LockError::Lost(reason) => reason.to_string(),
        other => other.to_string(),
    }
}
