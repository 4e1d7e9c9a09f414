//! How the driver reaches a server: any byte stream, through a trait.

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::connect_string::HostPort;
use crate::error::ConnectError;

use super::dial::tcp_connect;

/// Opens byte streams to servers.
///
/// The default, [`TcpConnector`], resolves the host name again at every attempt (so a
/// server that moved to a new address is found, ZOOKEEPER-2184), dials a name's addresses
/// from one drawn at random, each with a 250 ms head start over the next (so one address
/// that is down or refuses our session does not take every attempt), and disables Nagle's
/// algorithm. Tests substitute in-memory streams or a fault-injecting proxy.
///
/// ```no_run
/// use std::io;
/// use zkwire::{Connect, HostPort, TcpConnector};
///
/// /// Plain TCP, logging every connection attempt.
/// #[derive(Clone)]
/// struct Logged(TcpConnector);
///
/// impl Connect for Logged {
///     type Stream = tokio::net::TcpStream;
///
///     async fn connect(&self, host: &HostPort) -> io::Result<Self::Stream> {
///         eprintln!("connecting to {host}");
///         self.0.connect(host).await
///     }
/// }
///
/// # async fn run() -> Result<(), zkwire::Error> {
/// let client = zkwire::Client::builder()
///     .connect_with("zk1:2181,zk2:2181", Logged(TcpConnector))
///     .await?;
/// # Ok(()) }
/// ```
pub trait Connect: Clone + Send + Sync + 'static {
    /// The stream type.
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// Opens a stream to `host`. The driver bounds the attempt with the connect timeout.
    ///
    /// A failure that retrying cannot fix (a refused certificate, say) is best returned as
    /// [`io::Error::other`] around a [`ConnectError`]: once every host fails so, connecting
    /// stops with that error instead of retrying until the session timeout.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::io;
    /// use std::net::SocketAddr;
    /// use std::sync::Arc;
    /// use tokio::net::TcpStream;
    /// use zkwire::{Connect, HostPort};
    ///
    /// /// Reaches the servers at fixed addresses, whatever DNS says.
    /// #[derive(Clone)]
    /// struct Pinned(Arc<HashMap<String, SocketAddr>>);
    ///
    /// impl Connect for Pinned {
    ///     type Stream = TcpStream;
    ///
    ///     async fn connect(&self, host: &HostPort) -> io::Result<TcpStream> {
    ///         match self.0.get(host.host()) {
    ///             Some(addr) => TcpStream::connect(*addr).await,
    ///             None => Err(io::Error::other(format!("no address for {host}"))),
    ///         }
    ///     }
    /// }
    /// ```
    fn connect(&self, host: &HostPort) -> impl Future<Output = io::Result<Self::Stream>> + Send;

    /// Called when `host` closed a connection before answering the ZooKeeper handshake,
    /// without sending a byte: finds out whether that is because the two ends disagree on
    /// the transport (say, plaintext spoken to a TLS port), which retrying cannot fix.
    /// Returns `None` when it cannot tell, or when the server is merely not serving yet.
    /// The driver bounds it with the connect timeout. The default says nothing.
    ///
    /// ```
    /// use std::io;
    /// use zkwire::error::ConnectError;
    /// use zkwire::{Connect, HostPort, TcpConnector};
    ///
    /// /// Plain TCP with a log line per attempt, and `TcpConnector`'s diagnosis: a server that
    /// /// closes at once because it speaks TLS is then reported, not retried.
    /// #[derive(Clone)]
    /// struct Logged(TcpConnector);
    ///
    /// impl Connect for Logged {
    ///     type Stream = tokio::net::TcpStream;
    ///
    ///     async fn connect(&self, host: &HostPort) -> io::Result<Self::Stream> {
    ///         eprintln!("connecting to {host}");
    ///         self.0.connect(host).await
    ///     }
    ///
    ///     async fn diagnose_silent_close(&self, host: &HostPort) -> Option<ConnectError> {
    ///         self.0.diagnose_silent_close(host).await
    ///     }
    /// }
    /// ```
    fn diagnose_silent_close(
        &self,
        host: &HostPort,
    ) -> impl Future<Output = Option<ConnectError>> + Send {
        let _ = host;
        std::future::ready(None)
    }
}

/// Plain TCP.
///
/// ```no_run
/// # async fn run() -> Result<(), zkwire::Error> {
/// use zkwire::TcpConnector;
///
/// // What `connect` uses without TLS.
/// let client = zkwire::Client::builder()
///     .connect_with("127.0.0.1:2181", TcpConnector)
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

impl Connect for TcpConnector {
    type Stream = TcpStream;

    async fn connect(&self, host: &HostPort) -> io::Result<TcpStream> {
        tcp_connect(host).await
    }

    /// Sends a minimal TLS 1.2 ClientHello: a TLS port answers it with a handshake record
    /// (its ServerHello) or an alert, whose first byte tells it apart from a plaintext server
    /// that is not serving yet and from a proxy with nothing behind it, which close again or
    /// answer otherwise.
    async fn diagnose_silent_close(&self, host: &HostPort) -> Option<ConnectError> {
        let probe = async {
            let mut stream = tcp_connect(host).await?;
            stream.write_all(&TLS_CLIENT_HELLO).await?;
            let mut answer = [0u8; 1];
            let n = stream.read(&mut answer).await?;
            Ok::<_, io::Error>(n == 1 && matches!(answer[0], TLS_HANDSHAKE | TLS_ALERT))
        };
        match probe.await {
            Ok(true) => Some(ConnectError::NotPlaintext {
                host: host.to_string(),
            }),
            _ => None,
        }
    }
}

/// TLS record content types.
const TLS_ALERT: u8 = 21;
const TLS_HANDSHAKE: u8 = 22;

/// A TLS 1.2 ClientHello with a zero random, no session, four AES-GCM suites (ECDHE with
/// ECDSA or RSA, plain RSA) and no extensions: enough for any TLS server to answer with a
/// ServerHello or an alert.
const TLS_CLIENT_HELLO: [u8; 56] = [
    TLS_HANDSHAKE,
    3,
    1,
    0,
    51, // record: handshake, TLS 1.0 record version, 51 bytes
    1,
    0,
    0,
    47, // ClientHello, 47 bytes
    3,
    3, // TLS 1.2
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0, // random
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0, // no session id
    0,
    8,
    0xc0,
    0x2b,
    0xc0,
    0x2f,
    0x00,
    0x9c,
    0x00,
    0x9d, // cipher suites
    1,
    0, // compression: null
];
