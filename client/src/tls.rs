//! TLS to `secureClientPort` (feature `tls`), on rustls with the *ring* crypto provider.
//!
//! See `docs/security.md` for the server's settings, what is verified, and why *ring*.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::connect_string::HostPort;
use crate::driver::{tcp_connect, Connect};
use crate::error::ConnectError;

/// TLS settings: whom to trust, and the client certificate to show, if any.
///
/// Every host of the connect string must then speak TLS (ZooKeeper's `secureClientPort`).
/// The server's certificate must chain to one of the trust roots and name the host as written
/// in the connect string (a DNS name or an IP address in its subjectAltName); the one way
/// around the name check is [`danger_accept_any_hostname`](Self::danger_accept_any_hostname).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use zkwire::{Client, TlsConfig};
/// let tls = TlsConfig::new()
///     .with_ca_file("/etc/zookeeper/ca.pem")?
///     .with_client_cert_files("/etc/zookeeper/client.pem", "/etc/zookeeper/client-key.pem")?;
/// let client = Client::builder().with_tls(tls).connect("zk1.example:2281").await?;
/// # Ok(()) }
/// ```
///
/// `Debug` shows no key material.
#[derive(Clone)]
pub struct TlsConfig {
    roots: RootCertStore,
    client_cert: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
    check_hostname: bool,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("trust_roots", &self.roots.len())
            .field("client_cert", &self.client_cert.is_some())
            .field("check_hostname", &self.check_hostname)
            .finish()
    }
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// A TLS setting that cannot be used: a file unreadable, no certificate in it, a bad key.
/// The caller's to fix.
///
/// ```
/// use zkwire::TlsConfig;
///
/// let error = TlsConfig::new().with_ca_pem(b"not a certificate").unwrap_err();
/// eprintln!("{error}"); // say what to fix, and stop
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TLS configuration: {0}")]
pub struct TlsConfigError(String);

impl TlsConfigError {
    fn new(what: impl fmt::Display) -> Self {
        Self(what.to_string())
    }
}

impl TlsConfig {
    /// No trust roots and no client certificate: add roots before connecting.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::TlsConfig;
    /// let tls = TlsConfig::new().with_ca_file("/etc/zookeeper/ca.pem")?;
    /// # let _ = tls;
    /// # Ok(()) }
    /// ```
    pub fn new() -> Self {
        Self {
            roots: RootCertStore::empty(),
            client_cert: None,
            check_hostname: true,
        }
    }

    /// Trusts the CA certificates in the PEM file at `path` (one or more
    /// `BEGIN CERTIFICATE` blocks).
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::TlsConfig;
    /// // The ensemble's own CA (`ssl.trustStore` on the servers' side).
    /// let tls = TlsConfig::new().with_ca_file("/etc/zookeeper/ca.pem")?;
    /// # let _ = tls;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The file cannot be read, holds no certificate, or one is not a valid CA certificate.
    pub fn with_ca_file(self, path: impl AsRef<Path>) -> Result<Self, TlsConfigError> {
        let pem = read(path.as_ref())?;
        self.with_ca_pem(&pem)
            .map_err(|e| TlsConfigError::new(format!("{}: {}", path.as_ref().display(), e.0)))
    }

    /// Trusts the CA certificates in `pem`.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::TlsConfig;
    /// // The CA certificate handed over in the environment (a mounted secret, say).
    /// let pem = std::env::var("ZK_CA_PEM").unwrap_or_default();
    /// let tls = TlsConfig::new().with_ca_pem(pem.as_bytes())?;
    /// # let _ = tls;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`with_ca_file`](Self::with_ca_file).
    pub fn with_ca_pem(mut self, pem: &[u8]) -> Result<Self, TlsConfigError> {
        let certs = certificates(pem)?;
        for cert in certs {
            self.roots
                .add(cert)
                .map_err(|e| TlsConfigError::new(format!("not a usable CA certificate: {e}")))?;
        }
        Ok(self)
    }

