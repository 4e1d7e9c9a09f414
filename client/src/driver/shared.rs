//! What the driver publishes to the client handles: the session's id, state and lease, and
//! the counters behind `Client::stats`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch};

use crate::error::{ConnectError, HostFailure};
use crate::session::SessionState;

/// State the driver publishes to client handles.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) session_id: AtomicI64,
    pub(crate) negotiated_ms: AtomicU64,
    /// [`Session::lease_timeout`](crate::session::Session::lease_timeout) in ms, 0 for none.
    pub(crate) lease_timeout_ms: AtomicU64,
    pub(crate) passwd: Mutex<Bytes>,
    pub(crate) state: watch::Sender<SessionState>,
    pub(crate) state_events: broadcast::Sender<SessionState>,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) queued: AtomicUsize,
    pub(crate) watches: AtomicUsize,
    pub(crate) waiting: AtomicUsize,
    pub(crate) driver_running: AtomicBool,
    pub(crate) connections: AtomicUsize,
    /// Sessions established so far (more than one after a renewal).
    pub(crate) sessions: AtomicU64,
    /// The next local watcher id, shared by every handle of the client (whatever its chroot).
    pub(crate) next_watcher: AtomicU64,
    /// Requests callers have submitted.
    pub(crate) submitted: AtomicU64,
    /// Why connecting is hopeless as configured, while it is (see `diagnosis`).
    pub(crate) connect_error: watch::Sender<Option<ConnectError>>,
    /// Each host's latest connect failure since the last handshake (see `diagnosis`).
    pub(crate) host_failures: Mutex<Vec<HostFailure>>,
    /// The session's lease deadline ([`Session::lease_deadline`]) as nanoseconds after
    /// `epoch`, [`NO_LEASE`] when there is none.
    lease_nanos: AtomicU64,
    /// When the state last left `Connected`, as nanoseconds after `epoch`; [`CONNECTED`]
    /// while it is `Connected` (0, the client's creation, until the first connection).
    left_connected_nanos: AtomicU64,
    /// Woken whenever the published lease deadline moves back (a smaller session timeout
    /// negotiated, the session ended): a sleep until an earlier reading must wake.
    pub(crate) lease_moved_back: tokio::sync::Notify,
    epoch: std::time::Instant,
    /// What layers on top keep per client ([`crate::Client::extension`]).
    pub(crate) extensions: crate::extensions::Extensions,
}

/// [`Shared::lease_nanos`] when the session has no lease.
const NO_LEASE: u64 = u64::MAX;

/// [`Shared::left_connected_nanos`] while the state is `Connected`.
const CONNECTED: u64 = u64::MAX;

impl Shared {
    /// `epoch` is an instant no later than any lease deadline the session can report (its
    /// creation).
    pub(crate) fn new(epoch: std::time::Instant) -> Self {
        Self {
            session_id: AtomicI64::new(0),
            negotiated_ms: AtomicU64::new(0),
            lease_timeout_ms: AtomicU64::new(0),
            passwd: Mutex::new(Bytes::new()),
            state: watch::Sender::new(SessionState::Connecting),
            // State changes are rare; a receiver that falls this far behind skips to the newest.
            state_events: broadcast::Sender::new(16),
            in_flight: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            watches: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            driver_running: AtomicBool::new(true),
            connections: AtomicUsize::new(0),
            sessions: AtomicU64::new(0),
            next_watcher: AtomicU64::new(0),
            submitted: AtomicU64::new(0),
            connect_error: watch::Sender::new(None),
            host_failures: Mutex::new(Vec::new()),
            lease_nanos: AtomicU64::new(NO_LEASE),
            left_connected_nanos: AtomicU64::new(0),
            lease_moved_back: tokio::sync::Notify::new(),
            epoch,
            extensions: crate::extensions::Extensions::default(),
        }
    }

    /// The lease deadline last published by the driver.
    pub(crate) fn lease_deadline(&self) -> Option<std::time::Instant> {
        match self.lease_nanos.load(Ordering::Acquire) {
            NO_LEASE => None,
            nanos => self.epoch.checked_add(Duration::from_nanos(nanos)),
        }
    }

    /// When the state last left `Connected`, while it is not `Connected`.
    pub(crate) fn disconnected_since(&self) -> Option<std::time::Instant> {
        match self.left_connected_nanos.load(Ordering::Acquire) {
            CONNECTED => None,
            nanos => self.epoch.checked_add(Duration::from_nanos(nanos)),
        }
    }

    /// Notes a change of state to `state` at `now`, before it is published: a reader told
    /// of the new state finds when the connection was lost.
    pub(super) fn note_state(&self, state: SessionState, now: std::time::Instant) {
        if state == SessionState::Connected {
            self.left_connected_nanos.store(CONNECTED, Ordering::Release);
        } else if *self.state.borrow() == SessionState::Connected {
            let since = now.saturating_duration_since(self.epoch).as_nanos();
            let nanos = u64::try_from(since).unwrap_or(CONNECTED - 1).min(CONNECTED - 1);
            self.left_connected_nanos.store(nanos, Ordering::Release);
        }
    }

    pub(super) fn publish_lease(&self, deadline: Option<std::time::Instant>) {
        let nanos = deadline.map_or(NO_LEASE, |d| {
            let since = d.saturating_duration_since(self.epoch).as_nanos();
            u64::try_from(since)
                .unwrap_or(NO_LEASE - 1)
                .min(NO_LEASE - 1)
        });
        let before = self.lease_nanos.swap(nanos, Ordering::AcqRel);
        // NO_LEASE is the largest value: a lease that ends counts as moving back too.
        if before != NO_LEASE && (nanos < before || nanos == NO_LEASE) {
            self.lease_moved_back.notify_waiters();
        }
    }
}

/// Marks the driver stopped however its task ends (return, panic or runtime shutdown).
pub(super) struct RunningGuard(pub(super) Arc<Shared>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.driver_running.store(false, Ordering::Release);
    }
}
