//! Authentication: `AuthPacket` and `whoAmI`.

use bytes::{BufMut, Bytes};

use crate::jute::{decode_lossy_string, encode_str, record, skip_lossy_string, str_encoded_len};
use crate::jute::{Decode, DecodeError, Encode, Reader};

record! {
    /// `auth` (100, xid -4): `class AuthPacket { int type; ustring scheme; buffer auth; }`
    pub struct AuthPacket as "AuthPacket" {
        /// Always 0.
        pub auth_type: i32,
        /// The scheme, e.g. `digest`.
        pub scheme: String,
        /// The credential, e.g. `user:password` for digest.
        pub auth: Option<Bytes>,
    }
}

/// One identity of the session, as reported by `whoAmI`.
///
/// `class ClientInfo { ustring authScheme; ustring user; }`, decoded leniently like [`Id`]
/// (crate::proto::Id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientInfo {
    /// The scheme, e.g. `ip` or `digest`.
    pub auth_scheme: String,
    /// The identity within the scheme.
    pub user: String,
}

impl Encode for ClientInfo {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_str(&self.auth_scheme, buf);
        encode_str(&self.user, buf);
    }

    fn encoded_len(&self) -> usize {
        str_encoded_len(&self.auth_scheme) + str_encoded_len(&self.user)
    }
}

impl Decode for ClientInfo {
    const NAME: &'static str = "ClientInfo";
    const MIN_LEN: usize = 8;

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self { auth_scheme: decode_lossy_string(r)?, user: decode_lossy_string(r)? })
    }

    fn skip(r: &mut Reader<'_>) -> Result<(), DecodeError> {
        skip_lossy_string(r)?;
        skip_lossy_string(r)
    }
}

record! {
    /// Reply to `whoAmI` (107, 3.7+): `class WhoAmIResponse { vector<ClientInfo> clientInfo; }`
    pub struct WhoAmIResponse as "WhoAmIResponse" {
        /// The session's identities.
        pub client_info: Vec<ClientInfo>,
    }
}
