//! The handshake: `ConnectRequest` and `ConnectResponse`.

use std::fmt;

use bytes::{Bytes, BytesMut};

use super::auth::REDACTED;

use crate::jute::{record, Decode, DecodeError, Encode, Reader};

/// The password a `ConnectRequest` carries for a new session (session id 0): 16 zero bytes.
pub const NEW_SESSION_PASSWD: [u8; 16] = [0; 16];

record! {
    /// The first frame a client sends on a connection (no `RequestHeader`).
    ///
    /// ```text
    /// class ConnectRequest {
    ///     int protocolVersion; long lastZxidSeen; int timeOut; long sessionId; buffer passwd;
    /// }
    /// ```
    /// followed by a `boolean readOnly` that servers 3.4–3.8 read outside the record (3.9 made
    /// it a field). Always 45 bytes with a 16-byte password. `Debug` redacts the password.
    #[derive(Clone, PartialEq, Eq)]
    pub struct ConnectRequest as "ConnectRequest", derives given {
        /// Always 0.
        pub protocol_version: i32,
        /// The highest zxid seen in a normal reply; a server behind it refuses the connection.
        pub last_zxid_seen: i64,
        /// The requested session timeout in ms.
        pub timeout: i32,
        /// 0 for a new session, else the session to reattach.
        pub session_id: i64,
        /// 16 zero bytes for a new session, else the session's password.
        pub passwd: Bytes,
        /// Whether a read-only server may serve this session.
        pub read_only: bool,
    }
}

/// The server's answer to a [`ConnectRequest`] (no `ReplyHeader`).
///
/// ```text
/// class ConnectResponse { int protocolVersion; int timeOut; long sessionId; buffer passwd; }
/// ```
/// followed by `boolean readOnly` only if the client sent its own read-only byte, so both 36
/// and 37 bytes are valid. `timeout <= 0` means the session is expired or invalid. `Debug`
/// redacts the password.
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    /// Always 0.
    pub protocol_version: i32,
    /// The negotiated session timeout in ms; `<= 0` means expired.
    pub timeout: i32,
    /// The session id; 0 when invalid.
    pub session_id: i64,
    /// The session password (16 bytes).
    pub passwd: Bytes,
    /// Whether the server is read-only; `None` when the byte was absent.
    pub read_only: Option<bool>,
}

impl ConnectResponse {
    /// Whether the server refused the session as expired or invalid.
    pub fn is_expired(&self) -> bool {
        self.timeout <= 0 || self.session_id == 0
    }
}

impl fmt::Debug for ConnectRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ConnectRequest");
        d.field("protocol_version", &self.protocol_version);
        d.field("last_zxid_seen", &self.last_zxid_seen);
        d.field("timeout", &self.timeout);
        session_fields(&mut d, self.session_id);
        d.field("read_only", &self.read_only).finish()
    }
}

impl fmt::Debug for ConnectResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ConnectResponse");
        d.field("protocol_version", &self.protocol_version);
        d.field("timeout", &self.timeout);
        session_fields(&mut d, self.session_id);
        d.field("read_only", &self.read_only).finish()
    }
}

/// A handshake record's session as `Debug` shows it: the id in hex, as logs print it, and
/// the password never.
fn session_fields(d: &mut fmt::DebugStruct<'_, '_>, session_id: i64) {
    d.field("session_id", &format_args!("{session_id:#x}"));
    d.field("passwd", &REDACTED);
}

impl Encode for ConnectResponse {
    fn encode(&self, buf: &mut BytesMut) {
        self.protocol_version.encode(buf);
        self.timeout.encode(buf);
        self.session_id.encode(buf);
        self.passwd.encode(buf);
        if let Some(read_only) = self.read_only {
            read_only.encode(buf);
        }
    }

    fn encoded_len(&self) -> usize {
        4 + 4 + 8 + self.passwd.encoded_len() + usize::from(self.read_only.is_some())
    }
}

impl Decode for ConnectResponse {
    const NAME: &'static str = "ConnectResponse";
    const MIN_LEN: usize = 20;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            protocol_version: r.read()?,
            timeout: r.read()?,
            session_id: r.read()?,
            passwd: r.read()?,
            // Java reads this byte in a try/catch; its absence is legal.
            read_only: if r.remaining() > 0 {
                Some(r.read()?)
            } else {
                None
            },
        })
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        r.skip::<i32>()?;
        r.skip::<i32>()?;
        r.skip::<i64>()?;
        r.skip::<Bytes>()?;
        if r.remaining() > 0 {
            r.skip::<bool>()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_session_in_hex_and_never_the_password() {
        let passwd = Bytes::from_static(b"0123456789abcdef");
        let request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 7,
            timeout: 4000,
            session_id: 0x1f,
            passwd: passwd.clone(),
            read_only: false,
        };
        let response = ConnectResponse {
            protocol_version: 0,
            timeout: 4000,
            session_id: 0x1f,
            passwd,
            read_only: Some(true),
        };
        for shown in [format!("{request:?}"), format!("{response:?}")] {
            assert!(shown.contains("session_id: 0x1f"), "{shown}");
            assert!(shown.contains(REDACTED) && !shown.contains("0123"), "{shown}");
            assert!(shown.contains("timeout: 4000") && shown.contains("read_only"), "{shown}");
        }
    }
}
