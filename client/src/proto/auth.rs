//! Authentication: `AuthPacket`, SASL tokens and `whoAmI`.

use std::fmt;

use bytes::Bytes;

use super::sample::samples;
use crate::jute::record;

record! {
    /// `auth` (100, xid -4): `class AuthPacket { int type; ustring scheme; buffer auth; }`
    ///
    /// `Debug` redacts the credential.
    #[derive(Clone, PartialEq, Eq)]
    pub struct AuthPacket as "AuthPacket", derives given {
        /// Always 0.
        pub auth_type: i32,
        /// The scheme, e.g. `digest`.
        pub scheme: String,
        /// The credential, e.g. `user:password` for digest.
        pub auth: Option<Bytes>,
    }
}

impl AuthPacket {
    /// A packet adding the credential `auth` in `scheme` (type 0, the only one servers use).
    pub fn new(scheme: impl Into<String>, auth: impl Into<Bytes>) -> Self {
        Self {
            auth_type: 0,
            scheme: scheme.into(),
            auth: Some(auth.into()),
        }
    }
}

impl fmt::Debug for AuthPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthPacket")
            .field("auth_type", &self.auth_type)
            .field("scheme", &self.scheme)
            .field("auth", &self.auth.as_ref().map(|_| REDACTED))
            .finish()
    }
}

/// What `Debug` shows instead of a secret.
pub(crate) const REDACTED: &str = "<redacted>";

record! {
    /// One identity of the session, as reported by `whoAmI`.
    ///
    /// `class ClientInfo { ustring authScheme; ustring user; }`, decoded leniently like
    /// [`Id`](crate::Id).
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// for id in client.who_am_i().await? {
    ///     println!("authenticated as {}:{}", id.auth_scheme, id.user);
    /// }
    /// # Ok(()) }
    /// ```
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct ClientInfo as "ClientInfo", lenient strings {
        /// The scheme, e.g. `ip` or `digest`.
        pub auth_scheme: String,
        /// The identity within the scheme.
        pub user: String,
    }
}

record! {
    /// Reply to `whoAmI` (107, 3.7+): `class WhoAmIResponse { vector<ClientInfo> clientInfo; }`
    pub struct WhoAmIResponse as "WhoAmIResponse" {
        /// The session's identities.
        pub client_info: Vec<ClientInfo>,
    }
}

record! {
    /// `sasl` (102), both ways: the client's `GetSASLRequest { buffer token; }` and the server's
    /// `SetSASLResponse { buffer token; }` have this one layout. A null token decodes as `None`.
    ///
    /// `Debug` redacts the token (it may carry a password digest or a Kerberos ticket).
    #[derive(Clone, PartialEq, Eq)]
    pub struct SaslToken as "SaslToken", derives given {
        /// The mechanism's token.
        pub token: Option<Bytes>,
    }
}

impl fmt::Debug for SaslToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslToken")
            .field("token", &self.token.as_ref().map(|t| (t.len(), REDACTED)))
            .finish()
    }
}

samples! {
    AuthPacket: true, |_path| Self::new("digest", Bytes::from_static(b"user:secret"));
    WhoAmIResponse: false, |_path| Self {
        client_info: vec![ClientInfo {
            auth_scheme: "ip".to_owned(),
            user: "127.0.0.1".to_owned(),
        }],
    };
    SaslToken: true, |_path| Self {
        token: Some(Bytes::from_static(b"token")),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_credentials() {
        let packet = AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Some(Bytes::from_static(b"alice:hunter2")),
        };
        let shown = format!("{packet:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("digest") && shown.contains(REDACTED));
        let connect = crate::proto::ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: 1,
            session_id: 1,
            passwd: Bytes::from_static(b"SECRETSECRET1234"),
            read_only: false,
        };
        assert!(!format!("{connect:?}").contains("SECRET"));
        let builder = crate::Client::builder()
            .with_auth("digest", b"bob:hunter2")
            .with_session(7, Bytes::from_static(b"SECRETSECRET1234"));
        let shown = format!("{builder:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("SECRET"),
            "{shown}"
        );
    }
}
