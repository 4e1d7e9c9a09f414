//! [`ServerConfig`]: what a server or every node of an ensemble is started with (`zoo.cfg`
//! lines, JVM properties, TLS, SASL, ports).

use std::path::PathBuf;
use std::time::Duration;

use super::DEFAULT_TICK_MS;
use crate::kerberos::{Kdc, SERVER_PRINCIPAL};
use crate::tls::{ClientAuth, StoreType, TlsMaterial};

/// Settings for a [`ZkServer`] or for every node of a [`ZkEnsemble`].
///
/// Fields are public; the chaining methods are a convenience. The
/// [`Default`] is `tickTime=200`, `minSessionTimeout=400`,
/// `maxSessionTimeout=60000`, no extra `zoo.cfg` lines, and the JVM system
/// properties `zookeeper.extendedTypesEnabled=true` (TTL nodes) and
/// `zookeeper.forceSync=no` (no fsync; data still survives a process kill,
/// which is all the harness simulates).
///
/// Every generated `zoo.cfg` also contains `clientPortAddress=127.0.0.1`,
/// `admin.enableServer=false`, `4lw.commands.whitelist=*` and
/// `maxClientCnxns=0` (no per-IP connection limit); ensembles additionally
/// get `initLimit=20`, `syncLimit=10` and their `server.N` lines. The
/// [`extra`](Self::extra) lines come last and therefore override any of
/// these.
///
/// [`ZkServer`]: super::ZkServer
/// [`ZkEnsemble`]: super::ZkEnsemble
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// `tickTime` in milliseconds.
    pub tick_time_ms: u32,
    /// `minSessionTimeout` in milliseconds.
    pub min_session_timeout_ms: u32,
    /// `maxSessionTimeout` in milliseconds.
    pub max_session_timeout_ms: u32,
    /// Additional `key=value` lines appended to `zoo.cfg`, in order.
    pub extra: Vec<(String, String)>,
    /// JVM system properties passed as `-Dkey=value`, in order (a later
    /// entry for the same key wins).
    pub jvm_props: Vec<(String, String)>,
    /// Readiness timeout; `None` means [`STANDALONE_START_TIMEOUT`] or
    /// [`ENSEMBLE_START_TIMEOUT`](super::ENSEMBLE_START_TIMEOUT). Also used by restarts.
    ///
    /// [`STANDALONE_START_TIMEOUT`]: super::STANDALONE_START_TIMEOUT
    pub startup_timeout: Option<Duration>,
    /// TLS on a `secureClientPort` of each node; see [`Self::tls`].
    pub tls: Option<ServerTls>,
    /// SASL; see [`Self::sasl_digest`].
    pub sasl: Option<ServerSasl>,
    /// The port clients are to use, instead of a free one; see [`Self::listen_port`].
    pub listen_port: Option<u16>,
}

/// A server's TLS settings (see [`ServerConfig::tls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// `ssl.keyStore.location`.
    pub key_store: PathBuf,
    /// `ssl.trustStore.location`.
    pub trust_store: PathBuf,
    /// Both stores' type.
    pub store_type: StoreType,
    /// `ssl.clientAuth`.
    pub client_auth: ClientAuth,
}

/// A server's SASL settings (see [`ServerConfig::sasl_digest`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerSasl {
    /// DIGEST-MD5 with the JAAS `DigestLoginModule`.
    Digest {
        /// (user, password) pairs.
        users: Vec<(String, String)>,
        /// `sessionRequireClientSASLAuth`: requests before SASL end the session.
        require: bool,
    },
    /// Kerberos (GSSAPI) with the JAAS `Krb5LoginModule` and a keytab.
    Kerberos {
        /// The realm's `krb5.conf` (`java.security.krb5.conf`).
        krb5_conf: PathBuf,
        /// The keytab holding `principal`'s keys.
        keytab: PathBuf,
        /// The server's principal, `service/host@REALM`.
        principal: String,
        /// `sessionRequireClientSASLAuth`.
        require: bool,
    },
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            tick_time_ms: DEFAULT_TICK_MS,
            // ZooKeeper's own default: two ticks.
            min_session_timeout_ms: 2 * DEFAULT_TICK_MS,
            max_session_timeout_ms: 60_000,
            extra: Vec::new(),
            jvm_props: vec![
                (
                    "zookeeper.extendedTypesEnabled".to_owned(),
                    "true".to_owned(),
                ),
                ("zookeeper.forceSync".to_owned(), "no".to_owned()),
            ],
            startup_timeout: None,
            tls: None,
            sasl: None,
            listen_port: None,
        }
    }
}

