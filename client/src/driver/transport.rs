//! How the driver reaches a server: any byte stream, through a trait.

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::connect_string::HostPort;

/// Opens byte streams to servers.
///
/// The default, [`TcpConnector`], resolves the host name again at every attempt (so a
/// server that moved to a new address is found, ZOOKEEPER-2184) and disables Nagle's
/// algorithm. Tests substitute in-memory streams or a fault-injecting proxy.
pub trait Connect: Clone + Send + Sync + 'static {
    /// The stream type.
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// Opens a stream to `host`. The driver bounds the attempt with the connect timeout.
    fn connect(&self, host: &HostPort) -> impl Future<Output = io::Result<Self::Stream>> + Send;
}

/// Plain TCP.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

impl Connect for TcpConnector {
    type Stream = TcpStream;

    async fn connect(&self, host: &HostPort) -> io::Result<TcpStream> {
        let stream = TcpStream::connect((host.host(), host.port())).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}
