//! ZooKeeper connect strings: `host[:port][,host[:port]...][/chroot]`.
//!
//! A connect string lists the ensemble's servers and optionally a chroot,
//! e.g. `zk1:2181,zk2:2181,[::1]:2182/app/x`. This module only parses it;
//! host names are kept as written and resolved later, at every connection
//! attempt, so that DNS changes (servers moved, added or removed behind a
//! name) are picked up without restarting the client.

use std::fmt;
use std::str::FromStr;

use crate::path::{Chroot, InvalidPath};

/// The port used for a host written without one.
pub(crate) const DEFAULT_PORT: u16 = 2181;

/// One server of a connect string: an unresolved host and a port.
///
/// The host is a DNS name or an IP address, kept as text; an IPv6 address is
/// stored without its brackets. A [`Connect`](crate::Connect) implementation
/// receives one at each connection attempt and resolves it then.
///
/// ```
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
///         eprintln!("connecting to {host}"); // `zk1:2181`, `[::1]:2181`
///         self.0.connect(host).await
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    host: String,
    port: u16,
}

impl HostPort {
    /// The host name or IP address, without brackets, e.g. `zk1`,
    /// `127.0.0.1` or `::1`. Never empty.
    ///
    /// ```
    /// use std::io;
    /// use tokio::net::TcpStream;
    /// use zkwire::{Connect, HostPort};
    ///
    /// /// Plain TCP, resolving each host name at every attempt.
    /// #[derive(Clone)]
    /// struct Tcp;
    ///
    /// impl Connect for Tcp {
    ///     type Stream = TcpStream;
    ///
    ///     async fn connect(&self, host: &HostPort) -> io::Result<TcpStream> {
    ///         TcpStream::connect((host.host(), host.port())).await
    ///     }
    /// }
    /// ```
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, never 0.
    ///
    /// ```
    /// use std::io;
    /// use tokio::net::TcpStream;
    /// use zkwire::{Connect, HostPort};
    ///
    /// /// Every server through a local tunnel on its own port (`ssh -L 2181:zk1:2181 ...`).
    /// #[derive(Clone)]
    /// struct Tunnels;
    ///
    /// impl Connect for Tunnels {
    ///     type Stream = TcpStream;
    ///
    ///     async fn connect(&self, host: &HostPort) -> io::Result<TcpStream> {
    ///         TcpStream::connect(("127.0.0.1", host.port())).await
    ///     }
    /// }
    /// ```
    #[must_use]
    pub const fn port(&self) -> u16 {
        self.port
    }
}

/// Formats as `host:port`, or `[host]:port` when the host contains a `:`
/// (an IPv6 address), so the output parses back to the same value.
impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed connect string: at least one server and an optional chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    hosts: Vec<HostPort>,
    chroot: Option<Chroot>,
}

impl ConnectString {
    /// Parses `host[:port][,host[:port]...][/chroot]`.
    ///
    /// - Hosts are separated by `,`; whitespace around each one is ignored.
    /// - A port is a decimal number from 1 to 65535; without one,
    ///   [`DEFAULT_PORT`] (2181) is used.
    /// - IPv6 addresses must be bracketed: `[::1]:2181`, or `[::1]` for the
    ///   default port.
    /// - The chroot is everything from the first `/` on, taken verbatim (not
    ///   trimmed). It must be a valid path; `/` alone means no chroot.
    ///
    /// Host names are neither resolved nor checked beyond these rules.
    /// Duplicate hosts are kept.
    ///
    /// # Errors
    ///
    /// - [`InvalidConnectString::NoHosts`] if nothing but whitespace precedes
    ///   the chroot (or the whole string is blank).
    /// - [`InvalidConnectString::EmptyHost`] if a host entry or its host name
    ///   is empty, as in `a,,b` or `:2181`.
    /// - [`InvalidConnectString::BadPort`] if a port is empty, not decimal,
    ///   0, or above 65535.
    /// - [`InvalidConnectString::UnclosedBracket`] for `[` without `]`.
    /// - [`InvalidConnectString::BadHost`] for other malformed entries, such
    ///   as an unbracketed IPv6 address or whitespace inside a host.
    /// - [`InvalidConnectString::BadChroot`] if the chroot is not a valid
    ///   path, e.g. `/app/` or `//x`.
    ///
    /// The first error from the left is reported.
    pub(crate) fn parse(s: &str) -> Result<Self, InvalidConnectString> {
        // No host syntax (names, IPv4, bracketed IPv6) contains a '/', so the
        // first one starts the chroot.
        let (host_list, chroot) = match s.find('/') {
            Some(slash) => s.split_at(slash),
            None => (s, "/"),
        };
        if host_list.trim().is_empty() {
            return Err(InvalidConnectString::NoHosts);
        }
        let hosts = host_list
            .split(',')
            .enumerate()
            .map(|(index, entry)| parse_host_port(index, entry.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        let chroot = Chroot::new(chroot)?;
        Ok(Self { hosts, chroot })
    }

    /// The servers, in the order written. Never empty.
    #[must_use]
    pub(crate) fn hosts(&self) -> &[HostPort] {
        &self.hosts
    }

    /// The chroot, if any (a chroot of `/` is `None`).
    #[must_use]
    pub(crate) fn chroot(&self) -> Option<&Chroot> {
        self.chroot.as_ref()
    }
}

impl FromStr for ConnectString {
    type Err = InvalidConnectString;

    /// Same as [`ConnectString::parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Formats in canonical form, e.g. `a:2181,[::1]:2182/app`: every port
/// explicit, no whitespace. The output parses back to the same value.
impl fmt::Display for ConnectString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, host) in self.hosts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{host}")?;
        }
        if let Some(chroot) = &self.chroot {
            write!(f, "{chroot}")?;
        }
        Ok(())
    }
}