impl ServerConfig {
    /// Sets `tickTime` (milliseconds).
    #[must_use]
    pub fn tick_time_ms(mut self, ms: u32) -> Self {
        self.tick_time_ms = ms;
        self
    }

    /// Sets `minSessionTimeout` (milliseconds).
    #[must_use]
    pub fn min_session_timeout_ms(mut self, ms: u32) -> Self {
        self.min_session_timeout_ms = ms;
        self
    }

    /// Sets `maxSessionTimeout` (milliseconds).
    #[must_use]
    pub fn max_session_timeout_ms(mut self, ms: u32) -> Self {
        self.max_session_timeout_ms = ms;
        self
    }

    /// Appends the line `key=value` to `zoo.cfg` (after all generated lines).
    #[must_use]
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra.push((key.into(), value.into()));
        self
    }

    /// Adds the JVM system property `-Dkey=value` (after the existing ones,
    /// so it overrides an earlier entry for the same key).
    #[must_use]
    pub fn jvm_prop(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.jvm_props.push((key.into(), value.into()));
        self
    }

    /// Enables or disables read-only mode (`-Dreadonlymode.enabled`): a
    /// partitioned ensemble node then keeps serving reads and reports
    /// [`Mode::ReadOnly`](super::Mode::ReadOnly). Off by default.
    ///
    /// Enabling it also enables local sessions (`localSessionsEnabled`, upgradable): a
    /// read-only server answers a request for a brand-new global session with NOTREADONLY,
    /// since creating one is a write; it can only hand out sessions local to itself.
    #[must_use]
    pub fn read_only_mode(self, enabled: bool) -> Self {
        let flag = if enabled { "true" } else { "false" };
        self.jvm_prop("readonlymode.enabled", flag)
            .extra("localSessionsEnabled", flag)
            .extra("localSessionsUpgradingEnabled", flag)
    }

    /// Clients connect on `port` (node `i` of an ensemble on `port + i`): the TLS port when
    /// TLS is on, the plaintext port otherwise; the servers' other ports stay free ones.
    /// For a sandbox that must be found where users look (`zkw sandbox --port`). A port in
    /// use fails the start (no retry on other ports, as with picked ones).
    #[must_use]
    pub fn listen_port(mut self, port: u16) -> Self {
        self.listen_port = Some(port);
        self
    }

    /// Serves TLS too: each node gets a `secureClientPort` (on `127.0.0.1`, see
    /// [`ZkServer::secure_connect_string`]) on the Netty connection factory, with the server
    /// certificate and CA of `material` in stores of `store_type`, `ssl.clientAuth` set from
    /// `client_auth`, and the x509 authentication provider (client certificates become
    /// `x509:<subject>` identities). The plaintext client port stays open. `material` must
    /// outlive the servers.
    ///
    /// [`ZkServer::secure_connect_string`]: super::ZkServer::secure_connect_string
    #[must_use]
    pub fn tls(
        mut self,
        material: &TlsMaterial,
        client_auth: ClientAuth,
        store_type: StoreType,
    ) -> Self {
        self.tls = Some(ServerTls {
            key_store: material.server_key_store(store_type),
            trust_store: material.server_trust_store(store_type),
            store_type,
            client_auth,
        });
        self
    }

    /// Enables SASL DIGEST-MD5 for `users` (a JAAS file with `DigestLoginModule` in each
    /// node's directory); with `require`, `sessionRequireClientSASLAuth=true`, so that a
    /// request of a session that has not authenticated ends it.
    #[must_use]
    pub fn sasl_digest(mut self, users: &[(&str, &str)], require: bool) -> Self {
        self.sasl = Some(ServerSasl::Digest {
            users: users
                .iter()
                .map(|(u, p)| ((*u).to_owned(), (*p).to_owned()))
                .collect(),
            require,
        });
        self
    }

    /// Enables SASL with Kerberos in `kdc`'s realm: the server authenticates as
    /// [`SERVER_PRINCIPAL`] from the realm's server keytab
    /// (JAAS `Krb5LoginModule`, acceptor only: the server never asks the KDC for anything).
    /// `require` as for [`Self::sasl_digest`]. `kdc` must outlive the servers.
    #[must_use]
    pub fn sasl_kerberos(mut self, kdc: &Kdc, require: bool) -> Self {
        self.sasl = Some(ServerSasl::Kerberos {
            krb5_conf: kdc.krb5_conf(),
            keytab: kdc.server_keytab(),
            principal: SERVER_PRINCIPAL.to_owned(),
            require,
        });
        self
    }

    /// Sets the readiness timeout used by start and restart.
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = Some(timeout);
        self
    }
}
