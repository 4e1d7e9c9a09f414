//! The forwarding loop shared by the fault proxy ([`crate::proxy`]) and the partition relay
//! ([`crate::partition`]): both queue what each socket reads on a lane of their own and write
//! it to the other socket when their faults allow, re-reading the faults whenever they change.

use std::io;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

/// Bytes read from a socket in one call.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// The lane of what the client sends to the server.
pub(crate) const TO_SERVER: usize = 0;
/// The lane of what the server sends to the client.
pub(crate) const TO_CLIENT: usize = 1;

/// What is queued one way, as [`pump`] sees it.
pub(crate) trait Queue<F> {
    /// Whether the socket that feeds this queue is read.
    fn wants_read(&self, faults: &F) -> bool;
    /// What may be written now (empty: nothing).
    fn next_write(&self, now: Instant, faults: &F) -> Bytes;
    /// When the front of the queue becomes writable, if it waits on its delay only.
    fn wake_at(&self, now: Instant, faults: &F) -> Option<Instant>;
}

/// A connection's forwarding state, as [`pump`] drives it. Lanes are [`TO_SERVER`] and
/// [`TO_CLIENT`].
pub(crate) trait Lanes {
    /// A snapshot of the faults in force.
    type Faults;
    /// How a connection ends.
    type End;
    /// What is queued each way.
    type Queue: Queue<Self::Faults>;
    /// How it ends when the handle that switches the faults is gone.
    const ORPHANED: Self::End;

    /// The faults in force now.
    fn faults(&self) -> Self::Faults;
    /// Applies the faults that end (or empty) the connection; `Some` ends it.
    fn check(&mut self, faults: &Self::Faults) -> Option<Self::End>;
    /// The queues, indexed by lane.
    fn lanes(&self) -> &[Self::Queue; 2];
    /// Whether the socket that feeds `lane` is read.
    fn wants_read(&self, lane: usize, faults: &Self::Faults) -> bool {
        self.lanes()[lane].wants_read(faults)
    }
    /// Queues what was read for `lane`.
    fn on_read(&mut self, lane: usize, read: io::Result<usize>, buf: &[u8]);
    /// Accounts for what was written from `lane`; `Some` ends the connection.
    fn on_written(&mut self, lane: usize, written: io::Result<usize>) -> Option<Self::End>;
}

/// Forwards between the two sockets until a peer stops or a fault ends the connection.
/// `control` is bumped after every change of the faults.
pub(crate) async fn pump<L: Lanes>(
    conn: &mut L,
    client: &mut TcpStream,
    server: &mut TcpStream,
    control: &mut watch::Receiver<u64>,
) -> L::End {
    let (mut client_rd, mut client_wr) = client.split();
    let (mut server_rd, mut server_wr) = server.split();
    let mut client_buf = vec![0; READ_CHUNK];
    let mut server_buf = vec![0; READ_CHUNK];
    loop {
        // Mark the control version seen before reading the faults, so that a change made
        // after this point wakes the select below.
        control.borrow_and_update();
        let faults = conn.faults();
        if let Some(end) = conn.check(&faults) {
            return end;
        }
        let now = Instant::now();
        let lanes = conn.lanes();
        let to_server = lanes[TO_SERVER].next_write(now, &faults);
        let to_client = lanes[TO_CLIENT].next_write(now, &faults);
        let wake = lanes.iter().filter_map(|l| l.wake_at(now, &faults)).min();
        let read_client = conn.wants_read(TO_SERVER, &faults);
        let read_server = conn.wants_read(TO_CLIENT, &faults);
        tokio::select! {
            r = client_rd.read(&mut client_buf), if read_client => {
                conn.on_read(TO_SERVER, r, &client_buf);
            }
            r = server_rd.read(&mut server_buf), if read_server => {
                conn.on_read(TO_CLIENT, r, &server_buf);
            }
            r = server_wr.write(&to_server), if !to_server.is_empty() => {
                if let Some(end) = conn.on_written(TO_SERVER, r) {
                    return end;
                }
            }
            r = client_wr.write(&to_client), if !to_client.is_empty() => {
                if let Some(end) = conn.on_written(TO_CLIENT, r) {
                    return end;
                }
            }
            () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
            changed = control.changed() => {
                // The handle is gone; its Drop is aborting us anyway.
                if changed.is_err() {
                    return L::ORPHANED;
                }
            }
        }
    }
}
