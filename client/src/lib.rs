//! zkwire: an Apache ZooKeeper client written down to the wire.
//!
//! Today the crate provides the protocol layer: a hand-written, hardened [`jute`] codec and
//! every record of the client protocol in [`proto`], checked byte for byte against ZooKeeper's
//! own serializer. The session and the async client build on it.
#![forbid(unsafe_code)]

pub mod jute;
pub mod proto;
mod client;
pub mod connect_string;
pub mod driver;
pub mod error;
pub mod path;
pub mod session;

pub use client::{
    Client, ClientBuilder, CreateOptions, OneshotWatcher, Op, OpResult, PersistentWatcher,
    ReadOp, ReadResult, StateStream, WatchedEvent,
};
pub use error::Error;
pub use proto::{Acl, AddWatchMode, ClientInfo, CreateMode, EventType, Id, KeeperState, Perms, Stat, WatcherType};
pub use session::SessionState;
