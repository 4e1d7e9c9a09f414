//! A frame-aware TCP fault-injection proxy between a client and a ZooKeeper server.
//!
//! [`FaultProxy`] listens on `127.0.0.1:0` and forwards every accepted connection to an
//! upstream address. It reassembles the ZooKeeper frames (`int32 len | payload`) in both
//! directions, so faults can be aimed at protocol events ("cut the connection right after the
//! second create reaches the server") rather than at byte offsets. Every fault is switched at
//! runtime through `&self`, and every injected fault is counted ([`ProxyCounts`]).
//!
//! Faults can be aimed at one direction only: hold it ([`FaultProxy::hold_client_to_server`]),
//! drop its frames ([`FaultProxy::drop_direction`]) or delay them by a seeded random amount
//! ([`FaultProxy::delay_direction`]), while the other direction flows as usual. That is how a
//! one-way partition looks to a client: requests vanish while replies and notifications keep
//! arriving.
//!
//! # Framing
//!
//! The first client→server frame of a connection is a `ConnectRequest` and the first
//! server→client frame a `ConnectResponse`, neither with a header; every later client frame
//! starts with a [`RequestHeader`] and every later server frame with a [`ReplyHeader`]. Frames
//! are forwarded whole: a frame's bytes go out only once all of them have arrived. A stream
//! that stops looking like frames (a negative length, or one over [`MAX_PARSED_FRAME`], as a
//! four-letter word such as `ruok` does) switches that direction to raw pass-through for the
//! rest of the connection.
//!
//! # Resources
//!
//! Each connection is one task that owns both sockets. Bytes waiting to be forwarded (held,
//! delayed or not yet written) are capped at [`MAX_BUFFERED`] per direction: a direction that
//! is being held (blackhole) and goes over the cap has its connection cut; otherwise the proxy
//! just stops reading that side until the queue drains. Logs are capped at [`MAX_LOG`]
//! entries. Dropping the [`FaultProxy`] aborts the accept loop, which aborts every connection
//! task and closes every socket.
//!
//! [`RequestHeader`]: zkwire::proto::RequestHeader
//! [`ReplyHeader`]: zkwire::proto::ReplyHeader

mod accept;
mod conn;
mod framing;
mod handle;
mod state;

#[cfg(test)]
mod tests;

pub use self::handle::FaultProxy;

/// The most bytes waiting to be forwarded in one direction of one connection.
///
/// A held direction (blackhole, one-way hold) that goes over it gets its connection cut
/// ([`ProxyCounts::overflow_cuts`]); a direction that is merely slow or delayed stops being
/// read instead (back-pressure).
pub const MAX_BUFFERED: usize = 64 << 20;

/// The largest frame payload the proxy reassembles; a larger (or negative) length prefix
/// switches the direction to raw pass-through. Well above ZooKeeper's 1 MiB `jute.maxbuffer`,
/// so that oversized requests still reach the server and get rejected there.
pub const MAX_PARSED_FRAME: usize = 16 << 20;

/// The most entries each frame log ([`FaultProxy::client_frames`],
/// [`FaultProxy::server_frames`], [`FaultProxy::set_watches_path_bytes`]) keeps; later
/// frames are still counted but no longer logged.
pub const MAX_LOG: usize = 1 << 16;

/// Which way bytes flow through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server: requests.
    ClientToServer,
    /// From the server to the client: replies and notifications.
    ServerToClient,
}

impl Direction {
    const fn index(self) -> usize {
        match self {
            Self::ClientToServer => 0,
            Self::ServerToClient => 1,
        }
    }
}

/// How many faults the proxy has injected, by kind (a snapshot).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    /// Connections closed (FIN) by [`FaultProxy::cut_all`].
    pub cut_connections: usize,
    /// Connections reset (RST) by [`FaultProxy::reset_all`].
    pub reset_connections: usize,
    /// Triggers of [`FaultProxy::cut_after_request`] that fired.
    pub triggered: usize,
    /// Client pings swallowed by [`FaultProxy::drop_pings`].
    pub pings_dropped: usize,
    /// Frames (or raw chunks) thrown away by [`FaultProxy::blackhole_drop`].
    pub frames_discarded: usize,
    /// Client→server frames (or raw chunks) thrown away by
    /// [`FaultProxy::drop_direction`]`(ClientToServer, true)`.
    pub client_frames_dropped: usize,
    /// Server→client frames (or raw chunks) thrown away by
    /// [`FaultProxy::drop_direction`]`(ServerToClient, true)`.
    pub server_frames_dropped: usize,
    /// Connections refused by [`FaultProxy::refuse`].
    pub refused: usize,
    /// Connections cut because a held direction went over [`MAX_BUFFERED`].
    pub overflow_cuts: usize,
    /// SetWatches/SetWatches2 frames whose body did not decode.
    pub undecodable_set_watches: usize,
}
