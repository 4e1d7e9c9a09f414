//! Opening a connection: the handshake (ConnectRequest and ConnectResponse), what a new
//! connection owes the session before user requests (auth replays, SetWatches), and the SASL
//! exchange that may come first.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::pending::{PendingAuth, Target};
use super::watches::SetWatchesBatch;
use super::{Conn, SaslMechanism, Session, SessionState};
use crate::error::Error;
use crate::jute::{encode_frame, Decode, Encode};
use crate::proto::{
    ConnectRequest, ConnectResponse, ErrorCode, OpCode, ReplyHeader, SaslToken, NEW_SESSION_PASSWD,
};

impl Session {
    /// A transport is up: writes the handshake (ConnectRequest, then auth replays and
    /// SetWatches, or, with SASL, nothing more until the exchange completes).
    ///
    /// User requests are held until the ConnectResponse arrives (and the SASL exchange has
    /// completed), so that an "expired" reply can never be lost behind them.
    ///
    /// `server_host` is the host the transport was opened to, as the connect string names it
    /// (for a SASL mechanism that authenticates the server by name, such as Kerberos).
    pub fn handle_connected(&mut self, now: Instant, server_host: &str) {
        if !self.wants_connection() {
            return;
        }
        self.server_host.clear();
        self.server_host.push_str(server_host);
        self.conn = Conn::AwaitingConnectResponse;
        self.decoder.clear();
        self.transmit.clear();
        self.timers.on_connect(now);
        self.write_connect_request();
        if self.config.sasl.is_none() {
            self.write_restore(now);
        }
    }

    /// Writes what a new connection owes the session before user requests: the credentials
    /// added so far, and the watches to restore.
    pub(super) fn write_restore(&mut self, now: Instant) {
        for body in self.auths.clone() {
            let replay = PendingAuth {
                id: None,
                body,
                replay: false,
                sent: now,
            };
            self.send_auth(replay);
        }
        for batch in self.watches.set_watches_batches(self.last_zxid) {
            let xid = self.xids.next();
            let (op, body) = match batch {
                SetWatchesBatch::V1(w) => (OpCode::SetWatches, w.to_bytes()),
                SetWatchesBatch::V2(w) => (OpCode::SetWatches2, w.to_bytes()),
            };
            self.send(now, xid, op, &body, Target::SetWatches);
        }
    }

    pub(super) fn write_connect_request(&mut self) {
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            timeout: i32::try_from(self.config.session_timeout.as_millis()).unwrap_or(i32::MAX),
            // A session made by a read-only server is local to it: a read/write server would
            // refuse it as expired. Until a read/write server has served us, ask for a new
            // session, as the Java client does (`seenRwServerBefore`).
            session_id: if self.seen_rw { self.session_id } else { 0 },
            passwd: if self.seen_rw {
                self.passwd.clone()
            } else {
                Bytes::from_static(&NEW_SESSION_PASSWD)
            },
            read_only: self.config.read_only,
        };
        encode_frame(&mut self.transmit, |buf| request.encode(buf));
    }

    pub(super) fn handle_connect_response(&mut self, now: Instant, response: ConnectResponse) {
        if response.is_expired() {
            self.expire();
            return;
        }
        // We asked for a new session (id 0), or were given another one.
        let created =
            !self.seen_rw || self.session_id == 0 || self.session_id != response.session_id;
        self.session_id = response.session_id;
        self.passwd = response.passwd;
        self.set_negotiated(Some(Duration::from_millis(u64::from(
            response.timeout.unsigned_abs(),
        ))));
        let read_only = response.read_only == Some(true);
        self.seen_rw |= !read_only;
        // Any server's handshake paces the pings; only a read/write one's touches the lease.
        let sent = self.timers.on_handshake();
        if !read_only {
            let timeout = self.periods.timeout;
            self.lease.touched(sent, now, timeout);
            if created {
                // A new session is made by the leader, and a quorum agrees to it, after our
                // ConnectRequest was sent (docs/lease.md, "A new session").
                self.lease.vouched_directly(sent, timeout);
            }
        }
        match self.config.sasl.clone() {
            Some(mechanism) => self.start_sasl(now, &*mechanism, read_only),
            None => self.open(now, read_only),
        }
    }

    /// The connection is ready for user requests.
    pub(super) fn open(&mut self, now: Instant, read_only: bool) {
        self.conn = Conn::Open;
        self.set_state(if read_only {
            SessionState::ConnectedReadOnly
        } else {
            SessionState::Connected
        });
        self.flush(now);
    }

    pub(super) fn start_sasl(
        &mut self,
        now: Instant,
        mechanism: &dyn SaslMechanism,
        read_only: bool,
    ) {
        let mut exchange = mechanism.start(&self.server_host);
        match exchange.initial_response() {
            Ok(token) => {
                self.conn = Conn::Authenticating { read_only };
                self.sasl = Some(exchange);
                self.write_sasl(now, token);
            }
            Err(reason) => {
                tracing::warn!(mechanism = mechanism.name(), %reason, "SASL cannot start");
                self.sasl_failure = Some(reason);
                self.end(SessionState::AuthFailed, Error::AuthFailed);
            }
        }
    }

    pub(super) fn write_sasl(&mut self, now: Instant, token: Vec<u8>) {
        let xid = self.xids.next();
        let body = SaslToken {
            token: Some(token.into()),
        }
        .to_bytes();
        self.send(now, xid, OpCode::Sasl, &body, Target::Sasl);
    }

    /// The server's answer to a SASL step: refusal is terminal (retrying the same
    /// credentials cannot succeed), success opens the connection.
    pub(super) fn handle_sasl_reply(&mut self, now: Instant, header: ReplyHeader, body: &Bytes) {
        let Conn::Authenticating { read_only } = self.conn else {
            return;
        };
        if header.err != ErrorCode::Ok {
            tracing::warn!(
                code = header.err.as_i32(),
                "the server refused SASL authentication"
            );
            return self.end(SessionState::AuthFailed, Error::AuthFailed);
        }
        let token = SaslToken::decode_exact(body)
            .ok()
            .and_then(|t| t.token)
            .unwrap_or_default();
        let Some(exchange) = self.sasl.as_mut() else {
            return;
        };
        match exchange.step(&token) {
            Ok(Some(next)) => self.write_sasl(now, next),
            Ok(None) => {
                self.sasl = None;
                self.write_restore(now);
                self.open(now, read_only);
            }
            Err(reason) => {
                tracing::warn!(%reason, "SASL authentication failed on the client's side");
                self.sasl_failure = Some(reason);
                self.end(SessionState::AuthFailed, Error::AuthFailed);
            }
        }
    }
}
