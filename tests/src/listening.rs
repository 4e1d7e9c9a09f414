//! The listening side shared by the fault proxy ([`crate::proxy`]) and the partition relay
//! ([`crate::partition`]): a socket on `127.0.0.1:0` and an accept loop that owns the tasks
//! of the connections it admits.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::task::{JoinHandle, JoinSet};

/// A listening socket and its accept loop; dropping it aborts the loop, and with it every
/// connection task (their sockets close).
#[derive(Debug)]
pub(crate) struct Listening {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Listening {
    /// Listens on `127.0.0.1:0` and, on the runtime of `handle`, hands each accepted
    /// connection to `admit` with the set its task must be spawned in. Callable from any
    /// thread, inside a runtime or not.
    ///
    /// # Errors
    /// When the listening socket cannot be set up.
    pub(crate) fn start(
        handle: &Handle,
        admit: impl FnMut(TcpStream, &mut JoinSet<()>) + Send + 'static,
    ) -> io::Result<Self> {
        let std_listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let listener = {
            let _entered = handle.enter();
            TcpListener::from_std(std_listener)?
        };
        let accept = handle.spawn(accept_loop(listener, admit));
        Ok(Self { addr, accept })
    }

    /// The address connectors use.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Listening {
    /// Aborts the accept loop; it owns the connection tasks, which are aborted with it, so
    /// every socket closes.
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Accepts connections until aborted. Owning the connection tasks in a `JoinSet` is what
/// ties their lifetime to this loop: aborting it drops the set, which aborts them all.
async fn accept_loop(listener: TcpListener, mut admit: impl FnMut(TcpStream, &mut JoinSet<()>)) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => admit(stream, &mut tasks),
                // Out of descriptors and the like: retry later instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}
