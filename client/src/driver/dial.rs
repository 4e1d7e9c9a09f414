//! Dialing a host: its name resolved again at every attempt, and, when it stands for several
//! addresses, the first of them to accept.
//!
//! A name may stand for every server of an ensemble (a DNS round robin, a headless Kubernetes
//! service). Tried in the resolver's order, one after the other, its first address would take
//! every attempt: one that swallows SYNs (a host that is down) would use up the whole connect
//! timeout, and one that accepts TCP but refuses our session (a server that has not seen the
//! zxids we have, or is not serving yet) would be all we ever reach. So each attempt starts at
//! an address drawn at random, as the Java client's host provider shuffles the addresses it
//! resolves, and gives each address a head start over the next instead of its whole timeout.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::diagnosis::NameNotResolved;
use crate::connect_string::HostPort;

/// How long an address has to accept before the next one is dialed beside it: a loopback or
/// LAN handshake takes well under a millisecond, a cross-region one about a hundred.
pub(crate) const HEAD_START: Duration = Duration::from_millis(250);

/// A TCP connection to `host` (resolved now) with Nagle's algorithm off. A name that does
/// not resolve is reported as such (`NameNotResolved`), so that the error after a failed
/// connect can say so.
pub(crate) async fn tcp_connect(host: &HostPort) -> io::Result<TcpStream> {
    let mut addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.host(), host.port()))
        .await
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, NameNotResolved(e.to_string())))?
        .collect();
    if addrs.is_empty() {
        let none = NameNotResolved(format!("{} has no address", host.host()));
        return Err(io::Error::new(io::ErrorKind::NotFound, none));
    }
    let start = random_below(addrs.len());
    addrs.rotate_left(start);
    let stream = first_to_accept(&addrs, HEAD_START).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Dials `addrs` in order, each `head_start` after the one before it or as soon as it
/// failed, and returns the first connection made (the others are dropped); the last error
/// when none is.
pub(crate) async fn first_to_accept(
    addrs: &[SocketAddr],
    head_start: Duration,
) -> io::Result<TcpStream> {
    if let [only] = addrs {
        return TcpStream::connect(only).await;
    }
    let mut untried = addrs.iter().copied();
    let mut dialing = JoinSet::new();
    let mut last_error = None;
    loop {
        if dialing.is_empty() {
            let Some(addr) = untried.next() else {
                return Err(last_error.unwrap_or_else(|| io::ErrorKind::NotFound.into()));
            };
            dialing.spawn(TcpStream::connect(addr));
        }
        let more = untried.len() > 0;
        tokio::select! {
            Some(dialed) = dialing.join_next() => match dialed {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last_error = Some(e),
                Err(e) => last_error = Some(io::Error::other(e)),
            },
            () = tokio::time::sleep(head_start), if more => {
                if let Some(addr) = untried.next() {
                    dialing.spawn(TcpStream::connect(addr));
                }
            }
        }
    }
}

/// A number below `n` (at least 1), drawn from the standard library's per-process random
/// hash keys: nothing here needs more than an even spread.
fn random_below(n: usize) -> usize {
    let draw = RandomState::new().build_hasher().finish();
    let n = u64::try_from(n).unwrap_or(u64::MAX).max(1);
    usize::try_from(draw % n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::net::{TcpListener, TcpSocket};

    /// A listening address that takes no more connections: its accept queue (backlog 0) is
    /// full, so the kernel drops further SYNs and a dial hangs, as to a host that is down.
    async fn swallowing_syns() -> (TcpListener, TcpStream) {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(0).unwrap();
        let filler = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        (listener, filler)
    }

    /// An address that swallows SYNs delays the dial by its head start, not by its timeout.
    #[tokio::test]
    async fn an_address_that_never_answers_costs_only_its_head_start() {
        let (dead, _filler) = swallowing_syns().await;
        let dead = dead.local_addr().unwrap();
        let hang = tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(dead));
        assert!(hang.await.is_err(), "the dead address must hang");

        let live = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addrs = [dead, live.local_addr().unwrap()];
        let started = tokio::time::Instant::now();
        let head_start = Duration::from_millis(50);
        let dial = tokio::time::timeout(Duration::from_secs(5), first_to_accept(&addrs, head_start));
        let stream = dial.await.expect("not held up by the dead address").unwrap();
        assert_eq!(stream.peer_addr().unwrap(), addrs[1]);
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    }

    /// A refused address is passed over at once; with every address refused, the last error.
    #[tokio::test]
    async fn refused_addresses_are_passed_over_at_once() {
        let closed = {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            listener.local_addr().unwrap()
        };
        let live = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addrs = [closed, live.local_addr().unwrap()];
        let hour = Duration::from_secs(3600);
        let dial = tokio::time::timeout(Duration::from_secs(5), first_to_accept(&addrs, hour));
        let stream = dial.await.expect("no head start waited").unwrap();
        assert_eq!(stream.peer_addr().unwrap(), addrs[1]);

        let refused = first_to_accept(&[closed, closed], hour).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    }

    /// The first address tried is spread over all of them.
    #[test]
    fn the_starting_address_is_spread() {
        let mut seen = [0usize; 3];
        for _ in 0..300 {
            seen[random_below(3)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 30), "{seen:?}");
        assert_eq!(random_below(1), 0);
    }
}
