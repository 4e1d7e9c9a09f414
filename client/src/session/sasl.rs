//! The SASL phase of a connection: the interface the session drives a mechanism through.
//!
//! After the ConnectResponse and before anything else (auth replays, SetWatches, queued
//! requests, even pings), the session runs the exchange with `sasl` requests (op 102), one
//! token each way per step, as the Java client does; a server that requires SASL answers any
//! other request with an error and closes the connection. The exchange runs again on every
//! connection. See `docs/security.md`.

use std::fmt;

/// A SASL mechanism: starts one exchange per connection.
pub trait SaslMechanism: fmt::Debug + Send + Sync {
    /// The mechanism's name, for logs (`DIGEST-MD5`, `GSSAPI`).
    fn name(&self) -> &'static str;

    /// A fresh exchange for a new connection to `server_host` (the host name or address the
    /// connection was opened to, as the connect string names it: Kerberos names the server's
    /// principal after it).
    fn start(&self, server_host: &str) -> Box<dyn SaslExchange>;
}

/// One SASL exchange, from the client's side.
pub trait SaslExchange: Send {
    /// The first token to send (empty when the mechanism has no initial response: the server
    /// then answers with its challenge).
    ///
    /// # Errors
    /// A reason the exchange cannot start (no credentials, say); the session then ends with
    /// `AuthFailed`.
    fn initial_response(&mut self) -> Result<Vec<u8>, String>;

    /// Takes the server's token: `Some` token to send next, or `None` once the exchange is
    /// complete on the client's side (the server has proved itself, where the mechanism
    /// can tell).
    ///
    /// # Errors
    /// The server's token is malformed or fails its proof; the session then ends with
    /// `AuthFailed`.
    fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, String>;
}
