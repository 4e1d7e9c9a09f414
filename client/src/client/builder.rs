//! `ClientBuilder`: connection settings.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{Client, Inner};
use crate::connect_string::ConnectString;
use crate::driver::{Connect, Driver, Shared, TcpConnector};
use crate::error::{ConnectError, Error};
use crate::jute::Encode;
use crate::proto::AuthPacket;
use crate::session::{Session, SessionConfig, SessionState};

/// Settings for a [`Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), zkwire::Error> {
/// use std::time::Duration;
/// let client = zkwire::Client::builder()
///     .with_session_timeout(Duration::from_secs(10))
///     .with_auth("digest", b"user:secret".to_vec())
///     .connect("127.0.0.1:2181/app")
///     .await?;
/// # Ok(()) }
/// ```
///
/// `Debug` redacts credentials and session passwords.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    /// The session's settings; `host_count` is filled in from the connect string.
    session: SessionConfig,
    request_timeout: Option<Duration>,
    watch_capacity: usize,
    command_capacity: usize,
    fail_fast: bool,
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::TlsConfig>,
}

/// ZooKeeper's default `tickTime`, which a client assumes until
/// [`ClientBuilder::with_server_tick`] says otherwise.
pub const DEFAULT_SERVER_TICK: Duration = Duration::from_secs(2);

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            session: SessionConfig {
                relay_bound: Some(relay_bound(DEFAULT_SERVER_TICK)),
                ..SessionConfig::default()
            },
            request_timeout: None,
            watch_capacity: 1024,
            command_capacity: 1024,
            fail_fast: false,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl ClientBuilder {
    /// The session timeout to request (default 30 s; the server clamps it to its
    /// `[minSessionTimeout, maxSessionTimeout]`, by default 2–20 ticks).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// let client = zkwire::Client::builder()
    ///     .with_session_timeout(std::time::Duration::from_secs(10))
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// println!("granted {:?}", client.session_timeout());
    /// # Ok(()) }
    /// ```
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session.session_timeout = timeout;
        self
    }

    /// How long one connection attempt may take, handshake included (default: the session
    /// timeout divided by the number of hosts, as the Java client, but at most half the session
    /// timeout, so that one attempt a server never answers leaves time for another).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use std::time::Duration;
    ///
    /// // Give up on a server that does not answer within 2 s, and try the next one.
    /// let client = zkwire::Client::builder()
    ///     .with_connect_timeout(Duration::from_secs(2))
    ///     .connect("zk1:2181,zk2:2181,zk3:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.session.connect_timeout = Some(timeout);
        self
    }

    /// Allows read-only servers (default false).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::SessionState;
    ///
    /// let client = zkwire::Client::builder()
    ///     .with_read_only(true)
    ///     .connect("zk1:2181,zk2:2181,zk3:2181")
    ///     .await?;
    /// if client.state() == SessionState::ConnectedReadOnly {
    ///     println!("the quorum is out of reach: serving reads only");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn with_read_only(mut self, allowed: bool) -> Self {
        self.session.read_only = allowed;
        self
    }

    /// The largest reply accepted (default: the server's default `jute.maxbuffer`, 1 MiB − 1,
    /// plus 1 KiB of headers). A larger reply fails its request with [`Error::ReplyTooLarge`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// // Servers started with -Djute.maxbuffer=4194304: nodes of up to 4 MiB.
    /// let client = zkwire::Client::builder()
    ///     .with_max_frame_len((4 << 20) + 1024)
    ///     .with_max_request_len(4 << 20)
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn with_max_frame_len(mut self, len: usize) -> Self {
        self.session.max_frame_len = len;
        self
    }

    /// The largest request sent (default: [`JUTE_MAX_BUFFER`](crate::JUTE_MAX_BUFFER), the
    /// server's default `jute.maxbuffer`, 1 MiB − 1).
    /// A larger request fails locally with [`Error::RequestTooLarge`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// // Servers started with -Djute.maxbuffer=4194304: nodes of up to 4 MiB.
    /// let client = zkwire::Client::builder()
    ///     .with_max_request_len(4 << 20)
    ///     .with_max_frame_len((4 << 20) + 1024)
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn with_max_request_len(mut self, len: usize) -> Self {
        self.session.max_request_len = len;
        self
    }

    /// A deadline for every request (default none); see [`Client::with_timeout`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use std::time::Duration;
    ///
    /// // Every request gives up after 5 s with `Error::Timeout`.
    /// let client = zkwire::Client::builder()
    ///     .with_request_timeout(Duration::from_secs(5))
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Authenticates before any request (e.g. `("digest", b"user:password")`), and again on
    /// every reconnect.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// let client = zkwire::Client::builder()
    ///     .with_auth("digest", "alice:alice-secret")
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn with_auth(mut self, scheme: impl Into<String>, auth: impl AsRef<[u8]>) -> Self {
        let auth = Bytes::copy_from_slice(auth.as_ref());
        self.session
            .auth
            .push(AuthPacket::new(scheme, auth).to_bytes());
        self
    }

    /// Authenticates with SASL DIGEST-MD5 (feature `sasl-digest`) on every connection, before
    /// any request: the user and password the server's JAAS `DigestLoginModule` lists. The
    /// session's identity is then `sasl:<user>`.
    ///
    /// A refused password ends the session: [`connect`](Self::connect) fails with
    /// [`Error::AuthFailed`], and nothing is retried.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// let client = zkwire::Client::builder()
    ///     .with_sasl_digest("bob", "bobsecret")
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sasl-digest")]
    pub fn with_sasl_digest(mut self, user: impl Into<String>, password: impl AsRef<[u8]>) -> Self {
        let mechanism = crate::sasl::Digest::new(user, password);
        self.session.sasl = Some(Arc::new(mechanism));
        self
    }

    /// Authenticates with Kerberos (SASL GSSAPI, feature `sasl-gssapi`) on every connection,
    /// before any request; see [`Kerberos`](crate::Kerberos) for where the credentials come
    /// from and how servers are named. The session's identity is then `sasl:<principal>`.
    ///
    /// Missing credentials, or a server the realm does not know, end the session at once:
    /// [`connect`](Self::connect) fails with [`ConnectError::Sasl`], which says why. A server
    /// that refuses the credentials ends it with [`Error::AuthFailed`]. Nothing is retried.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::Kerberos;
    ///
    /// // The ticket cache's principal (after `kinit`), to each server as zookeeper/<host>.
    /// let client = zkwire::Client::builder()
    ///     .with_sasl_kerberos(Kerberos::new())
    ///     .connect("zk1.example.com:2181,zk2.example.com:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sasl-gssapi")]
    pub fn with_sasl_kerberos(mut self, kerberos: crate::Kerberos) -> Self {
        self.session.sasl = Some(Arc::new(kerberos));
        self
    }

    /// After the session expires, start a new one on the same `Client` instead of ending
    /// (default: off, as the Java client). See `docs/renewal.md` for what carries over:
    ///
    /// - the state stream reports `Expired`, then `Connecting` and `Connected` with the new
    ///   session's id ([`Client::session_id`]); [`ClientStats::sessions`](crate::ClientStats)
    ///   counts the sessions;
    /// - requests in flight at the expiry fail with [`Error::SessionExpired`]; requests not
    ///   yet sent, and those made meanwhile, run on the new session;
    /// - the old session's ephemeral nodes are gone; one-shot watchers end with an `Expired`
    ///   event; persistent watchers receive that same event as a marker (events may have been
    ///   missed: re-read what they cover) and go on, registered again on the new session;
    /// - credentials added with [`with_auth`](Self::with_auth) or
    ///   [`Client::add_auth`] are sent again, SASL runs again.
    ///
    /// Off by default because a service that holds ephemeral nodes (a leader, a lock holder)
    /// must notice that it lost them: with renewal on it must watch the state stream for
    /// `Expired` itself (the recipes' guards do).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::SessionState;
    ///
    /// let client = zkwire::Client::builder()
    ///     .with_session_renewal(true)
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// let mut states = client.state_stream();
    /// while let Some(state) = states.next().await {
    ///     if state == SessionState::Expired {
    ///         // The ephemeral nodes went with the old session: register this worker again.
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn with_session_renewal(mut self, enabled: bool) -> Self {
        self.session.renew_on_expiry = enabled;
        self
    }

    /// The ensemble's `tickTime` (its `zoo.cfg`; default 2 s, ZooKeeper's default), or an
    /// upper bound of it. The session's lease, which the recipes' holds trust
    /// ([`Client::lease_deadline`]), counts an answer of the server we talk to only once
    /// the quorum's leader has vouched for it, two ticks later (docs/lease.md): that is what
    /// keeps a hold honest when our server is cut off from the quorum. A tick set lower
    /// than the servers' lets a hold outlive its session in such a partition; one set
    /// higher only costs lease time, and the session timeout must cover it (the recipes
    /// refuse a hold whose lease cannot be kept, with the figures).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use std::time::Duration;
    /// let client = zkwire::Client::builder()
    ///     .with_server_tick(Duration::from_millis(500))
    ///     .with_session_timeout(Duration::from_secs(10))
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn with_server_tick(mut self, tick: Duration) -> Self {
        self.session.relay_bound = Some(relay_bound(tick));
        self
    }

    /// Gives up connecting as soon as every host of the connect string has refused the
    /// connection or failed to resolve once: [`connect`](Self::connect) then fails with
    /// [`ConnectError::Unreachable`] at once instead of retrying until the session timeout.
    /// Off by default: a server restarting refuses connections for a moment, and a client
    /// started with its ensemble would give up too early. A running client keeps retrying
    /// either way and reports the verdict through [`Client::connect_error`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::Error;
    ///
    /// let connected = zkwire::Client::builder()
    ///     .with_fail_fast(true)
    ///     .connect("127.0.0.1:2181")
    ///     .await;
    /// if let Err(Error::Connect(e)) = &connected {
    ///     eprintln!("is ZooKeeper running? {e}");
    /// }
    /// let client = connected?;
    /// # Ok(()) }
    /// ```
    pub fn with_fail_fast(mut self, enabled: bool) -> Self {
        self.fail_fast = enabled;
        self
    }

    /// How many undelivered events a persistent watcher may hold (default 1024).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// // A consumer that may fall far behind a busy subtree's watch.
    /// let client = zkwire::Client::builder()
    ///     .with_watch_capacity(16_384)
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn with_watch_capacity(mut self, capacity: usize) -> Self {
        self.watch_capacity = capacity.max(1);
        self
    }

    /// Resumes an existing session (its id and password) instead of creating one.
    ///
    /// ```no_run
    /// # async fn run(id: i64, password: zkwire::bytes::Bytes) -> Result<(), zkwire::Error> {
    /// // The session id and password the previous run of this process saved.
    /// let client = zkwire::Client::builder()
    ///     .with_session(id, password)
    ///     .connect("127.0.0.1:2181")
    ///     .await?;
    /// assert_eq!(client.session_id(), id);
    /// # Ok(()) }
    /// ```
    pub fn with_session(mut self, session_id: i64, passwd: Bytes) -> Self {
        self.session.resume = Some((session_id, passwd));
        self
    }

    /// Speaks TLS to every host (feature `tls`): they must be `secureClientPort`s.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use zkwire::TlsConfig;
    ///
    /// let tls = TlsConfig::new().with_ca_file("/etc/zookeeper/ca.pem")?;
    /// let client = zkwire::Client::builder()
    ///     .with_tls(tls)
    ///     .connect("zk1.example.com:2281")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: crate::tls::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Connects over TCP (or TLS, if configured) and waits until the session is established
    /// (and, with credentials, until the server has accepted them).
    ///
    /// `connect_string` is `host[:port][,host[:port]…][/chroot]`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::error::ConnectError;
    /// use zkwire::Error;
    ///
    /// match zkwire::Client::builder().connect("zk1:2181,zk2:2181/app").await {
    ///     Ok(client) => println!("session {:#x}", client.session_id()),
    ///     Err(Error::Connect(ConnectError::NoChroot { chroot })) => {
    ///         eprintln!("create {chroot} first");
    ///     }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConnectString`]; [`Error::Connect`] as soon as every host has failed in
    /// a way retrying cannot fix (a TLS certificate refused, TLS to a plaintext port or the
    /// reverse, an unusable TLS configuration; with [`with_fail_fast`](Self::with_fail_fast),
    /// every host refused or unresolvable), with
    /// [`ConnectError::Unreachable`] and each host's last failure when no server could be
    /// reached within the session timeout, and with [`ConnectError::NoChroot`] when the
    /// connect string's chroot does not exist; [`Error::Timeout`] when no attempt even
    /// failed in that time; [`Error::SessionExpired`] when resuming an expired session;
    /// [`Error::AuthFailed`].
    pub async fn connect(self, connect_string: &str) -> Result<Client, Error> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            let connector = crate::tls::TlsConnector::new(tls).map_err(|e| {
                Error::Connect(ConnectError::InvalidTlsConfig {
                    reason: e.to_string(),
                })
            })?;
            return self.connect_with(connect_string, connector).await;
        }
        self.connect_with(connect_string, TcpConnector).await
    }

    /// As [`connect`](Self::connect), over streams opened by `connector`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::TcpConnector;
    ///
    /// // Any `Connect` implementation; here the default one.
    /// let client = zkwire::Client::builder()
    ///     .connect_with("127.0.0.1:2181", TcpConnector)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with<C: Connect>(
        self,
        connect_string: &str,
        connector: C,
    ) -> Result<Client, Error> {
        let timeout = self.session.session_timeout;
        let with_auth = !self.session.auth.is_empty();
        let client = self.spawn(connect_string, connector)?;
        client.wait_connected(timeout).await?;
        let chroot = client.inner.chroot.as_ref().map(|c| c.prefix().to_owned());
        if with_auth || chroot.is_some() {
            // The server handles auth packets as it reads them, before the next request: one
            // round trip is enough to know whether the credentials were refused, and whether
            // the chroot (which `/` is, under a chroot) exists.
            match client.with_timeout(timeout).exists("/").await {
                Err(e) if e.is_terminal() => return Err(e),
                Ok(None) if chroot.is_some() => {
                    client.close_quietly();
                    let chroot = chroot.unwrap_or_default();
                    return Err(Error::Connect(ConnectError::NoChroot { chroot }));
                }
                _ => {}
            }
        }
        Ok(client)
    }

    /// Starts the client without waiting for a connection: requests queue until one is up.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), zkwire::Error> {
    /// use zkwire::TcpConnector;
    ///
    /// // Start now, whether or not a server answers yet: requests wait for the connection.
    /// let client = zkwire::Client::builder().spawn("127.0.0.1:2181", TcpConnector)?;
    /// let (config, _stat) = client.get_data("/config").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConnectString`].
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn<C: Connect>(self, connect_string: &str, connector: C) -> Result<Client, Error> {
        let cs = ConnectString::parse(connect_string)?;
        let config = SessionConfig {
            host_count: cs.hosts().len(),
            ..self.session
        };
        let created = tokio::time::Instant::now().into_std();
        let relay_bound = config.relay_bound;
        let session = Session::new(config, created);
        let (tx, rx) = mpsc::channel(self.command_capacity);
        let shared = Arc::new(Shared::new(created));
        let mut driver = Driver::new(session, cs.hosts().to_vec(), connector, rx, shared.clone());
        driver.set_fail_fast(self.fail_fast);
        tokio::spawn(driver.run());
        let inner = Inner {
            commands: tx,
            chroot: cs.chroot().cloned(),
            shared,
            watch_capacity: self.watch_capacity,
            relay_bound,
        };
        Ok(Client {
            inner: Arc::new(inner),
            timeout: self.request_timeout,
            session: None,
        })
    }
}

