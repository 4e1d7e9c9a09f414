//! zkwire: an Apache ZooKeeper client written down to the wire.
//!
//! Layers, bottom up:
//! - [`jute`]: the hand-written, hardened codec; [`proto`]: every record of the client
//!   protocol, checked byte for byte against ZooKeeper's own serializer;
//! - [`session`]: the sans-IO session state machine (no sockets, no clock);
//! - [`driver`]: the tokio task that owns a connection and a session;
//! - [`Client`]: the async API.
//!
//! ```no_run
//! # async fn run() -> Result<(), zkwire::Error> {
//! use zkwire::{Client, CreateMode, CreateOptions};
//! let client = Client::connect("127.0.0.1:2181/app").await?;
//! client.create("/config", b"v1", &CreateOptions::new(CreateMode::Persistent)).await?;
//! let (data, stat) = client.get_data("/config").await?;
//! assert_eq!(&data[..], b"v1");
//! # let _ = stat;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod client;
pub mod connect_string;
pub mod driver;
pub mod error;
#[cfg(any(fuzzing, feature = "fuzzing"))]
pub mod fuzzing;
pub mod jute;
pub mod path;
pub mod proto;
pub mod session;

pub use client::{
    Client, ClientBuilder, ClientStats, CreateOptions, OneshotWatcher, Op, OpResult,
    PersistentWatcher, ReadOp, ReadResult, StateStream, StatsHandle, WatchedEvent,
};
pub use error::Error;
pub use proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, EventType, Id, KeeperState, Perms, Stat, WatcherType,
};
pub use session::SessionState;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
