//! The async `Client`: every ZooKeeper operation, with chroot and path validation.

mod bodies;
mod builder;
mod config;
mod multi;
mod options;
mod tree;
mod watcher;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

pub use builder::ClientBuilder;
pub use config::Reconfig;
pub use multi::{Op, ReadOp};
pub use options::{CreateOptions, OpResult, ReadResult};
pub use watcher::{OneshotWatcher, PersistentWatcher, StateStream, WatchedEvent};

use crate::driver::{Command, Shared, Submission, WatcherSink};
use crate::error::Error;
use crate::jute::Decode;
use crate::path::{self, Chroot};
use crate::proto::*;
use crate::session::{Effect, Reply, Request, SessionState, WatchKind, WatcherId};

/// A snapshot of a client's internal counters ([`Client::stats`]).
///
/// ```no_run
/// # fn run(client: zkwire::Client) {
/// let stats = client.stats();
/// println!("{} in flight, {} queued, {} watchers", stats.in_flight, stats.queued, stats.watches);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClientStats {
    /// Requests written and awaiting their reply (pings and SetWatches included).
    pub in_flight: usize,
    /// Requests waiting for a connection.
    pub queued: usize,
    /// Local watchers registered.
    pub watches: usize,
    /// Callers waiting for an answer.
    pub waiting_callers: usize,
    /// Transports opened so far (1 + reconnects).
    pub connections: usize,
    /// Sessions established so far: 1, plus one per renewal after an expiry
    /// ([`ClientBuilder::with_session_renewal`](crate::ClientBuilder::with_session_renewal)).
    pub sessions: u64,
    /// Requests callers have submitted so far (every operation; a multi counts once; the
    /// session's own pings, SetWatches and auth replays are not counted).
    pub requests: u64,
    /// Whether the background task still runs (it stops once the session is over and every
    /// clone is dropped).
    pub driver_running: bool,
}

/// Reads a client's counters without keeping it alive ([`Client::stats_handle`]).
///
/// ```no_run
/// # fn run(client: zkwire::Client) {
/// use std::time::Duration;
///
/// // Report the counters every minute, for as long as the client runs.
/// let stats = client.stats_handle();
/// tokio::spawn(async move {
///     loop {
///         let now = stats.stats();
///         println!("{} requests, {} connections", now.requests, now.connections);
///         if !now.driver_running {
///             break;
///         }
///         tokio::time::sleep(Duration::from_secs(60)).await;
///     }
/// });
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct StatsHandle(Arc<Shared>);

impl StatsHandle {
    /// The counters now.
    ///
    /// ```no_run
    /// # fn run(handle: zkwire::StatsHandle) {
    /// let stats = handle.stats();
    /// println!("{} callers waiting for an answer", stats.waiting_callers);
    /// # }
    /// ```
    pub fn stats(&self) -> ClientStats {
        let s = &self.0;
        ClientStats {
            in_flight: s.in_flight.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::Relaxed),
            watches: s.watches.load(Ordering::Relaxed),
            waiting_callers: s.waiting.load(Ordering::Relaxed),
            connections: s.connections.load(Ordering::Relaxed),
            sessions: s.sessions.load(Ordering::Relaxed),
            requests: s.submitted.load(Ordering::Relaxed),
            driver_running: s.driver_running.load(Ordering::Acquire),
        }
    }
}