    /// Trusts the platform's CA certificates too (feature `tls-native-roots`).
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::TlsConfig;
    /// // An ensemble whose certificates chain to a public CA.
    /// let tls = TlsConfig::new().with_native_roots()?;
    /// # let _ = tls;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// None of the platform's certificates could be loaded.
    #[cfg(feature = "tls-native-roots")]
    pub fn with_native_roots(mut self) -> Result<Self, TlsConfigError> {
        let found = rustls_native_certs::load_native_certs();
        let (added, _ignored) = self.roots.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(TlsConfigError::new(format!(
                "no platform CA certificate could be loaded ({} errors)",
                found.errors.len()
            )));
        }
        Ok(self)
    }

    /// Shows this certificate chain (PEM, leaf first) and proves it with this private key
    /// (PEM: PKCS#8, PKCS#1 or SEC1): mutual TLS. With ZooKeeper's x509 authentication
    /// provider the session is then authenticated as `x509:<certificate subject>`.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::TlsConfig;
    /// let tls = TlsConfig::new()
    ///     .with_ca_file("/etc/zookeeper/ca.pem")?
    ///     .with_client_cert_files("/etc/zookeeper/client.pem", "/etc/zookeeper/client-key.pem")?;
    /// # let _ = tls;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A file cannot be read or holds no certificate or key.
    pub fn with_client_cert_files(
        self,
        cert_path: impl AsRef<Path>,
        key_path: impl AsRef<Path>,
    ) -> Result<Self, TlsConfigError> {
        let cert = read(cert_path.as_ref())?;
        let key = read(key_path.as_ref())?;
        self.with_client_cert_pem(&cert, &key)
    }

    /// As [`with_client_cert_files`](Self::with_client_cert_files), from PEM bytes.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::TlsConfig;
    /// // The client certificate and key handed over in the environment.
    /// let cert = std::env::var("ZK_CLIENT_CERT").unwrap_or_default();
    /// let key = std::env::var("ZK_CLIENT_KEY").unwrap_or_default();
    /// let tls = TlsConfig::new()
    ///     .with_ca_file("/etc/zookeeper/ca.pem")?
    ///     .with_client_cert_pem(cert.as_bytes(), key.as_bytes())?;
    /// # let _ = tls;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// No certificate in `cert_pem`, or no private key in `key_pem`.
    pub fn with_client_cert_pem(
        mut self,
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<Self, TlsConfigError> {
        let chain = certificates(cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| TlsConfigError::new(format!("no usable private key: {e}")))?;
        self.client_cert = Some((chain, Arc::new(key)));
        Ok(self)
    }

    /// **Dangerous**: accepts a certificate issued for any name, as long as it chains to a
    /// trust root. Any holder of such a certificate can then pose as the server. Only for test
    /// ensembles reached by an address their certificates do not name.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::TlsConfig;
    /// // A test ensemble reached through 127.0.0.1, with certificates for other names.
    /// let tls = TlsConfig::new()
    ///     .with_ca_file("tests/ca.pem")?
    ///     .danger_accept_any_hostname();
    /// # let _ = tls;
    /// # Ok(()) }
    /// ```
    pub fn danger_accept_any_hostname(mut self) -> Self {
        self.check_hostname = false;
        self
    }

    /// The rustls configuration.
    pub(crate) fn build(&self) -> Result<Arc<ClientConfig>, TlsConfigError> {
        if self.roots.is_empty() {
            return Err(TlsConfigError::new(
                "no trust roots: add a CA file (or the platform's roots)",
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiServerVerifier::builder_with_provider(
            Arc::new(self.roots.clone()),
            provider.clone(),
        )
        .build()
        .map_err(TlsConfigError::new)?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsConfigError::new)?;
        let builder = if self.check_hostname {
            builder.with_webpki_verifier(verifier)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostname(verifier)))
        };
        let config = match &self.client_cert {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| TlsConfigError::new(format!("client certificate: {e}")))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|e| TlsConfigError::new(format!("{}: {e}", path.display())))
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::new(format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsConfigError::new("no certificate in the PEM data"));
    }
    Ok(certs)
}

/// Opens TLS streams over TCP; what [`ClientBuilder::connect`](crate::ClientBuilder::connect)
/// uses when TLS is configured.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use zkwire::{TlsConfig, TlsConnector};
///
/// // What `ClientBuilder::with_tls` makes, as a connector of its own (to wrap in another one).
/// let tls = TlsConfig::new().with_ca_file("/etc/zookeeper/ca.pem")?;
/// let client = zkwire::Client::builder()
///     .connect_with("zk1.example.com:2281", TlsConnector::new(&tls)?)
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector").finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// A connector with these settings.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), zkwire::TlsConfigError> {
    /// use zkwire::{TlsConfig, TlsConnector};
    /// let tls = TlsConfig::new().with_ca_file("/etc/zookeeper/ca.pem")?;
    /// let connector = TlsConnector::new(&tls)?; // checks the settings now, not at connection time
    /// # let _ = connector;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The settings cannot be used (no trust roots, a bad client key).
    pub fn new(config: &TlsConfig) -> Result<Self, TlsConfigError> {
        Ok(Self {
            config: config.build()?,
        })
    }
}

impl Connect for TlsConnector {
    type Stream = TlsStream<TcpStream>;

    async fn connect(&self, host: &HostPort) -> io::Result<Self::Stream> {
        let name = ServerName::try_from(host.host().to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let tcp = tcp_connect(host).await?;
        tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| classify(host, e))
    }
}

/// Turns handshake failures that retrying cannot fix into a [`ConnectError`].
fn classify(host: &HostPort, e: io::Error) -> io::Error {
    let host_name = host.to_string();
    let verdict = match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(reason)) => ConnectError::TlsCertificate {
            host: host_name,
            reason: describe(reason),
        },
        Some(rustls::Error::AlertReceived(alert)) => ConnectError::TlsRefused {
            host: host_name,
            reason: format!("alert {alert:?}"),
        },
        Some(other) => ConnectError::TlsRefused {
            host: host_name,
            reason: other.to_string(),
        },
        None if e.kind() == io::ErrorKind::UnexpectedEof => {
            ConnectError::NotTls { host: host_name }
        }
        None => return e,
    };
    io::Error::other(verdict)
}

fn describe(reason: &CertificateError) -> String {
    match reason {
        CertificateError::UnknownIssuer => "signed by a CA that is not trusted".to_owned(),
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => format!(
            "not issued for host name {}: it names {}; connect by one of those names",
            server_name_text(expected),
            presented
                .iter()
                .map(|name| unquoted(name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        CertificateError::NotValidForName => "not issued for this host name".to_owned(),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            format!("expired ({reason:?})")
        }
        other => format!("{other:?}"),
    }
}

/// A server name as a user writes it (`localhost`, `127.0.0.1`).
fn server_name_text(name: &ServerName<'_>) -> String {
    match name {
        ServerName::DnsName(dns) => dns.as_ref().to_owned(),
        ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        other => format!("{other:?}"),
    }
}

/// The name inside rustls' rendering of a presented name (`DnsName("localhost")`), or the
/// rendering itself.
fn unquoted(presented: &str) -> &str {
    presented
        .split_once('"')
        .and_then(|(_, rest)| rest.rsplit_once('"'))
        .map_or(presented, |(inner, _)| inner)
}

/// Verifies the chain but not the name (see [`TlsConfig::danger_accept_any_hostname`]).
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
