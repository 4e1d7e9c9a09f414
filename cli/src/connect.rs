//! The global options and the connection they describe.

use std::future::Future;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use zkwire::error::{ConnectError, HostFailure};
use zkwire::{Backoff, Client, Error};

use crate::cli::{show, GlobalArgs};
use crate::fail::{Failure, FAILED, UNAVAILABLE};
use crate::out;
use crate::secure::Security;

/// Where the connect string comes from when `--server` is not given.
pub(crate) const SERVER_ENV: &str = "ZOOKEEPER";
/// The servers' tick when `--server-tick` is not given (what `zkw sandbox` exports).
pub(crate) const SERVER_TICK_ENV: &str = "ZKW_SERVER_TICK";
/// The connect string when neither `--server` nor `ZOOKEEPER` is set.
pub(crate) const DEFAULT_SERVER: &str = "127.0.0.1:2181";
/// The session timeout when `--session-timeout` is not given, at the least
/// ([`default_session_timeout`]).
pub(crate) const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The session timeout when `--session-timeout` is not given, in server ticks, if that is
/// longer than [`DEFAULT_SESSION_TIMEOUT`].
pub(crate) const DEFAULT_SESSION_TICKS: u32 = 10;
/// How long a connection may take before zkw says it is waiting (a local server answers in
/// milliseconds; one that does not answer keeps zkw waiting up to the session timeout).
const SLOW_CONNECT: Duration = Duration::from_secs(1);

/// The session timeout zkw asks for unless told: ten server ticks, at least 10 s. A hold's
/// lease lags by two ticks plus the ping interval on a healthy session, and `--kill-after`
/// must fit beside that lag (docs/lease.md, "The margin"): on ZooKeeper's default 2 s tick a
/// 10 s session would leave a renewal under a second of slack before a healthy command is
/// stopped, 20 s leaves it about four.
pub(crate) fn default_session_timeout(server_tick: Duration) -> Duration {
    server_tick
        .saturating_mul(DEFAULT_SESSION_TICKS)
        .max(DEFAULT_SESSION_TIMEOUT)
}

/// Options every verb accepts.
#[derive(Debug, Clone)]
pub(crate) struct Global {
    /// `host:port[,host:port…][/chroot]`.
    pub(crate) server: String,
    /// The session timeout to ask for; also bounds connecting.
    pub(crate) session_timeout: Duration,
    /// The ensemble's tickTime, when given (`ClientBuilder::with_server_tick`).
    pub(crate) server_tick: Option<Duration>,
    /// Credentials (`scheme`, `credentials`) added to the session.
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    /// Machine-readable output.
    pub(crate) json: bool,
    /// `-v`, `-vv`: say more on stderr (a slow connection, the library's events).
    pub(crate) verbose: u8,
    /// TLS and SASL.
    pub(crate) security: Security,
    /// The shell's session, which every verb shares (and none closes).
    pub(crate) shared: Option<Client>,
}

impl Global {
    /// The servers' tick the session's lease assumes: `--server-tick`, else ZooKeeper's
    /// default.
    pub(crate) fn server_tick(&self) -> Duration {
        self.server_tick.unwrap_or(zkwire::DEFAULT_SERVER_TICK)
    }