/// A ZooKeeper client: one session, shared by every clone.
///
/// Cloning is cheap (an `Arc`). A background task owns the connection; it ends the session
/// (closeSession) when the last clone is dropped, or at [`close`](Self::close).
///
/// ```no_run
/// # async fn run() -> Result<(), zkwire::Error> {
/// use zkwire::Client;
///
/// let client = Client::connect("127.0.0.1:2181").await?;
/// let (config, _stat) = client.get_data("/config").await?;
/// // Clones are cheap and share the session: one for each task.
/// let worker = client.clone();
/// tokio::spawn(async move {
///     let _ = worker.set_data("/heartbeat", b"alive", None).await;
/// });
/// # let _ = config;
/// # Ok(()) }
/// ```
///
/// # Ordering
/// Requests are sent in the order their futures are first polled, and their replies (and
/// watch events) come back in that order: ZooKeeper answers each session in order.
///
/// # Cancel safety
/// Dropping a request's future before the request is written removes it (it is never sent);
/// after that, the request may or may not take effect. Watchers unregister when dropped.
///
/// # Errors common to every operation
/// - [`Error::InvalidPath`] before anything is sent;
/// - [`Error::ConnectionLoss`] when the connection drops with the request in flight (it may
///   or may not have been applied);
/// - [`Error::Timeout`] when the request deadline passes ([`with_timeout`](Self::with_timeout));
/// - [`Error::SessionExpired`], [`Error::AuthFailed`], [`Error::Closed`] once the session is over;
/// - [`Error::RequestTooLarge`] for a request over the server's limit;
/// - [`Error::NoAuth`] when an ACL denies the operation.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
    timeout: Option<Duration>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) commands: mpsc::Sender<Command>,
    chroot: Option<Chroot>,
    shared: Arc<Shared>,
    watch_capacity: usize,
    /// The lease's relay bound ([`crate::session::SessionConfig::relay_bound`]).
    relay_bound: Option<Duration>,
}

impl Inner {
    /// A session event with its path as the application sees it (chroot stripped).
    pub(crate) fn client_event(&self, mut e: WatchedEvent) -> WatchedEvent {
        if !e.path.is_empty() {
            e.path = path::strip_or_pass(self.chroot.as_ref(), &e.path).to_owned();
        }
        e
    }
}

impl Client {
    /// Connects with default settings and waits until the session is established.
    ///
    /// `connect_string` is `host[:port][,host[:port]…][/chroot]`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// // Three servers; every path is relative to /app.
    /// let client = zkwire::Client::connect("zk1:2181,zk2:2181,zk3:2181/app").await?;
    /// println!("session {:#x}", client.session_id());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// See [`ClientBuilder::connect`].
    pub async fn connect(connect_string: &str) -> Result<Self, Error> {
        ClientBuilder::default().connect(connect_string).await
    }

