//! The contenders: each loops on its own session (renewed when it ends) taking the mutex,
//! running a critical section that writes to the fenced store and stops as soon as `lost()`
//! fires, and releasing.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zkwire::{Client, SessionState};
use zkwire_recipes::{LockError, LostReason, Mutex, MutexGuard};
use zkwire_testing::rng::SplitMix64;

use crate::draw::of_t;
use crate::shared::{lock, reason_name, Count, Shared, Tallied};
use crate::store::{Holder, Section};
use crate::{CONNECT_ATTEMPT, LOCK_DIR, RELEASE_TIMEOUT, T};

/// One acquire's deadline.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(8);
/// Attempts to open one session (each bounded by [`CONNECT_ATTEMPT`]).
const CONNECT_ATTEMPTS: usize = 200;
/// Iterations of one contender's loop, whatever happens (the stop flag ends it first).
const MAX_ITERATIONS: u64 = 10_000_000;

/// What a contender left behind.
pub(crate) struct ContenderEnd {
    pub(crate) who: usize,
    pub(crate) session: i64,
    pub(crate) closed: Result<(), String>,
}

/// Opens a session through `cs`, retrying (a proxy may be blackholed, a server down).
async fn connect(sh: &Shared, cs: &str) -> Option<Client> {
    for attempt in 0..CONNECT_ATTEMPTS {
        if attempt > 0 && sh.sleep_or_stop(Duration::from_millis(100)).await {
            return None;
        }
        let opening = zkwire_testing::support::builder()
            .with_session_timeout(T)
            .connect(cs);
        if let Ok(Ok(client)) = tokio::time::timeout(CONNECT_ATTEMPT, opening).await {
            sh.add(Count::Sessions);
            return Some(client);
        }
    }
    None
}

/// Replaces an ended session: counts how it ended, opens a new one.
async fn renew(sh: &Shared, cs: &str, old: &Client) -> Option<Client> {
    match old.state() {
        SessionState::Expired => {
            sh.add(Count::Expired);
        }
        s => sh.tally(Tallied::SessionsEnded, format!("{s:?}")),
    }
    let _ = tokio::time::timeout(RELEASE_TIMEOUT, old.close()).await;
    connect(sh, cs).await
}

