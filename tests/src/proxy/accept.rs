//! Accepting connections: a task per connection, which connects to the upstream and then
//! hands both sockets to the connection's pump.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::conn::Conn;
use super::state::{lock, Shared};
use crate::pump::pump;

/// How long a new connection waits for the upstream's TCP handshake before giving up (the
/// client then sees its connection closed).
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Admits a connection the listener accepted: refused, or its task spawned in `tasks`.
pub(super) fn admit(client: TcpStream, shared: &Arc<Shared>, tasks: &mut JoinSet<()>) {
    let faults = shared.faults();
    if faults.refuse {
        shared.stats().counts.refused += 1;
        return; // dropping the stream closes it
    }
    // The epochs are read here, not in the task, so that a cut issued after this accept
    // reaches the connection even if its task has not run yet.
    let birth = Birth {
        cut: faults.cut_epoch,
        reset: faults.reset_epoch,
    };
    let guard = ActiveGuard::new(Arc::clone(shared));
    tasks.spawn(run_connection(client, guard, birth));
}

/// Counts a connection as active for as long as its task (or its unpolled future) exists.
pub(super) struct ActiveGuard(Arc<Shared>);

impl ActiveGuard {
    fn new(shared: Arc<Shared>) -> Self {
        let mut stats = shared.stats();
        stats.connections += 1;
        stats.active += 1;
        drop(stats);
        Self(shared)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.stats().active -= 1;
    }
}

/// The fault epochs a connection was accepted under.
#[derive(Debug, Clone, Copy)]
pub(super) struct Birth {
    pub(super) cut: u64,
    pub(super) reset: u64,
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// A peer closed or failed and what it had sent was forwarded.
    Closed,
    /// Closed by a fault: shut both sockets down (FIN).
    Cut,
    /// Reset by a fault: RST to both peers.
    Reset,
}

pub(super) async fn run_connection(mut client: TcpStream, guard: ActiveGuard, birth: Birth) {
    let shared = Arc::clone(&guard.0);
    let upstream = *lock(&shared.upstream);
    let Ok(Ok(mut server)) =
        tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream)).await
    else {
        return; // the client sees its connection closed, as if the server were down
    };
    // Forward small frames at once; split mode relies on each 1-byte write leaving alone.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let mut control = shared.control.subscribe();
    let mut conn = Conn::new(shared, birth);
    let end = pump(&mut conn, &mut client, &mut server, &mut control).await;
    match end {
        End::Reset => {
            let _ = client.set_zero_linger();
            let _ = server.set_zero_linger();
        }
        End::Cut => {
            let _ = client.shutdown().await;
            let _ = server.shutdown().await;
        }
        End::Closed => {}
    }
    drop(guard);
}
