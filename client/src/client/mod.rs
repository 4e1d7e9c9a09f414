//! The async `Client`: every ZooKeeper operation, with chroot and path validation.

mod bodies;
mod builder;
mod config;
mod detached;
mod info;
mod multi;
mod options;
mod reads;
mod tree;
mod watcher;
mod watches;
mod writes;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

pub use builder::{ClientBuilder, DEFAULT_SERVER_TICK};
pub use config::Reconfig;
pub use info::lease_staleness;
pub use multi::{Op, ReadOp};
pub use options::{CreateOptions, OpResult, ReadResult};
pub use watcher::{OneshotWatcher, PersistentWatcher, StateStream, WatchedEvent};

use crate::driver::{Command, Shared, Submission, WatcherSink};
use crate::error::Error;
use crate::jute::Decode;
use crate::path::{self, Chroot};
use crate::proto::Operation;
use crate::session::{self, Effect, Reply, Request, WatcherId};

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
/// (closeSession) at [`close`](Self::close), or once the last clone is dropped, and with it
/// the last watcher and watch stream, which hold the client too (recipe objects hold clones).
/// After a drop the task must still run to send closeSession: a runtime that stops right
/// after (the end of `main`) may not let it, and the session then lives until the server
/// expires it. `close().await` is the sure way.
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
/// # Many requests at once
/// Requests whose futures are polled together are pipelined: they share writes and reads,
/// whether they come from one task or from many. One task polling them all (`tokio::join!`,
/// `futures`' `join_all` or `FuturesUnordered`) costs less CPU per request than a task per
/// request, about a third less at depth in this repository's benchmarks (BENCHMARKS.md,
/// issue 29, third pass): with a task each, every reply wakes its own task, and the runtime
/// wakes another worker thread to share them out.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// // Polled together, the two requests are pipelined (usually one write and one read).
/// let (a, b) = tokio::join!(client.get_data("/config/a"), client.get_data("/config/b"));
/// let ((a, _), (b, _)) = (a?, b?);
/// # let _ = (a, b);
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
/// - [`Error::RequestTooLarge`] for a request over the server's limit, and
///   [`Error::ReplyTooLarge`] for a reply over the client's
///   ([`ClientBuilder::with_max_frame_len`](crate::ClientBuilder::with_max_frame_len));
/// - [`Error::NoAuth`] when an ACL denies the operation.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
    timeout: Option<Duration>,
    /// [`bound_to_session`](Self::bound_to_session).
    session: Option<i64>,
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
            timeout: Some(timeout),
            ..self.clone()
        }
    }

    /// A handle whose requests, background deletes included, run on session `session_id`
    /// only: a request made, or still unwritten, when another session is current (with
    /// [`with_session_renewal`](crate::ClientBuilder::with_session_renewal), a renewal took
    /// its place, or is making a new one) fails with [`Error::SessionExpired`] instead of
    /// running there, as soon as the renewal begins. For what
    /// only the old session may do: deleting the ephemeral node it made, whose path
    /// someone else may have taken since. A request written before the renewal is answered
    /// as any other (it fails with [`Error::ConnectionLoss`] when the connection drops).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::Error;
    ///
    /// let (_, stat) = client.get_data("/workers/w1").await?;
    /// if stat.ephemeral_owner == client.session_id() {
    ///     let ours = client.bound_to_session(stat.ephemeral_owner);
    ///     match ours.delete("/workers/w1", None).await {
    ///         // Our session ended: the server deleted the node with it.
    ///         Ok(()) | Err(Error::NoNode | Error::SessionExpired) => {}
    ///         Err(e) => return Err(e),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn bound_to_session(&self, session_id: i64) -> Self {
        Self {
            session: Some(session_id),
            ..self.clone()
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
            ..self.clone()
        })
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

    /// Sends one operation of the table and decodes its reply record: the typed call every
    /// request goes through.
    ///
    /// This and its two variants hand back [`call_op_into`](Self::call_op_into)'s future
    /// itself rather than await it in a future of their own: one state machine fewer to nest
    /// and move per call (BENCHMARKS.md, "Issue 29, tenth pass").
    ///
    /// # Errors
    /// The server's error for the request; [`Error::Protocol`] when the reply record does not
    /// decode as `O::Reply`.
    fn call_op<'a, O: Operation + 'a>(
        &'a self,
        request: &'a O::Request,
    ) -> impl Future<Output = Result<O::Reply, Error>> + 'a {
        self.call_op_into::<O, O::Reply>(request, Effect::None, None)
    }

    /// As [`call_op`](Self::call_op), with what the request does to the watch registry when
    /// it succeeds and the local watcher it registers.
    fn call_op_with<'a, O: Operation + 'a>(
        &'a self,
        request: &'a O::Request,
        effect: Effect,
        watcher: Option<(WatcherId, WatcherSink)>,
    ) -> impl Future<Output = Result<O::Reply, Error>> + 'a {
        self.call_op_into::<O, O::Reply>(request, effect, watcher)
    }

    /// As [`call_op`](Self::call_op), with the reply record read as `T`, another reading of
    /// `O::Reply`'s wire form (the session checks the body as `O::Reply`): a listing as
    /// [`Children`](crate::Children).
    fn call_op_as<'a, O: Operation + 'a, T: Decode + 'a>(
        &'a self,
        request: &'a O::Request,
    ) -> impl Future<Output = Result<T, Error>> + 'a {
        self.call_op_into::<O, T>(request, Effect::None, None)
    }

    /// The one path of a typed call: encode, submit, and read the checked reply as `T`.
    async fn call_op_into<O: Operation, T: Decode>(
        &self,
        request: &O::Request,
        effect: Effect,
        watcher: Option<(WatcherId, WatcherSink)>,
    ) -> Result<T, Error> {
        let request = Request {
            op: O::OP,
            body: bodies::encode(request),
            effect,
            deadline: self.deadline(),
            session: self.session,
        };
        let reply = self.submit(request, watcher).await?;
        session::decode_checked::<T>(&reply.body).map_err(|e| Error::Protocol(e.into()))
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
        // Room in the queue is the common case: taking it at once skips building and polling
        // the waiting send's future (callgrind: about 100 instructions per request).
        match self.inner.commands.try_send(command) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(command)) => self
                .inner
                .commands
                .send(command)
                .await
                .map_err(|_| Error::Closed)?,
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(Error::Closed),
        }
        // The driver answers every request; if it is gone, so is the session.
        rx.await.unwrap_or(Err(Error::Closed))
    }

    fn server_path_sequential(&self, path: &str) -> Result<String, Error> {
        path::validate_sequential_path(path)?;
        Ok(match &self.inner.chroot {
            Some(chroot) => chroot.to_server_sequential(path),
            None => path.to_owned(),
        })
    }

    fn client_path(&self, server_path: String) -> String {
        match &self.inner.chroot {
            // The path as the server sent it: no copy without a chroot.
            None => server_path,
            Some(chroot) => path::strip_or_pass(Some(chroot), &server_path).to_owned(),
        }
    }
}
