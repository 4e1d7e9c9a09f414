//! The DIGEST-MD5 mechanism: a user and password, as the server's JAAS `DigestLoginModule`
//! holds them.

use std::fmt;

use crate::session::{SaslExchange, SaslMechanism};

use super::rfc2831::{DigestMd5, Password};

/// DIGEST-MD5 with a user name and password, as the server's JAAS `DigestLoginModule` knows
/// them. ZooKeeper's server names itself `zk-sasl-md5` to this mechanism, so the digest URI
/// is `zookeeper/zk-sasl-md5` whatever host is connected to.
///
/// The password is held once, shared with every exchange, and zeroed when the last of them
/// drops it; the caller's own copy is the caller's to clear.
pub(crate) struct Digest {
    user: String,
    password: Password,
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Digest")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl Digest {
    /// `password` is text when it is UTF-8, hashed by the charset rule the Java server
    /// follows (ISO 8859-1 whenever it can hold the text; see `docs/security.md`, "SASL");
    /// other bytes are hashed as given.
    pub(crate) fn new(user: impl Into<String>, password: impl AsRef<[u8]>) -> Self {
        Self {
            user: user.into(),
            password: Password::new(password.as_ref()),
        }
    }
}

impl SaslMechanism for Digest {
    fn name(&self) -> &'static str {
        "DIGEST-MD5"
    }

    fn start(&self, _server_host: &str) -> Box<dyn SaslExchange> {
        let exchange = DigestMd5::new(
            &self.user,
            self.password.clone(),
            "zookeeper",
            "zk-sasl-md5",
            client_nonce(),
        );
        Box::new(DigestExchange(exchange))
    }
}

struct DigestExchange(DigestMd5);

impl SaslExchange for DigestExchange {
    fn initial_response(&mut self) -> Result<Vec<u8>, String> {
        Ok(self.0.initial_response())
    }

    fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.0.step(server_token).map_err(|e| e.to_string())
    }
}

/// 16 random bytes, hex: the client's nonce, fresh for every exchange (RFC 2831 asks for at
/// least 64 bits of entropy).
fn client_nonce() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::getrandom(&mut bytes).is_err() {
        // No OS randomness: fall back on the clock, which still differs between exchanges;
        // the server's own nonce is what stops a replay.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes.copy_from_slice(&nanos.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