    /// A builder for the connection settings: see [`ClientBuilder`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use std::time::Duration;
    /// let client = zkwire::Client::builder()
    ///     .with_session_timeout(Duration::from_secs(10))
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A handle on the same session whose requests give up after `timeout`
    /// ([`Error::Timeout`]). A request not yet written when its deadline passes is never sent.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use std::time::Duration;
    /// match client.with_timeout(Duration::from_secs(2)).get_data("/config").await {
    ///     Err(zkwire::Error::Timeout) => println!("no answer within 2 s"),
    ///     other => println!("{other:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            inner: self.inner.clone(),
            timeout: Some(timeout),
        }
    }

    /// A handle on the same session whose paths live under `sub` (relative to this handle's
    /// own chroot, if any): `client.chroot("/tenant-a")?.get_data("/config")` reads
    /// `/tenant-a/config`. Requests, watches and the session are shared; paths in results and
    /// events are relative to the new root; closing either handle closes the session. `sub` is
    /// not checked for existence.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let tenant = client.chroot("/tenants/a")?;
    /// let (data, _) = tenant.get_data("/config").await?; // /tenants/a/config
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid `sub`.
    pub fn chroot(&self, sub: &str) -> Result<Self, Error> {
        let root = self.server_path(sub)?;
        let inner = Inner {
            commands: self.inner.commands.clone(),
            chroot: Chroot::new(&root)?,
            shared: self.inner.shared.clone(),
            watch_capacity: self.inner.watch_capacity,
            relay_bound: self.inner.relay_bound,
        };
        Ok(Self {
            inner: Arc::new(inner),
            timeout: self.timeout,
        })
    }

    /// The session id (0 before the first handshake).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// // Whether the ephemeral node /leader is this session's.
    /// let stat = client.exists("/leader").await?;
    /// let ours = stat.is_some_and(|stat| stat.ephemeral_owner == client.session_id());
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

    /// `path` as the server sees it: with this handle's chroot, if any, in front. Two handles
    /// of one client name the same node exactly when their server paths are equal.
    ///
    /// ```no_run
    /// # fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let tenant = client.chroot("/tenants/a")?;
    /// assert_eq!(tenant.server_path("/config")?, "/tenants/a/config");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid `path`.
    pub fn server_path(&self, path: &str) -> Result<String, Error> {
        path::validate_path(path)?;
        Ok(match &self.inner.chroot {
            Some(chroot) => chroot.to_server(path),
            None => path.to_owned(),
        })
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
                // Vouched for at deadline − T.
                let timeout = self.session_timeout();
                return timeout.map(|t| (now + t).saturating_duration_since(deadline));
            }
            tokio::select! {
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                () = &mut moved_back => {}
            }
        }
    }

    /// How far the lease deadline may fall behind `now + T` on a healthy session (T the
    /// negotiated session timeout): the relay bound (two server ticks,
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
        let timeout = self.session_timeout()?;
        let relay = self.inner.relay_bound.unwrap_or(Duration::ZERO);
        Some(relay.saturating_add(crate::session::ping_interval(timeout)))
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

    // ===== nodes =====

    /// Creates a node; returns its path (with the sequence number, if sequential) and Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{CreateMode, CreateOptions};
    /// let (path, _stat) = client
    ///     .create("/jobs/job-", b"payload", &CreateOptions::new(CreateMode::PersistentSequential))
    ///     .await?;
    /// assert!(path.starts_with("/jobs/job-"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NodeExists`]; [`Error::NoNode`] when the parent is missing;
    /// [`Error::NoChildrenForEphemerals`]; [`Error::InvalidAcl`]; [`Error::Unimplemented`] for
    /// TTL modes on a server without extended types; [`Error::InvalidArgument`] for a TTL
    /// mode without a TTL or a TTL on another mode.
    pub async fn create(
        &self,
        path: &str,
        data: impl AsRef<[u8]>,
        options: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        let data = Bytes::copy_from_slice(data.as_ref());
        self.create_bytes(path, data, options).await
    }

    /// [`create`](Self::create) with data already in a `Bytes`.
    async fn create_bytes(
        &self,
        path: &str,
        data: Bytes,
        options: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        // Alone, a plain create is sent as create2, whose reply carries the Stat.
        let response = match self.create_record(path, data, options)? {
            CreateRecord::Plain(r) => self.call_op::<op::Create2>(&r).await?,
            CreateRecord::Container(r) => self.call_op::<op::CreateContainer>(&r).await?,
            CreateRecord::Ttl(r) => self.call_op::<op::CreateTtl>(&r).await?,
        };
        Ok((self.client_path(&response.path), response.stat))
    }

    /// Deletes a node, if its version is `version` (any version when `None`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (_data, stat) = client.get_data("/config").await?;
    /// client.delete("/config", Some(stat.version)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`]; [`Error::NotEmpty`].
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        let request = DeleteRequest {
            path: self.server_path(path)?,
            version: version.unwrap_or(-1),
        };
        self.call_op::<op::Delete>(&request).await
    }

    /// The node's Stat, or `None` if it does not exist.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// if client.exists("/config").await?.is_none() {
    ///     println!("not configured yet");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        let request = ExistsRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        absent_as_none(self.call_op::<op::Exists>(&request).await)
    }

    /// As [`exists`](Self::exists), leaving a watch that fires when the node is created,
    /// deleted or its data changes.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (stat, watcher) = client.exists_and_watch("/ready").await?;
    /// if stat.is_none() {
    ///     let event = watcher.await; // NodeCreated, or the session's end
    ///     println!("{:?}", event.event_type);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn exists_and_watch(
        &self,
        path: &str,
    ) -> Result<(Option<Stat>, OneshotWatcher), Error> {
        let server_path = self.server_path(path)?;
        let request = ExistsRequest {
            path: server_path.clone(),
            watch: true,
        };
        let (effect, sink, watcher) = self.oneshot_watch(server_path, WatchKind::Data);
        let result = self
            .call_op_with::<op::Exists>(&request, effect, Some(sink))
            .await;
        Ok((absent_as_none(result)?, watcher))
    }

    /// The node's data and Stat (null data reads as empty).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (data, stat) = client.get_data("/config").await?;
    /// println!("{} bytes at version {}", data.len(), stat.version);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_data(&self, path: &str) -> Result<(Bytes, Stat), Error> {
        let request = GetDataRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        let response = self.call_op::<op::GetData>(&request).await?;
        Ok(data_and_stat(response))
    }

    /// As [`get_data`](Self::get_data), leaving a watch that fires when the data changes or
    /// the node is deleted. See [`OneshotWatcher`] for a loop that keeps a copy current.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (data, _stat, changed) = client.get_data_and_watch("/config").await?;
    /// println!("config: {} bytes", data.len());
    /// let event = changed.await; // NodeDataChanged, NodeDeleted, or the session's end
    /// println!("{:?}", event.event_type);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`] (and then no watch is left).
    pub async fn get_data_and_watch(
        &self,
        path: &str,
    ) -> Result<(Bytes, Stat, OneshotWatcher), Error> {
        let server_path = self.server_path(path)?;
        let request = GetDataRequest {
            path: server_path.clone(),
            watch: true,
        };
        let (effect, sink, watcher) = self.oneshot_watch(server_path, WatchKind::Data);
        let response = self
            .call_op_with::<op::GetData>(&request, effect, Some(sink))
            .await?;
        let (data, stat) = data_and_stat(response);
        Ok((data, stat, watcher))
    }

    /// Sets the node's data, if its version is `version` (any when `None`); returns the new Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// // Compare-and-set: fails with BadVersion if someone wrote in between.
    /// let (_old, stat) = client.get_data("/counter").await?;
    /// let stat = client.set_data("/counter", b"42", Some(stat.version)).await?;
    /// assert!(stat.version > 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`].
    pub async fn set_data(
        &self,
        path: &str,
        data: impl AsRef<[u8]>,
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let request = SetDataRequest {
            path: self.server_path(path)?,
            data: Some(Bytes::copy_from_slice(data.as_ref())),
            version: version.unwrap_or(-1),
        };
        Ok(self.call_op::<op::SetData>(&request).await?.stat)
    }

    /// The node's ACL and Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (acl, _stat) = client.get_acl("/config").await?;
    /// for entry in acl {
    ///     println!("{}:{} {:?}", entry.id.scheme, entry.id.id, entry.perms);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), Error> {
        let request = GetAclRequest {
            path: self.server_path(path)?,
        };
        let response = self.call_op::<op::GetAcl>(&request).await?;
        Ok((response.acl, response.stat))
    }

    /// Sets the node's ACL, if its ACL version is `version` (any when `None`).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::Acl;
    /// client.set_acl("/config", &Acl::read_unsafe(), None).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`]; [`Error::InvalidAcl`].
    pub async fn set_acl(
        &self,
        path: &str,
        acl: &[Acl],
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let request = SetAclRequest {
            path: self.server_path(path)?,
            acl: acl.to_vec(),
            version: version.unwrap_or(-1),
        };
        Ok(self.call_op::<op::SetAcl>(&request).await?.stat)
    }

    /// The node's children (names, in no defined order).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let mut jobs = client.get_children("/jobs").await?;
    /// jobs.sort();
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        let request = GetChildrenRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        Ok(self.call_op::<op::GetChildren>(&request).await?.children)
    }

    /// The node's children and its Stat.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let (children, stat) = client.get_children_and_stat("/jobs").await?;
    /// assert_eq!(children.len(), usize::try_from(stat.num_children).unwrap_or(0));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_children_and_stat(&self, path: &str) -> Result<(Vec<String>, Stat), Error> {
        let request = GetChildren2Request {
            path: self.server_path(path)?,
            watch: false,
        };
        let response = self.call_op::<op::GetChildren2>(&request).await?;
        Ok((response.children, response.stat))
    }

    /// As [`get_children_and_stat`](Self::get_children_and_stat), leaving a watch that fires
    /// when the children change or the node is deleted.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// loop {
    ///     let (children, _stat, changed) = client.get_children_and_watch("/workers").await?;
    ///     println!("{} workers", children.len());
    ///     if changed.await.event_type == zkwire::EventType::None {
    ///         break; // the session ended
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`] (and then no watch is left).
    pub async fn get_children_and_watch(
        &self,
        path: &str,
    ) -> Result<(Vec<String>, Stat, OneshotWatcher), Error> {
        let server_path = self.server_path(path)?;
        let request = GetChildren2Request {
            path: server_path.clone(),
            watch: true,
        };
        let (effect, sink, watcher) = self.oneshot_watch(server_path, WatchKind::Child);
        let response = self
            .call_op_with::<op::GetChildren2>(&request, effect, Some(sink))
            .await?;
        Ok((response.children, response.stat, watcher))
    }

    /// The number of descendants of the node (servers 3.6+).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// let total = client.get_all_children_number("/jobs").await?;
    /// println!("{total} nodes under /jobs");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32, Error> {
        let request = GetAllChildrenNumberRequest {
            path: self.server_path(path)?,
        };
        Ok(self
            .call_op::<op::GetAllChildrenNumber>(&request)
            .await?
            .total_number)
    }

    /// This session's ephemeral nodes whose path starts with `prefix` ("/" for all), inside
    /// the chroot (servers 3.6+).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// for path in client.get_ephemerals("/locks/").await? {
    ///     println!("this session holds {path}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let request = GetEphemeralsRequest {
            prefix_path: self.server_path_sequential(prefix)?,
        };
        let paths = self
            .call_op::<op::GetEphemerals>(&request)
            .await?
            .ephemerals;
        Ok(match &self.inner.chroot {
            Some(chroot) => paths
                .iter()
                .filter_map(|p| chroot.to_client(p))
                .map(str::to_owned)
                .collect(),
            None => paths,
        })
    }

    /// Waits until the connected server has caught up with the leader on `path`, so that
    /// reads after it see every write committed before it.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// client.sync("/config").await?;
    /// let (latest, _stat) = client.get_data("/config").await?;
    /// # let _ = latest;
    /// # Ok(()) }
    /// ```
    pub async fn sync(&self, path: &str) -> Result<(), Error> {
        let request = SyncRequest {
            path: self.server_path(path)?,
        };
        self.call_op::<op::Sync>(&request).await.map(drop)
    }

    // ===== sessions and watches =====

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

    /// Adds a persistent watch on `path` (which need not exist), or a persistent recursive
    /// one covering its whole subtree (servers 3.6+). The watch survives reconnects: see
    /// [`PersistentWatcher`].
    ///
    /// On servers before 3.9 a one-shot watch on the same path replaces the persistent one
    /// on the server (ZOOKEEPER-4466); avoid mixing them on one path there.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::AddWatchMode;
    ///
    /// let mut changes = client.add_watch("/config", AddWatchMode::Persistent).await?;
    /// while let Some(event) = changes.next().await {
    ///     println!("{:?} at {}", event.event_type, event.path);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn add_watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> Result<PersistentWatcher, Error> {
        let server_path = self.server_path(path)?;
        let kind = match mode {
            AddWatchMode::PersistentRecursive => WatchKind::PersistentRecursive,
            _ => WatchKind::Persistent,
        };
        let id = self.next_watcher();
        let (tx, rx) = mpsc::channel(self.inner.watch_capacity);
        let effect = Effect::Watch {
            path: server_path.clone(),
            kind,
            watcher: id,
        };
        let request = AddWatchRequest {
            path: server_path,
            mode,
        };
        let sink = (id, WatcherSink::Stream(tx));
        let watcher = PersistentWatcher::new(rx, id, self.inner.clone());
        self.call_op_with::<op::AddWatch>(&request, effect, Some(sink))
            .await?;
        Ok(watcher)
    }

    /// Removes the session's watches of `watcher_type` on `path`, on the server and locally;
    /// removed watchers get a `…WatchRemoved` event.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::WatcherType;
    /// let (_data, _stat, watcher) = client.get_data_and_watch("/config").await?;
    /// client.check_watches("/config", WatcherType::Data).await?;
    /// client.remove_watches("/config", WatcherType::Data).await?;
    /// let event = watcher.await;
    /// assert_eq!(event.event_type, zkwire::EventType::DataWatchRemoved);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoWatcher`]; [`Error::MarshallingError`] for persistent types on servers
    /// before 3.9 (use [`WatcherType::Any`] there).
    pub async fn remove_watches(&self, path: &str, watcher_type: WatcherType) -> Result<(), Error> {
        let server_path = self.server_path(path)?;
        let effect = Effect::RemoveWatches {
            path: server_path.clone(),
            watcher_type,
        };
        let request = RemoveWatchesRequest {
            path: server_path,
            watcher_type,
        };
        self.call_op_with::<op::RemoveWatches>(&request, effect, None)
            .await
    }

    /// Checks that the server holds watches of `watcher_type` on `path`.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{Error, WatcherType};
    ///
    /// match client.check_watches("/config", WatcherType::Data).await {
    ///     Ok(()) => println!("the server still watches /config for us"),
    ///     Err(Error::NoWatcher) => println!("no data watch on /config"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NoWatcher`].
    pub async fn check_watches(&self, path: &str, watcher_type: WatcherType) -> Result<(), Error> {
        let request = CheckWatchesRequest {
            path: self.server_path(path)?,
            watcher_type,
        };
        self.call_op::<op::CheckWatches>(&request).await
    }

    /// Closes the session: its ephemeral nodes are deleted and every clone of this client
    /// fails with [`Error::Closed`] from now on. Closing twice is not an error.
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

    // ===== internals =====

    /// Sends one operation of the table and decodes its reply record: the typed call every
    /// request goes through.
    ///
    /// # Errors
    /// The server's error for the request; [`Error::Protocol`] when the reply record does not
    /// decode as `O::Reply`.
    async fn call_op<O: Operation>(&self, request: &O::Request) -> Result<O::Reply, Error> {
        self.call_op_with::<O>(request, Effect::None, None).await
    }

    /// As [`call_op`](Self::call_op), with what the request does to the watch registry when
    /// it succeeds and the local watcher it registers.
    async fn call_op_with<O: Operation>(
        &self,
        request: &O::Request,
        effect: Effect,
        watcher: Option<(WatcherId, WatcherSink)>,
    ) -> Result<O::Reply, Error> {
        let request = Request {
            op: O::OP,
            body: bodies::encode(request),
            effect,
            deadline: self.deadline(),
        };
        let reply = self.submit(request, watcher).await?;
        O::Reply::decode_exact(&reply.body).map_err(|e| Error::Protocol(e.into()))
    }

    /// The deadline of a request made now, `None` without a timeout (or with one too large
    /// for the clock).
    fn deadline(&self) -> Option<std::time::Instant> {
        self.timeout
            .and_then(|t| tokio::time::Instant::now().checked_add(t))
            .map(tokio::time::Instant::into_std)
    }

    /// Hands a request to the driver and waits for its reply.
    async fn submit(
        &self,
        request: Request,
        watcher: Option<(WatcherId, WatcherSink)>,
    ) -> Result<Reply, Error> {
        let (tx, rx) = oneshot::channel();
        let command = Command::Submit(Submission::new(request, tx, watcher));
        self.inner
            .commands
            .send(command)
            .await
            .map_err(|_| Error::Closed)?;
        // The driver answers every request; if it is gone, so is the session.
        rx.await.unwrap_or(Err(Error::Closed))
    }

    pub(crate) fn close_quietly(&self) {
        let (tx, _rx) = oneshot::channel();
        let _ = self.inner.commands.try_send(Command::Close { reply: tx });
    }

    fn next_watcher(&self) -> WatcherId {
        WatcherId(
            self.inner
                .shared
                .next_watcher
                .fetch_add(1, Ordering::Relaxed),
        )
    }

    fn oneshot_watch(
        &self,
        server_path: String,
        kind: WatchKind,
    ) -> (Effect, (WatcherId, WatcherSink), OneshotWatcher) {
        let id = self.next_watcher();
        let (tx, rx) = oneshot::channel();
        let effect = Effect::Watch {
            path: server_path,
            kind,
            watcher: id,
        };
        (
            effect,
            (id, WatcherSink::Oneshot(tx)),
            OneshotWatcher::new(rx, id, self.inner.clone()),
        )
    }

    fn server_path_sequential(&self, path: &str) -> Result<String, Error> {
        path::validate_sequential_path(path)?;
        Ok(match &self.inner.chroot {
            Some(chroot) => chroot.to_server_sequential(path),
            None => path.to_owned(),
        })
    }

    fn client_path(&self, server_path: &str) -> String {
        path::strip_or_pass(self.inner.chroot.as_ref(), server_path).to_owned()
    }

    /// The request record of a create, alone or inside a multi: the server path (a
    /// sequential one may end with `/`) and, for the TTL modes, a TTL in range.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for a TTL mode without a TTL, a TTL
    /// on another mode, or a TTL out of range.
    fn create_record(
        &self,
        path: &str,
        data: Bytes,
        options: &CreateOptions,
    ) -> Result<CreateRecord, Error> {
        let mode = options.mode;
        let path = if mode.is_sequential() {
            self.server_path_sequential(path)?
        } else {
            self.server_path(path)?
        };
        let (data, acl) = (Some(data), options.acl.clone());
        match (mode.is_ttl(), options.ttl) {
            (true, Some(ttl)) => Ok(CreateRecord::Ttl(CreateTtlRequest {
                path,
                data,
                acl,
                mode,
                ttl: ttl_millis(ttl)?,
            })),
            (true, None) => Err(Error::InvalidArgument("a TTL create mode needs a TTL")),
            (false, Some(_)) => Err(Error::InvalidArgument(
                "a TTL is only valid with a TTL create mode",
            )),
            (false, None) => {
                let request = CreateRequest {
                    path,
                    data,
                    acl,
                    mode,
                };
                Ok(if mode == CreateMode::Container {
                    CreateRecord::Container(request)
                } else {
                    CreateRecord::Plain(request)
                })
            }
        }
    }
}

/// A create's request record, by the op code family it is sent with.
enum CreateRecord {
    /// A plain (persistent, ephemeral, sequential) create: `create2` alone, `create` in a
    /// multi.
    Plain(CreateRequest),
    /// `createContainer`.
    Container(CreateRequest),
    /// `createTTL`.
    Ttl(CreateTtlRequest),
}

/// A TTL in ms, as the server accepts it: 1 ms to `0xFF_FFFF_FFFF` ms.
fn ttl_millis(ttl: Duration) -> Result<i64, Error> {
    let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    if (1..=0xFF_FFFF_FFFF).contains(&ms) {
        Ok(ms)
    } else {
        Err(Error::InvalidArgument(
            "TTL must be 1 ms to 0xFFFFFFFFFF ms",
        ))
    }
}

/// An exists reply: `None` for a missing node.
fn absent_as_none(result: Result<ExistsResponse, Error>) -> Result<Option<Stat>, Error> {
    match result {
        Ok(response) => Ok(Some(response.stat)),
        Err(Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A getData reply as the `Client` returns it: null data reads as empty.
fn data_and_stat(response: GetDataResponse) -> (Bytes, Stat) {
    (response.data.unwrap_or_default(), response.stat)
}