/// Contender `who`: takes the lock through the connect string `cs` until the run stops.
pub(crate) async fn contender(who: usize, cs: String, sh: Arc<Shared>) -> ContenderEnd {
    let mut rng =
        SplitMix64(sh.settings.seed ^ (who as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
    let Some(mut client) = connect(&sh, &cs).await else {
        return ContenderEnd {
            who,
            session: 0,
            closed: Err("never connected".to_owned()),
        };
    };
    for _ in 0..MAX_ITERATIONS {
        if sh.stopped() {
            break;
        }
        if client.state().is_terminal() {
            match renew(&sh, &cs, &client).await {
                Some(c) => client = c,
                None => break,
            }
        }
        if !take_turn(who, &client, &sh, &mut rng).await {
            break;
        }
    }
    let session = client.session_id();
    let closed = match tokio::time::timeout(RELEASE_TIMEOUT, client.close()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if client.state() == SessionState::Expired => Err(format!("expired: {e}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("close timed out".to_owned()),
    };
    ContenderEnd {
        who,
        session,
        closed,
    }
}

/// One acquisition attempt: acquire, critical section, release; false when the run
/// stopped during the pause after an error.
async fn take_turn(who: usize, client: &Client, sh: &Shared, rng: &mut SplitMix64) -> bool {
    let mutex = Mutex::new(client.clone(), LOCK_DIR);
    match mutex.lock_timeout(ACQUIRE_TIMEOUT).await {
        Ok(guard) => {
            let n = sh.add(Count::Acquisitions);
            if n >= sh.settings.acquisitions {
                sh.request_stop();
            }
            critical_section(who, &guard, sh, rng).await;
            release(guard, sh).await;
        }
        Err(LockError::Timeout) => {
            sh.add(Count::Timeouts);
        }
        Err(e) if matches!(&e, LockError::Client(c) if c.is_terminal()) => {
            // Renewed at the top of the loop (the state is terminal by now).
            if !client.state().is_terminal() {
                sh.tally(Tallied::AcquireErrors, format!("{e}"));
            }
        }
        Err(e) => {
            sh.tally(Tallied::AcquireErrors, format!("{e}"));
            if sh.sleep_or_stop(Duration::from_millis(50)).await {
                return false;
            }
        }
    }
    true
}

/// `lost()`'s outcome if it has already fired, without waiting.
async fn fired<F: Future<Output = LostReason> + Unpin>(lost: &mut F) -> Option<LostReason> {
    tokio::select! {
        biased;
        reason = lost => Some(reason),
        () = std::future::ready(()) => None,
    }
}

/// Enters the critical section if the hold is trusted, writes the token, holds 0–2 ms
/// (stopping at once if `lost()` fires), checks again and writes again.
async fn critical_section(who: usize, guard: &MutexGuard, sh: &Shared, rng: &mut SplitMix64) {
    let ignore = sh.settings.ignore_lost;
    // With --ignore-lost, a future that never resolves stands in for lost().
    let real = guard.lost();
    let lost = async move {
        if ignore {
            std::future::pending().await
        } else {
            real.await
        }
    };
    tokio::pin!(lost);
    if let Some(reason) = fired(&mut lost).await {
        sh.tally(Tallied::LostBefore, reason_name(&reason));
        return;
    }
    if !ignore && !guard.is_held() {
        sh.tally(Tallied::LostBefore, "is_held() false");
        return;
    }
    let holder = Holder {
        who,
        session: guard.client().session_id(),
        token: guard.fencing_token(),
    };
    let trusted_until = guard.trusted_until();
    sh.holder.store(who + 1, Ordering::Relaxed);
    let enter = Instant::now();
    lock(&sh.store).write(holder, enter);
    sh.add(Count::Entered);

    let (long, hold) = draw_hold(who, holder.session, sh, rng);
    let lost_at = hold_unless_lost(hold, &mut lost, guard, ignore).await;
    let exit = match lost_at {
        Some((at, reason)) => {
            sh.tally(Tallied::LostDuring, reason_name(&reason));
            at
        }
        None => {
            let now = Instant::now();
            lock(&sh.store).write(holder, now);
            now
        }
    };
    let _ = sh
        .holder
        .compare_exchange(who + 1, 0, Ordering::Relaxed, Ordering::Relaxed);
    if long {
        let _ = sh
            .long_holder
            .compare_exchange(who + 1, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
    lock(&sh.store).sections.push(Section {
        holder,
        enter,
        exit,
        lost: lost_at,
        trusted_until,
        long,
    });
}

/// Whether this hold is a long one (then announced as the target of heavy faults), and
/// how long it lasts.
fn draw_hold(who: usize, session: i64, sh: &Shared, rng: &mut SplitMix64) -> (bool, Duration) {
    let every = sh.settings.long_hold_every;
    let long = every > 0 && rng.below(every) == 0;
    let hold = if long {
        sh.add(Count::LongHolds);
        sh.long_session.store(session, Ordering::Relaxed);
        sh.long_holder.store(who + 1, Ordering::Relaxed);
        // The self-test holds past T, so that a session can expire mid-hold.
        if sh.settings.ignore_lost {
            of_t(rng, 150, 300)
        } else {
            of_t(rng, 50, 150)
        }
    } else {
        Duration::from_micros(rng.below(2001))
    };
    (long, hold)
}

/// Holds for `hold` unless `lost` fires first; then checks once more. Returns when `lost()`
/// fired (or `is_held()` turned false) and why, `None` when the hold was trusted throughout.
async fn hold_unless_lost<F: Future<Output = LostReason> + Unpin>(
    hold: Duration,
    lost: &mut F,
    guard: &MutexGuard,
    ignore: bool,
) -> Option<(Instant, LostReason)> {
    let mut lost_at = tokio::select! {
        biased;
        reason = &mut *lost => Some((Instant::now(), reason)),
        () = tokio::time::sleep(hold) => None,
    };
    if lost_at.is_none() {
        lost_at = fired(lost).await.map(|r| (Instant::now(), r));
    }
    if lost_at.is_none() && !ignore && !guard.is_held() {
        // is_held() turned false a hair before lost() resolved: wait for the reason.
        let reason = tokio::time::timeout(Duration::from_millis(100), lost)
            .await
            .unwrap_or(LostReason::Released);
        lost_at = Some((Instant::now(), reason));
    }
    lost_at
}

async fn release(guard: MutexGuard, sh: &Shared) {
    match tokio::time::timeout(RELEASE_TIMEOUT, guard.release()).await {
        Ok(Ok(())) => {
            sh.add(Count::Released);
        }
        Ok(Err(LockError::Lost(reason))) => {
            sh.tally(Tallied::LostAtRelease, reason_name(&reason));
        }
        Ok(Err(e)) => sh.tally(Tallied::ReleaseErrors, format!("{e}")),
        Err(_) => {
            sh.add(Count::ReleaseTimeouts);
        }
    }
}
