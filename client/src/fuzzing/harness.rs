//! The one sans-IO driver loop around a [`Session`], shared by the session's unit tests and the
//! stateful fuzz target: a virtual clock, the calls a driver makes, and after each of them what
//! a driver does (write out everything the session has to send, then take its events), with
//! the server's end of the transport played by a [`Peer`].
//!
//! Crate-internal: compiled for the unit tests and the fuzz targets only.

use std::time::Instant;

use bytes::Bytes;

use crate::session::{Event, Request, RequestId, Session, SessionConfig};

/// The server's end of the transport: what the session writes and the events it emits.
pub(crate) trait Peer {
    /// A call into the session begins: what follows until the next one is its doing.
    fn begin(&mut self) {}

    /// The session wrote `bytes` on the current transport.
    fn written(&mut self, session: &Session, bytes: Bytes);

    /// The session read `bytes`: called after what it wrote in answer (so requests it released
    /// come before the replies to them) and before its events.
    fn received(&mut self, _bytes: &[u8]) {}

    /// The session emitted `event` at `now`.
    fn event(&mut self, now: Instant, event: Event);
}

/// A session, its virtual clock and its peer.
pub(crate) struct Driver<P> {
    pub(crate) session: Session,
    /// The clock every call into the session is given.
    pub(crate) now: Instant,
    pub(crate) peer: P,
}

/// The server name the driver reports for every transport.
pub(crate) const HOST: &str = "zk1";

/// How often `handle_timeout` may run at one instant with the timer still due: past that a
/// driver would spin.
const FIRES_PER_INSTANT: usize = 8;

impl<P: Peer> Driver<P> {
    /// A new session at `now`.
    pub(crate) fn start(config: SessionConfig, now: Instant, peer: P) -> Self {
        Self {
            session: Session::new(config, now),
            now,
            peer,
        }
    }

    /// What a driver does after every call: write everything out, then take the events.
    pub(crate) fn pump(&mut self) {
        self.transmit();
        self.events();
    }

    fn transmit(&mut self) {
        while let Some(bytes) = self.session.poll_transmit() {
            self.peer.written(&self.session, bytes);
        }
    }

    fn events(&mut self) {
        while let Some(event) = self.session.poll_event() {
            self.peer.event(self.now, event);
        }
    }

    /// A transport to the server is open.
    pub(crate) fn connected(&mut self) {
        self.peer.begin();
        self.session.handle_connected(self.now, HOST);
        self.pump();
    }

    /// The transport failed (EOF, reset).
    pub(crate) fn disconnected(&mut self) {
        self.peer.begin();
        self.session.handle_disconnected(self.now);
        self.pump();
    }

    /// Bytes from the server, in one read: handed over (`handle_input`) or, with
    /// `through_buffer`, read into the session's own buffer (`recv_buffer`, `handle_received`).
    pub(crate) fn input(&mut self, bytes: &[u8], through_buffer: bool) {
        self.peer.begin();
        if through_buffer {
            self.session.recv_buffer().extend_from_slice(bytes);
            self.session.handle_received(self.now);
        } else {
            self.session.handle_input(self.now, bytes);
        }
        self.transmit();
        self.peer.received(bytes);
        self.events();
    }

    pub(crate) fn submit(&mut self, request: Request) -> RequestId {
        self.peer.begin();
        let id = self.session.submit(self.now, request);
        self.pump();
        id
    }

    pub(crate) fn close(&mut self) -> RequestId {
        self.peer.begin();
        let id = self.session.close(self.now);
        self.pump();
        id
    }

    /// A wake-up at `now`, due or not (a driver may call `handle_timeout` at any time, e.g.
    /// for another timer of its own).
    pub(crate) fn wake(&mut self) {
        self.peer.begin();
        self.session.handle_timeout(self.now);
        self.pump();
    }

    /// Moves the clock to `target`, firing every timer due by then at the instant
    /// `poll_timeout` names (or at the clock, when that is earlier).
    ///
    /// # Panics
    /// When the timer is still due after `handle_timeout` ran
    /// [`FIRES_PER_INSTANT`] times at one instant: a driver would spin.
    pub(crate) fn advance_to(&mut self, target: Instant) {
        let mut fires = 0;
        while let Some(t) = self.session.poll_timeout().filter(|&t| t <= target) {
            if t > self.now {
                self.now = t;
                fires = 0;
            }
            assert!(
                fires < FIRES_PER_INSTANT,
                "poll_timeout stays in the past after handle_timeout: a driver would spin"
            );
            fires += 1;
            self.wake();
        }
        self.now = self.now.max(target);
    }
}
