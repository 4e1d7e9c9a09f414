//! zkwire: an Apache ZooKeeper client written down to the wire.
//!
//! Today the crate provides the protocol layer: a hand-written, hardened [`jute`] codec and
//! every record of the client protocol in [`proto`], checked byte for byte against ZooKeeper's
//! own serializer. The session and the async client build on it.
#![forbid(unsafe_code)]

pub mod jute;
pub mod proto;
pub mod connect_string;
pub mod error;
pub mod path;
pub mod session;

pub use error::Error;
