//! Which sockets between the servers go through the relays, read from the kernel's socket
//! tables: the check that no link bypasses them.

use std::collections::HashSet;
use std::io;
use std::time::Duration;

use super::ensemble::PartitionedEnsemble;
use super::relay::LinkRelay;

/// Where the servers' sockets between each other come from (see
/// [`PartitionedEnsemble::peer_sockets`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerSockets {
    /// Established connections to a server's real quorum or election port that come from
    /// a relay.
    pub via_relay: usize,
    /// Established connections to a server's real quorum or election port that do not come
    /// from a relay, as `"<server port> <- <peer port>"`; empty when no link bypasses the
    /// relays.
    pub bypassing: Vec<String>,
}

impl PartitionedEnsemble {
    /// Finds the established TCP connections to the servers' real quorum and election ports
    /// (Linux `/proc/net/tcp` and `tcp6`) and sorts them by whether they come from a relay.
    /// A connection from anywhere else means a link bypasses the relays. Each bypass is
    /// confirmed by a second look 300 ms later, to rule out connections caught between
    /// their handshake and the relay noting their port.
    ///
    /// # Errors
    /// When procfs cannot be read.
    pub fn peer_sockets(&self) -> io::Result<PeerSockets> {
        let first = self.peer_sockets_once()?;
        if first.bypassing.is_empty() {
            return Ok(first);
        }
        std::thread::sleep(Duration::from_millis(300));
        let second = self.peer_sockets_once()?;
        Ok(PeerSockets {
            via_relay: second.via_relay,
            bypassing: second
                .bypassing
                .into_iter()
                .filter(|b| first.bypassing.contains(b))
                .collect(),
        })
    }

    fn peer_sockets_once(&self) -> io::Result<PeerSockets> {
        let server_ports: HashSet<u16> = self
            .ports
            .iter()
            .flat_map(|p| [p.quorum, p.election])
            .collect();
        // Relay ports first, then the sockets: a relay connection made in between is then
        // the only kind of false alarm, which the caller's second look clears.
        let relay_ports: HashSet<u16> = self
            .links
            .iter()
            .flat_map(|l| l.relays())
            .flat_map(LinkRelay::upstream_ports)
            .collect();
        let mut out = PeerSockets::default();
        let mut found_table = false;
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let text = match std::fs::read_to_string(table) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            found_table = true;
            for line in text.lines().skip(1) {
                let cols: Vec<&str> = line.split_whitespace().collect();
                let port = |col: usize| {
                    cols.get(col)
                        .and_then(|a| a.rsplit(':').next())
                        .and_then(|p| u16::from_str_radix(p, 16).ok())
                };
                // State 01 is ESTABLISHED.
                let (Some(local), Some(remote), Some(&"01")) = (port(1), port(2), cols.get(3))
                else {
                    continue;
                };
                if !server_ports.contains(&local) {
                    continue;
                }
                if relay_ports.contains(&remote) {
                    out.via_relay += 1;
                } else {
                    out.bypassing.push(format!("{local} <- {remote}"));
                }
            }
        }
        if !found_table {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no /proc/net/tcp: socket tables are only read on Linux",
            ));
        }
        Ok(out)
    }
}
