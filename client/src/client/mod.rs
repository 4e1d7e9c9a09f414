//! The async `Client`: every ZooKeeper operation, with chroot and path validation.

mod builder;
mod multi;
mod options;
mod watcher;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

pub use builder::ClientBuilder;
pub use multi::{Op, ReadOp};
pub use options::{CreateOptions, OpResult, ReadResult};
pub use watcher::{OneshotWatcher, PersistentWatcher, StateStream, WatchedEvent};

use crate::driver::{Command, Shared, WatcherSink};
use crate::error::Error;
use crate::jute::{Decode, Encode};
use crate::path::{self, Chroot};
use crate::proto::*;
use crate::session::{Effect, Reply, Request, SessionState, WatchKind, WatcherId};

/// A snapshot of a client's internal counters ([`Client::stats`]).
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
    /// Whether the background task still runs (it stops once the session is over and every
    /// clone is dropped).
    pub driver_running: bool,
}

/// Reads a client's counters without keeping it alive ([`Client::stats_handle`]).
#[derive(Debug, Clone)]
pub struct StatsHandle(Arc<Shared>);

impl StatsHandle {
    /// The counters now.
    pub fn stats(&self) -> ClientStats {
        let s = &self.0;
        ClientStats {
            in_flight: s.in_flight.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::Relaxed),
            watches: s.watches.load(Ordering::Relaxed),
            waiting_callers: s.waiting.load(Ordering::Relaxed),
            connections: s.connections.load(Ordering::Relaxed),
            driver_running: s.driver_running.load(Ordering::Acquire),
        }
    }
}