/// Why a connect string (`host[:port][,host[:port]...][/chroot]`) could not be parsed.
///
/// Returned inside [`Error::InvalidConnectString`](crate::Error::InvalidConnectString) by
/// [`Client::connect`](crate::Client::connect) and the builder's `connect` methods.
///
/// ```
/// use zkwire::error::InvalidConnectString;
/// use zkwire::{Client, Error, TcpConnector};
///
/// let started = Client::builder().spawn("zk1:99999", TcpConnector);
/// assert!(matches!(
///     started,
///     Err(Error::InvalidConnectString(InvalidConnectString::BadPort { .. }))
/// ));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidConnectString {
    /// The connect string lists no hosts.
    #[error("connect string has no hosts")]
    NoHosts,
    /// A host entry, or the host name within it, is empty.
    #[error("host #{index} of the connect string is empty (counting from 0)")]
    EmptyHost {
        /// Position of the entry in the comma-separated list, from 0.
        index: usize,
    },
    /// A port is not a decimal number from 1 to 65535.
    #[error("invalid port {port:?} for host {host:?}: expected a number from 1 to 65535")]
    BadPort {
        /// The host the port belongs to, without brackets.
        host: String,
        /// The port as written (possibly empty).
        port: String,
    },
    /// A host entry opens `[` but never closes it.
    #[error("host {host:?} opens '[' without a matching ']'")]
    UnclosedBracket {
        /// The whole host entry as written, trimmed.
        host: String,
    },
    /// A host entry is malformed in some other way.
    #[error("host {host:?} is malformed: {reason}")]
    BadHost {
        /// The whole host entry as written, trimmed.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The chroot is not a valid ZooKeeper path.
    #[error("invalid chroot in connect string: {0}")]
    BadChroot(#[from] InvalidPath),
}

/// Parses one trimmed host entry, the `index`th in the list.
fn parse_host_port(index: usize, entry: &str) -> Result<HostPort, InvalidConnectString> {
    let bad_host = |reason| InvalidConnectString::BadHost {
        host: entry.to_owned(),
        reason,
    };
    let (host, port) = if let Some(bracketed) = entry.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return Err(InvalidConnectString::UnclosedBracket {
                host: entry.to_owned(),
            });
        };
        let port = if after.is_empty() {
            None
        } else if let Some(port) = after.strip_prefix(':') {
            Some(port)
        } else {
            return Err(bad_host("expected ':port' or nothing after ']'"));
        };
        (host, port)
    } else {
        match entry.split_once(':') {
            Some((_, port)) if port.contains(':') => {
                // Without brackets there is no telling where an IPv6 address
                // ends and the port begins ("fe80::1:2181").
                return Err(bad_host(
                    "more than one ':'; write IPv6 addresses as [address]:port",
                ));
            }
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return Err(InvalidConnectString::EmptyHost { index });
    }
    if host.contains(['[', ']']) {
        return Err(bad_host("misplaced '[' or ']'"));
    }
    if host.contains(char::is_whitespace) {
        return Err(bad_host("host name contains whitespace"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => parse_port(port).ok_or_else(|| InvalidConnectString::BadPort {
            host: host.to_owned(),
            port: port.to_owned(),
        })?,
    };
    Ok(HostPort {
        host: host.to_owned(),
        port,
    })
}

/// A port from 1 to 65535 written in plain decimal digits.
fn parse_port(port: &str) -> Option<u16> {
    // `u16::from_str` would also accept a leading '+'.
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    port.parse().ok().filter(|&port| port != 0)
}

#[cfg(test)]
mod tests;