impl Client {
    async fn wait_connected(&self, timeout: Duration) -> Result<(), Error> {
        let mut state = self.inner.shared.state.subscribe();
        let mut verdict = self.inner.shared.connect_error.subscribe();
        let wait = async {
            tokio::select! {
                s = state.wait_for(|s| s.is_connected() || s.is_terminal()) => {
                    Ok(s.map_or(SessionState::Closed, |s| *s))
                }
                Ok(v) = verdict.wait_for(Option::is_some) => Err(v.clone()),
            }
        };
        let reached = match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(s)) => s,
            Ok(Err(Some(hopeless))) => {
                self.close_quietly();
                return Err(Error::Connect(hopeless));
            }
            Ok(Err(None)) => SessionState::Closed,
            Err(_) => {
                self.close_quietly();
                let failures = self
                    .inner
                    .shared
                    .host_failures
                    .lock()
                    .map(|f| f.clone())
                    .unwrap_or_default();
                if failures.is_empty() {
                    return Err(Error::Timeout);
                }
                return Err(Error::Connect(ConnectError::Unreachable { failures }));
            }
        };
        match reached {
            SessionState::Expired => Err(Error::SessionExpired),
            SessionState::AuthFailed => match self.connect_error() {
                // The client's side could not authenticate: say why.
                Some(why @ ConnectError::Sasl { .. }) => Err(Error::Connect(why)),
                _ => Err(Error::AuthFailed),
            },
            SessionState::Closed => Err(Error::Closed),
            _ => Ok(()),
        }
    }
}

/// The lease's relay bound for an ensemble ticking every `tick`: a follower passes on what it
/// heard at the leader's next ping (every half tick), and a leader cut off from its quorum
/// steps down at most about one and a half ticks after its followers may have left it
/// (docs/lease.md).
pub(super) fn relay_bound(tick: Duration) -> Duration {
    tick.saturating_mul(2)
}