/// A ZooKeeper client: one session, shared by every clone.
///
/// Cloning is cheap (an `Arc`). A background task owns the connection; it ends the session
/// (closeSession) when the last clone is dropped, or at [`close`](Self::close).
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
    next_watcher: AtomicU64,
    watch_capacity: usize,
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
    /// # Errors
    /// See [`ClientBuilder::connect`].
    pub async fn connect(connect_string: &str) -> Result<Self, Error> {
        ClientBuilder::default().connect(connect_string).await
    }

    /// A builder for the connection settings.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A handle on the same session whose requests give up after `timeout`
    /// ([`Error::Timeout`]). A request not yet written when its deadline passes is never sent.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            inner: self.inner.clone(),
            timeout: Some(timeout),
        }
    }

    /// The session id (0 before the first handshake).
    pub fn session_id(&self) -> i64 {
        self.inner.shared.session_id.load(Ordering::Relaxed)
    }

    /// The session password (16 bytes; empty before the first handshake). With
    /// [`session_id`](Self::session_id) it lets another client resume this session
    /// ([`ClientBuilder::with_session`]). Keep it secret.
    pub fn session_password(&self) -> Bytes {
        self.inner
            .shared
            .passwd
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// Counters for leak checks and monitoring.
    pub fn stats(&self) -> ClientStats {
        self.stats_handle().stats()
    }

    /// A handle that reads [`stats`](Self::stats) without keeping the client alive, to watch
    /// its background task stop after the last clone is dropped.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.inner.shared.clone())
    }

    /// The session timeout the server granted, once connected.
    pub fn session_timeout(&self) -> Option<Duration> {
        match self.inner.shared.negotiated_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// The earliest instant the server may expire this session, as far as this client can
    /// know: the send instant of the newest request a read/write server has answered (pings
    /// and the handshake included), plus the negotiated session timeout.
    ///
    /// Anything that must not outlive the session (a lock hold, a leadership, a lease on a
    /// resource) is trustworthy only until this instant, less a margin for clock-rate
    /// differences and for the time it takes to act. Notifications never move it, since the
    /// server sends them without hearing from us; a late reply moves it only to its own
    /// request's send instant. A healthy session renews it at least every third of the
    /// session timeout (pings go out on that schedule whatever else flows). The reasoning is
    /// in the repository's `docs/lease.md`.
    ///
    /// `None` before the first handshake with a read/write server and once the session has
    /// ended. While disconnected it stays where it was: the server's clock runs on.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) {
    /// if let Some(deadline) = client.lease_deadline() {
    ///     let left = deadline.saturating_duration_since(std::time::Instant::now());
    ///     println!("the server cannot expire this session for another {left:?}");
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
    pub async fn lease_expiring(&self, margin: Duration) -> Option<Duration> {
        let timeout = self.session_timeout();
        loop {
            let deadline = self.lease_deadline()?;
            let at = deadline.checked_sub(margin)?;
            let now = tokio::time::Instant::now().into_std();
            if at <= now {
                // Acknowledged at deadline − T.
                return timeout.map(|t| (now + t).saturating_duration_since(deadline));
            }
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        }
    }

    /// The current session state.
    pub fn state(&self) -> SessionState {
        *self.inner.shared.state.borrow()
    }

    /// A stream of the session's state changes from now on.
    pub fn state_stream(&self) -> StateStream {
        StateStream::new(self.inner.shared.state_events.subscribe())
    }

    // ===== nodes =====

    /// Creates a node; returns its path (with the sequence number, if sequential) and Stat.
    ///
    /// # Errors
    /// [`Error::NodeExists`]; [`Error::NoNode`] when the parent is missing;
    /// [`Error::NoChildrenForEphemerals`]; [`Error::InvalidAcl`]; [`Error::Unimplemented`] for
    /// TTL modes on a server without extended types; [`Error::InvalidArgument`] for a TTL
    /// mode without a TTL or a TTL on another mode.
    pub async fn create(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions,
    ) -> Result<(String, Stat), Error> {
        let (op, body) = self.create_request(path, data, options)?;
        let reply = self.call(op, body, Effect::None, None).await?;
        let response = decode::<Create2Response>(&reply)?;
        Ok((self.client_path(&response.path), response.stat))
    }

    /// Deletes a node, if its version is `version` (any version when `None`).
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`]; [`Error::NotEmpty`].
    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), Error> {
        let body = DeleteRequest {
            path: self.server_path(path)?,
            version: version.unwrap_or(-1),
        };
        self.call(OpCode::Delete, body.to_bytes(), Effect::None, None)
            .await
            .map(drop)
    }

    /// The node's Stat, or `None` if it does not exist.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>, Error> {
        let body = ExistsRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        exists_result(
            self.call(OpCode::Exists, body.to_bytes(), Effect::None, None)
                .await,
        )
    }

    /// As [`exists`](Self::exists), leaving a watch that fires when the node is created,
    /// deleted or its data changes.
    pub async fn exists_and_watch(
        &self,
        path: &str,
    ) -> Result<(Option<Stat>, OneshotWatcher), Error> {
        let server_path = self.server_path(path)?;
        let body = ExistsRequest {
            path: server_path.clone(),
            watch: true,
        };
        let (effect, sink, watcher) = self.oneshot_watch(server_path, WatchKind::Data);
        let result = self
            .call(OpCode::Exists, body.to_bytes(), effect, Some(sink))
            .await;
        Ok((exists_result(result)?, watcher))
    }

    /// The node's data and Stat (null data reads as empty).
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_data(&self, path: &str) -> Result<(Bytes, Stat), Error> {
        let body = GetDataRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        let reply = self
            .call(OpCode::GetData, body.to_bytes(), Effect::None, None)
            .await?;
        data_result(&reply)
    }

    /// As [`get_data`](Self::get_data), leaving a watch that fires when the data changes or
    /// the node is deleted.
    ///
    /// # Errors
    /// [`Error::NoNode`] (and then no watch is left).
    pub async fn get_data_and_watch(
        &self,
        path: &str,
    ) -> Result<(Bytes, Stat, OneshotWatcher), Error> {
        let server_path = self.server_path(path)?;
        let body = GetDataRequest {
            path: server_path.clone(),
            watch: true,
        };
        let (effect, sink, watcher) = self.oneshot_watch(server_path, WatchKind::Data);
        let reply = self
            .call(OpCode::GetData, body.to_bytes(), effect, Some(sink))
            .await?;
        let (data, stat) = data_result(&reply)?;
        Ok((data, stat, watcher))
    }

    /// Sets the node's data, if its version is `version` (any when `None`); returns the new Stat.
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`].
    pub async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let body = SetDataRequest {
            path: self.server_path(path)?,
            data: Some(Bytes::copy_from_slice(data)),
            version: version.unwrap_or(-1),
        };
        let reply = self
            .call(OpCode::SetData, body.to_bytes(), Effect::None, None)
            .await?;
        Ok(decode::<SetDataResponse>(&reply)?.stat)
    }

    /// The node's ACL and Stat.
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat), Error> {
        let body = GetAclRequest {
            path: self.server_path(path)?,
        };
        let reply = self
            .call(OpCode::GetAcl, body.to_bytes(), Effect::None, None)
            .await?;
        let response = decode::<GetAclResponse>(&reply)?;
        Ok((response.acl, response.stat))
    }

    /// Sets the node's ACL, if its ACL version is `version` (any when `None`).
    ///
    /// # Errors
    /// [`Error::NoNode`]; [`Error::BadVersion`]; [`Error::InvalidAcl`].
    pub async fn set_acl(
        &self,
        path: &str,
        acl: &[Acl],
        version: Option<i32>,
    ) -> Result<Stat, Error> {
        let body = SetAclRequest {
            path: self.server_path(path)?,
            acl: acl.to_vec(),
            version: version.unwrap_or(-1),
        };
        let reply = self
            .call(OpCode::SetAcl, body.to_bytes(), Effect::None, None)
            .await?;
        Ok(decode::<SetAclResponse>(&reply)?.stat)
    }

    /// The node's children (names, in no defined order).
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>, Error> {
        let body = GetChildrenRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        let reply = self
            .call(OpCode::GetChildren, body.to_bytes(), Effect::None, None)
            .await?;
        Ok(decode::<GetChildrenResponse>(&reply)?.children)
    }

    /// The node's children and its Stat.
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_children_and_stat(&self, path: &str) -> Result<(Vec<String>, Stat), Error> {
        let body = GetChildren2Request {
            path: self.server_path(path)?,
            watch: false,
        };
        let reply = self
            .call(OpCode::GetChildren2, body.to_bytes(), Effect::None, None)
            .await?;
        let response = decode::<GetChildren2Response>(&reply)?;
        Ok((response.children, response.stat))
    }

    /// As [`get_children_and_stat`](Self::get_children_and_stat), leaving a watch that fires
    /// when the children change or the node is deleted.
    ///
    /// # Errors
    /// [`Error::NoNode`] (and then no watch is left).
    pub async fn get_children_and_watch(
        &self,
        path: &str,
    ) -> Result<(Vec<String>, Stat, OneshotWatcher), Error> {
        let server_path = self.server_path(path)?;
        let body = GetChildren2Request {
            path: server_path.clone(),
            watch: true,
        };
        let (effect, sink, watcher) = self.oneshot_watch(server_path, WatchKind::Child);
        let reply = self
            .call(OpCode::GetChildren2, body.to_bytes(), effect, Some(sink))
            .await?;
        let response = decode::<GetChildren2Response>(&reply)?;
        Ok((response.children, response.stat, watcher))
    }

    /// The number of descendants of the node (servers 3.6+).
    ///
    /// # Errors
    /// [`Error::NoNode`].
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32, Error> {
        let body = GetAllChildrenNumberRequest {
            path: self.server_path(path)?,
        };
        let reply = self
            .call(
                OpCode::GetAllChildrenNumber,
                body.to_bytes(),
                Effect::None,
                None,
            )
            .await?;
        Ok(decode::<GetAllChildrenNumberResponse>(&reply)?.total_number)
    }

    /// This session's ephemeral nodes whose path starts with `prefix` ("/" for all), inside
    /// the chroot (servers 3.6+).
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>, Error> {
        path::validate_sequential_path(prefix)?;
        let prefix_path = match &self.inner.chroot {
            Some(chroot) => chroot.to_server_sequential(prefix),
            None => prefix.to_owned(),
        };
        let body = GetEphemeralsRequest { prefix_path };
        let reply = self
            .call(OpCode::GetEphemerals, body.to_bytes(), Effect::None, None)
            .await?;
        let paths = decode::<GetEphemeralsResponse>(&reply)?.ephemerals;
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
    pub async fn sync(&self, path: &str) -> Result<(), Error> {
        let body = SyncRequest {
            path: self.server_path(path)?,
        };
        self.call(OpCode::Sync, body.to_bytes(), Effect::None, None)
            .await
            .map(drop)
    }

    // ===== sessions and watches =====

    /// Adds credentials to the session (e.g. `("digest", b"user:password")`); they are
    /// replayed on every reconnect.
    ///
    /// # Errors
    /// [`Error::AuthFailed`] (terminal: the server closes the session's connection).
    pub async fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        let body = AuthPacket {
            auth_type: 0,
            scheme: scheme.to_owned(),
            auth: Some(Bytes::copy_from_slice(auth)),
        };
        self.call(OpCode::Auth, body.to_bytes(), Effect::None, None)
            .await
            .map(drop)
    }

    /// The identities the session is authenticated with (servers 3.7+).
    pub async fn who_am_i(&self) -> Result<Vec<ClientInfo>, Error> {
        let reply = self
            .call(OpCode::WhoAmI, Bytes::new(), Effect::None, None)
            .await?;
        Ok(decode::<WhoAmIResponse>(&reply)?.client_info)
    }

    /// Adds a persistent watch on `path` (which need not exist), or a persistent recursive
    /// one covering its whole subtree (servers 3.6+). The watch survives reconnects.
    ///
    /// On servers before 3.9 a one-shot watch on the same path replaces the persistent one
    /// on the server (ZOOKEEPER-4466); avoid mixing them on one path there.
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
        let body = AddWatchRequest {
            path: server_path,
            mode,
        };
        let sink = (id, WatcherSink::Stream(tx));
        let watcher = PersistentWatcher::new(rx, id, self.inner.clone());
        self.call(OpCode::AddWatch, body.to_bytes(), effect, Some(sink))
            .await?;
        Ok(watcher)
    }

    /// Removes the session's watches of `watcher_type` on `path`, on the server and locally;
    /// removed watchers get a `…WatchRemoved` event.
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
        let body = RemoveWatchesRequest {
            path: server_path,
            watcher_type,
        };
        self.call(OpCode::RemoveWatches, body.to_bytes(), effect, None)
            .await
            .map(drop)
    }

    /// Checks that the server holds watches of `watcher_type` on `path`.
    ///
    /// # Errors
    /// [`Error::NoWatcher`].
    pub async fn check_watches(&self, path: &str, watcher_type: WatcherType) -> Result<(), Error> {
        let body = CheckWatchesRequest {
            path: self.server_path(path)?,
            watcher_type,
        };
        self.call(OpCode::CheckWatches, body.to_bytes(), Effect::None, None)
            .await
            .map(drop)
    }

    /// Closes the session: its ephemeral nodes are deleted and every clone of this client
    /// fails with [`Error::Closed`] from now on. Closing twice is not an error.
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

    async fn call(
        &self,
        op: OpCode,
        body: Bytes,
        effect: Effect,
        watcher: Option<(WatcherId, WatcherSink)>,
    ) -> Result<Reply, Error> {
        // A timeout too large for the clock means no deadline at all.
        let deadline = self
            .timeout
            .and_then(|t| tokio::time::Instant::now().checked_add(t))
            .map(tokio::time::Instant::into_std);
        let request = Request {
            op,
            body,
            effect,
            deadline,
        };
        let (tx, rx) = oneshot::channel();
        let command = Command::Submit {
            request,
            reply: tx,
            watcher,
        };
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
        WatcherId(self.inner.next_watcher.fetch_add(1, Ordering::Relaxed))
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

    fn server_path(&self, path: &str) -> Result<String, Error> {
        path::validate_path(path)?;
        Ok(match &self.inner.chroot {
            Some(chroot) => chroot.to_server(path),
            None => path.to_owned(),
        })
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

    /// The op code and body of a create: create2 for plain modes (so the Stat comes back),
    /// createContainer and createTTL for theirs.
    fn create_request(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions,
    ) -> Result<(OpCode, Bytes), Error> {
        let mode = options.mode;
        let server_path = if mode.is_sequential() {
            self.server_path_sequential(path)?
        } else {
            self.server_path(path)?
        };
        let data = Some(Bytes::copy_from_slice(data));
        let acl = options.acl.clone();
        match (mode.is_ttl(), options.ttl) {
            (true, Some(ttl)) => {
                let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
                if !(1..=0xFF_FFFF_FFFF).contains(&ttl) {
                    return Err(Error::InvalidArgument(
                        "TTL must be 1 ms to 0xFFFFFFFFFF ms",
                    ));
                }
                let body = CreateTtlRequest {
                    path: server_path,
                    data,
                    acl,
                    mode,
                    ttl,
                };
                Ok((OpCode::CreateTtl, body.to_bytes()))
            }
            (true, None) => Err(Error::InvalidArgument("a TTL create mode needs a TTL")),
            (false, Some(_)) => Err(Error::InvalidArgument(
                "a TTL is only valid with a TTL create mode",
            )),
            (false, None) => {
                let op = if mode == CreateMode::Container {
                    OpCode::CreateContainer
                } else {
                    OpCode::Create2
                };
                Ok((
                    op,
                    CreateRequest {
                        path: server_path,
                        data,
                        acl,
                        mode,
                    }
                    .to_bytes(),
                ))
            }
        }
    }
}

fn decode<T: Decode>(reply: &Reply) -> Result<T, Error> {
    T::decode_exact(&reply.body).map_err(|e| Error::Protocol(e.into()))
}

fn exists_result(result: Result<Reply, Error>) -> Result<Option<Stat>, Error> {
    match result {
        Ok(reply) => Ok(Some(decode::<ExistsResponse>(&reply)?.stat)),
        Err(Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

fn data_result(reply: &Reply) -> Result<(Bytes, Stat), Error> {
    let response = decode::<GetDataResponse>(reply)?;
    Ok((response.data.unwrap_or_default(), response.stat))
}