    /// The global options of a parsed command line.
    ///
    /// # Errors
    /// A usage failure for a bad `--auth`, TLS or SASL value.
    pub(crate) fn from_args(args: &GlobalArgs) -> Result<Self, Failure> {
        let server = match &args.server {
            Some(s) => s.clone(),
            None => std::env::var(SERVER_ENV)
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_SERVER.to_owned()),
        };
        let tick = args.server_tick.unwrap_or(zkwire::DEFAULT_SERVER_TICK);
        let session_timeout = args
            .session_timeout
            .unwrap_or_else(|| default_session_timeout(tick));
        if session_timeout < Duration::from_millis(100) {
            return Err(Failure::usage("--session-timeout must be at least 100ms"));
        }
        let auth = args
            .auth
            .iter()
            .map(|a| parse_auth(a))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            server,
            session_timeout,
            server_tick: args.server_tick,
            auth,
            json: args.json,
            verbose: args.verbose,
            security: Security::from_args(args)?,
            shared: None,
        })
    }

    /// Connects, waiting at most the session timeout for a server to accept the session.
    ///
    /// # Errors
    /// [`UNAVAILABLE`] when no server answered; a usage failure for a bad connect string.
    pub(crate) async fn connect(&self) -> Result<Client, Failure> {
        self.connect_with(false).await
    }

    /// As [`connect`](Self::connect), but a session that expires is replaced by a new one
    /// (docs/renewal.md): for commands whose nodes come back on their own after an expiry
    /// (`register`). The shell's shared session is returned as it is.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub(crate) async fn connect_renewing(&self) -> Result<Client, Failure> {
        self.connect_with(true).await
    }

    async fn connect_with(&self, renewal: bool) -> Result<Client, Failure> {
        if let Some(client) = &self.shared {
            return Ok(client.clone());
        }
        // An operator who mistyped a host or port wants to hear so now, not after the session
        // timeout: give up once every host has refused or failed to resolve.
        let builder = Client::builder()
            .with_session_timeout(self.session_timeout)
            .with_server_tick(self.server_tick())
            .with_session_renewal(renewal)
            .with_fail_fast(true);
        let mut builder = self.security.apply(builder);
        for (scheme, credentials) in &self.auth {
            builder = builder.with_auth(scheme.clone(), credentials.clone());
        }
        let started = Instant::now();
        let connecting = builder.connect(&self.server);
        tokio::pin!(connecting);
        let connected = tokio::select! {
            connected = &mut connecting => connected,
            () = tokio::time::sleep(SLOW_CONNECT) => {
                self.note_slow_connect();
                connecting.await
            }
        };
        connected.map_err(|e| self.connect_failure(&e, started.elapsed()))
    }

    /// No server has answered yet: on a terminal (or with `-v`), say how long zkw will wait,
    /// rather than seem to hang for the whole session timeout.
    fn note_slow_connect(&self) {
        if self.verbose > 0 || std::io::stderr().is_terminal() {
            out::note(&format!(
                "no answer yet from {}; waiting up to {} (--session-timeout)",
                self.server,
                show(self.session_timeout)
            ));
        }
    }

    /// Runs `work` on a new session whose requests are bounded by the session timeout, then
    /// closes the session (so that its ephemeral nodes go at once, not at expiry).
    ///
    /// # Errors
    /// As [`connect`](Self::connect), and whatever `work` fails with.
    pub(crate) async fn with_session<T, F, Fut>(&self, work: F) -> Result<T, Failure>
    where
        F: FnOnce(Client) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let client = self.connect().await?;
        let result = work(client.with_timeout(self.session_timeout)).await;
        self.close(&client).await;
        result
    }

    /// Closes the session, waiting at most the session timeout (the shell's stays open).
    pub(crate) async fn close(&self, client: &Client) {
        self.close_within(client, self.session_timeout).await;
    }

    /// Closes the session, waiting at most `limit` (the shell's stays open).
    pub(crate) async fn close_within(&self, client: &Client, limit: Duration) {
        if self.shared.is_none() {
            let _ = tokio::time::timeout(limit, client.close()).await;
        }
    }

    /// Runs the idempotent read `op` until it succeeds, fails for good, or the session
    /// timeout has passed: a connection lost mid-request (a server that misbehaves after the
    /// handshake, say) is retried, on the next host if the client moves there.
    ///
    /// # Errors
    /// The first error that is not retryable, or the last one at the time limit.
    pub(crate) async fn read<T, F, Fut>(&self, op: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let backoff = Backoff::new().with_time_limit(self.session_timeout);
        zkwire::retry(backoff, op).await
    }

    /// Why connecting failed, after `waited`: each host and its cause, said once (the
    /// library's messages name the host; so does ours when there is only one).
    fn connect_failure(&self, error: &Error, waited: Duration) -> Failure {
        let server = &self.server;
        let hosts = server.split('/').next().unwrap_or(server);
        let cause = match error {
            Error::InvalidConnectString(e) => {
                return Failure::usage(format!("bad connect string {server:?}: {e}"))
            }
            Error::Timeout => format!(
                "no ZooKeeper server answered within {}",
                show(self.session_timeout)
            ),
            Error::Connect(ConnectError::Unreachable { failures }) => {
                let causes: Vec<String> = failures.iter().map(|f| host_failure(hosts, f)).collect();
                causes.join("; ")
            }
            // Not a server that is down: retrying cannot help, so not "unavailable".
            Error::AuthFailed => {
                let what = if self.security.has_sasl() {
                    "the SASL credentials".to_owned()
                } else {
                    let schemes: Vec<&str> = self.auth.iter().map(|(s, _)| s.as_str()).collect();
                    format!(
                        "the --auth credentials (schemes {schemes:?}; the form is \
                         SCHEME:CREDENTIALS, e.g. digest:alice:secret)"
                    )
                };
                return Failure::new(
                    FAILED,
                    format!("cannot connect to {server}: the server refused {what}"),
                )
                .with_kind("no_auth");
            }
            Error::Connect(ConnectError::NoChroot { chroot }) => {
                let at = hosts;
                return Failure::new(
                    FAILED,
                    format!(
                        "cannot connect to {server}: the chroot {chroot} does not exist; create \
                         it first: zkw --server {at} create -p {chroot}"
                    ),
                )
                .with_kind("no_node");
            }
            other => without_host(hosts, &other.to_string()).to_owned(),
        };
        // Attempts that timed out took a while: say how long (a Timeout names its limit).
        let slow = waited >= SLOW_CONNECT && !matches!(error, Error::Timeout);
        let after = if slow {
            format!(" (gave up after {})", show(tenths(waited)))
        } else {
            String::new()
        };
        let unreachable = matches!(
            error,
            Error::Timeout | Error::Connect(ConnectError::Unreachable { .. })
        );
        let hint = if unreachable {
            format!(" (set --server or {SERVER_ENV})")
        } else {
            String::new()
        };
        let failure = Failure::new(
            connect_code(error),
            format!("cannot connect to {server}: {cause}{after}{hint}"),
        );
        match error {
            // The server refused who we are.
            Error::Connect(ConnectError::Sasl { .. } | ConnectError::TlsRefused { .. }) => {
                failure.with_kind("no_auth")
            }
            _ => failure,
        }
    }
}

