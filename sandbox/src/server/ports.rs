//! Free loopback ports for the servers: picked at runtime, never handed out twice in one
//! process, or the fixed client ports of [`ServerConfig::listen_port`].

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{ServerConfig, ServerError};

/// Ports already handed out by this process; never handed out twice.
static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// Locks `m`, ignoring poisoning: the guarded state stays consistent across a panic.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Picks `n` distinct free loopback ports (bind `127.0.0.1:0`, read the
/// port, release), none of which this process handed out before.
pub(super) fn pick_ports(n: usize) -> Result<Vec<u16>, ServerError> {
    let mut handed_out = lock(&HANDED_OUT);
    let mut listeners = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    let mut attempts = 0;
    while ports.len() < n {
        attempts += 1;
        if attempts > n * 20 + 100 {
            return Err(ServerError::io(
                "picking free loopback ports",
                io::Error::new(io::ErrorKind::AddrInUse, "no fresh port found"),
            ));
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| ServerError::io("binding 127.0.0.1:0 to pick a port", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| ServerError::io("reading a picked port", e))?
            .port();
        // Keep the listener open while picking so the kernel cannot hand
        // the same port out twice within this batch.
        if !handed_out.contains(&port) {
            ports.push(port);
            handed_out.push(port);
        }
        listeners.push(listener);
    }
    drop(listeners);
    Ok(ports)
}

/// Puts [`ServerConfig::listen_port`] (plus the node's index) in the client-facing slot of
/// each node's ports: `ports` holds `per_node` ports per node, the plaintext client port
/// first and the TLS port at `tls_slot` (when TLS is on).
pub(super) fn apply_listen_port(
    config: &ServerConfig,
    ports: &mut [u16],
    per_node: usize,
    tls_slot: usize,
) -> Result<(), ServerError> {
    let Some(base) = config.listen_port else {
        return Ok(());
    };
    // Standalone: [client, secure]; ensemble: [client, quorum, election, secure].
    let slot = if config.tls.is_some() { tls_slot } else { 0 };
    for (i, node_ports) in ports.chunks_mut(per_node).enumerate() {
        let port = u16::try_from(i)
            .ok()
            .and_then(|i| base.checked_add(i))
            .ok_or_else(|| {
                ServerError::io(
                    "choosing the listen ports",
                    io::Error::new(io::ErrorKind::InvalidInput, "ports run past 65535"),
                )
            })?;
        node_ports[slot] = port;
    }
    Ok(())
}
