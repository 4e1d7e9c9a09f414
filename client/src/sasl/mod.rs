//! SASL mechanisms (features `sasl-digest`, `sasl-gssapi`), driven by the session's SASL phase.

#[cfg(feature = "sasl-digest")]
mod digest;
#[cfg(feature = "sasl-gssapi")]
mod gssapi;
#[cfg(feature = "sasl-digest")]
mod rfc2831;

#[cfg(feature = "sasl-digest")]
pub(crate) use self::digest::Digest;
#[cfg(feature = "sasl-gssapi")]
pub use self::gssapi::Kerberos;
