//! Four-letter words (`ruok`, `srvr`, `mntr`, …) and the [`Mode`] a server reports.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Connect, read and write timeout of a single four-letter-word exchange.
const FLW_IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest four-letter-word response accepted.
const FLW_MAX_RESPONSE: u64 = 1 << 20;

/// The role a server reports in the `Mode:` line of `srvr`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// `Mode: standalone`.
    Standalone,
    /// `Mode: leader`.
    Leader,
    /// `Mode: follower`.
    Follower,
    /// `Mode: observer`.
    Observer,
    /// `Mode: read-only` (partitioned node with read-only mode enabled).
    ReadOnly,
    /// Any other value, verbatim.
    Other(String),
}

impl Mode {
    pub(super) fn parse(value: &str) -> Self {
        match value.trim() {
            "standalone" => Self::Standalone,
            "leader" => Self::Leader,
            "follower" => Self::Follower,
            "observer" => Self::Observer,
            "read-only" => Self::ReadOnly,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Whether this is a quorum member in a working quorum (leader or follower).
    pub fn is_quorum_member(&self) -> bool {
        matches!(self, Self::Leader | Self::Follower)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Standalone => "standalone",
            Self::Leader => "leader",
            Self::Follower => "follower",
            Self::Observer => "observer",
            Self::ReadOnly => "read-only",
            Self::Other(s) => s,
        })
    }
}

/// Sends the four-letter word `cmd` (e.g. `"ruok"`, `"srvr"`, `"mntr"`) to
/// the ZooKeeper server at `addr` and returns its whole response.
///
/// Each address `addr` resolves to is tried in turn with a 2 s connect
/// timeout; reads and writes time out after 2 s, and the response is read
/// until the server closes the connection (at most 1 MiB). The command
/// must be enabled by the server's `4lw.commands.whitelist` (the harness
/// enables all). `cmd` must be exactly four ASCII letters, otherwise
/// `InvalidInput` is returned. A non-UTF-8 response is decoded lossily.
pub fn four_letter_word<A: ToSocketAddrs>(addr: A, cmd: &str) -> io::Result<String> {
    if cmd.len() != 4 || !cmd.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a four-letter word: {cmd:?}"),
        ));
    }
    let mut last_err = None;
    for sa in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&sa, FLW_IO_TIMEOUT) {
            Ok(stream) => return exchange_flw(stream, cmd),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing")
    }))
}

fn exchange_flw(mut stream: TcpStream, cmd: &str) -> io::Result<String> {
    stream.set_read_timeout(Some(FLW_IO_TIMEOUT))?;
    stream.set_write_timeout(Some(FLW_IO_TIMEOUT))?;
    stream.write_all(cmd.as_bytes())?;
    let mut buf = Vec::new();
    stream.take(FLW_MAX_RESPONSE).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Asks the server at `addr` for its role with `srvr`.
///
/// Returns `Ok(None)` when the server answers but is not serving requests
/// (e.g. a quorum node during leader election), `Ok(Some(mode))` when it
/// reports a `Mode:` line, and the I/O error when it cannot be reached.
pub fn server_mode<A: ToSocketAddrs>(addr: A) -> io::Result<Option<Mode>> {
    let response = four_letter_word(addr, "srvr")?;
    Ok(response
        .lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(Mode::parse))
}
