//! What a client tells about its session (id, timeout, state, lease, counters), and the
//! calls on the session itself: credentials, identity, close.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::builder::relay_bound;
// Named by the docs' links only.
#[cfg(doc)]
use super::ClientBuilder;
use super::{Client, ClientStats, StateStream, StatsHandle};
use crate::driver::Command;
use crate::error::Error;
use crate::proto::{op, AuthPacket, ClientInfo};
use crate::session::SessionState;

impl Client {
    /// The session id (0 before the first handshake).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// // Whether the ephemeral node /leader is this session's.
    /// let stat = client.exists("/leader").await?;
    /// let ours = stat.is_some_and(|stat| stat.is_owned_by(client.session_id()));
    /// # let _ = ours;
    /// # Ok(()) }
    /// ```
    pub fn session_id(&self) -> i64 {
        self.inner.shared.session_id.load(Ordering::Relaxed)
    }

    /// The session password (16 bytes; empty before the first handshake). With
    /// [`session_id`](Self::session_id) it lets another client resume this session
    /// ([`ClientBuilder::with_session`]). Keep it secret.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// // Hand the session over to a new client (e.g. after a restart of this process).
    /// let (id, password) = (client.session_id(), client.session_password());
    /// let resumed = zkwire::Client::builder()
    ///     .with_session(id, password)
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// assert_eq!(resumed.session_id(), id);
    /// # Ok(()) }
    /// ```
    pub fn session_password(&self) -> Bytes {
        self.inner
            .shared
            .passwd
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// The value of type `T` this client keeps for a layer built on it, created with
    /// `T::default()` on first use. Every handle of the client (its clones, its
    /// [`chroot`](Self::chroot) and [`with_timeout`](Self::with_timeout) handles) gets the
    /// same value; another client gets its own; it is dropped once the client's last handle
    /// and background task are gone. This is where per-client state of a library on top
    /// belongs, instead of a process-wide registry: the recipes keep their local lock queues
    /// here.
    ///
    /// A value that holds a [`Client`] of its own keeps the client alive for as long as it
    /// does: hold one only while there is work for it.
    ///
    /// ```
    /// # async fn run(client: zkwire::Client) {
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// #[derive(Default)]
    /// struct Hits(AtomicU64);
    ///
    /// client.extension::<Hits>().0.fetch_add(1, Ordering::Relaxed);
    /// let again = client.chroot("/app").unwrap().extension::<Hits>();
    /// assert_eq!(again.0.load(Ordering::Relaxed), 1);
    /// # }
    /// ```
    pub fn extension<T: std::any::Any + Default + Send + Sync>(&self) -> Arc<T> {
        self.inner.shared.extensions.get_or_default()
    }

    /// Counters for leak checks and monitoring.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// let stats = client.stats();
    /// println!("{} in flight, {} watches", stats.in_flight, stats.watches);
    /// # }
    /// ```
    pub fn stats(&self) -> ClientStats {
        self.stats_handle().stats()
    }

    /// A handle that reads [`stats`](Self::stats) without keeping the client alive, to watch
    /// its background task stop after the last clone is dropped.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) {
    /// let handle = client.stats_handle();
    /// drop(client);
    /// while handle.stats().driver_running {
    ///     tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    /// }
    /// # }
    /// ```
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.inner.shared.clone())
    }

    /// The session timeout the server granted, once connected (the server clamps the one
    /// [`ClientBuilder::with_session_timeout`] asks for to its own bounds).
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// if let Some(timeout) = client.session_timeout() {
    ///     println!("the session expires {timeout:?} after the servers last heard from us");
    /// }
    /// # }
    /// ```
    pub fn session_timeout(&self) -> Option<Duration> {
        match self.inner.shared.negotiated_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Why no server can currently be connected to, when every host of the connect string has
    /// failed in a way retrying cannot fix (see [`ConnectError`](crate::error::ConnectError));
    /// `None` otherwise, and again after any successful handshake. A running client keeps
    /// retrying regardless, with backoff, in case the configuration is fixed on the servers'
    /// side.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// if let Some(e) = client.connect_error() {
    ///     eprintln!("no server can be reached as configured (still trying): {e}");
    /// }
    /// # }
    /// ```
    pub fn connect_error(&self) -> Option<crate::error::ConnectError> {
        self.inner.shared.connect_error.borrow().clone()
    }

    /// The earliest instant the quorum may expire this session, as far as this client can
    /// know: the send instant of the newest request that a read/write server answered *and*
    /// that the quorum's leader is known to have heard of, plus the session timeout it was
    /// sent under.
    ///
    /// Anything that must not outlive the session (a lock hold, a leadership, a lease on a
    /// resource) is trustworthy only until this instant, less a margin for clock-rate
    /// differences and for the time it takes to act. The server we talk to may be cut off
    /// from the quorum and still answer us for a while, so its answers count only once the
    /// leader has vouched for them: the client sends a `sync` every sixth of the session
    /// timeout or so, and each one answered vouches for what was answered two server ticks
    /// before it ([`ClientBuilder::with_server_tick`]). On a healthy session the deadline
    /// therefore stays about [`lease_staleness`](Self::lease_staleness) (plus round trips)
    /// behind `now + T`, T being the smallest session timeout negotiated in the session.
    /// Notifications never move it, since the server sends them without hearing
    /// from us; a late reply moves it only to its own request's send instant. The reasoning,
    /// step by step, is in the repository's `docs/lease.md`.
    ///
    /// `None` until the leader has vouched for the session and once the session has ended.
    /// While disconnected it stays where it was: the leader's clock runs on. It moves back
    /// only when a reconnect negotiates a smaller session timeout (the server then re-times
    /// the session with it).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) {
    /// if let Some(deadline) = client.lease_deadline() {
    ///     let left = deadline.saturating_duration_since(std::time::Instant::now());
    ///     println!("the quorum cannot expire this session for another {left:?}");
    /// }
    /// # }
    /// ```
    pub fn lease_deadline(&self) -> Option<std::time::Instant> {
        self.inner.shared.lease_deadline()
    }

    /// When the lease was last renewed: the send instant of the newest request that the
    /// quorum's leader is known to have heard of. The lease deadline is this plus the
    /// smallest session timeout negotiated in the session, which can be less than
    /// [`session_timeout`](Self::session_timeout) after a reconnect negotiated more.
    ///
    /// `None` exactly when [`lease_deadline`](Self::lease_deadline) is.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// if let Some(renewed) = client.lease_renewed_at() {
    ///     println!("the leader last vouched for a request sent {:?} ago", renewed.elapsed());
    /// }
    /// # }
    /// ```
    pub fn lease_renewed_at(&self) -> Option<std::time::Instant> {
        self.lease_deadline()?.checked_sub(self.lease_timeout()?)
    }

    /// The session timeout the lease is reckoned with: the smallest negotiated in the
    /// session. The server re-times the session with each timeout it grants, so after a
    /// reconnect that negotiated more, the lease keeps the smaller one; otherwise it is
    /// [`session_timeout`](Self::session_timeout). `None` before the first handshake.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// if client.lease_timeout() < client.session_timeout() {
    ///     println!("a reconnect negotiated a longer timeout; the lease keeps the shorter");
    /// }
    /// # }
    /// ```
    pub fn lease_timeout(&self) -> Option<Duration> {
        match self.inner.shared.lease_timeout_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Resolves once the session's lease has run to within `margin` of its deadline
    /// ([`lease_deadline`](Self::lease_deadline)) without being renewed, or the session has
    /// no lease (ended, or never connected to a read/write server). Returns how long ago the
    /// last acknowledged request was sent, when known.
    ///
    /// It sleeps until `deadline − margin` and checks again, so it costs one timer per
    /// renewal period, not one wake-up per reply.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) {
    /// use std::time::Duration;
    /// // Stop acting as the lock holder before the server may have expired the session.
    /// let silent_for = client.lease_expiring(Duration::from_secs(2)).await;
    /// eprintln!("lease about to run out (last acknowledged {silent_for:?} ago): stepping down");
    /// # }
    /// ```
    pub async fn lease_expiring(&self, margin: Duration) -> Option<Duration> {
        loop {
            // Listen before reading: a deadline that moves back (a smaller session timeout
            // after a reconnect) wakes the sleep below; one that moves forward is read
            // afresh when it ends.
            let moved_back = self.inner.shared.lease_moved_back.notified();
            tokio::pin!(moved_back);
            moved_back.as_mut().enable();
            let deadline = self.lease_deadline()?;
            let at = deadline.checked_sub(margin)?;
            let now = tokio::time::Instant::now().into_std();
            if at <= now {
                return self
                    .lease_renewed_at()
                    .map(|renewed| now.saturating_duration_since(renewed));
            }
            tokio::select! {
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                () = &mut moved_back => {}
            }
        }
    }

    /// How far the lease deadline may fall behind `now + T` on a healthy session (T the
    /// lease's timeout, [`lease_timeout`](Self::lease_timeout)): the relay bound (two server ticks,
    /// [`ClientBuilder::with_server_tick`]) plus the ping interval (at most T/3). A hold
    /// needs T to exceed this by its margin; the recipes refuse one that cannot be kept.
    /// `None` before the first handshake.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// if let Some(staleness) = client.lease_staleness() {
    ///     println!("the lease deadline may lag {staleness:?} behind now + the session timeout");
    /// }
    /// # }
    /// ```
    pub fn lease_staleness(&self) -> Option<Duration> {
        let timeout = self.lease_timeout()?;
        Some(staleness(self.inner.relay_bound, timeout))
    }

    /// The current session state.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// if !client.state().is_connected() {
    ///     println!("requests wait for a connection");
    /// }
    /// # }
    /// ```
    pub fn state(&self) -> SessionState {
        *self.inner.shared.state.borrow()
    }

    /// Since when the client has not been [`Connected`](SessionState::Connected): the instant
    /// the state last left `Connected` (to `Disconnected`, `ConnectedReadOnly` or an end),
    /// the client's creation before the first connection; `None` while connected. A hold
    /// given up at a disconnection judges its grace from this instant, however late it
    /// looks.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) {
    /// if let Some(since) = client.disconnected_since() {
    ///     println!("not connected for {:?}", since.elapsed());
    /// }
    /// # }
    /// ```
    pub fn disconnected_since(&self) -> Option<std::time::Instant> {
        self.inner.shared.disconnected_since()
    }

    /// A stream of the session's state changes from now on: see [`StateStream`].
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) {
    /// let mut states = client.state_stream();
    /// while let Some(state) = states.next().await {
    ///     println!("session {state:?}");
    /// }
    /// # }
    /// ```
    pub fn state_stream(&self) -> StateStream {
        StateStream::new(self.inner.shared.state_events.subscribe())
    }

    /// Adds credentials to the session (e.g. `("digest", b"user:password")`); they are
    /// replayed on every reconnect.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// client.add_auth("digest", b"alice:secret").await?;
    /// let ids = client.who_am_i().await?;
    /// assert!(ids.iter().any(|id| id.auth_scheme == "digest"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::AuthFailed`] (terminal: the server closes the session's connection).
    pub async fn add_auth(&self, scheme: &str, auth: impl AsRef<[u8]>) -> Result<(), Error> {
        let request = AuthPacket::new(scheme, Bytes::copy_from_slice(auth.as_ref()));
        self.call_op::<op::Auth>(&request).await
    }

    /// The identities the session is authenticated with (servers 3.7+).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// for id in client.who_am_i().await? {
    ///     println!("authenticated as {}:{}", id.auth_scheme, id.user);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn who_am_i(&self) -> Result<Vec<ClientInfo>, Error> {
        Ok(self.call_op::<op::WhoAmI>(&()).await?.client_info)
    }

    /// Closes the session: every clone of this client fails with [`Error::Closed`] from now
    /// on. Connected, it sends closeSession behind the requests in flight and returns once
    /// answered: the server has deleted the session's ephemeral nodes. Not connected, it
    /// sends nothing and returns at once: the server deletes them when it expires the
    /// session, up to the session timeout later. Closing twice is not an error; a close
    /// asked for while another runs (from a clone) returns once that one has ended the
    /// session.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// client.close().await?; // the session's ephemeral nodes are gone now
    /// assert!(matches!(client.exists("/").await, Err(zkwire::Error::Closed)));
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        if self
            .inner
            .commands
            .send(Command::Close { reply: tx })
            .await
            .is_err()
        {
            return Ok(());
        }
        match rx.await {
            Ok(Ok(_)) | Err(_) => Ok(()),
            Ok(Err(e)) if e.is_terminal() => Ok(()),
            Ok(Err(e)) => Err(e),
        }
    }

    pub(crate) fn close_quietly(&self) {
        let (tx, _rx) = oneshot::channel();
        let _ = self.inner.commands.try_send(Command::Close { reply: tx });
    }
}

/// How far the lease deadline of a healthy session may fall behind `now + timeout`, for a
/// session timeout `timeout` on an ensemble ticking every `server_tick`: what
/// [`Client::lease_staleness`] says of such a session once connected, known before it is.
/// A deadline that a hold's margin, and anything done ahead of it, lets come closer than this
/// is reached on a healthy session (docs/lease.md, "Timers").
///
/// ```
/// use std::time::Duration;
///
/// // ZooKeeper's default tick, and a 10 s session: two ticks plus the ping interval.
/// let lag = zkwire::lease_staleness(Duration::from_secs(10), zkwire::DEFAULT_SERVER_TICK);
/// assert!(lag > Duration::from_secs(4) && lag < Duration::from_secs(10));
/// ```
pub fn lease_staleness(timeout: Duration, server_tick: Duration) -> Duration {
    staleness(Some(relay_bound(server_tick)), timeout)
}

/// The relay bound (none: no relay) plus the ping interval of `timeout`.
fn staleness(relay: Option<Duration>, timeout: Duration) -> Duration {
    relay
        .unwrap_or(Duration::ZERO)
        .saturating_add(crate::session::ping_interval(timeout))
}