/// The exit code of a failed connect: [`UNAVAILABLE`] when no server answered (a later try
/// may), 1 when one answered and the settings are wrong (TLS on one side only, a certificate
/// refused, SASL failed): a script that retries on 69 would retry those for ever.
fn connect_code(error: &Error) -> u8 {
    match error {
        Error::Connect(ConnectError::Unreachable { .. })
        | Error::Timeout
        | Error::ConnectionLoss
        | Error::Io(_)
        | Error::Protocol(_) => UNAVAILABLE,
        _ => FAILED,
    }
}

/// `d` to the nearest tenth of a second: a wait is said as `2s`, not `2s 3ms`.
fn tenths(d: Duration) -> Duration {
    let tenths = (d.as_millis() + 50) / 100;
    Duration::from_millis(u64::try_from(tenths * 100).unwrap_or(u64::MAX))
}

/// One host's failure, without the host when it is the only one (the message names it
/// already) and without the OS's error number, which tells a user nothing more.
fn host_failure(hosts: &str, failure: &HostFailure) -> String {
    let detail = &failure.detail;
    let detail = match detail.rfind(" (os error ") {
        Some(at) if detail.ends_with(')') => detail.get(..at).unwrap_or(detail),
        _ => detail,
    };
    if failure.host == hosts {
        detail.to_owned()
    } else {
        format!("{}: {detail}", failure.host)
    }
}

/// `text` without a leading `HOST: ` when `hosts` names that one host alone.
fn without_host<'a>(hosts: &str, text: &'a str) -> &'a str {
    text.strip_prefix(hosts)
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(text)
}

/// `scheme:credentials`, e.g. `digest:alice:secret`.
fn parse_auth(text: &str) -> Result<(String, Vec<u8>), Failure> {
    match text.split_once(':') {
        Some((scheme, credentials)) if !scheme.is_empty() => {
            Ok((scheme.to_owned(), credentials.as_bytes().to_vec()))
        }
        // The value may be a secret: do not echo it.
        _ => Err(Failure::usage(
            "--auth takes scheme:credentials (e.g. digest:user:password)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answered and refused our settings is not "unavailable" (69), which
    /// scripts retry: retrying cannot help.
    #[test]
    fn settings_a_server_refused_are_not_unavailable() {
        let unreachable = ConnectError::Unreachable {
            failures: Vec::new(),
        };
        assert_eq!(connect_code(&Error::Connect(unreachable)), UNAVAILABLE);
        assert_eq!(connect_code(&Error::Timeout), UNAVAILABLE);
        let host = || "zk1:2281".to_owned();
        let reason = || "refused".to_owned();
        let refused = [
            ConnectError::Sasl {
                host: host(),
                reason: reason(),
            },
            ConnectError::TlsCertificate {
                host: host(),
                reason: reason(),
            },
            ConnectError::TlsRefused {
                host: host(),
                reason: reason(),
            },
            ConnectError::NotTls { host: host() },
            ConnectError::NotPlaintext { host: host() },
        ];
        for error in refused {
            let error = Error::Connect(error);
            assert_eq!(connect_code(&error), FAILED, "{error}");
        }
    }
}
