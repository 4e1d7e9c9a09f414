//! How far a hold is trusted: the margin before the session's lease deadline, the check that
//! a hold fits in the lease at all, and the wait that returns a grant only once the lease
//! vouches for it. The argument is in the repository's `docs/lease.md`.

use std::time::{Duration, Instant};

use zkwire::Client;

use crate::error::LockError;

/// How long before the session's lease deadline a hold stops being trusted, for a negotiated
/// session timeout `t`: `max(t / 15, 100 ms)`.
///
/// The lease deadline ([`zkwire::Client::lease_deadline`]) is the send instant of the newest
/// request the quorum's leader is known to have heard of, plus `t`; the leader cannot expire
/// the session, and so cannot hand our lock to anyone, before it (it rounds expiry up to its
/// next tick, never down). The margin covers what that bound does not:
/// - the two clocks running at different rates (a few hundred ppm under NTP, more for a
///   drifting virtual machine: `t / 15` allows over 6 %);
/// - our timer firing late on a loaded host (the 100 ms floor dominates for short sessions);
/// - the time the application needs to act on [`lost`](crate::MutexGuard::lost): stop
///   writing, or kill the process it supervises.
///
/// It stays clear of normal renewals: on a healthy session the deadline lags `now + t` by
/// at most [`Client::lease_staleness`] (two server ticks for the leader's word to reach us,
/// plus the ping interval) and a round trip, so a hold is lost only after `t − margin`
/// without a renewal, which is that lag plus whatever a fault adds. A hold whose lease
/// cannot keep that lag is refused ([`LockError::LeaseTooShort`]).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(zkwire_recipes::lease_margin(Duration::from_secs(30)), Duration::from_secs(2));
/// assert_eq!(zkwire_recipes::lease_margin(Duration::from_secs(1)), Duration::from_millis(100));
/// ```
pub fn lease_margin(t: Duration) -> Duration {
    (t / 15).max(MIN_LEASE_MARGIN)
}

/// The floor of [`lease_margin`].
const MIN_LEASE_MARGIN: Duration = Duration::from_millis(100);

/// How often [`until_trusted`] looks at the lease again. The wait it serves lasts about two
/// server ticks plus a sync interval, and only after a fault.
const TRUST_RECHECK: Duration = Duration::from_millis(20);

/// The margin before the lease deadline: [`lease_margin`] of the negotiated session timeout,
/// or the configured one if larger.
pub(crate) fn margin_for(client: &Client, configured: Option<Duration>) -> Duration {
    let default = client
        .session_timeout()
        .map_or(Duration::ZERO, lease_margin);
    configured.map_or(default, |m| m.max(default))
}

/// Refuses a hold the session's lease could not keep: one lost as soon as granted
/// ([`LockError::LeaseTooShort`]). `Ok(false)` while the session timeout is not known yet
/// (nothing checked), `Ok(true)` when it fits.
pub(crate) fn check_lease_fits(
    client: &Client,
    configured: Option<Duration>,
) -> Result<bool, LockError> {
    // The lease runs on the smallest timeout of the session, which a hold must fit in.
    let (Some(session_timeout), Some(staleness)) =
        (client.lease_timeout(), client.lease_staleness())
    else {
        return Ok(false);
    };
    let margin = margin_for(client, configured);
    if staleness.saturating_add(margin) < session_timeout {
        return Ok(true);
    }
    Err(LockError::LeaseTooShort {
        session_timeout,
        staleness,
        margin,
    })
}

/// Until when a hold of the client's current session may be trusted: the lease deadline
/// less the margin; `None` while the session has no lease.
pub(crate) fn trust_end(client: &Client, configured: Option<Duration>) -> Option<Instant> {
    client
        .lease_deadline()?
        .checked_sub(margin_for(client, configured))
}

/// Returns once a grant to session `owner` can be trusted: the lease reaches past now by
/// the margin. Right after a reconnect every request succeeds while the lease may still lie
/// in the past (the reconnect's touch counts only once a `sync` sent two server ticks later
/// is answered, docs/lease.md); a grant returned then would be lost at once, and a leader
/// latch would loop through create, lead and lose as fast as the server answers.
///
/// `fit_checked`: whether [`check_lease_fits`] already passed with the session timeout
/// known; if not (the node was created before the first handshake), it is checked now.
/// Returns at once when the session is over or another one runs: the hold then reports it
/// as lost.
pub(crate) async fn until_trusted(
    client: &Client,
    configured: Option<Duration>,
    owner: i64,
    fit_checked: bool,
) -> Result<(), LockError> {
    if !fit_checked {
        check_lease_fits(client, configured)?;
    }
    loop {
        let trusted = trust_end(client, configured).is_some_and(|end| end > Instant::now());
        if trusted || client.session_id() != owner || client.state().is_terminal() {
            return Ok(());
        }
        tokio::time::sleep(TRUST_RECHECK).await;
    }
}
